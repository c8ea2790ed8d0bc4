"""Hidden checks for exercise 6: counting redrives, burying only running jobs, and a
redrive killed right after each of its writes."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from labkit.grading.checks import Checks, Namespace, expect
from labkit.grading.exercises.ex06.deadletters import (
    HARNESS,
    NOW,
    add_dead,
    add_running,
    bury,
    it_said,
    redrive,
    returned,
    row_of,
)
from labkit.grading.exercises.ex06.redrive_races import TABLES
from labkit.grading.exercises.helpers import (
    expect_no_write_after_a_refused_begin,
    holds_for,
    short_repr,
)
from labkit.grading.exercises.killsweep import after_every_kill
from labkit.grading.exercises.kit import lab_file, reading
from labkit.grading.exercises.labdb import add_job, all_jobs, lab_db
from labkit.lang import _

CHECKS = Checks("ex06", hidden=True)


@CHECKS.add(
    1,
    "redrives counts every redrive (redrives = redrives + 1), so an operator sees "
    "a job that keeps coming back; and a job redriven before starts over as the first time "
    "(attempt 0, run_after = now)",
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
    # The second redrive starts the job over as the first did: the count is for the
    # operator to read, not a delay or a smaller budget of the code's own.
    expect(
        (job["attempt"], job["run_after"], job["updated_at"]) == (0, 40.0, 40.0),
        _(
            "attempt 0, run_after = updated_at = 40 after the second redrive(now=40), as "
            "after the first (a job redriven before starts over the same way)"
        ),
        _("attempt {attempt}, run_after {run_after}, updated_at {updated_at}").format(
            attempt=job["attempt"], run_after=job["run_after"], updated_at=job["updated_at"]
        ),
        _(
            "set attempt = 0 and run_after = :now whatever redrives says: no backoff by the "
            "number of redrives (now + 60 * redrives), no attempt = redrives"
        ),
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
        not any(said) and states == ["succeeded", "succeeded"],
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
        not any(answers) and after == list(waiting),
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
    _a_job_that_finishes_meanwhile_stays_done(ns)


def _a_job_that_finishes_meanwhile_stays_done(ns: Namespace) -> None:
    """The job's handler finishes it (succeeded, its token kept) between the dead letter's
    check of the state and its UPDATE: a state read first and compared in Python, then an
    UPDATE fenced on the token alone, buries a job that succeeded, and a redrive runs it
    again."""
    with lab_file(ns) as (conn, path):
        job_id = add_running(conn)
        result = ns.harness(
            HARNESS + "dead_letter_while_the_job_finishes", str(path), job_id, "tok-1", NOW
        )
        job = row_of(conn, job_id)
    if result.get("worker") != "in the gap":
        return  # no read before the write: the job was buried first, or left alone
    expect(
        not result.get("returned") and job["state"] == "succeeded",
        _(
            "False, and job {job_id} left succeeded: its handler finished it (keeping its "
            "token 'tok-1') after your dead_letter read the job and before it wrote"
        ).format(job_id=job_id),
        _("{said}; the job is {state}").format(said=it_said(result), state=job["state"]),
        _(
            "put the whole fence in the UPDATE (WHERE id = :id AND state = 'running' AND "
            "lease_token = :token): a state checked by a SELECT first is stale by the time "
            "an UPDATE fenced on the token alone lands, and a succeeded job buried is "
            "redriven and run again"
        ),
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
        # run_after and dead_reason are redrive_gives_a_fresh_start's (not severe): an old
        # run_after is past, and a reason kept is a stale note, not a job that never runs.
        # So is the exact attempt: a redrive to attempt 1 costs the job one try (that
        # check's); a job left pending with the 3 attempts it died with never gets any (a
        # budget raised instead, max_attempts + 3, does give it tries: not this check's).
        half = [
            j
            for j in jobs
            if j["state"] != "dead"
            and (j["state"] != "pending" or j["attempt"] >= j["max_attempts"] or j["redrives"] != 1)
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
        _("all 3 dead jobs redriven whole (pending, attempt 0, redrives 1)"),
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
    # The fence is equality, exact: not LIKE ('%' and '_' are patterns, case ignored),
    # not COLLATE NOCASE. Tokens that only look like the current one are someone else's.
    with lab_file(ns) as (conn, path):
        held = add_job(
            conn,
            "c:3:v1",
            state="running",
            attempt=1,
            lease_owner="w3",
            lease_until=NOW + 30,
            lease_token="tok-3_a",
            updated_at=1.0,
        )
        lookalikes = ("TOK-3_A", "tok-3%")
        answers = [
            ns.harness(
                HARNESS + "dead_letter",
                str(path),
                held,
                token,
                "permanent",
                {"type": "ValueError"},
                NOW,
            )
            for token in lookalikes
        ]
        state = row_of(conn, held)["state"]
    expect(
        all("raised" not in a and not a.get("returned") for a in answers) and state == "running",
        _(
            "False for tokens {tokens} on a job whose token is {token}, and the job still running"
        ).format(tokens=", ".join(repr(t) for t in lookalikes), token=repr("tok-3_a")),
        _("{said}; the job {state}").format(
            said="; ".join(
                f"{t!r}: {it_said(a)}" for t, a in zip(lookalikes, answers, strict=True)
            ),
            state=state,
        ),
        "fence with lease_token = :token, exactly: LIKE reads '%' and '_' as patterns and "
        "ignores case, and COLLATE NOCASE ignores case, so another worker's token passes",
    )


@CHECKS.add(
    1,
    "no cap of your own: redrive(limit=100001) on 100064 dead jobs redrives 100001 (a "
    "silent min(limit, 1000), or 10000, 50000, 65535 or 100000, or an IN list cut to "
    "SQLite's 32766 variables, leaves the operator thinking the queue is empty)",
    timeout=30.0,
)
def redrive_has_no_cap_of_its_own(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        # Written by SQLite itself (a recursive count), not row by row from Python: a hundred
        # thousand rows in a tenth of a second.
        conn.execute(
            """
            INSERT INTO jobs (key, kind, state, attempt, dead_reason, updated_at)
            WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < :last)
            SELECT 'email:' || i || ':send:v1', 'email', 'dead', 3,
                   'attempts exhausted (3 of 3)', i + 1.0
              FROM n
            """,
            {"last": 100_064 - 1},
        )
        # Past a cap kept at a round number (1000, 10000, 50000, 2**16 - 1, 100000) or at
        # SQLite's 32766 variables: a redrive of a hundred thousand rows is one UPDATE, a
        # fraction of a second.
        got = redrive(ns, path, limit=100_001, now=NOW)
        pending = conn.execute("SELECT count(*) FROM jobs WHERE state = 'pending'").fetchone()[0]
    expect(
        isinstance(got, list) and len(got) == 100_001 and pending == 100_001,
        _("100001 of 100064 dead jobs redriven and returned with limit=100001"),
        _("returned {count} ids, {pending} jobs pending").format(
            count=len(got) if isinstance(got, list) else repr(got), pending=pending
        ),
        _(
            "every dead job up to limit, however many: no cap of your own (a MAX_REDRIVE, the "
            "ids cut to fit SQLite's variables; json_each(:ids) takes any number of them)"
        ),
    )


@CHECKS.add(
    1,
    "an UPDATE that fails (a full disk, a constraint) must come out of redrive and "
    "dead_letter as an error, saying what failed (not a new error 'from None'), and leave "
    "nothing half done: returning [] or False tells the operator or the worker that there "
    "was nothing to do",
)
def a_failed_write_comes_out(ns: Namespace) -> None:
    # An IntegrityError (a constraint refuses the write) and an OperationalError (an
    # integer overflow, of the class of a full disk): swallowing one class only shows.
    for failure, words in (
        (
            "SELECT RAISE(ABORT, 'the write failed (a full disk, simulated)')",
            "the write failed (a full disk, simulated)",
        ),
        ("SELECT abs(-9223372036854775808)", "integer overflow"),
    ):
        _a_failed_write_comes_out(ns, failure, words)
    _a_redrive_that_fails_halfway_keeps_nothing(ns)
    # Another writer holds the lock past the busy timeout: the redrive's BEGIN IMMEDIATE
    # fails once. Its error comes out, or it begins again and redrives; [] would tell the
    # operator there was nothing dead.
    with lab_file(ns) as (conn, path):
        add_dead(conn, 2)
        got = ns.harness(
            HARNESS + "begin_refused_once", "redrive", str(path), [], {"limit": 2, "now": NOW}
        )
        still_dead = conn.execute("SELECT count(*) FROM jobs WHERE state = 'dead'").fetchone()[0]
    expect(
        not got.get("refused") or "raised" in got or still_dead == 0,
        _(
            "redrive(limit=2) whose BEGIN IMMEDIATE fails 'database is locked' to raise that "
            "error, or to begin again and redrive the 2 dead jobs"
        ),
        _("it returned {value}, and {dead} jobs are still dead").format(
            value=short_repr(got.get("returned")), dead=still_dead
        ),
        "let the error out (or try the BEGIN again): an empty list tells the operator there "
        "was nothing to redrive",
    )
    # The other writer keeps the lock through ten tries: a redrive that tries a few times
    # and then gives up must give up with the error, not with [].
    with lab_file(ns) as (conn, path):
        add_dead(conn, 2)
        got = ns.harness(HARNESS + "begin_refused_often", str(path), {"limit": 2, "now": NOW}, 10)
        still_dead = conn.execute("SELECT count(*) FROM jobs WHERE state = 'dead'").fetchone()[0]
    expect(
        "raised" in got or still_dead == 0,
        _(
            "redrive(limit=2) whose BEGIN IMMEDIATE fails 'database is locked' up to {times} "
            "times in a row (another writer keeps the lock) to raise that error in the end, "
            "or to begin again until it can and redrive the 2 dead jobs"
        ).format(times=10),
        _(
            "its BEGIN IMMEDIATE was refused {refusals} times; it returned {value}, and {dead} "
            "jobs are still dead"
        ).format(
            refusals=got.get("refusals"), value=short_repr(got.get("returned")), dead=still_dead
        ),
        "when you stop trying the BEGIN, raise its OperationalError: an empty list tells the "
        "operator there was nothing to redrive",
    )


def _a_failed_write_comes_out(ns: Namespace, failure: str, words: str) -> None:
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
        conn.execute(f"CREATE TRIGGER refuse BEFORE UPDATE OF state ON jobs BEGIN {failure}; END")
        calls = {
            "redrive(limit=2)": ns.harness(
                HARNESS + "with_its_chain", str(path), "redrive", [], {"limit": 2, "now": NOW}
            ),
            f"dead_letter(job {job}, 'tok-1')": ns.harness(
                HARNESS + "with_its_chain",
                str(path),
                "dead_letter",
                [job, "tok-1", "permanent", {"type": "ValueError"}, NOW],
                {},
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
        # The error that comes out says what failed, itself or down its chain: a new
        # error raised "from None" hides the database's own words (a full disk, a
        # constraint, a lock) from the person who must fix it.
        chain = [str(link) for link in result.get("chain", [])]
        expect(
            any(words in link for link in chain),
            _(
                "the error {call} raised to carry the database's own words {words}, itself or "
                "down its chain (raise, or raise YourError(...) from exc)"
            ).format(call=call, words=repr(words)),
            _("its traceback shows: {chain}").format(chain=" <- ".join(chain) or it_said(result)),
            _(
                "re-raise the database's error after the ROLLBACK, or chain yours to it (from "
                "exc): 'from None' drops what went wrong, and the operator cannot tell a full "
                "disk from a lock"
            ),
        )


def _a_redrive_that_fails_halfway_keeps_nothing(ns: Namespace) -> None:
    """The UPDATE of the second of three jobs fails: the redrive's error comes out and
    all three stay dead (ROLLBACK), never the first kept (a COMMIT on the way out)."""
    with lab_file(ns) as (conn, path):
        ids = add_dead(conn, 3)
        conn.execute(
            "CREATE TRIGGER refuse_one BEFORE UPDATE OF state ON jobs "
            f"WHEN OLD.id = {ids[1]} "
            "BEGIN SELECT RAISE(ABORT, 'the write failed (a full disk, simulated)'); END"
        )
        result = ns.harness(HARNESS + "redrive", str(path), limit=3, now=NOW)
        jobs = [row_of(conn, i) for i in ids]
    moved = [f"job {j['id']}: {j['state']}" for j in jobs if j["state"] != "dead"]
    expect(
        "raised" in result and not moved,
        _(
            "redrive(limit=3) of dead jobs {ids}, the write of job {failing} failing, to raise "
            "its error and leave all three dead (one transaction: all or nothing)"
        ).format(ids=ids, failing=ids[1]),
        _("{said}; {moved}").format(
            said=it_said(result), moved="; ".join(moved) or _("all three dead")
        ),
        _(
            "on any error, ROLLBACK and raise: a COMMIT on the way out (in finally, or in "
            "except) keeps half a redrive the operator was told failed"
        ),
    )


@CHECKS.add(
    1,
    "each buried job keeps its own error: describe(error) for that very error, never a "
    "text cached from an earlier job (another customer's details, and this job's real "
    "error lost)",
    severe=True,
)
def each_job_keeps_its_own_error(ns: Namespace) -> None:
    errors = (
        {"type": "ValueError", "message": "card of customer alice-01 declined"},
        {"type": "ValueError", "message": "address of customer bob-02 is invalid"},
        {"type": "ValueError", "message": "order of customer carol-03 is empty"},
    )
    with lab_file(ns) as (conn, path):
        ids = [
            add_job(
                conn,
                f"pay:{n}:charge:v1",
                kind="payment",
                state="running",
                attempt=1,
                lease_owner="w1",
                lease_until=NOW + 30,
                lease_token=f"tok-{n}",
                updated_at=NOW - 5,
            )
            for n in range(len(errors))
        ]
        results = ns.harness(
            HARNESS + "dead_letters_in_a_row",
            str(path),
            [
                [job_id, f"tok-{n}", "permanent error", error, NOW + n]
                for n, (job_id, error) in enumerate(zip(ids, errors, strict=True))
            ],
        )
        for job_id, result in zip(ids, results, strict=True):
            returned(result, f"dead_letter(job {job_id})")
        stored = {j["id"]: j["last_error"] or "" for j in all_jobs(conn)}
    wrong = [
        _("job {job_id}: {stored}").format(job_id=job_id, stored=repr(stored[job_id]))
        for job_id, error in zip(ids, errors, strict=True)
        if error["message"] not in stored[job_id]
    ]
    expect(
        not wrong,
        _(
            "each of three jobs buried one after the other in one worker with its own "
            "ValueError message: {messages}"
        ).format(messages="; ".join(repr(e["message"]) for e in errors)),
        "; ".join(wrong),
        "call labkit.redact.describe(error) on each error: a text kept from an earlier call "
        "shows one job's details on another's row",
    )


@CHECKS.add(
    1,
    "the fence is the token and the state, nothing else: the holder of the current token "
    "buries its job even when its lease ran out meanwhile (nobody took the job), or the "
    "job runs again though its error is permanent",
)
def dead_letter_after_the_lease_ran_out(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        job_id = add_job(
            conn,
            "pay:8:charge:v1",
            kind="payment",
            state="running",
            attempt=1,
            lease_owner="w1",
            lease_until=NOW - 1,
            lease_token="tok-1",
            updated_at=NOW - 31,
        )
        result = ns.harness(
            HARNESS + "dead_letter",
            str(path),
            job_id,
            "tok-1",
            "permanent error",
            {"type": "ValueError", "message": "no such customer"},
            NOW,
        )
        state = next(j["state"] for j in all_jobs(conn) if j["id"] == job_id)
    expect(
        result.get("returned") is True and state == "dead",
        _(
            "True and job {job_id} dead: its lease ran out 1 s before, but the token is still "
            "the current one"
        ).format(job_id=job_id),
        _("{said}, state {state}").format(said=it_said(result), state=state),
        "fence on state = 'running' AND lease_token = :token only, as the docstring says",
    )


@CHECKS.add(
    2,
    "dead_letter writes once, in its fenced UPDATE, and never again after it: the moment "
    "the job is dead an operator may redrive it and a worker claim it, and a second write "
    "by id (the lease given back, a cleanup) takes the new holder's lease away; the job "
    "then stays running, owned by nobody, and no claim takes it again",
    severe=True,
)
def dead_letter_writes_nothing_after_the_job_is_dead(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        job_id = add_running(conn)
        got = ns.harness(
            HARNESS + "dead_letter_then_taken_again", str(path), job_id, "tok-1", NOW, NOW + 5
        )
        job = row_of(conn, job_id)
    if not got.get("taken"):
        return  # the job was never dead after a write: the other checks say why
    expect(
        (job["state"], job["lease_token"], job["lease_until"])
        == ("running", "worker-2-token", NOW + 35),
        _(
            "job {job_id}, redriven and claimed by another worker the moment your dead_letter "
            "had buried it, left as that worker holds it: running, lease_token "
            "'worker-2-token', lease_until {until:g}"
        ).format(job_id=job_id, until=NOW + 35),
        _("{said}; then state {state}, lease_token {token}, lease_until {until}").format(
            said=it_said(got),
            state=job["state"],
            token=repr(job["lease_token"]),
            until=job["lease_until"],
        ),
        "set state, dead_reason, last_error and clear the lease in the one fenced UPDATE "
        "(WHERE id = :id AND state = 'running' AND lease_token = :token): any write after it "
        "may land on a job that is someone else's by then",
    )


@CHECKS.add(
    1,
    "dead_letter in one UPDATE: killed after any of its writes, the job is still running "
    "as it was or dead with its reason and its error, never dead with nothing to read",
    timeout=30.0,
)
def a_killed_dead_letter_leaves_the_reason(ns: Namespace) -> None:
    reason = "permanent error"
    error = {"type": "PermissionError", "message": "the ERP refused the order"}

    def make(folder: Path) -> None:
        conn = lab_db(folder / "jobs.db")
        add_running(conn)
        conn.close()

    def judge(life: Path) -> tuple[bool, str]:
        with reading(life / "jobs.db") as conn:
            [job] = all_jobs(conn)
        whole = (
            job["state"] == "dead"
            and job["dead_reason"] == reason
            and "PermissionError" in (job["last_error"] or "")
            and job["lease_token"] is None
        )
        untouched = job["state"] == "running" and job["lease_token"] == "tok-1"
        return whole or untouched, _(
            "job {job_id}: {state}, dead_reason {dead_reason}, last_error {last_error}, "
            "lease_token {token}"
        ).format(
            job_id=job["id"],
            state=job["state"],
            dead_reason=repr(job["dead_reason"]),
            last_error=repr(job["last_error"]),
            token=repr(job["lease_token"]),
        )

    after_every_kill(
        ns,
        HARNESS + "dead_letter_kills",
        make,
        [[1, "tok-1", reason, error, NOW]],
        judge,
        _("the job dead with its dead_reason and last_error, or still running as it was"),
        _("the worker's dead_letter tried again"),
        _(
            "set state, dead_reason, last_error and the lease in the one fenced UPDATE: a "
            "job left dead with no reason tells the person who must fix it nothing, and no "
            "second call can fill it in (the token is gone)"
        ),
    )


@CHECKS.add(
    1,
    "store now as it is given (a float): int(now) or round(now) moves the dead letter and the "
    "redrive up to a second back, before the moment they happened; max(updated_at, now) "
    "keeps another clock's instant, a delay per job moves the later ones on, and 'now or "
    "time.time()' replaces an instant of 0",
)
def the_instants_are_kept_as_given(ns: Namespace) -> None:
    buried_at, redriven_at = NOW + 0.25, NOW + 10.75
    with lab_file(ns) as (conn, path):
        job_id = add_running(conn)
        # Clocks differ between machines: the claim was stamped by a clock ahead of the
        # dead_letter's, and the other dead job by one ahead of the redrive's. The call's
        # now is what is stored, not max(updated_at, now).
        conn.execute("UPDATE jobs SET updated_at = :t WHERE id = :id", {"t": NOW + 5, "id": job_id})
        bury(ns, path, job_id, "tok-1", "permanent error", {"type": "ValueError"}, buried_at)
        after_bury = next(j for j in all_jobs(conn) if j["id"] == job_id)["updated_at"]
        [ahead] = add_dead(conn, 1, first_id=job_id + 1)
        conn.execute("UPDATE jobs SET updated_at = :t WHERE id = :id", {"t": NOW + 20, "id": ahead})
        redrive(ns, path, limit=2, now=redriven_at)
        job = next(j for j in all_jobs(conn) if j["id"] == job_id)
        ahead_row = row_of(conn, ahead)
    expect(
        after_bury == buried_at,
        _("updated_at = {now} after dead_letter(..., now={now})").format(now=buried_at),
        _("updated_at = {got}").format(got=after_bury),
        _("set updated_at = :now as given, not max(updated_at, :now)"),
    )
    expect(
        job["run_after"] == redriven_at and job["updated_at"] == redriven_at,
        _("run_after = updated_at = {now} after redrive(now={now})").format(now=redriven_at),
        _("run_after = {run_after}, updated_at = {updated_at}").format(
            run_after=job["run_after"], updated_at=job["updated_at"]
        ),
        "pass now on as a :now parameter, unchanged",
    )
    # The second job of the same redrive: each one gets the same now, none staggered.
    expect(
        ahead_row["run_after"] == redriven_at and ahead_row["updated_at"] == redriven_at,
        _(
            "run_after = updated_at = {now} for job {job_id} too, the second of "
            "redrive(limit=2, now={now}), though it died at {died} by a clock ahead of the "
            "operator's"
        ).format(now=redriven_at, job_id=ahead, died=NOW + 20),
        _("run_after = {run_after}, updated_at = {updated_at}").format(
            run_after=ahead_row["run_after"], updated_at=ahead_row["updated_at"]
        ),
        _(
            "set run_after = :now and updated_at = :now for every job redriven: not "
            "max(updated_at, :now), not now plus a delay per job"
        ),
    )
    _the_instant_zero_is_kept(ns)
    _the_instants_to_the_microsecond(ns)


def _the_instants_to_the_microsecond(ns: Namespace) -> None:
    """Instants with digits below the millisecond (time.time() has them): round(now, 3)
    or a cut to the millisecond moves them, and two jobs buried within a millisecond tie."""
    buried_at, redriven_at = NOW + 0.0004375, NOW + 10.0006125
    with lab_file(ns) as (conn, path):
        job_id = add_running(conn)
        bury(ns, path, job_id, "tok-1", "permanent error", {"type": "ValueError"}, buried_at)
        buried = row_of(conn, job_id)["updated_at"]
        redrive(ns, path, limit=1, now=redriven_at)
        job = row_of(conn, job_id)
    got = (buried, job["run_after"], job["updated_at"])
    expect(
        got == (buried_at, redriven_at, redriven_at),
        _(
            "updated_at = {buried} after dead_letter(..., now={buried}), then run_after = "
            "updated_at = {redriven} after redrive(now={redriven}): every digit kept"
        ).format(buried=repr(buried_at), redriven=repr(redriven_at)),
        _(
            "updated_at {buried} after the dead letter; run_after {run_after}, updated_at "
            "{updated_at} after the redrive"
        ).format(buried=repr(got[0]), run_after=repr(got[1]), updated_at=repr(got[2])),
        _(
            "pass now on as it is given: no round(now, 3), no cut to the millisecond (the "
            "column is a REAL and keeps every digit)"
        ),
    )


def _the_instant_zero_is_kept(ns: Namespace) -> None:
    """``now = 0.0`` is an instant like any other (a test clock starts there): ``now or
    time.time()`` takes it for a missing value and stores the wall clock instead."""
    with lab_file(ns) as (conn, path):
        job_id = add_running(conn)
        conn.execute(
            "UPDATE jobs SET updated_at = 0, lease_until = 30 WHERE id = :id", {"id": job_id}
        )
        bury(ns, path, job_id, "tok-1", "permanent error", {"type": "ValueError"}, 0.0)
        buried = row_of(conn, job_id)["updated_at"]
        redrive(ns, path, limit=1, now=0.0)
        job = row_of(conn, job_id)
    got = (buried, job["run_after"], job["updated_at"])
    expect(
        got == (0.0, 0.0, 0.0),
        _(
            "updated_at = 0 after dead_letter(..., now=0.0), then run_after = updated_at = 0 "
            "after redrive(now=0.0): an instant of 0 stored as given"
        ),
        _(
            "updated_at {buried} after the dead letter; run_after {run_after}, updated_at "
            "{updated_at} after the redrive"
        ).format(buried=got[0], run_after=got[1], updated_at=got[2]),
        _(
            "use now as given, 0.0 too: 'now or time.time()' reads 0 as missing and stores "
            "the wall clock (test if now is None, if you must)"
        ),
    )


@CHECKS.add(
    1,
    "return whether THIS UPDATE changed the row (RETURNING id, or cursor.rowcount): "
    "conn.total_changes counts every change since the connection opened, so on a worker's "
    "long-lived connection a stale token's dead letter says True",
)
def a_stale_token_on_a_used_connection(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        ids = [
            add_job(
                conn,
                f"pay:{n}:charge:v1",
                kind="payment",
                state="running",
                attempt=2,
                lease_owner="w1",
                lease_until=NOW + 30,
                lease_token=f"tok-{n}",
                updated_at=NOW - 5,
            )
            for n in (1, 2)
        ]
        error = {"type": "ValueError", "message": "no such customer"}
        results = ns.harness(
            HARNESS + "dead_letters_in_a_row",
            str(path),
            [
                [ids[0], "tok-1", "permanent error", error, NOW],
                [ids[1], "stale-token", "permanent error", error, NOW + 1],
            ],
            one_connection=True,
        )
        said = [returned(r, f"dead_letter(job {i})") for r, i in zip(results, ids, strict=True)]
        second = next(j for j in all_jobs(conn) if j["id"] == ids[1])
    expect(
        bool(said[0]) and not said[1] and second["state"] == "running",
        _(
            "True for job {first} (its own token), then False for job {second} (a stale "
            "token) on the same connection, job {second} still running"
        ).format(first=ids[0], second=ids[1]),
        _("{said}; job {second} {state}").format(
            said=", ".join(repr(s) for s in said), second=ids[1], state=second["state"]
        ),
    )


@CHECKS.add(
    2,
    "choose and change every job in ONE write transaction, however many there are: a "
    "redrive committed in batches lets another operator redrive, and a worker take, a job "
    "of a later batch, which you then report (or reset) as yours",
    timeout=30.0,
    severe=True,
)
def a_large_redrive_is_one_transaction(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        ids = add_dead(conn, 260)
        late = ids[230]
        # The oldest, redriven first: a worker may claim it the moment the redrive commits.
        first = ids[0]
        result = ns.harness(
            HARNESS + "redrive_while_a_worker_takes_a_job_after_a_commit",
            str(path),
            {"limit": 250, "now": NOW},
            late,
            NOW + 500,
            first,
        )
        got = returned(result, "redrive(limit=250)")
        rows = {j["id"]: j for j in all_jobs(conn)}
    if result.get("claimed"):
        job = rows[first]
        expect(
            (job["state"], job["lease_token"], job["lease_until"])
            == ("running", "worker-3-token", NOW + 530),
            _(
                "job {job_id}, redriven and then claimed by a worker right after your first "
                "COMMIT, left as the worker holds it: running, its lease_token and lease_until "
                "as the claim set them"
            ).format(job_id=first),
            _("state {state}, lease_token {token}, lease_until {until}").format(
                state=job["state"], token=repr(job["lease_token"]), until=job["lease_until"]
            ),
            "change the jobs in the one transaction that chose them, and nothing after its "
            "COMMIT: a worker may claim a redriven job at once, and a write after the commit "
            "takes its lease away (the job stays running, owned by nobody, for good)",
        )
    if not isinstance(got, list):
        got = []
    theirs = [
        i
        for i in rows
        if (i in got and rows[i]["lease_token"] == "worker-2-token") or rows[i]["redrives"] > 1
    ]
    expect(
        not theirs and len(got) == len(set(got)),
        _(
            "redrive(limit=250) of 260 dead jobs to return only jobs it changed itself, "
            "while an operator and a worker took job {late} right after your first COMMIT"
        ).format(late=late),
        "; ".join(
            f"job {i}: {rows[i]['state']}, redrives {rows[i]['redrives']}" for i in theirs[:5]
        )
        or _("{count} ids for {unique} jobs").format(count=len(got), unique=len(set(got))),
    )


@CHECKS.add(
    1,
    "a dry run shows what the same call then does, on any table: only dead jobs, of the kind "
    "asked for, oldest first (ORDER BY updated_at, id), at most limit; one SELECT for both, "
    "not a second query written apart for the dry run",
    timeout=30.0,
)
def a_dry_run_agrees_with_the_redrive(ns: Namespace) -> None:
    def agrees(case: tuple[list[tuple[str, str, float]], int, str | None]) -> None:
        table, limit, kind = case
        with lab_file(ns) as (conn, path):
            for i, (state, job_kind, at) in enumerate(table):
                add_job(
                    conn, f"{job_kind}:{i}:v1", kind=job_kind, state=state, attempt=1, updated_at=at
                )
            shown = redrive(ns, path, limit=limit, now=NOW, kind=kind, dry_run=True)
            done = redrive(ns, path, limit=limit, now=NOW, kind=kind)
        shape = ", ".join(f"{i}:{s}/{k}@{t:g}" for i, (s, k, t) in enumerate(table, start=1))
        expect(
            list(shown) == list(done),
            _(
                "the dry run for limit={limit}, kind={kind} on jobs {shape} to return the ids "
                "the same call then redrove, {ids}"
            ).format(limit=limit, kind=repr(kind), shape=shape, ids=list(done)),
            _("the dry run returned {ids}").format(ids=list(shown)),
            "let the dry run run the very SELECT the redrive runs (WHERE state = 'dead' AND "
            "the kind, ORDER BY updated_at, id, LIMIT :limit) and skip only the UPDATE",
        )

    # A pending job older than every dead one, and dead jobs whose ids are not in age order.
    agrees(
        ([("pending", "email", 10.0), ("dead", "email", 30.0), ("dead", "email", 20.0)], 1, None)
    )
    cases = st.tuples(TABLES, st.integers(1, 4), st.sampled_from([None, "email", "payment"]))
    holds_for(cases, agrees, examples=15)
    # Jobs buried at the same instant, on a table with an index a query planner may read
    # them through newest first: a dry run whose SELECT forgets the id tie-break shows
    # other jobs than the redrive then takes.
    with lab_file(ns) as (conn, path):
        _tied_on_an_index(conn)
        shown = redrive(ns, path, limit=3, now=NOW, dry_run=True)
        done = redrive(ns, path, limit=3, now=NOW)
    expect(
        list(shown) == list(done),
        _(
            "the dry run for limit=3 on jobs buried at the same instant (a table with an "
            "index of its own) to return the ids the same call then redrove, {ids}"
        ).format(ids=list(done)),
        _("the dry run returned {ids}").format(ids=list(shown)),
        "let the dry run run the very SELECT the redrive runs, ORDER BY updated_at, id "
        "included, and skip only the UPDATE",
    )
    _a_second_dry_run_reads_the_table_again(ns)
    _a_large_dry_run_shows_every_job(ns)


def _a_large_dry_run_shows_every_job(ns: Namespace) -> None:
    """A dry run of a thousand jobs lists every one the redrive then takes: a preview cut
    to its first 20 or 100 (``ids[:20] if dry_run``) hides most of what the redrive does."""
    with lab_file(ns) as (conn, path):
        conn.execute(
            """
            INSERT INTO jobs (key, kind, state, attempt, dead_reason, updated_at)
            WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 1199)
            SELECT 'email:' || i || ':send:v1', 'email', 'dead', 3,
                   'attempts exhausted (3 of 3)', i + 1.0
              FROM n
            """
        )
        shown = redrive(ns, path, limit=1001, now=NOW, dry_run=True)
        done = redrive(ns, path, limit=1001, now=NOW)
    expect(
        isinstance(shown, list) and shown == done,
        _(
            "the dry run for limit=1001 on 1200 dead jobs to return the {count} ids the same "
            "call then redrove"
        ).format(count=len(done) if isinstance(done, list) else done),
        _("the dry run returned {count} ids, ending {tail}").format(
            count=len(shown) if isinstance(shown, list) else repr(shown),
            tail=shown[-3:] if isinstance(shown, list) else "",
        ),
        _(
            "return every id the redrive would take, however many: the operator decides on "
            "the whole list (no preview cut to the first 20 or 100)"
        ),
    )


def _a_second_dry_run_reads_the_table_again(ns: Namespace) -> None:
    """A dry run, the redrive, and the same dry run again in one long-running process (an
    operator's console): the second dry run shows the jobs still dead, never the first's
    answer kept in a module-level cache."""
    with lab_file(ns) as (conn, path):
        ids = add_dead(conn, 4)
        look = {"limit": 2, "now": NOW, "dry_run": True}
        steps: list[list[Any]] = [
            ["redrive", look],
            ["redrive", {"limit": 2, "now": NOW + 10}],
            ["redrive", look],
        ]
        results = ns.harness(HARNESS + "one_worker_process", str(path), steps)
    said = [it_said(r) for r in results]
    expect(
        results[-1].get("returned") == ids[2:],
        _(
            "dry run, redrive, dry run (all limit=2) on dead jobs {ids} in one long-running "
            "process: the second dry run shows {rest}, the two still dead, not a cached "
            "answer from the first"
        ).format(ids=ids, rest=ids[2:]),
        _("the calls said: {said}").format(said="; ".join(said)),
        "run the SELECT on every call, dry run or not: a dry-run answer kept from an earlier "
        "call (a module-level dict by kind and limit) shows jobs already redriven",
    )


def _every_id_once(got: Any, ids: list[int]) -> bool:
    """Whether ``got`` (what redrive returned) lists each of ``ids`` once, in any order."""
    got = list(got) if isinstance(got, (list, tuple)) else []
    return len(got) == len(ids) and all(i in got for i in ids)


#: Queues a dead job can sit in: a redrive takes the dead jobs of every one of them.
QUEUES = ("default", "emails", "Payments-EU", "bulk_low")


@CHECKS.add(
    1,
    "a dead job of any queue is redriven: the redrive filters on state (and kind when "
    "given), not on a queue of its own choosing ('default'), or the dead jobs of every other "
    "queue stay dead for good; and each goes back to its own queue, not to 'default', "
    "where that queue's workers never see it",
    severe=True,
)
def redrive_takes_every_queue(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        ids = [
            add_job(
                conn,
                f"email:{n}:send:v1",
                queue=queue,
                state="dead",
                attempt=3,
                dead_reason="attempts exhausted (3 of 3)",
                updated_at=10.0 * (n + 1),
            )
            for n, queue in enumerate(QUEUES)
        ]
        got = redrive(ns, path, limit=10, now=NOW)
        left = [j["queue"] for j in all_jobs(conn) if j["state"] == "dead"]
        kept = [j["queue"] for j in all_jobs(conn) if j["id"] in ids]
    # In any order: the order is redrive_respects_the_limit's business, so a redrive
    # that takes every queue in another order loses that check, not this one too.
    expect(
        _every_id_once(got, ids) and not left,
        _(
            "the dead jobs {ids} of queues {queues} all redriven (in any order) with limit=10"
        ).format(ids=ids, queues=list(QUEUES)),
        _("returned {ids}; still dead in queues {left}").format(ids=list(got), left=left),
        "choose by state = 'dead' (and the kind when it is given): the redrive has no queue "
        "parameter, so it takes every queue",
    )
    expect(
        kept == list(QUEUES),
        _("the jobs {ids} redriven each in its own queue: {queues}").format(
            ids=ids, queues=list(QUEUES)
        ),
        _("their queues after the redrive: {kept}").format(kept=kept),
        "a redrive changes the state and the fresh start's columns, nothing else: a job "
        "moved to 'default' waits there for workers of another queue",
    )


@CHECKS.add(
    1,
    "a job can be gone when its worker buries it (purged by retention, deleted by an "
    "operator): dead_letter then returns False like any other row it did not change, "
    "never an exception the worker did not expect",
)
def dead_letter_of_a_job_that_is_gone(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        job_id = add_running(conn)
        conn.execute("DELETE FROM jobs WHERE id = :id", {"id": job_id})
        result = ns.harness(
            HARNESS + "dead_letter",
            str(path),
            job_id,
            "tok-1",
            "permanent error",
            {"type": "ValueError"},
            NOW,
        )
        left = all_jobs(conn)
    expect(
        "raised" not in result and not result.get("returned") and not left,
        _("False for job {job_id}, deleted while its worker ran, and no row made").format(
            job_id=job_id
        ),
        it_said(result) + (_("; rows: {rows}").format(rows=len(left)) if left else ""),
        "let the fenced UPDATE find no row and return False: no lookup that raises first",
    )


@CHECKS.add(
    1,
    "the key never changes, from the dead letter to the redrive: a key marked ':dead' (to "
    "free the name) comes back from the redrive as a new job to the destination, which "
    "charges again",
    severe=True,
)
def the_key_survives_a_dead_letter_and_a_redrive(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        # Capitals and accents in it, as a caller's keys have: a key lower-cased or
        # "normalised" on the way is a new key to the destination all the same.
        job_id = add_running(conn, key="Pay:7:Charge:São-Paulo:v1")
        key = all_jobs(conn)[0]["key"]
        ns.harness(
            HARNESS + "dead_letter",
            str(path),
            job_id,
            "tok-1",
            "permanent error",
            {"type": "ValueError"},
            NOW,
        )
        buried = all_jobs(conn)[0]["key"]
        ns.harness(HARNESS + "redrive", str(path), limit=1, now=NOW + 10)
        keys = [job["key"] for job in all_jobs(conn)]
    expect(
        keys == [key],
        _("one row with key {key} after dead_letter and then redrive").format(key=repr(key)),
        _("keys {keys} (after dead_letter: {buried})").format(keys=keys, buried=repr(buried)),
        "leave the key alone in dead_letter and in redrive: it is how the destination "
        "recognises a repeat",
    )


@CHECKS.add(
    1,
    "ties broken by id (ORDER BY updated_at, id) on a table with an index of its own: "
    "without id, jobs buried at the same instant come in whatever order the database "
    "reads them, here newest id first; and by the id as a number (9 before 10), never "
    "as text, nor by anything else first (the error, the redrives so far)",
)
def redrive_breaks_ties_by_id_on_an_indexed_table(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        ids = _tied_on_an_index(conn)
        want = [ids[4], ids[0], ids[1]]
        got = redrive(ns, path, limit=3, now=NOW)
        pending = _now_pending(conn)
    expect(
        list(got) == want,
        _(
            "{want} with limit=3: job {oldest} (buried at 20.25), then jobs {first} and "
            "{second}, the lowest ids of the four buried together at 20.4"
        ).format(want=want, oldest=ids[4], first=ids[0], second=ids[1]),
        _("returned {ids}").format(ids=list(got)),
        "ORDER BY updated_at, id: SQL returns rows with equal updated_at in no promised "
        "order (a table scan, an index read backwards), so name the tie-breaker",
    )
    expect_the_returned_are_the_pending(got, pending, "redrive(conn, limit=3, now=1000)")
    # The same jobs on a table whose index lists the dead newest id first: rows read
    # without an ORDER BY and sorted by updated_at in Python keep the index's order on a
    # tie (a stable sort), so the tie-break must be named there too.
    with lab_file(ns) as (conn, path):
        ids = _tied_on_an_index(conn, "CREATE INDEX jobs_dead_by_id ON jobs (state, id DESC)")
        want = [ids[4], ids[0], ids[1]]
        got = redrive(ns, path, limit=3, now=NOW)
    expect(
        list(got) == want,
        _(
            "{want} with limit=3 on a table with an index on (state, id DESC): job {oldest} "
            "(buried at 20.25), then jobs {first} and {second}, the lowest ids of the four "
            "buried together at 20.4, however the rows were read"
        ).format(want=want, oldest=ids[4], first=ids[0], second=ids[1]),
        _("returned {ids}").format(ids=list(got)),
        "break the tie by id wherever you sort (ORDER BY updated_at, id, or key=(updated_at, "
        "id) in Python): rows read without ORDER BY come in the order an index gives them",
    )


def _tied_on_an_index(
    conn: sqlite3.Connection,
    index: str = "CREATE INDEX jobs_dead_newest ON jobs (state, updated_at DESC)",
) -> list[int]:
    """Eight succeeded jobs, then five dead ones (their ids): the first four buried together
    at 20.4, the last 0.15 s earlier; and an index a query planner may read them through,
    newest first."""
    # The operators' dashboard lists the newest dead letters first through this index;
    # a query planner may read a redrive's rows through it too.
    conn.execute(index)
    # Jobs 1 to 8 went through; the four buried together are 9 to 12, so an id
    # compared as text ('10' < '9') breaks their tie wrongly too.
    for n in range(8):
        add_job(conn, f"email:{n}:done:v1", state="succeeded", updated_at=1.0)
    ids = [
        add_job(
            conn,
            f"email:{n}:send:v1",
            state="dead",
            attempt=3,
            dead_reason="attempts exhausted (3 of 3)",
            # Their errors in the reverse order of their ids, and the oldest buried 0.15 s
            # before the others (the same second, even rounded: round(updated_at) ties them).
            last_error=f"TimeoutError: attempt {9 - n}",
            updated_at=20.4 if n < 4 else 20.25,
        )
        for n in range(5)
    ]
    # Redriven before in the reverse order of their ids too: ORDER BY updated_at,
    # redrives, id puts the newest of the tied first.
    for n, job_id in enumerate(ids):
        conn.execute("UPDATE jobs SET redrives = ? WHERE id = ?", (4 - n, job_id))
    return ids


def _now_pending(conn: sqlite3.Connection) -> list[int]:
    return [j["id"] for j in all_jobs(conn) if j["state"] == "pending"]


def expect_the_returned_are_the_pending(got: Any, pending: list[int], call: str) -> None:
    """The jobs ``call`` returned are the jobs it made pending, no more, no fewer."""
    expect(
        sorted(got) == sorted(pending),
        _("the jobs {call} returned to be the jobs it made pending").format(call=call),
        _("returned {ids}; pending now: {pending}").format(ids=list(got), pending=pending),
        "let the UPDATE change exactly the ids the SELECT chose (WHERE id IN those ids), "
        "not rows a second query of its own picks: on a tie, or with another writer, the "
        "two choose different jobs, and the operator is told of jobs still dead",
    )


@CHECKS.add(
    1,
    "the ids a redrive returns are the jobs it changed: an UPDATE that picks its rows with "
    "a query of its own (without the id tie-break, on a table with an index) redrives other "
    "jobs than those it reports, and the jobs the operator is told went back stay dead",
    severe=True,
)
def redrive_changes_the_jobs_it_returns(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        _tied_on_an_index(conn)
        got = redrive(ns, path, limit=3, now=NOW)
        pending = _now_pending(conn)
    expect_the_returned_are_the_pending(got, pending, "redrive(conn, limit=3, now=1000)")
    # With a kind: the email jobs are the oldest dead, so a SELECT that forgets the kind
    # (and an UPDATE that remembers it) reports jobs it left dead.
    with lab_file(ns) as (conn, path):
        add_dead(conn, 3, kind="email")
        add_dead(conn, 3, kind="payment", first_id=3)
        got = redrive(ns, path, limit=2, now=NOW, kind="payment")
        pending = _now_pending(conn)
    expect_the_returned_are_the_pending(
        got, pending, "redrive(conn, limit=2, now=1000, kind='payment')"
    )


@CHECKS.add(
    1,
    "a job buried by dead_letter and then redriven is claimed again by a worker of its own "
    "queue: a dead letter that moves it to a queue of its own ('dead', a DLQ) leaves it "
    "pending where no worker looks, and it never runs again",
    severe=True,
)
def a_redriven_job_runs_again_in_its_queue(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        job_id = add_job(
            conn,
            "email:7:send:v1",
            queue="emails",
            state="running",
            attempt=3,
            lease_owner="w1",
            lease_until=NOW + 30,
            lease_token="tok-1",
            updated_at=NOW - 5,
        )
        error = {"type": "TimeoutError", "message": "slow"}
        bury(ns, path, job_id, "tok-1", "attempts exhausted (3 of 3)", error, NOW)
        redrive(ns, path, limit=1, now=NOW + 10)
        # A worker of queue 'emails' claims its oldest ready job, a minute later.
        claimed = conn.execute(
            "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = 'w2',"
            " lease_token = 'tok-2', lease_until = :at + 30, updated_at = :at"
            " WHERE id = (SELECT id FROM jobs WHERE queue = 'emails' AND state = 'pending'"
            " AND run_after <= :at ORDER BY run_after, id LIMIT 1) RETURNING id",
            {"at": NOW + 70},
        ).fetchall()
        job = row_of(conn, job_id)
    expect(
        [row["id"] for row in claimed] == [job_id],
        _(
            "job {job_id} of queue 'emails', buried and then redriven, claimed by a worker "
            "of queue 'emails'"
        ).format(job_id=job_id),
        _("no job claimed; job {job_id} is {state} in queue {queue}").format(
            job_id=job_id, state=job["state"], queue=repr(job["queue"])
        ),
        "leave the queue alone in dead_letter (and in redrive): state = 'dead' already says "
        "the job is a dead letter, and a redriven job goes back where its workers look",
    )


#: Dead jobs a redrive must take like any other: one redriven three times already, one
#: ten times, one buried while it waited for a retry (run_after still ahead), one with no
#: reason or error recorded (buried by older code), one at attempt 0 of its budget.
ANY_DEAD: tuple[dict[str, object], ...] = (
    {"redrives": 3},
    {"redrives": 10},
    {"run_after": NOW + 3_600.0},
    {"dead_reason": None, "last_error": None},
    {"attempt": 0},
    # Buried by a worker whose dead letter left its lease as it was (as a complete() may,
    # see dead_letter_needs_a_running_job): a dead job is nobody's, whatever lease it shows.
    {"lease_owner": "w-old", "lease_until": NOW + 3_600.0, "lease_token": "t-old"},
    # Buried by a permanent error: the operator redrives it once its cause is fixed (the
    # customer created, the config corrected), so a redrive takes it like any other.
    {"attempt": 1, "dead_reason": "permanent error", "last_error": "BadRequest: no such customer"},
)


@CHECKS.add(
    2,
    "every dead job is redriven when asked, however often it was redriven before, whatever "
    "its run_after, reason or attempt: a filter of the code's own (redrives < 3, run_after "
    "<= now, a reason recorded, not a permanent error) leaves those jobs dead for good, and "
    "the redrive says nothing; and each comes back with its attempts to run (attempt 0)",
    severe=True,
)
def every_dead_job_can_be_redriven(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        ids = []
        for n, extra in enumerate(ANY_DEAD):
            fields: dict[str, object] = {
                "kind": "email",
                "state": "dead",
                "attempt": 3,
                "dead_reason": "attempts exhausted (3 of 3)",
                "last_error": "TimeoutError: slow",
                "updated_at": 10.0 * (n + 1),
            }
            fields.update(extra)
            redrives = fields.pop("redrives", 0)
            job_id = add_job(conn, f"email:{n}:send:v1", **fields)
            conn.execute(
                "UPDATE jobs SET redrives = :r WHERE id = :id", {"r": redrives, "id": job_id}
            )
            ids.append(job_id)
        got = redrive(ns, path, limit=10, now=NOW)
        left = [
            f"{i} ({', '.join(f'{k}={v!r}' for k, v in extra.items())})"
            for i, extra in zip(ids, ANY_DEAD, strict=True)
            if row_of(conn, i)["state"] == "dead"
        ]
        # Back with no try left: pending at attempt >= max_attempts (a budget that shrinks
        # with each redrive, attempt = redrives) runs once at most and is buried again.
        spent = [
            f"{i} (redrives {job['redrives']}, attempt {job['attempt']} of {job['max_attempts']})"
            for i in ids
            for job in [row_of(conn, i)]
            if job["state"] == "pending" and job["attempt"] >= job["max_attempts"]
        ]
    # In any order: a wrong order loses the order's own checks; this severe one judges
    # only whether every dead job came back.
    expect(
        _every_id_once(got, ids) and not left,
        _("the dead jobs {ids} all redriven (in any order) with limit=10").format(ids=ids),
        _("returned {ids}; still dead: {left}").format(
            ids=list(got), left="; ".join(left) or _("none")
        ),
        "choose by state = 'dead' (and the kind when it is given), nothing else: an operator "
        "who asks for a redrive gets every dead job up to the limit",
    )
    expect(
        not spent,
        _(
            "the dead jobs {ids}, redriven 0 to 10 times before, all back with their "
            "attempts to run (attempt 0, below max_attempts)"
        ).format(ids=ids),
        _("pending with no attempt left: {jobs}").format(jobs="; ".join(spent)),
        _(
            "set attempt = 0 for every job redriven, however often it was redriven before: "
            "a job pending with its attempts used up is buried again at its first failure, "
            "or never runs"
        ),
    )
    _redriven_again_in_the_same_process(ns)


def _redriven_again_in_the_same_process(ns: Namespace) -> None:
    """A job redriven, claimed and buried again comes back at the next redrive of the same
    long-running process: a memory of the code's own (a module-level set of the ids it
    redrove, "each dead job is redriven once") leaves it dead for good."""
    slow = {"type": "TimeoutError", "message": "slow"}
    with lab_file(ns) as (conn, path):
        job_id = add_running(conn)
        steps: list[list[Any]] = [
            ["dead_letter", job_id, "tok-1", "attempts exhausted", slow, NOW],
            ["redrive", {"limit": 5, "now": NOW + 10}],
            ["claim", job_id, "tok-2", NOW + 20],
            ["dead_letter", job_id, "tok-2", "attempts exhausted", slow, NOW + 30],
            ["redrive", {"limit": 5, "now": NOW + 40}],
        ]
        results = ns.harness(HARNESS + "one_worker_process", str(path), steps)
        job = row_of(conn, job_id)
    said = [it_said(r) for r in results]
    expect(
        results[-1].get("returned") == [job_id]
        and (job["state"], job["redrives"]) == ("pending", 2),
        _(
            "job {job_id} buried, redriven, claimed, buried again and then redriven again in "
            "one long-running process: [{job_id}] returned by the second redrive, the job "
            "pending with redrives 2"
        ).format(job_id=job_id),
        _("the calls said: {said}; the job is {state}, redrives {redrives}").format(
            said="; ".join(said), state=job["state"], redrives=job["redrives"]
        ),
        "choose by what the table says (state = 'dead'), never by a memory of your own of "
        "the jobs you redrove before: a job dies again after a redrive, and 'redriven once' "
        "is about two operators at the same moment, not about its whole life",
    )


@CHECKS.add(
    2,
    "a BEGIN IMMEDIATE that fails ('database is locked': another writer held the lock "
    "past the busy timeout) ends the redrive with that error, or is tried again: a "
    "redrive that swallows it and goes on chooses its jobs without the lock, and two "
    "operators both report the same dead job redriven while another stays dead",
    severe=True,
)
def a_refused_begin_is_not_a_redrive_without_the_lock(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        add_dead(conn, 2)
        got = ns.harness(
            HARNESS + "begin_refused_once", "redrive", str(path), [], {"limit": 1, "now": NOW}
        )
    expect_no_write_after_a_refused_begin(
        got,
        "redrive(conn, limit=1, now=1000)",
        _(
            "let the OperationalError of BEGIN IMMEDIATE out (the operator runs the "
            "redrive again), or retry the BEGIN; never go on to the SELECT and the UPDATE "
            "without the transaction"
        ),
    )


#: Secrets an error's chain carries: the lower-level error it was raised from
#: (``__cause__``), and the one being handled when it was raised (``__context__``).
_CHAINED_SECRETS = (
    (
        "__cause__",
        "Tr0ub4dor-77",
        {
            "type": "ValueError",
            "message": "the ERP refused order ORD-7",
            "cause": {
                "type": "ConnectionError",
                "message": "could not connect to postgres://app:Tr0ub4dor-77@db.internal/erp",
            },
        },
    ),
    (
        "__context__",
        "eyJhbGciOiJIUzI1NiJ9.b3JkZXI.c2VjcmV0",
        {
            "type": "ValueError",
            "message": "the ERP refused order ORD-8",
            "context": {
                "type": "PermissionError",
                "message": "POST https://erp.example/orders (401), sent Authorization: "
                "Bearer eyJhbGciOiJIUzI1NiJ9.b3JkZXI.c2VjcmV0",
            },
        },
    ),
)


@CHECKS.add(
    1,
    "no secret of the error's chain stored either: the error it was raised from "
    "(__cause__) or raised during (__context__) carries its own, unredacted; store "
    "describe(error) alone, never the cause, the context or a traceback appended raw; and "
    "describe an error that is no Exception (a BaseException) the same way",
    severe=True,
)
def dead_letter_hides_the_secrets_of_the_chain(ns: Namespace) -> None:
    for link, secret, error in _CHAINED_SECRETS:
        with lab_file(ns) as (conn, path):
            job_id = add_running(conn)
            result = ns.harness(
                HARNESS + "dead_letter",
                str(path),
                job_id,
                "tok-1",
                "permanent error",
                error,
                NOW,
            )
            row = row_of(conn, job_id)
        leaked = [
            column for column, value in row.items() if isinstance(value, str) and secret in value
        ]
        expect(
            not leaked,
            _(
                "no secret of the error's {link} ({secret}) in any column of job {job_id}, "
                "buried with {error}"
            ).format(
                link=link,
                secret=repr(secret),
                job_id=job_id,
                error=repr(f"{error['type']}: {error['message']}"),
            ),
            _("{said}; the secret is in {columns}: {value}").format(
                said=it_said(result),
                columns=", ".join(leaked),
                value=short_repr(row[leaked[0]]) if leaked else "",
            ),
            _(
                "last_error = labkit.redact.describe(error), the error given and nothing "
                "more: its {link} (and a traceback, which shows the whole chain) holds the "
                "lower-level error's words as they are, passwords and tokens included"
            ).format(link=link),
        )
    # An error that is no Exception (a cancellation is a BaseException, as
    # asyncio.CancelledError is) carries secrets too: describe() it like any other.
    secret = "Sw0rdf1sh-42"
    message = f"cancelled while posting to https://erp:{secret}@erp.example/orders"
    with lab_file(ns) as (conn, path):
        job_id = add_running(conn)
        result = ns.harness(
            HARNESS + "dead_letter_of_a_cancelled_job",
            str(path),
            job_id,
            "tok-1",
            "cancelled by the watchdog",
            message,
            NOW,
        )
        row = row_of(conn, job_id)
    leaked = [column for column, value in row.items() if isinstance(value, str) and secret in value]
    expect(
        not leaked and row["state"] == "dead",
        _(
            "job {job_id} dead, with no secret ({secret}) in any column, buried with "
            "JobCancelled (a BaseException, not an Exception): {error}"
        ).format(job_id=job_id, secret=repr(secret), error=repr(message)),
        _("{said}; state {state}; the secret is in {columns}: {value}").format(
            said=it_said(result),
            state=row["state"],
            columns=", ".join(leaked) or _("no column"),
            value=short_repr(row[leaked[0]]) if leaked else "",
        ),
        _(
            "last_error = labkit.redact.describe(error) for every error given, an Exception "
            "or not: describe() redacts a BaseException's message too"
        ),
    )


@CHECKS.add(
    1,
    "dead_letter stores what it is given: last_error = describe(error) of that very error "
    "(a quote in its text is data, passed as a :named parameter; not the error it was "
    "raised during, __context__), and dead_reason = reason, an empty one too (not the "
    "error written in its place)",
)
def dead_letter_stores_the_error_given(ns: Namespace) -> None:
    message = 'the customer\'s card was declined ("do not honor")'
    error = {
        "type": "ValueError",
        "message": message,
        "context": {"type": "KeyError", "message": "card"},
    }
    with lab_file(ns) as (conn, path):
        job_id = add_running(conn)
        result = ns.harness(
            HARNESS + "dead_letter", str(path), job_id, "tok-1", "permanent error", error, NOW
        )
        stored = row_of(conn, job_id)["last_error"]
    want = f"ValueError: {message}"
    expect(
        result.get("returned") is True,
        _("True for job {job_id}, buried with the error {error} (quotes in its text)").format(
            job_id=job_id, error=repr(want)
        ),
        it_said(result),
        "pass describe(error) as a :named parameter (:error), never pasted into the SQL "
        "with an f-string: an error's text is anyone's, quotes included",
    )
    expect(
        stored == want,
        _("last_error {want}: the error given, raised while a KeyError was handled").format(
            want=repr(want)
        ),
        _("last_error {stored}").format(stored=repr(stored)),
        "describe(error) of the error you were given: not its __context__ (the error it "
        "was raised during) nor its __cause__",
    )
    with lab_file(ns) as (conn, path):
        job_id = add_running(conn)
        result = ns.harness(
            HARNESS + "dead_letter",
            str(path),
            job_id,
            "tok-1",
            "",
            {"type": "ValueError", "message": "no such customer"},
            NOW,
        )
        job = row_of(conn, job_id)
    expect(
        result.get("returned") is True and job["dead_reason"] in ("", None),
        _(
            "True, and job {job_id} buried with an empty reason ('') keeps it empty: "
            "dead_reason '' (the error is in last_error already)"
        ).format(job_id=job_id),
        _("{said}; dead_reason {reason}").format(
            said=it_said(result), reason=repr(job["dead_reason"])
        ),
        "dead_reason = reason as given: the reason is the worker's words, the error is "
        "last_error's; one written into the other's place says twice what happened and "
        "never why",
    )
    # Two errors with the same words, of two classes, one after the other in one worker:
    # a text kept from the first (a cache keyed by the message, str(error) or error.args)
    # names the wrong class on the second.
    same = "the ERP did not answer in 30 s"
    errors = [
        {"type": "TimeoutError", "message": same},
        {"type": "PermissionError", "message": same},
    ]
    with lab_file(ns) as (conn, path):
        ids = [add_running(conn, token="tok-1")]
        ids.append(add_running(conn, token="tok-2", key="pay:8:charge:v1", attempt=1))
        results = ns.harness(
            HARNESS + "dead_letters_in_a_row",
            str(path),
            [
                [job_id, f"tok-{n}", "permanent error", error, NOW + n]
                for n, (job_id, error) in enumerate(zip(ids, errors, strict=True), start=1)
            ],
        )
        stored = [row_of(conn, i)["last_error"] for i in ids]
    want = [f"{e['type']}: {e['message']}" for e in errors]
    expect(
        stored == want,
        _(
            "last_error {want} for two jobs buried one after the other in one worker, with "
            "errors of two classes and the same message"
        ).format(want=want),
        _("{said}; last_error {stored}").format(
            said="; ".join(it_said(r) for r in results), stored=stored
        ),
        "describe(error) of each error you are given: a text kept from an earlier call with "
        "the same message names that call's error class, not this one's",
    )
    # An error with no message still names its class: describe() gives "ValueError", and the
    # reason is dead_reason's, not a stand-in for a quiet error.
    with lab_file(ns) as (conn, path):
        job_id = add_running(conn)
        result = ns.harness(
            HARNESS + "dead_letter",
            str(path),
            job_id,
            "tok-1",
            "permanent error",
            {"type": "ValueError"},
            NOW,
        )
        job = row_of(conn, job_id)
    expect(
        (job["last_error"], job["dead_reason"]) == ("ValueError", "permanent error"),
        _(
            "last_error 'ValueError' and dead_reason 'permanent error' for job {job_id}, buried "
            "with a ValueError that has no message"
        ).format(job_id=job_id),
        _("{said}; last_error {error}, dead_reason {reason}").format(
            said=it_said(result), error=repr(job["last_error"]), reason=repr(job["dead_reason"])
        ),
        _(
            "last_error = describe(error) for an error with no message too (it names the "
            "class): not the reason, nor nothing"
        ),
    )


@CHECKS.add(
    1,
    "dead_letter returns True only when THIS call buried the job, and changes nothing "
    "otherwise: False for a job already dead (the worker's second try, a job buried "
    "before), and no write before the fenced UPDATE (the reason first, then the state): "
    "if the lease moves in between, the job runs on with a reason and an error not its own",
)
def dead_letter_is_true_only_when_it_buries(ns: Namespace) -> None:
    error = {"type": "ValueError", "message": "no such customer"}
    with lab_file(ns) as (conn, path):
        job_id = add_running(conn)
        first = bury(ns, path, job_id, "tok-1", "permanent error", error, NOW)
        buried = row_of(conn, job_id)
        # The worker never saw the first answer (its connection dropped) and tries again.
        again = ns.harness(
            HARNESS + "dead_letter", str(path), job_id, "tok-1", "permanent error", error, NOW + 5
        )
        # Buried by older code that left its lease on the row: a dead job is nobody's.
        old = add_job(
            conn,
            "pay:8:charge:v1",
            kind="payment",
            state="dead",
            attempt=3,
            lease_owner="w-old",
            lease_until=NOW + 3_600.0,
            lease_token="t-old",
            dead_reason="attempts exhausted (3 of 3)",
            last_error="TimeoutError: slow",
            updated_at=NOW - 50,
        )
        kept = row_of(conn, old)
        late = ns.harness(
            HARNESS + "dead_letter", str(path), old, "t-old", "permanent error", error, NOW + 5
        )
        after = {i: row_of(conn, i) for i in (job_id, old)}
    expect(bool(first), _("True for job {job_id}, buried").format(job_id=job_id), first)
    expect(
        "raised" not in again and not again.get("returned") and after[job_id] == buried,
        _(
            "False for job {job_id} buried a second time with the same token 'tok-1' (the "
            "first call buried it, and cleared the token), and the job left as the first "
            "call left it"
        ).format(job_id=job_id),
        _("{said}; updated_at {before} -> {now}").format(
            said=it_said(again), before=buried["updated_at"], now=after[job_id]["updated_at"]
        ),
        "return whether your fenced UPDATE changed the row (RETURNING id, or rowcount), "
        "not whether the job is dead after it: the job was dead already",
    )
    expect(
        "raised" not in late and not late.get("returned") and after[old] == kept,
        _(
            "False for job {job_id}, dead already with the token 't-old' its burial left on "
            "it, and the job unchanged"
        ).format(job_id=old),
        _("{said}; state {state}").format(said=it_said(late), state=after[old]["state"]),
        "fence on state = 'running' AND lease_token = :token, and return whether that "
        "UPDATE changed the row",
    )
    _changes_nothing_when_the_lease_moves(ns)


def _changes_nothing_when_the_lease_moves(ns: Namespace) -> None:
    """The lease moves the moment the call's first change is committed: that change must
    be the burial (then the job is dead and no other worker takes it)."""
    at = NOW + 5
    with lab_file(ns) as (conn, path):
        job_id = add_running(conn)
        conn.execute(
            "UPDATE jobs SET last_error = 'TimeoutError: slow' WHERE id = :id", {"id": job_id}
        )
        before = row_of(conn, job_id)
        got = ns.harness(
            HARNESS + "dead_letter_as_the_lease_moves_after_a_write",
            str(path),
            job_id,
            "tok-1",
            NOW,
            at,
        )
        job = row_of(conn, job_id)
    # "taken": the first change the call committed left the job running, so it was not
    # the burial; the lease then moved to another worker. A call whose one fenced UPDATE
    # is its first committed change never lets that happen.
    moved = {
        "attempt": before["attempt"] + 1,
        "lease_owner": "worker-2",
        "lease_token": "worker-2-token",
        "lease_until": at + 30,
        "updated_at": at,
    }
    want = {**before, **moved}
    changed = {k: f"{want[k]!r} -> {job[k]!r}" for k in want if job[k] != want[k]}
    expect(
        not got.get("taken"),
        _(
            "job {job_id} buried by the first write of dead_letter(job {job_id}, 'tok-1') "
            "(its one fenced UPDATE), or left as it was"
        ).format(job_id=job_id),
        _(
            "a write of your call left the job running; the lease then moved to another "
            "worker (lease_token 'worker-2-token'), and your call went on: {said}; the job "
            "is {state}, changed by your call: {changes}"
        ).format(
            said=it_said(got),
            state=job["state"],
            changes=", ".join(f"{k} {v}" for k, v in changed.items())
            or _("nothing the new holder did not overwrite"),
        ),
        "set state, dead_reason, last_error and the lease in the one fenced UPDATE (WHERE "
        "id = :id AND state = 'running' AND lease_token = :token): a write before it lands "
        "on a job that may be another worker's by the time the fence is checked",
    )


@CHECKS.add(
    1,
    "dead_letter keeps no memory of its own between calls: in one long-running worker a job "
    "buried again after a redrive gets its new reason and error, and every job of a batch "
    "claimed under one token is buried (a cache by job id, a set of tokens used)",
)
def dead_letter_remembers_nothing_between_calls(ns: Namespace) -> None:
    first = {"type": "TimeoutError", "message": "the ERP did not answer in 30 s"}
    second = {"type": "PermissionError", "message": "the ERP refused the API key"}
    with lab_file(ns) as (conn, path):
        job_id = add_running(conn)
        steps: list[list[Any]] = [
            ["dead_letter", job_id, "tok-1", "attempts exhausted (3 of 3)", first, NOW],
            ["redrive", {"limit": 5, "now": NOW + 10}],
            ["claim", job_id, "tok-2", NOW + 20],
            ["dead_letter", job_id, "tok-2", "permanent error", second, NOW + 30],
        ]
        results = ns.harness(HARNESS + "one_worker_process", str(path), steps)
        job = row_of(conn, job_id)
    want = ("dead", "permanent error", "PermissionError: the ERP refused the API key")
    got = (job["state"], job["dead_reason"], job["last_error"])
    expect(
        got == want,
        _(
            "job {job_id} buried, redriven, claimed and buried again in one worker: dead, "
            "dead_reason {reason}, last_error {error} (the second burial's)"
        ).format(job_id=job_id, reason=repr(want[1]), error=repr(want[2])),
        _(
            "the calls said: {said}; the job is {state}, dead_reason {reason}, last_error {error}"
        ).format(
            said="; ".join(it_said(r) for r in results),
            state=got[0],
            reason=repr(got[1]),
            error=repr(got[2]),
        ),
        _(
            "describe(error) and the reason of each call, written by its own UPDATE: a text "
            "kept by job id from an earlier burial hides why the job died this time"
        ),
    )
    # One claim handed the worker two jobs under one token (a batch): burying both, one
    # after the other in the same worker, buries both.
    with lab_file(ns) as (conn, path):
        ids = [add_running(conn, token="batch-tok")]
        ids.append(add_running(conn, token="batch-tok", key="pay:8:charge:v1", attempt=1))
        error = {"type": "ValueError", "message": "no such customer"}
        results = ns.harness(
            HARNESS + "dead_letters_in_a_row",
            str(path),
            [[i, "batch-tok", "permanent error", error, NOW + n] for n, i in enumerate(ids)],
        )
        states = [row_of(conn, i)["state"] for i in ids]
    expect(
        [r.get("returned") for r in results] == [True, True] and states == ["dead", "dead"],
        _(
            "True for each of jobs {ids}, claimed together under the token 'batch-tok' and "
            "buried one after the other in one worker, and both dead"
        ).format(ids=ids),
        _("{said}; in the table: {states}").format(
            said="; ".join(it_said(r) for r in results), states=states
        ),
        _(
            "let the fenced UPDATE (id, state and token) decide every call: a token remembered "
            "as used after one job of a batch refuses the next, which runs again"
        ),
    )


@CHECKS.add(
    1,
    "the oldest dead letters first (ORDER BY updated_at, id), whatever else the row says: "
    "not the least redriven first, not the often-redriven ('poison') ones last, not by "
    "run_after or attempt; the operator asked for the oldest",
)
def redrive_takes_the_oldest_whatever_else_the_row_says(ns: Namespace) -> None:
    # (redrives, run_after, attempt) of dead jobs buried at 10, 20, 30, 40, 50.
    shapes = ((5, 500.0, 3), (0, 50.0, 3), (3, 0.0, 1), (1, 5.0, 2), (0, 1.0, 0))
    with lab_file(ns) as (conn, path):
        ids = []
        for n, (redrives, run_after, attempt) in enumerate(shapes):
            job_id = add_job(
                conn,
                f"email:{n}:send:v1",
                state="dead",
                attempt=attempt,
                run_after=run_after,
                dead_reason="attempts exhausted (3 of 3)",
                updated_at=10.0 * (n + 1),
            )
            conn.execute(
                "UPDATE jobs SET redrives = :r WHERE id = :id", {"r": redrives, "id": job_id}
            )
            ids.append(job_id)
        got = redrive(ns, path, limit=2, now=NOW)
        pending = _now_pending(conn)
    shape = "; ".join(
        f"{i}: buried at {10 * (n + 1)}, redrives {r}, run_after {ra:g}, attempt {a}"
        for n, (i, (r, ra, a)) in enumerate(zip(ids, shapes, strict=True))
    )
    expect(
        list(got) == ids[:2] and sorted(pending) == ids[:2],
        _("{want} with limit=2, the two oldest, on dead jobs {shape}").format(
            want=ids[:2], shape=shape
        ),
        _("returned {ids}; pending now: {pending}").format(ids=list(got), pending=pending),
        _(
            "ORDER BY updated_at, id and nothing before it: a job redriven before, or due "
            "later, is no younger for it"
        ),
    )
    _ex06_a_tie_whatever_else_the_rows_say(ns)
    _ex06_buried_under_a_millisecond_apart(ns)


#: Three dead jobs buried together at 40 (queue, dead_reason, max_attempts, run_after,
#: last_error): the lowest id on another queue, with the reason that sorts last, the
#: largest budget, the latest run_after and no error stored; ORDER BY updated_at then
#: any of these before id takes another first.
_EX06_TIED = (
    ("reports", "upstream refused: quota exceeded", 9, 900.0, None),
    ("default", "attempts exhausted (3 of 3)", 3, 5.0, "TimeoutError: smtp"),
    ("billing", "attempts exhausted (3 of 3)", 3, 1.0, "TimeoutError: smtp"),
)


def _ex06_a_tie_whatever_else_the_rows_say(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        ids = [
            add_job(
                conn,
                f"email:{n}:send:v1",
                queue=queue,
                state="dead",
                attempt=3,
                max_attempts=budget,
                run_after=run_after,
                dead_reason=reason,
                last_error=error,
                updated_at=40.0,
            )
            for n, (queue, reason, budget, run_after, error) in enumerate(_EX06_TIED)
        ]
        got = redrive(ns, path, limit=2, now=NOW)
    shape = "; ".join(
        _("{job_id}: queue {queue}, dead_reason {reason}, max_attempts {budget}").format(
            job_id=job_id, queue=queue, reason=repr(reason), budget=budget
        )
        for job_id, (queue, reason, budget, _r, _e) in zip(ids, _EX06_TIED, strict=True)
    )
    expect(
        list(got) == ids[:2],
        _(
            "{want} with limit=2, the two lowest ids of three dead jobs buried together at "
            "40 ({shape}): a tie of updated_at goes to the smaller id, whatever queue, "
            "reason, budget, run_after or error a job carries"
        ).format(want=ids[:2], shape=shape),
        _("returned {ids}").format(ids=list(got)),
        _("ORDER BY updated_at, id: nothing between the two"),
    )


def _ex06_buried_under_a_millisecond_apart(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        later = add_job(
            conn, "email:1:send:v1", state="dead", attempt=3, dead_reason="x", updated_at=50.0009
        )
        sooner = add_job(
            conn, "email:2:send:v1", state="dead", attempt=3, dead_reason="x", updated_at=50.0001
        )
        got = redrive(ns, path, limit=1, now=NOW)
    expect(
        list(got) == [sooner],
        _(
            "[{sooner}] with limit=1: job {sooner} was buried at 50.0001, job {later} at "
            "50.0009, less than a millisecond later but later"
        ).format(sooner=sooner, later=later),
        _("returned {ids}").format(ids=list(got)),
        _("ORDER BY updated_at, id on the column itself: never cut to the millisecond"),
    )
