"""The durable job store on SQLite: accept, claim with a lease, finish, retry, bury, redrive.

One file, WAL mode, every state change one transaction. Workers claim with a single
``UPDATE ... RETURNING`` inside ``BEGIN IMMEDIATE`` (the approach of Oban's Lite engine
and River's SQLite driver), so two workers can never hold the same job, and a crashed
worker's job comes back when its lease expires. ``complete``, ``fail`` and ``heartbeat``
are fenced by the lease token: a worker that lost its lease changes nothing.

In production this is the job of a queue you do not write yourself (Oban, River,
procrastinate, or Celery with a durable broker, where a crashed worker's task comes back
only with ``task_acks_late`` and ``task_reject_on_worker_lost``: lesson 14); labkit
writes it by hand because its behaviour under crashes is the lesson.
"""

from __future__ import annotations

import functools
import json
import os
import random
import re
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from labkit import dbfile, jobargs, queries
from labkit.clock import Clock, SystemClock
from labkit.errors import StoreError
from labkit.job import Job
from labkit.retry import RetryPolicy
from labkit.store.base import BURY_EVERY_S, DeadLetter, StoreBase
from labkit.store.contract import SCHEMA_VERSION

__all__ = [
    "BURY_EVERY_S",
    "JOB_DATABASE",
    "SQL",
    "DeadLetter",
    "JobStore",
]

SQL = queries.load_all("store/common.sql", "store/sqlite.sql")
JOB_DATABASE = dbfile.FileKind(
    noun="database file",
    label="labkit job database",
    meta_table="labkit_meta",
    version_sql=SQL["get_meta"],
    schema_version=SCHEMA_VERSION,
)


def _widen_states(conn: sqlite3.Connection) -> None:
    """Give a jobs table made before version 3 the state check that admits ``cancelled``.

    SQLite cannot change a CHECK in place, so the table is rebuilt the way its manual
    says (ALTER TABLE, "Making Other Kinds Of Table Schema Changes"): a new table from
    the schema's own definition, every row copied, the old one dropped, the new one
    renamed; the schema script then re-creates the indexes and triggers the drop took.
    Inside the caller's transaction, with foreign keys off, so it is all or nothing.
    """
    row = conn.execute(SQL["jobs_table_sql"]).fetchone()
    if row is None or "'cancelled'" in row[0]:
        return
    create = _JOBS_TABLE.search(SQL["schema"])
    assert create is not None, "sqlite.sql defines the jobs table"
    columns = ", ".join(r[1] for r in conn.execute("PRAGMA table_info(jobs)"))
    conn.execute(create[0].replace("IF NOT EXISTS jobs (", "jobs_widened (", 1))
    conn.execute(f"INSERT INTO jobs_widened ({columns}) SELECT {columns} FROM jobs")
    conn.execute("DROP TABLE jobs")
    conn.execute("ALTER TABLE jobs_widened RENAME TO jobs")


#: The jobs table's definition in sqlite.sql, up to its closing line.
_JOBS_TABLE = re.compile(r"CREATE TABLE IF NOT EXISTS jobs \(.*?\n\);", re.DOTALL)


class JobStore(StoreBase):
    """A durable job queue in one SQLite file.

    ``JobStore(path, clock=None, retry=None, synchronous="NORMAL", rng=None)``: ``clock``
    defaults to the wall clock, ``retry`` to ``RetryPolicy()``, ``rng`` (used for jitter)
    to an unseeded ``random.Random``; pass a seeded one for reproducible runs.
    ``synchronous="FULL"`` makes each commit survive power loss, not just a crash.

    The operations themselves are ``labkit.store.base.StoreBase``'s, shared with the
    PostgreSQL store; this class holds what is particular to sqlite3.
    """


    def __init__(
        self,
        path: str | Path,
        clock: Clock | None = None,
        retry: RetryPolicy | None = None,
        synchronous: str = "NORMAL",
        rng: random.Random | None = None,
    ) -> None:
        self.path = Path(path)
        self.clock: Clock = clock or SystemClock()
        self.retry = retry or RetryPolicy()
        self.rng = rng or random.Random()
        if synchronous.upper() not in dbfile.SYNCHRONOUS:
            raise ValueError(f"synchronous must be NORMAL or FULL, not {synchronous!r}")
        self._lock = threading.RLock()
        self._next_bury = float("-inf")
        dbfile.check_file(self.path, JOB_DATABASE)
        # A failed open (a full disk) closes its connection and takes back its side files.
        with dbfile.removing_on_failure(self.path):
            self.conn = self._connect(synchronous.upper())
            self._migrate()

    # -- opening -----------------------------------------------------------------------

    def _connect(self, synchronous: str) -> sqlite3.Connection:
        try:
            conn = dbfile.connect(self.path, synchronous=synchronous)
        except sqlite3.OperationalError as exc:
            raise self._explain(exc) from None
        try:
            conn.execute("PRAGMA foreign_keys=ON")
        except sqlite3.OperationalError as exc:
            conn.close()
            raise self._explain(exc) from None
        return conn

    def _migrate(self) -> None:
        """Bring the schema up to date, taking the write lock only when it is behind.

        Opening a current database only reads it, so ``labkit inspect`` and a new worker
        open at once even while another connection holds the write lock.
        """
        try:
            if self._schema_version() == SCHEMA_VERSION:
                return
            # A table rebuild (below) must not see its own drop as deleting the rows that
            # attempts and redrives point at; SQLite reads this only outside a transaction.
            self.conn.execute("PRAGMA foreign_keys=OFF")
            with self._tx() as conn:
                # Checked again under the write lock: check_file read the file before
                # another process (a newer labkit) may have migrated it.
                self._refuse_newer(conn)
                _widen_states(conn)
                dbfile.run_script(conn, SQL["schema"])
                broken = conn.execute("PRAGMA foreign_key_check").fetchall()
                if broken:  # rolled back: the file stays as it was
                    raise StoreError(
                        f"{self.path}: migrating the job tables would break {len(broken)} "
                        "references between them; nothing was changed. Restore a backup or "
                        "report this with the file."
                    )
                row = conn.execute(SQL["get_meta"], {"name": "schema_version"}).fetchone()
                # Write the version only when it changes: opening a database is not a write.
                if row is None or row[0] != str(SCHEMA_VERSION):
                    conn.execute(
                        SQL["set_meta"], {"name": "schema_version", "value": str(SCHEMA_VERSION)}
                    )
        except sqlite3.DatabaseError as exc:
            self.conn.close()
            raise self._explain(exc) from None
        except StoreError:
            self.conn.close()
            raise
        self.conn.execute("PRAGMA foreign_keys=ON")

    def _schema_version(self) -> int | None:
        """The schema version the file holds (None for a new file), read without a lock."""
        tables = {r[0] for r in self.conn.execute(dbfile.SQL["table_names"])}
        if "labkit_meta" not in tables or not {"jobs", "attempts", "redrives"} <= tables:
            return None
        row = self.conn.execute(SQL["get_meta"], {"name": "schema_version"}).fetchone()
        return None if row is None else int(row[0])

    def _refuse_newer(self, conn: sqlite3.Connection) -> None:
        tables = {r[0] for r in conn.execute(dbfile.SQL["table_names"])}
        if "labkit_meta" not in tables:
            return
        row = conn.execute(SQL["get_meta"], {"name": "schema_version"}).fetchone()
        if row is not None and int(row[0]) > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} has labkit schema version {row[0]}, newer than this labkit "
                f"understands ({SCHEMA_VERSION}); it was not modified. Upgrade labkit."
            )

    def _explain(self, exc: sqlite3.Error) -> StoreError:
        return dbfile.explain(self.path, exc)

    def _tx(self) -> AbstractContextManager[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction: all or nothing, one writer at a time."""
        return dbfile.transaction(self.conn, self._lock, self._explain)

    def close(self) -> None:
        with self._lock:
            self.conn.close()

    def __enter__(self) -> JobStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"JobStore({str(self.path)!r})"

    # -- the driver hooks of StoreBase ------------------------------------------------

    @property
    def _sql(self) -> dict[str, str]:
        # The module's dict, looked up on every call: a test that swaps SQL for a mutant
        # reaches every statement.
        return SQL

    def _location(self) -> str:
        return str(self.path)

    def _queues_param(self, queues: Sequence[str]) -> str:
        # SQLite has no arrays: the claim reads the queue list with json_each. A claim's
        # queues arrive as the tuple jobargs.queues made, the same every time.
        if isinstance(queues, tuple):
            return _queue_list(queues)
        return json.dumps(list(queues))

    def _batch_param(self, rows: list[tuple[Any, ...]], columns: tuple[str, ...]) -> Any:
        # One JSON list of rows, read by json_each in the statement.
        return {"rows": json.dumps(rows)}

    def _rows(self, name: str, params: dict[str, Any] | None = None) -> list[sqlite3.Row]:
        try:
            return self.conn.execute(SQL[name], params or {}).fetchall()
        except sqlite3.Error as exc:
            raise self._explain(exc) from None

    # -- the application's own transactions ---------------------------------------------

    def connect(self) -> sqlite3.Connection:
        """A new connection to this store's file, set up like the store's own.

        Autocommit mode (open transactions with ``store.transaction(conn)``), WAL, the
        same busy timeout. Use it for the ledger pattern: your effect row and
        ``complete(job, conn=conn)`` in one transaction. Close it when done.
        """
        try:
            return dbfile.connect(self.path)
        except sqlite3.Error as exc:
            raise self._explain(exc) from None

    def transaction(self, conn: sqlite3.Connection) -> AbstractContextManager[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` on your ``conn``; COMMIT at the end, ROLLBACK on an exception.

        A database that stays locked raises ``StoreBusy`` (like every store call), a full
        disk says "disk full", and a failed transaction leaves nothing behind::

            with store.transaction(conn):
                conn.execute("INSERT INTO effects ...")
                store.complete(job, conn=conn)
        """
        return dbfile.transaction(conn, None, self._explain)

    @contextmanager
    def _in_caller_tx(self, conn: sqlite3.Connection, operation: str) -> Iterator[sqlite3.Cursor]:
        """A cursor of our own on the caller's open transaction on this store's file.

        Its own cursor, so the caller's connection keeps its row_factory. ``complete``
        needs the transaction already open (the effect it must commit with was written
        before); ``enqueue`` may also let Python's default mode open it on the insert.
        """
        if operation == "complete" and not conn.in_transaction:
            raise StoreError(
                "complete(conn=...) needs an open transaction on that connection; run "
                "conn.execute('BEGIN IMMEDIATE') first so the effect and the completion "
                "commit together"
            )
        if conn.isolation_level is None and not conn.in_transaction:
            raise StoreError(
                f"{operation}(conn=...) needs an open transaction on that connection; run "
                "conn.execute('BEGIN') first (or use a connection in Python's default "
                "transaction mode) so the job commits or rolls back with your write"
            )
        self._check_same_file(conn, operation)
        cur = conn.cursor()
        cur.row_factory = sqlite3.Row
        try:
            yield cur
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                raise StoreError(
                    f"{operation}(conn=...) got a connection without the jobs table ({exc}); "
                    f"open it on the store's own file, {self.path}"
                ) from None
            raise

    def _check_same_file(self, conn: sqlite3.Connection, operation: str) -> None:
        """Refuse a connection to another file: the job would land in the wrong database."""
        main = next(
            (row[2] for row in conn.execute("PRAGMA database_list") if row[1] == "main"), ""
        )
        try:
            same = bool(main) and os.path.samefile(main, self.path)
        except OSError:
            same = False
        if not same:
            raise StoreError(
                f"{operation}(conn=...) got a connection to "
                f"{main or 'an in-memory database'}, not to this store's file {self.path}; "
                f"open the connection on {self.path} so your write and the job's change "
                "share one transaction"
            )

    # -- claiming ----------------------------------------------------------------------

    def claim_many(
        self,
        worker: str,
        limit: int,
        queues: Sequence[str] = ("default",),
        lease_s: float = 30.0,
    ) -> list[Job]:
        """Lease up to ``limit`` ready jobs in one transaction, oldest due first."""
        queues = jobargs.queues(queues)
        if len(queues) == 1:
            # One queue: an index-ordered scan that stops after ``limit`` rows.
            return self.claim_with(
                worker, queues, lease_s, limit, SQL["claim_one_queue"], {"queue": queues[0]}
            )
        return self.claim_with(worker, queues, lease_s, limit, SQL["claim"])


@functools.lru_cache(maxsize=256)
def _queue_list(queues: tuple[str, ...]) -> str:
    # A worker claims from the same queues every time: encode the list once.
    return json.dumps(list(queues))
