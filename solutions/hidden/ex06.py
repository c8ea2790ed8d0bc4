"""Hidden checks for exercise 6: counting redrives, and burying only running jobs."""

from __future__ import annotations

import tempfile
from pathlib import Path

from labkit.grading.core import Checks, Namespace, expect
from labkit.grading.labdb import add_job, all_jobs, lab_db

CHECKS = Checks("ex06", hidden=True)


@CHECKS.add(
    1,
    "redrives counts every redrive (redrives = redrives + 1), so an operator sees "
    "a job that keeps coming back",
)
def redrive_counts_every_time(ns: Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="labkit-ex06h-") as tmp:
        conn = lab_db(Path(tmp) / "jobs.db")
        job_id = add_job(
            conn,
            "a:1:v1",
            state="running",
            attempt=1,
            lease_owner="w",
            lease_until=100.0,
            lease_token="t1",
            updated_at=1.0,
        )
        ns.dead_letter(conn, job_id, "t1", "attempts exhausted", TimeoutError("slow"), 10.0)
        ns.redrive(conn, limit=1, now=20.0)
        conn.execute(
            "UPDATE jobs SET state='running', lease_token='t2', lease_owner='w', "
            "lease_until=100 WHERE id=:id",
            {"id": job_id},
        )
        ns.dead_letter(conn, job_id, "t2", "attempts exhausted", TimeoutError("slow"), 30.0)
        ns.redrive(conn, limit=1, now=40.0)
        job = all_jobs(conn)[0]
        conn.close()
    expect(
        job["redrives"] == 2 and job["state"] == "pending",
        "redrives = 2 after two redrives",
        f"redrives={job['redrives']}, state={job['state']}",
    )


@CHECKS.add(1, "only a running job can be buried: a succeeded job has no lease to fence on")
def dead_letter_needs_a_running_job(ns: Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="labkit-ex06h-") as tmp:
        conn = lab_db(Path(tmp) / "jobs.db")
        job_id = add_job(conn, "a:1:v1", state="succeeded", attempt=1, updated_at=1.0)
        ok = ns.dead_letter(conn, job_id, None, "late failure", ValueError("x"), 10.0)
        state = all_jobs(conn)[0]["state"]
        conn.close()
    expect(
        ok is False and state == "succeeded",
        "False and the job still succeeded",
        f"{ok!r}, state {state}",
    )
