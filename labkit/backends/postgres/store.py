"""The job store contract on PostgreSQL, for users who outgrow one machine.

Same rules as ``labkit.store.sqlite.JobStore`` (SQLite), same tests (``tests/contract``): leases
with a ``<id>.<claim number>`` token, attempt counted at claim, ``complete``/``fail``/
``heartbeat`` fenced on the token, expired leases reclaimable, the crash-loop cap, retry
decisions through ``RetryPolicy``, sanitized dead letters, limited redrive. What changes
is how claims stay exclusive: SQLite has one writer at a time; PostgreSQL has many, so
the claim locks the rows it picks with ``FOR UPDATE SKIP LOCKED`` and concurrent workers
skip them instead of waiting or taking them twice. History is kept by plpgsql triggers.

Time: workers on several machines must judge one lease by one clock, so the store's
``:now`` is the database server's (``clock_timestamp()``, read through
``labkit.clock.ServerClock`` at most every few seconds and carried forward by the
monotonic clock), whatever real clock the process has. A worker whose clock runs 30 s
ahead would otherwise take a job another worker holds under a live lease, and one 30 s
behind would lose its own leases at once and see new jobs 30 s late. A ``FakeClock`` is
kept as it is: lessons and tests play time, and every statement takes it as ``:now``.

A frozen worker (a paused VM, a SIGSTOP, a debugger) that stops inside a transaction
holds its row locks, and ``SKIP LOCKED`` claims pass its job by for as long as it is
frozen, lease or no lease. Every connection the store opens or hands out therefore has
``idle_in_transaction_session_timeout``: the server ends such a session after
``idle_in_transaction_s`` and its locks go with it (its transaction rolls back), so the
job comes back when its lease runs out.

Every store lives in its own schema (``labkit`` unless told), with a ``labkit_meta``
table holding the schema version; SQL is in ``labkit/backends/postgres/store.sql``.

In production take a maintained PostgreSQL queue instead: procrastinate (Python),
Oban-style queues such as Oban for Elixir, River for Go, or Celery/RQ with a durable
broker. labkit writes this one by hand so the lesson can show every line of the claim.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import psycopg
from psycopg import sql
from psycopg.pq import TransactionStatus
from psycopg.rows import dict_row

from labkit import jobargs
from labkit.backends.postgres.session import Session, caller_error
from labkit.backends.postgres.sql import load_statements
from labkit.clock import Clock, ServerClock, SystemClock, is_simulated
from labkit.dbfile import BUSY_TIMEOUT_S
from labkit.errors import StoreError
from labkit.redact import redact
from labkit.retry import RetryPolicy
from labkit.store.base import StoreBase
from labkit.store.contract import SCHEMA_VERSION

_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
DEFAULT_SCHEMA = "labkit"
#: How long a session may sit idle inside a transaction before the server ends it: longer
#: than any pause between the statements of a caller's transaction, shorter than a job
#: should stay pinned by a frozen worker's row lock.
IDLE_IN_TRANSACTION_S = 60.0


SQL = load_statements(
    "store/common.sql", "backends/postgres/store.sql", verbatim=("schema", "create_schema")
)


def _ms(seconds: float) -> str:
    """A duration as a PostgreSQL timeout setting: whole milliseconds, 1 to its maximum."""
    return str(min(max(1, round(seconds * 1000)), 2**31 - 1))


class PostgresJobStore(StoreBase):
    """A durable job queue in one PostgreSQL schema.

    ``PostgresJobStore(dsn, clock=None, retry=None, rng=None, schema=None,
    lock_timeout_s=10.0, idle_in_transaction_s=60.0)``: ``dsn`` is a libpq URL or
    key=value string; ``schema`` (default ``labkit``) is created if missing and holds
    every table, so a store never collides with an application's own tables; ``retry``
    and ``rng`` mean what they mean for ``JobStore``. ``clock``: a ``FakeClock`` plays
    time; any real clock (None, ``SystemClock``) gives way to the server's
    (``store.clock`` is then a ``ServerClock``; see the module docstring). A lock held
    elsewhere longer than ``lock_timeout_s`` raises ``StoreBusy``; a session idle in a
    transaction longer than ``idle_in_transaction_s`` is ended by the server; a dropped
    connection raises ``ConnectionLost`` once and is replaced on the next call
    (``labkit.backends.postgres.session``).

    The operations are ``labkit.store.base.StoreBase``'s, shared with ``JobStore``; this
    class holds what is particular to psycopg. Claims lock the rows they pick with
    ``FOR UPDATE SKIP LOCKED``: two workers never get the same job, and neither blocks
    the other.
    """

    # Lock the dead job's row, so nothing changes it between the check and the update.
    _REDRIVE_READ = "job_by_id_for_update"

    def __init__(
        self,
        dsn: str,
        clock: Clock | None = None,
        retry: RetryPolicy | None = None,
        rng: random.Random | None = None,
        schema: str | None = None,
        lock_timeout_s: float = BUSY_TIMEOUT_S,
        idle_in_transaction_s: float = IDLE_IN_TRANSACTION_S,
    ) -> None:
        self.schema = DEFAULT_SCHEMA if schema is None else schema
        if not isinstance(self.schema, str) or not _SCHEMA_NAME.match(self.schema):
            raise ValueError(
                f"schema must be a lower-case SQL identifier (letters, digits, _; at most 63), "
                f"not {self.schema!r}"
            )
        self.dsn = dsn
        given = clock or SystemClock()
        self.clock: Clock = given if is_simulated(given) else ServerClock(self._server_time)
        self.retry = retry or RetryPolicy()
        self.rng = rng or random.Random()
        self._next_bury = float("-inf")
        self.idle_in_transaction_s = jobargs.seconds("idle_in_transaction_s", idle_in_transaction_s)
        self._session = Session(
            dsn,
            jobargs.seconds("lock_timeout_s", lock_timeout_s),
            self._setup_connection,
            redact(self._where()),
        )
        self._lock = self._session.lock
        try:
            self._migrate()
        except BaseException:
            self._session.close()
            raise

    # -- opening -----------------------------------------------------------------------

    def connect(self, autocommit: bool = True) -> psycopg.Connection[dict[str, Any]]:
        """A new connection to this store's database with its schema first on the path.

        Use one (``autocommit=False``) for ``enqueue(conn=...)`` / ``complete(conn=...)``
        so your own writes and the job's change share a transaction. It has the store's
        ``lock_timeout``.
        """
        return self._session.connect(autocommit)

    def _setup_connection(self, conn: psycopg.Connection[dict[str, Any]]) -> None:
        conn.execute(SQL["use_schema"], {"schema": self.schema})
        conn.execute(SQL["set_lock_timeout"], {"ms": _ms(self._session.lock_timeout_s)})
        conn.execute(
            SQL["set_idle_in_transaction_timeout"], {"ms": _ms(self.idle_in_transaction_s)}
        )

    def _server_time(self) -> float:
        row = self._session.rows(SQL["server_time"], {}, "reading the server's clock")[0]
        return float(row["now"])

    @property
    def conn(self) -> psycopg.Connection[dict[str, Any]]:
        """The store's own connection; a new one after the old one was dropped."""
        return self._session.conn

    @property
    def reconnects(self) -> int:
        """How many times this store replaced a dropped connection."""
        return self._session.reconnects

    def _where(self) -> str:
        return self.dsn if "://" in self.dsn else f"'{self.dsn}'"

    def _migrate(self) -> None:
        with self._tx() as conn:
            conn.execute(SQL["migration_lock"], {"schema": self.schema})
            conn.execute(sql.SQL(SQL["create_schema"]).format(schema=sql.Identifier(self.schema)))
            tables = {r["table_name"] for r in conn.execute(SQL["table_names"])}
            row = (
                conn.execute(SQL["get_meta"], {"name": "schema_version"}).fetchone()
                if "labkit_meta" in tables
                else None
            )
            if row is not None and int(row["value"]) > SCHEMA_VERSION:
                raise StoreError(
                    f"schema {self.schema} has labkit schema version {row['value']}, newer "
                    f"than this labkit understands ({SCHEMA_VERSION}); it was not "
                    "modified. Upgrade labkit."
                )
            # Opening a current schema changes nothing: re-creating triggers would lock
            # the jobs table against every worker already running on it.
            if row is None or row["value"] != str(SCHEMA_VERSION):
                conn.execute(SQL["schema"])
                conn.execute(
                    SQL["set_meta"], {"name": "schema_version", "value": str(SCHEMA_VERSION)}
                )

    def _tx(self) -> AbstractContextManager[psycopg.Connection[dict[str, Any]]]:
        """One transaction on the store's connection: all or nothing (see ``Session``)."""
        return self._session.transaction()

    def read(self, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        """The rows of one read statement of a claim policy's own (its SQL, this store's lock)."""
        with self._lock:
            return self.conn.execute(sql, params).fetchall()

    def close(self) -> None:
        """Release the store's connection."""
        self._session.close()

    def __enter__(self) -> PostgresJobStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PostgresJobStore({redact(self.dsn)!r}, schema={self.schema!r})"

    # -- a caller's transaction --------------------------------------------------------

    @contextmanager
    def _in_caller_tx(
        self, conn: psycopg.Connection[Any], operation: str
    ) -> Iterator[psycopg.Cursor[dict[str, Any]]]:
        """A cursor on the caller's open transaction, pointed at this store's schema.

        The schema is set with ``SET LOCAL`` semantics and given back afterwards, so the
        caller's own statements see the search_path they had. Refuses a connection to
        another database or one without a transaction that will commit with the caller.
        """
        status = conn.info.transaction_status
        if conn.autocommit and status != TransactionStatus.INTRANS:
            raise StoreError(
                f"{operation}(conn=...) needs an open transaction on that connection; use a "
                "connection with autocommit off (store.connect(autocommit=False)) or open "
                "`with conn.transaction():` first, so the job commits or rolls back with "
                "your write"
            )
        if status == TransactionStatus.INERROR:
            raise StoreError(
                f"{operation}(conn=...) got a connection whose transaction already failed; "
                "roll it back and start again"
            )
        if conn.info.dbname != self.conn.info.dbname or conn.info.host != self.conn.info.host:
            raise StoreError(
                f"{operation}(conn=...) got a connection to database {conn.info.dbname!r} on "
                f"{conn.info.host}, not this store's {self.conn.info.dbname!r} on "
                f"{self.conn.info.host}; open it with store.connect() so your write and the "
                "job's change share one transaction"
            )
        try:
            cur = conn.cursor(row_factory=dict_row)
            previous = cur.execute(SQL["use_schema_locally"], {"schema": self.schema}).fetchone()
            try:
                yield cur
            finally:
                if (
                    previous is not None
                    and conn.info.transaction_status == TransactionStatus.INTRANS
                ):
                    cur.execute(SQL["restore_schema_locally"], {"previous": previous["previous"]})
        except psycopg.Error as exc:
            raise caller_error(exc, conn, operation) from None

    # -- the driver hooks of StoreBase ------------------------------------------------

    @property
    def _sql(self) -> dict[str, str]:
        # The module's dict, looked up on every call: a test that swaps SQL for a mutant
        # reaches every statement.
        return SQL

    def _location(self) -> str:
        return f"schema {self.schema}"

    def _queues_param(self, queues: Sequence[str]) -> list[str]:
        return list(queues)  # psycopg passes a list as a text[] array

    def _batch_param(self, rows: list[tuple[Any, ...]], columns: tuple[str, ...]) -> Any:
        # One array per column; the statement zips them back with unnest.
        return {name: [row[i] for row in rows] for i, name in enumerate(columns)}

    def _statement(
        self, sql: str, params: dict[str, Any], again_if_dropped: bool = False
    ) -> list[Any]:
        # Alone in autocommit: one round trip instead of BEGIN, statement, COMMIT
        # (bench/NOTES.md); see Session.statement for what a drop then tells.
        return self._session.statement(
            sql, params, "a store call", again_if_dropped=again_if_dropped
        )

    def _rows(self, name: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        return self._session.rows(SQL[name], params or {})
