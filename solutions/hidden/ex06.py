"""Hidden checks for exercise 6: counting redrives, burying only running jobs, and a
redrive killed right after each of its writes."""

from __future__ import annotations

from pathlib import Path

from labkit.grading.checks import Checks, Namespace, expect
from labkit.grading.exercises.ex06.deadletters import HARNESS, NOW, add_dead, bury, redrive
from labkit.grading.exercises.killsweep import after_every_kill
from labkit.grading.exercises.kit import lab_file, reading
from labkit.grading.exercises.labdb import add_job, all_jobs, lab_db
from labkit.lang import _

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


@CHECKS.add(
    2,
    "only a running job can be buried (state = 'running' AND lease_token = :token): a "
    "succeeded job may keep its last token, and a dead letter there gets it redriven "
    "and run again",
    severe=True,
)
def dead_letter_needs_a_running_job(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        bare = add_job(conn, "a:1:v1", state="succeeded", attempt=1, updated_at=1.0)
        # Finished by a worker whose complete() left the lease columns as they were.
        kept = add_job(
            conn,
            "a:2:v1",
            state="succeeded",
            attempt=1,
            lease_owner="w",
            lease_until=5.0,
            lease_token="t-last",
            updated_at=2.0,
        )
        said = [
            bury(ns, path, bare, None, "late failure", {"type": "ValueError"}, 10.0),
            bury(ns, path, kept, "t-last", "late failure", {"type": "ValueError"}, 10.0),
        ]
        states = [j["state"] for j in all_jobs(conn)]
    expect(
        said == [False, False] and states == ["succeeded", "succeeded"],
        "False for both succeeded jobs (one with no token, one that kept its last token "
        "'t-last'), and both still succeeded",
        _("returned {returned}; in the table: {states}").format(returned=repr(said), states=states),
    )


@CHECKS.add(
    2,
    "a redrive killed after any of its writes, and run again, must leave each job dead "
    "as it was or fully redriven (pending, attempt 0, dead_reason NULL, redrives 1): "
    "change state and the fresh start in one transaction",
    timeout=60.0,
    severe=True,
)
def a_killed_redrive_leaves_no_job_half_redriven(ns: Namespace) -> None:
    def make(folder: Path) -> None:
        conn = lab_db(folder / "jobs.db")
        add_dead(conn, 3)
        conn.close()

    def judge(life: Path) -> tuple[bool, str]:
        with reading(life / "jobs.db") as conn:
            jobs = all_jobs(conn)
        fresh = {"state": "pending", "attempt": 0, "run_after": NOW, "dead_reason": None}
        half = [
            j
            for j in jobs
            if j["state"] != "dead"
            and ({k: j[k] for k in fresh} != fresh or j["redrives"] != 1)
        ]
        shown = "; ".join(
            _(
                "job {job_id}: {state}, attempt {attempt}, dead_reason {dead_reason}, "
                "redrives {redrives}"
            ).format(
                job_id=j["id"],
                state=j["state"],
                attempt=j["attempt"],
                dead_reason=repr(j["dead_reason"]),
                redrives=j["redrives"],
            )
            for j in half or jobs
        )
        return not half and all(j["state"] == "pending" for j in jobs), shown

    after_every_kill(
        ns,
        HARNESS + "redrive_kills",
        make,
        [{"limit": 3, "now": NOW}],
        judge,
        _("all 3 dead jobs redriven whole (pending, attempt 0, dead_reason NULL, redrives 1)"),
        _("the operator's second redrive(limit=3)"),
        _(
            "put the state and the fresh start (attempt, run_after, dead_reason, redrives, "
            "updated_at) in one UPDATE, inside the one BEGIN IMMEDIATE ... COMMIT: a job "
            "left pending with its attempts used up is no longer dead, so no redrive picks "
            "it again, and it never gets its fresh budget"
        ),
    )
