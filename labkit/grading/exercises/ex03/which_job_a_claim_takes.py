"""Exercise 3's checks of which job a claim takes: due and ready ones only, in one
statement, never one job twice under a race (threads, and two processes one schedule at
a time), retried jobs again, a job due exactly now, and generated tables."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from labkit.grading.checks import Namespace, expect
from labkit.grading.exercises.common import plain
from labkit.grading.exercises.ex03.claiming import CHECKS, HARNESS, RACE_PAUSE_S, _claim, _job
from labkit.grading.exercises.ex03.statements import one_step, verb
from labkit.grading.exercises.helpers import holds_for
from labkit.grading.exercises.kit import lab_file, reading
from labkit.grading.exercises.labdb import add_job, all_jobs, lab_db
from labkit.grading.exercises.racesweep import after_every_schedule
from labkit.lang import _


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
        # Due in 10 s, within the lease a claim now would give: not ready yet all the same.
        add_job(conn, "a:6:v1", run_after=110.0)
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
    "choose and take in one step: one UPDATE ... RETURNING, or statements inside one "
    "transaction that holds the write lock from its start (BEGIN IMMEDIATE ... COMMIT); "
    "a SELECT followed by an UPDATE outside it leaves a gap in which another worker reads "
    "the same job",
)
def claim_is_one_statement(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        add_job(conn, "mail:1:send:v1")
        statements = ns.harness(HARNESS + "claim", str(path), "w1", 100.0, 30.0)["statements"]
        expect(
            one_step(statements),
            _(
                "exactly one statement, UPDATE ... RETURNING, or the claim inside one "
                "transaction that takes the write lock first (BEGIN IMMEDIATE ... COMMIT)"
            ),
            _("{count} statement(s): {statements}").format(
                count=len(statements),
                statements="; ".join(map(verb, statements)),
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
    _one_worker_claims_again(ns)
    workers, n_jobs = 4, 6
    with lab_file(ns) as (conn, path):
        # A third of the jobs failed once on one of these workers and are due again; a
        # third were running on a worker that died (lease expired at 50); a third were
        # enqueued at this very moment. A claim must take each in one step: an UPDATE
        # guarded by "the row is still as I read it" (its state, owner or updated_at,
        # which a claim may leave as they were) lets every worker in.
        retried = {
            "state": "retry_wait",
            "attempt": 1,
            "run_after": 50.0,
            "lease_owner": "w1",
            "lease_until": 40.0,
            "lease_token": "old",
        }
        orphaned = {
            "state": "running",
            "attempt": 1,
            "lease_owner": "crashed",
            "lease_until": 50.0,
            "lease_token": "old",
        }
        new = {"updated_at": 100.0}
        before: dict[int, int] = {}
        for i in range(n_jobs):
            shape = (retried, orphaned, new)[i % 3]
            before[add_job(conn, f"mail:{i}:send:v1", **shape)] = 0 if shape is new else 1
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


def _one_worker_claims_again(ns: Namespace) -> None:
    """One worker claims three times at one ``now``: three jobs, each as the table holds it.

    A claim that reads its row back by the worker's name after the UPDATE (the latest of
    the worker's jobs) returns a job it took before: the worker runs that one twice.
    """
    with lab_file(ns) as (conn, path):
        _claim(ns, path, "probe", 0.0, 1.0)  # on an empty table: a stub says "not started yet"
        for i in range(3):
            add_job(conn, f"mail:{i}:send:v1")
        got = [_claim(ns, path, "w1", 100.0, 30.0) or {} for _ in range(3)]
        # As plain data, as the claims' rows came back (a BLOB token as its hex).
        tokens = {job["id"]: plain(job["lease_token"]) for job in all_jobs(conn)}
    said = [(row.get("id"), row.get("lease_token")) for row in got]
    expect(
        len({job_id for job_id, _token in said}) == 3
        and all(tokens.get(job_id) == token for job_id, token in said),
        _(
            "three claims by w1 at now=100 to return three different jobs, each with the "
            "lease_token the table holds for it"
        ),
        "; ".join(
            _("job {job_id} with token {token} (the table: {stored})").format(
                job_id=job_id, token=repr(token), stored=repr(tokens.get(job_id))
            )
            for job_id, token in said
        ),
    )


def _one_job_two_processes(ns: Namespace) -> None:
    """Two workers in two processes, one ready job, every way one can overtake the other.

    The job's last run, on w2, failed at this very moment, and it is due again at once:
    a claim that reads the row, then takes it only while its owner or updated_at are
    still as read, lets w1 in after w2 took it (w2 leaves both as they were)."""

    def make(folder: Path) -> None:
        conn = lab_db(folder / "jobs.db")
        add_job(
            conn,
            "mail:1:send:v1",
            state="retry_wait",
            attempt=1,
            run_after=100.0,
            lease_owner="w2",
            lease_until=130.0,
            lease_token="old",
            updated_at=100.0,
        )
        conn.close()

    def judge(folder: Path, run: dict[str, Any]) -> tuple[bool, str]:
        got = [run[w]["returned"] for w in ("first", "second")]
        holders = [w for w, row in zip(("w1", "w2"), got, strict=True) if isinstance(row, dict)]
        with reading(folder / "jobs.db") as conn:
            [job] = all_jobs(conn)
        ended = [run[w]["ended"] for w in ("first", "second")]
        ok = len(holders) == 1 and job["attempt"] == 2 and job["lease_owner"] == holders[0]
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
        # A job put back to pending by hand keeps its attempt: ready all the same.
        again = add_job(conn, "mail:12:send:v1", attempt=3, max_attempts=3, run_after=60.0)
        got = _claim(ns, path, "w1", 100.0, 30.0)
        expect(
            got is not None and got.get("id") == again,
            _(
                "job {job_id} claimed at 100 next (pending, due at 60, attempt 3 of "
                "max_attempts 3: put back by hand after its runs)"
            ).format(job_id=again),
            "None" if got is None else _("job {job_id}").format(job_id=got.get("id")),
            _(
                "claim does not read attempt or max_attempts: a due pending job is ready "
                "whatever its attempt, or it stays pending forever"
            ),
        )
        # Its budget lowered below the runs it has had (max_attempts 5 -> 2 at attempt 3):
        # ready all the same, waiting or put back by hand; a filter on attempt <=
        # max_attempts, like one on attempt < max_attempts, leaves it there forever.
        for n, (state, due_at) in enumerate((("retry_wait", 70.0), ("pending", 80.0)), 13):
            below = add_job(
                conn, f"mail:{n}:send:v1", state=state, attempt=3, max_attempts=2, run_after=due_at
            )
            got = _claim(ns, path, "w1", 100.0, 30.0)
            expect(
                got is not None and got.get("id") == below,
                _(
                    "job {job_id} claimed at 100 ({state}, due at {due_at:g}, attempt 3 of "
                    "max_attempts 2: an operator lowered its budget below the runs it has had)"
                ).format(job_id=below, state=state, due_at=due_at),
                "None" if got is None else _("job {job_id}").format(job_id=got.get("id")),
                _(
                    "claim does not read attempt or max_attempts, with < or <=: a due "
                    "pending or retry_wait job is ready whatever its attempt, or it waits "
                    "forever, neither run nor dead"
                ),
            )
        # Put back by a redrive after it died (exercise 6): pending at attempt 0, with why
        # it failed and died and how often it was redriven still on the row: ready all the
        # same (a filter on dead_reason, last_error or redrives never runs it again).
        redriven = add_job(
            conn,
            "mail:15:send:v1",
            run_after=90.0,
            last_error="SMTP 550 mailbox full",
            dead_reason="max_attempts reached",
        )
        conn.execute("UPDATE jobs SET redrives = 2 WHERE id = ?", (redriven,))
        got = _claim(ns, path, "w1", 100.0, 30.0)
        expect(
            got is not None and got.get("id") == redriven,
            _(
                "job {job_id} claimed at 100 (pending, due at 90, redriven twice after it "
                "died: its last_error and dead_reason still on the row)"
            ).format(job_id=redriven),
            "None" if got is None else _("job {job_id}").format(job_id=got.get("id")),
            _(
                "ready reads state and run_after (and lease_until for a running job) only: "
                "never last_error, dead_reason or redrives, or a redriven job never runs"
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
            want = min(ready)[1] if ready else None
            leased = _job(conn, want)["lease_until"] if want is not None else None
        shape = ", ".join(
            f"{i}:{k} {s} run_after={r:g}" + (f" lease_until={u:g}" if s != "pending" else "")
            for i, (s, r, u, k) in zip(ids, table, strict=True)
        )
        expect(
            (got or {}).get("id") == want,
            _("{want} at now=100 among jobs {jobs}").format(
                want=_("job {job_id}").format(job_id=str(want)) if want else "None", jobs=shape
            ),
            "None" if got is None else _("job {job_id}").format(job_id=got.get("id")),
        )
        # The lease its last run left (even one that outlives now) is replaced, not kept.
        expect(
            want is None or leased == now + 30.0,
            _("job {job_id} leased until now + lease_s = 130 among jobs {jobs}").format(
                job_id=want, jobs=shape
            ),
            _("lease_until={until}").format(until=repr(leased)),
            _(
                "set lease_until = :now + :lease_s, whatever lease_until the row held before "
                "(max() with the old lease keeps a dead run's lease)"
            ),
        )

    # Two tables every run meets: the later id due first, and a tie of run_after where
    # text order is not number order ("mail:10" sorts before "mail:9", the later id).
    right_job([("pending", 99.5, 50.0, "mail:1:v1"), ("retry_wait", 0.0, 50.0, "mail:2:v1")])
    right_job([("pending", 0.0, 50.0, "mail:9:v1"), ("pending", 0.0, 50.0, "mail:10:v1")])
    # A retry due first whose failed run left a lease that outlives its backoff: its old
    # lease_until does not matter, only its state and run_after do.
    right_job([("retry_wait", 0.0, 200.0, "mail:1:v1"), ("pending", 99.5, 50.0, "mail:2:v1")])
    # Due a hundredth of a second from now: not ready yet (no allowance for a clock).
    right_job([("pending", 100.01, 50.0, "mail:1:v1"), ("retry_wait", 100.25, 50.0, "mail:2:v1")])
    # A tie of run_after between new work and a retry: the smaller id, whatever the attempt.
    right_job([("pending", 0.0, 50.0, "mail:1:v1"), ("retry_wait", 0.0, 50.0, "mail:2:v1")])
    jobs = st.lists(JOBS, min_size=1, max_size=6, unique_by=lambda job: job[3])
    holds_for(jobs, right_job, examples=25)
