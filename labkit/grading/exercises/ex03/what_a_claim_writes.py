"""Exercise 3's checks of what one claim writes: one ready job taken, the row returned
whole, the attempt counted, a fresh token, and an expired lease taken over."""

from __future__ import annotations

from labkit.grading.checks import Namespace, expect
from labkit.grading.exercises.common import plain
from labkit.grading.exercises.ex03.claiming import CHECKS, HARNESS, _claim, _job, _row
from labkit.grading.exercises.helpers import raised_text
from labkit.grading.exercises.kit import lab_file
from labkit.grading.exercises.labdb import add_job, all_jobs
from labkit.lang import _


@CHECKS.add(
    1,
    "UPDATE jobs SET state='running', lease_owner=:worker, lease_until=:now + :lease_s "
    "... WHERE id = (SELECT ... LIMIT 1) RETURNING *, then return dict(row) or None",
)
def claims_one_ready_job(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        # Put back by hand after it failed: its last error and its redrive stay on the row.
        job_id = add_job(conn, "mail:1:send:v1", run_after=42.5, last_error="SMTP 451")
        conn.execute("UPDATE jobs SET redrives = 1 WHERE id = ?", (job_id,))
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
        expect(
            stored["run_after"] == 42.5,
            _("run_after left as it was, 42.5 (when the job was due; a claim does not set it)"),
            f"run_after={stored['run_after']}",
        )
        expect(
            stored["last_error"] == "SMTP 451" and stored["redrives"] == 1,
            _(
                "last_error 'SMTP 451' and redrives 1 left as they were (a claim sets only "
                "state, attempt, the lease and updated_at)"
            ),
            f"last_error={stored['last_error']!r}, redrives={stored['redrives']!r}",
        )
        again = _claim(ns, path, "w2", 100.0, 30.0)
        expect(again is None, "None when nothing else is ready (w1 holds the only job)", again)
        # w1 died: its lease ended at 130, and the job is taken over, still due when it was.
        _claim(ns, path, "w2", 200.0, 30.0)
        stored = _job(conn, job_id)
        expect(
            stored["lease_owner"] == "w2" and stored["run_after"] == 42.5,
            _(
                "at 200, after w1's lease ended at 130, the job leased to w2, its run_after "
                "still 42.5"
            ),
            f"lease_owner={stored['lease_owner']!r}, run_after={stored['run_after']}",
        )


#: A worker name as hosts and pools make them: capitals, a quote, a non-ASCII letter, '%'
#: and '_', and the newline a name read from a file (/etc/hostname) ends with.
ODD_WORKER = "Celery@d'Ávila-7 (PID 4242) 100%_Busy\n"


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
        # The row crossed a process boundary as plain data (a BLOB token as its hex):
        # the table's side is read the same way.
        differs = [k for k in stored if k in (got or {}) and got[k] != plain(stored[k])]
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
        expect(
            "not_a_dict" not in result,
            _("claim to return a dict, dict(row), as its docstring says"),
            _("it returned a {type}").format(type=result.get("not_a_dict")),
            _(
                "return dict(row): a sqlite3.Row has no .get(), 'key' in row looks among its "
                "values, and json.dumps refuses it"
            ),
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
        # A pending job that already ran twice (an operator put it back by hand): attempt
        # counts on from 2, or its budget of max_attempts starts over.
        again = add_job(conn, "mail:2:send:v1", attempt=2, max_attempts=5, run_after=150.0)
        third = _claim(ns, path, "w3", 220.0, 30.0)  # w2 holds job 1 until 230
        expect(
            (third or {}).get("id") == again and _job(conn, again)["attempt"] == 3,
            _("attempt 3 for a pending job that has run twice already (attempt 2)"),
            _("claim returned {returned}, attempt {attempt}").format(
                returned="None"
                if third is None
                else _("job {job_id}").format(job_id=third.get("id")),
                attempt=_job(conn, again)["attempt"],
            ),
        )
        # Its budget lowered below the runs it has had (attempt 3 of max_attempts 3) while
        # it waited: attempt counts on to 4; capped at max_attempts, the run goes uncounted.
        spent = add_job(
            conn, "mail:3:send:v1", state="retry_wait", attempt=3, max_attempts=3, run_after=160.0
        )
        fourth = _claim(ns, path, "w4", 225.0, 30.0)  # w2 holds job 1, w3 the second job
        expect(
            (fourth or {}).get("id") == spent and _job(conn, spent)["attempt"] == 4,
            _(
                "attempt 4 for a retry_wait job at attempt 3 of max_attempts 3 (attempt = "
                "attempt + 1 always: never capped at max_attempts)"
            ),
            _("claim returned {returned}, attempt {attempt}").format(
                returned="None"
                if fourth is None
                else _("job {job_id}").format(job_id=fourth.get("id")),
                attempt=_job(conn, spent)["attempt"],
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
        # A crash is an attempt like any other: a claim that raises the budget when it
        # takes over an expired lease lets a job that kills its worker run forever.
        expect(
            _job(conn, dead)["max_attempts"] == 3,
            _(
                "max_attempts left as it was, 3, when job {job_id}'s expired lease is "
                "claimed again (attempt goes up, the budget does not)"
            ).format(job_id=dead),
            _("max_attempts={max_attempts}").format(max_attempts=_job(conn, dead)["max_attempts"]),
            _(
                "set only state, attempt, the lease and updated_at: a claim never changes "
                "max_attempts, or a job that crashes its worker is claimed forever"
            ),
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
    # A lease that ends a hundredth of a second from now is still held: an allowance for
    # clock skew, however small, lets a second worker in while the first still runs.
    with lab_file(ns) as (conn, path):
        soon = add_job(
            conn,
            "mail:7:send:v1",
            state="running",
            attempt=1,
            lease_owner="w9",
            lease_until=100.01,
            lease_token="live-w9",
            updated_at=90.0,
        )
        stolen = _claim(ns, path, "w2", 100.0, 30.0)
        expect(
            stolen is None,
            _(
                "None for w2 at now=100: job {job_id} is leased to w9 until 100.01, still "
                "held for a hundredth of a second"
            ).format(job_id=soon),
            _("job {job_id} (leased to {owner} until {until:g})").format(
                job_id=stolen.get("id"), owner="w9", until=100.01
            )
            if stolen and stolen.get("id") == soon
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
        # Its budget lowered (max_attempts 5 -> 3) while its fourth run went on, and that
        # worker died too: attempt 4 of 3, past the budget, with a dead lease all the same.
        over = add_job(
            conn,
            "mail:8:send:v1",
            state="running",
            attempt=4,
            max_attempts=3,
            lease_owner="crashed",
            lease_until=60.0,
            lease_token="old-token-2",
            updated_at=30.0,
        )
        # One claim per job and one more; a claim that marks such a job dead may answer
        # None for it, so every worker claims.
        returned = [_claim(ns, path, worker, 100.0, 30.0) for worker in ("w2", "w3", "w4")]
        past = _job(conn, over)
        row = _job(conn, last)
        # Marked dead, it is no claim: a row handed to the worker is one it runs.
        states = {j["id"]: j["state"] for j in all_jobs(conn)}
        ran_dead = [r.get("id") for r in returned if r and states.get(r.get("id")) == "dead"]
        expect(
            not ran_dead,
            _(
                "a job marked dead is not returned: the claim answers a job it leased, "
                "state = 'running', or None"
            ),
            _("claim returned job(s) {job_ids}, which the table holds as dead").format(
                job_ids=ran_dead
            ),
            _(
                "a claim sets state = 'running' on the job it returns; if you mark a job dead "
                "instead, do not return it, or the worker runs a dead job"
            ),
        )
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
        expect(
            past["state"] == "dead" or past["lease_owner"] != "crashed",
            _(
                "job {job_id}, whose worker died on attempt 4 with max_attempts lowered to 3, "
                "claimed again (or marked dead)"
            ).format(job_id=over),
            _(
                "still {state} under the dead worker's lease (expired at 60): it stays so forever"
            ).format(state=past["state"]),
            _(
                "an expired lease is ready whatever the attempt count: a filter on "
                "attempt <= max_attempts leaves a job whose budget was lowered below its "
                "runs running forever"
            ),
        )
