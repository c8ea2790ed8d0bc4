"""Exercise 6: another party acts the moment the student's first write is committed.

A ``dead_letter`` that buries the job in one fenced UPDATE, then writes to the row
again (the lease given back by id, a cleanup), leaves a gap between two writes: an
operator may redrive the job and a worker claim it in between, and the second write,
fenced on nothing, takes the new holder's lease away. ``AfterFirstWrite`` runs the other
party there: after the first statement that leaves a change committed (an UPDATE in
autocommit mode, or the COMMIT of a transaction that changed a row).
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from labkit.grading.exercises.common import fresh_state, need, outcome
from labkit.grading.exercises.described import build_error
from labkit.grading.exercises.labdb import connect
from labkit.grading.exercises.tracing import AfterFirstWrite


def dead_letter_then_taken_again(
    values: MutableMapping[str, Any], path: str, job_id: int, token: str, now: float, at: float
) -> dict[str, Any]:
    """``dead_letter(job_id, token, ...)``; the moment its first change is committed, an
    operator redrives the job and a worker claims it (lease ``worker-2-token`` until
    ``at`` + 30), if it is dead by then. The call's outcome, and ``"taken"``: whether
    the other party took the job."""
    taken: list[bool] = []

    def other() -> None:
        conn = connect(path)
        try:
            changed = conn.execute(
                "UPDATE jobs SET state = 'running', attempt = 1, redrives = redrives + 1,"
                " dead_reason = NULL, lease_owner = 'worker-2', lease_token = 'worker-2-token',"
                " lease_until = :at + 30, updated_at = :at WHERE id = :id AND state = 'dead'",
                {"id": job_id, "at": at},
            ).rowcount
            taken.append(changed > 0)
        finally:
            conn.close()

    conn = AfterFirstWrite(connect(path), other)
    try:
        with fresh_state(values):
            error = build_error({"type": "ValueError", "message": "no such customer"})
            result = outcome(
                need(values, "dead_letter"), conn, job_id, token, "permanent error", error, now
            )
    finally:
        conn.close()
    result["taken"] = bool(taken and taken[0])
    return result
