"""Hidden checks for exercise 9: a key delivered twice (one after the other, and to two
consumers at once), a dependency down for a while."""

from __future__ import annotations

import shutil
import uuid

from labkit.explore.rendezvous import arrived
from labkit.grading.checks import Checks, Namespace, expect
from labkit.grading.exercises.ex09.checks import expect_once_each, stream
from labkit.lang import _

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
        s.finish(s.start("a"), _("the first copy"))
        s.add("order:7", cents=700)
        s.add("order:8", cents=800)
        s.finish(s.start("b"), _("a second copy of the same key"))
        expect_once_each(s, ["order:7", "order:8"], _("check the done record atomically"))


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
        s.finish(s.start("a", max_deliveries=3), _("an entry that fails twice"))
        expect(s.dead() == [], "no dead letters (it succeeded on delivery 3)", s.dead())
        expect_once_each(s, ["flaky"], _("leave a failed entry pending; it comes back"))


@CHECKS.add(
    2,
    "two consumers holding copies of one key at once: both may read the done record "
    "before either writes it, so read it under WATCH (or in a Lua script) and write it, "
    "the effect and the XACK in the MULTI that WATCH guards",
    90,
    severe=True,
)
def two_copies_of_a_key_at_once_apply_once(ns: Namespace) -> None:
    tag = uuid.uuid4().hex[:8]
    meet, log = ns.workdir / f".labkit-meet-{tag}", ns.workdir / f".killrun-{tag}.log"
    try:
        with stream(ns) as s:
            s.add("order:5", cents=500)
            s.add("order:5", cents=500)  # a producer's retry: the same key, a second entry
            # Each consumer stops right after its first read of a done record until the
            # other has read one too: both read before either writes.
            runner = ("-m", "labkit.explore.killrun", str(log), "0",
                      "--meet", str(meet), f"{s.prefix}:done:", "2")  # fmt: skip
            a = s.start("a", idle_ms=600_000, runner=runner)
            b = s.start("b", idle_ms=600_000, runner=runner)
            s.finish(a, _("the first of two consumers"))
            s.finish(b, _("the second of two consumers"))
            both = arrived(meet) if meet.exists() else 0
            fix = _(
                "read <prefix>:done:<key> under WATCH (or in a Lua script), then write "
                "it, the effect and the XACK in the MULTI the WATCH guards"
            )
            expect_once_each(
                s,
                ["order:5"],
                _("both consumers read the done record before either wrote it: {fix}").format(
                    fix=fix
                )
                if both == 2
                else fix,
            )
    finally:
        shutil.rmtree(meet, ignore_errors=True)
        log.unlink(missing_ok=True)
