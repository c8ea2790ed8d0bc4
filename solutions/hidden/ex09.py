"""Hidden checks for exercise 9: a key delivered twice (one after the other, and to two
consumers at once), a dependency down for a while, the delivery count of the entry in
hand while another consumer holds an older one, and what ``consume`` returns."""

from __future__ import annotations

import shutil
import uuid

from labkit.clock import SystemClock
from labkit.explore.rendezvous import arrived
from labkit.grading.checks import Checks, Namespace, expect
from labkit.grading.exercises.ex09.checks import RUN_S, expect_once_each, stream
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


@CHECKS.add(
    1,
    "return how many entries THIS call applied: an entry whose key was done already is "
    "only acknowledged, and does not count",
    60,
)
def returns_how_many_it_applied(ns: Namespace) -> None:
    with stream(ns) as s:
        for key in ("order:1", "order:2", "order:1"):  # the producer sent order:1 twice
            s.add(key, cents=100)
        s.finish(s.start("a"), _("three entries, two keys"))
        expect_once_each(s, ["order:1", "order:2"], _("check the done record atomically"))
        last = s.printed.strip().splitlines()[-1:]
        expect(
            last == ["2"],
            "consume to return 2 (printed by the file's __main__): two keys applied, one "
            "copy only acknowledged",
            _("it printed {printed}").format(printed=last[0] if last else _("nothing")),
        )


@CHECKS.add(
    2,
    "read the delivery count of the entry you are about to run (XPENDING <stream> "
    "workers <id> <id> 1), not of the first pending entry: while another consumer holds "
    "an older entry, the poison entry must still stop after max_deliveries",
    90,
    severe=True,
)
def the_delivery_count_is_the_entrys_own(ns: Namespace) -> None:
    with stream(ns) as s:
        s.add("held", cents=100, work_s=60, slow_deliveries=1)  # older, held by 'b'
        s.add("poison", cents=100, crash=True)
        holder = s.start("b", idle_ms=600_000)
        s.wait_held(holder, "b", "held")
        crashes, clock = 0, SystemClock()
        while crashes <= 3:
            proc = s.start("a", max_deliveries=3, idle_ms=600_000)
            deadline = clock.now() + RUN_S
            while proc.poll() is None and not s.dead() and clock.now() < deadline:
                clock.sleep(0.02)
            if s.dead() or proc.poll() is None:
                break  # 'a' dead-lettered the poison and waits for 'held'
            crashes += 1
        expect(
            crashes == 3 and [d.get("key") for d in s.dead()] == ["poison"],
            "the poison entry run 3 times (3 crashes), then dead-lettered, while 'b' holds "
            "the older entry 'held'",
            _("{count} crashes; dead letters {dead}").format(
                count=crashes, dead=[d.get("key") for d in s.dead()]
            ),
        )
        ns.kill(holder)  # 'b' restarts and finishes 'held' quickly (its second delivery)
        holder.communicate()
        s.finish(s.start("b", idle_ms=600_000), _("a restart of 'b'"))
        s.finish(proc, _("'a' once the poison was dead-lettered"))
        expect_once_each(s, ["held"], _("apply the healthy entry once"))
