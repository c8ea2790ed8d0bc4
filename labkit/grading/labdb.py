"""The small SQLite jobs table exercises 3 and 6 work on, for checks and for notebooks.

``exercise_db(folder)`` gives a fresh database to try your code on; ``add_job`` puts a
job in any state; ``all_jobs`` reads them back. The schema is ``exercise_schema`` in
``labkit/sql/grading.sql``.
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
    conn.executescript(queries.load("grading.sql")["exercise_schema"])
    return conn


def connect(path: Path | str) -> sqlite3.Connection:
    """Another connection to an existing exercise database, as a second worker would open."""
    conn = sqlite3.connect(path, timeout=10.0, isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    return conn


def add_job(conn: sqlite3.Connection, key: str, **fields: Any) -> int:
    """Insert a job (pending, attempt 0, due at 0 unless ``fields`` say otherwise); its id."""
    row = {
        "key": key,
        "kind": "email",
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
    return int(conn.execute(queries.load("grading.sql")["add_job"], row).fetchone()[0])


def all_jobs(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    return [dict(r) for r in conn.execute(queries.load("grading.sql")["all_jobs"])]


def exercise_db(folder: Path | str, name: str = "lab.db") -> sqlite3.Connection:
    """For the notebook: a fresh exercise database in ``folder`` to try your code on."""
    path = Path(folder) / name
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return lab_db(path)
