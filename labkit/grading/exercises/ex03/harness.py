"""Harness for exercise 3: the student's ``claim`` on a database file the check made.

Each call opens its own connection to the file (as a worker would), wrapped in
``Traced``, which records every statement and can pause after plain reads to widen the
gap a read-then-write claim leaves; ``claim_schedules`` races two workers in two
processes, one schedule at a time (``racesweep``); ``claim_in_a_new_process`` runs one
claim in a child forked from the student's process, as a prefork pool starts its
workers; ``claim_meeting_the_write_lock`` runs one claim whose first write meets
another writer's lock; ``on_one_connection`` makes several claims on ONE connection, as
a long-lived worker does, so a transaction a failed claim leaves open shows in the
next. Rows come back as plain dicts; the check reads the table itself to judge.
"""

from __future__ import annotations

import multiprocessing
import queue
import re
import sqlite3
import threading
from collections.abc import MutableMapping
from functools import partial
from pathlib import Path
from typing import Any

from labkit.errors import SimulatedCrash
from labkit.grading.exercises import common
from labkit.grading.exercises.common import begin_refused_once as begin_refused_once
from labkit.grading.exercises.common import fresh_state, need, noted, outcome, plain_row
from labkit.grading.exercises.elsewhere import as_process_one
from labkit.grading.exercises.labdb import add_job, connect
from labkit.grading.exercises.racers import in_a_forked_child
from labkit.grading.exercises.racesweep import race_sweep
from labkit.grading.exercises.replay import cells_run_again
from labkit.grading.exercises.tracing import (
    Traced,
    Watched,
    begins_with_the_lock,
    verb_of,
    with_what_it_left,
)
from labkit.grading.exercises.wallclock import clock_moved, in_time_zone


def claim(
    values: MutableMapping[str, Any],
    path: str,
    worker: str,
    now: float,
    lease_s: float,
) -> dict[str, Any]:
    """One ``claim`` on a new connection: ``{"returned" | "raised"..., "statements": [...]}``."""
    conn = Traced(connect(path))
    result = _claim_on(values, conn, worker, now, lease_s)
    result["statements"] = [s for s in conn.statements if s]
    return result


def _claim_on(
    values: MutableMapping[str, Any], conn: Any, worker: str, now: float, lease_s: float
) -> dict[str, Any]:
    """The student's ``claim`` on ``conn``, which is closed after: its outcome, a row as
    plain data, and ``not_a_dict`` (the type's name) when what it returned was neither
    None nor a dict (a ``sqlite3.Row`` handed back as it came)."""
    student = need(values, "claim")
    kinds: list[str] = []

    def noted_kind(*args: Any) -> Any:
        got = student(*args)
        if got is not None and not isinstance(got, dict):
            kinds.append(type(got).__name__)
        return got

    try:
        with fresh_state(values):
            result = outcome(noted_kind, conn, worker, now, lease_s)
    finally:
        conn.close()
    if "returned" in result:
        result["returned"] = plain_row(result["returned"])
        if kinds:
            result["not_a_dict"] = kinds[0]
    return result


def claim_then_taken_over(
    values: MutableMapping[str, Any], path: str, worker: str, now: float, lease_s: float
) -> dict[str, Any]:
    """One ``claim``; the moment its first change is committed, the worker stalls past its
    lease and another, ``w2``, takes the job over (lease_token ``w2-token``). The claim's
    outcome, and ``"taken"``: whether ``w2`` took a job ``worker`` held."""
    result = common.taken_over_after_its_first_write(
        values,
        "claim",
        path,
        [worker, now, lease_s],
        "UPDATE jobs SET attempt = attempt + 1, lease_owner = 'w2', lease_until = :later + 30,"
        " lease_token = 'w2-token', updated_at = :later"
        " WHERE state = 'running' AND lease_owner = :worker",
        {"worker": worker, "later": now + lease_s},
    )
    if "returned" in result:
        result["returned"] = plain_row(result["returned"])
    return result


def on_one_connection(
    values: MutableMapping[str, Any], path: str, calls: list[list[Any]]
) -> list[dict[str, Any]]:
    """``claim(conn, *args)`` for each of ``calls`` on ONE connection, as a long-lived
    worker claims (``common``): a transaction a failed claim leaves open spoils the next."""
    need(values, "claim")
    return common.on_one_connection(values, "claim", path, calls)


def interrupted_then_again(
    values: MutableMapping[str, Any], path: str, calls: list[list[Any]]
) -> list[dict[str, Any]]:
    """``claim`` on ONE connection, the first call interrupted (a Ctrl-C, which is no
    ``Exception``) right after its first write statement, then the rest (``common``)."""
    need(values, "claim")
    return common.interrupted_then_again(values, "claim", path, calls, 1)


def claim_in_two_databases(
    values: MutableMapping[str, Any], paths: list[str], now: float, lease_s: float
) -> list[dict[str, Any]]:
    """One worker process serving several databases (two tenants' queues, or a test's
    database beside the real one): one ``claim`` on each, in turn, each on its own
    connection, all open together, in one run of the student's module."""
    conns = [Traced(connect(path)) for path in paths]
    try:
        with fresh_state(values):
            results = [outcome(need(values, "claim"), c, "w1", now, lease_s) for c in conns]
    finally:
        for c in conns:
            c.close()
    for result in results:
        if "returned" in result:
            result["returned"] = plain_row(result["returned"])
    return results


def claim_in_time_zone(
    values: MutableMapping[str, Any],
    path: str,
    worker: str,
    now: float,
    lease_s: float,
    tz: str,
) -> dict[str, Any]:
    """``claim`` with the process's local time zone set to ``tz``: ``now`` is epoch
    seconds, the same instant in every zone, so the claim must be the same too."""
    with in_time_zone(tz):
        return claim(values, path, worker, now, lease_s)


def race(
    values: MutableMapping[str, Any],
    path: str,
    workers: int,
    rounds: int,
    now: float,
    lease_s: float,
    pause: float,
) -> dict[str, Any]:
    """``workers`` threads, each with its own paused connection, claim until None.

    Returns ``{"claims": [[worker, job id]...], "errors": [...], "pauses": n}``.
    """
    claims: list[list[Any]] = []
    errors: list[str] = []
    start = threading.Barrier(workers)
    conns = [Traced(connect(path), pause=pause) for _ in range(workers)]

    def work(name: str, own: Traced) -> None:
        start.wait()
        try:
            for _ in range(rounds):
                row = plain_row(need(values, "claim")(own, name, now, lease_s))
                if row is None:
                    return
                claims.append([name, row.get("id") if isinstance(row, dict) else row])
        except Exception as exc:  # noqa: BLE001 - reported as the check's result
            errors.append(f"{name}: {type(exc).__name__}: {str(exc)[:160]}")

    with fresh_state(values):
        threads = [threading.Thread(target=work, args=(f"w{i}", c)) for i, c in enumerate(conns)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    for c in conns:
        c.close()
    return {"claims": claims, "errors": errors, "pauses": sum(c.pauses for c in conns)}


def _process_worker(values: Any, path: str, name: str, out: Any) -> None:
    conn = connect(path)
    got: list[Any] = []
    try:
        for _ in range(100):
            row = plain_row(need(values, "claim")(conn, name, 100.0, 30.0))
            if row is None:
                break
            got.append(row["id"])
    except Exception as exc:  # noqa: BLE001 - reported to the parent
        got.append(f"error: {type(exc).__name__}: {exc}")
    out.put((name, got))


def claim_in_processes(values: MutableMapping[str, Any], path: str, procs: int) -> dict[str, Any]:
    """``procs`` forked processes claim until None; ``{"results": [[name, ids]], "hung": n}``."""
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    children = [
        ctx.Process(target=_process_worker, args=(values, path, f"p{i}", out)) for i in range(procs)
    ]
    for p in children:
        p.start()
    results: list[Any] = []
    try:
        for _ in children:
            results.append(list(out.get(timeout=20)))
    except queue.Empty:
        pass
    finally:
        # A student's loop must not outlive the check.
        for p in children:
            p.join(1)
            if p.is_alive():
                p.kill()
                p.join(5)
    return {"results": results, "hung": procs - len(results)}


def claim_in_a_new_process(
    values: MutableMapping[str, Any], path: str, worker: str, now: float, lease_s: float
) -> dict[str, Any]:
    """One ``claim`` in a child forked from this process (its state as the notebook left it).

    Two calls give two workers that start alike, as the children of one prefork parent
    do: whatever the student's module built at import (a seeded ``random.Random``, a
    counter) starts from the same state in each. Returns what ``claim`` above returns,
    or ``{"hung": True}`` when the child did not answer within 20 s. Each child sees
    itself as process 1, as a worker in a container of its own does: a token built from
    the process id is the same in every one of them.
    """
    return in_a_forked_child(
        lambda: as_process_one(values, partial(claim, values, path, worker, now, lease_s))
    )


def claim_schedules(
    values: MutableMapping[str, Any], folder: str, now: float, lease_s: float, seed: int
) -> dict[str, Any]:
    """Two workers' ``claim`` in two processes, the first stopped after each statement in turn.

    See ``racesweep.race_sweep``; each copy returns the row it claimed (a plain dict) or
    None, and the check reads ``jobs.db`` in each schedule's folder.
    """

    def worker(name: str, where: Path) -> Any:
        conn = connect(where / "jobs.db")
        try:
            return plain_row(need(values, "claim")(conn, name, now, lease_s))
        finally:
            conn.close()

    return race_sweep(folder, ["jobs.db"], partial(worker, "w1"), partial(worker, "w2"), seed)


class _KilledAfterOne(Traced):
    """A connection whose worker is killed (SimulatedCrash) as it starts a second statement."""

    def execute(self, sql: str, params: Any = ()) -> Any:
        if self.statements:
            raise SimulatedCrash("claim", "killed between two statements")
        return super().execute(sql, params)


def claim_killed_after_one_statement(
    values: MutableMapping[str, Any], path: str, worker: str, now: float, lease_s: float
) -> dict[str, Any]:
    """One ``claim`` whose worker dies as it starts its second statement, if it has one.

    A claim in one statement is not touched; one in two leaves what its first statement
    did (each is its own transaction in autocommit mode). Returns ``{"killed": bool,
    "statements": [...]}`` and ``"raised"`` for any other error.
    """
    conn = _KilledAfterOne(connect(path))
    out: dict[str, Any] = {"killed": False}
    try:
        with fresh_state(values), noted(out, "raised", prefix=""):
            try:
                need(values, "claim")(conn, worker, now, lease_s)
            except SimulatedCrash:
                out["killed"] = True
    finally:
        conn.close()
    out["statements"] = [s for s in conn.statements if s]
    return out


def claim_tokens(
    values: MutableMapping[str, Any],
    path: str,
    claims: int,
    now: float,
    lease_s: float,
    redriven: bool = False,
) -> dict[str, Any]:
    """``claims`` claims in a row on one connection, each after the last lease ended.

    The i-th claim runs at ``now + i * (lease_s + 1)``, so the one job of a one-job table
    comes back every time; with ``redriven``, every claim runs at ``now`` itself, each
    after a redrive put the job back (pending, attempt 0, no lease), so that only the
    token's randomness tells one claim from the next. Returns ``{"tokens": [...]}`` (the
    lease_token of each row claim returned, None when it returned None) and ``"raised"``
    for an error, which stops the run.
    """
    conn = connect(path)
    conn.execute("PRAGMA synchronous = OFF")  # thousands of commits: no need to reach the disk
    out: dict[str, Any] = {"tokens": []}
    try:
        with fresh_state(values), noted(out, "raised", prefix=""):
            for i in range(claims):
                at = now if redriven else now + i * (lease_s + 1)
                if redriven:
                    conn.execute(
                        "UPDATE jobs SET state = 'pending', attempt = 0, run_after = 0,"
                        " lease_owner = NULL, lease_until = NULL, lease_token = NULL"
                    )
                row = plain_row(need(values, "claim")(conn, "w1", at, lease_s))
                out["tokens"].append(row.get("lease_token") if isinstance(row, dict) else None)
    finally:
        conn.close()
    return out


#: A statement that writes a row (a comment or a CTE before its verb included), and the
#: verbs that never do.
_EX03_WRITE_WORD = re.compile(r"\b(UPDATE|INSERT|DELETE|REPLACE)\b", re.IGNORECASE)
_EX03_NO_WRITE = ("SELECT", "PRAGMA", "BEGIN", "COMMIT", "END", "ROLLBACK", "SAVEPOINT", "RELEASE")


class _MeetsTheWriteLock(Traced):
    """A connection whose first statement that takes the write lock (a write, or a BEGIN
    IMMEDIATE or EXCLUSIVE) meets it held by another connection, and fails "database is
    locked" at once, as one does once its busy timeout is spent; the other connection
    lets go right after. ``refused``: whether it happened."""

    def __init__(self, conn: sqlite3.Connection, path: str) -> None:
        super().__init__(conn)
        self._path = path
        self.refused = False

    def execute(self, sql: str, params: Any = ()) -> Any:
        writes = verb_of(sql) not in _EX03_NO_WRITE and bool(_EX03_WRITE_WORD.search(sql))
        if self.refused or not (writes or begins_with_the_lock(sql)):
            return super().execute(sql, params)
        timeout = self._conn.execute("PRAGMA busy_timeout").fetchone()[0]
        holder = sqlite3.connect(self._path, timeout=0, isolation_level=None)
        try:
            try:
                holder.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError:
                return super().execute(sql, params)  # the code holds the lock already
            self.refused = True
            self._conn.execute("PRAGMA busy_timeout = 0")
            return super().execute(sql, params)
        finally:
            if holder.in_transaction:
                holder.execute("ROLLBACK")
            holder.close()
            self._conn.execute(f"PRAGMA busy_timeout = {int(timeout)}")


def claim_meeting_the_write_lock(
    values: MutableMapping[str, Any], path: str, worker: str, now: float, lease_s: float
) -> dict[str, Any]:
    """One ``claim`` on a new connection whose first write (or BEGIN IMMEDIATE) finds
    another writer holding the lock, "database is locked" at once; the other lets go
    right after, so a claim that tries again gets through. Returns ``claim``'s outcome
    and ``"refused"``: whether a statement met the lock."""
    conn = _MeetsTheWriteLock(connect(path), path)
    result = _claim_on(values, conn, worker, now, lease_s)
    result["refused"] = conn.refused
    return result


def claim_tokens_in_one_tick(
    values: MutableMapping[str, Any], path: str, claims: int, now: float, lease_s: float
) -> dict[str, Any]:
    """``claim_tokens`` with ``redriven``, every claim within one tick of the machine's
    clocks: ``time.time``, ``time_ns``, ``monotonic``, ``perf_counter`` and
    ``clock_gettime`` (and their ``_ns`` twins) read the same instant at every call, as
    a coarse clock (15 ms on some hosts, a VM's, one stepped back by NTP) does for claims
    that follow each other fast, and so does ``datetime.now()``. A token drawn from
    randomness is untouched; one made of the time repeats. The names the student bound
    by import (``from time import time_ns``, ``from datetime import datetime``) read it
    too."""
    with clock_moved(values, 0.0, datetime_module=True, stopped=True):
        return claim_tokens(values, path, claims, now, lease_s, redriven=True)


def claim_in_a_worker_started_anew(
    values: MutableMapping[str, Any], path: str, worker: str, now: float, lease_s: float
) -> dict[str, Any]:
    """One ``claim`` in a worker started anew, not forked: its namespace built again from
    the cells (``replay.cells_run_again``), as a worker process started on its own (or
    restarted) imports its module, so what the module does at import (``random.seed(42)``,
    a counter started at 0) is done again in each. ``claim``'s outcome, or ``{"no cells":
    True}`` when the namespace does not know its cells (``check()`` in Jupyter)."""
    with cells_run_again(values) as again:
        if again is None or not callable(again.get("claim")):
            return {"no cells": True}
        return claim(again, path, worker, now, lease_s)


def on_one_connection_fed(
    values: MutableMapping[str, Any],
    path: str,
    calls: list[list[Any]],
    enqueued: list[list[dict[str, Any]]],
) -> dict[str, Any]:
    """``on_one_connection``, a producer adding the jobs ``enqueued[i]`` (``add_job``'s
    keyword arguments) on a connection of its own right before call ``i``, while the
    worker's connection lives on. ``{"results": [outcome...], "added": [[job id...]...]}``."""
    need(values, "claim")
    conn, producer = connect(path), connect(path)
    results: list[dict[str, Any]] = []
    added: list[list[int]] = []
    try:
        with fresh_state(values):
            kept = Watched(conn)  # one connection object for every call, as a worker keeps it
            for args, jobs in zip(calls, enqueued, strict=True):
                added.append([add_job(producer, **job) for job in jobs])
                got = outcome(values["claim"], kept, *args)
                results.append(with_what_it_left(got, conn))
    finally:
        producer.close()
        conn.close()
    for result in results:
        if "returned" in result:
            result["returned"] = plain_row(result["returned"])
    return {"results": results, "added": added}
