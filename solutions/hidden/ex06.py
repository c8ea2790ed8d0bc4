"""Hidden checks for exercise 6: counting redrives, and burying only running jobs."""

from __future__ import annotations

from labkit.grading.exercises.ex06.deadletters import bury, redrive
from labkit.grading.exercises.kit import lab_file
from labkit.grading.checks import Checks, Namespace, expect
from labkit.grading.exercises.labdb import add_job, all_jobs

CHECKS = Checks("ex06", hidden=True)


@CHECKS.add(
    1,
    "redrives counts every redrive (redrives = redrives + 1), so an operator sees "
    "a job that keeps coming back",
)
def redrive_counts_every_time(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
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
        slow = {"type": "TimeoutError", "message": "slow"}
        bury(ns, path, job_id, "t1", "attempts exhausted", slow, 10.0)
        redrive(ns, path, limit=1, now=20.0)
        conn.execute(
            "UPDATE jobs SET state='running', lease_token='t2', lease_owner='w', "
            "lease_until=100 WHERE id=:id",
            {"id": job_id},
        )
        bury(ns, path, job_id, "t2", "attempts exhausted", slow, 30.0)
        redrive(ns, path, limit=1, now=40.0)
        job = all_jobs(conn)[0]
    expect(
        job["redrives"] == 2 and job["state"] == "pending",
        "redrives = 2 after two redrives",
        f"redrives={job['redrives']}, state={job['state']}",
    )


@CHECKS.add(1, "only a running job can be buried: a succeeded job has no lease to fence on")
def dead_letter_needs_a_running_job(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        job_id = add_job(conn, "a:1:v1", state="succeeded", attempt=1, updated_at=1.0)
        ok = bury(ns, path, job_id, None, "late failure", {"type": "ValueError"}, 10.0)
        state = all_jobs(conn)[0]["state"]
    expect(
        ok is False and state == "succeeded",
        "False and the job still succeeded",
        f"{ok!r}, state {state}",
    )
