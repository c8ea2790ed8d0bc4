"""SQLite on a bad day: another writer holds the lock, the disk is full, the file is damaged.

Each test failed before its fix. The busy timeout is cut to a fraction of a second
(``dbfile.BUSY_TIMEOUT_S``) so "waits out the timeout" costs little; nothing asserts a
duration. A file that cannot grow is simulated with SQLite's ``PRAGMA max_page_count`` on
the store's own connection: SQLite then fails as on a full filesystem (SQLITE_FULL,
"database or disk is full"), though the disk has room, and the message says so. A really
full filesystem (a filled tmpfs) is tests/unit/test_cli_full_disk.py's.
"""

from __future__ import annotations

import logging
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from labkit import dbfile
from labkit.cli import main
from labkit.clock import FakeClock
from labkit.errors import LeaseLost, StoreBusy, StoreError
from labkit.store import JobStore


@pytest.fixture
def short_busy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dbfile, "BUSY_TIMEOUT_S", 0.2)


@pytest.fixture
def writer_holding_the_lock(db_path: Path, clock: FakeClock) -> Iterator[sqlite3.Connection]:
    """Another connection inside BEGIN IMMEDIATE on a current job database."""
    with JobStore(db_path, clock=clock) as store:
        store.enqueue("charge", {"n": 1}, key="held-1")
    other = sqlite3.connect(db_path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    other.execute("UPDATE jobs SET updated_at = updated_at")
    yield other
    other.rollback()
    other.close()


def test_opening_a_current_database_does_not_need_the_write_lock(
    db_path: Path, clock: FakeClock, short_busy: None, writer_holding_the_lock: sqlite3.Connection
) -> None:
    with JobStore(db_path, clock=clock) as reader:
        assert reader.counts()["pending"] == 1
        assert reader.get_by_key("held-1") is not None
        # The lock really is held: a write still waits out the timeout and says so.
        with pytest.raises(StoreBusy, match="locked"):
            reader.enqueue("charge", {"n": 2})


def test_labkit_inspect_reads_while_another_connection_writes(
    db_path: Path,
    short_busy: None,
    writer_holding_the_lock: sqlite3.Connection,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["inspect", str(db_path)]) == 0
    assert "pending" in capsys.readouterr().out


def test_labkit_worker_backs_off_while_the_database_is_busy_and_then_runs_the_job(
    db_path: Path,
    clock: FakeClock,
    short_busy: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    with JobStore(db_path, clock=clock) as store:
        store.enqueue("charge", {"n": 1}, key="busy-1")
    (tmp_path / "busy_handlers.py").write_text("HANDLERS = {'charge': lambda job, ctx: 'ok'}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    other = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    released = threading.Event()

    def release_when_the_worker_has_backed_off() -> None:
        # Hold the lock until the worker has logged a back-off, then let it through.
        for _ in range(600):
            if any("backing off" in r.getMessage() for r in list(caplog.records)):
                break
            threading.Event().wait(0.05)
        other.rollback()
        released.set()

    holder = threading.Thread(target=release_when_the_worker_has_backed_off)
    with caplog.at_level(logging.WARNING, logger="labkit.worker"):
        holder.start()
        try:
            code = main(
                [
                    "worker",
                    str(db_path),
                    "--handlers",
                    "busy_handlers:HANDLERS",
                    "--until-idle",
                    "--name",
                    "w-busy",
                ]
            )
        finally:
            holder.join()
            other.close()
    assert released.is_set()
    assert code == 0
    shown = capsys.readouterr()
    assert "stopped after 1 job(s)" in shown.out
    assert "busy" in shown.err and "backing off" in shown.err  # the operator sees it
    assert any("busy" in r.getMessage() for r in caplog.records), "the busy fault must fire"
    with JobStore(db_path, clock=clock) as store:
        assert store.get_by_key("busy-1").state == "succeeded"  # type: ignore[union-attr]


def test_the_ledger_transaction_goes_through_the_same_busy_handling(
    db_path: Path, clock: FakeClock, short_busy: None, writer_holding_the_lock: sqlite3.Connection
) -> None:
    with JobStore(db_path, clock=clock) as store:
        conn = store.connect()
        try:
            with pytest.raises(StoreBusy, match="locked"), store.transaction(conn):
                conn.execute("SELECT 1")
            assert not conn.in_transaction
        finally:
            conn.close()


def test_the_ledger_transaction_commits_effect_and_completion_together(
    store: JobStore, clock: FakeClock
) -> None:
    store.enqueue("charge", {"n": 1}, key="ledger-1")
    job = store.claim("w1", lease_s=5)
    assert job is not None
    conn = store.connect()
    try:
        conn.execute("CREATE TABLE effects (job_id INTEGER)")
        with store.transaction(conn):
            conn.execute("INSERT INTO effects VALUES (?)", (job.id,))
            store.complete(job, {"ok": True}, conn=conn)
        # A zombie's second try rolls its effect back with the refused completion.
        with pytest.raises(LeaseLost), store.transaction(conn):
            conn.execute("INSERT INTO effects VALUES (?)", (job.id,))
            store.complete(job, None, conn=conn)
        assert conn.execute("SELECT count(*) FROM effects").fetchone()[0] == 1
    finally:
        conn.close()
    assert store.get(job.id).state == "succeeded"


def test_a_file_that_cannot_grow_says_so_and_loses_nothing(store: JobStore) -> None:
    kept = [store.enqueue("charge", {"n": n}, key=f"kept-{n}")[0] for n in range(5)]
    pages = store.conn.execute("PRAGMA page_count").fetchone()[0]
    store.conn.execute(f"PRAGMA max_page_count = {pages}")
    refused = 0
    with pytest.raises(StoreError) as caught:
        for n in range(200):  # each ~64 KB: the file must grow within a few
            store.enqueue("bulk", {"blob": "x" * 64_000, "n": n})
            refused += 1
    said = str(caught.value)
    assert "cannot grow" in said and "max_page_count" in said and "nothing was changed" in said
    assert "corrupt" not in said
    assert "cannot rollback" not in str(caught.value)
    assert refused < 200, "the full disk must have fired"
    assert [store.get(j.id).key for j in kept] == [j.key for j in kept]
    assert not store.conn.in_transaction
    store.conn.execute("PRAGMA max_page_count = 1073741823")  # space freed
    store.enqueue("charge", {"n": 99}, key="after-space-freed")
    assert store.counts()["pending"] == 5 + refused + 1


def _damage(path: Path) -> None:
    """Overwrite a stretch of pages after the schema page with garbage."""
    with JobStore(path, clock=FakeClock(0.0)) as store:
        for n in range(3000):
            store.enqueue("charge", {"n": n, "pad": "p" * 200}, key=f"job-{n}")
    size = path.stat().st_size
    with path.open("r+b") as fh:
        fh.seek(size // 3)
        fh.write(b"\xde\xad\xbe\xef" * (size // 12))


def test_a_damaged_database_is_a_labkit_error_not_a_traceback(db_path: Path) -> None:
    _damage(db_path)
    with pytest.raises(StoreError, match="corrupt"):
        with JobStore(db_path, clock=FakeClock(0.0)) as store:
            store.counts()
            store.jobs(limit=3000)
    done = subprocess.run(
        [sys.executable, "-m", "labkit", "inspect", str(db_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode in (1, 2), done.stdout
    assert "corrupt" in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_the_worlds_ledger_transaction_raises_store_busy_and_a_handler_retries_it(
    tmp_path: Path, short_busy: None
) -> None:
    """The lessons' local-effect pattern (``world.ledger.transaction()``) on a busy file."""
    from labkit.retry import default_classify as classify
    from labkit.world import World

    world = World(tmp_path / "world.db", clock=FakeClock(0.0))
    other = sqlite3.connect(tmp_path / "world.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StoreBusy, match="locked") as caught, world.ledger.transaction():
            pass
    finally:
        other.rollback()
        other.close()
    assert classify(caught.value) == "never_sent"  # a handler meeting it is retried
    with world.ledger.transaction() as tx:  # free again
        tx.mark("k-1")
    assert world.ledger.status("k-1") == "done"
    world.close()


def test_a_healthy_file_another_process_holds_exclusively_is_busy_not_corrupt(
    tmp_path: Path, short_busy: None, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "jobs.db"
    with JobStore(db, clock=FakeClock()) as store:
        store.enqueue("k", {}, key="kept")
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sqlite3, sys\n"
         f"c = sqlite3.connect({str(db)!r}, isolation_level=None)\n"
         "c.execute('PRAGMA locking_mode=EXCLUSIVE')\n"
         "c.execute('BEGIN EXCLUSIVE')\n"
         "c.execute('UPDATE labkit_meta SET value = value')\n"
         "print('held', flush=True)\n"
         "sys.stdin.read()\n"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(StoreBusy) as busy:
            JobStore(db, clock=FakeClock())
        assert "locked" in str(busy.value) and "corrupt" not in str(busy.value)
        assert "Restore" not in str(busy.value)
        assert main(["inspect", str(db)]) != 0
        said = capsys.readouterr().err
        assert "locked" in said and "corrupt" not in said and "backup" not in said, said
    finally:
        holder.kill()
        holder.wait(10)
    with JobStore(db, clock=FakeClock()) as store:  # the lock gone, the file is whole
        assert [j.key for j in store.jobs()] == ["kept"]
