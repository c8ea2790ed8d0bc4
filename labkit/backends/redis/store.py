"""The worker's job store on Redis Streams: ``labkit.worker`` and ``labkit.explore`` run on it.

``StreamJobStore(url, prefix, clock=None, retry=None, rng=None, reclaim_idle_ms=30000)``
keeps the parts of ``labkit.store.contract`` that a stream can keep, and passes the shared
contract tests that apply (``tests/contract/test_redis_streams_contract.py``; see
``labkit.backends.redis.streams`` for the commands and for what a stream cannot keep):

- ``enqueue``: one Lua script records the key, the job's status hash and the ``XADD``,
  so acceptance is all or nothing and the same key never adds a second entry;
- ``claim``: a pending entry (anyone's, oldest first) whose job may run now: its retry
  is due, its lease ran out, or another consumer has held it idle past
  ``reclaim_idle_ms`` on the server's clock (a consumer that died without anyone
  telling the clock); then new entries (``XREADGROUP >``). A Lua script decides and
  takes (``XCLAIM``) in one step, so two claimers never get the same entry;
- **attempts are not deliveries.** The script counts an attempt when it hands the job
  to a handler, as the SQL stores count it at claim; the PEL's delivery count is kept
  beside it (``deliveries(job_id)``, the dead letter's ``deliveries``) for the
  operator. An entry read before it was due, or read by a consumer that died before
  starting it, was delivered but never tried, and uses up no attempt. A job whose
  holder died on its last attempt goes to the dead-letter stream when a claim finds it
  (``LeaseExpired``, "lease expired on the last attempt (n of n)", as on SQL): the
  crash-loop cap is judged on attempts. The lease token is ``<entry id>|<deliveries>``;
- ``complete``, ``fail``, ``heartbeat`` are **fenced** by a Lua script that checks the
  PEL (owner and delivery count) and the record's lease token before it ``XACK``s,
  dead-letters or touches the entry: a consumer whose entry was taken over gets
  ``LeaseLost`` and changes nothing. Plain ``XACK`` has no such check;
- a transient failure leaves the entry pending with ``run_after`` (a stream has no
  delayed delivery: the claim looks before it takes);
- ``redrive`` (``labkit.backends.redis.admin``, with the other reads an operator makes)
  is one Lua script: new entry, dead letter deleted, record pending, or nothing.

Time: every lease, due time and backoff is judged by **Redis's clock**, so workers on
machines whose clocks disagree agree on who holds a job. Given a real clock (``None``,
``SystemClock``, a skewed one), the store reads ``TIME`` through
``labkit.clock.ServerClock`` (at most every ``SERVER_CLOCK_EVERY_S``, carried forward by
the monotonic clock) and ``store.clock`` is that clock, so a ``Worker(clock=None)``
follows it too. A ``FakeClock`` is kept as it is, so lessons and tests replay exactly.
Why not ``redis.call('TIME')`` inside the scripts: the same ``now`` must reach the scripts
and the Python around them (``fail``'s backoff, ``next_due``, the worker's sleeps), one
path serves both kinds of clock, and ``PostgresJobStore`` does the same; the cost is the
monotonic clock's drift over a few seconds and half a round trip, far below any lease.

Not kept: ``snooze``, several queues per stream, ``conn=`` (Redis has no transaction
to join: use the outbox of lesson 09), ``prune_finished``. ``complete_many`` completes
one job per script, not all in one transaction. The status hashes beside the stream
exist so the explorer can judge "succeeded but no effect" (``lost``); a plain stream
consumer has only the PEL. The Lua steps are in ``lua.py``.

In production, a library keeps these rules on Redis for you: Dramatiq's Redis broker,
Celery on Redis (lists with a visibility timeout, lesson 14), or a PostgreSQL queue
(procrastinate) when you need leases and attempts as data; labkit writes this one by hand
so every step of the claim can be seen and crashed.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Sequence
from typing import Any

import redis

from labkit import jobargs
from labkit.backends.redis import lua
from labkit.backends.redis.admin import StreamAdmin
from labkit.backends.redis.malformed import quarantine, record_problem
from labkit.backends.redis.streams import StreamQueue, connect
from labkit.clock import Clock, ServerClock, SystemClock, is_simulated
from labkit.errors import LeaseLost, StoreError
from labkit.job import Job, JobState
from labkit.redact import sanitize
from labkit.retry import RetryPolicy
from labkit.store.rules import (
    check_claim_limit,
    check_lease_s,
    check_same_operation,
    enqueue_params,
    fail_params,
)

#: How many pending entries one ``XPENDING`` call of a claim reads.
PENDING_PAGE = 100
#: At most this long (seconds) between two reads of Redis's ``TIME`` by a real clock.
SERVER_CLOCK_EVERY_S = 5.0


class StreamJobStore(StreamAdmin):
    """The job contract's stream-shaped subset on Redis (see the module docstring)."""

    #: What a dropped connection raises here; ``labkit.worker`` waits and asks again
    #: (redis-py opens a new connection on the next command).
    connection_errors: tuple[type[BaseException], ...] = (
        redis.exceptions.ConnectionError,
        redis.exceptions.TimeoutError,
    )

    def __init__(
        self,
        url: str,
        prefix: str,
        clock: Clock | None = None,
        retry: RetryPolicy | None = None,
        rng: random.Random | None = None,
        reclaim_idle_ms: int = 30_000,
    ) -> None:
        if reclaim_idle_ms < 0:
            raise ValueError(f"reclaim_idle_ms must be >= 0, not {reclaim_idle_ms!r}")
        given = clock or SystemClock()
        # Real time is Redis's, whatever this machine's clock says (see the docstring).
        self.clock = (
            given if is_simulated(given) else ServerClock(self._server_time, SERVER_CLOCK_EVERY_S)
        )
        self.retry = retry or RetryPolicy()
        self.rng = rng or random.Random()
        self.reclaim_idle_ms = reclaim_idle_ms
        self.r = connect(url)
        try:
            self.q = StreamQueue(self.r, prefix, clock=self.clock)
        except BaseException:
            self.r.close()
            raise
        self.prefix = prefix
        self._enqueue = self.r.register_script(lua.ENQUEUE)
        self._fenced_script = self.r.register_script(lua.FENCED)
        self._claim_script = self.r.register_script(lua.CLAIM)
        self._redrive_script = self.r.register_script(lua.REDRIVE)

    def _server_time(self) -> float:
        """Redis's ``TIME``: seconds and microseconds since the epoch, on the server."""
        seconds, micros = self.r.time()
        return float(seconds) + float(micros) / 1_000_000

    def close(self) -> None:
        self.q.close()

    def __enter__(self) -> StreamJobStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def delete_all(self) -> int:
        """Remove every key of this store (tests and lessons clean up with it)."""
        return self.q.delete_all()

    # -- accepting ---------------------------------------------------------------------

    def enqueue(
        self,
        kind: str,
        payload: Any,
        key: str | None = None,
        queue: str = "default",
        run_after: float | None = None,
        max_attempts: int = 5,
        conn: Any = None,
    ) -> tuple[Job, bool]:
        """Accept a job: status hash and ``XADD`` in one script; same key, same job."""
        if conn is not None:
            raise StoreError(
                "enqueue(conn=...) joins a database transaction; Redis has none to join. "
                "Use the outbox (lesson 09) to publish to a stream from a database write."
            )
        p = enqueue_params(kind, payload, key, queue, run_after, max_attempts, self.clock.now())
        keys = [self._hash(p["key"]), f"{self.prefix}:seq", f"{self.prefix}:ids", self.q.stream]
        args = [p[n] for n in ("key", "kind", "queue", "payload", "fingerprint")]
        args += [p["max_attempts"], repr(p["now"]), repr(p["run_after"])]
        created = int(self._enqueue(keys=keys, args=args)) > 0
        job = self.get_by_key(p["key"])
        assert job is not None  # the script just wrote it, or it was there
        if not created:
            check_same_operation(job, p)
        return job, created

    # -- claiming ----------------------------------------------------------------------

    def claim(
        self, worker: str, queues: Sequence[str] = ("default",), lease_s: float = 30.0
    ) -> Job | None:
        """Pending entries whose job may run now (any holder's, oldest first), then new ones.

        A pending entry may be taken when its retry is due, when its lease ran out on the
        store's clock, or when another consumer has held it idle past
        ``reclaim_idle_ms`` on the server's clock. One Lua script decides and takes it,
        so two claimers never both get it, and counts the attempt it starts.
        """
        jobargs.name("worker", worker)
        check_lease_s(lease_s)
        now = self.clock.now()
        for entry_id in self._pending_ids():
            job = self._claim_entry(worker, entry_id, now, lease_s, "take")
            if job is not None:
                return job
        while entries := self.q.read_new(worker, count=1):
            job = self._claim_entry(worker, entries[0].id, now, lease_s, "fresh")
            if job is not None:
                return job
        return None

    def _pending_ids(self, page: int = PENDING_PAGE) -> Iterator[str]:
        """Every pending entry's id, oldest first, a page of ``XPENDING`` at a time.

        Not only the first page: delayed and retrying jobs stay pending until due, and a
        crashed worker's job behind a hundred of them must still be found.
        """
        start = "-"
        while True:
            rows = self.r.xpending_range(self.q.stream, self.q.group, start, "+", page)
            for row in rows:
                yield str(row["message_id"])
            if len(rows) < page:
                return
            start = f"({rows[-1]['message_id']}"  # exclusive: the page after the last seen

    def claim_many(
        self, worker: str, limit: int, queues: Sequence[str] = ("default",), lease_s: float = 30.0
    ) -> list[Job]:
        """``claim`` up to ``limit`` times (a stream has no multi-row claim to batch)."""
        check_claim_limit(limit)
        jobs: list[Job] = []
        while len(jobs) < limit and (job := self.claim(worker, queues, lease_s)) is not None:
            jobs.append(job)
        return jobs

    def _claim_entry(
        self, worker: str, entry_id: str, now: float, lease_s: float, mode: str
    ) -> Job | None:
        rows = self.r.xrange(self.q.stream, entry_id, entry_id, count=1)
        if not rows:
            return None  # trimmed by MAXLEN while pending: its job is gone (see the docstring)
        fields = dict(rows[0][1])
        key = fields.get("key")
        if not key:
            self._set_aside(entry_id, fields, "it has no 'key' field", now)
            return None
        record = self.r.hgetall(self._hash(key))
        if not record.get("key"):
            why = f"no job record for key {key!r} (was it added without enqueue?)"
            self._set_aside(entry_id, fields, why, now)
            return None
        # Checked before the claim script: a job no handler can read is set aside without
        # an attempt counted, as it never starts; so is one whose numbers or state the
        # script cannot read (it would fail on it at every claim, stopping every worker).
        problem = record_problem(record)
        if problem is not None:
            self._set_aside(entry_id, fields, f"job {key!r}: {problem}", now, key, record)
            return None
        attempt = self._claim_script(
            keys=[self.q.stream, self._hash(key), self._attempts(key), self.q.dead],
            args=[self.q.group, entry_id, worker, repr(now), repr(now + lease_s),
                  self.reclaim_idle_ms, mode],
        )  # fmt: skip
        return self.get_by_key(key) if int(attempt) > 0 else None

    def _set_aside(
        self,
        entry_id: str,
        fields: dict[str, Any],
        why: str,
        now: float,
        key: str | None = None,
        record: dict[str, str] | None = None,
    ) -> None:
        quarantine(
            self.r, stream=self.q.stream, group=self.q.group, dead=self.q.dead,
            entry_id=entry_id, fields=fields, reason=why, now=now,
            job_hash=None if key is None else self._hash(key), record=record,
        )  # fmt: skip

    # -- finishing ---------------------------------------------------------------------

    def _fence(self, job: Job, op: str, fields: dict[str, Any], reason: str = "") -> Job:
        entry, _, deliveries = (job.lease_token or "|").partition("|")
        now = self.clock.now()
        values: dict[str, Any] = {**fields, "updated_at": repr(now)}
        if op in ("ack", "dead"):
            values |= {"lease_token": "", "lease_until": "", "lease_owner": ""}
        if op == "dead":
            values |= {"state": JobState.DEAD.value, "dead_reason": sanitize(reason)}
        flat = [str(x) for kv in values.items() for x in kv]
        dead = [
            *("key", job.key, "kind", job.kind, "payload", json.dumps(job.payload)),
            *("origin", entry, "reason", sanitize(reason), "deliveries", deliveries),
            *("attempts", str(job.attempt)),
        ]
        ok = self._fenced_script(
            keys=[self.q.stream, self._hash(job.key), self.q.dead, self._attempts(job.key)],
            args=[self.q.group, entry, job.lease_owner or "", deliveries, op, len(flat)]
            + flat
            + (dead if op == "dead" else []),
        )
        if not ok:
            now_job = self.get_by_key(job.key)
            raise LeaseLost(
                f"{op} refused for job {job.id} (entry {entry}, delivery {deliveries}, consumer "
                f"{job.lease_owner}): the entry is no longer pending with this consumer "
                "under this lease"
                + (f"; the job is {now_job.state}" if now_job else "")
                + ". Another consumer took it over; this result is discarded."
            )
        found = self.get_by_key(job.key)
        assert found is not None
        return found

    def complete(self, job: Job, result: Any = None, conn: Any = None) -> Job:
        """Fenced ``XACK`` and state ``succeeded``, in one script."""
        if conn is not None:
            raise StoreError("complete(conn=...) needs a database transaction; Redis has none")
        return self._fence(
            job, "ack", {"state": "succeeded", "result": json.dumps(result, default=str)}
        )

    def complete_many(self, jobs: Sequence[Job], results: Sequence[Any] | None = None) -> list[Job]:
        """Complete each job still held (one fenced script each); skip the ones moved on.

        Not one transaction as on SQL: each completion is atomic on its own.
        """
        results = list(results) if results is not None else [None] * len(jobs)
        done = []
        for job, result in zip(jobs, results, strict=True):
            try:
                done.append(self.complete(job, result))
            except LeaseLost:
                continue
        return done

    def heartbeat(self, job: Job, lease_s: float = 30.0) -> Job:
        """Fenced ``XCLAIM ... JUSTID`` to self: resets the entry's idle time."""
        until = repr(self.clock.now() + check_lease_s(lease_s))
        return self._fence(job, "touch", {"lease_until": until})

    def fail(self, job: Job, error: BaseException) -> Job:
        """Retry: stays pending with ``run_after``; otherwise dead-lettered, fenced."""
        kept = self.r.hmget(self._hash(job.key), "last_delay", "window_start")
        p = fail_params(
            self.retry, self.rng, job, error, now=self.clock.now(),
            previous=float(kept[0] or 0.0), window_start=float(kept[1] or job.created_at),
        )  # fmt: skip
        fields = {
            "last_error": p["error"],
            "error_class": p["error_class"],
            "run_after": repr(p["run_after"]),
            "last_delay": repr(p["delay"]),
        }
        if p["state"] == JobState.DEAD:
            return self._fence(job, "dead", fields, p["dead_reason"] or "failed")
        return self._fence(job, "keep", {**fields, "state": JobState.RETRY_WAIT.value})

    def snooze(self, job: Job, delay_s: float, reason: str = "snoozed") -> Job:
        raise StoreError(
            "snooze is not kept on Redis Streams: a delivery cannot be given back without "
            "counting it. Let the entry wait in the PEL (fail with a transient error) instead."
        )
