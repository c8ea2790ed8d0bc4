"""The server killed between the commit and the 202, and the client's retry.

The fault is real: ``LABKIT_HTTP_FAULTS="after_commit:kill"`` makes the server SIGKILL
itself right after the job's transaction commits and before it answers. The tests
check that the fault fired (the process died of SIGKILL, its log says so) before
judging what the database holds.
"""

from __future__ import annotations

import signal
from pathlib import Path

import httpx
import pytest

from labkit.clock import SystemClock
from labkit.integrations.http.serve import start_server
from labkit.job import JobState
from labkit.store import JobStore

APP = "labkit.integrations.http.service:app_from_env"
ALICE = {"Authorization": "Bearer alice-token"}


def serve(db: Path, name: str, faults: str | None = None):  # type: ignore[no-untyped-def]
    env = {"LABKIT_HTTP_DB": str(db)}
    if faults:
        env["LABKIT_HTTP_FAULTS"] = faults
    return start_server(
        APP, factory=True, env=env, log_path=db.with_name(f"{name}.log"), ready_path="/healthz"
    )


def test_killed_after_commit_then_retried_with_the_same_key_gives_one_job(tmp_path: Path) -> None:
    db = tmp_path / "jobs.db"
    body, headers = {"month": "2026-01"}, {**ALICE, "Idempotency-Key": "crash-1"}
    with serve(db, "doomed", "seed=0; after_commit:kill nth=1") as doomed:
        with pytest.raises(httpx.TransportError):
            httpx.post(doomed.url + "/jobs/report", json=body, headers=headers, timeout=30)
        doomed.popen.wait(30)
        assert doomed.returncode == -signal.SIGKILL, "the after_commit kill never fired"
        assert "FAULT fired kill at after_commit" in doomed.log_text()
    # The client never heard back, yet the job was committed before the crash.
    with JobStore(db, clock=SystemClock()) as store:
        [job] = store.jobs()
        assert job.state == JobState.PENDING and job.key == "http:alice:crash-1"
    with serve(db, "healthy") as healthy:
        retry = httpx.post(healthy.url + "/jobs/report", json=body, headers=headers, timeout=30)
    assert retry.status_code == 202
    assert retry.json() == {"job_id": job.id, "state": "pending", "created": False}
    with JobStore(db, clock=SystemClock()) as store:
        assert [j.id for j in store.jobs()] == [job.id]


def test_without_a_key_the_same_retry_creates_a_duplicate(tmp_path: Path) -> None:
    """The control: the key is what makes the retry safe, not luck."""
    db = tmp_path / "jobs.db"
    body = {"month": "2026-01"}
    with serve(db, "doomed", "seed=0; after_commit:kill nth=1") as doomed:
        with pytest.raises(httpx.TransportError):
            httpx.post(doomed.url + "/jobs/report", json=body, headers=ALICE, timeout=30)
        doomed.popen.wait(30)
        assert doomed.returncode == -signal.SIGKILL
    with serve(db, "healthy") as healthy:
        retry = httpx.post(healthy.url + "/jobs/report", json=body, headers=ALICE, timeout=30)
    assert retry.status_code == 202 and retry.json()["created"] is True
    with JobStore(db, clock=SystemClock()) as store:
        assert len(store.jobs()) == 2  # the same report, twice
