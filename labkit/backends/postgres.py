"""The job store contract on PostgreSQL, for users who outgrow one machine.

Same rules as ``labkit.store.JobStore`` (SQLite), same tests (``tests/contract``): leases
with a ``<id>.<claim number>`` token, attempt counted at claim, ``complete``/``fail``/
``heartbeat`` fenced on the token, expired leases reclaimable, the crash-loop cap, retry
decisions through ``RetryPolicy``, sanitized dead letters, limited redrive. What changes
is how claims stay exclusive: SQLite has one writer at a time; PostgreSQL has many, so
the claim locks the rows it picks with ``FOR UPDATE SKIP LOCKED`` and concurrent workers
skip them instead of waiting or taking them twice. History is kept by plpgsql triggers,
and time still comes from the injected clock as ``:now`` (SQL never calls ``now()``).

Every store lives in its own schema (``labkit`` unless told), with a ``labkit_meta``
table holding the schema version; SQL is in ``labkit/sql/postgres.sql``.

In production take a maintained PostgreSQL queue instead: procrastinate (Python),
Oban-style queues such as Oban for Elixir, River for Go, or Celery/RQ with a durable
broker. labkit writes this one by hand so the lesson can show every line of the claim.
"""

from __future__ import annotations

import json
import random
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import sql
from psycopg.pq import TransactionStatus
from psycopg.rows import dict_row

from labkit import queries
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
from labkit.redact import redact, sanitize
from labkit.retry import RetryPolicy
from labkit.store import BURY_EVERY_S, SCHEMA_VERSION, DeadLetter

_NAMED = re.compile(r"(?<![:\w]):([a-z_][a-z0-9_]*)")
_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
DEFAULT_SCHEMA = "labkit"


def _pyformat(text: str) -> str:
    """``:name`` (the house style of labkit/sql) to psycopg's ``%(name)s``."""
    return _NAMED.sub(r"%(\1)s", text.replace("%", "%%"))


_RAW = queries.load("postgres.sql")
SQL = {
    name: text if name in ("schema", "create_schema") else _pyformat(text)
    for name, text in _RAW.items()
}


class PostgresJobStore:
    """A durable job queue in one PostgreSQL schema.

    ``PostgresJobStore(dsn, clock=None, retry=None, rng=None, schema=None)``: ``dsn`` is
    a libpq URL or key=value string; ``schema`` (default ``labkit``) is created if
    missing and holds every table, so a store never collides with an application's own
    tables; ``clock``, ``retry`` and ``rng`` mean what they mean for ``JobStore``.
    """

    def __init__(
        self,
        dsn: str,
        clock: Clock | None = None,
        retry: RetryPolicy | None = None,
        rng: random.Random | None = None,
        schema: str | None = None,
    ) -> None:
        self.schema = DEFAULT_SCHEMA if schema is None else schema
        if not isinstance(self.schema, str) or not _SCHEMA_NAME.match(self.schema):
            raise ValueError(
                f"schema must be a lower-case SQL identifier (letters, digits, _; at most 63), "
                f"not {self.schema!r}"
            )
        self.dsn = dsn
        self.clock: Clock = clock or SystemClock()
        self.retry = retry or RetryPolicy()
        self.rng = rng or random.Random()
        self._lock = threading.RLock()
        self._next_bury = float("-inf")
        self.conn = self.connect()
        try:
            self._migrate()
        except BaseException:
            self.conn.close()
            raise

    # -- opening -----------------------------------------------------------------------

    def connect(self, autocommit: bool = True) -> psycopg.Connection[dict[str, Any]]:
        """A new connection to this store's database with its schema first on the path.

        Use one (``autocommit=False``) for ``enqueue(conn=...)`` / ``complete(conn=...)``
        so your own writes and the job's change share a transaction.
        """
        try:
            conn = psycopg.connect(self.dsn, autocommit=True, row_factory=dict_row)
        except psycopg.OperationalError as exc:
            raise StoreError(
                f"cannot connect to PostgreSQL at {redact(self._where())}: "
                f"{redact(str(exc).strip())}. Check that the server is running and the DSN "
                "(host, port, database, user) is right."
            ) from None
        conn.execute(SQL["use_schema"], {"schema": self.schema})
        conn.autocommit = autocommit
        return conn

    def _where(self) -> str:
        return self.dsn if "://" in self.dsn else f"'{self.dsn}'"

    def _migrate(self) -> None:
        with self._tx() as conn:
            conn.execute(SQL["migration_lock"], {"schema": self.schema})
            conn.execute(sql.SQL(SQL["create_schema"]).format(schema=sql.Identifier(self.schema)))
            tables = {r["table_name"] for r in conn.execute(SQL["table_names"])}
            row = (
                conn.execute(SQL["get_meta"], {"name": "schema_version"}).fetchone()
                if "labkit_meta" in tables
                else None
            )
            if row is not None and int(row["value"]) > SCHEMA_VERSION:
                raise StoreError(
                    f"schema {self.schema} has labkit schema version {row['value']}, newer "
                    f"than this labkit understands ({SCHEMA_VERSION}); it was not "
                    "modified. Upgrade labkit."
                )
            # Opening a current schema changes nothing: re-creating triggers would lock
            # the jobs table against every worker already running on it.
            if row is None or row["value"] != str(SCHEMA_VERSION):
                conn.execute(SQL["schema"])
                conn.execute(
                    SQL["set_meta"], {"name": "schema_version", "value": str(SCHEMA_VERSION)}
                )

    @contextmanager
    def _tx(self) -> Iterator[psycopg.Connection[dict[str, Any]]]:
        """One transaction on the store's connection: all or nothing."""
        with self._lock, self.conn.transaction():
            yield self.conn

    def close(self) -> None:
        """Release the store's connection."""
        with self._lock:
            self.conn.close()

    def __enter__(self) -> PostgresJobStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PostgresJobStore({redact(self.dsn)!r}, schema={self.schema!r})"

    # -- a caller's transaction --------------------------------------------------------

    @contextmanager
    def _in_caller_tx(
        self, conn: psycopg.Connection[Any], operation: str
    ) -> Iterator[psycopg.Cursor[dict[str, Any]]]:
        """A cursor on the caller's open transaction, pointed at this store's schema.

        The schema is set with ``SET LOCAL`` semantics and given back afterwards, so the
        caller's own statements see the search_path they had. Refuses a connection to
        another database or one without a transaction that will commit with the caller.
        """
        status = conn.info.transaction_status
        if conn.autocommit and status != TransactionStatus.INTRANS:
            raise StoreError(
                f"{operation}(conn=...) needs an open transaction on that connection; use a "
                "connection with autocommit off (store.connect(autocommit=False)) or open "
                "`with conn.transaction():` first, so the job commits or rolls back with "
                "your write"
            )
        if status == TransactionStatus.INERROR:
            raise StoreError(
                f"{operation}(conn=...) got a connection whose transaction already failed; "
                "roll it back and start again"
            )
        if conn.info.dbname != self.conn.info.dbname or conn.info.host != self.conn.info.host:
            raise StoreError(
                f"{operation}(conn=...) got a connection to database {conn.info.dbname!r} on "
                f"{conn.info.host}, not this store's {self.conn.info.dbname!r} on "
                f"{self.conn.info.host}; open it with store.connect() so your write and the "
                "job's change share one transaction"
            )
        cur = conn.cursor(row_factory=dict_row)
        previous = cur.execute(SQL["use_schema_locally"], {"schema": self.schema}).fetchone()
        try:
            yield cur
        finally:
            if previous is not None and conn.info.transaction_status == TransactionStatus.INTRANS:
                cur.execute(SQL["restore_schema_locally"], {"previous": previous["previous"]})

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
        """Accept a job durably; return ``(job, created)``.

        The same ``key`` with the same kind and payload returns the existing job with
        ``created`` False; the same key with a different payload raises
        ``IdempotencyConflict``. With ``conn=`` (a psycopg connection to this database),
        the insert joins the caller's open transaction: the job exists only if the
        caller commits.
        """
        params = enqueue_params(
            kind, payload, key, queue, run_after, max_attempts, self.clock.now()
        )
        if conn is not None:
            with self._in_caller_tx(conn, "enqueue") as cur:
                return self._insert(cur, params)
        with self._tx() as own:
            return self._insert(own.cursor(), params)

    def _insert(
        self, cur: psycopg.Cursor[dict[str, Any]], params: dict[str, Any]
    ) -> tuple[Job, bool]:
        row = cur.execute(SQL["insert_job"], params).fetchone()
        if row is not None:
            return Job.from_row(row), True
        found = cur.execute(SQL["job_by_key"], params).fetchone()
        if found is None:
            # ON CONFLICT saw the key, yet it is gone: pruned in between. Nothing was written.
            raise StoreError(f"key {params['key']!r} vanished while enqueueing; enqueue again")
        existing = Job.from_row(found)
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
        """Lease up to ``limit`` ready jobs in one transaction, oldest due first.

        Rows another claimer has locked are skipped, not waited for: two workers never
        get the same job, and neither blocks the other.
        """
        if isinstance(queues, str):
            queues = (queues,)
        check_lease_s(lease_s)
        check_claim_limit(limit)
        params: dict[str, Any] = {
            "worker": worker,
            "queues": list(queues),
            "lease_s": float(lease_s),
            "limit": limit,
            "now": self.clock.now(),
        }
        with self._tx() as conn:
            rows = conn.execute(SQL["claim"], params).fetchall()
            # As in JobStore: the claim never hands out an exhausted lease, so burying
            # them waits until a claim comes up short or BURY_EVERY_S has passed.
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
        cur: psycopg.Cursor[dict[str, Any]] | None = None,
    ) -> Job:
        """Run a statement that only the holder of ``job``'s lease token may run."""
        params = {"id": job.id, "token": job.lease_token, "now": self.clock.now(), **params}
        if cur is not None:
            row = cur.execute(SQL[name], params).fetchone()
            current = None if row else cur.execute(SQL["job_by_id"], {"id": job.id}).fetchone()
        else:
            with self._tx() as conn:
                row = conn.execute(SQL[name], params).fetchone()
                current = None if row else conn.execute(SQL["job_by_id"], {"id": job.id}).fetchone()
        if row is not None:
            return Job.from_row(row)
        if current is None:
            raise NotFound(f"job {job.id} does not exist in schema {self.schema}")
        raise lease_lost(
            name,
            job,
            current["state"],
            current["attempt"],
            current["lease_owner"],
            in_caller_tx=cur is not None,
        )

    def heartbeat(self, job: Job, lease_s: float = 30.0) -> Job:
        """Extend the lease of a job this worker still holds; LeaseLost otherwise."""
        check_lease_s(lease_s)
        return self._fenced("heartbeat", job, {"lease_s": float(lease_s)})

    def complete(self, job: Job, result: Any = None, conn: Any = None) -> Job:
        """Mark the job succeeded; LeaseLost (and nothing changed) if the lease moved on.

        With ``conn=`` (a psycopg connection to this database in an open transaction) the
        completion joins the caller's transaction, so an effect written on ``conn`` and
        the completion commit together; on LeaseLost the caller must roll back.
        """
        params = {"result": json.dumps(result, default=str)}
        if conn is None:
            return self._fenced("complete", job, params)
        with self._in_caller_tx(conn, "complete") as cur:
            return self._fenced("complete", job, params, cur)

    def complete_many(self, jobs: Sequence[Job], results: Sequence[Any] | None = None) -> list[Job]:
        """Complete several jobs in ONE transaction, each fenced by its token.

        Returns the jobs that completed; a job whose lease moved on is left unchanged and
        missing from the result.
        """
        results = list(results) if results is not None else [None] * len(jobs)
        done: list[Job] = []
        now = self.clock.now()
        with self._tx() as conn:
            for job, result in zip(jobs, results, strict=True):
                row = conn.execute(
                    SQL["complete"],
                    {
                        "id": job.id,
                        "token": job.lease_token,
                        "now": now,
                        "result": json.dumps(result, default=str),
                    },
                ).fetchone()
                if row is not None:
                    done.append(Job.from_row(row))
        return done

    def fail(self, job: Job, error: BaseException) -> Job:
        """Record a failed attempt: retry_wait with backoff while the policy allows, else dead.

        The decision is ``labkit.jobrules.fail_params``, the one the SQLite store uses.
        """
        with self._lock:
            found = self.conn.execute(SQL["retry_state"], {"id": job.id}).fetchone()
        previous, window_start = (
            (0.0, job.created_at)
            if found is None
            else (float(found["last_delay"]), float(found["window_start"]))
        )
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

    def snooze(self, job: Job, delay_s: float, reason: str = "snoozed") -> Job:
        """Put a running job back to wait ``delay_s`` without spending an attempt."""
        return self._fenced("snooze", job, snooze_params(self.clock.now(), delay_s, reason))

    # -- dead letters ------------------------------------------------------------------

    def redrive(self, job_id: int, note: str = "") -> Job:
        """Send one dead job back to pending, with the same key and a fresh attempt budget."""
        with self._tx() as conn:
            before = conn.execute(SQL["job_by_id_for_update"], {"id": job_id}).fetchone()
            if before is None:
                raise NotFound(f"job {job_id} does not exist in schema {self.schema}")
            if before["state"] != JobState.DEAD:
                raise not_dead(job_id, before["state"])
            params = {"id": job_id, "now": self.clock.now(), "note": sanitize(note)}
            row = conn.execute(SQL["redrive"], params).fetchone()
            conn.execute(SQL["record_redrive"], {**params, "dead_reason": before["dead_reason"]})
        assert row is not None  # the row lock kept it dead between the check and the update
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

        ``limit`` has no default so nobody redrives a dead-letter queue by accident;
        ``dry_run=True`` returns what would be redriven and changes nothing.
        """
        check_redrive_limit(limit)
        chosen = [Job.from_row(r) for r in self._dead(kind, queue, error_class, limit)]
        if dry_run:
            return chosen
        return [self.redrive(job.id, note=note) for job in chosen]

    def _dead(
        self, kind: str | None, queue: str | None, error_class: str | None, limit: int
    ) -> list[dict[str, Any]]:
        params = {"kind": kind, "queue": queue, "error_class": error_class, "limit": limit}
        with self._lock:
            return self.conn.execute(SQL["dead_matching"], params).fetchall()

    # -- inspection --------------------------------------------------------------------

    def _rows(self, name: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        with self._lock:
            return self.conn.execute(SQL[name], params or {}).fetchall()

    def get(self, job_id: int) -> Job:
        """The job with this id; NotFound if there is none."""
        rows = self._rows("job_by_id", {"id": job_id})
        if not rows:
            raise NotFound(f"job {job_id} does not exist in schema {self.schema}")
        return Job.from_row(rows[0])

    def get_by_key(self, key: str) -> Job | None:
        """The job with this key, or None."""
        rows = self._rows("job_by_key", {"key": key})
        return Job.from_row(rows[0]) if rows else None

    def jobs(self, state: JobState | str | None = None, limit: int = 1000) -> list[Job]:
        """Jobs by id, optionally only those in ``state``."""
        params = {"state": None if state is None else str(state), "limit": limit}
        return [Job.from_row(r) for r in self._rows("jobs_list", params)]

    def counts(self) -> dict[str, int]:
        """Number of jobs in every state (zeros included)."""
        found = {r["state"]: r["n"] for r in self._rows("counts")}
        return {state.value: found.get(state.value, 0) for state in JobState}

    def dead_letters(
        self, *, kind: str | None = None, queue: str | None = None, limit: int = 100
    ) -> list[DeadLetter]:
        """Dead jobs, oldest first, with age, reason and attempts: the operations report."""
        now = self.clock.now()
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
            for r in self._dead(kind, queue, None, limit)
        ]

    def prune_finished(self, older_than_s: float) -> int:
        """Delete succeeded jobs (and their history) finished ``older_than_s`` ago or more.

        A pruned job's key no longer deduplicates; dead jobs are kept.
        """
        if older_than_s < 0:
            raise ValueError(f"older_than_s must be >= 0 seconds, not {older_than_s!r}")
        params = {"cutoff": self.clock.now() - older_than_s}
        with self._tx() as conn:
            conn.execute(SQL["prune_finished_history"], params)
            return conn.execute(SQL["prune_finished"], params).rowcount

    def attempts(self, job_id: int) -> list[Attempt]:
        """The attempt history of one job, oldest first."""
        return [Attempt(**r) for r in self._rows("attempts", {"id": job_id})]
