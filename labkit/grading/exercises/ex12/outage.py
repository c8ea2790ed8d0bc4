"""Exercise 12's long outages: catch-ups of thousands to millions of slots, cheaply.

``due_slots_bounded`` runs ``due_slots`` in a child whose memory and time are bounded;
``due_slots_span`` sends a long list of slots back as its count, first and last;
``tick_in_memory`` ticks a catch-up of tens of thousands of slots on a table in memory;
``tick_head`` stops a catch-up of a million slots after its first inserts; and
``ints_written_in`` reads the numbers written in the code, where a cap shows.
"""

from __future__ import annotations

import os
import resource
import sqlite3
from collections.abc import MutableMapping
from typing import Any

from labkit.grading.exercises.common import fresh_state, outcome
from labkit.grading.exercises.constants import whole_numbers_in
from labkit.grading.exercises.labdb import add_job, lab_db
from labkit.grading.exercises.racers import in_a_forked_child
from labkit.grading.exercises.tracing import Watched, verb_of
from labkit.patterns.schedule import slot_key as reference_key

#: What ``due_slots_bounded`` lets one child's address space grow by: a few slots need
#: kilobytes; a list of every second since the epoch needs gigabytes.
BOUNDED_HEADROOM = 256 * 2**20


def _cap_the_address_space(headroom: int) -> None:
    """Let this process's address space grow by ``headroom`` bytes at most (Linux; where
    the size is unknown or the limit refused, only the time limit holds)."""
    try:
        with open("/proc/self/statm") as statm:
            size = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        cap = size + headroom
        if soft != resource.RLIM_INFINITY:
            cap = min(cap, soft)
        if hard != resource.RLIM_INFINITY:
            cap = min(cap, hard)
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    except (OSError, ValueError):
        pass


def due_slots_bounded(
    values: MutableMapping[str, Any], calls: list[list[Any]], seconds: float
) -> dict[str, Any]:
    """``due_slots(*call)`` for each call, as outcomes, in a forked child whose memory
    may grow by ``BOUNDED_HEADROOM`` only and that is killed after ``seconds``: a
    ``due_slots`` that builds or walks every slot since ``since`` (millions) raises
    ``MemoryError`` or runs out of time there, never in the grader. ``{"outcomes":
    [...]}`` or ``{"hung": True}``."""

    def run() -> dict[str, Any]:
        _cap_the_address_space(BOUNDED_HEADROOM)
        with fresh_state(values):
            return {"outcomes": [outcome(values["due_slots"], *call) for call in calls]}

    return in_a_forked_child(run, timeout=seconds)


def tick_latest_bounded(
    values: MutableMapping[str, Any],
    schedule: str,
    period_s: int,
    since: float,
    now: float,
    seconds: float,
) -> dict[str, Any]:
    """One ``tick`` with ``catch_up="latest"`` on a fresh exercise table in memory where
    nothing fired, in a forked child whose memory may grow by ``BOUNDED_HEADROOM`` only and
    that is killed after ``seconds``: a tick that lists every due slot (``"all"``) and
    keeps the newest, on a schedule of seconds since 1970, raises ``MemoryError`` or runs
    out of time there. The outcome and the keys the table then holds, or ``{"hung":
    True}``."""

    def run() -> dict[str, Any]:
        _cap_the_address_space(BOUNDED_HEADROOM)
        conn = lab_db(":memory:")
        try:
            with fresh_state(values):
                got = outcome(
                    values["tick"], Watched(conn), schedule, period_s, since, now, "latest"
                )
            try:
                keys = [row[0] for row in conn.execute("SELECT key FROM jobs ORDER BY key")]
            except sqlite3.ProgrammingError:  # the tick closed it
                keys = []
        finally:
            conn.close()
        if "returned" in got:
            got["returned"] = repr(got["returned"])[:200]
        return {**got, "table": keys[:5]}

    return in_a_forked_child(run, timeout=seconds)


def tick_in_memory(
    values: MutableMapping[str, Any],
    schedule: str,
    period_s: int,
    fired: float,
    now: float,
) -> dict[str, Any]:
    """One ``tick`` (``catch_up="all"``, ``since`` the epoch) on a fresh exercise table in
    memory where ``fired`` already fired: a catch-up of tens of thousands of slots costs
    a fraction of a second there. The outcome (its list of keys replaced by their count,
    first and last) and the same of the keys the table holds (None when the tick closed
    the connection, and the table in memory with it)."""
    conn = lab_db(":memory:")
    try:
        add_job(conn, reference_key(schedule, fired), kind=schedule, run_after=fired)
        with fresh_state(values):
            got = outcome(values["tick"], Watched(conn), schedule, period_s, 0, now, "all")
        try:
            keys = [row[0] for row in conn.execute("SELECT key FROM jobs ORDER BY key")]
        except sqlite3.ProgrammingError:  # the tick closed it: the table in memory is gone
            keys = None
    finally:
        conn.close()
    created = got.pop("returned", None)
    if isinstance(created, (list, tuple)) and all(isinstance(k, str) for k in created):
        got["created"] = _span(sorted(created))
    elif "raised" not in got:
        got["returned"] = repr(created)[:200]
    got["table"] = None if keys is None else _span(keys)
    return got


class _Enough(BaseException):  # noqa: N818 - not an error: the harness saw enough
    """Raised into a tick once its first inserts ran (a ``BaseException``, so that an
    ``except Exception`` around an insert does not go on with the catch-up)."""


class _StopsAfter(Watched):
    """A connection that ends the tick right after its ``inserts``-th INSERT statement
    (``executemany`` runs its rows one by one), the keys the table then holds, in the
    order they were inserted, kept in ``keys`` (read inside the tick's transaction, if
    any, before it is rolled back), and in ``committed`` the newest id a kill then would
    leave: the table's as it stood when no transaction was last open."""

    def __init__(self, conn: sqlite3.Connection, inserts: int) -> None:
        super().__init__(conn)
        self.inserts = inserts
        self.seen = 0
        self.keys: list[str] | None = None
        self.committed = 0
        self.settle()

    def settle(self) -> None:
        """Note what a kill would leave, when no transaction is open (never after the
        stop: a tick's own COMMIT or ROLLBACK on the way out is no kill's)."""
        if self.keys is None and not self._conn.in_transaction:
            query = "SELECT coalesce(max(id), 0) FROM jobs"
            self.committed = self._conn.execute(query).fetchone()[0]

    def commit(self) -> None:
        super().commit()
        self.settle()

    def __exit__(self, *exc: Any) -> Any:
        got = super().__exit__(*exc)
        self.settle()
        return got

    def execute(self, sql: str, params: Any = ()) -> Any:
        got = super().execute(sql, params)
        if verb_of(sql) != "SELECT":
            self.settle()
        if verb_of(sql) in ("INSERT", "REPLACE"):
            self.seen += 1
            if self.seen >= self.inserts:
                self.keys = [
                    row[0] for row in self._conn.execute("SELECT key FROM jobs ORDER BY id")
                ]
                raise _Enough
        return got

    def kept(self) -> list[str]:
        """The keys a kill now would leave, in the order they were inserted."""
        query = "SELECT key FROM jobs WHERE id <= ? ORDER BY id"
        return [row[0] for row in self._conn.execute(query, (self.committed,))]


def _listed_at_once(due: Any, period_s: int, fired: float, now: float) -> Any:
    """The notebook's ``due_slots``, save that its call for the whole catch-up of
    ``tick_head`` (``last`` = ``fired``, ``since`` = 0) is a list built at C speed, of
    the type (int or float) it gives: listing a million slots one by one in Python costs
    tenths of a second. Only when it lists the newest three slots of the scene as a
    correct ``due_slots`` does; otherwise (and for any other call) the notebook's own."""
    newest = (now // period_s) * period_s
    try:
        small = due(period_s, newest - 3 * period_s, 0, now, "all")
    except Exception:  # noqa: BLE001 - its own due_slots then, whatever it does
        return due
    want = [newest - 2 * period_s, newest - period_s, newest]
    kinds = {type(slot) for slot in small} if type(small) is list else set()
    if small != want or kinds not in ({int}, {float}):
        return due
    [kind] = kinds
    lo, hi = int(fired // period_s) + 1, int(newest // period_s)

    def due_slots(*args: Any, **kwargs: Any) -> Any:
        if args == (period_s, fired, 0, now, "all") and not kwargs:
            return list(map(kind, range(lo * period_s, (hi + 1) * period_s, period_s)))
        return due(*args, **kwargs)

    return due_slots


def tick_head(
    values: MutableMapping[str, Any],
    schedule: str,
    period_s: int,
    fired: float,
    now: float,
    inserts: int,
) -> dict[str, Any]:
    """The first ``inserts`` keys one ``tick`` (``catch_up="all"``, ``since`` the epoch)
    inserts on a fresh exercise table in memory where ``fired`` already fired, in the
    order it inserted them; the tick is stopped there. A catch-up of a million slots then
    costs what ``due_slots`` takes to list them, never a million inserts: a cap that keeps
    the newest slots (``[-200_000:]``) shows in the first key inserted. ``{"keys": [...],
    "table": n, "kept": span}`` (the keys besides ``fired``, how many rows there were, and
    the span of the keys a kill right then would leave committed), or an outcome that
    raised."""
    conn = lab_db(":memory:")
    try:
        add_job(conn, reference_key(schedule, fired), kind=schedule, run_after=fired)
        watched = _StopsAfter(conn, inserts)
        with fresh_state(values):
            values["due_slots"] = _listed_at_once(values.get("due_slots"), period_s, fired, now)
            try:
                got = outcome(values["tick"], watched, schedule, period_s, 0, now, "all")
            except _Enough:
                got = {}
        keys = watched.keys
        try:
            if keys is None:  # the tick ended by itself
                watched.settle()
                keys = [row[0] for row in conn.execute("SELECT key FROM jobs ORDER BY id")]
            kept = watched.kept()
        except sqlite3.ProgrammingError:  # the tick closed the connection
            keys, kept = keys or [], []
    finally:
        conn.close()
    if "raised" in got and watched.keys is None:
        return got
    old = reference_key(schedule, fired)
    return {
        "keys": [k for k in keys if k != old][:inserts],
        "table": len(keys),
        "kept": _span(sorted(k for k in kept if k != old)),
    }


def _span(keys: list[str]) -> dict[str, Any]:
    """Keys said in little room: how many, how many distinct, the first and the last."""
    return {
        "count": len(keys),
        "distinct": len(set(keys)),
        "first": keys[0] if keys else None,
        "last": keys[-1] if keys else None,
    }


def ints_written_in(values: MutableMapping[str, Any], names: list[str]) -> list[int]:
    """The whole numbers written in the notebook's functions ``names`` and in what they
    call or name of the notebook, without their sign: a cap on a catch-up (``[-50000:]``,
    a loop that stops at ``MAX_SLOTS``) is one of them, and the check then runs a
    catch-up one slot past it. Their code's constants (slices and tuples included, whole
    floats such as ``1e5`` too), their parameters' defaults, and the notebook's number
    globals they name (``MAX_CATCH_UP = 50_000``); never what a function of another
    module holds (see ``constants.whole_numbers_in``)."""
    return whole_numbers_in(values.get(name) for name in names)


def due_slots_span(
    values: MutableMapping[str, Any], calls: list[list[Any]]
) -> list[dict[str, Any]]:
    """``due_slots(*call)`` for each call, its list said in little room: how many slots,
    how many distinct, the first and the last, and whether each is one period after the
    one before it (hundreds of thousands of slots cost nothing to send back)."""
    said: list[dict[str, Any]] = []
    with fresh_state(values):
        for call in calls:
            got = outcome(values["due_slots"], *call)
            slots = got.pop("returned", None)
            if isinstance(slots, (list, tuple)) and all(
                isinstance(s, (int, float)) and not isinstance(s, bool) for s in slots
            ):
                got["span"] = {
                    "count": len(slots),
                    "distinct": len(set(slots)),
                    "first": slots[0] if slots else None,
                    "last": slots[-1] if slots else None,
                    "steps": all(b - a == call[0] for a, b in zip(slots, slots[1:], strict=False)),
                }
            elif "raised" not in got:
                got["returned"] = repr(slots)[:200]
            said.append(got)
    return said
