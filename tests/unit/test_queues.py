"""Account queues with a cap (no starvation); serial queues (one at a time, in order).

Every rule is tested on both engines: SQLite's ``AccountQueues``/``SerialQueues`` and
PostgreSQL's ``PgAccountQueues``/``PgSerialQueues`` (skipped without a PostgreSQL, a
failure in CI). What only PostgreSQL has, concurrent claimers on their own connections,
is in tests/scenarios/test_pg_queues_and_lock.py.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import pytest

from labkit.clock import FakeClock
from labkit.errors import PermanentError, TransientError
from labkit.job import Job
from labkit.patterns.queue_rules import AccountRules, SerialRules
from labkit.patterns.queues import AccountQueues, SerialQueues, simulate_accounts
from labkit.retry import RetryPolicy, constant
from labkit.store import JobStore


@dataclass
class Engine:
    """One engine's store and queue classes; ``open`` makes a store (closed after the test)."""

    name: str
    open: Callable[[FakeClock, RetryPolicy, random.Random], Any]
    account: type[AccountRules[Any]]
    serial: type[SerialRules[Any]]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.services)])
def engine(request: pytest.FixtureRequest, tmp_path) -> Iterator[Engine]:
    with ExitStack() as stack:
        if request.param == "sqlite":
            numbers = itertools.count()

            def open_sqlite(clock: FakeClock, retry: RetryPolicy, rng: random.Random) -> Any:
                path = tmp_path / f"jobs-{next(numbers)}.db"
                return stack.enter_context(JobStore(path, clock=clock, retry=retry, rng=rng))

            yield Engine("sqlite", open_sqlite, AccountQueues, SerialQueues)
            return
        dsn = request.getfixturevalue("postgres_dsn")
        schema = request.getfixturevalue("schema")  # dropped after the test
        from labkit.backends.postgres.queues import PgAccountQueues, PgSerialQueues
        from labkit.backends.postgres.store import PostgresJobStore

        def open_postgres(clock: FakeClock, retry: RetryPolicy, rng: random.Random) -> Any:
            store = PostgresJobStore(dsn, clock=clock, retry=retry, rng=rng, schema=schema)
            return stack.enter_context(store)

        yield Engine("postgres", open_postgres, PgAccountQueues, PgSerialQueues)


@pytest.fixture
def store(engine: Engine, clock: FakeClock) -> Any:
    return engine.open(clock, RetryPolicy(max_attempts=3, backoff=constant(10)), random.Random(5))


def test_an_account_at_its_cap_is_skipped(engine, store):
    q = engine.account(store, cap=2)
    for n in range(5):
        q.enqueue("big", "sync", {"n": n})
    q.enqueue("small", "sync", {"n": 0})
    first = q.claim("w1", limit=10)
    assert sorted(j.queue for j in first) == ["account:big", "account:big", "account:small"]
    assert q.running("big") == 2
    assert q.claim("w2", limit=10) == []  # big is at its cap, small has nothing left
    store.complete(first[0])
    assert [j.queue for j in q.claim("w2", limit=10)] == ["account:big"]


def test_an_expired_lease_frees_its_slot_and_the_job_is_reclaimed(engine, store, clock):
    q = engine.account(store, cap=1)
    q.enqueue("a", "sync", {"n": 0})
    q.enqueue("a", "sync", {"n": 1})
    (held,) = q.claim("w1", lease_s=30)
    assert q.claim("w2") == []
    clock.advance(31)  # w1 died; its lease ran out, so its slot is free again...
    (other,) = q.claim("w2", limit=5)  # ...but only one slot: the cap still holds
    assert other.id != held.id
    store.complete(other)
    (again,) = q.claim("w2")
    assert again.id == held.id and again.attempt == 2


def test_without_a_cap_the_flood_takes_every_worker(engine, store):
    q = engine.account(store, cap=None)
    for n in range(5):
        q.enqueue("big", "sync", {"n": n})
    q.enqueue("small", "sync", {"n": 0})
    assert {j.queue for j in q.claim("w", limit=3)} == {"account:big"}


def test_accounts_take_turns_under_the_cap(engine, store):
    q = engine.account(store, cap=3)
    for account in ("a", "b", "c"):
        for n in range(3):
            q.enqueue(account, "sync", {"n": n})
    first = q.claim("w", limit=3)
    assert sorted(j.queue for j in first) == ["account:a", "account:b", "account:c"]
    only_a = engine.account(store, cap=None).claim("w", limit=3, accounts=["a"])
    assert {j.queue for j in only_a} == {"account:a"} and len(only_a) == 2


def test_flooding_account_does_not_starve_the_others_with_a_cap(tmp_path):
    flood = {"big": 60, "small-1": 3, "small-2": 3}
    results = {}
    for cap in (None, 2):
        store = JobStore(tmp_path / f"cap-{cap}.db", clock=FakeClock())
        results[cap] = simulate_accounts(store, flood, workers=3, service_s=1.0, cap=cap)
        assert {a: w.jobs for a, w in results[cap].items()} == flood  # every job ran
        print(cap, {a: (w.mean_wait, w.max_wait) for a, w in results[cap].items()})
    for small in ("small-1", "small-2"):
        # Without a cap they queue behind all 60 jobs: 60 / 3 workers = 20 s.
        assert results[None][small].mean_wait >= 20
        # With a cap of 2 the third worker serves the small accounts at once.
        assert results[2][small].max_wait <= 2
    # The price: once only the flood is left, the third worker idles, so the flood's
    # last job waits longer than without the cap.
    assert results[2]["big"].max_wait > results[None]["big"].max_wait


def test_serial_queue_runs_one_job_per_key_in_order(engine, store):
    q = engine.serial(store)
    ids = [q.enqueue("order:1", "update", {"step": n})[0].id for n in range(3)]
    other = q.enqueue("order:2", "update", {"step": 0})[0].id
    claimed = q.claim("w", limit=10)
    assert sorted(j.id for j in claimed) == [ids[0], other]
    assert q.claim("w", limit=10) == []  # both heads are running
    done = []
    for _ in range(3):
        mine = [j for j in claimed if j.queue == "serial:order:1"]
        (job,) = mine or q.claim("w", keys=["order:1"])
        store.complete(job)
        done.append(job.id)
        claimed = []
    assert done == ids


def test_a_job_in_retry_wait_blocks_the_later_ones_of_its_key(engine, store, clock):
    q = engine.serial(store)
    first = q.enqueue("order:1", "update", {"step": 0})[0]
    second = q.enqueue("order:1", "update", {"step": 1})[0]
    (job,) = q.claim("w")
    store.fail(job, TransientError("ERP timeout"))
    assert store.get(first.id).state == "retry_wait"
    assert q.claim("w") == []  # the second must not overtake the first
    clock.advance(10)
    (retry,) = q.claim("w")
    assert retry.id == first.id and retry.attempt == 2
    store.complete(retry)
    assert [j.id for j in q.claim("w")] == [second.id]


def test_a_dead_head_stops_blocking(engine, store):
    q = engine.serial(store)
    q.enqueue("order:1", "update", {"step": 0})
    second = q.enqueue("order:1", "update", {"step": 1})[0]
    (job,) = q.claim("w")
    store.fail(job, PermanentError("order 1 does not exist in the ERP", status=404))
    assert [j.id for j in q.claim("w")] == [second.id]


def test_queue_options_are_checked(engine, store):
    with pytest.raises(ValueError, match="cap"):
        engine.account(store, cap=0)
    with pytest.raises(ValueError, match="queue="):
        engine.account(store).enqueue("a", "k", {}, queue="x")
    with pytest.raises(ValueError, match="serial key is empty"):
        engine.serial(store).enqueue("", "k", {})


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_serial_keys_never_overlap_and_finish_in_order_while_jobs_fail_and_retry(engine, seed):
    # Three workers, four keys, 30% of runs fail with a 503 and retry after a jittered
    # backoff; simulated time moves from one job completion to the next.
    rng = random.Random(seed)
    clock = FakeClock()
    policy = RetryPolicy(max_attempts=50, backoff=constant(3))
    store = engine.open(clock, policy, random.Random(seed))
    q = engine.serial(store)
    enqueued: dict[str, list[int]] = {}
    for n in range(30):
        key = f"order:{rng.randrange(4)}"
        job, _ = q.enqueue(key, "update", {"step": n}, max_attempts=50)
        enqueued.setdefault(key, []).append(job.id)
    running: dict[int, tuple[float, Job]] = {}
    finished: dict[str, list[int]] = {key: [] for key in enqueued}
    failures = 0
    while True:
        free = 3 - len(running)
        for job in q.claim("w", limit=free, lease_s=100) if free else []:
            assert all(other.queue != job.queue for _, other in running.values()), "overlap"
            running[job.id] = (clock.now() + rng.uniform(0.1, 2.0), job)
        if not running:
            waiting = store.jobs("retry_wait")
            if not waiting:
                break
            clock.set(min(j.run_after for j in waiting))
            continue
        job_id, (ends, job) = min(running.items(), key=lambda item: item[1][0])
        clock.set(max(clock.now(), ends))
        del running[job_id]
        if rng.random() < 0.3:
            store.fail(job, TransientError("ERP answered 503", status=503))
            failures += 1
        else:
            store.complete(job)
            finished[job.queue[len("serial:") :]].append(job.id)
    print(f"{engine.name}, seed {seed}: {failures} failed runs retried")
    assert failures > 0  # the retries really happened
    assert finished == enqueued  # every job once, each key in enqueue order
