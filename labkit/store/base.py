"""The worker's side of a job store, written once for every database driver.

``labkit.store.sqlite.JobStore`` (sqlite3) and ``labkit.backends.postgres.store.PostgresJobStore``
(psycopg) keep the same contract (``labkit.store.contract``) with different SQL. Around that
SQL the flow is the same: enqueue is insert-or-existing plus the conflict check, a claim
does the same bookkeeping and the same lazy bury, the fenced statements raise the same
``LeaseLost``. ``StoreBase`` holds that flow, so a rule or a message cannot drift between
backends; each backend supplies only what its driver does differently, through the hooks
of ``labkit.store.hooks``. The operator's side (reads, redrive, prune) is
``labkit.store.admin``, which ``StoreBase`` extends.

The pure rules (argument checks, the retry decision, error texts) are in
``labkit.store.rules``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from labkit import jobargs
from labkit.errors import NotFound, StoreError
from labkit.job import Job, JobState
from labkit.store.admin import DeadLetter, StoreAdmin
from labkit.store.hooks import Executor
from labkit.store.rules import (
    check_claim_limit,
    check_lease_s,
    check_same_operation,
    enqueue_batch_rows,
    enqueue_params,
    fail_params,
    lease_lost,
    result_json,
    row_params,
    snooze_params,
    stored_result,
)

__all__ = [
    "BURY_EVERY_S",
    "COMPLETE_COLUMNS",
    "INSERT_COLUMNS",
    "DeadLetter",
    "Executor",
    "StoreBase",
]

#: At most this long (clock seconds) between sweeps of exhausted expired leases to dead
#: while claims keep finding work; a claim that comes up short always sweeps.
BURY_EVERY_S = 1.0
def _due_order(job: Job) -> tuple[float, int]:
    return (job.run_after, job.id)


#: The columns of the batch statements, in the order of each row tuple.
INSERT_COLUMNS = (
    "kinds", "queues", "keys", "fingerprints", "payloads", "max_attempts", "run_afters"
)
COMPLETE_COLUMNS = ("ids", "tokens", "results")


class StoreBase(StoreAdmin):
    """The driver-independent operations of a job store; subclasses supply the hooks."""

    _next_bury: float

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
        ``IdempotencyConflict``. With ``conn=`` (a connection to this store's database),
        the insert joins the caller's open transaction on that connection, so the job
        exists only if the caller commits.
        """
        params = enqueue_params(
            kind, payload, key, queue, run_after, max_attempts, self.clock.now()
        )
        if conn is not None:
            with self._in_caller_tx(conn, "enqueue") as cur:
                return self._insert(cur, params)
        inserted = self._statement(self._sql["insert_job"], params)
        if inserted:
            return Job.from_row(inserted[0]), True
        # The key was taken: the existing job is read after, outside the insert (as the
        # key rules need only what a committed job says; _insert does the same in one
        # transaction for a caller's connection).
        found = self._rows("job_by_key", params)
        if not found:
            raise StoreError(f"key {params['key']!r} vanished while enqueueing; enqueue again")
        existing = Job.from_row(found[0])
        check_same_operation(existing, params)
        return existing, False

    def _insert(self, ex: Executor, params: dict[str, Any]) -> tuple[Job, bool]:
        row = ex.execute(self._sql["insert_job"], params).fetchone()
        if row is not None:
            return Job.from_row(row), True
        found = ex.execute(self._sql["job_by_key"], params).fetchone()
        if found is None:
            # The insert saw the key, yet it is gone: pruned in between. Nothing was written.
            raise StoreError(f"key {params['key']!r} vanished while enqueueing; enqueue again")
        existing = Job.from_row(found)
        check_same_operation(existing, params)
        return existing, False

    def enqueue_many(
        self,
        kind: str,
        payloads: Sequence[Any],
        keys: Sequence[str | None] | None = None,
        queue: str = "default",
        run_after: float | None = None,
        max_attempts: int = 5,
    ) -> list[tuple[int, bool]]:
        """Accept a batch of jobs of one kind in ONE transaction (one commit); return
        ``(job id, created)`` per payload, in order.

        The rules of ``enqueue`` hold for every job: a key already taken by the same
        kind and payload gives the existing job's id with ``created`` False, the same key
        with another payload raises ``IdempotencyConflict``, and a bad argument raises
        before anything is written. A conflict or an error anywhere writes nothing of the
        batch. Returns ids rather than ``Job`` objects: building a ``Job`` per accepted job
        is most of what a batch would otherwise spend (bench/NOTES.md).
        """
        keys = list(keys) if keys is not None else [None] * len(payloads)
        if len(keys) != len(payloads):
            raise ValueError(
                f"keys has {len(keys)} entries for {len(payloads)} payloads; give one key "
                "per payload (None for a generated one), or no keys at all"
            )
        now = self.clock.now()
        rows = enqueue_batch_rows(kind, payloads, keys, queue, run_after, max_attempts, now)
        if not rows:
            return []
        params = {"now": now, **self._batch_param(rows, INSERT_COLUMNS)}
        with self._tx() as ex:
            ids = {r["key"]: (r["id"], True) for r in ex.execute(self._sql["insert_jobs"], params)}
            # Every job the insert did not create must be the operation its key names:
            # keys taken before, and any repeat of a key inside the batch.
            first: set[str] = set()
            taken = []
            for row in rows:
                if row[2] not in ids or row[2] in first:
                    taken.append(row_params(row))
                first.add(row[2])
            if taken:
                found = {
                    r["key"]: Job.from_row(r)
                    for r in ex.execute(
                        self._sql["jobs_by_keys"],
                        {"keys": self._queues_param([p["key"] for p in taken])},
                    )
                }
                for p in taken:
                    existing = found.get(p["key"])
                    if existing is None:
                        raise StoreError(
                            f"key {p['key']!r} vanished while enqueueing; enqueue again"
                        )
                    # Raises IdempotencyConflict: the transaction rolls back, nothing stays.
                    check_same_operation(existing, p)
                    ids.setdefault(p["key"], (existing.id, False))
        # A key given twice in the batch: the first created the job, the second finds it.
        out, seen = [], set()
        for row in rows:
            job_id, created = ids[row[2]]
            out.append((job_id, created and row[2] not in seen))
            seen.add(row[2])
        return out

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
        return self.claim_with(worker, queues, lease_s, limit, self._sql["claim"])

    def claim_with(
        self,
        worker: str,
        queues: Sequence[str],
        lease_s: float,
        limit: int,
        sql: str,
        extra: dict[str, Any] | None = None,
    ) -> list[Job]:
        """Run a claim statement with the bookkeeping every claim shares: the seam for policies.

        Other claim policies (per-account caps, serial keys: ``labkit.patterns.queues``)
        pass their own ``sql`` in this store's parameter style; it must take ``:worker
        :now :lease_s :limit :queues`` (and the names in ``extra``) and return the claimed
        rows. Arguments are checked, leases and burying work as in ``claim``.
        """
        jobargs.name("worker", worker)
        queues = jobargs.queues(queues)
        lease = check_lease_s(lease_s)
        # SQLite reads a negative LIMIT as "no limit": never let -1 claim the whole queue.
        check_claim_limit(limit)
        params = {
            "worker": worker,
            "queues": self._queues_param(queues),
            "lease_s": lease,
            "limit": limit,
            "now": self.clock.now(),
            **(extra or {}),
        }
        # Repeating a claim after a dropped connection is harmless: a job the lost one may
        # have leased comes back when its lease expires.
        rows = self._statement(sql, params, again_if_dropped=True)
        # The claim never hands out a job whose crashes used up its attempts, so moving
        # such jobs to dead can wait until a claim comes up short (the queue has nothing
        # else to give) or a second has passed: a busy worker does not pay for the sweep
        # on every job. The sweep is a transaction of its own: nothing ties it to the claim.
        if len(rows) < limit or params["now"] >= self._next_bury:
            self._statement(self._sql["bury_exhausted"], params, again_if_dropped=True)
            self._next_bury = params["now"] + BURY_EVERY_S
        jobs = Job.from_rows(rows)
        jobs.sort(key=_due_order)
        return jobs

    # -- finishing ---------------------------------------------------------------------

    def _fenced(
        self,
        name: str,
        job: Job,
        params: dict[str, Any],
        cur: Executor | None = None,
        rebuild: Callable[[Any], Job] = Job.from_row,
        alone: bool = False,
    ) -> Job:
        """Run a statement that only the holder of ``job``'s lease token may run.

        With ``cur`` (from ``_in_caller_tx``) it runs inside the caller's open
        transaction; otherwise in one of the store's own, or with ``alone`` as a
        ``_statement`` (the read that explains a lost lease then follows it, outside).
        ``rebuild(row)`` makes the returned ``Job`` from the row the statement returns
        (the whole row by default).
        """
        params = {"id": job.id, "token": job.lease_token, "now": self.clock.now(), **params}
        if alone and cur is None:
            found = self._statement(self._sql[name], params)
            row = found[0] if found else None
            if row is None:
                read = self._rows("job_by_id", {"id": job.id})
                current = read[0] if read else None
        else:
            tx: AbstractContextManager[Any] = (
                nullcontext(cur) if cur is not None else self._tx()
            )
            with tx as ex:
                row = ex.execute(self._sql[name], params).fetchone()
                if row is None:
                    current = ex.execute(self._sql["job_by_id"], {"id": job.id}).fetchone()
        if row is not None:
            return rebuild(row)
        if current is None:
            raise NotFound(f"job {job.id} does not exist in {self._location()}")
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
        return self._fenced("heartbeat", job, {"lease_s": check_lease_s(lease_s)})

    def complete(self, job: Job, result: Any = None, conn: Any = None) -> Job:
        """Mark the job succeeded; LeaseLost (and nothing changed) if the lease moved on.

        With ``conn=`` (a connection to this database with an open transaction) the
        completion joins the caller's transaction: an effect written on ``conn`` and the
        completion commit together or not at all (the ledger pattern). On LeaseLost the
        caller must roll back, which also discards the effect.
        """
        text = result_json(result)

        def stored(row: Any) -> Job:
            # The token matched, so since this worker's claim only a heartbeat can have
            # touched the row, in columns complete sets again: the caller's Job with what
            # the statement set IS the stored row, without reading it back (bench/NOTES.md).
            return job.evolve(
                state=JobState.SUCCEEDED, result=stored_result(text), lease_token=None,
                lease_until=None, updated_at=row["updated_at"],
            )

        params = {"result": text}
        if conn is None:
            return self._fenced("complete", job, params, rebuild=stored, alone=True)
        with self._in_caller_tx(conn, "complete") as cur:
            return self._fenced("complete", job, params, cur, rebuild=stored)

    def complete_many(
        self, jobs: Sequence[Job], results: Sequence[Any] | None = None
    ) -> list[Job]:
        """Complete several jobs in ONE statement and one commit, each fenced by its token.

        Returns the jobs that completed, as the database now holds them; a job whose lease
        moved on is left unchanged and is missing from the result (the same rule as
        ``complete``, without the exception, so one lost lease does not undo the others).
        The statement returns only the ids that finished: the rest of each returned job is
        the caller's own ``Job`` with the columns the statement set.
        """
        results = list(results) if results is not None else [None] * len(jobs)
        if len(results) != len(jobs):
            raise ValueError(
                f"results has {len(results)} entries for {len(jobs)} jobs; give one result "
                "per job, or none at all"
            )
        if not jobs:
            return []
        now = self.clock.now()
        # A job listed twice is completed once, with its first result.
        firsts: dict[int, tuple[Job, str]] = {}
        for job, result in zip(jobs, results, strict=True):
            if job.id not in firsts:
                firsts[job.id] = (job, result_json(result))
        rows = [(job.id, job.lease_token, text) for job, text in firsts.values()]
        params = {"now": now, **self._batch_param(rows, COMPLETE_COLUMNS)}
        with self._tx() as ex:
            finished = {r["id"] for r in ex.execute(self._sql["complete_batch"], params)}
        done: list[Job] = []
        changes = {"state": JobState.SUCCEEDED, "lease_token": None, "lease_until": None,
                   "updated_at": now}
        for job, text in firsts.values():
            if job.id in finished:
                done.append(
                    job.evolve(**changes, result=stored_result(text))
                )
        return done

    def fail(self, job: Job, error: BaseException) -> Job:
        """Record a failed attempt: retry_wait with backoff while the policy allows, else dead.

        A maybe-done failure (a read timeout, a 500, ``ResponseLost``: the effect may
        have happened) is retried
        only when the job has a natural key (given at enqueue); a keyless job goes dead
        with "outcome unknown" so a person checks the destination before anything repeats.
        """
        found = self._rows("retry_state", {"id": job.id})
        previous, window_start = (
            (0.0, job.created_at)
            if not found
            else (float(found[0]["last_delay"]), float(found[0]["window_start"]))
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

    def claim_transaction(self) -> AbstractContextManager[Any]:
        """One transaction of the store's own, for a policy that must hold locks around a claim.

        ``claim_with`` inside it runs on the same connection and commits with it.
        """
        return self._tx()

    def snooze(self, job: Job, delay_s: float, reason: str = "snoozed") -> Job:
        """Put a running job back to wait ``delay_s`` without spending an attempt."""
        return self._fenced("snooze", job, snooze_params(self.clock.now(), delay_s, reason))
