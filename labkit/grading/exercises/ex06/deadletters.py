"""The exercise-6 table as the checks use it: a fresh file, dead and running jobs, and
the student's ``dead_letter`` / ``redrive`` called through the harness with its answer
checked for an exception first; and ``CHECKS``, on which the check modules register.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from labkit.grading.checks import Checks, Namespace, expect
from labkit.grading.exercises.helpers import raised_error, raised_text
from labkit.grading.exercises.labdb import add_job, all_jobs
from labkit.lang import _

#: The exercise's checks: dead_letter_checks, redrive_checks and redrive_races register
#: on it, in the order checks.py imports them.
CHECKS = Checks("ex06", "dead letter and redrive", needs=("dead_letter", "redrive"))
NOW = 1000.0


HARNESS = "labkit.grading.exercises.ex06.harness:"
#: How long a read outside a write transaction pauses in the race checks.
RACE_PAUSE_S = 0.3


def said(result: dict[str, Any]) -> str:
    if "raised" in result:
        return raised_text(result)
    return _("returned {value}").format(value=repr(result["returned"]))


def it_said(result: dict[str, Any]) -> str:
    """``said`` as a sentence about the call: 'it raised KeyError: ...', 'it returned [1]'."""
    if "raised" in result:
        return _("it raised {error}").format(error=raised_error(result))
    return _("it returned {value}").format(value=repr(result["returned"]))


def returned(result: dict[str, Any], call: str) -> Any:
    expect("raised" not in result, _("{call} to return").format(call=call), said(result))
    return result["returned"]


def bury(
    ns: Namespace,
    path: Path,
    job_id: int,
    token: Any,
    reason: str,
    error: dict[str, Any],
    now: float,
) -> Any:
    """The student's ``dead_letter`` through the harness; what it returned."""
    result = ns.harness(HARNESS + "dead_letter", str(path), job_id, token, reason, error, now)
    return returned(result, f"dead_letter(job {job_id})")


def redrive(ns: Namespace, path: Path, **kwargs: Any) -> Any:
    """The student's ``redrive`` through the harness; the ids it returned."""
    result = ns.harness(HARNESS + "redrive", str(path), **kwargs)
    args = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
    return returned(result, f"redrive({args})")


def row_of(conn: sqlite3.Connection, job_id: int) -> dict[str, Any]:
    return next(j for j in all_jobs(conn) if j["id"] == job_id)


def add_dead(conn: sqlite3.Connection, n: int, kind: str = "email", first_id: int = 0) -> list[int]:
    """``n`` dead jobs, the first the oldest (updated_at 10, 20, ...)."""
    return [
        add_job(
            conn,
            f"{kind}:{first_id + i}:send:v1",
            kind=kind,
            state="dead",
            attempt=3,
            dead_reason="attempts exhausted (3 of 3)",
            last_error="TimeoutError: slow",
            updated_at=10.0 * (first_id + i + 1),
        )
        for i in range(n)
    ]


def add_running(
    conn: sqlite3.Connection, token: str = "tok-1", key: str = "pay:7:charge:v1", attempt: int = 2
) -> int:
    """A payment job running under ``token``, its lease good for 30 s more."""
    return add_job(
        conn,
        key,
        kind="payment",
        state="running",
        attempt=attempt,
        lease_owner="w1",
        lease_until=NOW + 30,
        lease_token=token,
        updated_at=NOW - 5,
    )
