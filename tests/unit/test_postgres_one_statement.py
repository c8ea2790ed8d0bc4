"""PostgreSQL claims, completions and enqueues are one statement each, in autocommit.

One round trip where BEGIN, statement, COMMIT took three (bench/NOTES.md), at the price of
knowing less when the connection dies under the statement. What the store must still get
right, each with a real drop: the server ending the session (``pg_terminate_backend``, as a
restart does) announces it, so the statement surely did not commit and runs again on a new
connection; a connection that just dies (its socket shut, no word from the server) leaves
a completion unknown, so the store says the change MAY HAVE BEEN SAVED; a claim is run
again anyway, since a job the lost claim leased comes back when its lease expires.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from typing import Any

import pytest

try:
    import psycopg
except ImportError:  # the driver comes with the `services` extra (make venv-test)
    if os.environ.get("LABKIT_REQUIRE_SERVICES") == "1":
        raise
    pytest.skip("psycopg is not installed: pip install -e '.[services]'", allow_module_level=True)

from labkit.backends.postgres.store import PostgresJobStore
from labkit.clock import FakeClock
from labkit.errors import ConnectionLost
from labkit.job import JobState


@pytest.fixture
def store(postgres_dsn: str, schema: str) -> Iterator[PostgresJobStore]:
    with PostgresJobStore(postgres_dsn, clock=FakeClock(1_000.0), schema=schema) as s:
        yield s


def _terminate(admin: psycopg.Connection[Any], store: PostgresJobStore) -> int:
    pid = store.conn.info.backend_pid
    row = admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()
    assert row is not None and row[0] is True, f"backend {pid} was not terminated"
    return pid


def _cut(store: PostgresJobStore) -> None:
    """Shut the connection's socket: the next statement meets a dead line, no FATAL."""
    dup = socket.socket(fileno=os.dup(store.conn.fileno()))
    try:
        dup.shutdown(socket.SHUT_RDWR)
    finally:
        dup.close()


def test_a_session_the_server_ended_is_replaced_and_the_statement_runs_once(
    store: PostgresJobStore, admin: psycopg.Connection[Any]
) -> None:
    job, _ = store.enqueue("charge", {"n": 1}, key="a")
    claimed = store.claim("w1", lease_s=30)
    assert claimed is not None and claimed.id == job.id
    old = _terminate(admin, store)  # idle, as while a handler runs
    done = store.complete(claimed, {"ok": True})
    assert store.conn.info.backend_pid != old and store.reconnects == 1
    assert done.state == JobState.SUCCEEDED and store.get(job.id) == done
    assert [a.outcome for a in store.attempts(job.id)] == ["succeeded"]
    _terminate(admin, store)
    second, created = store.enqueue("charge", {"n": 2}, key="b")
    assert created and store.reconnects == 2
    assert store.counts() == {**store.counts(), "pending": 1, "succeeded": 1}
    assert store.get_by_key("b") == second


def test_a_completion_on_a_connection_that_just_died_may_have_been_saved(
    store: PostgresJobStore,
) -> None:
    store.enqueue("charge", {"n": 1}, key="a")
    claimed = store.claim("w1", lease_s=30)
    assert claimed is not None
    _cut(store)
    with pytest.raises(ConnectionLost) as lost:
        store.complete(claimed)
    assert lost.value.may_have_committed is True
    assert "MAY HAVE BEEN SAVED" in str(lost.value)
    # Read back, as the message says: here it was not (the statement never left).
    assert store.get(claimed.id).state == JobState.RUNNING
    assert store.complete(claimed).state == JobState.SUCCEEDED


def test_a_claim_on_a_connection_that_just_died_is_run_again(store: PostgresJobStore) -> None:
    job, _ = store.enqueue("charge", {"n": 1}, key="a")
    _cut(store)
    claimed = store.claim("w1", lease_s=30)
    assert claimed is not None and claimed.id == job.id
    assert store.reconnects == 1
    assert store.get(job.id).lease_owner == "w1" and store.get(job.id).attempt == 1
