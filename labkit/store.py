"""The durable job store on SQLite: accept, claim with a lease, finish, retry, bury, redrive.

One file, WAL mode, every state change one transaction. Workers claim with a single
``UPDATE ... RETURNING`` inside ``BEGIN IMMEDIATE`` (the approach of Oban's Lite engine
and River's SQLite driver), so two workers can never hold the same job, and a crashed
worker's job comes back when its lease expires. ``complete``, ``fail`` and ``heartbeat``
are fenced by the lease token: a worker that lost its lease changes nothing.

In production this is the job of a queue you do not write yourself (Oban, River,
procrastinate, Celery with a durable broker); labkit writes it by hand because its
behaviour under crashes is the lesson.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import threading
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labkit import dbfile, queries
from labkit.clock import Clock, SystemClock
from labkit.errors import NotFound, StoreError
from labkit.job import Attempt, Job, JobState
from labkit.jobrules import (
    check_claim_limit,
    check_lease_s,
    check_redrive_limit,
    check_same_operation,
    enqueue_params,
    fail_params,
    lease_lost,
    not_dead,
    snooze_params,
)
from labkit.redact import sanitize
from labkit.retry import RetryPolicy

SCHEMA_VERSION = 1
SQL = queries.load("store.sql")
#: How the dead reasons of jobs that died of a transient cause begin: the retry policy's
#: "attempts exhausted" and "deadline passed", and the crash-loop cap's "lease expired".
#: Retrying these later may work; the others (permanent errors) need their cause fixed.
#: At most this long (clock seconds) between sweeps of exhausted expired leases to dead
#: while claims keep finding work; a claim that comes up short always sweeps.
BURY_EVERY_S = 1.0
RETRYABLE_DEAD_REASONS = ("attempts exhausted", "deadline passed", "lease expired")
JOB_DATABASE = dbfile.FileKind(
    noun="database file",
    label="labkit job database",
    meta_table="labkit_meta",
    version_sql=SQL["get_meta"],
    schema_version=SCHEMA_VERSION,
)


@dataclass(frozen=True)
class DeadLetter:
    """A dead job as the operations report shows it."""

    id: int
    kind: str
    queue: str
    key: str
    reason: str
    error_class: str | None
    error: str | None
    attempts: int
    redrives: int
    age_s: float


class JobStore:
    """A durable job queue in one SQLite file.

    ``JobStore(path, clock=None, retry=None, synchronous="NORMAL", rng=None)``: ``clock``
    defaults to the wall clock, ``retry`` to ``RetryPolicy()``, ``rng`` (used for jitter)
    to an unseeded ``random.Random``; pass a seeded one for reproducible runs.
    ``synchronous="FULL"`` makes each commit survive power loss, not just a crash.
    """

    def __init__(
        self,
        path: str | Path,
        clock: Clock | None = None,
        retry: RetryPolicy | None = None,
        synchronous: str = "NORMAL",
        rng: random.Random | None = None,
    ) -> None:
        self.path = Path(path)
        self.clock: Clock = clock or SystemClock()
        self.retry = retry or RetryPolicy()
        self.rng = rng or random.Random()
        if synchronous.upper() not in dbfile.SYNCHRONOUS:
            raise ValueError(f"synchronous must be NORMAL or FULL, not {synchronous!r}")
        self._lock = threading.RLock()
        self._next_bury = float("-inf")
        dbfile.check_file(self.path, JOB_DATABASE)
        self.conn = self._connect(synchronous.upper())
        self._migrate()

    # -- opening -----------------------------------------------------------------------

    def _connect(self, synchronous: str) -> sqlite3.Connection:
        try:
            conn = dbfile.connect(self.path, synchronous=synchronous)
            conn.execute("PRAGMA foreign_keys=ON")
        except sqlite3.OperationalError as exc:
            raise self._explain(exc) from None
        return conn

    def _migrate(self) -> None:
        try:
            with self._tx() as conn:
                # Checked again under the write lock: check_file read the file before
                # another process (a newer labkit) may have migrated it.
                self._refuse_newer(conn)
                dbfile.run_script(conn, SQL["schema"])
                row = conn.execute(SQL["get_meta"], {"name": "schema_version"}).fetchone()
                # Write the version only when it changes: opening a database is not a write.
                if row is None or row[0] != str(SCHEMA_VERSION):
                    conn.execute(
                        SQL["set_meta"], {"name": "schema_version", "value": str(SCHEMA_VERSION)}
                    )
        except sqlite3.OperationalError as exc:
            self.conn.close()
            raise self._explain(exc) from None
        except StoreError:
            self.conn.close()
            raise

    def _refuse_newer(self, conn: sqlite3.Connection) -> None:
        tables = {r[0] for r in conn.execute(dbfile.SQL["table_names"])}
        if "labkit_meta" not in tables:
            return
        row = conn.execute(SQL["get_meta"], {"name": "schema_version"}).fetchone()
        if row is not None and int(row[0]) > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} has labkit schema version {row[0]}, newer than this labkit "
                f"understands ({SCHEMA_VERSION}); it was not modified. Upgrade labkit."
            )

    def _explain(self, exc: sqlite3.Error) -> StoreError:
        return dbfile.explain(self.path, exc)

    def _tx(self) -> AbstractContextManager[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction: all or nothing, one writer at a time."""
        return dbfile.transaction(self.conn, self._lock, self._explain)

    def close(self) -> None:
        with self._lock:
            self.conn.close()

    def __enter__(self) -> JobStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"JobStore({str(self.path)!r})"

    # -- accepting ---------------------------------------------------------------------

    def enqueue(
        self,
        kind: str,
        payload: Any,
        key: str | None = None,
        queue: str = "default",
        run_after: float | None = None,
        max_attempts: int = 5,
        conn: sqlite3.Connection | None = None,
    ) -> tuple[Job, bool]:
        """Accept a job durably; return ``(job, created)``.

        The same ``key`` with the same kind and payload returns the existing job with
        ``created`` False; the same key with a different payload raises
        ``IdempotencyConflict``. With ``conn=``, the insert joins the caller's open
        transaction on that connection, so the job exists only if the caller commits.
        """
        params = enqueue_params(
            kind, payload, key, queue, run_after, max_attempts, self.clock.now()
        )
        if conn is not None:
            if conn.isolation_level is None and not conn.in_transaction:
                raise StoreError(
                    "enqueue(conn=...) needs an open transaction on that connection; run "
                    "conn.execute('BEGIN') first (or use a connection in Python's default "
                    "transaction mode) so the job commits or rolls back with your write"
                )
            self._check_same_file(conn, "enqueue")
            return self._insert(conn, params)
        with self._tx() as own:
            return self._insert(own, params)

    def _check_same_file(self, conn: sqlite3.Connection, operation: str) -> None:
        """Refuse a connection to another file: the job would land in the wrong database."""
        main = next(
            (row[2] for row in conn.execute("PRAGMA database_list") if row[1] == "main"), ""
        )
        try:
            same = bool(main) and os.path.samefile(main, self.path)
        except OSError:
            same = False
        if not same:
            raise StoreError(
                f"{operation}(conn=...) got a connection to "
                f"{main or 'an in-memory database'}, not to this store's file {self.path}; "
                f"open the connection on {self.path} so your write and the job's change "
                "share one transaction"
            )

    def _insert(self, conn: sqlite3.Connection, params: dict[str, Any]) -> tuple[Job, bool]:
        # A cursor of our own, so a caller's connection keeps its own row_factory.
        cur = conn.cursor()
        cur.row_factory = sqlite3.Row
        try:
            row = cur.execute(SQL["insert_job"], params).fetchone()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                raise StoreError(
                    f"enqueue(conn=...) got a connection without the jobs table ({exc}); "
                    f"open it on the store's own file, {self.path}"
                ) from None
            raise
        if row is not None:
            return Job.from_row(row), True
        existing = Job.from_row(cur.execute(SQL["job_by_key"], params).fetchone())
        check_same_operation(existing, params)
        return existing, False

    # -- claiming ----------------------------------------------------------------------

    def claim(
        self, worker: str, queues: Sequence[str] = ("default",), lease_s: float = 30.0
    ) -> Job | None:
        """Lease the next ready job to ``worker``, or return None when nothing is ready."""
        jobs = self.claim_many(worker, 1, queues=queues, lease_s=lease_s)
        return jobs[0] if jobs else None

    def claim_many(
        self,
        worker: str,
        limit: int,
        queues: Sequence[str] = ("default",),
        lease_s: float = 30.0,
    ) -> list[Job]:
        """Lease up to ``limit`` ready jobs in one transaction, oldest due first."""
        if isinstance(queues, str):
            queues = (queues,)
        if len(queues) == 1:
            # One queue: an index-ordered scan that stops after ``limit`` rows.
            return self._claim(
                worker, queues, lease_s, limit, SQL["claim_one_queue"], {"queue": queues[0]}
            )
        return self._claim(worker, queues, lease_s, limit, SQL["claim"])

    def _claim(
        self,
        worker: str,
        queues: Sequence[str],
        lease_s: float,
        limit: int,
        sql: str,
        extra: dict[str, Any] | None = None,
    ) -> list[Job]:
        """Run a claim statement with the bookkeeping every claim shares.

        Other claim policies (per-account caps, serial keys) pass their own ``sql``; it
        must take ``:worker :now :lease_s :limit :queues`` and return the claimed rows.
        """
        if isinstance(queues, str):
            queues = (queues,)
        check_lease_s(lease_s)
        # SQLite reads a negative LIMIT as "no limit": never let -1 claim the whole queue.
        check_claim_limit(limit)
        params = {
            "worker": worker,
            "queues": json.dumps(list(queues)),
            "lease_s": float(lease_s),
            "limit": int(limit),
            "now": self.clock.now(),
            **(extra or {}),
        }
        with self._tx() as conn:
            rows = conn.execute(sql, params).fetchall()
            # The claim never hands out a job whose crashes used up its attempts, so
            # moving such jobs to dead can wait until a claim comes up short (the queue
            # has nothing else to give) or a second has passed: a busy worker does not
            # pay for the sweep on every job.
            if len(rows) < limit or params["now"] >= self._next_bury:
                conn.execute(SQL["bury_exhausted"], params)
                self._next_bury = params["now"] + BURY_EVERY_S
        return sorted((Job.from_row(r) for r in rows), key=lambda j: (j.run_after, j.id))

    # -- finishing ---------------------------------------------------------------------

    def _fenced(
        self,
        name: str,
        job: Job,
        params: dict[str, Any],
        conn: sqlite3.Connection | None = None,
    ) -> Job:
        """Run a statement that only the holder of ``job``'s lease token may run.

        With ``conn``, it runs inside the caller's open transaction (a cursor of our own,
        so the caller's row_factory stays as it was); otherwise in one of ours.
        """
        params = {"id": job.id, "token": job.lease_token, "now": self.clock.now(), **params}
        tx = nullcontext(conn) if conn is not None else self._tx()
        with tx as open_conn:
            cur = open_conn.cursor()
            cur.row_factory = sqlite3.Row
            row = cur.execute(SQL[name], params).fetchone()
            if row is None:
                current = cur.execute(SQL["job_by_id"], {"id": job.id}).fetchone()
        if row is not None:
            return Job.from_row(row)
        if current is None:
            raise NotFound(f"job {job.id} does not exist in {self.path}")
        raise lease_lost(
            name,
            job,
            current["state"],
            current["attempt"],
            current["lease_owner"],
            in_caller_tx=conn is not None,
        )

    def heartbeat(self, job: Job, lease_s: float = 30.0) -> Job:
        """Extend the lease of a job this worker still holds; LeaseLost otherwise."""
        check_lease_s(lease_s)
        return self._fenced("heartbeat", job, {"lease_s": float(lease_s)})

    def complete(
        self, job: Job, result: Any = None, conn: sqlite3.Connection | None = None
    ) -> Job:
        """Mark the job succeeded; LeaseLost (and nothing changed) if the lease moved on.

        With ``conn=`` (a connection to this database with an open transaction) the
        completion joins the caller's transaction: an effect written on ``conn`` and the
        completion commit together or not at all (the ledger pattern). On LeaseLost the
        caller must roll back, which also discards the effect.
        """
        params = {"result": json.dumps(result, default=str)}
        if conn is not None:
            if not conn.in_transaction:
                raise StoreError(
                    "complete(conn=...) needs an open transaction on that connection; run "
                    "conn.execute('BEGIN IMMEDIATE') first so the effect and the completion "
                    "commit together"
                )
            self._check_same_file(conn, "complete")
        return self._fenced("complete", job, params, conn)

    def complete_many(
        self, jobs: Sequence[Job], results: Sequence[Any] | None = None
    ) -> list[Job]:
        """Complete several jobs in ONE transaction (one commit), each fenced by its token.

        Returns the jobs that completed; a job whose lease moved on is left unchanged and
        is missing from the result (the same rule as ``complete``, without the exception,
        so one lost lease does not undo the others).
        """
        results = list(results) if results is not None else [None] * len(jobs)
        done: list[Job] = []
        now = self.clock.now()
        with self._tx() as conn:
            for job, result in zip(jobs, results, strict=True):
                row = conn.execute(
                    SQL["complete"],
                    {"id": job.id, "token": job.lease_token, "now": now,
                     "result": json.dumps(result, default=str)},
                ).fetchone()
                if row is not None:
                    done.append(Job.from_row(row))
        return done

    def fail(self, job: Job, error: BaseException) -> Job:
        """Record a failed attempt: retry_wait with backoff while the policy allows, else dead.

        An ambiguous failure (``ResponseLost``: the effect may have happened) is retried
        only when the job has a natural key (given at enqueue); a keyless job goes dead
        with "outcome unknown" so a person checks the destination before anything repeats.
        """
        previous, window_start = self._retry_state(job)
        params = fail_params(
            self.retry,
            self.rng,
            job,
            error,
            now=self.clock.now(),
            previous=previous,
            window_start=window_start,
        )
        return self._fenced("fail", job, params)

    def _retry_state(self, job: Job) -> tuple[float, float]:
        found = self.conn.execute(SQL["retry_state"], {"id": job.id}).fetchone()
        if found is None:
            return 0.0, job.created_at
        return float(found["last_delay"]), float(found["window_start"])

    def snooze(self, job: Job, delay_s: float, reason: str = "snoozed") -> Job:
        """Put a running job back to wait ``delay_s`` without spending an attempt."""
        return self._fenced("snooze", job, snooze_params(self.clock.now(), delay_s, reason))

    # -- dead letters ------------------------------------------------------------------

    def redrive(self, job_id: int, note: str = "") -> Job:
        """Send one dead job back to pending, with the same key and a fresh attempt budget."""
        with self._tx() as conn:
            before = conn.execute(SQL["job_by_id"], {"id": job_id}).fetchone()
            if before is None:
                raise NotFound(f"job {job_id} does not exist in {self.path}")
            if before["state"] != JobState.DEAD:
                raise not_dead(job_id, before["state"])
            params = {"id": job_id, "now": self.clock.now(), "note": sanitize(note)}
            row = conn.execute(SQL["redrive"], params).fetchone()
            conn.execute(SQL["record_redrive"], {**params, "dead_reason": before["dead_reason"]})
        return Job.from_row(row)

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
        """Redrive at most ``limit`` dead jobs matching the filters, oldest first.

        ``limit`` has no default so that nobody redrives a whole dead-letter queue by
        accident; ``dry_run=True`` returns what would be redriven and changes nothing.
        """
        check_redrive_limit(limit)
        rows = self.conn.execute(
            SQL["dead_matching"],
            {"kind": kind, "queue": queue, "error_class": error_class, "limit": limit},
        ).fetchall()
        chosen = [Job.from_row(r) for r in rows]
        if dry_run:
            return chosen
        return [self.redrive(job.id, note=note) for job in chosen]

    # -- inspection --------------------------------------------------------------------

    def get(self, job_id: int) -> Job:
        """The job with this id; NotFound if there is none."""
        row = self.conn.execute(SQL["job_by_id"], {"id": job_id}).fetchone()
        if row is None:
            raise NotFound(f"job {job_id} does not exist in {self.path}")
        return Job.from_row(row)

    def get_by_key(self, key: str) -> Job | None:
        """The job with this key, or None."""
        row = self.conn.execute(SQL["job_by_key"], {"key": key}).fetchone()
        return None if row is None else Job.from_row(row)

    def jobs(self, state: JobState | str | None = None, limit: int = 1000) -> list[Job]:
        """Jobs by id, optionally only those in ``state``."""
        rows = self.conn.execute(
            SQL["jobs_list"], {"state": None if state is None else str(state), "limit": limit}
        )
        return [Job.from_row(r) for r in rows]

    def counts(self) -> dict[str, int]:
        """Number of jobs in every state (zeros included)."""
        found = {r["state"]: r["n"] for r in self.conn.execute(SQL["counts"])}
        return {state.value: found.get(state.value, 0) for state in JobState}

    def dead_letters(
        self, *, kind: str | None = None, queue: str | None = None, limit: int = 100
    ) -> list[DeadLetter]:
        """Dead jobs, oldest first, with age, reason and attempts: the operations report."""
        now = self.clock.now()
        rows = self.conn.execute(
            SQL["dead_matching"],
            {"kind": kind, "queue": queue, "error_class": None, "limit": limit},
        ).fetchall()
        return [
            DeadLetter(
                id=r["id"],
                kind=r["kind"],
                queue=r["queue"],
                key=r["key"],
                reason=r["dead_reason"] or "",
                error_class=r["error_class"],
                error=r["last_error"],
                attempts=r["attempt"],
                redrives=r["redrives"],
                age_s=now - r["updated_at"],
            )
            for r in rows
        ]

    def prune_finished(self, older_than_s: float) -> int:
        """Delete succeeded jobs (and their history) finished ``older_than_s`` ago or more.

        Returns how many jobs went. A pruned job's key no longer deduplicates: a retry,
        redelivery or scheduler reconciliation arriving later with that key creates a
        new job. Keep keys longer than anything can arrive late. Dead jobs are kept.
        """
        if older_than_s < 0:
            raise ValueError(f"older_than_s must be >= 0 seconds, not {older_than_s!r}")
        params = {"cutoff": self.clock.now() - older_than_s}
        with self._tx() as conn:
            for statement in SQL["prune_finished_history"].split(";"):
                conn.execute(statement, params)
            return conn.execute(SQL["prune_finished"], params).rowcount

    def attempts(self, job_id: int) -> list[Attempt]:
        """The attempt history of one job, oldest first."""
        return [Attempt(**dict(r)) for r in self.conn.execute(SQL["attempts"], {"id": job_id})]
