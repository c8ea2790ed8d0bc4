"""The worker: each boundary, outcomes, heartbeat, graceful stop, zombies."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from labkit.clock import FakeClock
from labkit.errors import CircuitOpen, LeaseLost, SimulatedCrash, TransientError
from labkit.faults import POINTS, FaultPlan
from labkit.job import Job, JobState
from labkit.store import JobStore
from labkit.worker import Context, Worker, WorkerCrashed, fires
from labkit.world import World


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(tmp_path: Path, clock: FakeClock) -> JobStore:
    return JobStore(tmp_path / "jobs.db", clock)


def charge(job: Job, ctx: Context) -> Any:
    return ctx.world.payments.charge("cus", job.payload["amount"], key=job.key)


def test_points_fire_in_ack_late_order(store: JobStore) -> None:
    store.enqueue("noop", {}, key="k")
    plan = FaultPlan()
    done = Worker(store, {"noop": lambda job, ctx: "ok"}, faults=plan).run_once()
    assert done is not None and done.state == JobState.SUCCEEDED and done.result == "ok"
    assert [h.point for h in plan.hits] == list(POINTS)
    assert {h.key for h in plan.hits} == {"k"}


def test_points_fire_in_ack_first_order(store: JobStore) -> None:
    store.enqueue("noop", {}, key="k")
    plan = FaultPlan()
    Worker(store, {"noop": lambda job, ctx: None}, faults=plan, ack="first").run_once()
    assert [h.point for h in plan.hits] == [
        "after_claim",
        "before_commit",
        "after_commit",
        "after_ack",
        "before_effect",
        "after_effect",
    ]


# Each row: where the worker crashes, and whether the effect and the ack happened by then.
@pytest.mark.parametrize(
    ("point", "effects", "state"),
    [
        ("after_claim", 0, JobState.RUNNING),  # claimed, nothing done
        ("before_effect", 0, JobState.RUNNING),  # about to call the handler
        ("after_effect", 1, JobState.RUNNING),  # charged, not recorded: the dangerous gap
        ("before_commit", 1, JobState.RUNNING),  # charged, about to record
        ("after_commit", 1, JobState.SUCCEEDED),  # recorded (and, in SQLite, acked)
        ("after_ack", 1, JobState.SUCCEEDED),  # everything done
    ],
)
def test_crash_at_each_boundary_leaves_this_state(
    tmp_path: Path, store: JobStore, clock: FakeClock, point: str, effects: int, state: JobState
) -> None:
    plan = FaultPlan(seed=3).at(point, "crash", nth=1)
    world = World(tmp_path / "world.db", clock, faults=plan)
    job, _ = store.enqueue("charge", {"amount": 100}, key="inv:1")
    worker = Worker(store, {"charge": charge}, faults=plan, world=world)
    with pytest.raises(SimulatedCrash):
        worker.run_until_idle()
    assert plan.fired_at(point, "crash")
    assert world.count("inv:1") == effects and store.get(job.id).state == state
    with pytest.raises(WorkerCrashed):  # a dead worker stays dead
        worker.run_once()


def test_a_new_worker_takes_over_after_the_lease(
    tmp_path: Path, store: JobStore, clock: FakeClock
) -> None:
    plan = FaultPlan().at("after_claim", "crash", nth=1)
    world = World(tmp_path / "world.db", clock, faults=plan)
    job, _ = store.enqueue("charge", {"amount": 100}, key="inv:1")
    with pytest.raises(SimulatedCrash):
        Worker(store, {"charge": charge}, faults=plan, world=world, lease_s=30).run_once()
    second = Worker(store, {"charge": charge}, name="w2", faults=plan, world=world, lease_s=30)
    assert second.run_once() is None  # the lease still holds
    clock.advance(31)
    assert second.run_once().state == JobState.SUCCEEDED  # type: ignore[union-attr]
    assert plan.fired and [a.outcome for a in store.attempts(job.id)] == [
        "lease_expired",
        "succeeded",
    ]


def test_handler_points_declared_with_fires_replace_the_workers(store: JobStore) -> None:
    @fires("before_effect", "after_effect")
    def careful(job: Job, ctx: Context) -> None:
        ctx.point("before_effect")
        ctx.point("my_own_spot")
        ctx.point("after_effect")

    store.enqueue("careful", {}, key="k")
    plan = FaultPlan().at("my_own_spot", "crash")
    with pytest.raises(SimulatedCrash):
        Worker(store, {"careful": careful}, faults=plan).run_once()
    assert [h.point for h in plan.hits] == ["after_claim", "before_effect", "my_own_spot"]
    assert plan.fired_at("my_own_spot")


def test_transient_error_goes_to_retry_wait_then_succeeds(
    store: JobStore, clock: FakeClock
) -> None:
    plan = FaultPlan().at("before_effect", "raise_transient", nth=1)
    job, _ = store.enqueue("noop", {}, key="k")
    worker = Worker(store, {"noop": lambda j, c: 1}, faults=plan)
    assert worker.run_once().state == JobState.RETRY_WAIT  # type: ignore[union-attr]
    assert worker.drain() == 1
    assert store.get(job.id).state == JobState.SUCCEEDED and plan.fired
    assert [r.outcome for r in worker.runs] == ["retry_wait", "succeeded"]


def test_unknown_kind_goes_dead_with_a_reason(store: JobStore) -> None:
    job, _ = store.enqueue("mystery", {}, key="k")
    done = Worker(store, {"noop": lambda j, c: None}).run_once()
    assert done is not None and done.state == JobState.DEAD
    assert "no handler for kind 'mystery'" in (store.get(job.id).dead_reason or "")


def test_circuit_open_snoozes_without_spending_an_attempt(
    store: JobStore, clock: FakeClock
) -> None:
    job, _ = store.enqueue("call", {}, key="k")

    def refused(j: Job, ctx: Context) -> None:
        raise CircuitOpen("erp breaker open", retry_at=ctx.clock.now() + 60)

    snoozed = Worker(store, {"call": refused}).run_once()
    assert snoozed is not None and snoozed.state == JobState.RETRY_WAIT
    assert snoozed.attempt == 0 and snoozed.run_after == clock.now() + 60
    assert snoozed.error_class == "Snoozed"


def test_heartbeat_keeps_a_long_job_from_being_taken(store: JobStore, clock: FakeClock) -> None:
    job, _ = store.enqueue("long", {}, key="k")
    taken: list[Job | None] = []

    def long(j: Job, ctx: Context) -> str:
        for _ in range(5):
            clock.advance(20)  # 100 s of work with a 30 s lease
            ctx.heartbeat()
            taken.append(store.claim("thief", lease_s=30))
        return "done"

    done = Worker(store, {"long": long}, lease_s=30).run_once()
    assert done is not None and done.state == JobState.SUCCEEDED and taken == [None] * 5


def test_a_zombie_loses_its_lease_and_changes_nothing(store: JobStore, clock: FakeClock) -> None:
    job, _ = store.enqueue("slow", {}, key="k")
    plan = FaultPlan().at("before_commit", "delay", delay=45.0)  # pauses past the 30 s lease

    def slow(j: Job, ctx: Context) -> str:
        if ctx.worker.name == "zombie":
            other = Worker(store, {"slow": lambda j2, c2: "from w2"}, name="w2")
            clock.advance(31)
            assert other.run_once().state == JobState.SUCCEEDED  # type: ignore[union-attr]
        return "from zombie"

    zombie = Worker(store, {"slow": slow}, name="zombie", faults=plan, lease_s=30)
    seen = zombie.run_once()
    assert plan.fired_at("before_commit", "delay")
    assert seen is not None and seen.result == "from w2"
    assert zombie.runs[-1].outcome == "lease_lost"
    with pytest.raises(LeaseLost):
        store.complete(job, "late")  # the stale token is fenced off for good


def test_graceful_stop_finishes_the_current_job(store: JobStore) -> None:
    for n in range(3):
        store.enqueue("step", {"n": n}, key=f"k{n}")

    def step(j: Job, ctx: Context) -> int:
        ctx.worker.stop()  # as SIGTERM would, in the middle of the first job
        return int(j.payload["n"])

    worker = Worker(store, {"step": step})
    assert worker.run_forever(poll_s=1.0) == 1
    assert store.counts()["succeeded"] == 1 and store.counts()["pending"] == 2


def test_ack_first_loses_the_work_when_the_handler_fails(
    tmp_path: Path, store: JobStore, clock: FakeClock
) -> None:
    world = World(tmp_path / "world.db", clock)
    world.payments.script("fail_before")
    job, _ = store.enqueue("charge", {"amount": 100}, key="inv:1")
    done = Worker(store, {"charge": charge}, world=world, ack="first").run_once()
    assert done is not None and done.state == JobState.SUCCEEDED
    assert world.count("inv:1") == 0 and world.calls()[0].status == 503


def test_bad_arguments_are_refused(store: JobStore) -> None:
    with pytest.raises(ValueError, match="ack must be"):
        Worker(store, {}, ack="never")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="lease_s"):
        Worker(store, {}, lease_s=0)


def test_transient_error_in_a_handler_is_retried_by_the_policy(store: JobStore) -> None:
    job, _ = store.enqueue("flaky", {}, key="k", max_attempts=2)

    def flaky(j: Job, ctx: Context) -> None:
        raise TransientError("upstream 503", status=503)

    assert Worker(store, {"flaky": flaky}).drain() == 2
    assert store.get(job.id).state == JobState.DEAD
