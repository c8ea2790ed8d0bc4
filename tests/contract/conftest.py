"""The backends the contract suite runs on. Add PostgreSQL by adding one param below."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from labkit.clock import FakeClock
from labkit.store import JobStore
from labkit.store.contract import JobStoreContract

#: ``make_store(clock, retry=..., rng=...)``: the options go to the backend's constructor.
MakeStore = Callable[..., JobStoreContract]


@contextmanager
def _sqlite(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MakeStore]:
    counter = iter(range(1_000_000))
    yield lambda clock, **options: JobStore(
        tmp_path / f"contract-{next(counter)}.db", clock=clock, **options
    )


@contextmanager
def _postgres(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MakeStore]:
    # Skips with how to start PostgreSQL, or fails under LABKIT_REQUIRE_SERVICES=1.
    dsn = request.getfixturevalue("postgres_dsn")
    import psycopg
    from psycopg import sql

    from labkit.backends.postgres.store import PostgresJobStore

    # A schema per store, dropped afterwards: tests running in parallel (pytest -n 2)
    # never see each other's jobs.
    prefix = f"contract_{uuid.uuid4().hex[:12]}"
    schemas: list[str] = []

    def make(clock: FakeClock, **options: Any) -> JobStoreContract:
        schemas.append(f"{prefix}_{len(schemas)}")
        return PostgresJobStore(dsn, clock=clock, schema=schemas[-1], **options)

    yield make
    with psycopg.connect(dsn, autocommit=True) as conn:
        # A connection a failed test left in a transaction would make DROP wait forever.
        conn.execute("SET lock_timeout = '10s'")
        for schema in schemas:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


BACKENDS: dict[str, Callable[[pytest.FixtureRequest, Path], Any]] = {
    # The reference implementation; one file per store under tmp_path.
    "sqlite": _sqlite,
    # labkit.backends.postgres.store on 127.0.0.1:5432, one schema per store.
    "postgres": _postgres,
}


def _caller_connection(store: JobStoreContract) -> Any:
    """A connection of the caller's own to ``store``'s database with a transaction open.

    What a web handler holds when it writes its row and enqueues the job with ``conn=``.
    The caller ends it with ``commit()`` or ``rollback()`` and then ``close()``.
    """
    if isinstance(store, JobStore):
        conn = sqlite3.connect(store.path)
        conn.execute("BEGIN IMMEDIATE")
        return conn
    # psycopg with autocommit off opens the transaction at the first statement.
    return store.connect(autocommit=False)  # type: ignore[attr-defined]


@pytest.fixture(params=sorted(BACKENDS))
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MakeStore]:
    """``make_store(clock, **options)`` opens a fresh, empty store of the backend under test."""
    opened: list[JobStoreContract] = []
    with BACKENDS[request.param](request, tmp_path) as factory:

        def make(clock: FakeClock, **options: Any) -> JobStoreContract:
            store = factory(clock, **options)
            opened.append(store)
            return store

        yield make
        for store in opened:
            store.close()


@pytest.fixture
def caller_connection(make_store: MakeStore) -> Iterator[Callable[[JobStoreContract], Any]]:
    """``caller_connection(store)``: the caller's own connection, transaction open.

    Every one is rolled back and closed at teardown (before the store's schema or file
    goes), so a test that fails half-way through cannot leave a transaction holding locks.
    """
    opened: list[Any] = []

    def open_one(store: JobStoreContract) -> Any:
        opened.append(_caller_connection(store))
        return opened[-1]

    yield open_one
    for conn in opened:
        conn.rollback()
        conn.close()
