"""Opening labkit's SQLite files while other connections open them too."""

from __future__ import annotations

import sqlite3
import threading

import pytest

from labkit import dbfile
from labkit.store import JobStore


def test_many_processes_opening_a_brand_new_file_at_once_all_succeed(tmp_path):
    # Each opener switches the new file to WAL; SQLite answers the losers of that race
    # "database is locked" at once, without waiting on the busy timeout. Six openers
    # released together, sixty times, hit the race many times over without the wait.
    errors: list[BaseException] = []
    for round_ in range(60):
        path = tmp_path / f"new-{round_}.db"
        gate = threading.Barrier(6)

        def open_it(path=path, gate=gate) -> None:
            gate.wait()
            try:
                JobStore(path).close()
            except BaseException as exc:  # noqa: BLE001 - collected and asserted below
                errors.append(exc)

        threads = [threading.Thread(target=open_it) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []


class _LockedTwice:
    """A connection whose WAL switch loses the race twice, then wins."""

    def __init__(self) -> None:
        self.calls = 0

    def execute(self, sql: str) -> None:
        self.calls += 1
        if self.calls <= 2:
            raise sqlite3.OperationalError("database is locked")


def test_the_wal_switch_is_retried_when_it_loses_the_race():
    conn = _LockedTwice()
    dbfile._enable_wal(conn)  # type: ignore[arg-type]
    assert conn.calls == 3  # two refusals fired, the third try went through


def test_the_wal_switch_gives_up_with_the_error_after_its_tries():
    conn = _LockedTwice()
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        dbfile._enable_wal(conn, tries=2)  # type: ignore[arg-type]
