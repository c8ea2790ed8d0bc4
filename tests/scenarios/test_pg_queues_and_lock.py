"""PostgreSQL beyond what SQLite can show: claimers racing on their own connections
against account caps and serial keys, a cross-host lock, and the job store under several
real worker processes.

Each test uses its own schema (dropped afterwards) or its own lock name.
"""

from __future__ import annotations

import random
import signal
import threading
import uuid
from collections.abc import Iterator

import pytest

from labkit.clock import LAB_EPOCH, FakeClock
from labkit.errors import AlreadyRunning
from labkit.retry import RetryPolicy, constant

psycopg = pytest.importorskip("psycopg")

from labkit.backends import spec  # noqa: E402
from labkit.backends.postgres.lock import hold_in_subprocess, single_instance_pg  # noqa: E402
from labkit.backends.postgres.queues import PgAccountQueues, PgSerialQueues  # noqa: E402
from labkit.backends.postgres.store import PostgresJobStore  # noqa: E402

pytestmark = pytest.mark.services


@pytest.fixture
def schema(postgres_dsn: str) -> Iterator[str]:
    name = f"pgq_{uuid.uuid4().hex[:12]}"
    yield name
    spec.drop(f"{postgres_dsn}#schema={name}")
    with psycopg.connect(postgres_dsn) as conn:
        left = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", [name]).fetchall()
    assert left == [], f"schema {name} left behind"


@pytest.fixture
def store(postgres_dsn: str, schema: str, clock: FakeClock) -> Iterator[PostgresJobStore]:
    policy = RetryPolicy(max_attempts=3, backoff=constant(10))
    with PostgresJobStore(
        postgres_dsn, clock=clock, retry=policy, rng=random.Random(5), schema=schema
    ) as s:
        yield s


# The account and serial queue rules themselves run on both engines in
# tests/unit/test_queues.py; here is what only real concurrency on PostgreSQL shows.


def test_queue_classes_refuse_a_store_of_the_other_engine(store, tmp_path):
    from labkit.patterns.queues import AccountQueues, SerialQueues
    from labkit.store import JobStore

    # SQLite's statements on PostgreSQL (or the reverse) would fail later and obscurely.
    with pytest.raises(TypeError, match="AccountQueues needs a JobStore, not a PostgresJobStore"):
        AccountQueues(store)
    with pytest.raises(TypeError, match="SerialQueues needs a JobStore"):
        SerialQueues(store)
    with JobStore(tmp_path / "jobs.db") as sqlite_store:
        with pytest.raises(TypeError, match="PgAccountQueues needs a PostgresJobStore"):
            PgAccountQueues(sqlite_store)
        with pytest.raises(TypeError, match="PgSerialQueues needs a PostgresJobStore"):
            PgSerialQueues(sqlite_store)


def _claim_at_once(dsn: str, schema: str, n: int, make_queues, now: float) -> list[int]:
    """``n`` stores on their own connections claim at the same moment; the job ids."""
    stores = [PostgresJobStore(dsn, clock=FakeClock(now), schema=schema) for _ in range(n)]
    barrier = threading.Barrier(n)
    got: list[int] = []
    lock = threading.Lock()

    def run(s: PostgresJobStore, name: str) -> None:
        barrier.wait()
        jobs = make_queues(s).claim(name, limit=2, lease_s=600)
        with lock:
            got.extend(j.id for j in jobs)

    threads = [threading.Thread(target=run, args=(s, f"w{i}")) for i, s in enumerate(stores)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        for s in stores:
            s.close()
    return got


@pytest.mark.parametrize("round_", range(3))
def test_concurrent_claimers_never_push_an_account_past_its_cap(
    postgres_dsn, schema, store, round_
):
    q = PgAccountQueues(store, cap=2)
    for n in range(20):
        q.enqueue("big", "sync", {"n": n})
    got = _claim_at_once(
        postgres_dsn, schema, 6, lambda s: PgAccountQueues(s, cap=2), store.clock.now()
    )
    assert len(got) == len(set(got)) == 2, f"round {round_}: {got}"
    assert q.running("big") == 2


def test_concurrent_claimers_take_one_head_per_serial_key(postgres_dsn, schema, store):
    q = PgSerialQueues(store)
    for n in range(10):
        q.enqueue("order:1", "update", {"step": n})
    got = _claim_at_once(postgres_dsn, schema, 6, PgSerialQueues, store.clock.now())
    assert len(got) == 1


# -- one instance across machines -----------------------------------------------------

def test_advisory_lock_refuses_a_second_instance_until_the_holder_is_killed(postgres_dsn):
    name = f"test-lock-{uuid.uuid4().hex[:8]}"
    child, pid = hold_in_subprocess(postgres_dsn, name, application_name="nightly-holder")
    try:
        with pytest.raises(AlreadyRunning, match=f"pid {pid} \\(nightly-holder\\)"):
            with single_instance_pg(postgres_dsn, name):
                pass
        child.send_signal(signal.SIGKILL)  # no unlock, no clean close
        assert child.wait(30) == -signal.SIGKILL
        # The server frees the lock once it sees the connection gone; give it a moment.
        for _ in range(100):
            try:
                with single_instance_pg(postgres_dsn, name) as conn:
                    assert conn.execute("SELECT 1").fetchone() == (1,)
                break
            except AlreadyRunning:
                threading.Event().wait(0.1)
        else:
            pytest.fail("the lock of a SIGKILLed holder was never released")
    finally:
        if child.poll() is None:
            child.kill()
        child.communicate(timeout=10)


def test_the_lock_is_given_back_on_exit_and_needs_a_name(postgres_dsn):
    name = f"test-lock-{uuid.uuid4().hex[:8]}"
    with single_instance_pg(postgres_dsn, name):
        pass
    with single_instance_pg(postgres_dsn, name):
        pass
    with pytest.raises(ValueError, match="name"):
        with single_instance_pg(postgres_dsn, ""):
            pass


# -- the job store under real worker processes ----------------------------------------


@pytest.mark.slow
def test_three_worker_processes_share_the_queue_and_never_a_job(postgres_dsn, schema, tmp_path):
    from labkit.worker_process import run_worker_process
    from labkit.world import World

    target = f"{postgres_dsn}#schema={schema}"
    clock = FakeClock(LAB_EPOCH)
    with PostgresJobStore(postgres_dsn, clock=clock, schema=schema) as s:
        for n in range(60):
            s.enqueue("charge", {"customer": f"c{n}", "amount": n + 1}, key=f"inv:{n}")
    World(tmp_path / "world.db", clock).close()
    procs = [
        run_worker_process(
            target,
            {"charge": "labkit.explore.strategies:idempotency_key"},
            world_path=tmp_path / "world.db",
            name=f"w{i}",
            clock_start=LAB_EPOCH,
            mode="until_idle",
            log_path=tmp_path / f"w{i}.log",
        )
        for i in range(3)
    ]
    try:
        codes = [p.wait(120) for p in procs]
    finally:
        for p in procs:
            if p.returncode is None:
                p.kill()
    assert codes == [0, 0, 0], [p.log_text() for p in procs]
    with PostgresJobStore(postgres_dsn, clock=clock, schema=schema) as s:
        jobs = s.jobs(limit=100)
        assert [j.state for j in jobs] == ["succeeded"] * 60
        assert all(j.attempt == 1 for j in jobs), "a job was claimed twice"
        owners = {len(s.attempts(j.id)) for j in jobs}
        assert owners == {1}
    with World(tmp_path / "world.db", clock) as world:
        assert [world.count(f"inv:{n}", "payments") for n in range(60)] == [1] * 60
