"""Opening labkit's SQLite files while other connections open them too."""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

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


# -- taking back the side files a failed open made (a full disk: see test_cli_full_disk) --


def _side(db: Path, suffix: str) -> Path:
    return db.with_name(db.name + suffix)


def test_a_failed_open_takes_back_the_empty_side_files_it_made(tmp_path: Path) -> None:
    db = tmp_path / "jobs.db"
    JobStore(db).close()
    with pytest.raises(RuntimeError), dbfile.removing_on_failure(db):
        _side(db, "-wal").write_bytes(b"")  # what an open on a full disk leaves
        _side(db, "-shm").write_bytes(b"\0\0\0")
        raise RuntimeError("the open failed")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jobs.db"]


@pytest.mark.parametrize(
    "existed",
    [
        (),  # made in the block, but the WAL holds a frame: someone's data
        ("-wal", "-shm"),  # there before the block: not the block's to remove
    ],
)
def test_side_files_with_data_or_made_before_are_kept(
    tmp_path: Path, existed: tuple[str, ...]
) -> None:
    db = tmp_path / "jobs.db"
    JobStore(db).close()
    for suffix in existed:
        _side(db, suffix).write_bytes(b"")
    with pytest.raises(RuntimeError), dbfile.removing_on_failure(db):
        _side(db, "-wal").write_bytes(b"\x37\x7f\x06\x82" + bytes(28))
        _side(db, "-shm").write_bytes(b"\0\0\0")
        raise RuntimeError("the open failed")
    assert _side(db, "-wal").exists() and _side(db, "-shm").exists()


def _locks_of(pid: int, path: Path) -> list[str]:
    """This process's POSIX locks on ``path``, from /proc/locks."""
    inode = f":{path.stat().st_ino} "
    return [
        line.split(None, 1)[1]
        for line in Path("/proc/locks").read_text().splitlines()
        if f" {pid} " in line and inode in line
    ]


@pytest.mark.skipif(not Path("/proc/locks").exists(), reason="reads Linux's /proc/locks")
def test_side_files_a_connection_of_this_process_uses_are_kept_and_its_locks_too(
    tmp_path: Path,
) -> None:
    # The -wal is empty, so only the lock test keeps it: the connection holds SQLite's
    # shared lock. The test runs in a child process: closing a file here would drop the
    # connection's own locks, which /proc/locks shows.
    db = tmp_path / "jobs.db"
    JobStore(db).close()
    with pytest.raises(RuntimeError), dbfile.removing_on_failure(db):
        other = dbfile.connect(db)
        other.execute("SELECT count(*) FROM jobs").fetchone()
        held = _locks_of(os.getpid(), db)
        raise RuntimeError("the open failed")
    try:
        assert held, "the other connection must hold SQLite's shared lock"
        assert _side(db, "-wal").exists() and _side(db, "-shm").exists()
        assert _locks_of(os.getpid(), db) == held
        other.execute("INSERT INTO labkit_meta (name, value) VALUES ('kept', '1')")
    finally:
        other.close()
    with sqlite3.connect(db) as check:
        assert check.execute("SELECT value FROM labkit_meta WHERE name = 'kept'").fetchone()


def test_side_files_another_process_uses_are_kept(tmp_path: Path) -> None:
    db = tmp_path / "jobs.db"
    JobStore(db).close()
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sqlite3, sys\n"
         f"c = sqlite3.connect({str(db)!r}, isolation_level=None)\n"
         "c.execute('SELECT count(*) FROM jobs').fetchone()\n"
         "print('open', flush=True)\n"
         "sys.stdin.readline()\n"
         "c.execute(\"INSERT INTO labkit_meta (name, value) VALUES ('kept', '1')\")\n"
         "print('written', flush=True)\n"
         "sys.stdin.read()\n"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdin is not None and holder.stdout is not None
        with pytest.raises(RuntimeError), dbfile.removing_on_failure(db):
            assert holder.stdout.readline().strip() == "open"  # it made the side files
            raise RuntimeError("the open failed")
        assert _side(db, "-wal").exists() and _side(db, "-shm").exists()
        holder.stdin.write("go\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "written"
        with sqlite3.connect(db) as check:  # the other process's commit is in the file
            assert check.execute("SELECT value FROM labkit_meta WHERE name = 'kept'").fetchone()
    finally:
        holder.kill()
        holder.wait(10)


@pytest.mark.parametrize(
    "make",
    [
        # A named pipe: SQLite's open blocks or fails on it, and "check the disk" misleads.
        os.mkfifo,
        # A socket file left by some server.
        lambda p: socket.socket(socket.AF_UNIX).bind(str(p)),
    ],
    ids=["fifo", "socket"],
)
def test_a_path_that_is_no_regular_file_is_refused_with_nothing_made_beside_it(
    tmp_path: Path, make: Callable[[Path], None]
) -> None:
    # /dev/null given to labkit inspect as root left /dev/null-journal behind.
    path = tmp_path / "jobs.db"
    make(path)
    with pytest.raises(dbfile.StoreError, match="not a regular file"):
        JobStore(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jobs.db"]


@pytest.mark.skipif(not Path("/proc/locks").exists(), reason="reads Linux's /proc/locks")
def test_a_second_store_on_a_file_keeps_the_first_ones_locks_and_sees_other_writers(
    tmp_path: Path,
) -> None:
    # Recognising the file must not open and close it outside SQLite: closing any
    # descriptor drops every POSIX lock this process holds on the file. Without the
    # first store's shared lock, a writer in another process that closes last deletes
    # the -wal and -shm under both stores, which then read a stale database.
    db = tmp_path / "jobs.db"
    first = JobStore(db)
    try:
        first.enqueue("report", {"n": 1}, key="before")
        held = _locks_of(os.getpid(), db)
        assert held, "the first store must hold SQLite's shared lock"
        with JobStore(db) as second:
            assert _locks_of(os.getpid(), db) == held
            subprocess.run(
                [sys.executable, "-c",
                 "import sys\nfrom labkit.store import JobStore\n"
                 "with JobStore(sys.argv[1]) as s:\n"
                 "    s.enqueue('report', {'n': 2}, key='elsewhere')\n", str(db)],
                check=True, timeout=60,
            )  # fmt: skip
            assert _side(db, "-wal").exists() and _side(db, "-shm").exists()
            for store in (first, second):
                assert store.get_by_key("elsewhere") is not None, store
    finally:
        first.close()
