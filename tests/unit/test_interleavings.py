"""The race explorer: two real processes, the first stopped after each statement in turn.

A check-then-act (a SELECT, then an UPDATE on what it read) loses one schedule out of
its three whatever the machine's timing; one statement that chooses and takes never
does; a copy that holds the write lock makes the other wait, and the explorer says so.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from random import Random

from labkit.explore.interleavings import alone, one_schedule, schedules


def _db(path: Path) -> Path:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE jobs (id INTEGER PRIMARY KEY, owner TEXT)")
    conn.execute("INSERT INTO jobs (owner) VALUES (NULL)")
    conn.commit()
    conn.close()
    return path


def _check_then_act(path: Path, me: str) -> bool:
    conn = sqlite3.connect(path, isolation_level=None, timeout=10)
    try:
        free = conn.execute("SELECT id FROM jobs WHERE owner IS NULL").fetchone()
        if free is None:
            return False
        conn.execute("UPDATE jobs SET owner = coalesce(owner, '') || ? WHERE id = ?", (me, 1))
        return True
    finally:
        conn.close()


def _one_statement(path: Path, me: str) -> bool:
    conn = sqlite3.connect(path, isolation_level=None, timeout=10)
    try:
        row = conn.execute(
            "UPDATE jobs SET owner = ? WHERE owner IS NULL RETURNING id", (me,)
        ).fetchone()
        return row is not None
    finally:
        conn.close()


def _owner(path: Path) -> str:
    conn = sqlite3.connect(path)
    try:
        return str(conn.execute("SELECT owner FROM jobs").fetchone()[0])
    finally:
        conn.close()


def test_a_check_then_act_loses_exactly_the_schedule_between_its_check_and_its_act(
    tmp_path,
) -> None:
    first = _db(tmp_path / "probe.db")  # made here: in a copy, every statement counts
    probe = alone(lambda: _check_then_act(first, "a"))
    assert probe.ended == "returned" and probe.statements == 2
    owners = {}
    for n in range(probe.statements + 1):
        db = _db(tmp_path / f"{n}.db")
        run = one_schedule(
            lambda db=db: _check_then_act(db, "a"), lambda db=db: _check_then_act(db, "b"), n
        )
        assert run.stopped == (n < probe.statements)
        owners[n] = (_owner(db), run.first.returned, run.second.returned)
    assert owners[0] == ("b", False, True)  # stopped before anything: b ran first
    assert owners[1] == ("ba", True, True)  # stopped between the SELECT and the UPDATE: both
    assert owners[2] == ("a", True, False)  # a ran whole: b found nothing


def test_one_statement_that_chooses_and_takes_wins_every_schedule(tmp_path) -> None:
    for n in range(2):
        db = _db(tmp_path / f"{n}.db")
        run = one_schedule(
            lambda db=db: _one_statement(db, "a"), lambda db=db: _one_statement(db, "b"), n
        )
        assert [run.first.returned, run.second.returned].count(True) == 1
        assert _owner(db) in ("a", "b")


def test_a_copy_holding_the_write_lock_makes_the_other_wait_then_both_finish(tmp_path) -> None:
    db = _db(tmp_path / "lock.db")

    def locked(me: str) -> bool:
        conn = sqlite3.connect(db, isolation_level=None, timeout=10)
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("UPDATE jobs SET owner = coalesce(owner, '') || ?", (me,))
            conn.execute("COMMIT")
            return True
        finally:
            conn.close()

    started = time.monotonic()
    run = one_schedule(lambda: locked("a"), lambda: locked("b"), 1, grace=0.5)
    assert run.stopped and run.second_blocked
    assert run.first.ended == run.second.ended == "returned"
    assert _owner(db) == "ab"  # a went on after the grace, then b got the lock
    assert time.monotonic() - started >= 0.5


def test_a_hung_copy_is_reported_and_killed(tmp_path) -> None:
    run = one_schedule(lambda: time.sleep(60), lambda: None, 0, timeout=2.0)
    assert not run.stopped and run.first.ended == "hung" and run.second.ended == "returned"


def test_schedules_cover_every_stop_or_a_seeded_sample_with_both_ends() -> None:
    assert schedules(2, 10, Random(1)) == [0, 1, 2]
    picked = schedules(50, 10, Random(3))
    assert len(picked) == 10 and picked[0] == 0 and picked[-1] == 50
