"""The shared harness tools: the watched connections (read as real ones) and the forked racers."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from labkit.errors import SimulatedCrash
from labkit.grading.exercises.racers import in_processes
from labkit.grading.exercises.tracing import LockedAtBegin, Watched, left_as_given


def _db(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE t (x INTEGER)")
    return conn


def test_a_crash_after_the_second_write_leaves_the_first_committed_in_autocommit(
    tmp_path: Path,
) -> None:
    conn = _db(tmp_path / "t.db")
    watched = Watched(conn, crash_after=2)
    watched.execute("INSERT INTO t VALUES (1)")
    with pytest.raises(SimulatedCrash):
        watched.execute("INSERT INTO t VALUES (2)")
    assert watched.crashed and watched.writes == 2
    # Each autocommit statement is its own transaction: both rows are there.
    assert [r[0] for r in conn.execute("SELECT x FROM t ORDER BY x")] == [1, 2]


def test_a_crash_inside_a_transaction_rolls_back_when_the_connection_closes(
    tmp_path: Path,
) -> None:
    conn = _db(tmp_path / "t.db")
    watched = Watched(conn, crash_after=1)
    watched.execute("BEGIN IMMEDIATE")
    with pytest.raises(SimulatedCrash):
        watched.execute("INSERT INTO t VALUES (1)")
    conn.close()
    fresh = sqlite3.connect(tmp_path / "t.db")
    assert fresh.execute("SELECT count(*) FROM t").fetchone()[0] == 0


def test_plain_reads_pause_and_statements_run_to_their_end(tmp_path: Path) -> None:
    conn = _db(tmp_path / "t.db")
    watched = Watched(conn, pause=0.01)
    rows = watched.execute("INSERT INTO t VALUES (7) RETURNING x")
    # Run to its end at once: another connection sees the row before it is fetched.
    other = sqlite3.connect(tmp_path / "t.db")
    assert other.execute("SELECT x FROM t").fetchall() == [(7,)]
    other.close()
    assert rows.fetchone() == (7,) and rows.rowcount == 1
    assert watched.execute("SELECT x FROM t").fetchall() == [(7,)]
    assert watched.pauses == 1


def test_counts_and_cursors_read_as_a_real_connection_s(tmp_path: Path) -> None:
    real, watched = _db(tmp_path / "a.db"), Watched(_db(tmp_path / "b.db"))

    def seen(conn: sqlite3.Connection | Watched) -> list[object]:
        conn.execute("INSERT INTO t VALUES (1), (2), (3)")
        cur = conn.execute("UPDATE t SET x = x + 10 WHERE x <= 2 RETURNING x")
        counts: list[object] = [cur.rowcount]  # 0: the rows are not fetched yet
        counts += [cur.fetchone(), cur.rowcount, cur.fetchone(), cur.rowcount]
        cur = conn.execute("UPDATE t SET x = x + 1 WHERE x = 3")
        counts.append(cur.rowcount)
        cur = conn.execute("SELECT x FROM t ORDER BY x")
        return [*counts, cur.rowcount, type(cur).__name__, cur.fetchone()]

    assert seen(watched) == seen(real) == [0, (11,), 0, (12,), 2, 1, -1, "Cursor", (4,)]


def test_a_transaction_mode_set_on_the_wrapper_reaches_the_connection(tmp_path: Path) -> None:
    conn = _db(tmp_path / "t.db")
    watched = Watched(conn)
    assert left_as_given(conn) == {}
    watched.isolation_level = "IMMEDIATE"
    watched.execute("INSERT INTO t VALUES (1)")  # Python's sqlite3 begins a transaction
    assert conn.isolation_level == "IMMEDIATE"
    assert left_as_given(conn) == {"isolation_level": "IMMEDIATE", "in_transaction": True}


def test_a_begin_meets_the_lock_held_once_then_a_write_without_it_is_counted(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t.db"
    locked = LockedAtBegin(_db(path), str(path))
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        locked.execute("BEGIN IMMEDIATE")
    assert locked.refused and locked.unlocked_writes == 0
    locked.execute("INSERT INTO t VALUES (1)")  # the error swallowed: no lock, no BEGIN
    assert locked.unlocked_writes == 1
    locked.execute("BEGIN IMMEDIATE")  # the holder let go: this one is not refused
    locked.execute("INSERT INTO t VALUES (2)")
    locked.execute("COMMIT")
    assert locked.unlocked_writes == 1


def test_racers_report_what_they_returned_or_raised() -> None:
    def racer(index: int) -> int:
        if index == 1:
            raise RuntimeError("racer 1 failed")
        return index * 10

    got = in_processes(racer, 3)
    assert got["hung"] == 0
    assert got["results"]["0"] == ["returned", 0]
    assert got["results"]["2"] == ["returned", 20]
    assert got["results"]["1"] == ["raised", "RuntimeError: racer 1 failed"]


def test_a_stub_in_a_racer_reads_as_not_started() -> None:
    def racer(index: int) -> None:
        raise NotImplementedError("Exercise 12")

    with pytest.raises(NotImplementedError, match="Exercise 12"):
        in_processes(racer, 2)


def test_a_hanging_racer_and_what_it_started_are_killed(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"

    def racer(index: int) -> None:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        pidfile.write_text(str(child.pid))
        time.sleep(60)

    got = in_processes(racer, 1, timeout=3.0)
    assert got == {"results": {}, "hung": 1}
    grandchild = int(pidfile.read_text())
    for _ in range(50):  # reaped by init once killed; poll generously on a loaded machine
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            break
        with open(f"/proc/{grandchild}/stat") as stat:
            if stat.read().split()[2] == "Z":
                break
        time.sleep(0.1)
    else:
        pytest.fail(f"the racer's child {grandchild} outlived the race")


def _gone(pid: int) -> bool:
    """True once ``pid`` has ended (gone, or a zombie waiting for its reaper)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


#: A process that races two racers which write their pids and wait, then never returns.
_RACE = """
import sys, time
from pathlib import Path
from labkit.grading.exercises.racers import in_processes
folder = Path(sys.argv[1])
def racer(index):
    (folder / f"racer-{index}.pid").write_text(str(__import__("os").getpid()))
    time.sleep(120)
in_processes(racer, 2, timeout=120)
"""


def test_racers_die_with_a_parent_killed_before_its_finally(tmp_path: Path) -> None:
    """A kernel killed mid-check runs no ``finally``: its racers must not wait on for good."""
    parent = subprocess.Popen([sys.executable, "-c", _RACE, str(tmp_path)])
    pids: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while len(pids) < 2:
            assert time.monotonic() < deadline, "the racers never started"
            assert parent.poll() is None, "the race ended before it was killed"
            pids = [int(p.read_text()) for p in tmp_path.glob("racer-*.pid") if p.read_text()]
            time.sleep(0.05)
        parent.kill()
        assert parent.wait(30) == -9  # the fault fired: killed, no finally run
        for _ in range(100):
            if all(_gone(pid) for pid in pids):
                break
            time.sleep(0.1)
        else:
            pytest.fail(f"racers {pids} outlived the process that raced them")
    finally:
        parent.kill()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
