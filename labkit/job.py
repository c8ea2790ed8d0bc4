"""What a job is: its states, and the frozen record the store hands out."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class JobState(StrEnum):
    """The states of a job and the only moves between them.

    ============  ==============================================================
    from          to
    ============  ==============================================================
    pending       running (claim)
    running       succeeded (complete), retry_wait (transient failure),
                  dead (permanent failure, attempts or deadline used up),
                  running (lease expired and another worker claimed it)
    retry_wait    running (claim once ``run_after`` has passed)
    pending,      cancelled (its owner takes it back before any worker has it:
    retry_wait    ``labkit.integrations.http``'s ``DELETE``)
    dead          pending (redrive, and only redrive)
    succeeded     nothing: it is final
    cancelled     nothing: it is final, and not a dead letter (no operator has
                  anything to fix, and a redrive must not bring it back)
    ============  ==============================================================

    Oban (https://hexdocs.pm/oban/job_lifecycle.html) and River keep ``cancelled`` apart
    from their dead-letter state (``discarded``) for the same reason.
    """

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    RETRY_WAIT = "retry_wait"
    DEAD = "dead"
    CANCELLED = "cancelled"


TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    JobState.PENDING: frozenset({JobState.RUNNING, JobState.CANCELLED}),
    JobState.RUNNING: frozenset(
        {JobState.SUCCEEDED, JobState.RETRY_WAIT, JobState.DEAD, JobState.RUNNING}
    ),
    JobState.RETRY_WAIT: frozenset({JobState.RUNNING, JobState.CANCELLED}),
    JobState.DEAD: frozenset({JobState.PENDING}),
    JobState.SUCCEEDED: frozenset(),
    JobState.CANCELLED: frozenset(),
}


@dataclass(frozen=True)
class Job:
    """A snapshot of one job row. Change a job only through the store."""

    id: int
    kind: str
    queue: str
    key: str
    fingerprint: str
    payload: Any
    state: JobState
    attempt: int
    max_attempts: int
    run_after: float
    lease_owner: str | None
    lease_until: float | None
    lease_token: str | None
    last_error: str | None
    error_class: str | None
    result: Any
    created_at: float
    updated_at: float
    dead_reason: str | None = None
    redrives: int = 0

    @classmethod
    def from_rows(cls, rows: list[sqlite3.Row] | list[dict[str, Any]]) -> list[Job]:
        """``from_row`` for every row of one statement's result, sharing the column names.

        A claim of 100 jobs builds 100 of them; reading the column names once and filling
        each job's fields from its row at once halves what a ``Job`` costs (bench/NOTES.md).
        """
        if not rows:
            return []
        first = rows[0]
        names = tuple(first.keys())
        if set(names) != _COLUMNS:
            return [cls.from_row(r) for r in rows]
        jobs = []
        new = object.__new__
        loads = json.loads
        for row in rows:
            fields = dict(zip(names, row.values() if isinstance(row, dict) else row, strict=True))
            del fields["last_delay"]
            fields["payload"] = loads(fields["payload"])
            fields["state"] = _STATES[fields["state"]]
            if fields["result"] is not None:
                fields["result"] = loads(fields["result"])
            job = new(cls)
            job.__dict__.update(fields)
            jobs.append(job)
        return jobs

    @classmethod
    def from_row(cls, row: sqlite3.Row | dict[str, Any]) -> Job:
        """The job a ``SELECT *`` / ``RETURNING *`` row of either backend describes."""
        data = row if isinstance(row, dict) else dict(zip(row.keys(), row, strict=True))
        result = data["result"]
        return cls._build({
            "id": data["id"],
            "kind": data["kind"],
            "queue": data["queue"],
            "key": data["key"],
            "fingerprint": data["fingerprint"],
            "payload": json.loads(data["payload"]),
            "state": _STATES[data["state"]],
            "attempt": data["attempt"],
            "max_attempts": data["max_attempts"],
            "run_after": data["run_after"],
            "lease_owner": data["lease_owner"],
            "lease_until": data["lease_until"],
            "lease_token": data["lease_token"],
            "last_error": data["last_error"],
            "error_class": data["error_class"],
            "result": None if result is None else json.loads(result),
            "created_at": data["created_at"],
            "updated_at": data["updated_at"],
            "dead_reason": data["dead_reason"],
            "redrives": data["redrives"],
        })

    def evolve(self, **changes: Any) -> Job:
        """This job with some fields changed (``dataclasses.replace`` without its cost).

        For the store only, which knows the new values are what the database now holds.
        """
        fields = dict(self.__dict__)
        fields.update(changes)
        return self._build(fields)

    @classmethod
    def _build(cls, fields: dict[str, Any]) -> Job:
        # A frozen dataclass's __init__ sets each of the 20 fields through
        # object.__setattr__ (~5 us a job on the hot path, bench/NOTES.md); the store
        # builds every Job from complete, checked values, so it fills __dict__ at once.
        job = object.__new__(cls)
        job.__dict__.update(fields)
        return job


#: JobState by its text, without the enum's lookup machinery on every row.
_STATES = {state.value: state for state in JobState}
#: The columns of a jobs row (both backends): Job's fields and the backoff's last delay.
_COLUMNS = frozenset(Job.__dataclass_fields__) | {"last_delay"}


@dataclass(frozen=True)
class Attempt:
    """One run of a job by one worker, from the attempts history."""

    job_id: int
    attempt: int
    worker: str
    started_at: float
    finished_at: float | None
    outcome: str | None
    error: str | None
    error_class: str | None
