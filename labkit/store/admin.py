"""The operator's side of a job store: read it, redrive dead jobs, prune finished ones.

Written once for every database driver on top of ``labkit.store.hooks``; the worker's
side (accepting, claiming, finishing) is ``labkit.store.base``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import ClassVar

from labkit import jobargs
from labkit.errors import NotFound
from labkit.job import Attempt, Job, JobState
from labkit.redact import sanitize
from labkit.store.hooks import StoreHooks
from labkit.store.rules import check_redrive_limit, not_dead


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


class StoreAdmin(StoreHooks):
    """Inspection, dead letters, redrive and pruning, the same on every backend."""

    #: The statement ``redrive`` reads the dead job with (PostgreSQL locks the row).
    _REDRIVE_READ: ClassVar[str] = "job_by_id"

    # -- dead letters ------------------------------------------------------------------

    def redrive(self, job_id: int, note: str = "") -> Job:
        """Send one dead job back to pending, with the same key and a fresh attempt budget."""
        jobargs.job_id(job_id)
        jobargs.text("note", note)
        if not jobargs.in_id_range(job_id):
            raise NotFound(f"job {job_id} does not exist in {self._location()}")
        with self._tx() as ex:
            before = ex.execute(self._sql[self._REDRIVE_READ], {"id": job_id}).fetchone()
            if before is None:
                raise NotFound(f"job {job_id} does not exist in {self._location()}")
            if before["state"] != JobState.DEAD:
                raise not_dead(job_id, before["state"])
            params = {"id": job_id, "now": self.clock.now(), "note": sanitize(note)}
            row = ex.execute(self._sql["redrive"], params).fetchone()
            record = {**params, "dead_reason": before["dead_reason"]}
            ex.execute(self._sql["record_redrive"], record)
        assert row is not None  # one writer (or the row lock) kept it dead since the check
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
        for arg, value in (("kind", kind), ("queue", queue), ("error_class", error_class)):
            jobargs.name(arg, value, optional=True)
        jobargs.text("note", note)
        rows = self._rows(
            "dead_matching",
            {"kind": kind, "queue": queue, "error_class": error_class, "limit": limit},
        )
        chosen = [Job.from_row(r) for r in rows]
        if dry_run:
            return chosen
        return [self.redrive(job.id, note=note) for job in chosen]

    def dead_by_reason(
        self,
        prefixes: Sequence[str],
        *,
        kind: str | None = None,
        batch: int = 500,
    ) -> Iterator[Job]:
        """Dead jobs whose reason starts with one of ``prefixes``, oldest first, read a page
        of ``batch`` rows at a time: memory stays flat however long the dead-letter queue."""
        jobargs.name("kind", kind, optional=True)
        jobargs.count("batch", batch)
        # Checked here, not at the first next(): a bad argument fails at the call.
        return self._dead_pages(prefixes, kind, batch)

    def _dead_pages(self, prefixes: Sequence[str], kind: str | None, batch: int) -> Iterator[Job]:
        after: tuple[float, int] = (float("-inf"), 0)
        while True:
            params = {
                # A list parameter, passed the way the backend passes a claim's queues.
                "prefixes": self._queues_param([str(p) for p in prefixes]),
                "kind": kind,
                "after_at": after[0],
                "after_id": after[1],
                "limit": batch,
            }
            page = [Job.from_row(r) for r in self._rows("dead_by_reason", params)]
            yield from page
            if len(page) < batch:
                return
            after = (page[-1].updated_at, page[-1].id)

    def count_dead_by_reason(
        self, prefixes: Sequence[str], *, kind: str | None = None, matching: bool = True
    ) -> int:
        """How many dead jobs have (``matching``) or have not a reason starting with one
        of ``prefixes``, optionally of one ``kind``."""
        jobargs.name("kind", kind, optional=True)
        params = {
            "prefixes": self._queues_param([str(p) for p in prefixes]),
            "kind": kind,
            "matching": bool(matching),
        }
        return int(self._rows("count_dead_by_reason", params)[0]["n"])

    # -- inspection --------------------------------------------------------------------

    def get(self, job_id: int) -> Job:
        """The job with this id; NotFound if there is none."""
        jobargs.job_id(job_id)
        rows = self._rows("job_by_id", {"id": job_id}) if jobargs.in_id_range(job_id) else []
        if not rows:
            raise NotFound(f"job {job_id} does not exist in {self._location()}")
        return Job.from_row(rows[0])

    def get_by_key(self, key: str) -> Job | None:
        """The job with this key, or None."""
        jobargs.name("key", key)
        rows = self._rows("job_by_key", {"key": key})
        return Job.from_row(rows[0]) if rows else None

    def jobs(self, state: JobState | str | None = None, limit: int = 1000) -> list[Job]:
        """Jobs by id, optionally only those in ``state``."""
        if state is not None and state not in set(JobState):
            known = ", ".join(s.value for s in JobState)
            raise ValueError(f"state must be one of {known} (or None), not {state!r}")
        jobargs.count("limit", limit)
        params = {"state": None if state is None else str(state), "limit": limit}
        return [Job.from_row(r) for r in self._rows("jobs_list", params)]

    def next_due(self, queues: Sequence[str] = ("default",)) -> float | None:
        """When the next job of ``queues`` becomes claimable (a wait ends or a lease
        expires), or None when none is waiting: what a draining worker sleeps until."""
        rows = self._rows("next_due", {"queues": self._queues_param(jobargs.queues(queues))})
        due = rows[0]["due"] if rows else None
        return None if due is None else float(due)

    def counts(self) -> dict[str, int]:
        """Number of jobs in every state (zeros included)."""
        found = {r["state"]: r["n"] for r in self._rows("counts")}
        return {state.value: found.get(state.value, 0) for state in JobState}

    def dead_letters(
        self, *, kind: str | None = None, queue: str | None = None, limit: int = 100
    ) -> list[DeadLetter]:
        """Dead jobs, oldest first, with age, reason and attempts: the operations report."""
        jobargs.name("kind", kind, optional=True)
        jobargs.name("queue", queue, optional=True)
        jobargs.count("limit", limit)
        now = self.clock.now()
        rows = self._rows(
            "dead_matching", {"kind": kind, "queue": queue, "error_class": None, "limit": limit}
        )
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
        The pruned attempts are first added to ``pruned_attempts`` (by outcome, error
        class and duration bucket), so the totals ``labkit.metrics`` reports never fall.
        """
        age = jobargs.seconds("older_than_s", older_than_s, allow_zero=True)
        params = {"cutoff": self.clock.now() - age}
        with self._tx() as ex:
            # First into the kept totals, in the same transaction: the attempt counts the
            # metrics report never fall when their rows go (labkit.metrics).
            ex.execute(self._sql["fold_pruned_attempts"], params)
            # sqlite3 runs one statement per execute, so a multi-statement entry is split.
            for statement in self._sql["prune_finished_history"].split(";"):
                ex.execute(statement, params)
            rowcount: int = ex.execute(self._sql["prune_finished"], params).rowcount
            return rowcount

    def attempts(self, job_id: int) -> list[Attempt]:
        """The attempt history of one job, oldest first."""
        if not jobargs.in_id_range(jobargs.job_id(job_id)):
            return []
        return [Attempt(**dict(r)) for r in self._rows("attempts", {"id": job_id})]
