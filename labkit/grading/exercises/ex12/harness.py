"""Harness for exercise 12: slot keys in another time zone, and schedulers ticking at once.

``keys_in_zone`` computes keys while the process's local time zone is another one, so
a key written in local time shows itself. ``tick`` runs the student's ``tick`` on a
connection the harness opens to a file the check made; ``tick_race`` runs two
schedulers in two forked processes, each with its own connection whose plain reads
pause, ticking the same schedule at skewed moments; ``tick_schedules`` runs two
schedulers in two processes one schedule at a time (``racesweep``: the first stopped
after each of its statements while the second runs whole); ``tick_kills`` kills a
scheduler right after each write of a catch-up and starts it again. ``tick`` takes a
time zone too, so a fire time parsed back from a key as local time shows itself. The
check reads the table itself.
"""

from __future__ import annotations

import sqlite3
from collections.abc import MutableMapping
from contextlib import nullcontext
from functools import partial
from pathlib import Path
from typing import Any

from labkit.grading.exercises.common import fresh_state, outcome
from labkit.grading.exercises.common import on_one_connection as on_one_connection  # checks call it
from labkit.grading.exercises.killsweep import sweep
from labkit.grading.exercises.labdb import connect
from labkit.grading.exercises.racers import in_processes
from labkit.grading.exercises.racesweep import race_sweep
from labkit.grading.exercises.tracing import Watched
from labkit.grading.exercises.wallclock import in_time_zone


def keys_in_zone(values: MutableMapping[str, Any], calls: list[list[Any]], tz: str) -> list[Any]:
    """``slot_key(*call)`` for each call, as outcomes, with the local time zone set to ``tz``."""
    with fresh_state(values), in_time_zone(tz):
        return [outcome(values["slot_key"], *call) for call in calls]


def many(values: MutableMapping[str, Any], name: str, calls: list[list[Any]]) -> list[Any]:
    """``NAME(*call)`` for each call, as outcomes (one round trip for many examples)."""
    with fresh_state(values):
        return [outcome(values[name], *call) for call in calls]


def tick(
    values: MutableMapping[str, Any],
    path: str,
    schedule: str,
    period_s: int,
    since: float,
    now: float,
    catch_up: str,
    tz: str | None = None,
) -> dict[str, Any]:
    """One ``tick`` on a new connection to ``path``: an outcome; with ``tz``, run while
    the process's local time zone is that one."""
    conn = connect(path)
    try:
        with fresh_state(values), in_time_zone(tz) if tz else nullcontext():
            return outcome(values["tick"], Watched(conn), schedule, period_s, since, now, catch_up)
    finally:
        conn.close()


def tick_race(
    values: MutableMapping[str, Any],
    path: str,
    schedule: str,
    period_s: int,
    since: float,
    nows: list[list[float]],
    catch_up: str,
    pause: float,
) -> dict[str, Any]:
    """One forked scheduler per list in ``nows``, each ticking at its own moments.

    Returns ``in_processes``' result: each scheduler's list of created keys, or what
    it raised; plus ``"pauses"``, how many reads were paused (the race was widened).
    """

    def scheduler(index: int) -> dict[str, Any]:
        conn = connect(path)
        watched = Watched(conn, pause=pause)
        created: list[Any] = []
        try:
            for now in nows[index]:
                got = values["tick"](watched, schedule, period_s, since, now, catch_up)
                created.extend(got or [])
        finally:
            conn.close()
        return {"created": created, "pauses": watched.pauses}

    return in_processes(scheduler, len(nows))


def tick_schedules(
    values: MutableMapping[str, Any],
    folder: str,
    schedule: str,
    period_s: int,
    since: float,
    nows: list[float],
    catch_up: str,
    seed: int,
) -> dict[str, Any]:
    """Two schedulers ticking at ``nows[0]`` and ``nows[1]`` in two processes, one
    schedule at a time (see ``racesweep.race_sweep``).

    Each copy returns the keys its ``tick`` reported creating (or raises); the check
    reads ``jobs.db`` in each schedule's folder.
    """

    def scheduler(now: float, where: Path) -> Any:
        conn = connect(where / "jobs.db")
        try:
            return values["tick"](conn, schedule, period_s, since, now, catch_up)
        finally:
            conn.close()

    first, second = (partial(scheduler, now) for now in nows)
    return race_sweep(folder, ["jobs.db"], first, second, seed)


def tick_kills(
    values: MutableMapping[str, Any],
    folder: str,
    schedule: str,
    period_s: int,
    since: float,
    now: float,
    catch_up: str,
    seed: int,
) -> dict[str, Any]:
    """A scheduler killed right after each of its writes while catching up, then restarted.

    The restart is the same ``tick`` at the same moment on ``folder/jobs.db``'s copy, as
    a supervisor starting the scheduler again would run it. See ``killsweep.sweep``.
    """

    def once(life: Path, _tracer: Any) -> Any:
        conn = connect(life / "jobs.db")
        try:
            return values["tick"](conn, schedule, period_s, since, now, catch_up)
        finally:
            conn.close()

    return sweep(folder, ["jobs.db"], once, once, seed)


class _LockedOnce(Watched):
    """A connection whose ``nth`` INSERT raises "database is locked", as a write lock held
    past the busy timeout by another process makes it."""

    def __init__(self, conn: Any, nth: int) -> None:
        super().__init__(conn)
        self.nth = nth
        self.inserts = 0

    def execute(self, sql: str, params: Any = ()) -> Any:
        if sql.lstrip()[:6].upper() == "INSERT":
            self.inserts += 1
            if self.inserts == self.nth:
                raise sqlite3.OperationalError("database is locked")
        return super().execute(sql, params)


def tick_locked_once(
    values: MutableMapping[str, Any],
    path: str,
    schedule: str,
    period_s: int,
    since: float,
    now: float,
    catch_up: str,
    nth: int,
) -> dict[str, Any]:
    """``tick`` whose ``nth`` INSERT meets a lock, then the same tick again on the same
    connection (the scheduler's next loop). Both outcomes; the check reads the table."""
    conn = connect(path)
    try:
        with fresh_state(values):
            args = (schedule, period_s, since, now, catch_up)
            first = outcome(values["tick"], _LockedOnce(conn, nth), *args)
            second = outcome(values["tick"], Watched(conn), *args)
    finally:
        conn.close()
    return {"first": first, "second": second}
