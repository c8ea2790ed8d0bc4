"""PostgreSQL connections that die under the store, and rows locked elsewhere, for real.

The store's backend is killed with ``pg_terminate_backend`` from another connection
(what a server restart or a failover does to every session; the shared server itself
is never restarted). Each test checks that the kill fired (the backend pid changed, or
the error says the connection was lost) and what the store did next. Before the fix,
every call after the kill raised a raw psycopg error forever, and a locked row made a
call wait without end.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest

try:
    import psycopg
except ImportError:  # the driver comes with the `services` extra (make venv-test)
    if os.environ.get("LABKIT_REQUIRE_SERVICES") == "1":
        raise
    pytest.skip("psycopg is not installed: pip install -e '.[services]'", allow_module_level=True)

from labkit.backends.postgres.store import PostgresJobStore
from labkit.clock import FakeClock, SystemClock
from labkit.errors import ConnectionLost, StoreBusy, StoreError
from labkit.job import JobState


def _terminate(admin: psycopg.Connection[Any], pid: int) -> None:
    row = admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()
    assert row is not None and row[0] is True, f"backend {pid} was not terminated"


def _wait_until_waiting_on_a_lock(admin: psycopg.Connection[Any], pid: int) -> None:
    clock = SystemClock()
    deadline = clock.now() + 60
    while clock.now() < deadline:
        row = admin.execute(
            "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)
        ).fetchone()
        if row is not None and row[0] == "Lock":
            return
        clock.sleep(0.02)
    raise AssertionError(f"backend {pid} never waited on the lock")


def test_after_its_backend_is_terminated_the_store_reconnects_on_the_next_call(
    postgres_dsn: str, schema: str, admin: psycopg.Connection[Any]
) -> None:
    with PostgresJobStore(postgres_dsn, clock=FakeClock(1_000.0), schema=schema) as store:
        first, _ = store.enqueue("charge", {"n": 1}, key="before-kill")
        old_pid = store.conn.info.backend_pid
        _terminate(admin, old_pid)
        # An idle connection died: a read, then a write, go through on a new one.
        assert store.get(first.id).key == "before-kill"
        second, created = store.enqueue("charge", {"n": 2}, key="after-kill")
        assert created and store.conn.info.backend_pid != old_pid
        assert store.reconnects == 1
        _terminate(admin, store.conn.info.backend_pid)
        job = store.claim("w1")  # BEGIN on a dead connection: reconnect, begin again
        assert job is not None and job.id == first.id
        assert store.reconnects == 2
        assert store.counts()["running"] == 1 and store.counts()["pending"] == 1


def test_a_call_in_flight_when_the_backend_dies_says_nothing_was_committed(
    postgres_dsn: str, schema: str, admin: psycopg.Connection[Any]
) -> None:
    with PostgresJobStore(
        postgres_dsn, clock=FakeClock(1_000.0), schema=schema, lock_timeout_s=60
    ) as store:
        store.enqueue("charge", {"n": 1}, key="in-flight")
        job = store.claim("w1", lease_s=30)
        assert job is not None
        holder = store.connect(autocommit=False)
        holder.execute("SELECT id FROM jobs WHERE id = %(id)s FOR UPDATE", {"id": job.id})
        pid = store.conn.info.backend_pid
        caught: list[BaseException] = []

        def heartbeat() -> None:
            try:
                store.heartbeat(job, lease_s=300)
            except BaseException as exc:  # noqa: BLE001 - handed to the test thread
                caught.append(exc)

        beat = threading.Thread(target=heartbeat)
        beat.start()
        try:
            _wait_until_waiting_on_a_lock(admin, pid)  # the heartbeat is blocked mid-call
            _terminate(admin, pid)
            beat.join(timeout=60)
        finally:
            holder.rollback()
            holder.close()
        assert not beat.is_alive()
        assert len(caught) == 1 and isinstance(caught[0], ConnectionLost), caught
        assert caught[0].may_have_committed is False
        assert "nothing was committed" in str(caught[0])
        after = store.get(job.id)  # the next call reconnects
        assert after.state == JobState.RUNNING and after.lease_until == job.lease_until
        assert store.heartbeat(job, lease_s=300).lease_until == 1_300.0


def test_a_drop_while_committing_says_the_change_may_have_been_saved(
    postgres_dsn: str, schema: str, admin: psycopg.Connection[Any]
) -> None:
    with PostgresJobStore(postgres_dsn, clock=FakeClock(1_000.0), schema=schema) as store:
        store.enqueue("charge", {"n": 1}, key="committing")
        pid = store.conn.info.backend_pid
        with pytest.raises(ConnectionLost) as lost:
            with store._tx() as conn:
                conn.execute("UPDATE jobs SET updated_at = updated_at + 1")
                _terminate(admin, pid)  # the body is done: COMMIT meets a dead backend
        assert lost.value.may_have_committed is True
        assert "MAY HAVE BEEN SAVED" in str(lost.value)
        assert store.counts()["pending"] == 1


@pytest.mark.timeout(120)
def test_a_row_locked_elsewhere_times_out_as_store_busy_and_changes_nothing(
    postgres_dsn: str, schema: str
) -> None:
    with PostgresJobStore(
        postgres_dsn, clock=FakeClock(1_000.0), schema=schema, lock_timeout_s=0.3
    ) as store:
        store.enqueue("charge", {"n": 1}, key="locked")
        job = store.claim("w1", lease_s=30)
        assert job is not None
        holder = store.connect(autocommit=False)
        try:
            holder.execute("SELECT id FROM jobs WHERE id = %(id)s FOR UPDATE", {"id": job.id})
            with pytest.raises(StoreBusy, match="lock"):
                store.heartbeat(job, lease_s=300)
            with pytest.raises(StoreBusy):
                store.complete(job, {"ok": True})
        finally:
            holder.rollback()
            holder.close()
        assert store.get(job.id).state == JobState.RUNNING
        assert store.complete(job, {"ok": True}).state == JobState.SUCCEEDED


def test_while_the_server_is_down_calls_say_so_and_work_again_once_it_is_back(
    postgres_dsn: str, schema: str, admin: psycopg.Connection[Any]
) -> None:
    """A restart, simulated: the backend is terminated and the address stops answering
    (the session is pointed at a closed port) until the server is "back"."""
    with PostgresJobStore(postgres_dsn, clock=FakeClock(1_000.0), schema=schema) as store:
        store.enqueue("charge", {"n": 1}, key="before-restart")
        _terminate(admin, store.conn.info.backend_pid)
        store._session.dsn = "postgresql://postgres@127.0.0.1:1/test?connect_timeout=2"
        for _ in range(2):  # every call while it is down: a labkit error, never psycopg's
            with pytest.raises(StoreError, match="cannot connect to PostgreSQL") as down:
                store.counts()
            assert not isinstance(down.value, psycopg.Error)
        store._session.dsn = postgres_dsn  # the server is back
        assert store.counts()["pending"] == 1
        assert store.enqueue("charge", {"n": 2}, key="after-restart")[1]
