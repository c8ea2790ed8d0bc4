"""A job database made before version 3 is rebuilt, whole, to admit the state cancelled.

SQLite cannot widen a CHECK in place (``labkit.store.sqlite._widen_states`` rebuilds the
table as SQLite's manual says). The file here is what labkit 2 left: the same tables,
with the old state check on ``jobs`` and version 2 in ``labkit_meta``.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from labkit.clock import LAB_EPOCH, FakeClock
from labkit.errors import PermanentError
from labkit.job import JobState
from labkit.store import JobStore
from labkit.store.contract import SCHEMA_VERSION

OLD_CHECK = "CHECK (state IN ('pending', 'running', 'succeeded', 'retry_wait', 'dead'))"


def _schema_objects(conn: sqlite3.Connection) -> set[tuple[str, str]]:
    return {(r[0], r[1]) for r in conn.execute(
        "SELECT type, name FROM sqlite_master WHERE tbl_name = 'jobs'")}


def _as_version_2(path: Path) -> None:
    """Rewrite the jobs table with version 2's state check, the way labkit 2 made it."""
    with closing(sqlite3.connect(path)) as conn:
        [sql] = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'jobs'").fetchone()
        old = sql.replace(sql[sql.index("CHECK (state IN"):sql.index("),", sql.index(
            "CHECK (state IN")) + 1], OLD_CHECK)
        assert "'cancelled'" not in old
        conn.execute("PRAGMA writable_schema = ON")  # a test fixture's shortcut, not labkit's
        conn.execute("UPDATE sqlite_master SET sql = ? WHERE name = 'jobs'", (old,))
        conn.execute("UPDATE labkit_meta SET value = '2' WHERE name = 'schema_version'")
        conn.commit()


def test_a_version_2_file_keeps_every_row_trigger_and_index_and_admits_cancelled(
    tmp_path: Path,
) -> None:
    path, clock = tmp_path / "jobs.db", FakeClock(LAB_EPOCH)
    with JobStore(path, clock=clock) as store:
        done, _ = store.enqueue("k", {"n": 1}, key="done")
        store.complete(store.claim("w"))
        failed, _ = store.enqueue("k", {"n": 2}, key="failed")
        store.fail(store.claim("w"), PermanentError("no"))
        waiting, _ = store.enqueue("k", {"n": 3}, key="waiting")
        assert store.counts() | {"cancelled": 0} == {
            "pending": 1, "running": 0, "succeeded": 1, "retry_wait": 0, "dead": 1,
            "cancelled": 0}
        before_rows = store.conn.execute("SELECT * FROM jobs ORDER BY id").fetchall()
        before_attempts = store.conn.execute("SELECT * FROM attempts ORDER BY id").fetchall()
        objects = _schema_objects(store.conn)
    _as_version_2(path)
    with closing(sqlite3.connect(path)) as conn, pytest.raises(sqlite3.IntegrityError):
        conn.execute("UPDATE jobs SET state = 'cancelled' WHERE key = 'waiting'")  # refused

    with JobStore(path, clock=clock) as store:
        conn = store.conn
        assert conn.execute("SELECT value FROM labkit_meta").fetchone()[0] == str(SCHEMA_VERSION)
        assert conn.execute("SELECT * FROM jobs ORDER BY id").fetchall() == before_rows
        assert conn.execute("SELECT * FROM attempts ORDER BY id").fetchall() == before_attempts
        assert _schema_objects(conn) == objects  # the triggers and indexes are back
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        with store.transaction(conn):
            conn.execute("UPDATE jobs SET state = 'cancelled' WHERE id = ?", (waiting.id,))
        assert store.get(waiting.id).state == JobState.CANCELLED
        # The triggers work on the rebuilt table: a claim opens an attempt again.
        store.enqueue("k", {"n": 4}, key="after")
        job = store.claim("w2")
        assert job is not None and job.key == "after"
        assert store.attempts(job.id)[-1].worker == "w2"
        assert store.get(done.id).state == JobState.SUCCEEDED
        assert store.get(failed.id).state == JobState.DEAD
