"""Hidden checks for exercise 6: counting redrives, burying only running jobs, and a
redrive killed right after each of its writes."""

from __future__ import annotations

from pathlib import Path

from labkit.grading.checks import Checks, Namespace, expect
from labkit.grading.exercises.ex06.deadletters import (
    HARNESS,
    NOW,
    add_dead,
    bury,
    it_said,
    redrive,
)
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
    # Back in retry_wait (or pending) with the token its last attempt held: that attempt
    # is over, and a late dead letter from it must not bury a job that is to run again.
    with lab_file(ns) as (conn, path):
        waiting = {
            state: add_job(
                conn,
                f"b:{n}:v1",
                state=state,
                attempt=1,
                run_after=50.0,
                lease_owner="w",
                lease_until=5.0,
                lease_token="t-last",
                updated_at=2.0,
            )
            for n, state in enumerate(("retry_wait", "pending"))
        }
        answers = [
            bury(ns, path, job, "t-last", "late failure", {"type": "ValueError"}, 10.0)
            for job in waiting.values()
        ]
        after = [j["state"] for j in all_jobs(conn)]
    expect(
        answers == [False, False] and after == list(waiting),
        _(
            "False for a retry_wait and a pending job that kept the token 't-last' of their "
            "last attempt, and both left as they were"
        ),
        _("returned {returned}; in the table: {states}").format(
            returned=repr(answers), states=after
        ),
        "fence on state = 'running' AND lease_token = :token: a job waiting for its next "
        "attempt is not the late caller's to bury, and a dead job never runs again",
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
        # run_after is redrive_gives_a_fresh_start's (not severe): an old one is past.
        fresh = {"state": "pending", "attempt": 0, "dead_reason": None}
        half = [
            j
            for j in jobs
            if j["state"] != "dead" and ({k: j[k] for k in fresh} != fresh or j["redrives"] != 1)
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


@CHECKS.add(
    1,
    "the token goes into the SQL as a :named parameter like every value: pasted in with an "
    "f-string, a token with a quote breaks the statement or rewrites the fence",
)
def dead_letter_token_is_a_parameter(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        held = add_job(
            conn,
            "c:1:v1",
            state="running",
            attempt=1,
            lease_owner="w",
            lease_until=NOW + 30,
            lease_token="tok-'1",
            updated_at=1.0,
        )
        other = add_job(
            conn,
            "c:2:v1",
            state="running",
            attempt=1,
            lease_owner="w2",
            lease_until=NOW + 30,
            lease_token="worker-2-token",
            updated_at=1.0,
        )
        results = [
            ns.harness(
                HARNESS + "dead_letter",
                str(path),
                job,
                token,
                "permanent",
                {"type": "ValueError"},
                NOW,
            )
            for job, token in ((held, "tok-'1"), (other, "x' OR '1'='1"))
        ]
        states = [j["state"] for j in all_jobs(conn)]
    expect(
        [r.get("returned") for r in results] == [True, False] and states == ["dead", "running"],
        _(
            "True for the holder of token {held} (a quote in it), False for token {forged}, "
            "and only the first job dead"
        ).format(held=repr("tok-'1"), forged=repr("x' OR '1'='1")),
        _("{first}; {second}; in the table: {states}").format(
            first=it_said(results[0]), second=it_said(results[1]), states=states
        ),
    )


@CHECKS.add(
    1,
    "no cap of your own: redrive(limit=2100) on 2500 dead jobs redrives 2100 (a silent "
    "min(limit, 1000) leaves the operator thinking the queue is empty)",
    timeout=30.0,
)
def redrive_has_no_cap_of_its_own(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        conn.execute("BEGIN")
        conn.executemany(
            "INSERT INTO jobs (key, kind, state, attempt, dead_reason, updated_at) "
            "VALUES (?, 'email', 'dead', 3, 'attempts exhausted (3 of 3)', ?)",
            [(f"email:{n}:send:v1", float(n + 1)) for n in range(2500)],
        )
        conn.execute("COMMIT")
        got = redrive(ns, path, limit=2100, now=NOW)
        pending = conn.execute("SELECT count(*) FROM jobs WHERE state = 'pending'").fetchone()[0]
    expect(
        isinstance(got, list) and len(got) == 2100 and pending == 2100,
        _("2100 of 2500 dead jobs redriven and returned with limit=2100"),
        _("returned {count} ids, {pending} jobs pending").format(
            count=len(got) if isinstance(got, list) else repr(got), pending=pending
        ),
    )


@CHECKS.add(
    1,
    "an UPDATE that fails (a full disk, a constraint) must come out of redrive and "
    "dead_letter as an error: returning [] or False tells the operator or the worker "
    "that there was nothing to do",
)
def a_failed_write_comes_out(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        add_dead(conn, 2)
        job = add_job(
            conn,
            "pay:7:charge:v1",
            state="running",
            attempt=1,
            lease_owner="w1",
            lease_until=NOW + 30,
            lease_token="tok-1",
            updated_at=NOW - 5,
        )
        conn.execute(
            "CREATE TRIGGER refuse BEFORE UPDATE OF state ON jobs "
            "BEGIN SELECT RAISE(ABORT, 'the write failed (a full disk, simulated)'); END"
        )
        calls = {
            "redrive(limit=2)": ns.harness(HARNESS + "redrive", str(path), limit=2, now=NOW),
            f"dead_letter(job {job}, 'tok-1')": ns.harness(
                HARNESS + "dead_letter",
                str(path),
                job,
                "tok-1",
                "permanent",
                {"type": "ValueError"},
                NOW,
            ),
        }
    for call, result in calls.items():
        expect(
            "raised" in result,
            _("{call} to raise the error of its failed UPDATE").format(call=call),
            it_said(result),
            "let the error out after the ROLLBACK (raise, not return): the caller must know "
            "the write did not happen",
        )
