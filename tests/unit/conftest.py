"""PostgreSQL fixtures of the tests/unit/test_postgres_*.py files: a schema of the test's
own, dropped afterwards, and a second connection beside the store's.

psycopg is imported inside the fixtures: the SQLite tests in this folder run without it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture
def schema(postgres_dsn: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh schema name, ``<module>_<random>``, so tests can run in parallel (-n 2).

    Afterwards it is dropped, with every ``<name>_...`` schema the test made beside it,
    whatever state the test left them in.
    """
    import psycopg
    from psycopg import sql

    name = f"{request.module.__name__.removeprefix('test_')}_{uuid.uuid4().hex[:12]}"
    yield name
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        # A lock some backend of the test still holds must not hang the teardown.
        conn.execute("SET lock_timeout = '10s'")
        made = conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname = %s OR starts_with(nspname, %s)",
            [name, f"{name}_"],
        ).fetchall()
        for (each,) in made:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(each)))


@pytest.fixture
def admin(postgres_dsn: str) -> Iterator[Any]:
    """A connection of the test's own (autocommit), to watch or end the store's backend."""
    import psycopg

    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        yield conn
