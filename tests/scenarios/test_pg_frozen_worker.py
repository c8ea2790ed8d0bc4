"""A worker frozen inside its transaction does not pin its job for ever.

The child process claims a job, completes it inside a transaction of its own
(``complete(job, conn=...)``, the ledger pattern) and is SIGSTOPped before it commits,
as a paused VM or a debugger would leave it. Its row lock outlives its lease: claims
with ``SKIP LOCKED`` pass the row by for as long as the process is frozen. The store's
``idle_in_transaction_session_timeout`` has the server end that session, the lock goes
with it, and another worker takes the job once the lease is over.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from labkit.backends import spec
from labkit.job import JobState

pytest.importorskip("psycopg")
from labkit.backends.postgres.store import PostgresJobStore  # noqa: E402

pytestmark = pytest.mark.services
IDLE_S = 1.0
LEASE_S = 1.0

FROZEN = """
import sys, time
from labkit.backends.postgres.store import PostgresJobStore

store = PostgresJobStore(sys.argv[1], schema=sys.argv[2], idle_in_transaction_s=float(sys.argv[3]))
job = store.claim("frozen", lease_s=float(sys.argv[4]))
conn = store.connect(autocommit=False)
store.complete(job, {"done": True}, conn=conn)   # in the caller's transaction, not committed
print("COMPLETED", conn.info.backend_pid, flush=True)
time.sleep(600)                                  # the parent freezes it here
conn.commit()
"""


@pytest.fixture
def schema(postgres_dsn: str) -> Iterator[str]:
    name = f"frozen_{uuid.uuid4().hex[:12]}"
    yield name
    spec.drop(f"{postgres_dsn}#schema={name}")


def _state(pid: int) -> str:
    """The process's state letter from /proc: T is stopped."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_a_frozen_worker_inside_its_transaction_lets_its_job_go_after_the_lease(
    postgres_dsn: str, schema: str
) -> None:
    with PostgresJobStore(postgres_dsn, schema=schema) as store:
        job, _ = store.enqueue("frozen", {"n": 1}, key="frozen:1")
        child = subprocess.Popen(
            [sys.executable, "-c", FROZEN, postgres_dsn, schema, str(IDLE_S), str(LEASE_S)],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert child.stdout is not None
            first = child.stdout.readline().split()
            assert first[:1] == ["COMPLETED"], f"the child never completed: {first}"
            backend = int(first[1])
            os.kill(child.pid, signal.SIGSTOP)
            stop_by = time.monotonic() + 10  # the signal is delivered asynchronously
            while _state(child.pid) != "T" and time.monotonic() < stop_by:
                time.sleep(0.01)
            assert _state(child.pid) == "T", "the worker was never frozen"
            taken = None
            deadline = time.monotonic() + 15
            while taken is None and time.monotonic() < deadline:
                taken = store.claim("frozen", lease_s=30)
                time.sleep(0.1)
            gone = store.conn.execute(
                "SELECT count(*) AS n FROM pg_stat_activity WHERE pid = %s", [backend]
            ).fetchone()
            assert _state(child.pid) == "T", "the worker woke up: the test proves nothing"
        finally:
            child.kill()
            os.kill(child.pid, signal.SIGCONT)
            child.wait()
        assert taken is not None, "the frozen worker's row lock pinned the job past its lease"
        assert (taken.id, taken.attempt) == (job.id, 2)
        assert gone is not None and gone["n"] == 0, "the frozen session was not ended"
        store.complete(taken)
        assert store.get(job.id).state == JobState.SUCCEEDED
