"""The job database on disk: constraints, indexes, version, and files it must refuse to touch."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from labkit.clock import FakeClock
from labkit.errors import StoreError
from labkit.store import JobStore
from labkit.store.contract import SCHEMA_VERSION
from labkit.store.sqlite import SQL


def test_check_constraint_on_state_rejects_junk(store, db_path):
    job, _ = store.enqueue("k", {}, key="a")
    conn = sqlite3.connect(db_path)
    with pytest.raises(sqlite3.IntegrityError, match="CHECK"):
        conn.execute("UPDATE jobs SET state = 'finished' WHERE id = ?", (job.id,))
    # running without a lease token is refused too: the lease is part of the state.
    with pytest.raises(sqlite3.IntegrityError, match="CHECK"):
        conn.execute("UPDATE jobs SET state = 'running' WHERE id = ?", (job.id,))
    conn.close()
    assert store.get(job.id).state == "pending"


def test_indexes_exist(store, db_path):
    conn = sqlite3.connect(db_path)
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    conn.close()
    assert {"jobs_ready", "jobs_leased", "jobs_dead", "attempts_job"} <= names


def test_claim_uses_the_partial_indexes_with_many_finished_rows(store, clock, db_path):
    # 20k finished jobs written straight into the table (the store would take longer).
    conn = sqlite3.connect(db_path)
    now = clock.now()
    conn.executemany(
        "INSERT INTO jobs (kind, queue, key, fingerprint, payload, state, attempt, max_attempts,"
        " run_after, created_at, updated_at) VALUES ('k', 'default', ?, 'f', '{}', 'succeeded',"
        " 1, 5, ?, ?, ?)",
        [(f"done-{n}", now, now, now) for n in range(20_000)],
    )
    conn.commit()
    conn.execute("ANALYZE")
    params = {"worker": "w", "now": now, "lease_s": 30.0, "limit": 1, "queues": '["default"]'}
    plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + SQL["claim"], params)]
    bury = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + SQL["bury_exhausted"], params)]
    conn.close()
    text = "\n".join(plan)
    assert "USING INDEX jobs_ready" in text and "USING INDEX jobs_leased" in text, text
    assert not any(line.startswith("SCAN jobs") for line in plan), text
    assert any("jobs_leased" in line for line in bury), bury
    store.enqueue("k", {}, key="live")
    assert store.claim("w").key == "live"


def test_schema_version_is_stored(store, db_path):
    conn = sqlite3.connect(db_path)
    (value,) = conn.execute(
        "SELECT value FROM labkit_meta WHERE name = 'schema_version'"
    ).fetchone()
    conn.close()
    assert int(value) == SCHEMA_VERSION


def test_reopening_keeps_the_jobs(db_path, clock):
    with JobStore(db_path, clock=clock) as store:
        job, _ = store.enqueue("k", {"n": 1}, key="a")
    with JobStore(db_path, clock=clock) as store:
        assert store.get(job.id).payload == {"n": 1}


def test_wal_mode_and_busy_timeout_are_set(store):
    assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store.conn.execute("PRAGMA busy_timeout").fetchone()[0] >= 1000


def test_bad_synchronous_is_refused(db_path):
    with pytest.raises(ValueError, match="synchronous"):
        JobStore(db_path, synchronous="SOMETIMES")


# -- files the store must not touch -------------------------------------------------------


def _other_app_db(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO customers (name) VALUES ('ana')")
    conn.commit()
    conn.close()


def _newer_labkit_db(path: Path) -> None:
    with JobStore(path, clock=FakeClock()) as store:
        store.enqueue("k", {}, key="a")
    conn = sqlite3.connect(path)
    conn.execute(
        "UPDATE labkit_meta SET value = ? WHERE name = 'schema_version'", (SCHEMA_VERSION + 1,)
    )
    conn.commit()
    conn.close()


def _text_file(path: Path) -> None:
    path.write_text("name,amount\nana,10\n")


def _corrupt_labkit_db(path: Path) -> None:
    with JobStore(path, clock=FakeClock()) as store:
        for n in range(50):
            store.enqueue("k", {"n": n}, key=f"k{n}")
    data = bytearray(path.read_bytes())
    data[100:3000] = bytes((i * 7 + 3) % 256 for i in range(2900))  # schema page garbage
    path.write_bytes(bytes(data))


def _truncated_labkit_db(path: Path) -> None:
    with JobStore(path, clock=FakeClock()) as store:
        for n in range(300):
            store.enqueue("k", {"n": n, "pad": "x" * 200}, key=f"k{n}")
    os.truncate(path, 5000)


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (_text_file, "not a SQLite database"),  # a CSV someone pointed us at
        (_other_app_db, "not a labkit job database"),  # another app's SQLite file
        (_newer_labkit_db, "newer than this labkit"),  # written by a future labkit
        (_corrupt_labkit_db, "cannot be read"),  # garbage in the schema page
        (_truncated_labkit_db, "cannot be read"),  # a copy cut short
    ],
)
def test_a_file_we_do_not_understand_is_refused_and_left_unchanged(tmp_path, make, words):
    path = tmp_path / "some.db"
    make(path)
    before = path.read_bytes()
    beside = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(StoreError, match=words) as caught:
        JobStore(path, clock=FakeClock())
    assert "not modified" in str(caught.value)
    assert path.read_bytes() == before
    # Nor anything next to it: reading a WAL file carelessly leaves -wal and -shm files.
    assert sorted(p.name for p in tmp_path.iterdir()) == beside


def test_a_newer_labkit_migrating_while_we_open_is_refused_not_downgraded(tmp_path, monkeypatch):
    # check_file reads the file before the store takes the write lock; a newer labkit
    # migrating in between must still be refused, and its version kept.
    from labkit import dbfile

    path = tmp_path / "jobs.db"
    JobStore(path, clock=FakeClock()).close()
    check_file = dbfile.check_file
    migrated = []

    def check_then_a_newer_labkit_migrates(path_: Path, kind: dbfile.FileKind) -> None:
        check_file(path_, kind)
        conn = sqlite3.connect(path_)
        conn.execute("UPDATE labkit_meta SET value = ?", (str(SCHEMA_VERSION + 1),))
        conn.commit()
        conn.close()
        migrated.append(path_)

    monkeypatch.setattr(dbfile, "check_file", check_then_a_newer_labkit_migrates)
    with pytest.raises(StoreError, match="newer than this labkit"):
        JobStore(path, clock=FakeClock())
    assert migrated == [path]  # the race was staged
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT value FROM labkit_meta").fetchall() == [(str(SCHEMA_VERSION + 1),)]
    conn.close()


def test_a_directory_or_a_missing_folder_is_a_clear_error(tmp_path):
    with pytest.raises(StoreError, match="is a directory"):
        JobStore(tmp_path)
    with pytest.raises(StoreError, match="does not exist"):
        JobStore(tmp_path / "nowhere" / "jobs.db")
    assert not (tmp_path / "nowhere").exists()


_READ_ONLY_PROBE = """
import sys
from labkit.store import JobStore
from labkit.errors import StoreError
try:
    JobStore(sys.argv[1])
except StoreError as exc:
    print("StoreError:", exc)
else:
    print("OPENED")
"""


def _run_without_root_powers(path: Path) -> str:
    """Open a store in a child that cannot bypass file permissions, and return what it said."""
    command = [sys.executable, "-c", _READ_ONLY_PROBE, str(path)]
    if os.geteuid() == 0:
        # root ignores permission bits; drop the capabilities that let it, if we can.
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv: cannot make a folder read-only")
        command = [
            setpriv,
            "--inh-caps=-all",
            "--bounding-set=-dac_override,-dac_read_search",
            *command,
        ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("existing", [False, True], ids=["new_file", "existing_file"])
def test_a_read_only_folder_is_a_clear_error(tmp_path, existing):
    folder = tmp_path / "readonly"
    folder.mkdir()
    path = folder / "jobs.db"
    if existing:
        with JobStore(path, clock=FakeClock()) as store:
            store.enqueue("k", {}, key="a")
    before = path.read_bytes() if existing else None
    folder.chmod(0o555)
    try:
        said = _run_without_root_powers(path)
    finally:
        folder.chmod(0o755)
    assert said.startswith("StoreError:") and "write access" in said, said
    assert (path.read_bytes() if existing else None) == before
    assert existing or not path.exists()


def test_a_read_only_file_is_refused_even_by_root_and_left_as_it_was(tmp_path):
    path = tmp_path / "jobs.db"
    with JobStore(path, clock=FakeClock()) as store:
        store.enqueue("k", {}, key="a")
    path.chmod(0o444)
    before = path.read_bytes()
    try:
        assert os.access(path, os.W_OK) == (os.geteuid() == 0)  # root may write anything
        with pytest.raises(StoreError) as refused:
            JobStore(path, clock=FakeClock())
    finally:
        path.chmod(0o644)
    assert "read-only (mode 0444)" in str(refused.value) and "chmod u+w" in str(refused.value)
    assert path.read_bytes() == before
