"""The small SQLite tables the exercises work on, for checks and for notebooks.

``exercise_db(folder)`` gives a fresh jobs table to try your code on (exercises 3, 6,
12 and 13); ``add_job`` puts a job in any state; ``all_jobs`` reads them back.
``outbox_db`` and ``consumer_db`` are exercise 11's business and consumer databases,
``steps_db`` exercise 14's jobs and their checkpoints.
The schemas are in ``labkit/grading/exercises/labdb.sql``.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from labkit import queries


def lab_db(path: Path | str) -> sqlite3.Connection:
    """A connection (autocommit, rows as dicts) to a fresh exercise database at ``path``."""
    conn = sqlite3.connect(path, timeout=10.0, isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA journal_mode=WAL")
    conn.executescript(queries.load("grading/exercises/labdb.sql")["exercise_schema"])
    return conn


def connect(path: Path | str, timeout: float = 10.0) -> sqlite3.Connection:
    """Another connection to an existing exercise database, as a second worker would open;
    ``timeout``: how long it waits for another connection's lock."""
    conn = sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    return conn


def add_job(conn: sqlite3.Connection, key: str, **fields: Any) -> int:
    """Insert a job (pending, attempt 0, due at 0 unless ``fields`` say otherwise); its id."""
    row = {
        "key": key,
        "kind": "email",
        "queue": "default",
        "state": "pending",
        "attempt": 0,
        "max_attempts": 3,
        "run_after": 0.0,
        "lease_owner": None,
        "lease_until": None,
        "lease_token": None,
        "last_error": None,
        "dead_reason": None,
        "updated_at": 0.0,
    }
    unknown = set(fields) - set(row)
    if unknown:
        raise TypeError(f"add_job: unknown fields {sorted(unknown)}")
    row.update(fields)
    add = queries.load("grading/exercises/labdb.sql")["add_job"]
    return int(conn.execute(add, row).fetchone()[0])


def all_jobs(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    return [dict(r) for r in conn.execute(queries.load("grading/exercises/labdb.sql")["all_jobs"])]


def exercise_db(folder: Path | str, name: str = "lab.db") -> sqlite3.Connection:
    """For the notebook: a fresh exercise database in ``folder`` to try your code on."""
    path = Path(folder) / name
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return lab_db(path)


def _fresh(path: Path | str, schema: str) -> sqlite3.Connection:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    conn = connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.executescript(queries.load("grading/exercises/labdb.sql")[schema])
    return conn


def outbox_db(path: Path | str) -> sqlite3.Connection:
    """Exercise 11: a fresh business database (``orders``, ``outbox``) at ``path``."""
    return _fresh(path, "outbox_schema")


def consumer_db(path: Path | str) -> sqlite3.Connection:
    """Exercise 11: a fresh consumer database (``processed_messages``, ``emails``) at ``path``."""
    return _fresh(path, "consumer_schema")


def steps_db(path: Path | str) -> sqlite3.Connection:
    """Exercise 14: a fresh job database (``step_jobs``, ``job_steps``) at ``path``."""
    return _fresh(path, "steps_schema")


def rows_of(conn: sqlite3.Connection, query: str) -> list[dict[str, Any]]:
    """Every row of one of the named listings (``all_orders``, ``all_job_steps``...)."""
    return [dict(r) for r in conn.execute(queries.load("grading/exercises/labdb.sql")[query])]
