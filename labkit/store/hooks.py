"""The driver hooks of a job store: what each database driver supplies to the shared code.

``labkit.store.sqlite.JobStore`` (sqlite3) and ``labkit.backends.postgres.store.PostgresJobStore``
(psycopg) run the same Python around different SQL (``labkit.store.base``,
``labkit.store.admin``); each backend supplies only what its driver does differently,
through these hooks:

- ``_sql``: the backend's statements by name, already in its driver's parameter style;
- ``_tx()``: one transaction of the store's own, yielding something with
  ``execute(sql, params)`` whose rows read by column name;
- ``_in_caller_tx(conn, operation)``: the same on a caller's open transaction, after
  refusing a connection that could not commit together with the caller's write;
- ``_rows(name, params)``: a read outside any transaction;
- ``_statement(sql, params, again_if_dropped)``: one writing statement that is a
  transaction by itself (by default one of ``_tx()``; PostgreSQL sends it alone in
  autocommit, one round trip instead of three with BEGIN and COMMIT);
- ``_queues_param(queues)``: how a claim statement takes its list of queues (and any
  list of strings);
- ``_batch_param(rows, columns)``: how a batch statement (``insert_jobs``,
  ``complete_batch``) takes its rows: SQLite one JSON list, PostgreSQL one array per
  column;
- ``_location()``: where the jobs live, for "does not exist in ..." messages.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from labkit.clock import Clock
from labkit.retry import RetryPolicy


class Executor(Protocol):
    """A connection or cursor of either driver: runs one statement, returns a cursor."""

    def execute(self, sql: str, params: dict[str, Any], /) -> Any: ...


class StoreHooks:
    """The state and the driver hooks every store operation relies on; backends fill them in."""

    clock: Clock
    retry: RetryPolicy
    rng: random.Random

    # -- hooks -------------------------------------------------------------------------

    @property
    def _sql(self) -> dict[str, str]:
        raise NotImplementedError

    def _tx(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def _in_caller_tx(self, conn: Any, operation: str) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def _rows(self, name: str, params: dict[str, Any] | None = None) -> list[Any]:
        raise NotImplementedError

    def _statement(
        self, sql: str, params: dict[str, Any], again_if_dropped: bool = False
    ) -> list[Any]:
        # again_if_dropped: the statement may run twice if the connection drops under it
        # (a claim, a sweep); only a backend that can lose its connection uses it.
        with self._tx() as ex:
            return list(ex.execute(sql, params).fetchall())

    def _queues_param(self, queues: Sequence[str]) -> Any:
        raise NotImplementedError

    def _batch_param(self, rows: list[tuple[Any, ...]], columns: tuple[str, ...]) -> Any:
        raise NotImplementedError

    def _location(self) -> str:
        raise NotImplementedError
