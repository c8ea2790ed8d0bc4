"""Harness for exercise 12: slot keys in another time zone, and schedulers ticking at once.

``keys_in_zone`` computes keys while the process's local time zone is another one, in a
namespace whose cells ran again in that zone, so a key written in local time shows
itself, even in a zone read once at import. The long outages (``tick_in_memory``,
``tick_head``, ``ints_written_in``) are in ``outage``, imported here for the checks.
``tick`` runs the student's ``tick`` on a connection the harness opens to a file the
check made; ``tick_race`` runs two schedulers in two forked processes, each with its own
connection whose plain reads pause, ticking the same schedule at skewed moments;
``tick_schedules`` runs two schedulers in two processes one schedule at a time
(``racesweep``: the first stopped after each of its statements while the second runs
whole); ``tick_kills`` kills a scheduler right after each write of a catch-up and starts
it again. ``tick`` takes a time zone too (the cells run again in it), so a fire time
parsed back from a key as local time shows itself. The check reads the table itself.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from labkit.grading.exercises.common import begin_refused_once as begin_refused_once  # checks
from labkit.grading.exercises.common import fresh_state, outcome
from labkit.grading.exercises.common import interrupted_then_again as _interrupted_then_again
from labkit.grading.exercises.common import on_one_connection as on_one_connection  # checks call it
from labkit.grading.exercises.ex12.outage import BOUNDED_HEADROOM as BOUNDED_HEADROOM
from labkit.grading.exercises.ex12.outage import due_slots_bounded as due_slots_bounded
from labkit.grading.exercises.ex12.outage import due_slots_span as due_slots_span
from labkit.grading.exercises.ex12.outage import ints_written_in as ints_written_in
from labkit.grading.exercises.ex12.outage import tick_head as tick_head
from labkit.grading.exercises.ex12.outage import tick_in_memory as tick_in_memory
from labkit.grading.exercises.ex12.outage import tick_latest_bounded as tick_latest_bounded
from labkit.grading.exercises.killsweep import sweep
from labkit.grading.exercises.labdb import add_job, connect, lab_db
from labkit.grading.exercises.racers import in_processes
from labkit.grading.exercises.racesweep import race_sweep
from labkit.grading.exercises.replay import cells_run_again
from labkit.grading.exercises.tracing import WRITES, Impatient, Watched, verb_of
from labkit.grading.exercises.wallclock import in_time_zone
from labkit.lang import _
from labkit.patterns.schedule import slot_key as reference_key


@contextmanager
def _imported_in_zone(values: MutableMapping[str, Any], tz: str) -> Iterator[Mapping[str, Any]]:
    """The namespace a scheduler started in time zone ``tz`` runs: the cells run again
    there (``replay.cells_run_again``), so a zone the module read at import (``LOCAL =
    datetime.now().astimezone().tzinfo``) is that machine's, and the block runs in ``tz``
    too. Without the cells (``check()`` in Jupyter, where the module was imported in the
    student's own zone), the notebook's names with the zone set for the block."""
    with cells_run_again(values, partial(in_time_zone, tz)) as again:
        if again is not None:
            yield again
            return
    with fresh_state(values), in_time_zone(tz):
        yield values


def keys_in_zone(values: MutableMapping[str, Any], calls: list[list[Any]], tz: str) -> list[Any]:
    """``slot_key(*call)`` for each call, as outcomes, in a namespace imported (and run)
    with the local time zone set to ``tz``."""
    with _imported_in_zone(values, tz) as names:
        return [outcome(names["slot_key"], *call) for call in calls]


def many_in_zone(
    values: MutableMapping[str, Any], name: str, calls: list[list[Any]], tz: str
) -> list[Any]:
    """``NAME(*call)`` for each call, as outcomes, in a namespace imported (and run) with
    the local time zone set to ``tz``."""
    with _imported_in_zone(values, tz) as names:
        return [outcome(names[name], *call) for call in calls]


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
    """One ``tick`` on a new connection to ``path``: an outcome; with ``tz``, in a namespace
    imported and run while the process's local time zone is that one."""
    conn = connect(path)
    try:
        if tz:
            with _imported_in_zone(values, tz) as names:
                return outcome(
                    names["tick"], Watched(conn), schedule, period_s, since, now, catch_up
                )
        with fresh_state(values):
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

    Each copy returns the keys its ``tick`` reported creating (or raises, also when the
    tick returned with a transaction still open); the check reads ``jobs.db`` in each
    schedule's folder.
    """

    def scheduler(now: float, where: Path) -> Any:
        conn = connect(where / "jobs.db")
        try:
            created = values["tick"](conn, schedule, period_s, since, now, catch_up)
            if conn.in_transaction:
                # The scheduler's long-lived connection: the write lock held, its next
                # tick fails. Closing it here would roll the transaction back unseen.
                raise RuntimeError(
                    _("tick returned {created} with a transaction still open").format(
                        created=repr(created)
                    )
                )
            return created
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


def tick_beside_another(
    values: MutableMapping[str, Any],
    path: str,
    schedule: str,
    period_s: int,
    since: float,
    nows: list[float],
    fired: float,
) -> list[dict[str, Any]]:
    """Four ticks (``catch_up="all"``) of one scheduler in one process, at ``nows[0]``,
    ``nows[1]`` and ``nows[2]``; after the first, another scheduler fires the slot
    ``fired`` alone (a 'latest' catch-up). The second tick runs on the same connection
    (and the same object) as the first, as a scheduler's long-lived connection; before the
    third it reconnects (its first connection closed); the fourth ticks at ``nows[2]`` on
    another table of the same folder, where nothing fired. The four outcomes: a scheduler
    that remembers what it fired, or caches what it read per connection, instead of
    reading the table, fills the gap the other left, or finds nothing due on the other
    table (a memory taken as max(memory, table)); one that keeps its first connection
    fails on the new one."""
    args = (schedule, period_s, since)
    with fresh_state(values):
        conn = connect(path)
        try:
            watched = Watched(conn)
            first = outcome(values["tick"], watched, *args, nows[0], "all")
            add_job(conn, reference_key(schedule, fired), kind=schedule, run_after=fired)
            second = outcome(values["tick"], watched, *args, nows[1], "all")
        finally:
            conn.close()
        conn = connect(path)
        try:
            third = outcome(values["tick"], Watched(conn), *args, nows[2], "all")
        finally:
            conn.close()
        # The same process then ticks the schedule on another table (another tenant's, or
        # the first one restored empty), where nothing fired: what this process fired on
        # the first is no part of it.
        other = Path(path).with_name("other.db")
        conn = lab_db(other)
        try:
            fourth = outcome(values["tick"], Watched(conn), *args, nows[2], "all")
        finally:
            conn.close()
    return [first, second, third, fourth]


def tick_across_a_restore(
    values: MutableMapping[str, Any],
    path: str,
    schedule: str,
    period_s: int,
    since: float,
    nows: list[float],
    kept: float,
) -> list[dict[str, Any]]:
    """Two ticks (``catch_up="all"``) of one scheduler on one long-lived connection, at
    ``nows[0]`` and ``nows[1]``; between them the table is restored from a backup taken
    before the jobs of the slots after ``kept`` were inserted (their rows deleted, on
    another connection). A scheduler that caches what it fired per connection (a TEMP
    table, an attribute) or per process finds nothing missed and loses those slots."""
    args = (schedule, period_s, since)
    with fresh_state(values):
        conn = connect(path)
        try:
            watched = Watched(conn)
            first = outcome(values["tick"], watched, *args, nows[0], "all")
            other = connect(path)
            try:
                prefix = f"schedule:{schedule}:"  # by key: kind and run_after are the tick's
                other.execute(
                    "DELETE FROM jobs WHERE substr(key, 1, ?) = ? AND key > ?",
                    (len(prefix), prefix, reference_key(schedule, kept)),
                )
            except sqlite3.OperationalError:
                pass  # a tick that left its transaction open: other checks say so
            finally:
                other.close()
            second = outcome(values["tick"], watched, *args, nows[1], "all")
        finally:
            conn.close()
    return [first, second]


class _LockedOnce(Watched):
    """A connection whose ``nth`` INSERT, and the ``times - 1`` INSERTs after it, raise
    "database is locked", as a write lock held past the busy timeout by another process
    makes it (a lock held that long outlasts a retry or two)."""

    def __init__(self, conn: Any, nth: int, times: int = 1) -> None:
        super().__init__(conn)
        self.nth = nth
        self.times = times
        self.inserts = 0

    def execute(self, sql: str, params: Any = ()) -> Any:
        if sql.lstrip()[:6].upper() == "INSERT":
            self.inserts += 1
            if self.nth <= self.inserts < self.nth + self.times:
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
    times: int = 1,
) -> dict[str, Any]:
    """``tick`` whose ``nth`` INSERT (and the ``times - 1`` after it) meets a lock, then
    the same tick again on the same connection (the scheduler's next loop). Both
    outcomes; the check reads the table."""
    conn = connect(path)
    try:
        with fresh_state(values):
            args = (schedule, period_s, since, now, catch_up)
            first = outcome(values["tick"], _LockedOnce(conn, nth, times), *args)
            second = outcome(values["tick"], Watched(conn), *args)
    finally:
        conn.close()
    return {"first": first, "second": second}


class _OtherTicksFirst(Watched):
    """A connection on which, just before this scheduler's first write, another scheduler
    runs a whole tick of its own (``other``): both read the table before either inserted."""

    def __init__(self, conn: sqlite3.Connection, other: Any) -> None:
        super().__init__(conn)
        self.other = other

    def execute(self, sql: str, params: Any = ()) -> Any:
        if self.other is not None and verb_of(sql) in WRITES:
            other, self.other = self.other, None
            other()
        return super().execute(sql, params)


def tick_at_the_same_now(
    values: MutableMapping[str, Any],
    path: str,
    schedule: str,
    period_s: int,
    since: float,
    now: float,
) -> list[dict[str, Any]]:
    """Two schedulers tick at the same ``now`` (clocks that agree to the second), each on
    its own connection: the second's whole tick runs between the first's reads and its
    first write. A first tick that holds a write lock by then (BEGIN IMMEDIATE) keeps the
    second out (it answers 'database is locked' at once); the second then ticks after it.
    The two outcomes, the first scheduler's then the second's.

    The second is another process: it runs in a namespace of its own, the cells run again
    (``replay.cells_run_again``), so a lock the first holds in its module (a
    ``threading.Lock`` around a tick, harmless between two processes) is not the second's.
    """
    return tick_while_another_ticks(values, path, schedule, period_s, since, now, now)


def tick_while_another_ticks(
    values: MutableMapping[str, Any],
    path: str,
    schedule: str,
    period_s: int,
    since: float,
    now: float,
    other_now: float,
) -> list[dict[str, Any]]:
    """``tick_at_the_same_now``, the second scheduler ticking at ``other_now``: with
    ``now`` just past a slot and ``other_now`` just before it, the first has read what
    fired (nothing newer than the slot before), the second then enqueues every slot but
    the newest, and the first meets the second's keys before the newest slot, its own."""
    args = (schedule, period_s, since, now, "all")
    other_args = (schedule, period_s, since, other_now, "all")
    second: dict[str, Any] = {}
    with cells_run_again(values) as again:
        return _tick_at_the_same_now(values, again or values, path, args, other_args, second)


def _tick_at_the_same_now(
    values: MutableMapping[str, Any],
    elsewhere: Mapping[str, Any],
    path: str,
    args: tuple[Any, ...],
    other_args: tuple[Any, ...],
    second: dict[str, Any],
) -> list[dict[str, Any]]:
    """``tick_while_another_ticks``, the second scheduler's names in ``elsewhere``."""

    def other() -> None:
        conn = connect(path, timeout=0.05)  # a lock held: 'database is locked' at once
        try:
            second.update(outcome(elsewhere["tick"], Impatient(conn), *other_args))
        finally:
            conn.close()

    with fresh_state(values):
        conn = connect(path)
        try:
            watched = _OtherTicksFirst(conn, other)
            first = outcome(values["tick"], watched, *args)
        finally:
            conn.close()
        if not second or "locked" in str(second.get("message", "")):
            second.clear()
            other()
    return [first, second]


def tick_another_schedule_meanwhile(
    values: MutableMapping[str, Any],
    path: str,
    schedules: tuple[str, str],
    period_s: int,
    since: float,
    now: float,
) -> list[dict[str, Any]]:
    """Two schedules of one scheduler process, each ticked by a thread of its own: the
    second schedule's whole tick starts, in another thread and on its own connection,
    between the first's reads and its first write (the same module, so a lock the first
    holds in it is held for the second too). The first waits 3 s for it, then goes on;
    a second that waits for a lock the first holds (of the module, or the database's
    after BEGIN IMMEDIATE) goes on when the first is done. The two outcomes, the first
    schedule's then the second's."""
    second: dict[str, Any] = {}

    def ticked() -> None:
        conn = connect(path)  # another thread holds the lock, and lets it go
        try:
            second.update(outcome(values["tick"], conn, schedules[1], period_s, since, now, "all"))
        finally:
            conn.close()

    threads: list[threading.Thread] = []

    def other() -> None:
        threads.append(threading.Thread(target=ticked, daemon=True))
        threads[0].start()
        # A lock the first holds: the second waits for it, not forever. Held 3 s, longer
        # than the 0.5 to 2 s a tick that gives up on the lock waits (acquire(timeout=1)
        # then returns []): its schedule's slots wait for a later tick. A second that
        # waits on nothing of the first's is done at once, and the first goes on then.
        threads[0].join(3.0)

    with fresh_state(values):
        conn = connect(path)
        try:
            watched = _OtherTicksFirst(conn, other)
            first = outcome(values["tick"], watched, schedules[0], period_s, since, now, "all")
        finally:
            conn.close()
        for thread in threads:
            thread.join(30)
        if not threads:
            ticked()  # the first tick wrote nothing: the second ticks after it
    if not second:
        second = {"raised": ["TimeoutError"], "message": _("still ticking after 30 s")}
    return [first, second]


def tick_interrupted_then_again(
    values: MutableMapping[str, Any], path: str, calls: list[list[Any]]
) -> list[dict[str, Any]]:
    """``tick(conn, *calls[0])`` interrupted (``KeyboardInterrupt``: a Ctrl-C, a SIGINT
    handler) right after its first write, then the other calls on the same connection, as
    a scheduler that lives on ticks again (``common.interrupted_then_again``). A tick that
    rolls back on ``Exception`` only leaves its BEGIN open, and its next tick fails."""
    return _interrupted_then_again(values, "tick", path, calls, 1)


def _said(factory: Any) -> str:
    """A row or text factory named without its address (a lambda's differs per run)."""
    return "None" if factory is None else getattr(factory, "__qualname__", type(factory).__name__)


def tick_on_a_bare_connection(
    values: MutableMapping[str, Any], path: str, args: list[Any]
) -> dict[str, Any]:
    """One ``tick`` on a plain ``sqlite3.Connection`` (no wrapper: what the tick sets on
    it stays set), rows as ``sqlite3.Row`` as the scheduler's own code reads them. The
    outcome, and under ``changed`` what the tick left changed of the connection's settings
    that the caller's later statements use: its row factory, its text factory, and
    ``PRAGMA case_sensitive_like`` (LIKE ignores ASCII case unless it is on)."""
    conn = connect(path)
    try:
        with fresh_state(values):
            got = outcome(values["tick"], conn, *args)
        changed: list[str] = []
        if conn.row_factory is not sqlite3.Row:
            changed.append(f"conn.row_factory = {_said(conn.row_factory)}")
        if conn.text_factory is not str:
            changed.append(f"conn.text_factory = {_said(conn.text_factory)}")
        try:
            if conn.execute("SELECT 'a' LIKE 'A'").fetchone()[0] != 1:
                changed.append("PRAGMA case_sensitive_like = ON")
        except sqlite3.Error:
            pass  # a connection the tick closed: other checks say so
        return {**got, "changed": changed}
    finally:
        conn.close()
