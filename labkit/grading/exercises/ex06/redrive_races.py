"""Exercise 6's checks of a ``redrive`` beside others: two operators at once (also in
two processes, one schedule at a time), a worker claiming meanwhile, no transaction left
open on a long-lived connection, and generated tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from labkit.grading.checks import Namespace, expect
from labkit.grading.exercises.ex06.deadletters import (
    CHECKS,
    HARNESS,
    NOW,
    RACE_PAUSE_S,
    add_dead,
    add_running,
    it_said,
    redrive,
    returned,
    row_of,
)
from labkit.grading.exercises.helpers import expect_left_as_given, holds_for
from labkit.grading.exercises.kit import lab_file, reading
from labkit.grading.exercises.labdb import add_job, all_jobs, lab_db
from labkit.grading.exercises.racesweep import after_every_schedule
from labkit.lang import _


@CHECKS.add(
    3,
    "choose and change in one write transaction: conn.execute('BEGIN IMMEDIATE'), "
    "SELECT the ids, UPDATE them, COMMIT; two operators who both SELECT before "
    "either UPDATEs pick the same jobs and each reports redriving them",
    timeout=40.0,
    severe=True,
)
def two_redrives_at_once_share_nothing(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        redrive(ns, path, limit=1, now=NOW, dry_run=True)  # a stub says "not started yet"
        ids = add_dead(conn, 2)
        results = ns.harness(
            HARNESS + "two_redrives_at_once", str(path), {"limit": 1, "now": NOW}, RACE_PAUSE_S
        )
        a, b = (returned(r, _("both redrives")) for r in results)
        expect(
            isinstance(a, list) and isinstance(b, list) and not set(a) & set(b),
            "two redrives with limit=1 at the same moment to return different jobs",
            _("{first} and {second}").format(first=a, second=b),
        )
        rows = {j["id"]: j for j in all_jobs(conn)}
        expect(
            all(rows[i]["state"] == "pending" and rows[i]["redrives"] == 1 for i in ids),
            _("both dead jobs {ids} pending, each redriven once").format(ids=ids),
            "; ".join(f"job {i}: {rows[i]['state']}, redrives {rows[i]['redrives']}" for i in ids),
        )
    _two_operators_in_two_processes(ns)


def _two_operators_in_two_processes(ns: Namespace) -> None:
    """The same race between two processes, every way one operator can overtake the other."""

    def make(folder: Path) -> None:
        conn = lab_db(folder / "jobs.db")
        add_dead(conn, 2)
        conn.close()

    def judge(folder: Path, run: dict[str, Any]) -> tuple[bool, str]:
        a, b = (run[w]["returned"] for w in ("first", "second"))
        with reading(folder / "jobs.db") as conn:
            rows = all_jobs(conn)
        state = "; ".join(f"job {j['id']}: {j['state']}, redrives {j['redrives']}" for j in rows)
        ok = (
            isinstance(a, list)
            and isinstance(b, list)
            and not set(a) & set(b)
            and all(j["state"] == "pending" and j["redrives"] == 1 for j in rows)
        )
        ended = [run[w]["ended"] for w in ("first", "second")]
        return ok, _("they returned {first} and {second}; {jobs}; the operators {ended}").format(
            first=a, second=b, jobs=state, ended=ended
        )

    after_every_schedule(
        ns,
        HARNESS + "redrive_schedules",
        make,
        [{"limit": 1, "now": NOW}],
        judge,
        _(
            "two redrives with limit=1 in two processes to return different jobs, each "
            "redriven once,"
        ),
        _(
            "choose and change in one BEGIN IMMEDIATE transaction: a lock in Python guards "
            "nothing between two operators' processes"
        ),
        who=_("operator"),
    )


@CHECKS.add(
    2,
    "a job can leave 'dead' between your SELECT and your UPDATE (another operator "
    "redrove it, a worker took it): read and write inside one BEGIN IMMEDIATE "
    "transaction and return only the jobs you changed",
    timeout=20.0,
    severe=True,
)
def redrive_racing_a_worker(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        redrive(ns, path, limit=1, now=NOW, dry_run=True)  # a stub says "not started yet"
        [job_id] = add_dead(conn, 1)
        result = ns.harness(HARNESS + "redrive_while_a_worker_claims", str(path), job_id, NOW)
        ids = returned(result, "redrive(limit=5)")
        job = row_of(conn, job_id)
        if result["worker"] == "in the gap":
            expect(
                job["state"] == "running" and job["lease_token"] == "worker-9-token",
                _(
                    "job {job_id} left with the worker that claimed it while your redrive ran"
                ).format(job_id=job_id),
                _("state={state}, lease_token={token}: the redrive overwrote a running job").format(
                    state=job["state"], token=repr(job["lease_token"])
                ),
            )
            expect(
                job_id not in ids,
                _("job {job_id} not reported as redriven (it was no longer dead)").format(
                    job_id=job_id
                ),
                _("returned {ids}").format(ids=ids),
            )
        else:
            expect(
                ids == [job_id] and job["state"] == "pending",
                _("[{job_id}] returned and the job pending").format(job_id=job_id),
                _("returned {ids}, state {state}").format(ids=ids, state=job["state"]),
            )


def _then_another_writes(
    ns: Namespace,
    path: Path,
    name: str,
    args: list[Any],
    kwargs: dict[str, Any],
    interrupt_after: int | None = None,
) -> tuple[dict[str, Any], str]:
    """The student's ``name(conn, *args, **kwargs)``, then another connection's write
    (the harness's ``then_another_writes``, a Ctrl-C after write ``interrupt_after``
    when given): its result, and the call as the feedback shows it (a job and its token,
    then the keyword arguments)."""
    got = ns.harness(
        HARNESS + "then_another_writes", str(path), name, args, kwargs, interrupt_after
    )
    shown = [f"job {args[0]}", repr(args[1])] if args else []
    return got, f"{name}({', '.join(shown + [f'{k}={v!r}' for k, v in kwargs.items()])})"


@CHECKS.add(
    2,
    "end every path with COMMIT or ROLLBACK (the dry run, a refusal, an error, a Ctrl-C, a "
    "False): conn is in autocommit mode, and while your BEGIN is open no worker can write",
)
def leaves_no_transaction_open(ns: Namespace) -> None:
    error = {"type": "ValueError", "message": "no such customer"}
    with lab_file(ns) as (conn, path):
        redrive(ns, path, limit=1, now=NOW, dry_run=True)  # a stub says "not started yet"
        dead = add_dead(conn, 3)
        job = add_running(conn)
        # The False paths of a dead_letter that SELECTs first, each its own early return:
        # a job gone meanwhile (purged, deleted), and a job that is not running (the last
        # dead one: the redrive below takes the first two).
        falses = {
            job + 1000: _("a job that is gone: no such row"),
            dead[-1]: _("a job that is dead, not running"),
        }
        calls: list[tuple[str, list[Any], dict[str, Any]]] = [
            ("redrive", [], {"limit": 2, "now": NOW, "dry_run": True}),
            ("redrive", [], {"limit": 0, "now": NOW}),
            ("redrive", [], {"limit": 5, "now": NOW, "kind": "no-such-kind"}),
            ("redrive", [], {"limit": 2, "now": NOW}),
            ("dead_letter", [job, "stale-token", "permanent", error, NOW], {}),
            ("dead_letter", [job + 1000, "tok-1", "permanent", error, NOW], {}),
            ("dead_letter", [dead[-1], "tok-1", "permanent", error, NOW], {}),
            ("dead_letter", [job, "tok-1", "permanent", error, NOW], {}),
        ]
        for name, args, kwargs in calls:
            got, call = _then_another_writes(ns, path, name, args, kwargs)
            if args and args[0] in falses:
                call = _("{call} ({which})").format(call=call, which=falses[args[0]])
            expect(
                not got.get("closed"),
                _("the connection {call} was given still open when it is over").format(call=call),
                _("{did}; then the connection was closed").format(did=it_said(got)),
                _(
                    "leave the connection open: it is the caller's (an operator's console, a "
                    "worker's long-lived connection), and its next statement fails on a closed one"
                ),
            )
            then = (
                _(
                    "{did}; then your connection was still inside a transaction and another "
                    "connection's BEGIN IMMEDIATE got {other}"
                )
                if got["open"]
                else _(
                    "{did}; then your connection was not inside a transaction and another "
                    "connection's BEGIN IMMEDIATE got {other}"
                )
            )
            expect(
                not got["open"] and got["other"] == "wrote",
                _(
                    "no transaction left open when {call} is over: another connection can "
                    "write at once"
                ).format(call=call),
                then.format(did=it_said(got), other=got["other"]),
            )
            _keeps_commits_durable(got, call)
            expect(
                "settings" not in got,
                _(
                    "the connection {call} was given handed back with its settings as they "
                    "were: rows read as sqlite3.Row, the same busy timeout"
                ).format(call=call),
                _("{did}; then {settings}").format(
                    did=it_said(got), settings=", ".join(got.get("settings", []))
                ),
                _(
                    "leave conn.row_factory and PRAGMA busy_timeout alone: its owner reads rows "
                    "by column name after your call (row[0] and row['id'] both work on a "
                    "sqlite3.Row), and waits for another's lock as it chose to"
                ),
            )
            expect_left_as_given(
                [got],
                call,
                _(
                    "leave conn.isolation_level alone: open the transaction with BEGIN "
                    "IMMEDIATE and end it with COMMIT or ROLLBACK on every path"
                ),
            )
    # A write that fails (a constraint, a full disk): the error comes out, the
    # transaction does not stay open behind it.
    with lab_file(ns) as (conn, path):
        add_dead(conn, 2)
        job = add_running(conn)
        conn.execute(
            "CREATE TRIGGER refuse BEFORE UPDATE OF state ON jobs "
            "BEGIN SELECT RAISE(ABORT, 'the write failed (a full disk, simulated)'); END"
        )
        failing: list[tuple[str, list[Any], dict[str, Any]]] = [
            ("redrive", [], {"limit": 2, "now": NOW}),
            ("dead_letter", [job, "tok-1", "permanent", error, NOW], {}),
        ]
        for name, args, kwargs in failing:
            got, call = _then_another_writes(ns, path, name, args, kwargs)
            expect(
                not got["open"] and got["other"] == "wrote",
                _(
                    "no transaction left open when {call} is over, its UPDATE having failed: "
                    "ROLLBACK before the error goes on"
                ).format(call=call),
                _("{did}; then your connection was still inside a transaction: {other}").format(
                    did=it_said(got), other=got["other"]
                )
                if got["open"]
                else _("{did}; then another connection's BEGIN IMMEDIATE got {other}").format(
                    did=it_said(got), other=got["other"]
                ),
            )
    # A Ctrl-C (KeyboardInterrupt, which is no Exception) right after the UPDATE, in a
    # process that lives on: rolled back as any error is (except BaseException).
    # The same for dead_letter: a worker's Ctrl-C lands right after its fenced UPDATE.
    interrupted: list[tuple[str, list[Any], dict[str, Any]]] = [
        ("redrive", [], {"limit": 2, "now": NOW}),
        ("dead_letter", [None, "tok-1", "permanent", error, NOW], {}),
    ]
    for name, args, kwargs in interrupted:
        _interrupted_leaves_no_transaction_open(ns, name, args, kwargs)


def _interrupted_leaves_no_transaction_open(
    ns: Namespace, name: str, args: list[Any], kwargs: dict[str, Any]
) -> None:
    with lab_file(ns) as (conn, path):
        add_dead(conn, 2)
        if args:
            args = [add_running(conn), *args[1:]]
        got, call = _then_another_writes(ns, path, name, args, kwargs, 1)
    if got.get("interrupted"):
        expect(
            not got["open"] and got["other"] == "wrote",
            _(
                "no transaction left open when {call} is interrupted (KeyboardInterrupt) "
                "right after its UPDATE: ROLLBACK on any exception, except BaseException"
            ).format(call=call),
            _("then your connection was still inside a transaction: {other}").format(
                other=got["other"]
            )
            if got["open"]
            else _("then another connection's BEGIN IMMEDIATE got {other}").format(
                other=got["other"]
            ),
        )


def _keeps_commits_durable(got: dict[str, Any], call: str) -> None:
    """Fail when ``call`` left its connection under ``PRAGMA synchronous = OFF``."""
    expect(
        got.get("synchronous") != 0,
        _(
            "the connection's PRAGMA synchronous after {call} as it was before (NORMAL or "
            "FULL, never OFF)"
        ).format(call=call),
        _("{did}; then the connection ran under PRAGMA synchronous = OFF").format(did=it_said(got)),
        _(
            "leave PRAGMA synchronous alone on the connection you are given: under OFF, "
            "SQLite hands its writes (yours and every later one of its owner's) to the "
            "operating system without waiting for the disk, so an operating-system crash or "
            "a power cut can lose a redrive or a dead letter already reported done, or damage "
            "the database file"
        ),
    )


#: A generated table: (state, kind, updated_at) per job; times repeat so ties happen.
TABLES = st.lists(
    st.tuples(
        st.sampled_from(["dead", "dead", "pending", "succeeded", "retry_wait"]),
        st.sampled_from(["email", "payment"]),
        st.sampled_from([10.0, 20.0, 30.0, 40.0]),
    ),
    min_size=1,
    max_size=8,
)


@CHECKS.add(
    2,
    "the oldest dead letters first, ties by id (ORDER BY updated_at, id), of the kind "
    "asked for, never more than limit, and nothing else touched",
    timeout=30.0,
)
def redrive_picks_the_oldest_for_any_table(ns: Namespace) -> None:
    def picks(case: tuple[list[tuple[str, str, float]], int, str | None]) -> None:
        table, limit, kind = case
        with lab_file(ns) as (conn, path):
            ids = [
                # Attempts 1, 2, 3 in turn: the oldest is not always the one with the
                # fewest attempts (ORDER BY attempt first would pick another).
                add_job(conn, f"{k}:{i}:v1", kind=k, state=st_, attempt=1 + i % 3, updated_at=t)
                for i, (st_, k, t) in enumerate(table)
            ]
            before = {j["id"]: j for j in all_jobs(conn)}
            dead = [i for i, (st_, k, _t) in zip(ids, table, strict=True) if st_ == "dead"]
            want = sorted(
                (i for i in dead if kind is None or before[i]["kind"] == kind),
                key=lambda i: (before[i]["updated_at"], i),
            )[:limit]
            got = redrive(ns, path, limit=limit, now=NOW, kind=kind)
            after = {j["id"]: j for j in all_jobs(conn)}
        shape = ", ".join(
            f"{i}:{s}/{k}@{t:g} (attempt {before[i]['attempt']})"
            for i, (s, k, t) in zip(ids, table, strict=True)
        )
        expect(
            list(got) == want,
            _("{ids} for limit={limit}, kind={kind} on jobs {shape}").format(
                ids=want, limit=limit, kind=repr(kind), shape=shape
            ),
            _("returned {ids}").format(ids=list(got)),
        )
        changed = sorted(i for i in ids if after[i] != before[i])
        expect(
            changed == sorted(want) and all(after[i]["state"] == "pending" for i in want),
            _("exactly jobs {ids} changed (pending) on jobs {shape}").format(
                ids=sorted(want), shape=shape
            ),
            _("changed: {jobs}").format(jobs=changed),
        )

    # One plain call first: an untouched stub says "not started" at once, instead of
    # Hypothesis spending seconds shrinking its NotImplementedError.
    picks(([("dead", "email", 10.0), ("pending", "email", 20.0)], 1, None))
    # The younger job used fewer attempts: the oldest still comes first.
    picks(([("dead", "email", 20.0), ("dead", "email", 10.0), ("pending", "email", 5.0)], 1, None))
    # A tie between kinds: the lower id first, whatever the key or the kind says.
    picks(([("dead", "payment", 10.0), ("dead", "email", 10.0)], 1, None))
    # A kind is matched as given, capitals and accents included: a redrive that folds the
    # kind's case (lower(), LIKE) or skips non-ASCII kinds picks the wrong job, or none.
    picks(([("dead", "pagamento-ç", 5.0), ("dead", "Pagamento-Ç", 10.0)], 2, "Pagamento-Ç"))
    cases = st.tuples(TABLES, st.integers(1, 4), st.sampled_from([None, "email", "payment"]))
    holds_for(cases, picks, examples=20)
