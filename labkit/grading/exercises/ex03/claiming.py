"""What exercise 3's checks share: ``CHECKS``, on which ``what_a_claim_writes`` and
``which_job_a_claim_takes`` register, and the student's ``claim`` called through the harness."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from labkit.grading.checks import CheckFailed, Checks, Namespace
from labkit.grading.exercises.helpers import raised_text
from labkit.grading.exercises.labdb import all_jobs
from labkit.lang import _

CHECKS = Checks("ex03", "atomic claim with a lease", needs=("claim",))

#: How long a plain SELECT pauses in the race check: enough for the others to read too.
RACE_PAUSE_S = 0.05


HARNESS = "labkit.grading.exercises.ex03.harness:"


def _claim(ns: Namespace, path: Path, worker: str, now: float, lease_s: float = 30.0) -> Any:
    return _row(ns.harness(HARNESS + "claim", str(path), worker, now, lease_s), worker, now)


def _row(result: dict[str, Any], worker: str, now: float) -> Any:
    """The job a harness ``claim`` returned, or None; anything else fails the check, named."""
    if "raised" in result:
        raise CheckFailed(
            _("claim({worker}, now={now:g}) to return a job or None").format(
                worker=repr(worker), now=now
            ),
            raised_text(result),
            "run your claim on a database from exercise_db() in the notebook and read the error",
        )
    row = result["returned"]
    if row is not None and not isinstance(row, dict):
        raise CheckFailed(
            "a dict (or sqlite3.Row) for the claimed job, or None",
            str(row),
            "return dict(row) for the row RETURNING gave you",
        )
    return row


def _job(conn: sqlite3.Connection, job_id: int) -> dict[str, Any]:
    return next(j for j in all_jobs(conn) if j["id"] == job_id)
