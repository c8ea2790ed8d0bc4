"""Connections a harness hands a student's function, to watch what it sends to the database.

``Traced`` records every statement and can pause after plain reads to widen the gap a
read-then-write leaves (exercises 3 and 6). ``Watched`` counts the write statements,
can crash (``SimulatedCrash``) right after the n-th one, as a killed process would stop
there, and can pause after plain reads too (exercises 11-13). Both hand back ``Rows``
when they had to read a statement to its end before returning; ``Watched`` hands a plain
SELECT back open, as a real cursor. ``LockedAtBegin`` meets the code's first ``BEGIN
IMMEDIATE`` with the write lock held elsewhere. Whatever the code sets of the
connection's transaction mode (``isolation_level``) reaches the connection, and
``left_as_given`` says what a call left changed.

A process killed at a crash runs nothing more: once a ``Watched`` connection's process
is dead (its crash fired, or the harness called ``kill`` when it crashed elsewhere, in a
publish say), every statement and commit raises ``SimulatedCrash`` unrun, and ``with
conn:`` rolls back, as SQLite does with a dead process's transaction. SQL in an
``except`` or ``finally`` clause (un-marking a row, committing what was half done) would
otherwise run after the crash, which no killed process does.

A plain read is a SELECT made without SQLite's write lock: outside a transaction, or
inside one begun DEFERRED (plain ``BEGIN``) that has not written yet. Two such readers
both see the row missing, then both try to write: one fails with "database is locked"
however long its busy timeout. ``BEGIN IMMEDIATE`` takes the lock first, and a reader
holding it is not paused.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import Any, Self

from labkit.errors import SimulatedCrash

WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")


def verb_of(sql: str) -> str:
    """A statement's first word, upper-cased ("" for an empty one): INSERT, BEGIN, ..."""
    return sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""


def begins_with_the_lock(sql: str) -> bool:
    """Whether ``sql`` is a BEGIN that takes the write lock at once: IMMEDIATE or
    EXCLUSIVE (a plain, DEFERRED BEGIN takes it at its first write)."""
    words = sql.split(None, 2)
    return (
        len(words) > 1
        and words[0].upper() == "BEGIN"
        and words[1].upper().rstrip(";") in ("IMMEDIATE", "EXCLUSIVE")
    )


class WriteLock:
    """Whether a connection holds SQLite's write lock, from the statements sent on it."""

    def __init__(self) -> None:
        self.held = False

    def plain_read(self, conn: sqlite3.Connection, sql: str) -> bool:
        """Called before ``sql`` runs: True when it is a SELECT made without the lock."""
        verb = verb_of(sql)
        if not conn.in_transaction:
            self.held = False
        if verb == "BEGIN":
            self.held = begins_with_the_lock(sql)
        elif verb in WRITES:
            self.held = True  # a write takes the lock, in a transaction until it ends
        return verb == "SELECT" and not self.held


class Rows:
    """The rows of a statement already run to its end, with the cursor's counters.

    ``rowcount`` reads as a real cursor's would: for an INSERT, UPDATE or DELETE with
    RETURNING (rows and a count of changes), Python's sqlite3 says 0 until the rows are
    fetched to the end, then the count. (A copy that said the count at once passed a
    claim that tested ``cur.rowcount == 0`` before fetching: on a real connection it
    took the job and returned None, every time.)
    """

    #: What a real cursor also has: a solution may read it (``cur.arraysize``).
    arraysize = 1

    def __init__(
        self,
        rows: list[Any],
        rowcount: int,
        lastrowid: int | None,
        returning: bool = False,
        description: Any = None,
    ) -> None:
        self._rows = rows
        self._rowcount = rowcount
        self._returning = returning
        self.lastrowid = lastrowid
        # The columns' names, as the real cursor had them: a right claim that builds its
        # dict with ``zip([d[0] for d in cur.description], row)`` lost half the points
        # when the copy had none.
        self.description = description

    @property
    def rowcount(self) -> int:
        if self._returning and self._rows:
            return 0  # rows left to fetch: the statement has not reached its end yet
        return self._rowcount

    def fetchone(self) -> Any:
        return self._rows.pop(0) if self._rows else None

    def fetchall(self) -> list[Any]:
        rows, self._rows = self._rows, []
        return rows

    def fetchmany(self, size: int = 1) -> list[Any]:
        rows, self._rows = self._rows[:size], self._rows[size:]
        return rows

    def __iter__(self) -> Self:
        return self  # as a real cursor: ``next(cur)`` takes the next row

    def __next__(self) -> Any:
        if not self._rows:
            raise StopIteration
        return self._rows.pop(0)

    def close(self) -> None:
        self._rows = []


#: What a real cursor reads before its first statement.
_UNEXECUTED = {"rowcount": -1, "lastrowid": None, "description": None, "arraysize": 1}


class Cursor:
    """What ``cursor()`` gives on a watched connection: ``execute`` goes through the
    wrapper's own (recorded, paused, crashed after), and ``fetchone``, ``fetchall`` and
    ``close`` act on what it returned. (The wrapper itself, handed back before, raised on
    ``cur.fetchone()`` and closed the connection on ``cur.close()``: a right solution
    written with a cursor lost every check.)"""

    def __init__(self, conn: _Wrapped) -> None:
        self.connection = conn
        self._last: Any = None

    def execute(self, sql: str, params: Any = ()) -> Self:
        self._last = self.connection.execute(sql, params)
        return self

    def executemany(self, sql: str, seq: Any) -> Self:
        self._last = self.connection.executemany(sql, seq)
        return self

    def fetchone(self) -> Any:
        return None if self._last is None else self._last.fetchone()

    def fetchall(self) -> list[Any]:
        return [] if self._last is None else list(self._last.fetchall())

    def fetchmany(self, size: int = 1) -> list[Any]:
        return [] if self._last is None else list(self._last.fetchmany(size))

    def __iter__(self) -> Self:
        return self

    def __next__(self) -> Any:
        row = self.fetchone()
        if row is None:
            raise StopIteration
        return row

    def close(self) -> None:
        self._last = None

    def __getattr__(self, name: str) -> Any:  # rowcount, lastrowid, description
        if self._last is None and name in _UNEXECUTED:
            return _UNEXECUTED[name]
        return getattr(self._last, name)


class _Wrapped:
    """What ``Watched`` and ``Traced`` pass through to the connection they wrap: every
    attribute they do not define, ``cursor()`` (a ``Cursor`` whose statements are
    watched too) and ``with conn:``. Python looks ``__enter__``/``__exit__`` up on the
    class, past ``__getattr__``: without them a student's ``with conn:`` fails on the
    wrapper ("does not support the context manager protocol")."""

    _conn: sqlite3.Connection

    def cursor(self) -> Cursor:
        return Cursor(self)

    def __enter__(self) -> Self:
        self._conn.__enter__()
        return self

    def __exit__(self, *exc: Any) -> Any:
        return self._conn.__exit__(*exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    def _run(self, sql: str, params: Any) -> sqlite3.Cursor:
        """``sql`` run on the connection, its rows made by the row factory the student's
        code set on this wrapper, if it set one: ``conn.row_factory = None`` for plain
        tuples works on a watched connection as on the real one, while the check's own
        reads of the connection keep the factory they were given."""
        cursor = self._conn.execute(sql, params)
        if "row_factory" in self.__dict__:
            cursor.row_factory = self.__dict__["row_factory"]
        return cursor

    def __setattr__(self, name: str, value: Any) -> None:
        # The connection's transaction mode is the connection's, not the wrapper's: a
        # student's ``conn.isolation_level = "IMMEDIATE"`` set only on the wrapper left
        # the statements in autocommit, so a claim that never committed passed.
        if name in TRANSACTION_MODE:
            setattr(self._conn, name, value)
        else:
            object.__setattr__(self, name, value)


#: The connection attributes that decide when SQLite transactions begin and end
#: (``autocommit`` from Python 3.12): set on a wrapper, they reach the connection.
TRANSACTION_MODE = ("isolation_level", "autocommit")


def left_as_given(conn: sqlite3.Connection) -> dict[str, Any]:
    """How a call left a connection handed over in autocommit mode with no transaction
    open and durable commits: ``{}`` when as given, else what changed
    (``isolation_level``, ``autocommit``, ``in_transaction``, ``synchronous``)."""
    left: dict[str, Any] = {}
    try:
        synchronous = conn.execute("PRAGMA synchronous").fetchone()[0]
    except sqlite3.Error:
        synchronous = None  # a connection closed: what it left is judged elsewhere
    if synchronous == 0:
        left["synchronous"] = "OFF"
    if conn.isolation_level is not None:
        left["isolation_level"] = conn.isolation_level
    legacy = getattr(sqlite3, "LEGACY_TRANSACTION_CONTROL", None)
    autocommit = getattr(conn, "autocommit", legacy)
    if autocommit is not True and autocommit != legacy:
        left["autocommit"] = autocommit
    if conn.in_transaction:
        left["in_transaction"] = True
    return left


def with_what_it_left(result: dict[str, Any], conn: sqlite3.Connection) -> dict[str, Any]:
    """A call's outcome, with ``left`` (``left_as_given``) when it changed the connection."""
    left = left_as_given(conn)
    return {**result, "left": left} if left else result


class Watched(_Wrapped):
    """A connection that counts writes, crashes after the ``crash_after``-th, pauses reads."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        crash_after: int | None = None,
        pause: float = 0.0,
        crash_with: type[BaseException] = SimulatedCrash,
    ) -> None:
        self._conn = conn
        self.crash_after = crash_after
        #: What the crash raises: a killed process (``SimulatedCrash``), or a Ctrl-C
        #: (``KeyboardInterrupt``) that a process living on survives.
        self.crash_with = crash_with
        self.pause = pause
        self.writes = 0
        self.crashed = False
        #: The process is gone: nothing it sends from now on reaches the database.
        self.dead = False
        self.pauses = 0
        self._lock = WriteLock()

    def kill(self) -> None:
        """The process died (a crash outside SQL): what it sends from now on never runs."""
        self.dead = True

    def _alive(self) -> None:
        if self.dead:
            raise SimulatedCrash("killed", "the process was killed: this never ran")

    def commit(self) -> None:
        self._alive()
        self._conn.commit()

    def __exit__(self, *exc: Any) -> Any:
        if self.dead:  # a dead process's transaction is rolled back, never committed
            self._conn.rollback()
            return False
        return self._conn.__exit__(*exc)

    def execute(self, sql: str, params: Any = ()) -> Any:
        self._alive()
        verb = verb_of(sql)
        reading = self._lock.plain_read(self._conn, sql)
        cursor = self._run(sql, params)
        if verb == "SELECT" and not (reading and self.pause):
            # A read is handed back open, as the real cursor: rows fetched one by one
            # while the caller writes keep the read (and its snapshot) open, as they do
            # on a real connection. (A copy read to its end passed a relay that looped
            # over its SELECT's cursor: live, its marks failed 'database is locked'
            # whenever an order was saved meanwhile, and the same message went out on
            # every run.)
            return cursor
        # Run the statement to its end now, so a crash "after" it means after it.
        fetched = cursor.fetchall()
        # Rows and a count of changes: a write with RETURNING (a SELECT counts -1).
        returning = cursor.description is not None and cursor.rowcount >= 0
        rows = Rows(fetched, cursor.rowcount, cursor.lastrowid, returning, cursor.description)
        if verb in WRITES:
            self.writes += 1
            if self.crash_after is not None and self.writes == self.crash_after:
                self.crashed = True
                # A Ctrl-C (KeyboardInterrupt) leaves the process alive; a kill does not.
                self.dead = issubclass(self.crash_with, SimulatedCrash)
                raise self.crash_with(f"crashed after write statement {self.writes}")
        if reading and self.pause:
            self.pauses += 1
            time.sleep(self.pause)
        return rows

    def executemany(self, sql: str, seq: Any) -> Any:
        result = None
        for params in seq:
            result = self.execute(sql, params)
        return result


class LockedAtBegin(Watched):
    """A connection whose first ``BEGIN IMMEDIATE`` (or ``EXCLUSIVE``) meets the write
    lock held by another connection, and fails "database is locked" at once, as one does
    once its busy timeout is spent; the other connection lets go right after. Counts the
    writes the code sends after that, before a BEGIN of its own succeeds: each ran
    without the lock its transaction was meant to take first (a claim or a redrive that
    swallowed the error and went on read the row another writer then changed)."""

    def __init__(self, conn: sqlite3.Connection, path: str) -> None:
        super().__init__(conn)
        self._path = path
        self.refused = False
        self.unlocked_writes = 0
        self._without_lock = False

    def execute(self, sql: str, params: Any = ()) -> Any:
        verb = verb_of(sql)
        if not self.refused and begins_with_the_lock(sql):
            return self._refused(sql, params)
        if verb == "BEGIN":
            got = super().execute(sql, params)
            self._without_lock = False  # a transaction of its own, begun this time
            return got
        if verb in WRITES and self._without_lock and not self._conn.in_transaction:
            self.unlocked_writes += 1
        return super().execute(sql, params)

    def _refused(self, sql: str, params: Any) -> Any:
        self.refused = True
        timeout = self._conn.execute("PRAGMA busy_timeout").fetchone()[0]
        holder = sqlite3.connect(self._path, timeout=0, isolation_level=None)
        try:
            holder.execute("BEGIN IMMEDIATE")
            self._conn.execute("PRAGMA busy_timeout = 0")
            try:
                got = super().execute(sql, params)
            except sqlite3.OperationalError:
                self._without_lock = True
                raise
            return got  # not refused after all (the code had the lock already)
        finally:
            # The holder may never have begun: the code's own transaction held the lock.
            if holder.in_transaction:
                holder.execute("ROLLBACK")
            holder.close()
            self._conn.execute(f"PRAGMA busy_timeout = {int(timeout)}")


class Impatient(Watched):
    """A connection whose write lock is held, until its call returns, by another
    connection in this same thread (a harness's blocker, a first scheduler): a busy
    timeout the student's code sets (``PRAGMA busy_timeout = 30000``, right against a
    writer in another process, which commits meanwhile) would only wait that long for a
    lock nothing releases here. It is set back to 0.05 s, so the held lock reads as
    'database is locked', as the check means."""

    def execute(self, sql: str, params: Any = ()) -> Any:
        got = super().execute(sql, params)
        if isinstance(sql, str) and "busy_timeout" in sql.lower():
            self._conn.execute("PRAGMA busy_timeout = 50")
        return got


class Traced(_Wrapped):
    """A connection that records every statement and pauses after plain reads.

    ``pause`` > 0 widens the race between a SELECT and the UPDATE that follows it.
    """

    def __init__(self, conn: sqlite3.Connection, pause: float = 0.0) -> None:
        self._conn = conn
        self.pause = pause
        self.statements: list[str] = []
        self.pauses = 0
        self._lock = WriteLock()

    def execute(self, sql: str, params: Any = ()) -> Any:
        self.statements.append(" ".join(sql.split()))
        reading = self._lock.plain_read(self._conn, sql)
        cursor = self._run(sql, params)
        if reading and self.pause:
            rows = cursor.fetchall()
            self.pauses += 1
            time.sleep(self.pause)
            return Rows(rows, cursor.rowcount, cursor.lastrowid, description=cursor.description)
        return cursor


class AfterFirstWrite(Traced):
    """``Traced`` that lets another party act once, right after the first committed change
    (an UPDATE in autocommit mode, or the COMMIT of a transaction that changed a row): a
    second write after it, fenced on nothing, meets a row someone else holds by then."""

    def __init__(self, conn: Any, then: Callable[[], None]) -> None:
        super().__init__(conn, pause=0.0)
        self.then: Callable[[], None] | None = then
        self._changes = conn.total_changes

    def execute(self, sql: str, params: Any = ()) -> Any:
        # Before the statement too: an UPDATE ... RETURNING counts its change only once
        # its rows were fetched, which is after it returned here, before the next one.
        self._then_once_committed()
        cursor = super().execute(sql, params)
        self._then_once_committed()
        return cursor

    def _then_once_committed(self) -> None:
        committed = not self._conn.in_transaction and self._conn.total_changes > self._changes
        if self.then is not None and committed:
            then, self.then = self.then, None
            then()
