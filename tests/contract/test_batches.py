"""The batched paths, on every backend: ``enqueue_many`` and the one-statement ``complete_many``.

Both exist for throughput (bench/NOTES.md), and neither may bend a rule of the single-job
path: a batch enqueue keeps the key rules of ``enqueue`` and is all or nothing; a batch
completion keeps the fence of ``complete`` per job and closes each attempt in the history.
What each returns is compared with what the database holds afterwards.
"""

from __future__ import annotations

import random

import pytest

from labkit.clock import FakeClock
from labkit.errors import IdempotencyConflict
from labkit.job import JobState


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(make_store, clock):
    return make_store(clock, rng=random.Random(7))


def _row(job):
    """What enqueue decides about a job, without the id and the generated key."""
    return (job.kind, job.queue, job.payload, job.fingerprint, job.state, job.attempt,
            job.max_attempts, job.run_after, job.created_at)


def test_enqueue_many_accepts_what_enqueue_would_in_order(make_store, store, clock):
    payloads = [{"i": i, "text": "ação"} for i in range(5)] + [[1, 2], "x", None]
    keys = [f"k{i}" for i in range(len(payloads))]
    got = store.enqueue_many("charge", payloads, keys=keys, queue="q", max_attempts=3,
                             run_after=clock.now() + 5)
    assert [created for _, created in got] == [True] * len(payloads)
    assert len({job_id for job_id, _ in got}) == len(payloads)
    one_by_one = make_store(clock)
    for (job_id, _), payload, key in zip(got, payloads, keys, strict=True):
        single, _ = one_by_one.enqueue("charge", payload, key=key, queue="q", max_attempts=3,
                                       run_after=clock.now() + 5)
        stored = store.get(job_id)
        assert stored.key == key and _row(stored) == _row(single)
    assert store.counts()["pending"] == len(payloads)


def test_enqueue_many_keeps_the_key_rules(store):
    (first, created), = store.enqueue_many("k", [{"n": 1}], keys=["same"])
    assert created
    got = store.enqueue_many("k", [{"n": 1}, {"n": 2}, {"n": 2}, {"n": 3}],
                             keys=["same", "dup", "dup", None])
    assert got[0] == (first, False)  # an existing key with the same payload: its job
    assert got[1][1] and got[2] == (got[1][0], False)  # twice in one batch: created once
    assert got[3][1]
    assert store.get(got[3][0]).key not in ("same", "dup")  # no key: a generated one
    assert store.counts()["pending"] == 3


@pytest.mark.parametrize("where", [0, 2, 4])
def test_a_conflict_anywhere_in_the_batch_writes_nothing(store, where):
    store.enqueue("k", {"n": "original"}, key="taken")
    payloads = [{"n": i} for i in range(5)]
    keys = [f"new{i}" for i in range(5)]
    keys[where] = "taken"
    with pytest.raises(IdempotencyConflict, match="taken"):
        store.enqueue_many("k", payloads, keys=keys)
    assert sum(store.counts().values()) == 1
    assert all(store.get_by_key(k) is None for k in keys if k != "taken")


def test_a_conflict_inside_the_batch_itself_writes_nothing(store):
    with pytest.raises(IdempotencyConflict):
        store.enqueue_many("k", [{"n": 1}, {"n": 2}], keys=["twice", "twice"])
    assert sum(store.counts().values()) == 0


def test_bad_batch_arguments_are_refused_before_anything_is_written(store):
    with pytest.raises(ValueError, match="keys"):
        store.enqueue_many("k", [{"n": 1}, {"n": 2}], keys=["only-one"])
    with pytest.raises(ValueError, match="max_attempts"):
        store.enqueue_many("k", [{"n": 1}], max_attempts=0)
    with pytest.raises(ValueError, match="kind"):
        store.enqueue_many("", [{"n": 1}, {"n": 2}])
    assert store.enqueue_many("k", []) == []
    assert sum(store.counts().values()) == 0


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_complete_many_finishes_exactly_the_holders_and_returns_the_stored_jobs(
    store, clock, seed
):
    rng = random.Random(seed)
    n = rng.randint(5, 30)
    store.enqueue_many("k", [{"i": i} for i in range(n)])
    batch = store.claim_many("w1", n, lease_s=10)
    assert len(batch) == n
    clock.advance(11)
    lost = rng.sample(batch, rng.randint(0, n // 2))  # their leases expire and move on
    taken = store.claim_many("w2", len(lost), lease_s=10) if lost else []
    stolen = {j.id for j in taken}
    assert len(stolen) == len(lost)
    results = [rng.choice([None, 0, "ok", {"n": i}, (i, "t")]) for i in range(n)]
    clock.advance(1)
    done = store.complete_many(batch, results=results)
    assert sorted(j.id for j in done) == sorted(j.id for j in batch if j.id not in stolen)
    for job in done:
        assert job == store.get(job.id)  # what it returns is what the database holds
        assert job.state == JobState.SUCCEEDED and job.lease_token is None
        assert store.attempts(job.id)[-1].outcome == "succeeded"
    for job_id in stolen:
        assert store.get(job_id).state == JobState.RUNNING
        assert store.get(job_id).lease_owner == "w2"
    assert store.counts()["succeeded"] == n - len(stolen)


def test_complete_many_twice_changes_nothing_the_second_time(store):
    store.enqueue_many("k", [{"i": i} for i in range(3)])
    batch = store.claim_many("w", 3)
    first = store.complete_many(batch + batch[:1], results=[1, 2, 3, 4])
    assert sorted(j.id for j in first) == sorted(j.id for j in batch)
    assert store.complete_many(batch) == []
    assert [store.get(j.id).result for j in batch] == [1, 2, 3]
    with pytest.raises(ValueError, match="results"):
        store.complete_many(batch, results=[1])
    assert store.complete_many([]) == []


@pytest.mark.parametrize("result", [None, 7, "done", {"ok": [1, 2]}, ("a", 1)])
def test_complete_returns_the_stored_row_without_reading_it_back(store, clock, result):
    # complete rebuilds its Job from the caller's one (the statement returns two columns):
    # after a heartbeat moved the lease, it must still equal what the database holds.
    store.enqueue("k", {"n": 1}, key="one")
    job = store.claim("w", lease_s=10)
    clock.advance(3)
    store.heartbeat(job, lease_s=10)
    clock.advance(1)
    done = store.complete(job, result)
    assert done == store.get(job.id)
    assert done.state == JobState.SUCCEEDED and done.updated_at == clock.now()
