"""Real child processes: every matrix cell SIGKILLed for real gives the in-process verdict."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from labkit.clock import LAB_EPOCH, FakeClock
from labkit.explore import crash_matrix
from labkit.faults import LOST_RESPONSE, FaultPlan
from labkit.job import JobState
from labkit.procs import WorkerProcess, run_worker_process
from labkit.store import JobStore

pytestmark = pytest.mark.slow


def test_every_cell_with_real_kills_matches_in_process() -> None:
    real = crash_matrix(real_kill=True, parallel=2)
    fake = crash_matrix(real_kill=False)
    for r, f in zip(real.rows, fake.rows, strict=True):
        assert (r.strategy, r.point) == (f.strategy, f.point)
        assert r.outcome == f.outcome and bool(r.fired) == bool(f.fired), (r, f)
        if r.fired and r.point != LOST_RESPONSE:
            assert r.fired[0].startswith(f"kill at {r.point}") and r.restarts >= 1, r
    assert real.counts()["duplicate"] == 6 and real.counts()["lost"] == 3


def test_sigterm_lets_the_worker_finish_and_exit_cleanly(tmp_path: Path) -> None:
    db = tmp_path / "jobs.db"
    with JobStore(db, FakeClock()) as store:
        store.enqueue("charge", {"customer": "c", "amount": 1}, key="k1")
    plan = FaultPlan().at("after_ack", "delay", delay=1.0)
    proc = run_worker_process(
        db,
        {"charge": "labkit.strategies:ack_late"},
        world_path=tmp_path / "world.db",
        mode="forever",
        poll_s=0.05,
        faults=plan,
        clock_start=None,
        log_path=tmp_path / "w.log",
    )
    # Real time here (SystemClock in the child): wait until the job is done, then SIGTERM.
    with JobStore(db, FakeClock(LAB_EPOCH)) as store:
        for _ in range(400):
            if store.get(1).state == JobState.SUCCEEDED:
                break
            _pause(proc)
    proc.terminate()
    assert proc.wait(30) == 0, proc.log_text()
    assert "exits after 1 jobs" in proc.log_text() and proc.fired(), proc.log_text()


def _pause(proc: WorkerProcess) -> None:
    """Wait 50 ms of real time for the child (it runs on SystemClock in this test)."""
    try:
        proc.popen.wait(timeout=0.05)
    except subprocess.TimeoutExpired:
        pass
