"""Exercise 9's checks of how entries are delivered: each applied once, a consumer's
own pending entries recovered after a kill, a dead consumer's entries taken over,
a live consumer's entry left alone."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from labkit.clock import SystemClock
from labkit.grading.checks import Namespace, expect
from labkit.grading.exercises.ex09.commands import (
    _foreign_names,
    _monitored,
    calls_so_far,
)
from labkit.grading.exercises.ex09.consumers import (
    CHECKS,
    GROUP,
    RUN_S,
    Stream,
    expect_once_each,
    stream,
)
from labkit.grading.exercises.ex09.fastclock import FAST
from labkit.grading.exercises.ex09.heldjob import gate_in
from labkit.lang import _


@CHECKS.add(
    2,
    "apply each new entry once: RPUSH its key to <prefix>:effects and XACK it",
    60,
    severe=True,
)
def applies_each_entry_once(ns: Namespace) -> None:
    with stream(ns) as s:
        keys = [f"order:{n}" for n in range(5)]
        for key in keys:
            s.add(key, cents=100)
        s.finish(s.start("a"), _("five plain entries"))
        dead = s.dead()
        expect(
            not dead,
            _("no dead letters: the five entries are healthy, run_job returns for each"),
            _("{count} dead letters, the first one's reason: {reason}").format(
                count=len(dead), reason=repr(dead[0].get("reason")) if dead else ""
            ),
            _(
                "run_job raised on healthy entries and the error was kept from you: call "
                "run_job(json.loads(fields['payload']), deliveries) with the payload parsed "
                "and the delivery count as a number, and print what an except catches"
            ),
        )
        expect_once_each(s, keys, _("read new entries with XREADGROUP ... > and apply each"))


@CHECKS.add(
    3,
    "after a restart under the same name, read your own pending entries first "
    "(XREADGROUP ... 0): nobody else will take them while they look busy",
    90,
    severe=True,
)
def recovers_its_own_pending_after_a_kill(ns: Namespace) -> None:
    with stream(ns) as s:
        # Slow on its first delivery only: the kill lands mid-job, the restart is quick.
        s.add("slow", cents=100, work_s=3, slow_deliveries=1)
        s.add("order:1", cents=100)
        s.add("order:2", cents=100)
        # A huge idle threshold: only the restarted consumer itself can recover its entry.
        s.kill_when_holding(s.start("a", idle_ms=600_000), "a", "slow", mid_job_s=1.0)
        expect("slow" not in s.effects(), "no effect from the killed run (it died mid-job)",
               s.effects())  # fmt: skip
        s.finish(s.start("a", idle_ms=600_000), _("a restart of consumer 'a'"))
        applied = ["slow", "order:1", "order:2"]
        expect_once_each(s, applied, _("start each round with XREADGROUP ... 0"))
        order = s.r.lrange(f"{s.prefix}:effects", 0, -1)
        # Reversed is the same order pushed on the left (LPUSH): a detail, not starvation.
        expect(
            order in (applied, applied[::-1]),
            "'slow' (held before the restart) applied before 'order:1' (new)",
            _("applied in the order {order}").format(order=order),
            "read your own pending entries (XREADGROUP ... 0) before new ones (>): while "
            "new entries keep coming, an entry held before a crash would wait forever",
        )


#: The rescuer's name in takes_over_a_dead_consumers_entries: none a student would give
#: a fixed name of their own ('rescuer', 'recovery'), so a claim under one shows.
RESCUER = "rescuer-7f"


#: How long 'stale' has been idle when the rescuer (idle_ms 2000) starts: claimable at
#: its first look, unless the consumer raises idle_ms to a floor of its own.
STALE_MS = 2_300


@CHECKS.add(
    3,
    "take a dead consumer's entries once they are idle >= idle_ms (XAUTOCLAIM)",
    90,
    severe=True,
)
def takes_over_a_dead_consumers_entries(ns: Namespace) -> None:
    with stream(ns) as s:
        # Held by a consumer that died (its idle time is set below, XCLAIM ... IDLE): the
        # first consumer to look once it is idle long enough claims it before any new
        # entry, or under a steady flow of new entries it would wait for ever.
        stale = s.add("stale", cents=100)
        s.r.xreadgroup(GROUP, "long-gone", {s.stream: ">"}, count=1)
        slow = s.add("slow", cents=100, work_s=3, slow_deliveries=1)
        # A newer entry the rescuer applies while 'slow' is not idle long enough yet.
        s.add("order:1", cents=100)
        s.kill_when_holding(s.start("dead-one", idle_ms=600_000), "dead-one", "slow")
        # 'stale' idle just past the rescuer's idle_ms now: a floor of the consumer's own
        # (at least 5 s, say) leaves it for later, and new entries go first.
        s.r.xclaim(s.stream, GROUP, "long-gone", 0, [stale], idle=STALE_MS, justid=True)
        # 2 s: the rescuer's first look comes before the entry is idle that long, even on
        # a loaded machine, so one that returns when it sees nothing new is caught.
        # Its commands are read as sent: it must take what it takes under its own name
        # (one no student would pick for a fixed name of their own).
        with _monitored(s.url, s.prefix) as sent:
            s.finish(s.start(RESCUER, idle_ms=2_000), _("another consumer's takeover"))
            foreign = _foreign_names(sent(), s.stream, RESCUER)
        expect(
            not foreign,
            _(
                "every XREADGROUP, XCLAIM and XAUTOCLAIM of the rescuer under the name "
                "consume was given ({name})"
            ).format(name=repr(RESCUER)),
            _("it sent {commands}").format(commands="; ".join(foreign[:3])),
            _(
                "take a dead consumer's entries with XAUTOCLAIM under your own name, never "
                "under a fixed name or the dead one's (XREADGROUP <dead> 0): an entry stays "
                "the name's it was read or claimed under, so a consumer of that name (the "
                "dead one restarted, which reads its own pending first) runs it beside you, "
                "and your own restart never finds it"
            ),
        )
        held = [str(p["consumer"]) for p in s.pending()]
        expect(
            not held,
            _("the rescuer to return only once nothing is pending for anyone (XPENDING empty)"),
            _("it returned while {consumers} still held {count} entries").format(
                consumers=sorted(set(held)), count=len(held)
            ),
            _(
                "when you find nothing to run but XPENDING still lists entries (a dead "
                "consumer's, not idle for idle_ms yet), wait about 50 ms and look again: it "
                "becomes yours to XAUTOCLAIM"
            ),
        )
        gone = "slow" not in s.effects() and not s.r.xrange(s.stream, slow, slow)
        expect(
            not gone,
            _("'slow', held by the dead consumer, still in the stream for the rescuer to claim"),
            _("it was removed from the stream before anyone applied it"),
            _(
                "never remove an entry nobody has acknowledged: an XTRIM (MINID or MAXLEN) "
                "after your own XACK also removes older entries that another consumer still "
                "holds, and XAUTOCLAIM then drops them from the PEL unapplied"
            ),
        )
        expect_once_each(
            s, ["stale", "slow", "order:1"], _("XAUTOCLAIM entries idle at least idle_ms")
        )
        order = s.r.lrange(f"{s.prefix}:effects", 0, -1)
        # First, or last if pushed on the left (LPUSH): never between the two others.
        expect(
            "stale" in (order[0], order[-1]),
            _(
                "'stale' (idle {idle} ms, its consumer dead; the rescuer's idle_ms is 2000) "
                "applied before 'order:1' (new)"
            ).format(idle=STALE_MS),
            _("applied in the order {order}").format(order=order),
            _(
                "XAUTOCLAIM entries idle at least idle_ms (the argument, with no floor of "
                "your own) before you read new ones (XREADGROUP ... >): while new entries keep "
                "coming, a dead consumer's entry would wait for ever"
            ),
        )


#: How ``leaves_a_live_consumers_entry_alone`` runs its first consumer: the work on
#: 'slow' (a sleep of ``HELD_WORK_S``) lasts until the check opens a gate (a file).
HELD_JOB = ("-m", "labkit.grading.exercises.ex09.heldjob")
HELD_WORK_S = 2.0
#: How long 'slow' looks idle while 'a' works on it: well under idle_ms (600000), with
#: over a minute to spare on a loaded machine, and above any share of idle_ms up to 5/6.
LIVE_IDLE_MS = 500_000


#: How ``leaves_a_live_consumers_entry_alone`` runs its second consumer: with a clock
#: that runs fast while it sleeps (a give-up after a time of its own shows in seconds).
FAST_CLOCK = ("-m", "labkit.grading.exercises.ex09.fastclock")


@CHECKS.add(
    2,
    "a consumer still working on an entry keeps it: XAUTOCLAIM only entries idle at least "
    "idle_ms (the argument, not 0 or a constant of yours), or a live consumer's entry runs "
    "twice at once and its deliveries pile up; a consumer next to it returns only once "
    "nothing is pending, with no time limit of its own",
    90,
    severe=True,
)
def leaves_a_live_consumers_entry_alone(ns: Namespace) -> None:
    with stream(ns) as s, gate_in(ns.workdir) as gate:
        # Sent an hour ago (its ID says so) and only now read: its age is not its idle
        # time, which counts from its last delivery.
        sent = int(s.r.time()[0]) * 1000 - 3_600_000
        entry = s.add("slow", at=f"{sent}-0", cents=100, work_s=HELD_WORK_S)
        # Its work lasts until the check opens the gate (ex09/heldjob.py): once 'b' has
        # started and looked long enough, however long a loaded machine takes to start it.
        worker = s.start("a", idle_ms=600_000, runner=(*HELD_JOB, str(gate), str(HELD_WORK_S)))
        s.wait_held(worker, "a", "slow")
        # As if 'a' had been at it for LIVE_IDLE_MS (a long job): still 'a's, idle_ms being
        # 10 minutes. XCLAIM ... IDLE sets the idle time; JUSTID adds no delivery. A
        # threshold of the consumer's own (5 s, a minute) takes the entry from 'a', and so
        # does a share of idle_ms (half of it, three quarters).
        s.r.xclaim(s.stream, GROUP, "a", 0, [entry], idle=LIVE_IDLE_MS, justid=True)
        # One more entry, held by a consumer of the check's own (read just now: not idle),
        # XACKed by the check only once 'b' has waited: while it is pending, neither
        # consumer may return. In one MULTI, so no consumer reads it first.
        pipe = s.r.pipeline(transaction=True)
        pipe.xadd(s.stream, {"key": "elsewhere", "payload": json.dumps({"cents": 100})})
        pipe.xreadgroup(GROUP, ELSEWHERE, {s.stream: ">"}, count=1)
        kept = str(pipe.execute()[0])
        # 'b' starts while 'a' works on 'slow', its clock running FAST times faster
        # while it waits (labkit.grading.exercises.ex09.fastclock): one pause of 50 ms
        # is more than an hour by its clock, and it looks again hundreds of times a
        # second (a count of empty rounds runs out too); it must still be waiting.
        other = s.start("b", idle_ms=600_000, runner=FAST_CLOCK)
        try:
            owners, ended = _owners_while_kept(s, worker, other, entry, gate)
        finally:
            gate.touch()
        s.r.xack(s.stream, GROUP, kept)
        s.finish(worker, _("the consumer working on the slow entry"))
        s.finish(other, _("a second consumer next to it"), late_ok=True)
        expect(owners == ["a"],
               _("only 'a' to hold 'slow' while it worked on it (idle {idle} ms, idle_ms "
                 "600000 for both)").format(idle=LIVE_IDLE_MS),
               _("held by {owners}").format(owners=owners),
               "pass idle_ms to XAUTOCLAIM as its min-idle-time: the idle time counts "
               "from the entry's last delivery, not from the time in its ID")  # fmt: skip
        expect(s.dead() == [], "no dead letter (the entry was healthy)", s.dead())
        expect_once_each(s, ["slow"], _("apply it once"))
        expect(
            not ended,
            _(
                "'a' and 'b' to return only once nothing is pending for anyone (XPENDING "
                "empty), however long another consumer ({holder}) holds an entry"
            ).format(holder=repr(ELSEWHERE)),
            _(
                "{names} returned while {holder} still held an entry (the clock of 'b' ran "
                "{fast} times faster while it waited, and it looked again hundreds of times "
                "a second: it had waited long by that clock)"
            ).format(names=ended, holder=repr(ELSEWHERE), fast=FAST),
            _(
                "no time limit and no limit on empty rounds of your own while entries are "
                "pending: a job may run for minutes; wait about 50 ms and look again until "
                "XPENDING is empty"
            ),
        )


#: The consumer that holds 'elsewhere' in leaves_a_live_consumers_entry_alone: the check.
ELSEWHERE = "elsewhere-busy"


#: Seconds 'b' is a member of the group (it has looked) before the gate of 'slow' opens
#: and 'elsewhere' is XACKed: time for a round and its pause of about 50 ms on a loaded
#: machine.
WAITED_S = 0.5


#: XREADGROUPs Redis runs after 'b' starts before the gate of 'slow' opens and
#: 'elsewhere' is XACKed: some two hundred rounds of 'b' (its own pending, then new
#: entries), which its fast clock makes in well under a second on an idle machine; a
#: count of empty rounds of its own (give up after 100) runs out first. Waited for at
#: most ``LOOKS_S`` after 'b' joined: a consumer that pauses a second between looks is
#: slow, not wrong.
LOOKS = 400


LOOKS_S = 3.0


def _owners_while_kept(
    s: Stream,
    worker: subprocess.Popen[str],
    other: subprocess.Popen[str],
    entry_id: str,
    gate: Path,
) -> tuple[list[str], list[str]]:
    """While 'elsewhere' is pending: each consumer the PEL showed holding ``entry_id``,
    in order, and the consumers ('a', 'b') seen ended meanwhile. Once 'b' has been a
    member of the group for ``WAITED_S`` and Redis has run ``LOOKS`` XREADGROUPs since
    (or ``LOOKS_S`` have passed), it opens ``gate`` (the work on ``entry_id`` ends), and
    it ends once ``entry_id`` is no longer pending. No fixed time: 'a' holds the entry
    for as long as 'b' takes to start and look, on a machine however loaded."""
    owners: list[str] = []
    clock = SystemClock()
    deadline, since, reads = clock.now() + RUN_S, None, calls_so_far(s.r, "xreadgroup")
    while clock.now() < deadline:
        ended = [n for n, p in (("a", worker), ("b", other)) if p.poll() is not None]
        if ended:
            return owners, ended
        held = s.r.xpending_range(s.stream, GROUP, entry_id, entry_id, 1)
        if held and (not owners or owners[-1] != held[0]["consumer"]):
            owners.append(str(held[0]["consumer"]))
        # 'b' looked (a consumer of the group by then): by its name, or by one it made
        # up, which the check does not wait RUN_S for.
        if since is None and any(
            c["name"] not in ("a", ELSEWHERE) for c in s.r.xinfo_consumers(s.stream, GROUP)
        ):
            since = clock.now()
        if not gate.exists() and since is not None and clock.now() - since >= WAITED_S:
            now = calls_so_far(s.r, "xreadgroup")
            looked = reads is None or now is None or now - reads >= LOOKS
            if looked or clock.now() - since >= LOOKS_S:
                gate.touch()
        if not held and gate.exists():
            break
        clock.sleep(0.02)
    return owners, []
