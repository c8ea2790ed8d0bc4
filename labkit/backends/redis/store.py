"""The worker's job store on Redis Streams: ``labkit.worker`` and ``labkit.explore`` run on it.

``StreamJobStore(url, prefix, clock=None, retry=None, rng=None, reclaim_idle_ms=30000)``
keeps the parts of ``labkit.store.contract`` that a stream can keep, and passes the shared
contract tests that apply (``tests/contract/test_redis_streams_contract.py``; see
``labkit.backends.redis.streams`` for the commands and for what a stream cannot keep):

- ``enqueue``: one Lua script records the key, the job's status hash and the ``XADD``,
  so acceptance is all or nothing and the same key never adds a second entry;
- ``claim``: a pending entry (anyone's, oldest first) whose job may run now: its retry
  is due, its lease ran out on the injected clock, or another consumer has held it
  idle past ``reclaim_idle_ms`` on the server's clock (a consumer that died without
  anyone telling the clock); then new entries (``XREADGROUP >``). A Lua script decides
  and takes (``XCLAIM``) in one step, so two claimers never get the same entry.
  ``attempt`` is the entry's delivery count; the lease token is ``<entry id>|<count>``;
- a delivery count above ``max_attempts`` sends the entry to the dead-letter stream
  (``XADD`` + ``XACK`` in the same script, ``error_class`` ``DeliveryLimit``);
- ``complete``, ``fail``, ``heartbeat`` are **fenced** by a Lua script that checks the
  PEL (owner and delivery count) before it ``XACK``s, dead-letters or touches the entry:
  a consumer whose entry was taken over gets ``LeaseLost`` and changes nothing. Plain
  ``XACK`` has no such check;
- a transient failure leaves the entry pending with ``run_after`` (a stream has no
  delayed delivery: the claim looks before it takes);
- ``redrive`` adds a new entry with the same key and deletes the dead letter, in one
  ``MULTI``; the attempt history is a list per job, kept by the same scripts.

Not kept: ``snooze``, several queues per stream, ``conn=`` (Redis has no transaction
to join: use the outbox of lesson 09), ``prune_finished``. ``complete_many`` completes
one job per script, not all in one transaction. The status hashes beside the stream
exist so the explorer can judge "succeeded but no effect" (``lost``); a plain stream
consumer has only the PEL. The module is longer than most (about 490 lines) because it
is one engine's whole side of the contract; its Lua steps are apart in ``lua.py``.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Sequence
from typing import Any

import redis

from labkit import jobargs
from labkit.backends.redis import lua
from labkit.backends.redis.malformed import decode_payload, quarantine
from labkit.backends.redis.streams import StreamQueue
from labkit.clock import Clock, SystemClock
from labkit.errors import LeaseLost, NotFound, StoreError
from labkit.job import Attempt, Job, JobState
from labkit.redact import sanitize
from labkit.retry import RetryPolicy
from labkit.store.base import DeadLetter
from labkit.store.rules import (
    check_claim_limit,
    check_lease_s,
    check_redrive_limit,
    check_same_operation,
    enqueue_params,
    fail_params,
    not_dead,
)


def _num(value: str | None) -> float | None:
    return None if value in (None, "") else float(value)


#: How many pending entries one ``XPENDING`` call of a claim reads.
PENDING_PAGE = 100


class StreamJobStore:
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
        self.clock: Clock = clock or SystemClock()
        self.retry = retry or RetryPolicy()
        self.rng = rng or random.Random()
        self.reclaim_idle_ms = reclaim_idle_ms
        self.q = StreamQueue(url, prefix, clock=self.clock)
        self.r: Any = self.q.r
        self.prefix = prefix
        self._enqueue = self.r.register_script(lua.ENQUEUE)
        self._fenced_script = self.r.register_script(lua.FENCED)
        self._claim_script = self.r.register_script(lua.CLAIM)

    def _hash(self, key: str) -> str:
        return f"{self.prefix}:job:{key}"

    def _attempts(self, key: str) -> str:
        return f"{self.prefix}:attempts:{key}"

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
        injected clock, or when another consumer has held it idle past
        ``reclaim_idle_ms`` on the server's clock. One Lua script decides and takes it,
        so two claimers never both get it.
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
        if not self.r.exists(self._hash(key)):
            why = f"no job record for key {key!r} (was it added without enqueue?)"
            self._set_aside(entry_id, fields, why, now)
            return None
        n = self._claim_script(
            keys=[self.q.stream, self._hash(key), self._attempts(key), self.q.dead],
            args=[self.q.group, entry_id, worker, repr(now), repr(now + lease_s),
                  self.reclaim_idle_ms, mode],
        )  # fmt: skip
        if int(n) <= 0:
            return None
        problem = decode_payload(self.r.hget(self._hash(key), "payload"))[1]
        if problem is not None:
            self._set_aside(entry_id, fields, f"job {key!r}: {problem}", now, self._hash(key))
            return None
        return self.get_by_key(key)

    def _set_aside(
        self, entry_id: str, fields: dict[str, Any], why: str, now: float, job: str | None = None
    ) -> None:
        quarantine(
            self.r, stream=self.q.stream, group=self.q.group, dead=self.q.dead,
            entry_id=entry_id, fields=fields, reason=why, now=now, job_hash=job,
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
                f"{job.lease_owner}): the entry is no longer pending with this consumer"
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

    # -- dead letters ------------------------------------------------------------------

    def redrive(self, job_id: int, note: str = "") -> Job:
        """Dead job back on the stream with the same key, its dead letter deleted (MULTI)."""
        job = self.get(job_id)
        if job.state != JobState.DEAD:
            raise not_dead(job_id, job.state)
        dead_entry = self.r.hget(self._hash(job.key), "dead_entry") or ""
        now = repr(self.clock.now())
        pipe = self.r.pipeline(transaction=True)
        fields = {"key": job.key, "kind": job.kind, "payload": json.dumps(job.payload)}
        pipe.xadd(self.q.stream, {**fields, "redriven_from": dead_entry, "note": sanitize(note)})
        if dead_entry:
            pipe.xdel(self.q.dead, dead_entry)
        entry = pipe.execute()[0]
        self.r.hset(
            self._hash(job.key),
            mapping={
                "state": "pending", "attempt": 0, "entry": str(entry), "run_after": now,
                "dead_reason": "", "redrives": job.redrives + 1, "updated_at": now,
                "last_delay": 0.0, "window_start": now,
            },
        )  # fmt: skip
        return self.get(job_id)

    def redrive_where(
        self,
        *,
        limit: int,
        kind: str | None = None,
        queue: str | None = None,
        error_class: str | None = None,
        dry_run: bool = False,
        note: str = "",
    ) -> list[Job]:
        """Redrive at most ``limit`` matching dead jobs, oldest first; ``limit`` required."""
        check_redrive_limit(limit)
        chosen = [
            j
            for j in self.jobs(JobState.DEAD)
            if (kind is None or j.kind == kind)
            and (queue is None or j.queue == queue)
            and (error_class is None or j.error_class == error_class)
        ][:limit]
        return chosen if dry_run else [self.redrive(j.id, note=note) for j in chosen]

    def dead_letters(
        self, *, kind: str | None = None, queue: str | None = None, limit: int = 100
    ) -> list[DeadLetter]:
        now = self.clock.now()
        return [
            DeadLetter(
                j.id,
                j.kind,
                j.queue,
                j.key,
                j.dead_reason or "",
                j.error_class,
                j.last_error,
                j.attempt,
                j.redrives,
                now - j.updated_at,
            )  # fmt: skip
            for j in self.jobs(JobState.DEAD)
            if (kind is None or j.kind == kind) and (queue is None or j.queue == queue)
        ][:limit]

    def dead_by_reason(
        self, prefixes: Sequence[str], *, kind: str | None = None, batch: int = 500
    ) -> Iterator[Job]:
        """Dead jobs whose reason starts with one of ``prefixes``, oldest first. ``batch`` is
        checked, not used: the status hashes are read whole, as ``jobs`` reads them."""
        jobargs.name("kind", kind, optional=True)
        jobargs.count("batch", batch)
        return iter(self._dead_by_reason(prefixes, kind, matching=True))

    def count_dead_by_reason(
        self, prefixes: Sequence[str], *, kind: str | None = None, matching: bool = True
    ) -> int:
        """How many dead jobs have (``matching``) or have not a reason starting with one
        of ``prefixes``, optionally of one ``kind``."""
        jobargs.name("kind", kind, optional=True)
        return len(self._dead_by_reason(prefixes, kind, matching))

    def _dead_by_reason(
        self, prefixes: Sequence[str], kind: str | None, matching: bool
    ) -> list[Job]:
        starts = tuple(str(p) for p in prefixes)
        found = [
            j
            for j in self.jobs(JobState.DEAD, limit=10**9)
            if (kind is None or j.kind == kind)
            and (j.dead_reason is not None and j.dead_reason.startswith(starts)) == bool(matching)
        ]
        return sorted(found, key=lambda j: (j.updated_at, j.id))

    # -- inspection --------------------------------------------------------------------

    def get_by_key(self, key: str) -> Job | None:
        h = self.r.hgetall(self._hash(key))
        if not h:
            return None
        running = h.get("state") == "running"
        return Job(
            id=int(h["id"]), kind=h["kind"], queue=h["queue"], key=h["key"],
            fingerprint=h["fingerprint"], payload=decode_payload(h.get("payload"))[0],
            state=JobState(h["state"]), attempt=int(h["attempt"]),
            max_attempts=int(h["max_attempts"]), run_after=float(h["run_after"]),
            lease_owner=h.get("lease_owner") or None,
            lease_until=_num(h.get("lease_until")) if running else None,
            lease_token=(h.get("lease_token") or None) if running else None,
            last_error=h.get("last_error") or None, error_class=h.get("error_class") or None,
            result=json.loads(h["result"]) if h.get("result") else None,
            created_at=float(h["created_at"]), updated_at=float(h["updated_at"]),
            dead_reason=h.get("dead_reason") or None, redrives=int(h.get("redrives", 0)),
        )  # fmt: skip

    def get(self, job_id: int) -> Job:
        key = self.r.hget(f"{self.prefix}:ids", str(job_id))
        job = self.get_by_key(key) if key else None
        if job is None:
            raise NotFound(f"job {job_id} does not exist under Redis prefix {self.prefix}")
        return job

    def jobs(self, state: JobState | str | None = None, limit: int = 1000) -> list[Job]:
        keys = self.r.hgetall(f"{self.prefix}:ids")
        found = []
        for job_id in sorted(keys, key=int):
            job = self.get_by_key(keys[job_id])
            if job is not None and (state is None or job.state == state):
                found.append(job)
        return found[:limit]

    def next_due(self, queues: Sequence[str] = ("default",)) -> float | None:
        """When the next job becomes claimable (a wait ends or a lease runs out on the
        clock), or None when none is waiting: what a draining worker sleeps until."""
        times = [
            j.run_after if j.state != JobState.RUNNING else (j.lease_until or j.run_after)
            for j in self.jobs(limit=10**9)
            if j.state in (JobState.PENDING, JobState.RETRY_WAIT, JobState.RUNNING)
        ]
        return min(times, default=None)

    def counts(self) -> dict[str, int]:
        found = {s.value: 0 for s in JobState}
        for job in self.jobs(limit=10**9):
            found[job.state.value] += 1
        return found

    def attempts(self, job_id: int) -> list[Attempt]:
        """The attempt history the claim and fence scripts keep (the PEL has only the last)."""
        job = self.get(job_id)
        history = []
        for text in self.r.lrange(self._attempts(job.key), 0, -1):
            a = json.loads(text)
            history.append(
                Attempt(
                    job_id,
                    int(a["attempt"]),
                    a["worker"],
                    float(a["started_at"]),
                    a.get("finished_at"),
                    a.get("outcome"),
                    a.get("error") or None,
                    a.get("error_class") or None,
                )  # fmt: skip
            )
        return history
