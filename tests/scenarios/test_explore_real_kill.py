"""Real child processes: every matrix cell SIGKILLed for real gives the in-process verdict."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import student_handlers

from labkit.clock import LAB_EPOCH, FakeClock
from labkit.explore import Scenario, crash_matrix, replay, run_scenario
from labkit.faults import LOST_RESPONSE, FaultPlan
from labkit.job import JobState
from labkit.store import JobStore
from labkit.worker import Handler
from labkit.worker_process import WorkerProcess, run_worker_process
from labkit.world import World

pytestmark = pytest.mark.slow


def test_every_cell_with_real_kills_matches_in_process() -> None:
    real = crash_matrix(real_kill=True, parallel=2)
    fake = crash_matrix(real_kill=False)
    for r, f in zip(real.rows, fake.rows, strict=True):
        assert (r.strategy, r.point) == (f.strategy, f.point)
        assert r.outcome == f.outcome and bool(r.fired) == bool(f.fired), (r, f)
        assert (r.effects, r.attempts, r.hits) == (f.effects, f.attempts, f.hits), (r, f)
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
        {"charge": "labkit.explore.strategies:ack_late"},
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


def test_sigterm_in_the_middle_of_a_job_finishes_that_job_then_exits(tmp_path: Path) -> None:
    db = tmp_path / "jobs.db"
    with JobStore(db, FakeClock()) as store:
        for n in range(3):
            store.enqueue("charge", {"customer": "c", "amount": 1 + n}, key=f"k{n}")
    # One real second inside the first job, after the charge and before its commit.
    plan = FaultPlan().at("before_commit", "delay", delay=1.0, nth=1)
    proc = run_worker_process(
        db,
        {"charge": "labkit.explore.strategies:ack_late"},
        world_path=tmp_path / "world.db",
        mode="forever",
        poll_s=0.05,
        faults=plan,
        clock_start=None,
        log_path=tmp_path / "w.log",
    )
    for _ in range(400):  # until the child says the delay started (it is mid-job now)
        if proc.fired() or proc.returncode is not None:
            break
        _pause(proc)
    proc.terminate()
    assert proc.wait(30) == 0, proc.log_text()
    assert proc.fired() == ["FAULT fired delay at before_commit key=k0 n=1"]
    with JobStore(db, FakeClock(LAB_EPOCH)) as store:
        # The job it was in finished; the two it had not started wait for the next worker.
        assert store.get_by_key("k0").state == JobState.SUCCEEDED  # type: ignore[union-attr]
        assert store.counts()["pending"] == 2
    assert "exits after 1 jobs" in proc.log_text()


# Each row: a strategy killed for real between the world's commit and its reply, and
# the calls the world logged (the killed call never logged a reply).
@pytest.mark.parametrize(
    ("strategy", "outcome", "effects", "calls"),
    [
        ("ack_late", "duplicate", 2, ["ok"]),  # the retry charged again
        ("idempotency_key", "ok", 1, ["replayed"]),  # the retry got the stored reply
        ("reconcile", "ok", 1, []),  # the retry found the charge and did not call again
    ],
)
def test_an_effect_is_durable_before_the_world_replies(
    tmp_path: Path, strategy: str, outcome: str, effects: int, calls: list[str]
) -> None:
    plan = FaultPlan(seed=3).at(LOST_RESPONSE, "kill", nth=1)
    row = run_scenario(strategy, plan, real_kill=True, workdir=tmp_path)
    assert row.fired == ("kill at lost_response n=1",) and row.restarts == 1, row
    assert (row.outcome, row.effects) == (outcome, effects), row
    with World(tmp_path / "world.db", FakeClock(LAB_EPOCH)) as world:
        assert [c.outcome for c in world.calls("payments")] == calls


# Each row: a student's handler (its own module), killed for real at the student's own
# point, and the verdict the world gives after a new process takes over.
@pytest.mark.parametrize(
    ("handler", "outcome"),
    [
        (student_handlers.charge_then_note, "ok"),  # Idempotency-Key: the retry is replayed
        (student_handlers.charge_twice_unsafely, "duplicate"),  # no key: charged again
    ],
)
def test_a_student_kills_their_own_handler_at_their_own_point(
    handler: Handler, outcome: str
) -> None:
    scenario = Scenario(handler.__name__, {"charge": handler}, service="payments")
    plan = FaultPlan(seed=8).at("between_charge_and_note", "kill", nth=1)
    real = run_scenario(scenario, plan, real_kill=True)
    assert real.fired == ("kill at between_charge_and_note n=1",) and real.restarts == 1
    assert real.outcome == outcome
    fake = run_scenario(scenario, FaultPlan(seed=8).at("between_charge_and_note", "crash", nth=1))
    assert (fake.outcome, fake.effects, fake.hits) == (real.outcome, real.effects, real.hits)
    assert replay(real.replay, scenario) == real
