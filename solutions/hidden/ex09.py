"""Hidden checks for exercise 9: a key delivered twice, a dependency down for a while."""

from __future__ import annotations

from labkit.grading.exercises.ex09.checks import expect_once_each, stream
from labkit.grading.checks import Checks, Namespace, expect

CHECKS = Checks("ex09", hidden=True)


@CHECKS.add(
    2,
    "a producer may XADD the same key twice (at-least-once publishing): the record "
    "<prefix>:done:<key> must stop the second effect, and the entry is still XACKed",
    90,
    severe=True,
)
def a_second_delivery_of_a_done_key_is_not_applied(ns: Namespace) -> None:
    with stream(ns) as s:
        s.add("order:7", cents=700)
        s.finish(s.start("a"), "the first copy")
        s.add("order:7", cents=700)
        s.add("order:8", cents=800)
        s.finish(s.start("b"), "a second copy of the same key")
        expect_once_each(s, ["order:7", "order:8"], "check the done record atomically")


@CHECKS.add(
    2,
    "an entry that fails while a dependency is down stays pending and succeeds on a "
    "later delivery; only the delivery cap dead-letters",
    90,
    severe=True,
)
def a_flaky_entry_is_retried_not_dead_lettered(ns: Namespace) -> None:
    with stream(ns) as s:
        s.add("flaky", cents=100, flaky=2)
        s.finish(s.start("a", max_deliveries=3), "an entry that fails twice")
        expect(s.dead() == [], "no dead letters (it succeeded on delivery 3)", s.dead())
        expect_once_each(s, ["flaky"], "leave a failed entry pending; it comes back")
