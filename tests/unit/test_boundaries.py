"""The crash explorer for code it did not write: boundaries found by watching, real kills there.

Every kill here is a real SIGKILL of a forked child; the tests read the database file
afterwards, as the restart would, so "killed right after the COMMIT" is judged by what
SQLite kept, never by what the child said.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from random import Random

import pytest

from labkit.explore.boundaries import describe, live, student_code, targets


def _two_transactions(path: Path) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO t (x) VALUES (1)")
    conn.execute("COMMIT")
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO t (x) VALUES (2)")
    conn.execute("COMMIT")
    conn.close()


def _fresh(path: Path) -> Path:
    path.unlink(missing_ok=True)
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (x INTEGER)")
    conn.close()
    return path


def _rows(path: Path) -> list[int]:
    conn = sqlite3.connect(path)
    try:
        return [x for (x,) in conn.execute("SELECT x FROM t ORDER BY x")]
    finally:
        conn.close()


def test_statements_that_change_the_file_are_boundaries() -> None:
    assert describe("INSERT INTO emails (a) VALUES (1)") == "INSERT INTO emails"
    said = describe("  insert or ignore into processed VALUES (1)")
    assert said == "INSERT OR IGNORE INTO processed"
    assert describe('UPDATE "jobs" SET state = 1') == "UPDATE jobs"
    assert describe("DELETE FROM outbox WHERE id = 1") == "DELETE FROM outbox"
    assert describe("COMMIT") == "COMMIT"
    assert describe("END TRANSACTION") == "COMMIT"
    assert describe("WITH x AS (SELECT 1) INSERT INTO t SELECT * FROM x") is not None
    for read in ("SELECT 1", "BEGIN IMMEDIATE", "BEGIN ", "PRAGMA journal_mode", "ROLLBACK",
                 "WITH x AS (SELECT 1) SELECT * FROM x", ""):
        assert describe(read) is None, read


def test_a_clean_run_lists_every_write_and_commit_with_the_line_that_sent_it(tmp_path) -> None:
    db = _fresh(tmp_path / "a.db")
    life = live(lambda _t: _two_transactions(db), mine=lambda f: f == __file__)
    assert life.ended == "returned" and not life.killed
    assert [b.what for b in life.boundaries] == ["INSERT INTO t", "COMMIT"] * 2
    lines = [int(b.where.split()[1]) for b in life.boundaries]
    assert lines == sorted(lines) and len(set(lines)) == 4  # four distinct lines, in order
    assert all(b.where.endswith("test_boundaries.py") for b in life.boundaries)
    assert _rows(db) == [1, 2]


@pytest.mark.parametrize(
    ("kill_after", "kept"),
    [(1, []), (2, [1]), (3, [1]), (4, [1, 2])],
    ids=["after the first INSERT", "after the first COMMIT", "after the second INSERT",
         "after the last COMMIT"],
)
def test_a_kill_right_after_a_boundary_leaves_what_sqlite_committed(
    tmp_path, kill_after, kept
) -> None:
    db = _fresh(tmp_path / "a.db")
    life = live(lambda _t: _two_transactions(db), kill_after=kill_after)
    assert life.killed and life.killed_after == kill_after and life.ended == "killed"
    assert len(life.boundaries) == kill_after  # nothing ran past the kill
    assert _rows(db) == kept  # an open transaction is gone, a committed one stays


def test_a_mark_is_a_boundary_and_a_kill_there_stops_what_follows(tmp_path) -> None:
    flag = tmp_path / "after"

    def run(tracer):
        tracer.mark("publish")
        flag.write_text("ran on")

    life = live(run, kill_after=1)
    assert life.killed and [b.what for b in life.boundaries] == ["publish"]
    assert not flag.exists()


def test_outcomes_are_data_and_a_death_without_the_announcement_is_no_kill(tmp_path) -> None:
    assert live(lambda _t: {"n": 3}).returned == {"n": 3}
    assert live(lambda _t: 1 / 0).ended == "raised ZeroDivisionError: division by zero"
    suicide = live(lambda _t: os.kill(os.getpid(), signal.SIGKILL), kill_after=1)
    assert not suicide.killed and suicide.ended == "died of signal 9"
    nothing = live(lambda _t: None, kill_after=1)  # no boundary: the kill had nowhere to fall
    assert not nothing.killed and nothing.ended == "returned"


def test_a_hung_run_is_killed_with_everything_it_started(tmp_path) -> None:
    pidfile = tmp_path / "grandchild"

    def run(_t):
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        pidfile.write_text(str(proc.pid))
        time.sleep(60)

    life = live(run, timeout=2.0)
    assert life.ended == "timed out" and not life.killed
    grandchild = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _alive(grandchild):
        time.sleep(0.05)
    assert not _alive(grandchild)


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def test_targets_are_every_boundary_or_a_seeded_sample_with_both_ends() -> None:
    assert targets(5, 12, Random(1)) == [1, 2, 3, 4, 5]
    assert targets(0, 12, Random(1)) == []
    picked = targets(100, 12, Random(7))
    assert len(picked) == 12 and picked[0] == 1 and picked[-1] == 100
    assert picked == targets(100, 12, Random(7)) != targets(100, 12, Random(8))


def test_student_code_is_what_is_neither_the_lab_nor_python() -> None:
    assert student_code("<cell 4>") and student_code("/tmp/ipykernel_12/3517364732.py")
    assert student_code("/home/ana/ex08_tasks.py")
    assert not student_code("<frozen importlib._bootstrap>")
    assert not student_code(sqlite3.__file__)
    assert not student_code(describe.__code__.co_filename)


def test_a_script_run_by_killrun_dies_right_after_its_commit(tmp_path) -> None:
    from labkit.explore.killrun import read_log

    db = _fresh(tmp_path / "a.db")
    script = tmp_path / "job.py"
    script.write_text(
        "import sqlite3, sys\n"
        "conn = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "conn.execute('INSERT INTO t (x) VALUES (1)')\n"
        "conn.execute('INSERT INTO t (x) VALUES (2)')\n"
    )
    log = tmp_path / "log"
    run = [sys.executable, "-m", "labkit.explore.killrun", str(log), "1", str(script), str(db)]
    done = subprocess.run(run, capture_output=True, timeout=60)
    assert done.returncode == -signal.SIGKILL
    found, killed = read_log(log)
    assert killed == 1 and [b.words() for b in found] == ["your INSERT INTO t at line 3 of job.py"]
    assert _rows(db) == [1]  # the first insert committed itself; the second never ran


def test_a_redis_reply_of_nothing_is_no_boundary() -> None:
    from labkit.explore.killrun import _changed

    assert not _changed("XREADGROUP", [["s", []]])
    assert _changed("XREADGROUP", [["s", [("1-0", {})]]])
    assert not _changed("XAUTOCLAIM", ["0-0", [], []]) and _changed("XAUTOCLAIM", ["0-0", [1], []])
    assert not _changed("SET", None) and _changed("SET", True)
    assert not _changed("XACK", 0) and _changed("XACK", 1) and _changed("XADD", "1-0")
