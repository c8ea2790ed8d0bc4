"""Exercise 3: claim a job atomically with a lease, in one ``UPDATE ... RETURNING``.

The student writes ``claim(conn, worker, now, lease_s)`` on the exercise table
(``labkit.grading.exercises.labdb``). Each check makes the database file under the student's
folder, runs ``claim`` through the harness (``labkit.grading.exercises.ex03.harness``, which opens
its own connections) and reads the table back itself. The race check runs real
threads, each with its own connection, and widens the window between a read and a
write (every plain SELECT outside a transaction pauses), so a read-then-write claim is
caught every time instead of once in a while. Boundaries are exact: a job due exactly
now, a lease ending exactly now.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from labkit.grading.checks import CheckFailed, Checks, Namespace, expect
from labkit.grading.exercises.helpers import holds_for, raised_text
from labkit.grading.exercises.kit import lab_file, reading
from labkit.grading.exercises.labdb import add_job, all_jobs, lab_db
from labkit.grading.exercises.racesweep import after_every_schedule
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


@CHECKS.add(
    1,
    "UPDATE jobs SET state='running', lease_owner=:worker, lease_until=:now + :lease_s "
    "... WHERE id = (SELECT ... LIMIT 1) RETURNING *, then return dict(row) or None",
)
def claims_one_ready_job(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        job_id = add_job(conn, "mail:1:send:v1")
        got = _claim(ns, path, "w1", 100.0, 30.0)
        expect(got is not None, "the pending job", "None")
        expect(
            got.get("id") == job_id,
            _("a dict for job {job_id} (the whole row)").format(job_id=job_id),
            got,
        )
        stored = _job(conn, job_id)
        expect(
            stored["state"] == "running" and stored["lease_owner"] == "w1",
            "the job running, leased to w1, in the database",
            f"state={stored['state']}, lease_owner={stored['lease_owner']}",
        )
        expect(
            stored["lease_until"] == 130.0,
            "lease_until = now + lease_s = 130.0",
            f"lease_until={stored['lease_until']}",
        )
        expect(bool(stored["lease_token"]), "a lease token", repr(stored["lease_token"]))
        expect(
            stored["updated_at"] == 100.0,
            "updated_at = now = 100.0 (when it was claimed: the ops report reads it)",
            f"updated_at={stored['updated_at']}",
        )
        again = _claim(ns, path, "w2", 100.0, 30.0)
        expect(again is None, "None when nothing else is ready (w1 holds the only job)", again)


#: A worker name as hosts and pools make them: a quote, a non-ASCII letter, '%' and '_'.
ODD_WORKER = "celery@d'Ávila-7 (pid 4242) 100%_busy"


def _named_parameters() -> str:
    return _(
        "pass worker, now and lease_s as :named parameters (conn.execute(sql, {...})), never "
        "inside an f-string or with %: a worker name with a quote breaks the SQL, and a "
        "crafted one rewrites it"
    )


@CHECKS.add(
    1,
    "RETURNING * and return dict(row): the worker runs the job from that row and needs "
    "its lease_token to finish it and attempt to decide a retry, as the claim left them",
)
def returns_the_claimed_row_whole(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        job_id = add_job(
            conn, "report:7:build:v1", kind="report", queue="reports", max_attempts=5, attempt=1
        )
        result = ns.harness(HARNESS + "claim", str(path), ODD_WORKER, 100.0, 30.0)
        stored = _job(conn, job_id)
        expect(
            "raised" not in result and stored["lease_owner"] == ODD_WORKER,
            _("job {job_id} leased to the worker named {worker}, its name stored as it is").format(
                job_id=job_id, worker=repr(ODD_WORKER)
            ),
            raised_text(result)
            if "raised" in result
            else _("lease_owner={owner}").format(owner=repr(stored["lease_owner"])),
            _named_parameters(),
        )
        got = _row(result, ODD_WORKER, 100.0)
        missing = [k for k in stored if k not in (got or {})]
        differs = [k for k in stored if k in (got or {}) and got[k] != stored[k]]
        shown = "; ".join(
            [_("no {columns} in what claim returned").format(columns=", ".join(missing))]
            * bool(missing)
            + [
                _("{column}: returned {returned}, the table holds {stored}").format(
                    column=k, returned=repr(got[k]), stored=repr(stored[k])
                )
                for k in differs
            ]
        )
        expect(
            got is not None and not missing and not differs,
            _("a dict equal to job {job_id}'s row as the claim left it, every column").format(
                job_id=job_id
            ),
            shown if got is not None else "None",
        )


@CHECKS.add(
    2,
    "add one to attempt in the same UPDATE (attempt = attempt + 1): a crash "
    "redelivery is an attempt too, or a poison job loops forever",
)
def attempt_goes_up_by_one(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        job_id = add_job(conn, "mail:1:send:v1")
        first = _claim(ns, path, "w1", 100.0, 30.0)
        expect(
            first is not None and _job(conn, job_id)["attempt"] == 1,
            "attempt 1 after the first claim",
            _("attempt {attempt}").format(attempt=_job(conn, job_id)["attempt"]),
        )
        second = _claim(ns, path, "w2", 200.0, 30.0)  # w1's lease ended at 130
        expect(
            second is not None and _job(conn, job_id)["attempt"] == 2,
            "attempt 2 after the expired lease is claimed again",
            _("claim returned {returned}, attempt {attempt}").format(
                returned="None" if second is None else _("the job"),
                attempt=_job(conn, job_id)["attempt"],
            ),
        )


@CHECKS.add(
    2,
    "make a new token at every claim, for example lower(hex(randomblob(16))); a "
    "token that repeats (the worker's name, the job id) cannot fence off a zombie",
    severe=True,
)
def token_is_fresh(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        a, b = add_job(conn, "mail:1:send:v1"), add_job(conn, "mail:2:send:v1")
        _claim(ns, path, "w1", 100.0, 30.0)
        _claim(ns, path, "w1", 100.0, 30.0)
        token_a, token_b = _job(conn, a)["lease_token"], _job(conn, b)["lease_token"]
        expect(
            bool(token_a) and token_a != token_b,
            "different tokens for two claims",
            _("{first} and {second}").format(first=repr(token_a), second=repr(token_b)),
        )
        _claim(ns, path, "w1", 500.0, 30.0)  # both leases expired; w1 takes one back
        # Found by its new lease (ends at 530), not by updated_at: another check owns that.
        retaken = [j["lease_token"] for j in all_jobs(conn) if j["lease_until"] == 530.0]
        expect(
            len(retaken) == 1 and retaken[0] not in (token_a, token_b),
            "a new token when the same worker claims a job again after its lease expired",
            _("{retaken} (before: {first}, {second})").format(
                retaken=repr(retaken), first=repr(token_a), second=repr(token_b)
            ),
        )
        # An operator's redrive (exercise 6) puts a dead job back at attempt 0, so a
        # token built from the id and the attempt comes back, and a zombie still holding
        # the old one passes the fence of the new run.
        seen = {token_a, token_b, *retaken}
        conn.execute(
            "UPDATE jobs SET state = 'pending', attempt = 0, run_after = 0, lease_owner = NULL,"
            " lease_until = NULL, lease_token = NULL WHERE id IN (:a, :b)",
            {"a": a, "b": b},
        )
        _claim(ns, path, "w1", 600.0, 30.0)
        _claim(ns, path, "w1", 600.0, 30.0)
        after = [j["lease_token"] for j in all_jobs(conn)]
        expect(
            not seen & set(after),
            "tokens never used before when the jobs are claimed again after a redrive put "
            "them back at attempt 0 (a token made of the id and the attempt repeats)",
            _("{after} in the table, before the redrive: {before}").format(
                after=repr(after), before=repr(sorted(seen, key=str))
            ),
        )
        # Redriven once more and claimed again at the same instant (a clock read in whole
        # seconds): a token made of the worker, the job and the time repeats.
        conn.execute(
            "UPDATE jobs SET state = 'pending', attempt = 0, run_after = 0, lease_owner = NULL,"
            " lease_until = NULL, lease_token = NULL WHERE id IN (:a, :b)",
            {"a": a, "b": b},
        )
        _claim(ns, path, "w1", 600.0, 30.0)
        _claim(ns, path, "w1", 600.0, 30.0)
        again = [j["lease_token"] for j in all_jobs(conn)]
        expect(
            not (seen | set(after)) & set(again),
            _(
                "new tokens again when the jobs, redriven once more, are claimed at the same "
                "instant as before (now=600): a token made of the worker, the job and the "
                "time repeats"
            ),
            _("{again} in the table, before: {before}").format(
                again=repr(again), before=repr(after)
            ),
        )


@CHECKS.add(
    2,
    "a running job whose lease_until <= now is ready again (its worker died); "
    "one whose lease is still valid is not",
    severe=True,
)
def expired_lease_is_reclaimable(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        dead = add_job(
            conn,
            "mail:1:send:v1",
            state="running",
            attempt=1,
            lease_owner="crashed",
            lease_until=50.0,
            lease_token="old-token",
            updated_at=20.0,
        )
        alive = add_job(
            conn,
            "mail:2:send:v1",
            state="running",
            attempt=1,
            lease_owner="busy",
            lease_until=200.0,
            lease_token="live-token",
            updated_at=20.0,
        )
        got = _claim(ns, path, "w2", 100.0, 30.0)
        expect(
            got is not None and got.get("id") == dead,
            _("job {job_id} (lease expired at 50, now is 100)").format(job_id=dead),
            "None" if got is None else _("job {job_id}").format(job_id=got.get("id")),
        )
        expect(
            _job(conn, dead)["lease_token"] != "old-token",
            "the old token replaced",
            repr(_job(conn, dead)["lease_token"]),
        )
        stolen = _claim(ns, path, "w3", 100.0, 30.0)
        expect(
            stolen is None,
            _("None: job {job_id} is leased until 200").format(job_id=alive),
            _("job {job_id}").format(job_id=stolen.get("id")) if stolen else stolen,
        )
    # A worker restarted under the same name (worker names come from the host) is the
    # only one left on its queue: the job its dead predecessor held must come back to it.
    with lab_file(ns) as (conn, path):
        own = add_job(
            conn,
            "mail:4:send:v1",
            state="running",
            attempt=1,
            lease_owner="w1",
            lease_until=50.0,
            lease_token="old-token",
            updated_at=20.0,
        )
        got = _claim(ns, path, "w1", 100.0, 30.0)
        expect(
            got is not None and got.get("id") == own,
            _(
                "job {job_id} claimed by w1 at 100: its lease, held by a w1 that died, "
                "expired at 50, and a restarted worker keeps its name"
            ).format(job_id=own),
            "None" if got is None else _("job {job_id}").format(job_id=got.get("id")),
            _(
                "an expired lease is ready for every worker, the one named in lease_owner "
                "too: do not filter on lease_owner"
            ),
        )
    # Leases still running, if only for half a second more, and one held by a worker of
    # the same name (a copy restarted while the first still runs): none is ready.
    with lab_file(ns) as (conn, path):
        held = {
            "w1": add_job(
                conn,
                "mail:5:send:v1",
                state="running",
                attempt=1,
                lease_owner="w1",
                lease_until=200.0,
                lease_token="live-w1",
                updated_at=90.0,
            ),
            "w2": add_job(
                conn,
                "mail:6:send:v1",
                state="running",
                attempt=1,
                lease_owner="w9",
                lease_until=100.5,
                lease_token="live-w9",
                updated_at=90.0,
            ),
        }
        leases = {j["id"]: (j["lease_owner"], j["lease_until"]) for j in all_jobs(conn)}
        for worker in held:
            stolen = _claim(ns, path, worker, 100.0, 30.0)
            expect(
                stolen is None,
                _(
                    "None for {worker} at now=100: job {first} is leased to w1 until 200 and "
                    "job {second} to w9 until 100.5, both still held"
                ).format(worker=worker, first=held["w1"], second=held["w2"]),
                _("job {job_id} (leased to {owner} until {until:g})").format(
                    job_id=stolen.get("id"),
                    owner=leases[stolen["id"]][0],
                    until=leases[stolen["id"]][1],
                )
                if stolen and stolen.get("id") in leases
                else repr(stolen),
                _(
                    "a running job is ready only once lease_until <= :now, exactly: no "
                    "allowance for clock skew, and no exception for the worker named in "
                    "lease_owner (another copy may run under that name)"
                ),
            )
    # The worker died on the job's last attempt. Claiming it again (this contract) or
    # declaring it dead (what labkit's store does) both end it; a claim that filters on
    # attempt < max_attempts and nothing else leaves it running under a dead lease forever.
    with lab_file(ns) as (conn, path):
        last = add_job(
            conn,
            "mail:3:send:v1",
            state="running",
            attempt=3,
            max_attempts=3,
            lease_owner="crashed",
            lease_until=50.0,
            lease_token="old-token",
            updated_at=20.0,
        )
        for worker in ("w2", "w3"):
            if _claim(ns, path, worker, 100.0, 30.0) is None:
                break
        row = _job(conn, last)
        expect(
            row["state"] == "dead" or row["lease_owner"] != "crashed",
            _(
                "job {job_id}, whose worker died on attempt 3 of 3, claimed again (or marked dead)"
            ).format(job_id=last),
            _(
                "still {state} under the dead worker's lease (expired at 50): it stays so forever"
            ).format(state=row["state"]),
            _(
                "an expired lease is ready whatever the attempt count: a filter on "
                "attempt < max_attempts leaves a job whose worker died on its last "
                "attempt running forever"
            ),
        )


@CHECKS.add(
    1,
    "ready means pending or retry_wait with run_after <= now (or an expired lease); "
    "never succeeded or dead, never a job due later",
    severe=True,
)
def respects_run_after_and_state(ns: Namespace) -> None:
    # Finished and waiting jobs keep the lease their last run left (nothing has to clear
    # it), long expired: only a *running* job comes back when its lease ends.
    old = {"lease_owner": "w0", "lease_until": 60.0, "lease_token": "old"}
    with lab_file(ns) as (conn, path):
        add_job(conn, "a:1:v1", run_after=500.0)
        add_job(conn, "a:2:v1", state="succeeded", attempt=1, **old)
        add_job(conn, "a:3:v1", state="dead", attempt=3, **old)
        due = add_job(conn, "a:4:v1", state="retry_wait", attempt=1, run_after=90.0)
        add_job(conn, "a:5:v1", state="retry_wait", attempt=1, run_after=400.0, **old)
        before = {j["id"]: (j["state"], j["attempt"], j["lease_until"]) for j in all_jobs(conn)}
        got = _claim(ns, path, "w1", 100.0, 30.0)
        expect(
            got is not None and got.get("id") == due,
            _("job {job_id} (retry_wait, due at 90)").format(job_id=due),
            "None" if got is None else _taken(_job(conn, got["id"]), before),
        )
        more = _claim(ns, path, "w1", 100.0, 30.0)
        taken = [j for j in all_jobs(conn) if j["id"] != due and j["attempt"] != before[j["id"]][1]]
        expect(
            more is None and not taken,
            "None: the rest is due later, succeeded or dead (an old lease_until left on a "
            "finished or waiting job does not make it ready: only state = 'running' does)",
            "; ".join(_taken(j, before) for j in taken)
            or _("claim returned {returned}").format(returned=repr(more)),
        )


def _taken(job: dict[str, Any], before: dict[int, tuple[str, int, float | None]]) -> str:
    """What a claim did to a job the check did not want taken, from the table."""
    state, attempt, until = before[job["id"]]
    return _(
        "job {job_id} (was {state}, attempt {attempt}, lease_until {until}) is now "
        "{new_state}, attempt {new_attempt}, leased to {owner}"
    ).format(
        job_id=job["id"],
        state=state,
        attempt=attempt,
        until=repr(until),
        new_state=job["state"],
        new_attempt=job["attempt"],
        owner=job["lease_owner"],
    )


@CHECKS.add(
    1,
    "one UPDATE ... RETURNING, nothing else: a SELECT followed by an UPDATE leaves a "
    "gap in which another worker reads the same job",
)
def claim_is_one_statement(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        add_job(conn, "mail:1:send:v1")
        statements = ns.harness(HARNESS + "claim", str(path), "w1", 100.0, 30.0)["statements"]
        expect(
            len(statements) == 1
            and statements[0].upper().startswith("UPDATE")
            and "RETURNING" in statements[0].upper(),
            "exactly one statement, UPDATE ... RETURNING",
            _("{count} statement(s): {statements}").format(
                count=len(statements),
                statements="; ".join(s.split()[0].upper() for s in statements),
            ),
        )


@CHECKS.add(
    3,
    "two workers must never hold the same job: do the choosing and the taking in "
    "one statement (UPDATE ... WHERE id = (SELECT ...) RETURNING *)",
    timeout=40.0,
    severe=True,
)
def no_double_claim_under_a_race(ns: Namespace) -> None:
    workers, n_jobs = 4, 6
    with lab_file(ns) as (conn, path):
        _claim(ns, path, "probe", 0.0, 1.0)  # on an empty table: a stub says "not started yet"
        # A third of the jobs failed once and are due again; a third were running on a
        # worker that died (lease expired at 50): a claim must take those in one step too,
        # though their state stays 'running' (an UPDATE guarded by "state is still what I
        # read" lets every worker in).
        retried = {"state": "retry_wait", "attempt": 1, "run_after": 50.0}
        orphaned = {
            "state": "running",
            "attempt": 1,
            "lease_owner": "crashed",
            "lease_until": 50.0,
            "lease_token": "old",
        }
        before = {}
        for i in range(n_jobs):
            shape = (retried, orphaned, {})[i % 3]
            before[add_job(conn, f"mail:{i}:send:v1", **shape)] = 1 if shape else 0
        run = ns.harness(
            HARNESS + "race", str(path), workers, n_jobs + 2, 100.0, 30.0, RACE_PAUSE_S
        )
        claims, errors = [tuple(c) for c in run["claims"]], run["errors"]
        expect(not errors, "no errors while 4 workers claim at once", "; ".join(errors[:2]))
        counts = Counter(job for _worker, job in claims)
        doubled = {job: [w for w, j in claims if j == job] for job, n in counts.items() if n > 1}
        expect(
            not doubled,
            "each job claimed by exactly one worker",
            "; ".join(
                _("job {job_id} claimed by {workers}").format(job_id=j, workers=", ".join(ws))
                for j, ws in doubled.items()
            ),
        )
        expect(
            len(counts) == n_jobs,
            _("all {count} jobs claimed").format(count=n_jobs),
            _("{count} claimed").format(count=len(counts)),
        )
        # Taken twice shows as attempt up by two, or as a lease held by a worker other than
        # the one whose claim returned the job. (attempt left as it was on a reclaimed
        # lease is attempt_goes_up_by_one's mistake, not a double claim.)
        holder = {job: worker for worker, job in claims}
        twice = [
            j["id"]
            for j in all_jobs(conn)
            if j["attempt"] > before[j["id"]] + 1 or j["lease_owner"] != holder.get(j["id"])
        ]
        expect(
            not twice,
            _(
                "each job taken once: attempt up by one at most, and the lease held by the "
                "worker whose claim returned the job"
            ),
            _("jobs {job_ids}").format(job_ids=twice),
        )
    _one_job_two_processes(ns)


def _one_job_two_processes(ns: Namespace) -> None:
    """Two workers in two processes, one ready job, every way one can overtake the other."""

    def make(folder: Path) -> None:
        conn = lab_db(folder / "jobs.db")
        add_job(conn, "mail:1:send:v1")
        conn.close()

    def judge(folder: Path, run: dict[str, Any]) -> tuple[bool, str]:
        got = [run[w]["returned"] for w in ("first", "second")]
        holders = [w for w, row in zip(("w1", "w2"), got, strict=True) if isinstance(row, dict)]
        with reading(folder / "jobs.db") as conn:
            [job] = all_jobs(conn)
        ended = [run[w]["ended"] for w in ("first", "second")]
        ok = len(holders) == 1 and job["attempt"] == 1 and job["lease_owner"] == holders[0]
        return ok, _(
            "claimed by {holders}; the job's lease_owner {owner}, attempt {attempt}; "
            "the workers {ended}"
        ).format(
            holders=holders or _("nobody"),
            owner=repr(job["lease_owner"]),
            attempt=job["attempt"],
            ended=ended,
        )

    after_every_schedule(
        ns,
        HARNESS + "claim_schedules",
        make,
        [100.0, 30.0],
        judge,
        _("exactly one of two workers in two processes to get the one ready job"),
        _(
            "a lock in Python (threading.Lock, a flag) guards nothing between processes; let "
            "the database choose and take in one statement (UPDATE ... WHERE id = (SELECT "
            "...) RETURNING *)"
        ),
    )


@CHECKS.add(
    3,
    "a job in retry_wait failed once and must run again when run_after comes, "
    "whatever its attempt and the lease its failed run left: state IN ('pending', "
    "'retry_wait') AND run_after <= :now, ORDER BY run_after, id; otherwise every "
    "retried job waits forever, or behind every new one",
    severe=True,
)
def retried_jobs_run_again(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        # The failed run left its lease on the row (nothing has to clear it), and new
        # work keeps arriving: the retry, due first, must go first all the same.
        job_id = add_job(
            conn,
            "mail:9:send:v1",
            state="retry_wait",
            attempt=1,
            run_after=150.0,
            lease_owner="w0",
            lease_until=90.0,
            lease_token="old",
        )
        fresh = add_job(conn, "mail:10:send:v1", run_after=190.0)
        early = _claim(ns, path, "w1", 100.0, 30.0)
        expect(
            early is None,
            "None at 100: the retry is due at 150",
            _("job {job_id}").format(job_id=(early or {}).get("id")),
        )
        got = _claim(ns, path, "w1", 200.0, 30.0)
        job = _job(conn, job_id)
        expect(
            got is not None and got.get("id") == job_id,
            _(
                "job {job_id} claimed at 200 (retry_wait, due at 150, the old lease of its "
                "failed run still on the row), before job {fresh} (new, due at 190)"
            ).format(job_id=job_id, fresh=fresh),
            "None" if got is None else _("job {job_id}").format(job_id=got.get("id")),
        )
        expect(
            job["state"] == "running" and job["attempt"] == 2 and job["lease_owner"] == "w1",
            "the retried job running again as attempt 2, leased to w1",
            f"state={job['state']}, attempt={job['attempt']}, lease_owner={job['lease_owner']}",
        )
    # Its budget was lowered (max_attempts 5 -> 3) while it waited at attempt 3: it is
    # ready all the same; the run that follows decides whether it is dead.
    with lab_file(ns) as (conn, path):
        job_id = add_job(
            conn, "mail:11:send:v1", state="retry_wait", attempt=3, max_attempts=3, run_after=50.0
        )
        got = _claim(ns, path, "w1", 100.0, 30.0)
        expect(
            got is not None and got.get("id") == job_id,
            _(
                "job {job_id} claimed at 100 (retry_wait, due at 50, attempt 3 of "
                "max_attempts 3: an operator lowered its budget while it waited)"
            ).format(job_id=job_id),
            "None" if got is None else _("job {job_id}").format(job_id=got.get("id")),
            _(
                "claim does not read attempt or max_attempts: a due retry_wait job is "
                "ready whatever its attempt, or it stays in retry_wait forever, neither "
                "run nor dead"
            ),
        )


@CHECKS.add(
    2,
    "the boundary counts: a job due exactly now (run_after <= now) is ready, and a "
    "lease that ends exactly now (lease_until <= now) has ended; '<' leaves them "
    "waiting one more poll, forever on a clock that does not move",
)
def due_exactly_now_is_ready(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        due = add_job(conn, "a:1:v1", state="retry_wait", attempt=1, run_after=100.0)
        got = _claim(ns, path, "w1", 100.0, 30.0)
        expect(
            got is not None and got.get("id") == due,
            _("job {job_id} claimed at now=100 (run_after = 100 exactly)").format(job_id=due),
            "None" if got is None else _("job {job_id}").format(job_id=got.get("id")),
        )
        ended = add_job(
            conn,
            "a:2:v1",
            state="running",
            attempt=1,
            lease_owner="crashed",
            lease_until=130.0,
            lease_token="old",
            updated_at=100.0,
        )
        again = _claim(ns, path, "w2", 130, 30.0)  # an int now: the same instant
        expect(
            again is not None and again.get("id") == ended,
            _("job {job_id} claimed at now=130 (its lease ends at 130 exactly)").format(
                job_id=ended
            ),
            "None" if again is None else _("job {job_id}").format(job_id=again.get("id")),
        )


#: A generated job: (state, run_after, lease_until, key); times sit on both sides of
#: now=100. Every job but a pending one carries the lease its last run left. Keys run
#: in no order of their own (numbers, `_`, capitals, non-ASCII), so only the id breaks a
#: tie of run_after.
JOBS = st.tuples(
    st.sampled_from(["pending", "retry_wait", "running", "succeeded", "dead"]),
    st.sampled_from([0.0, 99.5, 100.0, 100.5, 500.0]),
    st.sampled_from([50.0, 100.0, 100.5, 200.0]),
    st.builds(
        "{}:{}:v1".format,
        st.sampled_from(["mail", "Mail", "mail_digest", "reçu", "a"]),
        st.integers(0, 120),
    ),
)


@CHECKS.add(
    2,
    "ready = (pending or retry_wait, run_after <= now) or (running, lease_until <= now); "
    "of those, the smallest run_after, then the smallest id",
    timeout=30.0,
)
def claims_the_right_job_for_any_table(ns: Namespace) -> None:
    now = 100.0

    def right_job(table: list[tuple[str, float, float, str]]) -> None:
        with lab_file(ns) as (conn, path):
            ids = []
            for i, (state, run_after, until, key) in enumerate(table):
                lease = {"lease_owner": "w0", "lease_until": until, "lease_token": f"t{i}"}
                ids.append(
                    add_job(
                        conn,
                        key,
                        state=state,
                        attempt=0 if state == "pending" else 1,
                        run_after=run_after,
                        **(lease if state != "pending" else {}),
                    )
                )
            ready = [
                (run_after, job_id)
                for job_id, (state, run_after, until, _key) in zip(ids, table, strict=True)
                if (state in ("pending", "retry_wait") and run_after <= now)
                or (state == "running" and until <= now)
            ]
            got = _claim(ns, path, "w1", now, 30.0)
        shape = ", ".join(
            f"{i}:{k} {s} run_after={r:g}" + (f" lease_until={u:g}" if s != "pending" else "")
            for i, (s, r, u, k) in zip(ids, table, strict=True)
        )
        want = min(ready)[1] if ready else None
        expect(
            (got or {}).get("id") == want,
            _("{want} at now=100 among jobs {jobs}").format(
                want=_("job {job_id}").format(job_id=str(want)) if want else "None", jobs=shape
            ),
            "None" if got is None else _("job {job_id}").format(job_id=got.get("id")),
        )

    # Two tables every run meets: the later id due first, and a tie of run_after where
    # text order is not number order ("mail:10" sorts before "mail:9", the later id).
    right_job([("pending", 99.5, 50.0, "mail:1:v1"), ("retry_wait", 0.0, 50.0, "mail:2:v1")])
    right_job([("pending", 0.0, 50.0, "mail:9:v1"), ("pending", 0.0, 50.0, "mail:10:v1")])
    # A retry due first whose failed run left a lease that outlives its backoff: its old
    # lease_until does not matter, only its state and run_after do.
    right_job([("retry_wait", 0.0, 200.0, "mail:1:v1"), ("pending", 99.5, 50.0, "mail:2:v1")])
    jobs = st.lists(JOBS, min_size=1, max_size=6, unique_by=lambda job: job[3])
    holds_for(jobs, right_job, examples=25)
