"""One PostgreSQL connection that survives a dropped backend, and says what a drop cost.

A server restart, a failover or ``pg_terminate_backend`` kills the session under a
long-lived connection. psycopg then raises on every later call, forever. ``Session``
holds the store's connection and:

- opens a new one on the next call when the old one is closed or broken;
- when ``BEGIN`` itself meets a dead connection (nothing was sent that could commit),
  reconnects and begins again, once;
- turns a drop in the middle of a call into ``ConnectionLost``, whose
  ``may_have_committed`` says whether the transaction was already committing (then
  the change may or may not be there: read it back before doing it again);
- sets ``lock_timeout`` on every connection, so a row lock held elsewhere becomes
  ``StoreBusy`` after the timeout, as SQLite's busy timeout does, instead of a wait
  without end;
- turns any other driver error into a ``StoreError`` with secrets redacted.

In production a pool does the reconnecting (psycopg_pool's ``ConnectionPool`` with
``check=ConnectionPool.check_connection``, SQLAlchemy's ``pool_pre_ping``); labkit keeps
one connection per store and writes the rules out.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import psycopg
from psycopg.rows import dict_row

from labkit.errors import ConnectionLost, StatementTimeout, StoreBusy, StoreError
from labkit.redact import redact

Conn = psycopg.Connection[dict[str, Any]]
#: FATAL errors by which the server says it ended the session itself: whatever statement
#: was running then was rolled back, and one not yet run never started.
_SERVER_ENDED = (
    psycopg.errors.AdminShutdown,
    psycopg.errors.CrashShutdown,
    psycopg.errors.CannotConnectNow,
)


class Session:
    """The store's connection to PostgreSQL: reconnects, times out on locks, explains."""

    def __init__(
        self,
        dsn: str,
        lock_timeout_s: float,
        setup: Callable[[Conn], None],
        where: str,
    ) -> None:
        """``setup(conn)`` runs on every new connection (the store points it at its schema
        and sets ``lock_timeout`` to ``lock_timeout_s``); ``where`` names the server for
        messages (already redacted)."""
        self.dsn = dsn
        self.lock_timeout_s = lock_timeout_s
        self._setup = setup
        self._where = where
        self.lock = threading.RLock()
        self._conn: Conn | None = None
        #: How many times a dead connection was replaced (tests and logs read it).
        self.reconnects = 0

    # -- connections -------------------------------------------------------------------

    def connect(self, autocommit: bool = True) -> Conn:
        """A new connection, set up, with ``lock_timeout``; StoreError if unreachable."""
        try:
            conn = psycopg.connect(self.dsn, autocommit=True, row_factory=dict_row)
        except psycopg.OperationalError as exc:
            raise StoreError(
                f"cannot connect to PostgreSQL at {self._where}: "
                f"{redact(str(exc).strip())}. Check that the server is running and the DSN "
                "(host, port, database, user) is right."
            ) from None
        try:
            self._setup(conn)
        except BaseException:
            conn.close()
            raise
        conn.autocommit = autocommit
        return conn

    @property
    def conn(self) -> Conn:
        """The live connection, replacing a closed or broken one first."""
        with self.lock:
            if self._conn is None or self._conn.closed or self._conn.broken:
                if self._conn is not None:
                    self._conn.close()
                    self.reconnects += 1
                self._conn = self.connect()
            return self._conn

    def close(self) -> None:
        with self.lock:
            if self._conn is not None:
                self._conn.close()

    # -- running statements ------------------------------------------------------------

    @contextmanager
    def transaction(self, operation: str = "a store call") -> Iterator[Conn]:
        """One transaction on the live connection; driver errors become labkit errors."""
        with self.lock:
            conn, tx = self._begin(operation)
            committing = False
            try:
                try:
                    yield conn
                except BaseException as exc:
                    tx.__exit__(type(exc), exc, exc.__traceback__)
                    raise
                committing = True
                tx.__exit__(None, None, None)
            except psycopg.Error as exc:
                self._raise(exc, conn, operation, committing)

    def rows(self, sql: str, params: dict[str, Any], operation: str = "a read") -> list[Any]:
        """Run one statement outside a transaction and fetch its rows (reads only)."""
        with self.lock:
            for attempt in (1, 2):
                conn = self.conn
                try:
                    return conn.execute(sql, params).fetchall()
                except psycopg.Error as exc:
                    # A read changes nothing: after a drop it is safe to run it again, once.
                    if attempt == 1 and self._dropped(conn):
                        continue
                    self._raise(exc, conn, operation, committing=False)
        raise AssertionError("unreachable")  # pragma: no cover

    def statement(
        self, sql: str, params: dict[str, Any], operation: str, *, again_if_dropped: bool
    ) -> list[Any]:
        """Run one writing statement as its own transaction (autocommit): one round trip
        where ``transaction()`` takes three (BEGIN, the statement, COMMIT).

        When the server itself ended the session (terminated, shut down: it says so
        with a FATAL error, which comes before our statement's result or instead of it),
        the statement did not commit, and it runs once more on a new connection, as a
        BEGIN that meets a dead connection does. Any other drop leaves it unknown: the
        statement may have committed before the connection died, so ``ConnectionLost``
        says it MAY HAVE BEEN SAVED, unless ``again_if_dropped`` (a statement whose repeat
        is harmless, like a claim: a job it leased without telling anyone comes back when
        that lease expires) runs it once more.
        """
        with self.lock:
            for attempt in (1, 2):
                conn = self.conn
                try:
                    cur = conn.execute(sql, params)
                    return cur.fetchall() if cur.description is not None else []
                except psycopg.Error as exc:
                    ended = isinstance(exc, _SERVER_ENDED)
                    if attempt == 1 and self._dropped(conn) and (ended or again_if_dropped):
                        continue
                    self._raise(exc, conn, operation, committing=not ended)
        raise AssertionError("unreachable")  # pragma: no cover

    def _begin(self, operation: str) -> tuple[Conn, Any]:
        for attempt in (1, 2):
            conn = self.conn
            tx = conn.transaction()
            try:
                tx.__enter__()
                return conn, tx
            except psycopg.Error as exc:
                # BEGIN never reached the server's data: a fresh connection may begin again.
                if attempt == 1 and self._dropped(conn):
                    continue
                self._raise(exc, conn, operation, committing=False)
        raise AssertionError("unreachable")  # pragma: no cover

    @staticmethod
    def _dropped(conn: Conn) -> bool:
        return bool(conn.closed or conn.broken)

    def _raise(self, exc: psycopg.Error, conn: Conn, operation: str, committing: bool) -> NoReturn:
        text = str(exc).strip()
        detail = redact(text.splitlines()[0] if text else type(exc).__name__)
        cancelled = cancelled_error(exc, operation, detail, "nothing was changed, try again")
        if cancelled is not None:
            raise cancelled from None
        if isinstance(exc, psycopg.errors.LockNotAvailable):
            raise StoreBusy(
                f"{operation} waited over {self.lock_timeout_s:g}s for a row or table lock "
                f"another connection holds ({detail}); nothing was changed, try again"
            ) from None
        if self._dropped(conn):
            raise ConnectionLost(
                f"the connection to PostgreSQL at {self._where} was lost during {operation} "
                f"({detail}); "
                + (
                    "it was committing, so the change MAY HAVE BEEN SAVED: read the job back "
                    "before repeating the call"
                    if committing
                    else "nothing was committed, so the call can simply be repeated"
                )
                + ". The next call reconnects.",
                may_have_committed=committing,
            ) from None
        raise StoreError(f"PostgreSQL refused {operation}: {detail}") from None


def caller_error(exc: psycopg.Error, conn: Conn, operation: str) -> StoreError:
    """A driver error on the caller's own connection (``enqueue(conn=...)``) as a labkit one.

    The caller's transaction has not committed (the caller commits it later), so a drop
    here lost nothing that was saved; the caller must open a new connection.
    """
    text = str(exc).strip()
    detail = redact(text.splitlines()[0] if text else type(exc).__name__)
    cancelled = cancelled_error(
        exc, f"{operation}(conn=...)", detail, "roll your transaction back and try again"
    )
    if cancelled is not None:
        return cancelled
    if isinstance(exc, psycopg.errors.LockNotAvailable):
        return StoreBusy(
            f"{operation}(conn=...) waited too long for a lock another connection holds "
            f"({detail}); roll your transaction back and try again"
        )
    if conn.closed or conn.broken:
        return ConnectionLost(
            f"your connection was lost during {operation}(conn=...) ({detail}); your "
            "transaction did not commit: open a new connection and run it again",
            may_have_committed=False,
        )
    return StoreError(f"PostgreSQL refused {operation}(conn=...): {detail}")


def cancelled_error(
    exc: psycopg.Error, operation: str, detail: str, then: str
) -> StoreBusy | None:
    """A statement the server cancelled (SQLSTATE 57014), named for why; None otherwise.

    PostgreSQL gives one class for a ``statement_timeout`` and for a cancel another
    session sent (``pg_cancel_backend``); its message says which. A lock timeout is
    another class (``LockNotAvailable``), reported as a lock wait by the caller.
    """
    if not isinstance(exc, psycopg.errors.QueryCanceled):
        return None
    if "statement timeout" in str(exc):
        return StatementTimeout(
            f"{operation} ran longer than the server's statement_timeout and was cancelled "
            f"({detail}); no lock was in the way: the statement itself was slow, or the "
            f"statement_timeout set for this role or database is too short for it. {then}"
        )
    return StoreBusy(
        f"{operation} was cancelled by another session (pg_cancel_backend, or an operator) "
        f"({detail}); {then}"
    )
