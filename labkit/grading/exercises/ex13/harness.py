"""Harness for exercise 13: the student's claims on a file the check made, alone or racing.

``claim`` runs one ``claim_capped`` or ``claim_serial`` on a new connection (as a
worker would open it). ``race`` runs several forked workers, each with its own
connection whose plain reads pause, claiming until nothing is left: a claim that
counts in one statement and takes in another lets two workers pass the same count.
``claim_schedules`` races two workers one schedule at a time (``racesweep``).
``claim_in_a_forked_worker`` runs one claim in a child forked from the student's
process, as a prefork pool starts its workers.
``claim_in_time_zone`` runs one claim under another local time zone.
``claim_limits_scaled`` runs one claim with every LIMIT past ``SCALED_LIMIT`` rows
scaled down to it, for the backlog scenes.
``claim_while_the_old_holder_finishes`` lets a job's old holder finish it, fenced on its
token, right after the claim's first committed write.
``claim_kills`` kills one claim right after each of its writes (``killsweep``).
``claim_with_a_take_after_its_read`` lets another worker take a job right after the
claim's first plain read, before the claim wrote anything: a claim that picks in one
statement and takes in another must still hold the cap (or the head) at its write.
``on_one_connection`` makes several claims on ONE connection, as a long-lived worker
does, the same connection object in every call: a transaction a claim leaves open, or
state it keeps per ``id(conn)``, shows in the next. Rows come back as plain dicts; the
check reads the table itself to judge.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from functools import partial
from pathlib import Path
from typing import Any

from labkit.grading.exercises import common
from labkit.grading.exercises.common import fresh_state, outcome, plain_row
from labkit.grading.exercises.elsewhere import as_process_one
from labkit.grading.exercises.killsweep import sweep
from labkit.grading.exercises.labdb import add_job, connect
from labkit.grading.exercises.limits import LimitsSeen
from labkit.grading.exercises.racers import in_a_forked_child, in_processes
from labkit.grading.exercises.racesweep import race_sweep
from labkit.grading.exercises.tracing import Rows, Traced, Watched, WriteLock, verb_of
from labkit.grading.exercises.wallclock import in_time_zone

CLAIMS = ("claim_capped", "claim_serial")


def claim(
    values: MutableMapping[str, Any],
    path: str,
    name: str,
    worker: str,
    now: float,
    lease_s: float,
    *extra: Any,
) -> dict[str, Any]:
    """One ``NAME(conn, worker, now, lease_s, *extra)`` on a new connection: an outcome."""
    if name not in CLAIMS:
        raise ValueError(f"no claim called {name!r}")
    conn = connect(path)
    try:
        with fresh_state(values):
            return outcome(values[name], Watched(conn), worker, now, lease_s, *extra)
    finally:
        conn.close()


#: A LIMIT above this many rows runs as this many in ``claim_limits_scaled``: fewer than
#: the 1100 to 1400 jobs (or queues) of the backlog scenes.
SCALED_LIMIT = 1000


def claim_limits_scaled(
    values: MutableMapping[str, Any],
    path: str,
    name: str,
    worker: str,
    now: float,
    lease_s: float,
    *extra: Any,
) -> dict[str, Any]:
    """``claim``, every LIMIT (or ``fetchmany``) above ``SCALED_LIMIT`` rows run as
    ``SCALED_LIMIT`` (``limits.LimitsSeen``): the outcome, and under ``scaled`` the
    values so changed. A claim that sorts at most 5000 candidates (or heads) hides a job
    behind a backlog of 5001, too slow to build for every claim; scaled down, the check's
    backlog of 1100 to 1400 hides it all the same."""
    if name not in CLAIMS:
        raise ValueError(f"no claim called {name!r}")
    conn = connect(path)
    watched = LimitsSeen(conn, SCALED_LIMIT, SCALED_LIMIT)
    try:
        with fresh_state(values):
            got = outcome(values[name], watched, worker, now, lease_s, *extra)
    finally:
        conn.close()
    return {**got, "scaled": watched.scaled}


def claim_in_time_zone(
    values: MutableMapping[str, Any],
    path: str,
    name: str,
    worker: str,
    now: float,
    lease_s: float,
    tz: str,
    *extra: Any,
) -> dict[str, Any]:
    """``claim`` with the process's local time zone set to ``tz``: ``now`` is epoch
    seconds, the same instant in every zone, so the claim must be the same too."""
    with in_time_zone(tz):
        return claim(values, path, name, worker, now, lease_s, *extra)


def claim_in_each_database(
    values: MutableMapping[str, Any],
    paths: list[str],
    name: str,
    worker: str,
    now: float,
    lease_s: float,
    *extra: Any,
) -> list[dict[str, Any]]:
    """``NAME(conn, worker, now, lease_s, *extra)`` once on each of ``paths``, in ONE process.

    Each on its own connection, closed after its claim (a worker that reconnects, or
    two job databases): a claim that keeps the first connection it was given (in a
    module global) claims from the first database again, or on a closed connection.
    The student's module state lives on between the calls. Each outcome.
    """
    if name not in CLAIMS:
        raise ValueError(f"no claim called {name!r}")
    got: list[dict[str, Any]] = []
    with fresh_state(values):
        for path in paths:
            conn = connect(path)
            try:
                got.append(outcome(values[name], Watched(conn), worker, now, lease_s, *extra))
            finally:
                conn.close()
    return got


def claim_in_a_forked_worker(
    values: MutableMapping[str, Any],
    path: str,
    name: str,
    worker: str,
    now: float,
    lease_s: float,
    *extra: Any,
) -> dict[str, Any]:
    """``claim`` above in a child forked from this process (its state as the notebook left it).

    Two calls give two workers that start alike, as the children of one prefork parent
    do: whatever the student's module built at import (a seeded ``random.Random``, a
    counter) starts from the same state in each. SQLite's own generator does not: a child
    that opens a database file reseeds it. Each child is process 1, as in a container of
    its own (``elsewhere.as_process_one``). ``claim``'s outcome, or ``{"hung": True}``.
    """
    return in_a_forked_child(
        lambda: as_process_one(
            values, lambda: claim(values, path, name, worker, now, lease_s, *extra)
        )
    )


def on_one_connection(
    values: MutableMapping[str, Any], name: str, path: str, calls: list[list[Any]]
) -> list[dict[str, Any]]:
    """``NAME(conn, *args)`` for each of ``calls`` on one connection (``common``)."""
    if name not in CLAIMS:
        raise ValueError(f"no claim called {name!r}")
    return common.on_one_connection(values, name, path, calls)


def claim_returned_type(
    values: MutableMapping[str, Any],
    path: str,
    name: str,
    worker: str,
    now: float,
    lease_s: float,
    *extra: Any,
) -> dict[str, Any]:
    """One claim on a new connection, as ``claim``; with ``type`` the name of the type it
    returned and ``is_dict`` whether that is a dict (a ``sqlite3.Row`` is not)."""
    if name not in CLAIMS:
        raise ValueError(f"no claim called {name!r}")
    conn = connect(path)
    kept: list[Any] = []

    def kept_returned(*args: Any) -> Any:
        kept.append(values[name](*args))
        return kept[-1]

    try:
        with fresh_state(values):
            got = outcome(kept_returned, Watched(conn), worker, now, lease_s, *extra)
    finally:
        conn.close()
    if kept:
        got["type"] = type(kept[0]).__name__
        got["is_dict"] = isinstance(kept[0], dict)
    return got


def claims_as_jobs_arrive(
    values: MutableMapping[str, Any], name: str, path: str, steps: list[list[Any]]
) -> list[dict[str, Any]]:
    """Claims on ONE connection object, as a long-lived worker makes them, with jobs added
    (on a connection of the harness's own) before each: ``steps`` is a list of ``[jobs,
    args]``, each job a dict of ``add_job`` fields with its ``key``, and ``NAME(conn,
    *args)`` after them. A claim that keeps what it read of the table between calls (the
    accounts, the queues) never serves one that came later. Outcomes as ``claim``'s."""
    if name not in CLAIMS:
        raise ValueError(f"no claim called {name!r}")
    conn, other = connect(path), connect(path)
    try:
        with fresh_state(values):
            kept = Watched(conn)
            got = []
            for jobs, args in steps:
                for fields in jobs:
                    add_job(other, fields["key"], **{k: v for k, v in fields.items() if k != "key"})
                got.append(outcome(values[name], kept, *args))
            return got
    finally:
        conn.close()
        other.close()


def race(
    values: MutableMapping[str, Any],
    path: str,
    name: str,
    workers: int,
    now: float,
    lease_s: float,
    extra: list[Any],
    pause: float,
) -> dict[str, Any]:
    """``workers`` forked processes claim with ``NAME`` until None (at most 50 each).

    Returns ``in_processes``' result, each worker's value being the ids it claimed.
    """
    if name not in CLAIMS:
        raise ValueError(f"no claim called {name!r}")

    def worker(index: int) -> list[Any]:
        conn = connect(path)
        watched = Watched(conn, pause=pause)
        ids: list[Any] = []
        try:
            for _ in range(50):
                row = plain_row(values[name](watched, f"w{index}", now, lease_s, *extra))
                if row is None:
                    break
                ids.append(row.get("id") if isinstance(row, dict) else row)
        finally:
            conn.close()
        return ids

    return in_processes(worker, workers)


def claim_schedules(
    values: MutableMapping[str, Any],
    folder: str,
    name: str,
    now: float,
    lease_s: float,
    extra: list[Any],
    seed: int,
) -> dict[str, Any]:
    """Two workers' ``NAME`` in two processes, one schedule at a time (``racesweep``).

    Each copy returns the row it claimed (a plain dict) or None; the check reads
    ``jobs.db`` in each schedule's folder.
    """
    if name not in CLAIMS:
        raise ValueError(f"no claim called {name!r}")

    def worker(who: str, where: Path) -> Any:
        return _claimed_on(values, name, where / "jobs.db", [who, now, lease_s, *extra])

    return race_sweep(folder, ["jobs.db"], partial(worker, "w1"), partial(worker, "w2"), seed)


def _claimed_on(values: MutableMapping[str, Any], name: str, db: Path, args: list[Any]) -> Any:
    """``NAME(conn, *args)`` on a connection of its own to ``db``: the row it claimed, as
    plain data, or None."""
    conn = connect(db)
    try:
        return plain_row(values[name](conn, *args))
    finally:
        conn.close()


#: The lease_token the old holder of a job keeps in ``claim_while_the_old_holder_finishes``.
OLD_TOKEN = "old-holder-token"


def claim_while_the_old_holder_finishes(
    values: MutableMapping[str, Any],
    path: str,
    name: str,
    worker: str,
    now: float,
    lease_s: float,
    job_id: int,
    *extra: Any,
) -> dict[str, Any]:
    """One ``NAME(conn, worker, now, lease_s, *extra)`` on a new connection; the moment its
    first change is committed (``common.taken_over_after_its_first_write``), the job's old
    holder, whose lease ended but who still ran it, finishes job ``job_id``, fenced on its
    token ``OLD_TOKEN`` as exercise 3's complete is. The outcome (a row as plain data),
    and ``"taken"``: whether that fenced write still landed."""
    if name not in CLAIMS:
        raise ValueError(f"no claim called {name!r}")
    result = common.taken_over_after_its_first_write(
        values,
        name,
        path,
        [worker, now, lease_s, *extra],
        "UPDATE jobs SET state = 'succeeded', updated_at = :now"
        " WHERE id = :id AND state = 'running' AND lease_token = :token",
        {"id": job_id, "now": now, "token": OLD_TOKEN},
    )
    if "returned" in result:
        result["returned"] = plain_row(result["returned"])
    return result


def claim_kills(
    values: MutableMapping[str, Any],
    folder: str,
    name: str,
    worker: str,
    now: float,
    lease_s: float,
    extra: list[Any],
    seed: int,
) -> dict[str, Any]:
    """One ``NAME(conn, worker, now, lease_s, *extra)`` on ``folder/jobs.db``'s copy,
    killed right after each of its writes (``killsweep.sweep``). Nothing restarts: the
    worker is gone, and the check reads what its claim left in the table."""
    if name not in CLAIMS:
        raise ValueError(f"no claim called {name!r}")

    def once(life: Path, _tracer: Any) -> Any:
        return _claimed_on(values, name, life / "jobs.db", [worker, now, lease_s, *extra])

    def gone(_life: Path, _tracer: Any) -> None:
        return None

    return sweep(folder, ["jobs.db"], once, gone, seed)


class _ActsAfterItsFirstRead(Traced):
    """``Traced`` that lets another party act once, right after the first plain read (a
    SELECT made without the write lock) that comes before the call's first change. A
    claim that takes in one statement, or reads under BEGIN IMMEDIATE, never lets it act."""

    def __init__(self, conn: Any, then: Callable[[], None]) -> None:
        super().__init__(conn, pause=0.0)
        self.then: Callable[[], None] | None = then
        self._changes = conn.total_changes
        self._reads = WriteLock()

    def execute(self, sql: str, params: Any = ()) -> Any:
        plain = self._reads.plain_read(self._conn, sql) and verb_of(sql) == "SELECT"
        cursor = super().execute(sql, params)
        if not (plain and self.then is not None and self._conn.total_changes == self._changes):
            return cursor
        rows = cursor.fetchall()  # read to its end: the read is over before the other acts
        then, self.then = self.then, None
        then()
        return Rows(rows, cursor.rowcount, cursor.lastrowid, description=cursor.description)


def claim_with_a_take_after_its_read(
    values: MutableMapping[str, Any],
    path: str,
    name: str,
    worker: str,
    now: float,
    lease_s: float,
    write: str,
    params: dict[str, Any],
    *extra: Any,
) -> dict[str, Any]:
    """One ``NAME(conn, worker, now, lease_s, *extra)`` on a new connection; right after its
    first plain read made before any change of its own, another worker runs ``write``
    (with ``params``) on a connection of its own, as a worker whose claim lands between
    the read and the write does. The outcome (a row as plain data), and ``"acted"``:
    whether ``write`` ran and changed a row."""
    if name not in CLAIMS:
        raise ValueError(f"no claim called {name!r}")
    acted: list[bool] = []

    def other() -> None:
        conn = connect(path, timeout=2.0)
        try:
            acted.append(conn.execute(write, params).rowcount > 0)
        finally:
            conn.close()

    conn = _ActsAfterItsFirstRead(connect(path), other)
    try:
        with fresh_state(values):
            result = outcome(values[name], conn, worker, now, lease_s, *extra)
    finally:
        conn.close()
    if "returned" in result:
        result["returned"] = plain_row(result["returned"])
    result["acted"] = bool(acted and acted[0])
    return result
