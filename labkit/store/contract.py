"""The job store contract: what every backend (SQLite now, PostgreSQL later) must do.

Like huey's ``BaseStorage``, each operation is named here with its promise;
``labkit.store.sqlite.JobStore`` implements it on SQLite and ``tests/contract`` runs one test
suite against every backend, so a backend cannot drift from the rules the lessons teach.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

from labkit.clock import Clock
from labkit.job import Attempt, Job

#: The job tables' schema version, the same on every engine (its meta table says which).
#: 2 added ``pruned_attempts``, the totals ``prune_finished`` keeps for the metrics; a
#: version-1 database gains it (empty) when it is opened. 3 added the state ``cancelled``
#: (``JobState``): an older jobs table has its state check widened when it is opened.
SCHEMA_VERSION = 3
#: How the dead reasons of jobs that died of a transient cause begin: the retry policy's
#: "attempts exhausted" and "deadline passed". Retrying these later may work; the others
#: (permanent errors) need their cause fixed.
RETRYABLE_DEAD_REASONS = ("attempts exhausted", "deadline passed")
#: How the crash-loop cap's reason begins: the worker died on every attempt. Not
#: retryable by default: such a job is often a poison job, and retrying it kills workers.
LEASE_EXPIRED_REASON = "lease expired"


@runtime_checkable
class WorkerStore(Protocol):
    """What ``labkit.worker.Worker`` calls on a store: claim, lease, record the outcome.

    Every engine's store is one (SQLite, PostgreSQL, Redis Streams), so the worker is
    typed by what it uses, not by one engine's class. ``JobStoreContract`` is the whole
    contract, these operations included.
    """

    #: Where every time the store writes comes from (never the wall clock in SQL).
    clock: Clock

    def claim(
        self, worker: str, queues: Sequence[str] = ("default",), lease_s: float = 30.0
    ) -> Job | None:
        """Lease the next ready job (due pending/retry_wait, or running with an expired lease).

        Atomic: two workers never get the same job. Adds one to ``attempt`` and hands out
        a lease token no earlier claim of that job had. A job whose expired lease was its
        last attempt goes to dead instead. None when nothing is ready.
        """
        ...

    def heartbeat(self, job: Job, lease_s: float = 30.0) -> Job:
        """Extend the holder's lease; ``LeaseLost`` and no change for a stale token."""
        ...

    def complete(self, job: Job, result: Any = None) -> Job:
        """Mark succeeded with ``result``; ``LeaseLost`` and no change for a stale token."""
        ...

    def fail(self, job: Job, error: BaseException) -> Job:
        """Record a failed attempt; ``LeaseLost`` and no change for a stale token.

        Transient while attempts (and deadline) remain: retry_wait with
        ``run_after = now + backoff``. Otherwise dead, keeping reason, error class and a
        sanitized, truncated message.
        """
        ...

    def snooze(self, job: Job, delay_s: float, reason: str = "snoozed") -> Job:
        """Put a running job back to wait ``delay_s`` without spending an attempt.

        Fenced like ``complete``. An engine that cannot give a delivery back without
        counting it (Redis Streams) refuses with ``StoreError``.
        """
        ...

    def get(self, job_id: int) -> Job:
        """The job with this id; ``NotFound`` otherwise."""
        ...

    def next_due(self, queues: Sequence[str] = ("default",)) -> float | None:
        """When the next job of ``queues`` becomes claimable (a wait ends or a lease
        expires), or None when none is waiting: what a draining worker sleeps until."""
        ...


@runtime_checkable
class JobStoreContract(WorkerStore, Protocol):
    """A durable job queue with leases, fenced completion, retries, dead letters and redrive.

    The worker's part (claim, heartbeat, complete, fail, snooze, get, next_due) is
    ``WorkerStore``'s; the rest is here.
    """

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
        """Accept a job durably and return ``(job, created)``.

        Same key and payload: the existing job, ``created`` False. Same key, other
        payload or kind: ``IdempotencyConflict`` naming both fingerprints. No key: a unique
        one. ``conn=`` joins the caller's open transaction (commit or roll back together).
        """
        ...

    def claim_many(
        self, worker: str, limit: int, queues: Sequence[str] = ("default",), lease_s: float = 30.0
    ) -> list[Job]:
        """Like ``claim`` for up to ``limit`` jobs in one transaction, oldest due first."""
        ...

    def redrive(self, job_id: int, note: str = "") -> Job:
        """Dead to pending with the same key and history, counting the redrive.

        ``InvalidTransition`` for a job that is not dead, ``NotFound`` for no job.
        """
        ...

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
        """Redrive at most ``limit`` matching dead jobs; ``limit`` is required."""
        ...

    def dead_by_reason(
        self,
        prefixes: Sequence[str],
        *,
        kind: str | None = None,
        batch: int = 500,
    ) -> Iterator[Job]:
        """Dead jobs whose reason starts with one of ``prefixes``, oldest first, read a page
        of ``batch`` rows at a time: memory stays flat however long the dead-letter queue."""
        ...

    def count_dead_by_reason(
        self, prefixes: Sequence[str], *, kind: str | None = None, matching: bool = True
    ) -> int:
        """How many dead jobs have (``matching``) or have not a reason starting with one
        of ``prefixes``, optionally of one ``kind``."""
        ...

    def get_by_key(self, key: str) -> Job | None:
        """The job with this key, or None."""
        ...

    def counts(self) -> dict[str, int]:
        """Jobs per state, every state present (zeros included)."""
        ...

    def dead_letters(
        self, *, kind: str | None = None, queue: str | None = None, limit: int = 100
    ) -> list[Any]:
        """Dead jobs, oldest first, with age, reason, error class and attempts."""
        ...

    def attempts(self, job_id: int) -> list[Attempt]:
        """One job's attempt history (worker, start, end, outcome, error), oldest first."""
        ...

    def close(self) -> None:
        """Release the backend's connections."""
        ...
