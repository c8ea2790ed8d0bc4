"""The operator's side of ``StreamJobStore``: reading jobs, dead letters and redrive.

As ``labkit.store.admin`` is for the SQL stores: what an operator or a lesson reads (a
job, its attempts, the counts, when the next job is due) and what it does to dead jobs
(list, filter, redrive). The status hashes (``<prefix>:job:<key>``) beside the stream
are read whole; a stream has no index to filter on.

``redrive`` is one Lua script (``labkit.backends.redis.lua.REDRIVE``): the new entry,
the dead letter's deletion and the record back to pending happen together or not at
all, and the script itself checks the job is still dead, so a crash between two
commands cannot leave an entry no claim takes, and two operators cannot redrive one
job twice.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from labkit import jobargs
from labkit.backends.redis.malformed import decode_payload
from labkit.backends.redis.streams import StreamQueue
from labkit.clock import Clock
from labkit.errors import NotFound
from labkit.job import Attempt, Job, JobState
from labkit.redact import sanitize
from labkit.store.admin import DeadLetter
from labkit.store.rules import check_redrive_limit, not_dead


def _num(value: str | None) -> float | None:
    return None if value in (None, "") else float(value)


class StreamAdmin:
    """Inspection and dead letters over a stream store's status hashes."""

    r: Any
    q: StreamQueue
    prefix: str
    clock: Clock
    _redrive_script: Any  # lua.REDRIVE, registered by the store

    def _hash(self, key: str) -> str:
        return f"{self.prefix}:job:{key}"

    def _attempts(self, key: str) -> str:
        return f"{self.prefix}:attempts:{key}"

    # -- dead letters ------------------------------------------------------------------

    def redrive(self, job_id: int, note: str = "") -> Job:
        """Dead job back on the stream with the same key, its dead letter deleted: one script."""
        job = self.get(job_id)
        if job.state != JobState.DEAD:
            raise not_dead(job_id, job.state)
        outcome, detail = self._redrive_script(
            keys=[self._hash(job.key), self.q.stream, self.q.dead],
            args=[sanitize(note), repr(self.clock.now())],
        )
        if outcome != "ok":  # another operator redrove it since the read above
            raise not_dead(job_id, str(detail))
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

    def deliveries(self, job_id: int) -> int:
        """How many times the job's entry was delivered (the PEL's count when last taken).

        Not its attempts: a read before the job was due, or by a consumer that died
        before starting it, is a delivery that ran nothing. Shown to the operator beside
        ``attempt``; the crash-loop cap judges attempts only. A redrive starts at 0.
        """
        job = self.get(job_id)
        return int(self.r.hget(self._hash(job.key), "deliveries") or 0)

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
