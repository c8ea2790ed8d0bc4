"""Exercise 9: a Redis Streams consumer that recovers pending work and dead-letters poison.

The student's ``consume`` lives in ``stream_consumer.py`` (a ``%%writefile`` cell) in
their folder. Every check builds a stream under a prefix of its own on a real Redis
(``ns.redis_url()``: in ``check()`` the lab's, 127.0.0.1:6379 or ``LABKIT_REDIS_URL``;
under ``labkit grade`` one started for the check alone, on a unix socket in the
student's folder, so the student's code needs no network), runs the student's file in
processes started with ``ns.spawn`` (killed with SIGKILL where the check says, and with their whole
process group when the check ends), then judges only from what it reads in Redis
itself: the effects list, the PEL (``XPENDING``) and the dead-letter stream. The
prefix's keys are deleted at the end of every check.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from random import Random
from typing import Any

from labkit.clock import SystemClock
from labkit.explore.boundaries import Boundary
from labkit.explore.killrun import read_log
from labkit.grading.checks import Checks, Namespace, expect
from labkit.grading.exercises.ex09.commands import (
    _foreign_names,
    _monitored,
    _reads_so_far,
    _unacked,
)
from labkit.grading.exercises.ex09.fastclock import FAST
from labkit.grading.exercises.killsweep import hash_salt, sweep_seed, with_checks_sample
from labkit.grading.stub import stub_error
from labkit.lang import _

CHECKS = Checks("ex09", "a Redis Streams consumer", needs=("consume",), lanes=3)
FILE = "stream_consumer.py"
GROUP = "workers"
#: What a consumer imports before the student's file: under labkit grade each one is
#: forked from an interpreter that imported these once (``ns.spawn(warm=...)``); importing
#: redis-py alone costs a quarter of a second of CPU, and a notebook starts dozens.
WARM = ("redis", "labkit.explore.boundaries", "labkit.explore.rendezvous")
#: Seconds a consumer may take to drain a check's few entries on a loaded machine.
RUN_S = 30.0
#: How long past its ``idle_ms`` an entry another consumer holds may wait, unclaimed,
#: while the consumer ``finish`` waits on runs: longer than any job of the checks takes
#: (3 s) on a loaded machine. Past it, the consumer is taken as one that never claims,
#: and fails then instead of at ``RUN_S``.
UNCLAIMED_GRACE_S = 10.0
#: How often ``finish`` looks at the PEL while the consumer runs.
LOOK_S = 0.5


@dataclass
class Stream:
    """One check's stream: the Redis client, its key names, and how to run consumers."""

    ns: Namespace
    r: Any
    prefix: str
    #: Where the check's Redis is, for the consumers it starts (ns.redis_url()).
    url: str
    #: What the last consumer ``finish`` waited for printed (``consume``'s return value).
    printed: str = ""
    #: Consumers started so far (they take the two hash salts in turn).
    starts: int = 0
    #: pid -> (consumer name, idle_ms, when it started) of each consumer, for ``finish``.
    started: dict[int, tuple[str, int, float]] = field(default_factory=dict)

    @property
    def stream(self) -> str:
        return f"{self.prefix}:stream"

    def add(self, key: str, at: str = "*", **payload: Any) -> str:
        """XADD an entry for ``key``; ``at``: its ID (an old one: sent long ago)."""
        fields = {"key": key, "payload": json.dumps(payload)}
        return str(self.r.xadd(self.stream, fields, id=at))

    def expect_kind(self, name: str, kind: str, command: str) -> None:
        """Fail with what the key holds when ``<prefix>:<name>`` exists but is no ``kind``."""
        found = str(self.r.type(f"{self.prefix}:{name}"))
        expect(
            found in ("none", kind),
            _("{key} to be a {kind}").format(key=f"<prefix>:{name}", kind=kind),
            _("it is a {found}").format(found=found),
            _("write it with {command}, as the exercise says: the grader reads it back").format(
                command=command
            ),
        )

    def effects(self) -> dict[str, int]:
        self.expect_kind("effects", "list", "RPUSH")
        counts: dict[str, int] = {}
        for key in self.r.lrange(f"{self.prefix}:effects", 0, -1):
            counts[key] = counts.get(key, 0) + 1
        return counts

    def applied(self) -> dict[str, int]:
        """``effects`` for a check whose own property is not how effects are kept: a set's
        members count once each. The checks that read ``effects`` name that mistake, and
        a consumer that keeps its effects in a set still earns what it got right."""
        if str(self.r.type(f"{self.prefix}:effects")) == "set":
            return dict.fromkeys(self.r.smembers(f"{self.prefix}:effects"), 1)
        return self.effects()

    def pending(self) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = self.r.xpending_range(self.stream, GROUP, "-", "+", 100)
        return rows

    def dead(self) -> list[dict[str, str]]:
        self.expect_kind("dead", "stream", "XADD")
        return [fields for _id, fields in self.r.xrange(f"{self.prefix}:dead")]

    def start(
        self,
        consumer: str,
        max_deliveries: int = 3,
        idle_ms: int = 1000,
        runner: tuple[str, ...] = (),
    ) -> subprocess.Popen[str]:
        """Start the student's consumer; ``runner`` goes before the file (a killrun)."""
        config = {
            "url": self.url,
            "prefix": self.prefix,
            "consumer": consumer,
            "max_deliveries": max_deliveries,
            "idle_ms": idle_ms,
        }
        if not (self.ns.workdir / FILE).exists():
            expect(False, _("{file} in your folder").format(file=FILE), _("no such file"),
                   _("run the %%writefile {file} cell first").format(file=FILE))  # fmt: skip
        # Two str hash salts, taken in turn: a consumer and its restart, or two consumers
        # at once, hash apart, as two processes do (a record key built from hash() does
        # not survive a restart); two salts, so two warm interpreters serve them all.
        salt = str(hash_salt(self.starts % 2))
        self.starts += 1
        proc = self.ns.spawn(
            [sys.executable, *runner, FILE, json.dumps(config)],
            warm=WARM,
            env={**os.environ, "PYTHONHASHSEED": salt},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.started[proc.pid] = (consumer, idle_ms, SystemClock().now())
        return proc

    def racing(self, log: Path, meet: Path, parties: int = 2) -> tuple[str, ...]:
        """The runner (``start``'s ``runner``) of consumers made to race on one key: each
        stops right after every read of a key other than the stream, the effects list and
        the dead letters, and right before every write, until all ``parties`` got as far,
        up to its first transaction or script. The look that decides, however late and
        however made (EXISTS, GET, HGET, HEXISTS ...), is made by all before any writes."""
        skip = ",".join([self.stream, f"{self.prefix}:effects", f"{self.prefix}:dead"])
        return ("-m", "labkit.explore.killrun", str(log), "0",
                "--meet", str(meet), str(parties), "--skip", skip)  # fmt: skip

    def finish(self, proc: subprocess.Popen[str], what: str, late_ok: bool = False) -> int:
        """Wait for a consumer to exit; its return code. Not started / hung become outcomes.

        ``late_ok``: a consumer still running after ``RUN_S`` with nothing left pending is
        killed and taken as done (a consumer that waits too long between looks is the
        business of the check named after that, not of this one). What it printed is
        kept in ``printed``. A consumer that leaves another's entry unclaimed well past
        its ``idle_ms`` (``UNCLAIMED_GRACE_S``) fails then, naming the entry."""
        clock = SystemClock()
        deadline = clock.now() + RUN_S
        while True:
            try:
                out, err = proc.communicate(timeout=LOOK_S)
                self.printed = out or ""
                break
            except subprocess.TimeoutExpired:  # retrying loses none of its output
                unclaimed = self.unclaimed(proc)
                if not unclaimed and clock.now() < deadline:
                    continue
            self.ns.kill(proc)
            proc.communicate()
            if late_ok and not unclaimed and not self.pending():
                return int(proc.returncode)
            if unclaimed:
                entry = unclaimed[0]
                expect(
                    False,
                    _("consume to claim {consumer}'s entry once it is idle for idle_ms "
                      "({idle_ms} ms), after {what}").format(
                        consumer=repr(entry["consumer"]), idle_ms=self.started[proc.pid][1],
                        what=what),
                    _("the entry of {key} was idle for {idle:.1f}s and nobody claimed it; "
                      "pending: {pending}, effects: {effects}").format(
                        key=self._entry_name(str(entry["message_id"])),
                        idle=entry["time_since_delivered"] / 1000,
                        pending=len(self.pending()), effects=self.effects()),
                    _("between your reads, XAUTOCLAIM under your own name what has been idle "
                      "for idle_ms or more: the consumer holding it may be dead, and then "
                      "nobody else runs it; a read that blocks for ever (BLOCK 0) never gets "
                      "there"),
                )  # fmt: skip
            expect(
                False,
                _("consume to return after {what}").format(what=what),
                _("still running after {limit:g}s; pending: {pending}, effects: {effects}").format(
                    limit=RUN_S, pending=len(self.pending()), effects=self.effects()
                ),
                "return once XPENDING is empty and nothing new waits; and make sure you "
                "read your own pending entries, XAUTOCLAIM idle ones and cap deliveries",
            )
        if "NotImplementedError: Exercise" in (err or ""):
            raise stub_error(9, "is still a stub")
        if proc.returncode not in (0, -signal.SIGKILL):
            last = (err or "").strip().splitlines()[-1:] or [_("no output")]
            expect(False, _("consume to exit cleanly after {what}").format(what=what),
                   _("exit code {code}: {stderr_line}").format(
                       code=proc.returncode, stderr_line=last[0][:200]),
                   _("a read that waits longer than the client's socket timeout fails: BLOCK 0 "
                     "waits for ever in Redis; block for about 50 ms and look again")
                   if "Timeout reading from socket" in (err or "")
                   else _("the group exists on {stream}, under the prefix exactly as consume "
                          "was given it ({prefix}): build every key name from it unchanged, "
                          "with no lower() or replace()").format(
                       stream=self.stream, prefix=repr(self.prefix))
                   if "NOGROUP" in (err or "") else None)  # fmt: skip
        return int(proc.returncode)

    def unclaimed(self, proc: subprocess.Popen[str]) -> list[dict[str, Any]]:
        """The PEL entries other consumers hold, idle ``UNCLAIMED_GRACE_S`` past the
        ``idle_ms`` ``proc`` was started with, while ``proc`` ran that long: ones a
        consumer that claims would have taken by now, whatever it was busy with."""
        consumer, idle_ms, began = self.started.get(proc.pid, ("", 0, 0.0))
        if not consumer or SystemClock().now() - began < UNCLAIMED_GRACE_S:
            return []
        limit = idle_ms + UNCLAIMED_GRACE_S * 1000
        return [p for p in self.pending()
                if p["consumer"] != consumer and p["time_since_delivered"] > limit]  # fmt: skip

    def kill_when_holding(
        self, proc: subprocess.Popen[str], consumer: str, key: str, mid_job_s: float = 0.0
    ) -> None:
        """SIGKILL ``proc`` once the PEL shows ``consumer`` holding ``key``'s entry.

        ``mid_job_s``: wait that long more, so the kill lands in the middle of a slow job
        (``work_s`` well above it) and not between the read and what follows it: a
        consumer that XACKs before its work has sent the XACK by then, however long the
        machine kept it from running between the two commands. Without it, a kill that
        came in that gap left the entry pending and the mistake passed.
        """
        self.wait_held(proc, consumer, key)
        if mid_job_s:
            SystemClock().sleep(mid_job_s)
        self.ns.kill(proc)
        proc.communicate()

    def owners_while(self, proc: subprocess.Popen[str], entry_id: str) -> list[str]:
        """Each consumer the PEL showed holding ``entry_id``, in order, while ``proc`` ran."""
        owners: list[str] = []
        clock = SystemClock()
        deadline = clock.now() + RUN_S
        while proc.poll() is None and clock.now() < deadline:
            held = self.r.xpending_range(self.stream, GROUP, entry_id, entry_id, 1)
            if held and (not owners or owners[-1] != held[0]["consumer"]):
                owners.append(str(held[0]["consumer"]))
            clock.sleep(0.02)
        return owners

    def deliveries_while(self, proc: subprocess.Popen[str], entry_id: str) -> list[int]:
        """Each delivery count the PEL showed for ``entry_id``, in order, while ``proc`` ran."""
        counts: list[int] = []
        clock = SystemClock()
        deadline = clock.now() + RUN_S
        while proc.poll() is None and clock.now() < deadline:
            held = self.r.xpending_range(self.stream, GROUP, entry_id, entry_id, 1)
            if held and (not counts or counts[-1] != int(held[0]["times_delivered"])):
                counts.append(int(held[0]["times_delivered"]))
            clock.sleep(0.02)
        return counts

    def wait_held(self, proc: subprocess.Popen[str], consumer: str, key: str) -> None:
        """Return once the PEL shows ``consumer`` holding ``key``'s entry; fail if it never does."""
        clock = SystemClock()
        deadline = clock.now() + RUN_S
        # Other names the key's entry was held under: a consumer that makes up a name of
        # its own (its pid, a uuid) instead of the one it was given.
        others: set[str] = set()
        while clock.now() < deadline:
            pending = self.pending()
            mine = [p for p in pending if self._key_of(str(p["message_id"])) == key]
            if any(p["consumer"] == consumer for p in mine):
                return
            others.update(str(p["consumer"]) for p in mine)
            if proc.poll() is not None:
                self.finish(proc, _("reading the slow entry"))
                expect(False, _("{consumer} to hold {key} while it works on it").format(
                           consumer=consumer, key=repr(key)),
                       _("the process ended before it held the entry") if not others
                       else self._other_names(others), self._name_hint(others))  # fmt: skip
            clock.sleep(0.02)
        expect(
            False,
            _("{consumer} to read {key} (XREADGROUP)").format(consumer=consumer, key=repr(key)),
            _("never read it in time") if not others else self._other_names(others),
            self._name_hint(others),
        )

    def _other_names(self, others: set[str]) -> str:
        started = {name for name, _idle, _at in self.started.values()}
        if others <= started:
            return _(
                "the PEL showed it held by {names}, a consumer started before, which read it "
                "along with the entry it was working on"
            ).format(names=sorted(others))
        return _("the PEL showed it held under {names}, not under the name it was given").format(
            names=sorted(others)
        )

    def _name_hint(self, others: set[str]) -> str | None:
        if not others:
            return None
        if others <= {name for name, _idle, _at in self.started.values()}:
            return _(
                "read new entries one at a time (XREADGROUP ... > COUNT 1), as your own "
                "pending ones: every entry a read returns is yours, pending, until you XACK "
                "it, so one that returns several holds the others while it works on the "
                "first; if it dies, nobody else may run them until they are idle for idle_ms, "
                "and each crash adds a delivery to them"
            )
        return _(
            "read and claim under the consumer name consume was given, exactly: a restart "
            "under the same name must find what it held before (XREADGROUP ... 0), and a "
            "name made up per process (a pid, a uuid) never does"
        )

    def _entry_name(self, entry_id: str) -> str:
        key = self._key_of(entry_id)
        if key is None:
            return _("{entry_id} (deleted from the stream)").format(entry_id=entry_id)
        return repr(key)

    def _key_of(self, entry_id: str) -> str | None:
        rows = self.r.xrange(self.stream, entry_id, entry_id)
        return str(rows[0][1]["key"]) if rows else None


#: Each check's key prefix: a capital and a '_', so a consumer that lower-cases or
#: tidies the prefix it was given works on keys nobody else reads.
PREFIX = "ex09:Run_{tag}"


@contextmanager
def stream(ns: Namespace) -> Iterator[Stream]:
    """A fresh stream with its group under a unique prefix; every key deleted afterwards."""
    import redis

    url = ns.redis_url()
    r = redis.Redis.from_url(url, decode_responses=True)
    try:
        r.ping()
    except redis.RedisError:
        hint = _("start the lab's services with `docker compose up -d`, then check again")
        expect(False, _("Redis at {url}").format(url=url), _("no answer"), hint)
    s = Stream(ns, r, PREFIX.format(tag=uuid.uuid4().hex[:12]), url)
    r.xgroup_create(s.stream, GROUP, id="0", mkstream=True)
    try:
        yield s
    finally:
        ns.close()  # the consumers first, so none writes after the cleanup
        # Under labkit grade the check's private Redis died with them, keys and all.
        with contextlib.suppress(redis.ConnectionError):
            keys = list(r.scan_iter(match=f"{s.prefix}:*"))
            if keys:
                r.delete(*keys)
        r.close()


def expect_once_each(s: Stream, keys: list[str], hint: str, *, strict: bool = True) -> None:
    """Each of ``keys`` applied exactly once and nothing left pending; ``strict=False``
    reads the effects with ``Stream.applied`` (a set passes here)."""
    effects = s.effects() if strict else s.applied()
    expect(effects == {k: 1 for k in keys},
           _("each of {keys} applied exactly once").format(keys=keys),
           effects or _("no effects"), hint)  # fmt: skip
    left = len(s.pending())
    expect(left == 0, "nothing left pending (every entry XACKed)",
           _("{count} pending").format(count=left),
           "XACK every entry you applied or dead-lettered")  # fmt: skip


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
    with stream(ns) as s:
        # Sent an hour ago (its ID says so) and only now read: its age is not its idle
        # time, which counts from its last delivery.
        sent = int(s.r.time()[0]) * 1000 - 3_600_000
        entry = s.add("slow", at=f"{sent}-0", cents=100, work_s=2)
        worker = s.start("a", idle_ms=600_000)
        s.wait_held(worker, "a", "slow")
        # As if 'a' had been at it for 5 minutes (a long job): still 'a's, idle_ms being
        # 10 minutes. XCLAIM ... IDLE sets the idle time; JUSTID adds no delivery. A
        # threshold of the consumer's own (5 s, a minute) takes the entry from 'a'.
        s.r.xclaim(s.stream, GROUP, "a", 0, [entry], idle=300_000, justid=True)
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
        owners, ended = _owners_while_kept(s, worker, other, entry)
        s.r.xack(s.stream, GROUP, kept)
        s.finish(worker, _("the consumer working on the slow entry"))
        s.finish(other, _("a second consumer next to it"), late_ok=True)
        expect(owners == ["a"], "only 'a' to hold 'slow' while it worked on it (idle 300000 "
               "ms, idle_ms 600000 for both)", _("held by {owners}").format(owners=owners),
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
#: Seconds 'b' is a member of the group (it has looked) before 'elsewhere' is XACKed:
#: time for a round and its pause of about 50 ms on a loaded machine.
WAITED_S = 0.5
#: XREADGROUPs Redis runs after 'b' starts before 'elsewhere' is XACKed: some two hundred
#: rounds of 'b' (its own pending, then new entries), which its fast clock makes in well
#: under the two seconds 'a' works on an idle machine; a count of empty rounds of its own
#: (give up after 100) runs out first. Waited for at most ``LOOKS_S`` after 'b' joined:
#: a consumer that pauses a second between looks is slow, not wrong.
LOOKS = 400
LOOKS_S = 3.0


def _owners_while_kept(
    s: Stream, worker: subprocess.Popen[str], other: subprocess.Popen[str], entry_id: str
) -> tuple[list[str], list[str]]:
    """While 'elsewhere' is pending: each consumer the PEL showed holding ``entry_id``,
    in order, and the consumers ('a', 'b') seen ended meanwhile. It ends once ``entry_id``
    is no longer pending and 'b' has been a member of the group for ``WAITED_S``, and
    Redis has run ``LOOKS`` XREADGROUPs since (or ``LOOKS_S`` have passed)."""
    owners: list[str] = []
    clock = SystemClock()
    deadline, since, reads = clock.now() + RUN_S, None, _reads_so_far(s.r)
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
        if not held and since is not None and clock.now() - since >= WAITED_S:
            now = _reads_so_far(s.r)
            looked = reads is None or now is None or now - reads >= LOOKS
            if looked or clock.now() - since >= LOOKS_S:
                break
        clock.sleep(0.02)
    return owners, []


@CHECKS.add(
    3,
    "read the delivery count (XPENDING) before running an entry; above max_deliveries "
    "XADD it to <prefix>:dead with key, payload and reason, and XACK it in one MULTI",
    120,
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
        expect(kills == 3, "exactly 3 deliveries of the poison entry (3 crashes), then no more",
               _("{count} crashes").format(count=kills),
               "check the count before run_job, not after")  # fmt: skip
        dead = s.dead()
        expect(len(dead) == 1 and dead[0].get("key") == "poison" and bool(dead[0].get("reason")),
               "one dead letter with key 'poison' and a reason", dead)  # fmt: skip
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
