"""A worker process really dies (SIGKILL) holding a lease; the job survives and runs again.

Each process has its own FakeClock with an explicit start, so the lease arithmetic is
exact: the child claims at T0+1 with a 30 s lease; the parent reopens the file at T0+40.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys

import pytest

from labkit.clock import LAB_EPOCH, FakeClock
from labkit.job import JobState
from labkit.store import JobStore

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs POSIX signals")

T0 = LAB_EPOCH

CHILD = """
import sys
from labkit.clock import FakeClock
from labkit.store import JobStore

store = JobStore(sys.argv[1], clock=FakeClock(float(sys.argv[2])))
job = store.claim("child-worker", lease_s=30)
print("CLAIMED", job.id, job.attempt, job.lease_token, flush=True)
sys.stdin.read()  # hold the lease until the parent kills us (stdin never closes first)
print("NOT KILLED", flush=True)
"""


def _read_line(proc: subprocess.Popen[str], timeout: float) -> str:
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    if not ready:
        proc.kill()
        pytest.fail(f"child did not report within {timeout}s: {proc.stderr.read()}")
    return proc.stdout.readline().strip()


def test_a_job_claimed_by_a_sigkilled_process_is_claimed_again_after_its_lease(tmp_path):
    path = tmp_path / "jobs.db"
    with JobStore(path, clock=FakeClock(T0)) as store:
        job, _ = store.enqueue("charge", {"invoice": 7}, key="billing:7:charge:v1")

    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path), str(T0 + 1)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        said = _read_line(child, timeout=60)
        assert said.split()[:3] == ["CLAIMED", str(job.id), "1"], said
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGKILL, "the child must have died by SIGKILL"
    assert "NOT KILLED" not in child.stdout.read()
    child_token = said.split()[3]

    clock = FakeClock(T0 + 20)  # inside the dead child's lease: nobody may take the job
    with JobStore(path, clock=clock) as store:
        assert store.counts()["running"] == 1
        assert store.claim("survivor", lease_s=30) is None
        clock.set(T0 + 40)  # past T0 + 1 + 30
        again = store.claim("survivor", lease_s=30)
        assert again is not None and again.id == job.id
        assert again.attempt == 2 and again.lease_token != child_token
        assert again.payload == {"invoice": 7} and again.key == "billing:7:charge:v1"
        done = store.complete(again, result={"charged": True})
        assert done.state == JobState.SUCCEEDED
        history = [(a.attempt, a.worker, a.outcome) for a in store.attempts(job.id)]
        assert history == [(1, "child-worker", "lease_expired"), (2, "survivor", "succeeded")]
        assert sum(store.counts().values()) == 1, "nothing lost, nothing duplicated"
