"""What exercise 9's checks share: ``CHECKS``, on which ``delivery_checks`` and
``kill_checks`` register, and the checks' world: a stream under a prefix of the
check's own on a real Redis (``Stream``, made by ``stream``), the student's consumers
run as processes on it, and what Redis holds read back (``expect_once_each``)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labkit.clock import SystemClock
from labkit.grading.checks import Checks, Namespace, expect
from labkit.grading.exercises.killsweep import hash_salt
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
