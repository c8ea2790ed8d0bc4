"""Workers whose clocks disagree share one Redis Streams store: leases follow Redis's clock.

Each worker is a real process (``skewed_stream_worker.py``) whose store is given
``SystemClock(skew_s=...)``, the clock of a machine 30 s ahead or behind. Judged by that
clock, the worker ahead takes a job another holds under a live 10 s lease (and the
holder's completion is refused), and the worker behind sees a new job 30 s late and
loses its own lease at once. Each test reads the skewed child's first line to prove the
skew was in effect, and holds the job in its handler until the other worker has asked
for work, so the other really looked while the lease was live.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from labkit.clock import SystemClock
from labkit.job import JobState

pytest.importorskip("redis")

from labkit.backends.redis.store import StreamJobStore  # noqa: E402

pytestmark = pytest.mark.services
CHILD = Path(__file__).with_name("skewed_stream_worker.py")
LEASE_S = 10.0
SKEW_S = 30.0


@pytest.fixture
def store(redis_url: str) -> Iterator[StreamJobStore]:
    s = StreamJobStore(redis_url, f"test:skew:{uuid.uuid4().hex[:12]}", clock=SystemClock())
    yield s
    s.delete_all()
    s.close()


@pytest.fixture
def start(store: StreamJobStore, redis_url: str) -> Iterator[Callable[..., Any]]:
    """``start(name, skew_s, ask_s, release=None)``: a worker process; killed whole at the end."""
    procs: list[subprocess.Popen[str]] = []

    def spawn(name: str, skew_s: float, ask_s: float, release: Path | None = None) -> Any:
        spec = {
            "url": redis_url,
            "prefix": store.prefix,
            "name": name,
            "skew_s": skew_s,
            "lease_s": LEASE_S,
            "ask_s": ask_s,
            "release": release and str(release),
        }
        procs.append(subprocess.Popen(
            [sys.executable, str(CHILD), json.dumps(spec)], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, start_new_session=True,  # its own group
        ))  # fmt: skip
        return procs[-1]

    yield spawn
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=60)


def _report(proc: subprocess.Popen[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The child's first line (its clocks) and last line (its runs)."""
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 0, f"worker exited {proc.returncode}:\n{err[-3000:]}"
    lines = out.strip().splitlines()
    return json.loads(lines[0]), json.loads(lines[-1])


def _wait_held_by(store: StreamJobStore, job_id: int, name: str, proc: Any) -> None:
    deadline = time.monotonic() + 30
    while (job := store.get(job_id)).lease_owner != name or job.state != JobState.RUNNING:
        if proc.poll() is not None or time.monotonic() > deadline:
            out, err = proc.communicate(timeout=10)
            pytest.fail(f"{name} never took job {job_id} (it is {job.state}):\n{out}{err[-2000:]}")
        time.sleep(0.02)


def _skew_in_effect(clocks: dict[str, Any], skew_s: float) -> None:
    assert abs(clocks["given_minus_real"] - skew_s) < 1.0, clocks


def _store_reads_redis(clocks: dict[str, Any]) -> None:
    assert abs(clocks["store_minus_real"]) < 1.0, clocks
    assert clocks["store_clock"].startswith("ServerClock"), clocks


def test_a_worker_30s_ahead_leaves_a_live_lease_alone(
    store: StreamJobStore, start: Callable[..., Any], tmp_path: Path
) -> None:
    # One attempt: a live lease taken for expired would also bury the job as dead.
    job, _ = store.enqueue("slow", {}, key="slow:ahead", max_attempts=1)
    release = tmp_path / "release"
    healthy = start("healthy", 0.0, ask_s=30.0, release=release)
    _wait_held_by(store, job.id, "healthy", healthy)
    ahead = start("ahead", +SKEW_S, ask_s=2.0)
    ahead_clocks, ahead_runs = _report(ahead)
    release.touch()  # the healthy worker finishes only after the other one gave up
    _clocks, healthy_runs = _report(healthy)
    _skew_in_effect(ahead_clocks, +SKEW_S)
    assert ahead_runs["runs"] == [], f"the worker ahead took a live lease: {ahead_runs}"
    assert healthy_runs["runs"] == [["slow:ahead", 1, "succeeded"]], healthy_runs
    _store_reads_redis(ahead_clocks)
    done = store.get(job.id)
    assert (done.state, done.attempt, done.result) == (JobState.SUCCEEDED, 1, {"by": "healthy"})


def test_a_worker_30s_behind_sees_a_new_job_at_once_and_keeps_its_lease(
    store: StreamJobStore, start: Callable[..., Any], tmp_path: Path
) -> None:
    job, _ = store.enqueue("slow", {}, key="slow:behind")
    release = tmp_path / "release"
    # Judged by its own clock the job is not due for 30 s: it would give up after 10.
    behind = start("behind", -SKEW_S, ask_s=10.0, release=release)
    _wait_held_by(store, job.id, "behind", behind)
    healthy = start("healthy", 0.0, ask_s=2.0)
    _clocks, healthy_runs = _report(healthy)
    release.touch()
    behind_clocks, behind_runs = _report(behind)
    _skew_in_effect(behind_clocks, -SKEW_S)
    assert healthy_runs["runs"] == [], f"the healthy worker took a live lease: {healthy_runs}"
    assert behind_runs["runs"] == [["slow:behind", 1, "succeeded"]], behind_runs
    assert behind_runs["claimed_after_s"][0] < 10.0, behind_runs
    _store_reads_redis(behind_clocks)
    done = store.get(job.id)
    assert (done.state, done.attempt, done.result) == (JobState.SUCCEEDED, 1, {"by": "behind"})
