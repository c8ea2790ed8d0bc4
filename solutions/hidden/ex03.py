"""Hidden checks for exercise 3: real processes, the order of the queue, times to the fraction."""

from __future__ import annotations

import math
import random
import sqlite3
from collections import Counter
from typing import Any

from hypothesis import strategies as st

from labkit.grading.checks import Checks, Namespace, expect
from labkit.grading.exercises.ex03.claiming import HARNESS, _claim, _job, _row
from labkit.grading.exercises.helpers import (
    expect_left_as_given,
    expect_no_write_after_a_refused_begin,
    holds_for,
    raised_text,
)
from labkit.grading.exercises.killsweep import scene_seeds
from labkit.grading.exercises.kit import lab_file
from labkit.grading.exercises.labdb import add_job, all_jobs
from labkit.grading.exercises.tokens import TOKEN_BITS, too_few_bits
from labkit.lang import _

CHECKS = Checks("ex03", hidden=True)
RETRIED = {str(i) for i in range(0, 30, 3)}


@CHECKS.add(2, "processes, not only threads, must never share a job", timeout=30.0, severe=True)
def no_double_claim_across_processes(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        _claim(ns, path, "probe", 0.0, 1.0)  # on an empty table: a stub says "not started yet"
        for i in range(30):  # every third job is a retry that is due again
            retried = {"state": "retry_wait", "attempt": 1, "run_after": 50.0} if i % 3 == 0 else {}
            add_job(conn, f"mail:{i}:send:v1", **retried)
        run = ns.harness(HARNESS + "claim_in_processes", str(path), 3)
        expect(
            run["hung"] == 0,
            "3 processes to claim 30 jobs within 20s",
            _("a process never finished (does claim loop or wait when jobs are ready?)"),
            "claim runs one UPDATE ... RETURNING and returns at once",
        )
        attempts = [
            j["attempt"] - (1 if j["key"].split(":")[1] in RETRIED else 0) for j in all_jobs(conn)
        ]
    results = run["results"]
    errors = [x for _worker, got in results for x in got if isinstance(x, str)]
    expect(not errors, "no errors in 3 claiming processes", "; ".join(errors[:2]))
    counts = Counter(x for _worker, got in results for x in got)
    doubled = sorted(j for j, n in counts.items() if n > 1)
    expect(
        not doubled and len(counts) == 30 and set(attempts) == {1},
        "30 jobs, each claimed once (attempt up by one on each in the table)",
        _("{claimed} claimed, jobs claimed twice: {doubled}").format(
            claimed=len(counts), doubled=doubled[:5]
        ),
    )


def _claimed_in_turn(
    ns: Namespace, *jobs: dict[str, Any], index: str = "", then: str = ""
) -> tuple[list[int], list[object]]:
    """The ids of ``jobs`` (add_job's arguments, added in this order to a lab file that
    holds ``index`` too, a CREATE INDEX, when given; ``then``, a statement run once they
    are in, when given) and the ids that w1's claims at now=100 take, one claim per job."""
    with lab_file(ns) as (conn, path):
        if index:
            conn.execute(index)
        ids = [add_job(conn, **job) for job in jobs]
        if then:
            conn.execute(then)
        return ids, [(_claim(ns, path, "w1", 100.0, 30.0) or {}).get("id") for _job in jobs]


@CHECKS.add(1, "ORDER BY run_after, id: the job due first goes first")
def oldest_due_first(ns: Namespace) -> None:
    (late, early), got = _claimed_in_turn(
        ns, dict(key="a:1:v1", run_after=50.0), dict(key="a:2:v1", run_after=10.0)
    )
    expect(
        got == [early, late],
        _("job {early} (due at 10) then job {late} (due at 50)").format(early=early, late=late),
        got,
    )
    # The fraction of a second counts: run_after is not cut to whole seconds to sort.
    (later, sooner), got = _claimed_in_turn(
        ns, dict(key="a:1:v1", run_after=10.7), dict(key="a:2:v1", run_after=10.2)
    )
    expect(
        got == [sooner, later],
        _("job {sooner} (due at 10.2) then job {later} (due at 10.7)").format(
            sooner=sooner, later=later
        ),
        got,
    )
    # run_after is a number: 9.5 is due before 10, though the text '10.0' sorts first.
    (ten, nine), got = _claimed_in_turn(
        ns, dict(key="a:1:v1", run_after=10.0), dict(key="a:2:v1", run_after=9.5)
    )
    expect(
        got == [nine, ten],
        _(
            "job {sooner} (due at 9.5) then job {later} (due at 10): run_after sorts as a "
            "number, not as text"
        ).format(sooner=nine, later=ten),
        got,
    )
    # A millionth of a second apart: run_after is not rounded (ROUND(run_after, 3)) to sort.
    (later, sooner), got = _claimed_in_turn(
        ns, dict(key="a:1:v1", run_after=10.000002), dict(key="a:2:v1", run_after=10.000001)
    )
    expect(
        got == [sooner, later],
        _(
            "job {sooner} (due at 10.000001) then job {later} (due at 10.000002): run_after "
            "sorts as it is, never rounded"
        ).format(sooner=sooner, later=later),
        got,
        _("ORDER BY run_after, id on the column itself: no ROUND, no CAST"),
    )
    # Two jobs due at the same instant: the smaller id first, whatever their keys, kinds,
    # queues and redrives say (ORDER BY run_after, key, length(key), kind, queue or
    # redrives takes the other).
    (first, second), got = _claimed_in_turn(
        ns,
        dict(key="zz:10:v1", kind="sms", queue="reports", run_after=10.0),
        dict(key="a:2:v1", kind="email", queue="billing", run_after=10.0),
        then="UPDATE jobs SET redrives = 1 WHERE key = 'zz:10:v1'",
    )
    expect(
        got == [first, second],
        _(
            "job {first} (kind sms, queue reports, redriven once) then job {second} (kind "
            "email, queue billing, never redriven), both due at 10: a tie of run_after goes "
            "to the smaller id, whatever the keys, kinds and queues, and however often each "
            "was redriven"
        ).format(first=first, second=second),
        got,
    )
    # A tie between a retry its last run left marks on (an error, a queue of its own, an
    # old lease, a late updated_at) and fresh work on the default queue: still the smaller
    # id first (ORDER BY run_after, last_error IS NOT NULL or queue <> 'default' takes
    # the other).
    (first, second), got = _claimed_in_turn(
        ns,
        dict(
            key="report:1:build:v1",
            kind="report",
            queue="reports",
            state="retry_wait",
            attempt=2,
            max_attempts=5,
            run_after=40.0,
            lease_owner="w9",
            lease_until=35.0,
            lease_token="old",
            last_error="smtp timeout",
            updated_at=30.0,
        ),
        dict(key="mail:2:send:v1", run_after=40.0),
    )
    expect(
        got == [first, second],
        _(
            "job {first} (a retry on queue reports, its last run's error still on it) then "
            "job {second} (fresh work on the default queue), both due at 40: a tie of "
            "run_after goes to the smaller id, whatever error, queue or old lease a job "
            "carries"
        ).format(first=first, second=second),
        got,
        _("ORDER BY run_after, id and nothing else: no preference for fresh work or a queue"),
    )
    # The same tie under an index a DBA adds for the poller: rows then come in the index's
    # order ('pending' before 'retry_wait'), and only ORDER BY run_after, id still gives
    # the smaller id first.
    (first, second), got = _claimed_in_turn(
        ns,
        dict(key="a:1:v1", state="retry_wait", attempt=1, run_after=50.0),
        dict(key="a:2:v1", run_after=50.0),
        index="CREATE INDEX jobs_by_state_due ON jobs (state, run_after)",
    )
    expect(
        got == [first, second],
        _(
            "job {first} (retry_wait) then job {second} (pending), both due at 50, with an "
            "index on jobs (state, run_after): a tie goes to the smaller id, in whatever "
            "order an index reads the rows"
        ).format(first=first, second=second),
        got,
        _(
            "end the ORDER BY with id (ORDER BY run_after, id): without it, ties come in "
            "whatever order SQLite reads the rows, which an index changes"
        ),
    )
    # Ten jobs, the first eight finished, the last two due at the same instant: job 9
    # before job 10, as numbers (text order puts '10' before '9').
    done = dict(state="succeeded", attempt=1)
    ids, got = _claimed_in_turn(
        ns,
        *[dict(key=f"a:{i}:v1", **done) for i in range(1, 9)],
        dict(key="a:9:v1", run_after=10.0),
        dict(key="a:10:v1", run_after=10.0),
    )
    expect(
        got[:2] == ids[8:],
        _(
            "job {first} then job {second}, both due at 10 (the jobs before them succeeded): "
            "a tie of run_after goes to the smaller id, compared as a number"
        ).format(first=ids[8], second=ids[9]),
        got[:2],
        _("ORDER BY run_after, id on the columns themselves: no CAST, no str() of the id"),
    )
    # Due at the next float after now: not ready yet, however small the allowance.
    hair = math.nextafter(100.0, math.inf)
    (soon,), got = _claimed_in_turn(ns, dict(key="a:1:v1", run_after=hair))
    expect(
        got == [None],
        _("None at now=100.0: job {job_id} is due at {hair!r}, the next float after now").format(
            job_id=soon, hair=hair
        ),
        got,
        _("a job is ready once run_after <= :now, compared exactly: no allowance, however small"),
    )
    # A job w1 itself held, its lease expired, is no more urgent for w1 than any other.
    own = dict(
        key="a:2:v1",
        state="running",
        attempt=1,
        run_after=20.0,
        lease_owner="w1",
        lease_until=50.0,
        lease_token="old",
    )
    (first, own_id), got = _claimed_in_turn(ns, dict(key="a:1:v1", run_after=10.0), own)
    expect(
        got == [first, own_id],
        _(
            "job {first} (due at 10) then job {own} (due at 20, w1's own lease on it expired "
            "at 50), for w1: no preference for the jobs a worker held before"
        ).format(first=first, own=own_id),
        got,
    )
    _ex03_in_turn_on_one_connection(ns)


def _ex03_in_turn_on_one_connection(ns: Namespace) -> None:
    """One long-lived worker claims in turn on one connection: each claim takes the job
    due first among those ready at its now, one with a smaller id or an earlier run_after
    than the job taken before included (a claim that resumes after the last id or the
    last run_after it took skips it): here a job whose worker died, its lease ending
    between the two claims."""
    with lab_file(ns) as (conn, path):
        later = add_job(
            conn,
            "a:1:v1",
            state="running",
            attempt=1,
            run_after=50.0,
            lease_owner="crashed",
            lease_until=100.25,
            lease_token="old",
            updated_at=60.0,
        )
        first = add_job(conn, "a:2:v1", run_after=99.0)
        last = add_job(conn, "a:3:v1", run_after=100.5)
        calls = [["w1", 100.0, 30.0], ["w1", 101.0, 30.0], ["w1", 101.0, 30.0]]
        got = ns.harness(HARNESS + "on_one_connection", str(path), calls)
    ids = [None if "raised" in r else (r.get("returned") or {}).get("id") for r in got]
    expect(
        ids == [first, later, last],
        _(
            "on one connection, job {first} (due at 99) at now=100, then at now=101 job "
            "{later} (due at 50, its worker dead: the lease ended at 100.25) before job "
            "{last} (due at 100.5), though job {later} has a smaller id and an earlier "
            "run_after than the job taken before"
        ).format(first=first, later=later, last=last),
        ", ".join(raised_text(r) if "raised" in r else _ex03_said(r.get("returned")) for r in got),
        _(
            "every claim chooses among every ready job, ORDER BY run_after, id: never "
            "WHERE id > (or run_after >=) the last one taken, a cursor kept between calls"
        ),
    )


@CHECKS.add(
    2,
    "keep now and lease_s as given (no int(), no round()): lease_until = now + lease_s and "
    "updated_at = now to the fraction of a second, and a job due a moment ago is ready; a "
    "lease cut short lets a second worker take a job the first still holds",
    timeout=30.0,
    severe=True,
)
def lease_runs_to_now_plus_lease_s_exactly(ns: Namespace) -> None:
    def exact(case: tuple[int, float, float]) -> None:
        whole, frac, lease_s = case
        now = whole + frac
        with lab_file(ns) as (conn, path):
            due = add_job(conn, "a:1:v1", run_after=now - frac / 2)  # due a moment ago
            add_job(conn, "a:2:v1", run_after=now + (1 - frac) / 2)  # due in a moment
            got = _claim(ns, path, "w1", now, lease_s)
            job = _job(conn, due)
        expect(
            (got or {}).get("id") == due
            and job["lease_until"] == now + lease_s
            and job["updated_at"] == now,
            _(
                "claim(now={now}, lease_s={lease_s}) to lease job {job_id} (due at {due_at}) "
                "until {lease_until}, updated_at {now}"
            ).format(
                now=repr(now),
                lease_s=repr(lease_s),
                job_id=due,
                due_at=repr(now - frac / 2),
                lease_until=repr(now + lease_s),
            ),
            _(
                "claim returned {returned}; job {job_id} in the table: state={state}, "
                "lease_until={lease_until}, updated_at={updated_at}"
            ).format(
                returned="None" if got is None else _("job {job_id}").format(job_id=got.get("id")),
                job_id=due,
                state=job["state"],
                lease_until=repr(job["lease_until"]),
                updated_at=repr(job["updated_at"]),
            ),
        )

    cases = st.tuples(
        st.integers(100, 2_000_000_000),
        st.floats(0.01, 0.99),
        st.sampled_from([30.0, 0.5]) | st.floats(0.5, 3600.0),
    )
    # A long job's lease (a day, a month, over a year): a claim that caps lease_s (at an
    # hour, a day, a month, a year, say) lets a second worker take the job while the first
    # still runs it.
    exact((1_764_900_000, 0.25, 86_400.0))
    exact((1_764_900_000, 0.25, 30 * 86_400.0))
    exact((1_764_900_000, 0.25, 400 * 86_400.0))
    holds_for(cases, exact, examples=12)
    _held_a_hair_past_now(ns)


def _held_a_hair_past_now(ns: Namespace) -> None:
    """A lease that ends at the next float after now is still held: an allowance for clock
    skew or float rounding (lease_until <= :now + 1e-9), however small, lets a second
    worker in while the first still holds the lease."""
    now = 100.0
    hair = math.nextafter(now, math.inf)
    with lab_file(ns) as (conn, path):
        held = add_job(
            conn,
            "mail:1:send:v1",
            state="running",
            attempt=1,
            lease_owner="w9",
            lease_until=hair,
            lease_token="live-w9",
            updated_at=90.0,
        )
        got = _claim(ns, path, "w1", now, 30.0)
    expect(
        got is None,
        _(
            "None at now={now!r}: job {held} is leased to w9 until {hair!r}, the next float "
            "after now, still held"
        ).format(now=now, held=held, hair=hair),
        _ex03_said(got),
        _(
            "a running job is ready only once lease_until <= :now, compared exactly: no "
            "allowance for clock skew or float rounding, however small"
        ),
    )


@CHECKS.add(
    2,
    "two worker processes forked from one parent must make different tokens: draw them "
    "from the database (lower(hex(randomblob(16)))) or secrets, not from a random.Random "
    "seeded once at import, which every child inherits in the same state, nor from the "
    "process id (every worker in a container of its own is process 1)",
    timeout=40.0,
    severe=True,
)
def tokens_differ_between_worker_processes(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        _claim(ns, path, "probe", 0.0, 1.0)  # on an empty table: a stub says "not started yet"
        job_id = add_job(conn, "mail:1:send:v1")
        tokens = []
        # w1 claims and stalls; its lease ends; w2, another child of the same parent, takes over.
        for worker, now in (("w1", 100.0), ("w2", 200.0)):
            got = ns.harness(HARNESS + "claim_in_a_new_process", str(path), worker, now, 30.0)
            expect(
                "returned" in got and (got["returned"] or {}).get("id") == job_id,
                _("{worker} in a process of its own to claim job {job_id} at {now:g}").format(
                    worker=worker, job_id=job_id, now=now
                ),
                _("it hung") if got.get("hung") else raised_text(got) if "raised" in got else got,
            )
            tokens.append(_job(conn, job_id)["lease_token"])
        # w1 restarted under the same name (names come from the host) takes the job back
        # while the first w1, stalled, still holds the token it was given.
        got = ns.harness(HARNESS + "claim_in_a_new_process", str(path), "w1", 300.0, 30.0)
        restarted = _job(conn, job_id)["lease_token"]
    expect(
        tokens[0] != tokens[1],
        "a new token when w2 (another process forked from the same parent) takes over "
        "w1's expired lease, so that w1, still running, is fenced off",
        _("the job's token was {w1_token} under w1 and {w2_token} under w2").format(
            w1_token=repr(tokens[0]), w2_token=repr(tokens[1])
        ),
    )
    expect(
        (got.get("returned") or {}).get("id") == job_id and restarted not in tokens,
        _(
            "a new token when w1, restarted in a new process under the same name, claims job "
            "{job_id} again at 300 (its earlier tokens: {tokens})"
        ).format(job_id=job_id, tokens=", ".join(map(repr, tokens))),
        _("the job's token is {token}").format(token=repr(restarted))
        if "returned" in got
        else raised_text(got)
        if "raised" in got
        else str(got),
        _(
            "a counter or a generator started at import starts again in a restarted "
            "worker: draw the token from the database (lower(hex(randomblob(16)))) or secrets"
        ),
    )
    _ex03_tokens_of_workers_started_anew(ns)


def _ex03_tokens_of_workers_started_anew(ns: Namespace) -> None:
    """Workers started on their own, not forked (a service each, or one restarted): each
    imports the module afresh, so a generator seeded at import (random.seed(42)) draws the
    same tokens in every one of them, and a counter started at import gives a token of
    the worker, now and the counter again when the same worker, restarted, claims the
    same job at the same instant after a redrive."""
    with lab_file(ns) as (conn, path):
        job_id = add_job(conn, "mail:1:send:v1")
        tokens: list[Any] = []
        # w1 claims and stalls; its lease ends at 130; w2, started on its own, takes over
        # at 200; an operator redrives the job, and w2, restarted, claims it at 200 again.
        for n, (worker, now) in enumerate((("w1", 100.0), ("w2", 200.0), ("w2", 200.0))):
            if n == 2:
                conn.execute(
                    "UPDATE jobs SET state = 'pending', attempt = 0, run_after = 0,"
                    " lease_owner = NULL, lease_until = NULL, lease_token = NULL"
                )
            got = ns.harness(
                HARNESS + "claim_in_a_worker_started_anew", str(path), worker, now, 30.0
            )
            if got.get("no cells") or (got.get("returned") or {}).get("id") != job_id:
                return  # no cells to start a worker from, or a claim the others judge
            tokens.append(_job(conn, job_id)["lease_token"])
    expect(
        len(set(tokens)) == len(tokens),
        _(
            "three different tokens for job {job_id}, claimed by w1 at 100, by w2 at 200 "
            "(each a worker process started on its own, its module imported afresh), and "
            "by w2 restarted, at 200 again after a redrive put the job back"
        ).format(job_id=job_id),
        _("the tokens: {tokens}").format(tokens=", ".join(map(repr, tokens))),
        _(
            "every worker started anew imports the module again: a random.seed() with a "
            "constant, or a counter started at import, gives the same tokens in each; draw "
            "the token from the database (lower(hex(randomblob(16)))) or secrets"
        ),
    )


def _an_orphan(conn: sqlite3.Connection) -> int:
    """A job due at 0 whose worker died: running, its lease expired at 50."""
    return add_job(
        conn,
        "mail:1:send:v1",
        state="running",
        attempt=1,
        run_after=0.0,
        lease_owner="crashed",
        lease_until=50.0,
        lease_token="old",
        updated_at=20.0,
    )


@CHECKS.add(
    2,
    "a job whose worker died is as ready as any other: ORDER BY run_after, id over every "
    "ready job, expired leases included; putting them after new work (ORDER BY state, a "
    "CASE) starves them for as long as new jobs keep coming",
    severe=True,
)
def dead_workers_jobs_are_not_starved(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        orphan = _an_orphan(conn)
        fresh = add_job(conn, "mail:2:send:v1", run_after=90.0)
        retry = add_job(conn, "mail:3:send:v1", state="retry_wait", attempt=1, run_after=95.0)
        got = (_claim(ns, path, "w1", 100.0, 30.0) or {}).get("id")
    expect(
        got == orphan,
        _(
            "job {job_id} first at 100 (due at 0, its worker died: lease expired at 50), "
            "before job {fresh} (new, due at 90) and job {retry} (retry, due at 95)"
        ).format(job_id=orphan, fresh=fresh, retry=retry),
        "None" if got is None else _("job {job_id}").format(job_id=got),
    )
    # Work enqueued to run at once shares its run_after of 0: a tie goes to the smaller
    # id, the orphan first, not to every new job (ORDER BY run_after, state = 'running').
    with lab_file(ns) as (conn, path):
        orphan = _an_orphan(conn)
        fresh = add_job(conn, "mail:2:send:v1", run_after=0.0)
        got = (_claim(ns, path, "w1", 100.0, 30.0) or {}).get("id")
    expect(
        got == orphan,
        _(
            "job {job_id} first at 100 (due at 0, its worker died: lease expired at 50), "
            "before job {fresh} (new, due at 0 too: a tie of run_after goes to the smaller id)"
        ).format(job_id=orphan, fresh=fresh),
        "None" if got is None else _("job {job_id}").format(job_id=got),
    )
    # Ready is running with lease_until <= now, whoever held it: a row that lost its
    # lease_owner (set by hand, or by a worker that cleared it first) comes back too.
    with lab_file(ns) as (conn, path):
        ownerless = add_job(
            conn, "mail:1:send:v1", state="running", attempt=1, run_after=0.0,
            lease_until=50.0, updated_at=20.0,
        )
        got = (_claim(ns, path, "w1", 100.0, 30.0) or {}).get("id")
    expect(
        got == ownerless,
        _(
            "job {job_id} at 100 (running, its lease expired at 50, no lease_owner on it): "
            "an expired lease is ready whoever held it"
        ).format(job_id=ownerless),
        "None" if got is None else _("job {job_id}").format(job_id=got),
        _(
            "an expired lease is ready by state and lease_until alone; do not also require "
            "lease_owner"
        ),
    )


@CHECKS.add(
    2,
    "take the job in ONE statement: a claim split in two (the state first, the lease in a "
    "second UPDATE) whose worker dies between them leaves the job running with no "
    "lease_until, and no claim ever takes it back",
    timeout=30.0,
    severe=True,
)
def a_claim_killed_midway_comes_back(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        _claim(ns, path, "probe", 0.0, 1.0)  # on an empty table: a stub says "not started yet"
        job_id = add_job(conn, "mail:1:send:v1")
        run = ns.harness(HARNESS + "claim_killed_after_one_statement", str(path), "w1", 100.0, 30.0)
        expect("raised" not in run, "w1's claim to run until it is killed", run.get("raised", ""))
        later = 1_000_000.0
        got = _claim(ns, path, "w2", later, 30.0)
        job = _job(conn, job_id)
    expect(
        got is not None and got.get("id") == job_id,
        _(
            "job {job_id} claimed by w2 at now={later:g}, long after w1 was killed "
            "{when} (at now=100)"
        ).format(
            job_id=job_id,
            later=later,
            when=_("between its claim's statements")
            if run["killed"]
            else _("right after its claim"),
        ),
        _("None; the job stays {state}, lease_owner {owner}, lease_until {until}").format(
            state=job["state"], owner=repr(job["lease_owner"]), until=repr(job["lease_until"])
        )
        if got is None
        else _("job {job_id}").format(job_id=got.get("id")),
    )


#: Finished jobs before the one ready job: more than any page a claim might scan (a LIMIT
#: of 100, 500, 1000, 5000 or 10000 rows before the ready filter).
LONG_TABLE = 10_500


@CHECKS.add(
    2,
    "choose among every row of the table: a claim that looks only at the first rows (a "
    "LIMIT before the ready filter) never reaches a new job once finished ones fill them",
    severe=True,
)
def a_long_table_still_gives_its_ready_job(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        conn.execute("BEGIN")
        for i in range(LONG_TABLE):
            add_job(conn, f"mail:{i}:send:v1", state="succeeded", attempt=1)
        conn.execute("COMMIT")
        job_id = add_job(conn, f"mail:{LONG_TABLE}:send:v1")
        got = _claim(ns, path, "w1", 100.0, 30.0)
    expect(
        got is not None and got.get("id") == job_id,
        _("job {job_id} (pending, due at 0), after {count} succeeded jobs in the table").format(
            job_id=job_id, count=LONG_TABLE
        ),
        "None" if got is None else _("job {job_id}").format(job_id=got.get("id")),
    )


@CHECKS.add(
    1,
    "let a database error come out of claim: a claim that answers None when the SQL fails "
    "makes a broken database (a table renamed by a bad migration, a read-only file) look "
    "like an empty queue, and the workers poll it forever without a word",
)
def a_database_error_comes_out(ns: Namespace) -> None:
    # Each class of error a claim's write can meet: a table gone, a write refused
    # (IntegrityError, as a constraint or a trigger refuses it), a write that fails
    # midway (OperationalError, of the class of a full disk). Swallowing one class of
    # them only, as "another worker took it first", shows as well.
    breaks = (
        (
            "ALTER TABLE jobs RENAME TO jobs_before_migration",
            _(
                "on a database whose jobs table is gone (sqlite3.OperationalError: no such "
                "table: jobs)"
            ),
        ),
        (
            "CREATE TRIGGER refuse BEFORE UPDATE ON jobs"
            " BEGIN SELECT RAISE(ABORT, 'the write was refused'); END",
            _("whose write the database refuses (sqlite3.IntegrityError)"),
        ),
        (
            "CREATE TRIGGER refuse BEFORE UPDATE ON jobs"
            " BEGIN SELECT abs(-9223372036854775808); END",
            _("whose write fails midway, as on a full disk (sqlite3.OperationalError)"),
        ),
    )
    for broken, how in breaks:
        with lab_file(ns) as (conn, path):
            add_job(conn, "mail:1:send:v1")
            conn.execute(broken)
            result = ns.harness(HARNESS + "claim", str(path), "w1", 100.0, 30.0)
        expect(
            "raised" in result,
            _("an error from a claim {how}").format(how=how),
            _("it returned {returned}").format(returned=repr(result.get("returned"))),
        )


def _roll_back_whatever_it_raises() -> str:
    """The hint of both checks on a claim that ends in an exception."""
    return _(
        "if you open a transaction (BEGIN IMMEDIATE), roll it back whatever the "
        "claim raises: try: ... except BaseException: conn.execute('ROLLBACK'); raise"
    )


@CHECKS.add(
    2,
    "a claim that fails leaves no transaction open: a BEGIN of your own is rolled back "
    "when the UPDATE raises (try/except: ROLLBACK, raise), or the worker's connection "
    "keeps the write lock, every other worker waits on 'database is locked', and its own "
    "next claim fails ('cannot start a transaction within a transaction')",
    severe=True,
)
def a_failed_claim_leaves_no_transaction_open(ns: Namespace) -> None:
    # The write fails once (the claim at now=100 only), then works again: an
    # IntegrityError (RAISE(ABORT)) and an OperationalError (an integer overflow, of the
    # class of a full disk), so that a ROLLBACK for one class of error only shows. A
    # claim in autocommit mode leaves nothing open; exercise 13 asks the same.
    failures = (
        "SELECT RAISE(ABORT, 'the write failed (a full disk, simulated)')",
        "SELECT abs(-9223372036854775808)",
    )
    for failure in failures:
        with lab_file(ns) as (conn, path):
            job_id = add_job(conn, "mail:1:send:v1")
            conn.execute(
                "CREATE TRIGGER refuse BEFORE UPDATE OF state ON jobs"
                f" WHEN NEW.updated_at < 100.5 BEGIN {failure}; END"
            )
            calls = [["w1", 100.0, 30.0], ["w1", 101.0, 30.0]]
            got = ns.harness(HARNESS + "on_one_connection", str(path), calls)
            stored = _job(conn, job_id)
        if "raised" not in got[0]:
            continue  # a claim that swallows the error: a_database_error_comes_out names it
        second = got[1].get("returned")
        expect(
            isinstance(second, dict)
            and second.get("id") == job_id
            and stored["state"] == "running",
            _(
                "{name} on one connection, as a long-lived worker claims: the claim at "
                "{now:g} raises (its write failed), the next one at {later:g} takes job "
                "{job_id}"
            ).format(name="claim", now=100.0, later=101.0, job_id=job_id),
            _("the first claim: {first}; the next one: {second}").format(
                first=raised_text(got[0]),
                second=raised_text(got[1])
                if "raised" in got[1]
                else _("returned {value}").format(value=repr(second)),
            ),
            _roll_back_whatever_it_raises(),
        )


@CHECKS.add(
    1,
    "roll back on ANY exception, KeyboardInterrupt included (except BaseException, or a "
    "try/finally): a Ctrl-C inside a claim that opened BEGIN IMMEDIATE must not leave it "
    "open on a connection that lives on, or the worker's next claim fails and every other "
    "worker waits on the write lock",
)
def an_interrupted_claim_leaves_the_connection_usable(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        first, second = add_job(conn, "mail:1:send:v1"), add_job(conn, "mail:2:send:v1")
        calls = [["w1", 100.0, 30.0], ["w1", 101.0, 30.0]]
        got = ns.harness(HARNESS + "interrupted_then_again", str(path), calls)
    if "interrupted" not in got[0]:
        return  # no write to interrupt, or a claim that catches it: others judge the claim
    taken = got[1].get("returned")
    expect(
        isinstance(taken, dict) and taken.get("id") in (first, second),
        _(
            "a claim interrupted (KeyboardInterrupt) right after its first write, then the "
            "next claim on the same connection taking job {first} or {second}"
        ).format(first=first, second=second),
        _("the next claim {outcome}").format(
            outcome=raised_text(got[1])
            if "raised" in got[1]
            else _("returned {value}").format(value=repr(taken))
        ),
        _roll_back_whatever_it_raises(),
    )


@CHECKS.add(
    2,
    "return the row as your own UPDATE left it (RETURNING *): a claim that writes, then "
    "reads the row back by id, may read it after its lease ran out and another worker took "
    "the job, and returns that worker's lease_token; both then run the job, and both pass "
    "every fence",
    severe=True,
)
def a_claim_returns_the_lease_it_took(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        add_job(conn, "mail:1:send:v1")
        got = ns.harness(HARNESS + "claim_then_taken_over", str(path), "w1", 100.0, 30.0)
    row = got.get("returned")
    if not got.get("taken") or not isinstance(row, dict):
        return  # nothing claimed, or nothing written before the claim returned
    expect(
        row.get("lease_owner") == "w1" and row.get("lease_token") not in (None, "w2-token"),
        _(
            "claim by w1 at now=100 to return the lease it took (lease_owner 'w1', its own "
            "lease_token), though w2 took the job over right after w1's write"
        ),
        _("it returned lease_owner {owner}, lease_token {token}").format(
            owner=repr(row.get("lease_owner")), token=repr(row.get("lease_token"))
        ),
        _(
            "return what your UPDATE ... RETURNING * gave back, in the same statement: a "
            "row read again afterwards may be someone else's lease by then"
        ),
    )


@CHECKS.add(
    2,
    "hand the connection back as it was given, in autocommit mode with no transaction "
    "open: a claim that sets conn.isolation_level (to 'IMMEDIATE', say) or leaves its "
    "BEGIN uncommitted keeps the write lock, or leaves the worker's every later write in "
    "a transaction nobody commits, and every other worker waits on 'database is locked'",
    severe=True,
)
def a_claim_leaves_the_connection_as_it_was_given(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        for key in ("mail:1:send:v1", "mail:2:send:v1"):
            add_job(conn, key)
        # Two jobs, three claims: the last finds the queue empty.
        calls = [["w1", 100.0, 30.0], ["w2", 101.0, 30.0], ["w3", 102.0, 30.0]]
        got = ns.harness(HARNESS + "on_one_connection", str(path), calls)
    expect_left_as_given(
        got,
        "claim",
        _(
            "leave conn.isolation_level alone; for a SELECT then an UPDATE, send BEGIN "
            "IMMEDIATE yourself and COMMIT (or ROLLBACK) before you return"
        ),
    )


@CHECKS.add(
    2,
    "a BEGIN IMMEDIATE that fails ('database is locked': another writer held the lock "
    "past the busy timeout) ends the claim with that error, or is tried again: a claim "
    "that swallows it and goes on reads a job, then writes it without the lock, and two "
    "workers both take the job another writer let go meanwhile",
    severe=True,
)
def a_refused_begin_is_not_a_claim_without_the_lock(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        add_job(conn, "mail:1:send:v1")
        got = ns.harness(HARNESS + "begin_refused_once", "claim", str(path), ["w1", 100.0, 30.0])
    expect_no_write_after_a_refused_begin(
        got,
        "claim",
        _(
            "let the OperationalError of BEGIN IMMEDIATE out (the worker claims again "
            "later), or retry the BEGIN; never go on to the SELECT and the UPDATE without "
            "the transaction, and never catch 'cannot start a transaction' to go on either"
        ),
    )


#: Claims in a row for the token check: a token of 16 random bits (randomblob(2), a
#: random number below 10000) repeats within them all but certainly (the odds of no
#: repeat are below e**-30); one of 64 bits or more, practically never.
MANY_CLAIMS = 2000


@CHECKS.add(
    2,
    "draw each lease token from enough randomness that two never meet, for example "
    "lower(hex(randomblob(16))) (128 bits): a short token (randomblob(2), abs(random()) % "
    "10000) repeats within a few hundred claims, and a zombie holding the old one passes "
    "the fence of the new run",
    timeout=30.0,
    severe=True,
)
def lease_tokens_do_not_repeat_over_thousands_of_claims(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        _claim(ns, path, "probe", 0.0, 1.0)  # on an empty table: a stub says "not started yet"
        # Attempts enough for every claim: a claim may mark a job dead once an expired
        # lease finds it out of attempts (labkit's store does), and that is not this check's.
        job_id = add_job(conn, "mail:1:send:v1", max_attempts=MANY_CLAIMS + 1)
        run = ns.harness(HARNESS + "claim_tokens", str(path), MANY_CLAIMS, 100.0, 30.0)
        attempt = _job(conn, job_id)["attempt"]
    tokens = run["tokens"]
    expect(
        "raised" not in run and None not in tokens,
        _(
            "job {job_id} claimed {count} times in a row by w1, each time 31 s after the "
            "last claim (its lease of 30 s over)"
        ).format(job_id=job_id, count=MANY_CLAIMS),
        run["raised"]
        if "raised" in run
        else _("None at claim {n}").format(n=tokens.index(None) + 1)
        if None in tokens
        else "",
    )
    counts = Counter(tokens)
    repeated = sorted((t for t, n in counts.items() if n > 1), key=str)
    expect(
        not repeated,
        _("{count} different lease tokens for the {count} claims of job {job_id}").format(
            count=MANY_CLAIMS, job_id=job_id
        ),
        _("{distinct} different tokens (attempt {attempt}); repeated: {repeated}").format(
            distinct=len(counts), attempt=attempt, repeated=", ".join(map(repr, repeated[:3]))
        ),
    )
    # A token of 20, 24 or 32 random bits repeats in 2000 claims only now and then (one
    # of 32, about once in 2000 runs); its text shows how little it can hold. A counter
    # or a clock (uuid1, time_ns) varies as little over a second, but only grows: it is
    # unique by construction, and passes.
    bits = too_few_bits(tokens)
    expect(
        bits is None,
        _(
            "{count} different lease tokens drawn from at least 2**{bits} values (a token "
            "of 32 random bits or fewer repeats, by the birthday bound, within some tens of "
            "thousands of claims)"
        ).format(count=len(tokens), bits=TOKEN_BITS),
        _(
            "{count} tokens that can take at most about 2**{bits:.0f} values (the characters "
            "seen at each position: {sample})"
        ).format(count=len(tokens), bits=bits or 0.0, sample=", ".join(map(repr, tokens[:3]))),
        _(
            "draw the token from at least 64 random bits: lower(hex(randomblob(16))), "
            "secrets.token_hex(16) or uuid.uuid4()"
        ),
    )
    _tokens_at_one_instant(ns)
    _tokens_in_one_tick(ns)


#: Claims of one job within one tick of the clock: a token made of the time (time_ns(),
#: time.time(), perf_counter()) gives the same one at each.
TICK_CLAIMS = 50


def _tokens_in_one_tick(ns: Namespace) -> None:
    """The same job claimed again and again, a redrive before each, within one tick of
    the machine's clocks (every clock reads the same instant, as a coarse clock does for
    claims that follow each other fast, or one that NTP stepped back): a token made of the
    time repeats; one drawn from randomness does not."""
    with lab_file(ns) as (conn, path):
        job_id = add_job(conn, "mail:1:send:v1")
        run = ns.harness(HARNESS + "claim_tokens_in_one_tick", str(path), TICK_CLAIMS, 600.0, 30.0)
    tokens = run["tokens"]
    if "raised" in run or None in tokens:
        return  # the run of claims over time above judges a claim that fails
    repeated = sorted((t for t, n in Counter(tokens).items() if n > 1), key=str)
    expect(
        not repeated,
        _(
            "{count} different lease tokens for {count} claims of job {job_id}, each after a "
            "redrive, all within one tick of the clock (time.time(), time_ns(), "
            "perf_counter() and datetime.now() read the same instant at each, as a coarse "
            "clock does)"
        ).format(count=TICK_CLAIMS, job_id=job_id),
        _("{distinct} different tokens; repeated: {repeated}").format(
            distinct=len(set(tokens)), repeated=", ".join(map(repr, repeated[:3]))
        ),
        _(
            "a token made of the time (time_ns(), time.time(), a timestamp with the worker's "
            "name) repeats when two claims fall in one tick of the clock, or when the clock "
            "steps back: draw it from randomness, lower(hex(randomblob(16))), "
            "secrets.token_hex(16) or uuid.uuid4()"
        ),
    )


#: Claims of one job at one instant, each after a redrive put it back at attempt 0: a
#: token of the worker, the job and now with a few random digits after them (a random
#: number below 1000 or a million) repeats within them, or shows how little it holds.
REDRIVEN_CLAIMS = 1000


def _tokens_at_one_instant(ns: Namespace) -> None:
    """The same job claimed again and again at one now, a redrive (attempt 0, no lease)
    before each claim: only the token's own randomness tells the runs apart. The time,
    the worker's name, the job id or the attempt in a token hold no randomness there."""
    with lab_file(ns) as (conn, path):
        job_id = add_job(conn, "mail:1:send:v1")
        run = ns.harness(HARNESS + "claim_tokens", str(path), REDRIVEN_CLAIMS, 600.0, 30.0, True)
    tokens = run["tokens"]
    if "raised" in run or None in tokens:
        return  # the run of claims over time above judges a claim that fails
    repeated = sorted((t for t, n in Counter(tokens).items() if n > 1), key=str)
    bits = too_few_bits(tokens)
    expect(
        not repeated and bits is None,
        _(
            "{count} different lease tokens, drawn from at least 2**{bits} values, for "
            "{count} claims of job {job_id} by w1 at the same now=600, each after a redrive "
            "put it back at attempt 0"
        ).format(count=REDRIVEN_CLAIMS, bits=TOKEN_BITS, job_id=job_id),
        "; ".join(
            [_("repeated: {repeated}").format(repeated=", ".join(map(repr, repeated[:3])))]
            * bool(repeated)
            + [
                _(
                    "{count} tokens that can take at most about 2**{bits:.0f} values (the "
                    "characters seen at each position: {sample})"
                ).format(
                    count=len(tokens), bits=bits or 0.0, sample=", ".join(map(repr, tokens[:3]))
                )
            ]
            * (bits is not None)
        ),
        _(
            "the worker, the job id, the attempt and now add no randomness to a token (a "
            "redrive at the same instant gives them all again): draw it from at least 64 "
            "random bits, lower(hex(randomblob(16))), secrets.token_hex(16) or uuid.uuid4()"
        ),
    )


@CHECKS.add(
    2,
    "claim reads no queue or kind: a ready job is ready whatever its queue (reports, "
    "billing) and its kind; a claim that serves only 'default' leaves every other job "
    "pending forever",
    severe=True,
)
def jobs_on_any_queue_are_claimed(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        ids = [
            add_job(conn, "report:1:build:v1", kind="report", queue="reports", run_after=10.0),
            add_job(conn, "invoice:2:charge:v1", kind="charge", queue="billing", run_after=20.0),
            add_job(conn, "mail:3:send:v1", run_after=30.0),
            # A report whose worker died: a kind or queue filter put only on the expired
            # leases (an OR without its parentheses) leaves it running forever.
            add_job(
                conn,
                "report:4:build:v1",
                kind="report",
                queue="reports",
                run_after=40.0,
                state="running",
                attempt=1,
                lease_owner="crashed",
                lease_until=50.0,
                lease_token="old",
            ),
        ]
        got = [(_claim(ns, path, "w1", 100.0, 30.0) or {}).get("id") for _n in ids]
        queues = {j["id"]: j["queue"] for j in all_jobs(conn)}
    expect(
        got == ids,
        _(
            "jobs {ids} in that order (due at 10, 20 and 30, on the queues reports, billing "
            "and default, then a report due at 40 whose worker died: its lease ended at 50)"
        ).format(ids=ids),
        ", ".join(
            "None" if i is None else _("job {job_id} ({queue})").format(job_id=i, queue=queues[i])
            for i in got
        ),
    )


#: Local time zones a worker may run in, as POSIX strings (no time zone database needed).
ZONES = ("<-03>3", "<+0530>-5:30")


@CHECKS.add(
    2,
    "now is epoch seconds, the same instant in every time zone: use it as it is, never "
    "through a datetime (utcfromtimestamp(now).timestamp() reads UTC as local time and "
    "moves now by hours: jobs run early, live leases look expired)",
    timeout=30.0,
    severe=True,
)
def claim_is_the_same_in_every_time_zone(ns: Namespace) -> None:
    now, lease_s = 1_764_900_000.25, 30.0
    for tz in ZONES:
        with lab_file(ns) as (conn, path):
            due = add_job(conn, "a:1:v1", run_after=now - 1800)  # due half an hour ago
            add_job(conn, "a:2:v1", run_after=now + 1800)  # due in half an hour
            args = (str(path), "w1", now, lease_s, tz)
            got = _row(ns.harness(HARNESS + "claim_in_time_zone", *args), "w1", now)
            second = _row(ns.harness(HARNESS + "claim_in_time_zone", *args), "w1", now)
            job = _job(conn, due)
        expect(
            (got or {}).get("id") == due
            and second is None
            and job["lease_until"] == now + lease_s
            and job["updated_at"] == now,
            _(
                "with TZ={tz}: job {job_id} (due half an hour ago) leased until {lease_until}, "
                "then None (the other job is due in half an hour)"
            ).format(tz=tz, job_id=due, lease_until=repr(now + lease_s)),
            _(
                "claim returned {first}, then {second}; job {job_id}: lease_until={lease_until}, "
                "updated_at={updated_at}"
            ).format(
                first="None" if got is None else _("job {job_id}").format(job_id=got.get("id")),
                second="None"
                if second is None
                else _("job {job_id}").format(job_id=second.get("id")),
                job_id=due,
                lease_until=repr(job["lease_until"]),
                updated_at=repr(job["updated_at"]),
            ),
        )


@CHECKS.add(
    2,
    "claim works on the connection it is given, every call: a connection kept from the "
    "first call (a module-level cache) claims the first database's jobs when the worker "
    "serves another, and the other's jobs never run",
    severe=True,
)
def claim_uses_the_connection_it_is_given(ns: Namespace) -> None:
    with lab_file(ns, name="tenant_a.db") as (conn_a, path_a):
        with lab_file(ns, name="tenant_b.db") as (conn_b, path_b):
            add_job(conn_a, "a:1:sync:v1", run_after=10.0)
            add_job(conn_a, "a:2:sync:v1", run_after=20.0)
            add_job(conn_b, "b:1:sync:v1", run_after=10.0)
            args = ([str(path_a), str(path_b)], 100.0, 30.0)
            results = ns.harness(HARNESS + "claim_in_two_databases", *args)
            rows = [_row(result, "w1", 100.0) for result in results]
            pending_b = [j["key"] for j in all_jobs(conn_b) if j["state"] == "pending"]
    keys = [None if row is None else row.get("key") for row in rows]
    expect(
        keys == ["a:1:sync:v1", "b:1:sync:v1"],
        _(
            "'a:1:sync:v1' from the first database, then 'b:1:sync:v1' from the second (one "
            "worker process, two databases, a connection to each)"
        ),
        _("{keys}; still pending in the second database: {pending}").format(
            keys=repr(keys), pending=repr(pending_b)
        ),
        _(
            "run the statement on the conn argument of each call; never keep a connection in "
            "a global between calls"
        ),
    )


#: Worker names as hosts and orchestrators make them: a pod's name with its service's
#: domain runs well past 64 characters (a column cut to VARCHAR(64) loses its end).
_EX03_WORKER_NAMES = (
    "w1",
    "worker-3@build-host",
    "celery@jobs-worker-7f9c8d6b5-x2x9k.jobs-worker-headless.payments-prod.svc.cluster.local",
)


#: A tail for a worker's name that any Unicode normalization changes: an e and its
#: combining diaeresis (NFC makes them one letter), a full-width w2 (NFKC makes it w2).
_EX03_UNNORMALIZED = "/Zoe\u0308-\uff57\uff12"


#: A worker's name as a pool may build it: the host's full name, the process, the thread
#: and a run id, past 255 characters (a column cut to VARCHAR(255) loses its end).
_EX03_LONG_WORKER = (
    "celery@jobs-worker-7f9c8d6b5-x2x9k.jobs-worker-headless.payments-prod.svc.cluster.local"
    ".eu-west-1.compute.internal.example-payments-platform.corp.example.com"
    ":4242:ThreadPoolExecutor-0_3:reports,billing,default,mail,sms,webhooks"
    ":run-3f9a1c2e7b5d4e6f8a9b0c1d2e3f4a5b"
)


def _ex03_scene(name: str, seed: int) -> random.Random:
    return random.Random(f"ex03 {name} {seed}")


def _ex03_said(got: Any) -> str:
    return "None" if got is None else _("job {job_id}").format(job_id=got.get("id"))


@CHECKS.add(
    2,
    "a pending or retry_wait job is ready by its state and run_after alone, whatever "
    "lease its last run left (lease_owner, lease_until, lease_token): a retry skipped for "
    "the worker it failed on waits forever when that worker is the only one left",
    severe=True,
)
def a_waiting_job_is_ready_whatever_lease_it_carries(ns: Namespace) -> None:
    for seed in scene_seeds():
        rng = _ex03_scene("waiting", seed)
        worker = rng.choice(_EX03_WORKER_NAMES)
        now = float(rng.randrange(10_000, 2_000_000_000)) + 0.5
        failed_at = now - rng.randrange(60, 3600)
        with lab_file(ns) as (conn, path):
            # It failed on this very worker (the only one left, or restarted under its
            # name), which put it in retry_wait with its lease still on the row.
            retry = add_job(
                conn,
                "mail:1:send:v1",
                state="retry_wait",
                attempt=rng.randint(1, 2),
                run_after=failed_at + 30,
                lease_owner=worker,
                lease_until=failed_at + 20,
                lease_token="old-retry",
                updated_at=failed_at,
            )
            # An operator put a stuck running job back to pending by hand, its lease left.
            back = add_job(
                conn,
                "mail:2:send:v1",
                state="pending",
                attempt=1,
                run_after=failed_at + 40,
                lease_owner=rng.choice(("w0", worker)),
                lease_until=failed_at + 10,
                lease_token="old-pending",
                updated_at=failed_at + 40,
            )
            got = [_claim(ns, path, worker, now, 30.0) for _n in range(2)]
        expect(
            [(row or {}).get("id") for row in got] == [retry, back],
            _(
                "{worker} at now={now!r} to claim job {retry} (retry_wait, due at {retry_at!r}, "
                "its failed run's lease held by {worker}) then job {back} (pending, put back by "
                "hand with its old lease on the row)"
            ).format(
                worker=repr(worker),
                now=now,
                retry=retry,
                retry_at=failed_at + 30,
                back=back,
            ),
            ", ".join(_ex03_said(row) for row in got),
            _(
                "ready is (state IN ('pending', 'retry_wait') AND run_after <= :now) OR "
                "(state = 'running' AND lease_until <= :now): never a condition on "
                "lease_owner or a lease left on a waiting job"
            ),
        )


#: Newer jobs after the one ready job: more than any window of the newest rows a claim
#: might scan (ORDER BY id DESC LIMIT 1000).
_EX03_NEWER = 1500


@CHECKS.add(
    2,
    "an old job is as ready as a new one: a claim that scans only the newest rows (ORDER "
    "BY id DESC LIMIT ...) or skips jobs overdue for long (run_after > :now - a day) never "
    "runs a job enqueued before an outage or before a burst of new work",
    timeout=30.0,
    severe=True,
)
def an_old_job_behind_many_newer_ones_is_claimed(ns: Namespace) -> None:
    for seed in scene_seeds():
        rng = _ex03_scene("old", seed)
        now = 1_764_900_000.25 + rng.randrange(0, 86_400)
        days = rng.randint(30, 120)
        with lab_file(ns) as (conn, path):
            old = add_job(conn, "mail:0:send:v1", run_after=now - days * 86_400)
            conn.execute("BEGIN")
            for i in range(1, _EX03_NEWER + 1):
                later = rng.random() < 0.5
                add_job(
                    conn,
                    f"mail:{i}:send:v1",
                    state="pending" if later else "succeeded",
                    attempt=0 if later else 1,
                    run_after=now + 3600 if later else now - 600,
                )
            conn.execute("COMMIT")
            got = _claim(ns, path, "w1", now, 30.0)
            # Enqueued just now with the table's default run_after, 0 ("at once"): due
            # decades ago by the clock, so a window of any length on run_after skips it.
            default = add_job(conn, f"mail:{_EX03_NEWER + 1}:send:v1")
            again = _claim(ns, path, "w1", now, 30.0)
            # A worker that died before a long outage (its lease expired years ago), and a
            # retry due over a year ago: ready all the same, the orphan due first.
            years = rng.randint(2, 5)
            orphan = add_job(
                conn,
                f"mail:{_EX03_NEWER + 2}:send:v1",
                state="running",
                attempt=1,
                run_after=now - years * 366 * 86_400,
                lease_owner="crashed",
                lease_until=now - years * 365 * 86_400,
                lease_token="old",
                updated_at=now - years * 365 * 86_400,
            )
            retry = add_job(
                conn,
                f"mail:{_EX03_NEWER + 3}:send:v1",
                state="retry_wait",
                attempt=1,
                run_after=now - 400 * 86_400,
            )
            # A lease an operator expired by hand (lease_until = 0): its end lies decades
            # back, so a window of any length on lease_until skips it.
            forced = add_job(
                conn,
                f"mail:{_EX03_NEWER + 4}:send:v1",
                state="running",
                attempt=1,
                run_after=now - 10 * 86_400,
                lease_owner="stuck",
                lease_until=0.0,
                lease_token="forced",
                updated_at=now - 3600,
            )
            late = [_claim(ns, path, "w1", now, 30.0) for _n in range(3)]
        expect(
            (got or {}).get("id") == old,
            _(
                "job {job_id} claimed at now={now!r}: pending, due {days} days ago (enqueued "
                "before an outage), then {count} newer jobs, succeeded or due in an hour"
            ).format(job_id=old, now=now, days=days, count=_EX03_NEWER),
            _ex03_said(got),
            _(
                "choose among every row, however old its run_after and however many rows "
                "came after it: the ready filter and ORDER BY run_after, id LIMIT 1, nothing else"
            ),
        )
        expect(
            (again or {}).get("id") == default,
            _(
                "job {job_id} claimed next at now={now!r}: pending, enqueued with the table's "
                "default run_after, 0 (due at once)"
            ).format(job_id=default, now=now),
            _ex03_said(again),
            _(
                "a job is ready once run_after <= :now, however long ago: no window on "
                "run_after (run_after > :now - 365 days skips every job enqueued with "
                "run_after 0, the table's default)"
            ),
        )
        expect(
            [(row or {}).get("id") for row in late] == [orphan, retry, forced],
            _(
                "job {orphan} (running, its worker dead: the lease expired {years} years ago), "
                "then job {retry} (retry_wait, due 400 days ago), then job {forced} (running, "
                "its lease expired by hand: lease_until = 0) claimed at now={now!r}"
            ).format(orphan=orphan, years=years, retry=retry, forced=forced, now=now),
            ", ".join(_ex03_said(row) for row in late),
            _(
                "an expired lease is ready however long ago it ended, and a retry however "
                "long ago it fell due: no window on lease_until or run_after (lease_until > "
                ":now - 365 days leaves a job whose worker died before an outage running "
                "forever, and one whose lease was expired by hand, with lease_until = 0)"
            ),
        )


#: Ready jobs in the backlog before the one due first: more than a page a claim might
#: read before it sorts (a LIMIT 100 on the ready rows, then ORDER BY).
_EX03_BACKLOG = 300


@CHECKS.add(
    1,
    "ORDER BY run_after, id over every ready job, then LIMIT 1: a claim that takes a page "
    "of ready rows first (LIMIT 100) and sorts only that misses the job due first",
    timeout=30.0,
)
def the_job_due_first_in_a_long_backlog(ns: Namespace) -> None:
    for seed in scene_seeds():
        rng = _ex03_scene("backlog", seed)
        now = 1_764_900_000.25
        with lab_file(ns) as (conn, path):
            conn.execute("BEGIN")
            for i in range(_EX03_BACKLOG):
                add_job(conn, f"mail:{i}:send:v1", run_after=now - rng.uniform(1, 600))
            conn.execute("COMMIT")
            first = add_job(
                conn,
                f"mail:{_EX03_BACKLOG}:send:v1",
                state="retry_wait",
                attempt=1,
                run_after=now - 3600,
            )
            got = _claim(ns, path, "w1", now, 30.0)
        expect(
            (got or {}).get("id") == first,
            _(
                "job {job_id} first (retry_wait, due an hour ago), after {count} ready jobs "
                "due within the last ten minutes"
            ).format(job_id=first, count=_EX03_BACKLOG),
            _ex03_said(got),
            _(
                "sort every ready job: WHERE <ready> ORDER BY run_after, id LIMIT 1, with no "
                "LIMIT before the ORDER BY"
            ),
        )


@CHECKS.add(
    2,
    "every claim, of a new job or of an expired lease, sets state, attempt + 1, "
    "lease_owner = the worker's name as given, lease_until, a new lease_token and "
    "updated_at = now, and leaves every other column (last_error, dead_reason, "
    "redrives...) as it was",
)
def a_claim_writes_its_columns_and_only_them(ns: Namespace) -> None:
    for seed in scene_seeds():
        rng = _ex03_scene("columns", seed)
        # Spaces at both ends too, as a name read from a config file keeps them: SQL's
        # trim() drops them, and the worker's later guards (lease_owner = :worker) fail.
        worker = " " + _EX03_LONG_WORKER + _EX03_UNNORMALIZED + " "
        now = float(rng.randrange(1_000, 100_000)) + 0.25
        lease_s = rng.choice((30.0, 90.0, 600.0))
        with lab_file(ns) as (conn, path):
            # Redriven once after it died as poison, then its worker died in turn: its
            # lease expired, and why it died the first time stays on the row.
            orphan = add_job(
                conn,
                "report:1:build:v1",
                kind="report",
                queue="reports",
                state="running",
                attempt=2,
                max_attempts=5,
                run_after=now - 500,
                lease_owner="crashed",
                lease_until=now - 100,
                lease_token="old-token",
                last_error="worker lost",
                dead_reason="poison: 3 crashes",
                updated_at=now - 400,
            )
            redriven = add_job(
                conn,
                "invoice:2:charge:v1",
                kind="charge",
                queue="billing",
                run_after=now - 50,
                last_error="card declined",
                dead_reason="max_attempts reached",
            )
            conn.execute("UPDATE jobs SET redrives = 1")
            before = {j["id"]: j for j in all_jobs(conn)}
            got = [_claim(ns, path, worker, now, lease_s) for _n in range(2)]
            after = {j["id"]: j for j in all_jobs(conn)}
        for job_id, what in (
            (orphan, _("an expired lease")),
            (redriven, _("a redriven job")),
        ):
            old, new = before[job_id], after[job_id]
            want = {
                **old,
                "state": "running",
                "attempt": old["attempt"] + 1,
                "lease_owner": worker,
                "lease_until": now + lease_s,
                "updated_at": now,
            }
            wrong = [
                _("{column}={got} (expected {want})").format(
                    column=column, got=repr(new[column]), want=repr(want[column])
                )
                for column in new
                if column != "lease_token" and new[column] != want[column]
            ]
            if new["lease_token"] in (None, old["lease_token"]):
                wrong.append(_("lease_token={token}").format(token=repr(new["lease_token"])))
            expect(
                job_id in [(row or {}).get("id") for row in got] and not wrong,
                _(
                    "job {job_id}, {what}, claimed at now={now!r} with lease_s={lease_s!r}: "
                    "state, attempt + 1, lease_owner (the worker's name whole, never cut or "
                    "normalized), lease_until, "
                    "a new lease_token and updated_at = now set, every other column as it was"
                ).format(job_id=job_id, what=what, now=now, lease_s=lease_s),
                "; ".join(wrong) or ", ".join(_ex03_said(row) for row in got),
                _(
                    "SET state, attempt = attempt + 1, lease_owner = :worker, lease_until = "
                    ":now + :lease_s, lease_token, updated_at = :now, the same for every job "
                    "it takes, and nothing else"
                ),
            )


@CHECKS.add(
    2,
    "judge each claim by the now it is given, even one earlier than the last: a claim "
    "that keeps the latest now it saw (a clock that never goes back) takes a job whose "
    "lease still runs once the worker's clock is stepped back, and two workers run it",
    severe=True,
)
def a_claim_reads_only_the_now_it_is_given(ns: Namespace) -> None:
    for seed in scene_seeds():
        rng = _ex03_scene("clock", seed)
        now = float(rng.randrange(10_000, 2_000_000_000))
        ahead = rng.choice((60.0, 300.0, 3600.0))
        with lab_file(ns) as (conn, path):
            first = add_job(conn, "mail:1:send:v1", run_after=now - 60)
            held = add_job(
                conn,
                "mail:2:send:v1",
                state="running",
                attempt=1,
                run_after=now - 30,
                lease_owner="w9",
                lease_until=now + ahead / 2,
                lease_token="live-w9",
                updated_at=now - 10,
            )
            # One long-lived worker: its clock ran ahead, and NTP stepped it back.
            calls = [["w1", now + ahead, 30.0], ["w1", now, 30.0]]
            got = ns.harness(HARNESS + "on_one_connection", str(path), calls)
            job = _job(conn, held)
        taken = [r.get("returned") if "raised" not in r else None for r in got]
        if not isinstance(taken[0], dict) or taken[0].get("id") != first:
            return  # the first claim took another job: the checks of order judge that
        second = taken[1]
        expect(
            "raised" not in got[1] and second is None and job["lease_owner"] == "w9",
            _(
                "None from the claim at now={now!r} (after one at {ahead!r} took job {first}, "
                "on the same connection): job {held} is leased to w9 until {until!r}"
            ).format(now=now, ahead=now + ahead, first=first, held=held, until=now + ahead / 2),
            raised_text(got[1])
            if "raised" in got[1]
            else _("it returned {value}; job {job_id} is leased to {owner}").format(
                value=_ex03_said(second) if isinstance(second, dict) else repr(second),
                job_id=held,
                owner=repr(job["lease_owner"]),
            ),
            _("use the now of each call as it is; keep no clock of your own between calls"),
        )


@CHECKS.add(
    1,
    "query the table at every call: a claim that keeps a pause of its own after an empty "
    "poll answers None while a job is ready, and updated_at and the lease count from the "
    "now of this claim, not the latest time the row or the worker saw (max(updated_at, :now))",
)
def a_claim_right_after_an_empty_poll_takes_the_job_now_due(ns: Namespace) -> None:
    """One long-lived worker polls an empty queue, and a job falls due a moment later: the
    next claim takes it, with updated_at its own now."""
    for seed in scene_seeds():
        _ex03_due_just_after_an_empty_poll(ns, seed)
        _ex03_enqueued_just_after_an_empty_poll(ns, seed)


def _ex03_enqueued_just_after_an_empty_poll(ns: Namespace, seed: int) -> None:
    """One long-lived worker polls a queue whose only job is due in an hour; a producer
    then enqueues a job to run at once, and the worker's next claim, a millisecond later,
    takes it: a claim that remembers when the queue's next job falls due (or pauses after
    an empty poll, however briefly) answers None."""
    rng = _ex03_scene("enqueued", seed)
    now = float(rng.randrange(10_000, 2_000_000_000)) + 0.5
    later = now + 0.001
    with lab_file(ns) as (conn, path):
        future = add_job(conn, "mail:1:send:v1", run_after=now + 3600)
        calls = [["w1", now, 30.0], ["w1", later, 30.0]]
        enqueued: list[list[dict[str, Any]]] = [[], [{"key": "mail:2:send:v1"}]]
        run = ns.harness(HARNESS + "on_one_connection_fed", str(path), calls, enqueued)
        got, [[], [fresh]] = run["results"], run["added"]
        job = _job(conn, fresh)
    taken = [r.get("returned") if "raised" not in r else None for r in got]
    expect(
        taken[0] is None
        and isinstance(taken[1], dict)
        and taken[1].get("id") == fresh
        and job["updated_at"] == later,
        _(
            "on one connection, None at now={now!r} (job {future} is due in an hour), then "
            "job {fresh}, enqueued meanwhile to run at once, at now={later!r}, with "
            "updated_at={later!r}"
        ).format(now=now, future=future, fresh=fresh, later=later),
        "; ".join(
            raised_text(r) if "raised" in r else _ex03_said(t)
            for r, t in zip(got, taken, strict=True)
        )
        + _("; updated_at={updated_at!r}").format(updated_at=job["updated_at"]),
        _(
            "query the table at every call: no pause after an empty poll and no memory of "
            "when the next job falls due (a job enqueued meanwhile is due sooner)"
        ),
    )


def _ex03_due_just_after_an_empty_poll(ns: Namespace, seed: int) -> None:
    rng = _ex03_scene("idle", seed)
    now = float(rng.randrange(10_000, 2_000_000_000)) + 0.5
    gap = rng.choice((0.25, 0.5, 0.75))
    with lab_file(ns) as (conn, path):
        # Enqueued by a producer whose clock runs a minute ahead of the worker's.
        due = add_job(conn, "mail:1:send:v1", run_after=now + gap / 2, updated_at=now + 60)
        calls = [["w1", now, 30.0], ["w1", now + gap, 30.0]]
        got = ns.harness(HARNESS + "on_one_connection", str(path), calls)
        job = _job(conn, due)
    taken = [r.get("returned") if "raised" not in r else None for r in got]
    expect(
        taken[0] is None
        and isinstance(taken[1], dict)
        and taken[1].get("id") == due
        and job["updated_at"] == now + gap
        and job["lease_until"] == now + gap + 30.0,
        _(
            "on one connection, None at now={now!r}, then job {job_id} (due at {due_at!r}) "
            "at now={later!r}, with updated_at={later!r} and lease_until={until!r} (the "
            "row's updated_at was {stamped!r}, from a clock a minute ahead)"
        ).format(
            now=now,
            job_id=due,
            due_at=now + gap / 2,
            later=now + gap,
            until=now + gap + 30.0,
            stamped=now + 60,
        ),
        "; ".join(
            raised_text(r) if "raised" in r else _ex03_said(t)
            for r, t in zip(got, taken, strict=True)
        )
        + _("; updated_at={updated_at!r}, lease_until={until!r}").format(
            updated_at=job["updated_at"], until=job["lease_until"]
        ),
        _(
            "query the table at every call: no pause after an empty poll (the worker's loop "
            "sleeps, not claim), updated_at = :now and lease_until = :now + :lease_s, not "
            "counted from the latest time seen"
        ),
    )


@CHECKS.add(
    1,
    "pass worker, now and lease_s as :named parameters, never inside the SQL text "
    "(f-string, % or format, even with its quotes doubled by hand): the docstring asks for "
    "parameters, and every claim then compiles a new statement",
)
def now_and_lease_s_are_parameters(ns: Namespace) -> None:
    for seed in scene_seeds():
        rng = _ex03_scene("params", seed)
        now = float(rng.randrange(1_000_000_000, 2_000_000_000)) + 0.375
        lease_s = rng.choice((45.125, 77.625, 123.875))
        worker = f"worker-{rng.randrange(16**8):08x}@build-host"
        with lab_file(ns) as (conn, path):
            add_job(conn, "mail:1:send:v1")
            result = ns.harness(HARNESS + "claim", str(path), worker, now, lease_s)
        _row(result, worker, now)
        inlined = [
            s
            for s in result["statements"]
            if str(int(now)) in s or str(lease_s) in s or worker in s
        ]
        expect(
            not inlined,
            _(
                "claim({worker!r}, now={now!r}, lease_s={lease_s!r}) with the worker's name, "
                "now and lease_s as parameters, not written into the SQL text"
            ).format(worker=worker, now=now, lease_s=lease_s),
            "; ".join(s[:160] for s in inlined),
            _(
                "write :worker, :now and :lease_s in the SQL and pass {...} to conn.execute; "
                "quotes doubled by hand are no parameter"
            ),
        )


@CHECKS.add(
    1,
    "a 'database is locked' is no empty queue: let the OperationalError out of claim (the "
    "worker tries again later) or retry the statement; a claim that answers None hides a "
    "ready job and a lock nobody lets go",
)
def a_locked_database_is_not_an_empty_queue(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        job_id = add_job(conn, "mail:1:send:v1")
        got = ns.harness(HARNESS + "claim_meeting_the_write_lock", str(path), "w1", 100.0, 30.0)
    if not got["refused"] or "raised" in got:
        return  # no write met the lock, or the error came out: both are right
    expect(
        (got["returned"] or {}).get("id") == job_id,
        _(
            "claim by w1 at now=100, whose write met another writer's lock ('database is "
            "locked'), to raise that error or to try again and return job {job_id}"
        ).format(job_id=job_id),
        _("it returned {value}").format(value=repr(got["returned"])),
        _(
            "do not catch sqlite3.OperationalError to return None: let it out, or try the "
            "statement again"
        ),
    )


#: The chosen job's key: a digest to every subscriber, its '*' a character like any other.
_EX03_CHOSEN = "mail_digest:{n}:to:*:v1"
#: Keys that differ from the chosen job's only where a LIKE pattern or a comparison
#: without case does not look: capitals, and the '_' that LIKE reads as any one
#: character.
_EX03_LOOKALIKES = ("Mail_Digest:{n}:to:*:v1", "mail-digest:{n}:to:*:v1", "MAIL.DIGEST:{n}:to:*:v1")
#: A key that the chosen one matches as a GLOB pattern ('*' reads as any text there).
_EX03_GLOB_LOOKALIKE = "mail_digest:{n}:to:ann:v1"


@CHECKS.add(
    2,
    "take the one job you chose, by its id (WHERE id = (SELECT id ...)): a claim that "
    "finds its row again by key with LIKE or GLOB, or without case, also takes jobs whose "
    "keys only look alike (a '_' in a key matches any character, LIKE ignores case, a '*' "
    "matches any text in GLOB), a job another worker holds or one already done among them",
    severe=True,
)
def a_claim_takes_only_the_job_it_chose(ns: Namespace) -> None:
    for seed in scene_seeds():
        rng = _ex03_scene("lookalike", seed)
        now = float(rng.randrange(10_000, 2_000_000_000)) + 0.5
        n = rng.randrange(1, 1000)
        with lab_file(ns) as (conn, path):
            chosen = add_job(conn, _EX03_CHOSEN.format(n=n), run_after=now - 60)
            sibling = add_job(
                conn,
                _EX03_GLOB_LOOKALIKE.format(n=n),
                state="running",
                attempt=1,
                run_after=now - 90,
                lease_owner="w7",
                lease_until=now + 600,
                lease_token="live-w7",
                updated_at=now - 20,
            )
            held = add_job(
                conn,
                _EX03_LOOKALIKES[0].format(n=n),
                state="running",
                attempt=1,
                run_after=now - 120,
                lease_owner="w9",
                lease_until=now + 600,
                lease_token="live-w9",
                updated_at=now - 30,
            )
            done = add_job(
                conn,
                _EX03_LOOKALIKES[1].format(n=n),
                state="succeeded",
                attempt=1,
                run_after=now - 300,
                lease_owner="w8",
                lease_until=now - 200,
                lease_token="old-w8",
                updated_at=now - 250,
            )
            later = add_job(conn, _EX03_LOOKALIKES[2].format(n=n), run_after=now + 3600)
            before = {j["id"]: j for j in all_jobs(conn)}
            got = _claim(ns, path, "w1", now, 30.0)
            after = {j["id"]: j for j in all_jobs(conn)}
        changed = [
            _("job {job_id} ({key}, was {state}) is now {new_state}, leased to {owner}").format(
                job_id=job_id,
                key=repr(before[job_id]["key"]),
                state=before[job_id]["state"],
                new_state=after[job_id]["state"],
                owner=repr(after[job_id]["lease_owner"]),
            )
            for job_id in (held, sibling, done, later)
            if after[job_id] != before[job_id]
        ]
        expect(
            (got or {}).get("id") == chosen and not changed,
            _(
                "job {chosen} ({key}) claimed at now={now!r}, and only it: jobs {held} (held "
                "by w9), {sibling} (held by w7), {done} (succeeded) and {later} (due in an "
                "hour), whose keys only look alike, left as they were"
            ).format(
                chosen=chosen,
                key=repr(before[chosen]["key"]),
                now=now,
                held=held,
                sibling=sibling,
                done=done,
                later=later,
            ),
            "; ".join(changed) or _ex03_said(got),
            _(
                "UPDATE jobs ... WHERE id = (SELECT id ... LIMIT 1): the id, compared with =, "
                "never a key matched with LIKE, GLOB, lower() or COLLATE NOCASE"
            ),
        )


@CHECKS.add(
    2,
    "each claim leases for the lease_s it is given: a lease_s kept from an earlier call (a "
    "Claimer built once, SQL text made at the first call, a dict by worker) cuts a later "
    "lease short, and a second worker takes a job the first still runs",
    severe=True,
)
def each_claim_leases_for_its_own_lease_s(ns: Namespace) -> None:
    """Three claims on one long-lived connection, each with a lease_s of its own."""
    for seed in scene_seeds():
        rng = _ex03_scene("lease per call", seed)
        now = float(rng.randrange(10_000, 2_000_000_000)) + 0.5
        short, long_, other = rng.choice((5.0, 30.0)), rng.choice((3600.0, 86400.0)), 90.0
        calls = [["w1", now, short], ["w1", now, long_], ["w2", now, other]]
        with lab_file(ns) as (conn, path):
            ids = [add_job(conn, f"mail:{n}:send:v1", run_after=now - 60 + n) for n in (1, 2, 3)]
            got = ns.harness(HARNESS + "on_one_connection", str(path), calls)
            jobs = [_job(conn, job_id) for job_id in ids]
        wrong = [
            raised_text(r)
            if "raised" in r
            else _("job {job_id} leased until {until!r}").format(
                job_id=job["id"], until=job["lease_until"]
            )
            for r, job, (_worker, _now, lease_s) in zip(got, jobs, calls, strict=True)
            if "raised" in r or job["lease_until"] != now + lease_s
        ]
        expect(
            not wrong,
            _(
                "on one connection at now={now!r}, w1 with lease_s={short!r}, w1 with "
                "lease_s={long!r}, w2 with lease_s={other!r}: jobs {ids} leased until now + "
                "the lease_s of the claim that took each"
            ).format(now=now, short=short, long=long_, other=other, ids=ids),
            "; ".join(wrong),
            _(
                "read worker, now and lease_s from each call's arguments; keep none of them "
                "in a global, a cached object or SQL text made once"
            ),
        )


@CHECKS.add(
    2,
    "a claim writes the one job it takes and no other row: a claim that also deletes "
    "finished or dead jobs (the key of a done job is then free, and the same job enqueued "
    "again runs twice; a dead one can never be redriven), renews or puts back the worker's "
    "other leases, or moves any other job, does work that is not its own",
    severe=True,
)
def a_claim_changes_no_other_job(ns: Namespace) -> None:
    for seed in scene_seeds():
        rng = _ex03_scene("other rows", seed)
        now = float(rng.randrange(400_000_000, 2_000_000_000)) + 0.5
        # Done long ago (years): a cleanup that keeps a month or a year of history deletes them.
        old = float(rng.choice((3, 5, 10)) * 365 * 86400)
        worker = rng.choice(_EX03_WORKER_NAMES)
        others = [
            (
                "succeeded",
                {
                    "state": "succeeded",
                    "attempt": 1,
                    "run_after": now - old - 900,
                    "lease_owner": worker,
                    "lease_until": now - old - 800,
                    "lease_token": "done",
                    "updated_at": now - old - 850,
                },
            ),
            (
                "dead",
                {
                    "state": "dead",
                    "attempt": 3,
                    "run_after": now - old - 700,
                    "last_error": "boom",
                    "dead_reason": "max_attempts reached",
                    "updated_at": now - old - 650,
                },
            ),
            (
                "held by this worker",
                {
                    "state": "running",
                    "attempt": 1,
                    "run_after": now - 500,
                    "lease_owner": worker,
                    "lease_until": now + 20,
                    "lease_token": "mine",
                    "updated_at": now - 10,
                },
            ),
            (
                # Leased an hour ago with lease_s=3600: its updated_at is old, its lease runs.
                "held by w9 for an hour, 5 s left",
                {
                    "state": "running",
                    "attempt": 2,
                    "run_after": now - 4000,
                    "lease_owner": "w9",
                    "lease_until": now + 5,
                    "lease_token": "w9",
                    "updated_at": now - 3595,
                },
            ),
            (
                "a retry due later",
                {
                    "state": "retry_wait",
                    "attempt": 1,
                    "run_after": now + 60,
                    "last_error": "timeout",
                    "updated_at": now - 5,
                },
            ),
            ("pending, due later", {"run_after": now + 3600}),
        ]
        rng.shuffle(others)
        with lab_file(ns) as (conn, path):
            what = {
                add_job(conn, f"mail:{n}:send:v1", **fields): name
                for n, (name, fields) in enumerate(others)
            }
            ready = add_job(conn, "mail:ready:send:v1", run_after=now - 1)
            before = {j["id"]: j for j in all_jobs(conn)}
            got = _claim(ns, path, worker, now, 30.0)
            after = {j["id"]: j for j in all_jobs(conn)}
        changed = [
            _("job {job_id} ({what}) deleted").format(job_id=job_id, what=name)
            if job_id not in after
            else _("job {job_id} ({what}) changed: {columns}").format(
                job_id=job_id,
                what=name,
                columns=", ".join(
                    f"{column}={after[job_id][column]!r}"
                    for column in before[job_id]
                    if after[job_id][column] != before[job_id][column]
                ),
            )
            for job_id, name in what.items()
            if after.get(job_id) != before[job_id]
        ]
        expect(
            (got or {}).get("id") == ready and not changed,
            _(
                "{worker} at now={now!r} to claim job {ready} and leave every other row as "
                "it was: {rows}"
            ).format(
                worker=repr(worker),
                now=now,
                ready=ready,
                rows=", ".join(f"{job_id} {name}" for job_id, name in what.items()),
            ),
            "; ".join(changed) or _ex03_said(got),
            _(
                "one UPDATE of the chosen row; deleting old jobs, renewing leases or reaping "
                "expired ones is another function's work, never claim's"
            ),
        )


@CHECKS.add(
    2,
    "now=0.0 (a FakeClock started at 0) is a time like any other: a claim that reads "
    "`now or time.time()` judges it by the wall clock, takes a job not yet due and a "
    "lease that still runs, and two workers run it",
    severe=True,
)
def a_claim_at_time_zero_keeps_time_zero(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        held = add_job(
            conn,
            "mail:1:send:v1",
            state="running",
            attempt=1,
            run_after=0.0,
            lease_owner="w9",
            lease_until=20.0,
            lease_token="live-w9",
            updated_at=0.0,
        )
        due = add_job(conn, "mail:2:send:v1", run_after=0.0)
        add_job(conn, "mail:3:send:v1", run_after=50.0)
        first = _claim(ns, path, "w1", 0.0, 30.0)
        second = _claim(ns, path, "w2", 0.0, 30.0)
        job = _job(conn, held)
    took = first or {}
    expect(
        took.get("id") == due
        and took.get("lease_until") == 30.0
        and took.get("updated_at") == 0.0
        and second is None
        and job["lease_owner"] == "w9",
        _(
            "at now=0.0 (lease_s=30.0): the first claim takes job {due} (due at 0.0) with "
            "lease_until=30.0 and updated_at=0.0, the second returns None: job {held} is "
            "leased to w9 until 20.0 and job 3 is due at 50.0"
        ).format(due=due, held=held),
        _("first: {first}; second: {second}; job {held} leased to {owner}").format(
            first=_ex03_said(first)
            if first is None
            else _("job {job_id}, lease_until={until!r}, updated_at={at!r}").format(
                job_id=took.get("id"), until=took.get("lease_until"), at=took.get("updated_at")
            ),
            second=_ex03_said(second),
            held=held,
            owner=repr(job["lease_owner"]),
        ),
        _(
            "0.0 is a valid now: never write `now or time.time()`; use `now` as it is given "
            "(test `is None` if you want a default)"
        ),
    )
