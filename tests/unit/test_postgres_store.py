"""What only PostgreSQL has to prove: concurrent claimers, locked rows skipped, schemas.

The shared rules run in tests/contract on both backends; here, several connections at
once against one schema. Each test gets its own schema, dropped afterwards, so the file
runs in parallel with anything else (pytest -n 2).
"""

from __future__ import annotations

import os
import threading
from collections import Counter

import pytest

try:
    import psycopg
    from psycopg import sql
except ImportError:  # the driver comes with the `services` extra (make venv-test)
    if os.environ.get("LABKIT_REQUIRE_SERVICES") == "1":
        raise
    pytest.skip("psycopg is not installed: pip install -e '.[services]'", allow_module_level=True)

from labkit.backends.postgres.store import PostgresJobStore
from labkit.clock import FakeClock
from labkit.errors import StoreError
from labkit.job import JobState
from labkit.store.contract import SCHEMA_VERSION


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def test_concurrent_claimers_in_threads_never_claim_a_job_twice(postgres_dsn, schema, clock):
    jobs = 300
    with PostgresJobStore(postgres_dsn, clock=clock, schema=schema) as store:
        for n in range(jobs):
            store.enqueue("k", {"n": n}, key=f"job-{n}")
    claims: list[list[int]] = [[] for _ in range(4)]
    errors: list[BaseException] = []
    start = threading.Barrier(len(claims))

    def work(slot: int) -> None:
        # A store (so a connection) per thread, as separate worker processes would have.
        try:
            with PostgresJobStore(postgres_dsn, clock=clock, schema=schema) as own:
                start.wait()
                while batch := own.claim_many(f"w{slot}", 3, lease_s=600):
                    claims[slot].extend(j.id for j in batch)
                    own.complete_many(batch)
        except BaseException as exc:  # reported below; a thread cannot fail the test
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(slot,)) for slot in range(len(claims))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    every = Counter(i for slot in claims for i in slot)
    twice = {i: n for i, n in every.items() if n > 1}
    assert not twice, f"jobs claimed more than once: {twice}"
    assert len(every) == jobs
    assert sum(1 for slot in claims if slot) >= 2, "the claimers never overlapped"
    with PostgresJobStore(postgres_dsn, clock=clock, schema=schema) as store:
        assert store.counts()["succeeded"] == jobs
        assert all([a.attempt for a in store.attempts(i)] == [1] for i in (1, jobs // 2, jobs))


def test_a_claim_skips_a_row_another_transaction_holds_instead_of_waiting(
    postgres_dsn, schema, clock
):
    with PostgresJobStore(postgres_dsn, clock=clock, schema=schema) as store:
        first, _ = store.enqueue("k", {}, key="first")
        second, _ = store.enqueue("k", {}, key="second")
        # Without SKIP LOCKED the claim would wait for the holder: fail fast instead.
        store.conn.execute("SET statement_timeout = '3s'")
        holder = store.connect(autocommit=False)
        try:
            holder.execute("SELECT id FROM jobs WHERE id = %(id)s FOR UPDATE", {"id": first.id})
            claimed = store.claim("w")
            assert claimed is not None and claimed.id == second.id
            assert store.claim("w") is None, "the held row is skipped, not handed out"
        finally:
            holder.rollback()
            holder.close()
        assert store.claim("w").id == first.id
        assert store.get(first.id).state == JobState.RUNNING


def test_stores_in_two_schemas_do_not_see_each_other(postgres_dsn, schema, clock):
    other = f"{schema}_b"  # the schema fixture drops it too
    with (
        PostgresJobStore(postgres_dsn, clock=clock, schema=schema) as a,
        PostgresJobStore(postgres_dsn, clock=clock, schema=other) as b,
    ):
        a.enqueue("k", {}, key="same-key")
        _, created = b.enqueue("k", {"other": True}, key="same-key")
        assert created and b.counts()["pending"] == 1
        assert a.get_by_key("same-key").payload == {}


def test_a_schema_from_a_newer_labkit_is_refused_and_left_alone(postgres_dsn, schema, clock):
    with PostgresJobStore(postgres_dsn, clock=clock, schema=schema) as store:
        store.enqueue("k", {}, key="kept")
        store.conn.execute("UPDATE labkit_meta SET value = '99' WHERE name = 'schema_version'")
    with pytest.raises(StoreError, match="newer than this labkit"):
        PostgresJobStore(postgres_dsn, clock=clock, schema=schema)
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        assert conn.execute("SELECT value FROM labkit_meta").fetchone() == ("99",)
        assert conn.execute("SELECT key FROM jobs").fetchall() == [("kept",)]


def test_a_version_1_schema_gains_the_pruned_totals_when_opened(postgres_dsn, schema, clock):
    with PostgresJobStore(postgres_dsn, clock=clock, schema=schema) as store:
        store.enqueue("k", {}, key="kept")
        # What labkit wrote before the metrics' kept totals: version 1, no pruned_attempts.
        store.conn.execute("DROP TABLE pruned_attempts")
        store.conn.execute("UPDATE labkit_meta SET value = '1' WHERE name = 'schema_version'")
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        assert conn.execute("SELECT value FROM labkit_meta").fetchone() == ("1",)
        assert conn.execute("SELECT to_regclass('pruned_attempts')").fetchone() == (None,)
    with PostgresJobStore(postgres_dsn, clock=clock, schema=schema) as store:
        store.complete(store.claim("w"))
        clock.advance(10)
        assert store.prune_finished(0) == 1
        rows = store.conn.execute("SELECT outcome, attempts FROM pruned_attempts").fetchall()
        assert rows == [{"outcome": "succeeded", "attempts": 1}]
        version = store.conn.execute("SELECT value FROM labkit_meta").fetchone()
        assert version == {"value": str(SCHEMA_VERSION)}


def test_reopening_a_current_schema_keeps_its_jobs(postgres_dsn, schema, clock):
    with PostgresJobStore(postgres_dsn, clock=clock, schema=schema) as store:
        store.enqueue("k", {}, key="kept")
    with PostgresJobStore(postgres_dsn, clock=clock, schema=schema) as again:
        assert again.get_by_key("kept") is not None


def test_an_unreachable_server_says_what_to_check_without_the_password():
    # Port 1 on localhost: nothing listens there, so the connection is refused at once.
    dsn = "postgresql://labkit:hunter2@127.0.0.1:1/test?connect_timeout=2"
    with pytest.raises(StoreError, match="Check that the server is running") as caught:
        PostgresJobStore(dsn, clock=FakeClock())
    assert "hunter2" not in str(caught.value)


@pytest.mark.parametrize(
    "bad",
    [
        "Labkit",  # upper case would need quoting everywhere
        "jobs; DROP TABLE x",  # not an identifier at all
        "",  # empty
    ],
)
def test_a_schema_name_that_is_not_a_plain_identifier_is_refused(bad):
    with pytest.raises(ValueError, match="schema must be"):
        PostgresJobStore("postgresql://nobody@127.0.0.1:1/none", schema=bad)


def test_enqueue_with_an_autocommit_connection_is_refused(postgres_dsn, schema, clock):
    with PostgresJobStore(postgres_dsn, clock=clock, schema=schema) as store:
        conn = store.connect(autocommit=True)
        try:
            with pytest.raises(StoreError, match="needs an open transaction"):
                store.enqueue("k", {}, key="a", conn=conn)
        finally:
            conn.close()
        assert store.get_by_key("a") is None


def test_enqueue_in_a_callers_transaction_gives_back_its_search_path(postgres_dsn, schema, clock):
    with PostgresJobStore(postgres_dsn, clock=clock, schema=schema) as store:
        conn = psycopg.connect(postgres_dsn)  # the application's own path, not the store's
        try:
            before = conn.execute("SHOW search_path").fetchone()
            store.enqueue("k", {}, key="a", conn=conn)
            assert conn.execute("SHOW search_path").fetchone() == before
            conn.commit()
        finally:
            conn.close()
        assert store.get_by_key("a") is not None


#: The state check every schema had before version 3 added ``cancelled``.
OLD_STATES = "CHECK (state IN ('pending', 'running', 'succeeded', 'retry_wait', 'dead'))"


def test_a_version_2_schema_lets_a_job_be_cancelled_once_opened(postgres_dsn, schema, clock):
    with PostgresJobStore(postgres_dsn, clock=clock, schema=schema) as store:
        job, _ = store.enqueue("k", {}, key="kept")
        store.conn.execute("ALTER TABLE jobs DROP CONSTRAINT jobs_state_check")
        store.conn.execute(f"ALTER TABLE jobs ADD CONSTRAINT jobs_state_check {OLD_STATES}")
        store.conn.execute("UPDATE labkit_meta SET value = '2' WHERE name = 'schema_version'")
        with pytest.raises(psycopg.errors.CheckViolation):  # what version 2 refuses
            store.conn.execute("UPDATE jobs SET state = 'cancelled' WHERE id = %s", (job.id,))
    with PostgresJobStore(postgres_dsn, clock=clock, schema=schema) as store:
        store.conn.execute("UPDATE jobs SET state = 'cancelled' WHERE id = %s", (job.id,))
        assert store.get(job.id).state == JobState.CANCELLED
        assert store.counts()["cancelled"] == 1
        version = store.conn.execute("SELECT value FROM labkit_meta").fetchone()
        assert version == {"value": str(SCHEMA_VERSION)}


def test_a_statement_timeout_is_named_as_one_not_as_a_lock_wait(postgres_dsn, schema, clock):
    from labkit.errors import StatementTimeout

    with PostgresJobStore(postgres_dsn, clock=clock, schema=schema) as store:
        store.conn.execute("SET statement_timeout = '1ms'")  # a role's setting, say
        with pytest.raises(StatementTimeout) as caught:
            store.enqueue_many("k", [{"n": n, "pad": "x" * 200} for n in range(20_000)])
        message = str(caught.value)
        assert "statement_timeout" in message and "no lock was in the way" in message
        assert "row or table lock" not in message
        store.conn.execute("SET statement_timeout = 0")
        assert sum(store.counts().values()) == 0  # nothing written


def test_a_cancel_from_another_session_and_a_lock_timeout_are_told_apart(postgres_dsn):
    from labkit.backends.postgres.session import cancelled_error
    from labkit.errors import StatementTimeout, StoreBusy

    with (
        psycopg.connect(postgres_dsn, autocommit=True) as victim,
        psycopg.connect(postgres_dsn, autocommit=True) as operator,
    ):
        pid = victim.info.backend_pid
        caught: list[BaseException] = []

        def sleep() -> None:
            try:
                victim.execute("SELECT pg_sleep(30)")
            except psycopg.Error as exc:
                caught.append(exc)

        sleeper = threading.Thread(target=sleep)
        sleeper.start()
        for _ in range(500):  # until the sleep is running, then cancel it
            row = operator.execute(
                "SELECT state FROM pg_stat_activity WHERE pid = %s", (pid,)
            ).fetchone()
            if row and row[0] == "active":
                break
            threading.Event().wait(0.01)
        assert operator.execute("SELECT pg_cancel_backend(%s)", (pid,)).fetchone()[0]
        sleeper.join(30)
        assert caught and isinstance(caught[0], psycopg.errors.QueryCanceled)
        error = cancelled_error(caught[0], "claim", "d", "try again")
        assert type(error) is StoreBusy and "cancelled by another session" in str(error)

        victim.execute("SET lock_timeout = '50ms'")
        with psycopg.connect(postgres_dsn) as holder:
            holder.execute("SELECT pg_advisory_lock(4242)")
            victim.execute("SET statement_timeout = 0")
            try:
                victim.execute("SELECT pg_advisory_lock(4242)")
            except psycopg.Error as exc:
                assert isinstance(exc, psycopg.errors.LockNotAvailable)
                assert cancelled_error(exc, "claim", "d", "try again") is None  # a lock wait
            else:
                pytest.fail("the advisory lock was free: the lock timeout never fired")
            holder.execute("SELECT pg_advisory_unlock(4242)")

        victim.execute("SET statement_timeout = '20ms'")
        try:
            victim.execute("SELECT pg_sleep(5)")
        except psycopg.Error as exc:
            assert isinstance(cancelled_error(exc, "claim", "d", "try again"), StatementTimeout)
        else:
            pytest.fail("the statement timeout never fired")
