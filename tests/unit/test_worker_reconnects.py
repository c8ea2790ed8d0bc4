"""A worker outlives its store's connection: a failover or a dropped socket is waited out.

Real drops: the worker's PostgreSQL backend is terminated (``pg_terminate_backend``) and
its Redis connection killed (``CLIENT KILL ID``, that connection only: the server is
shared) from inside a handler, in the middle of a run. The worker must go on and every
job must end succeeded; each test checks that its kill really landed. A single drop
like these is absorbed by the store's own reconnect (the PostgreSQL session reopens
once, redis-py reconnects on the next command); a store that stays unreachable longer,
as in a failover, raises, and the last test shows what the worker then does: it backs
off, doubling, and asks again, instead of dying.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from labkit.clock import FakeClock
from labkit.errors import ConnectionLost
from labkit.job import JobState
from labkit.worker import BUSY_BACKOFF_S, RunOutcome, Worker

JOBS = 30
KILL_AT = (10, 20)


def test_a_worker_on_postgresql_survives_its_backend_terminated_mid_run(
    postgres_dsn: str, schema: str
) -> None:
    psycopg = pytest.importorskip("psycopg")
    from labkit.backends.postgres.store import PostgresJobStore

    clock = FakeClock()
    with PostgresJobStore(postgres_dsn, clock=clock, schema=schema) as store:
        for n in range(JOBS):
            store.enqueue("k", {"n": n}, key=f"job-{n}")
        killed: list[bool] = []

        def handler(job: Any, ctx: Any) -> dict[str, int]:
            if job.payload["n"] in KILL_AT and job.attempt == 1:
                pid = store.conn.info.backend_pid
                with psycopg.connect(postgres_dsn, autocommit=True) as admin:
                    row = admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()
                killed.append(bool(row[0]))
            return {"n": job.payload["n"]}

        worker = Worker(store, {"k": handler}, name="w1", clock=clock, lease_s=30)
        worker.drain()
        assert killed == [True, True], "the backend was not terminated: the fault never fired"
        assert store.counts()["succeeded"] == JOBS
        assert worker.crashed is None


def test_a_worker_on_redis_survives_its_connection_killed_mid_run(redis_url: str) -> None:
    pytest.importorskip("redis")
    from labkit.backends.redis.store import StreamJobStore

    clock = FakeClock()
    store = StreamJobStore(redis_url, f"test:{uuid.uuid4().hex[:12]}", clock=clock)
    try:
        for n in range(JOBS):
            store.enqueue("k", {"n": n}, key=f"job-{n}")
        killed: list[int] = []

        def handler(job: Any, ctx: Any) -> dict[str, int]:
            if job.payload["n"] in KILL_AT and job.attempt == 1:
                own = store.r.client_id()  # the connection the store's next command uses
                with type(store.r).from_url(redis_url) as admin:
                    killed.append(int(admin.client_kill_filter(_id=own)))
            return {"n": job.payload["n"]}

        worker = Worker(store, {"k": handler}, name="w1", clock=clock, lease_s=30)
        worker.drain()
        assert killed == [1, 1], "no connection was killed: the fault never fired"
        done = [j for j in store.jobs(limit=1000) if j.state == JobState.SUCCEEDED]
        assert len(done) == JOBS and worker.crashed is None
    finally:
        store.delete_all()
        store.close()


class _Flaky:
    """A store whose first claims fail as a dropped connection does, then a real one."""

    def __init__(self, inner: Any, failures: int) -> None:
        self.inner, self.failures, self.calls = inner, failures, 0
        self.clock = inner.clock

    def claim(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self.calls <= self.failures:
            raise ConnectionLost("the connection to the store was lost (a failover)")
        return self.inner.claim(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_claim_that_finds_the_store_gone_backs_off_and_asks_again(tmp_path) -> None:
    from labkit.store import JobStore

    clock = FakeClock()
    with JobStore(tmp_path / "jobs.db", clock=clock) as inner:
        inner.enqueue("k", {"n": 1}, key="only")
        store = _Flaky(inner, failures=3)
        start = clock.now()
        worker = Worker(store, {"k": lambda job, ctx: None}, name="w1", clock=clock)
        assert worker.run_once() is not None and store.calls == 4
        waited = clock.now() - start
        assert waited == pytest.approx(BUSY_BACKOFF_S * (1 + 2 + 4))  # three, doubling
        assert [r.outcome for r in worker.runs] == [RunOutcome.SUCCEEDED]
