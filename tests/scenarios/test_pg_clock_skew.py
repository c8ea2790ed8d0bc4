"""Workers whose clocks disagree share one PostgreSQL store: leases follow the server's clock.

Each worker is a real process; one is given a real clock 30 s ahead or behind
(``run_worker_process(clock_skew_s=...)``, ``SystemClock(skew_s=...)``), as NTP trouble
or a paused VM gives a machine. Judged by the application's clock, the worker ahead
takes a job another holds under a live lease (and buries a last attempt as dead), and
the worker behind sees new jobs late and loses its own leases at once. Each test reads
the skewed child's log to prove its clock really was off.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from labkit.backends import spec
from labkit.job import JobState
from labkit.worker_process import WorkerProcess, run_worker_process

pytest.importorskip("psycopg")
from labkit.backends.postgres.store import PostgresJobStore  # noqa: E402

pytestmark = pytest.mark.services
HANDLERS = {"slow": "slow_handlers:sleep_for"}
LEASE_S = 10.0
WORK_S = 3.0


@pytest.fixture
def store_spec(postgres_dsn: str) -> Iterator[str]:
    name = f"skew_{uuid.uuid4().hex[:12]}"
    url = f"{postgres_dsn}#schema={name}"
    yield url
    spec.drop(url)


def _worker(url: str, tmp_path: Path, name: str, skew_s: float) -> WorkerProcess:
    return run_worker_process(
        url,
        HANDLERS,
        name=name,
        lease_s=LEASE_S,
        clock_skew_s=skew_s,
        mode="until_idle",
        log_path=tmp_path / f"{name}.log",
    )


def _wait_running(store: PostgresJobStore, job_id: int, worker: WorkerProcess) -> None:
    deadline = time.monotonic() + 30
    while store.get(job_id).state != JobState.RUNNING:
        assert worker.returncode is None, f"the worker ended early:\n{worker.log_text()}"
        assert time.monotonic() < deadline, f"the job never started:\n{worker.log_text()}"
        time.sleep(0.05)


def _finish(worker: WorkerProcess) -> str:
    assert worker.wait(60) == 0, worker.log_text()
    return worker.log_text()


def test_a_worker_whose_clock_runs_ahead_leaves_a_live_lease_alone(
    postgres_dsn: str, store_spec: str, tmp_path: Path
) -> None:
    url, _, _ = store_spec.partition("#")
    with PostgresJobStore(url, schema=store_spec.rpartition("=")[2]) as store:
        # One attempt only: a lease taken for expired would also bury it as dead.
        job, _ = store.enqueue("slow", {"seconds": WORK_S}, key="slow:1", max_attempts=1)
        workers = [_worker(store_spec, tmp_path, "honest", 0.0)]
        try:
            _wait_running(store, job.id, workers[0])
            workers.append(_worker(store_spec, tmp_path, "ahead", +30.0))
            ahead_log = _finish(workers[1])
            honest_log = _finish(workers[0])
        finally:
            for each in workers:
                each.kill()
        assert "clock SystemClock(skew_s=30)" in ahead_log, "the skew was never in effect"
        assert "exits after 0 jobs" in ahead_log, ahead_log
        assert "exits after 1 jobs" in honest_log, honest_log
        done = store.get(job.id)
        assert (done.state, done.attempt) == (JobState.SUCCEEDED, 1), honest_log + ahead_log


def test_a_worker_whose_clock_runs_behind_sees_new_jobs_and_keeps_its_lease(
    postgres_dsn: str, store_spec: str, tmp_path: Path
) -> None:
    url, _, _ = store_spec.partition("#")
    with PostgresJobStore(url, schema=store_spec.rpartition("=")[2]) as store:
        job, _ = store.enqueue("slow", {"seconds": WORK_S}, key="slow:2")
        workers = [_worker(store_spec, tmp_path, "behind", -30.0)]
        try:
            # Judged by its own clock the job is not due for 30 s: it would exit idle.
            _wait_running(store, job.id, workers[0])
            workers.append(_worker(store_spec, tmp_path, "honest", 0.0))
            honest_log = _finish(workers[1])
            behind_log = _finish(workers[0])
        finally:
            for each in workers:
                each.kill()
        assert "clock SystemClock(skew_s=-30)" in behind_log, "the skew was never in effect"
        assert "exits after 0 jobs" in honest_log, "the honest worker took a live lease"
        assert "exits after 1 jobs" in behind_log, behind_log
        done = store.get(job.id)
        assert (done.state, done.attempt) == (JobState.SUCCEEDED, 1), honest_log + behind_log
