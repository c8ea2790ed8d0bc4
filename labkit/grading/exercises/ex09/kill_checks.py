"""Exercise 9's checks of consumers that crash or are killed: an entry that crashes
its consumer again and again is dead-lettered after the deliveries the exercise
allows, and a consumer killed right after each of its commands in turn, then started
again, applies each entry once and leaves nothing stuck."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from random import Random

from labkit.explore.boundaries import Boundary
from labkit.explore.killrun import read_log
from labkit.grading.checks import Namespace, expect
from labkit.grading.exercises.ex09.commands import (
    _monitored,
    _unacked,
)
from labkit.grading.exercises.ex09.consumers import (
    CHECKS,
    Stream,
    expect_once_each,
    stream,
)
from labkit.grading.exercises.killsweep import sweep_seed, with_checks_sample
from labkit.lang import _


@CHECKS.add(
    2,
    "read the delivery count (XPENDING) before running an entry; above max_deliveries "
    "XADD it to <prefix>:dead with its key and payload, and XACK it in one MULTI",
    120,
    severe=True,
)
def dead_letters_a_crashing_entry_after_max_deliveries(ns: Namespace) -> None:
    with stream(ns) as s:
        ids = {"poison": s.add("poison", cents=100, crash=True)}
        ids["order:1"] = s.add("order:1", cents=100)
        kills = 0
        # What the consumers send, read as sent: each entry's XACK among it.
        with _monitored(s.url, s.prefix) as sent:
            for _n in range(8):
                if s.finish(s.start("a", max_deliveries=3), _("the poison entry")) == 0:
                    break
                kills += 1
            unacked = _unacked(sent(), s.stream, ids)
        # Severe: no cap that stops it (every consumer killed) or one that stops it before
        # Redis delivered it max_deliveries times. One crash more than that is an
        # off-by-one of the count, not severe: exactly 3, and the reason, are
        # dead_letters_after_exactly_max_deliveries_with_a_reason's business (hidden).
        expect(3 <= kills <= 4,
               _("3 deliveries of the poison entry (3 crashes), then a dead letter; a fourth "
                 "crash at most"),
               _("{count} crashes").format(count=kills),
               _("read the count (XPENDING) before run_job: above max_deliveries, dead-letter "
                 "the entry instead of running it"))  # fmt: skip
        dead = s.dead()
        expect(len(dead) == 1 and dead[0].get("key") == "poison",
               _("one dead letter with key 'poison'"), dead)  # fmt: skip
        try:
            kept = json.loads(dead[0].get("payload", "null"))
        except ValueError:  # not JSON: a repr of the dict, say
            kept = None
        expect(kept == {"cents": 100, "crash": True}, "the dead letter keeps the payload",
               dead[0].get("payload"),
               _("copy the entry's payload field as it came: the JSON text"))  # fmt: skip
        expect_once_each(s, ["order:1"], _("the poison must not hold the other entries hostage"))
        expect(
            not unacked,
            _(
                "the dead-lettered 'poison' and the applied 'order:1' each acknowledged: an "
                "XACK of its entry ID in the MULTI that dead-letters or applies it"
            ),
            _("no XACK of the entry of {keys}").format(keys=unacked),
            _(
                "XACK <stream> workers <id> takes an entry out of the PEL; XDEL only takes it "
                "out of the stream, and it stays pending, with no fields, until an XAUTOCLAIM "
                "drops it: every consumer's XREADGROUP ... 0 and XPENDING keep meeting it"
            ),
        )
    _a_failed_run_comes_back_from_redis(ns)
    probe = _applied_or_dead(ns, 0)
    for k in range(1, min(len(probe), APPLIED_OR_DEAD_KILLS) + 1):
        _applied_or_dead(ns, k)


#: Seconds each run of the entry in _a_failed_run_comes_back_from_redis takes: while it
#: runs a second and a third time, the PEL shows its delivery count for that long.
RETRY_WORK_S = 0.5


def _a_failed_run_comes_back_from_redis(ns: Namespace) -> None:
    """An entry that fails twice (max_deliveries 3): its second and third runs must be
    deliveries Redis counts (XPENDING shows 2, then 3, for RETRY_WORK_S each), not runs
    the consumer repeats in a loop of its own with a count it makes up."""
    with stream(ns) as s:
        entry = s.add("retried", cents=100, flaky=2, work_s=RETRY_WORK_S)
        proc = s.start("a", max_deliveries=3)
        counts = s.deliveries_while(proc, entry)
        s.finish(proc, _("an entry that fails twice, then succeeds"))
        expect(
            max(counts, default=0) >= 2,
            _(
                "'retried', which fails on its first two runs (max_deliveries 3), delivered "
                "again by Redis before each new run: XPENDING shows it delivered 2 times, "
                "then 3"
            ),
            _("the most XPENDING ever showed: {counts}").format(
                counts=max(counts, default=_("nothing pending"))
            ),
            _(
                "when run_job raises, leave the entry pending and go on to the next round: it "
                "comes back (XREADGROUP ... 0) with one more delivery. A loop of your own that "
                "calls run_job again hides the retries from Redis: XPENDING no longer tells "
                "how often the entry ran, and a crash in the middle starts your count again"
            ),
        )
        expect(s.dead() == [], _("no dead letter: 'retried' succeeds on its third delivery"),
               _("dead letters {dead}").format(dead=[d.get("key") for d in s.dead()]))  # fmt: skip
        expect_once_each(s, ["retried"], _("leave a failed entry pending; it comes back"))


#: Kills at most in _applied_or_dead (the reference sends 2 commands that write there).
APPLIED_OR_DEAD_KILLS = 6


def _applied_or_dead(ns: Namespace, kill_after: int) -> list[Boundary]:
    """One healthy entry, max_deliveries 1, a consumer killed right after its command
    ``kill_after`` (0: a probe, never killed) and restarted: the entry ends either applied
    (not dead-lettered) or dead-lettered (not applied), never both. A kill between the
    effect and the entry's XACK leaves it pending: its restart, one delivery over the cap,
    dead-letters an entry already applied. The boundaries of the run."""
    log = ns.workdir / f".killrun-{uuid.uuid4().hex[:8]}.log"
    with stream(ns) as s:
        s.add("order:1", cents=100)
        runner = ("-m", "labkit.explore.killrun", str(log), str(kill_after))
        s.finish(s.start("a", max_deliveries=1, idle_ms=600_000, runner=runner), _("a killed run"))
        found, killed = read_log(log)
        log.unlink(missing_ok=True)
        if kill_after == 0:
            return found
        s.finish(s.start("a", max_deliveries=1, idle_ms=600_000), _("the consumer's restart"))
        effects, dead = s.effects(), [d.get("key") for d in s.dead()]
        left = len(s.pending())
        what = [b.words() for b in found if b.index == killed] or [_("no kill: a clean run")]
        expect(
            left == 0 and (effects, dead) in (({"order:1": 1}, []), ({}, ["order:1"])),
            _(
                "'order:1' (max_deliveries 1) either applied once or, if the kill came before "
                "it was applied, dead-lettered once, never both, and nothing pending, after a "
                "kill -9 right after {boundary} and a restart"
            ).format(boundary=what[0]),
            _("effects {effects}, dead letters {dead_letters}, {pending} pending").format(
                effects=effects, dead_letters=dead, pending=left
            ),
            _(
                "send the entry's XACK in the MULTI that writes its done record and its effect: "
                "killed between the two, the entry stays pending though applied, and its next "
                "delivery (one over max_deliveries) dead-letters it"
            ),
        )
    return found


#: At most this many kills per sweep (the reference's scene has 10 boundaries: all are
#: tried, and so are those of a consumer that sends a few commands more).
KILLS = 14


#: Each life of the kill sweep: two entries that apply, a second copy of the first (a
#: producer's retry: only acknowledged), one that fails until dead-lettered.
SWEPT_KEYS = ["order:1", "order:2"]


def _sweep_scene(s: Stream) -> None:
    for key in SWEPT_KEYS:
        s.add(key, cents=100)
    # A kill between the effect and its done record lets this copy apply again.
    s.add(SWEPT_KEYS[0], cents=100)
    s.add("flaky", cents=100, flaky=99)  # fails on every delivery: dead-lettered after 2


def _life(ns: Namespace, kill_after: int, tries: int = 2) -> list[Boundary]:
    """One consumer run killed right after boundary ``kill_after`` (0: a clean probe).

    A run that ends before sending that many commands is run once more: a consumer's
    polls (one XREADGROUP more or less) follow the machine's timing, and on a loaded
    one a run can send a command fewer than the probe did. Only a second miss fails."""
    log = ns.workdir / f".killrun-{uuid.uuid4().hex[:8]}.log"
    with stream(ns) as s:
        _sweep_scene(s)
        runner = ("-m", "labkit.explore.killrun", str(log), str(kill_after))
        s.finish(s.start("a", max_deliveries=2, idle_ms=600_000, runner=runner), _("a killed run"))
        found, killed = read_log(log)
        log.unlink(missing_ok=True)
        if kill_after == 0:
            expect_once_each(s, SWEPT_KEYS, _("apply each entry once, then XACK it"))
            return found
        if killed != kill_after and len(found) < kill_after and tries > 1:
            return _life(ns, kill_after, tries - 1)  # in a stream of its own
        expect(
            killed == kill_after,
            _("the kill right after command {command_number} to fire").format(
                command_number=kill_after
            ),
            _("{count} commands logged").format(count=len(found)),
            "the same scene must send the same commands each time",
        )
        s.finish(s.start("a", max_deliveries=2, idle_ms=600_000), _("the consumer's restart"))
        what = [b.words() for b in found if b.index == kill_after][0]
        replay = _("kill {command_number} of the probe's commands, sweep seed {seed}").format(
            command_number=kill_after, seed=sweep_seed()
        )
        effects, dead = s.effects(), [d.get("key") for d in s.dead()]
        left = len(s.pending())
        expect(
            effects == {k: 1 for k in SWEPT_KEYS} and dead == ["flaky"] and left == 0,
            _(
                "each of {keys} applied once, 'flaky' dead-lettered once and nothing "
                "pending, after a kill -9 right after {boundary} and a restart"
            ).format(keys=SWEPT_KEYS, boundary=what),
            _(
                "effects {effects}, dead letters {dead_letters}, {pending} pending ({replay})"
            ).format(effects=effects, dead_letters=dead, pending=left, replay=replay),
            "send what must happen together in one MULTI/EXEC (the effect with its done "
            "record and the XACK; the dead letter with its XACK), so a restart finds it "
            "all done or not started",
        )
    return found


@CHECKS.add(
    3,
    "killed with SIGKILL right after any command it sends and restarted, the consumer "
    "still applies each entry once and dead-letters once: an effect, its done record "
    "and its XACK go in one MULTI/EXEC, and so do a dead letter and its XACK",
    120,
    severe=True,
)
def survives_a_kill_after_every_command(ns: Namespace) -> None:
    probe = _life(ns, 0)
    for k in with_checks_sample(_firsts_then_some(probe), len(probe), KILLS, sweep_seed()):
        _life(ns, k)


def _firsts_then_some(found: list[Boundary]) -> Callable[[int, int, Random], list[int]]:
    """A sample (for ``with_checks_sample``) that kills after the first time the consumer
    sends each of its commands (the same command from the same line, the same commands
    in one MULTI), then after a seeded sample of the others and after the last. The
    first key is new: a gap between claiming its record and applying it (a GETSET, then
    the MULTI) is there, not at the copy whose key is done; a sample of all the commands
    of a chattier consumer may miss it."""
    firsts = sorted({b.what + b.where: b.index for b in reversed(found)}.values())

    def sample(count: int, limit: int, rng: Random) -> list[int]:
        if count <= limit:
            return list(range(1, count + 1))
        chosen = {count, *(firsts if len(firsts) < limit else rng.sample(firsts, limit - 1))}
        rest = [k for k in range(1, count + 1) if k not in chosen]
        return sorted(chosen | set(rng.sample(rest, max(0, limit - len(chosen)))))

    return sample
