"""Redis Streams count an attempt when a handler starts, and deliveries apart (issue 25).

A delivery is a read of the entry (``XREADGROUP``, ``XCLAIM``); an attempt is the job
handed to a handler. An entry read before it was due, or read in a batch by a consumer
that died before it started it, was delivered but never tried, and must not use up
``max_attempts``; a worker that died while running a job did try it. The SQL stores
count the same way (attempt counted at claim, crash loops capped on attempts). On a
real Redis; the last tests start real worker processes (``run_worker_process``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from labkit.clock import LAB_EPOCH, FakeClock
from labkit.faults import FaultPlan
from labkit.job import JobState
from labkit.world import World

pytest.importorskip("redis")

from labkit.backends.redis.store import StreamJobStore  # noqa: E402
from labkit.worker_process import WorkerProcess, run_worker_process  # noqa: E402

pytestmark = pytest.mark.services
CHARGE = {"charge": "labkit.explore.strategies:idempotency_key"}


@pytest.fixture
def prefix() -> str:
    return f"test:{uuid.uuid4().hex[:12]}"


@pytest.fixture
def store(redis_url: str, prefix: str, clock: FakeClock) -> Iterator[StreamJobStore]:
    s = StreamJobStore(redis_url, prefix, clock=clock, reclaim_idle_ms=30_000)
    yield s
    s.delete_all()
    s.close()


def test_a_job_read_before_it_was_due_is_attempt_one_for_the_worker_that_runs_it(
    store: StreamJobStore, clock: FakeClock
) -> None:
    job, _ = store.enqueue("charge", {}, key="later", run_after=clock.now() + 10, max_attempts=1)
    assert store.claim("early") is None  # XREADGROUP delivered it; not due, not started
    (held,) = store.q.pending()
    assert (held.consumer, held.deliveries) == ("early", 1)
    clock.advance(10)
    store.q.age(held.id, 60_000)  # 'early' went away; its read is idle past the threshold
    taken = store.claim("late")
    assert taken is not None, f"buried without running: {store.get(job.id).dead_reason}"
    assert (taken.attempt, taken.lease_owner) == (1, "late")
    assert store.deliveries(job.id) == 2  # the operator still sees both reads
    assert store.complete(taken).state == JobState.SUCCEEDED
    assert [(a.attempt, a.worker, a.outcome) for a in store.attempts(job.id)] == [
        (1, "late", "succeeded")
    ]


def test_a_batch_read_by_a_consumer_that_died_spends_no_attempt(
    store: StreamJobStore,
) -> None:
    for n in range(2):
        store.enqueue("charge", {"n": n}, key=f"k{n}", max_attempts=1)
    read = store.q.read_new("died", count=2)  # one XREADGROUP COUNT 2, then the consumer died
    assert len(read) == 2
    for entry in read:
        store.q.age(entry.id, 60_000)
    taken = [store.claim("rescuer"), store.claim("rescuer")]
    assert all(j is not None for j in taken), [j.state for j in store.jobs()]
    assert [(j.key, j.attempt) for j in taken if j] == [("k0", 1), ("k1", 1)]
    assert [p.deliveries for p in store.q.pending()] == [2, 2]
    assert [store.complete(j).state for j in taken if j] == [JobState.SUCCEEDED] * 2


def test_a_crash_loop_is_capped_on_attempts_and_the_deliveries_are_kept(
    store: StreamJobStore, clock: FakeClock
) -> None:
    job, _ = store.enqueue("charge", {}, key="poison", run_after=clock.now() + 10, max_attempts=2)
    assert store.claim("early") is None  # one delivery that started nothing
    clock.advance(10)
    store.q.age(store.q.pending()[0].id, 60_000)
    started = 0
    # Never completed: each worker dies and the next one reclaims the idle entry.
    while (got := store.claim(f"w{started}")) is not None:
        started += 1
        store.q.age(got.lease_token.split("|")[0], 60_000)
        assert started <= 2, "the cap did not stop the crash loop"
    dead = store.get(job.id)
    assert (dead.state, dead.error_class, dead.attempt) == (JobState.DEAD, "LeaseExpired", 2)
    assert (dead.dead_reason or "").startswith("lease expired on the last attempt (2 of 2)")
    (letter,) = store.q.dead_letters()
    assert letter.fields["deliveries"] == str(store.deliveries(job.id)) == "3"
    assert [a.outcome for a in store.attempts(job.id)] == ["lease_expired"] * 2
    assert store.q.pending() == []


# -- with real worker processes ---------------------------------------------------------


def _worker(target: str, tmp_path: Path, name: str, **options: object) -> WorkerProcess:
    return run_worker_process(
        target, CHARGE, world_path=tmp_path / "world.db", name=name,
        clock_start=LAB_EPOCH, log_path=tmp_path / f"{name}.log", **options,  # type: ignore[arg-type]
    )  # fmt: skip


def _ended(worker: WorkerProcess) -> int:
    try:
        return worker.wait(60)
    finally:
        worker.kill()  # a no-op when it ended; never left running if the wait failed


def test_a_worker_process_that_read_a_job_early_leaves_it_its_whole_attempt(
    store: StreamJobStore, redis_url: str, prefix: str, tmp_path: Path
) -> None:
    target = f"{redis_url}#prefix={prefix}&reclaim_idle_ms=30000"
    World(tmp_path / "world.db").close()
    job, _ = store.enqueue(
        "charge", {"customer": "cus_1", "amount": 100}, key="invoice:1",
        run_after=LAB_EPOCH + 10, max_attempts=1,
    )  # fmt: skip
    early = _worker(target, tmp_path, "early", mode="until_idle")
    assert _ended(early) == 0, early.log_text()
    (held,) = store.q.pending()
    assert (held.consumer, held.deliveries) == ("early", 1), "the early worker never read it"
    store.q.age(held.id, 60_000)  # the early worker is gone: its read is idle a minute
    late = _worker(target, tmp_path, "late", mode="drain")
    assert _ended(late) == 0, late.log_text()
    done = store.get(job.id)
    assert done.state == JobState.SUCCEEDED, (done.dead_reason, late.log_text())
    assert (done.attempt, store.deliveries(job.id)) == (1, 2)
    with World(tmp_path / "world.db") as world:
        assert world.count("invoice:1", "payments") == 1


def test_a_worker_process_killed_while_running_used_its_attempt(
    store: StreamJobStore, redis_url: str, prefix: str, tmp_path: Path
) -> None:
    target = f"{redis_url}#prefix={prefix}&reclaim_idle_ms=30000"
    World(tmp_path / "world.db").close()
    job, _ = store.enqueue(
        "charge", {"customer": "cus_2", "amount": 200}, key="invoice:2", max_attempts=1
    )
    plan = FaultPlan(seed=25).at("after_effect", "kill", nth=1)
    crashed = _worker(target, tmp_path, "crashed", faults=plan, mode="drain", lease_s=30)
    assert _ended(crashed) == -9 and crashed.fired(), crashed.log_text()
    assert store.get(job.id).attempt == 1  # counted when it started, before the kill
    after = _worker(target, tmp_path, "after", mode="drain", lease_s=30)
    assert _ended(after) == 0, after.log_text()
    dead = store.get(job.id)
    assert (dead.state, dead.error_class, dead.attempt) == (JobState.DEAD, "LeaseExpired", 1)
    assert (dead.dead_reason or "").startswith("lease expired on the last attempt (1 of 1)")
    assert [a.outcome for a in store.attempts(job.id)] == ["lease_expired"]
    with World(tmp_path / "world.db") as world:
        assert world.count("invoice:2", "payments") == 1
