"""The finer rules of the job contract, on every backend in conftest.BACKENDS.

test_job_store_contract.py holds one test per rule of DESIGN.md; these pin the details a
second backend is most likely to get subtly wrong: tokens after snooze and redrive, the
deadline window reopened by a redrive, ambiguous failures without a natural key,
transactional enqueue and completion, batch completion, and argument checks.
"""

from __future__ import annotations

import random

import pytest

from labkit.clock import FakeClock
from labkit.errors import (
    IdempotencyConflict,
    LeaseLost,
    PermanentError,
    ResponseLost,
    TransientError,
)
from labkit.job import JobState
from labkit.retry import RetryPolicy, constant


class TestJobStoreContractDetails:
    @pytest.fixture
    def clock(self) -> FakeClock:
        return FakeClock()

    @pytest.fixture
    def store(self, make_store, clock):
        return make_store(clock, rng=random.Random(7))

    def test_snooze_spends_no_attempt_and_retires_the_token(self, store, clock):
        store.enqueue("k", {}, key="a")
        first = store.claim("w1")
        snoozed = store.snooze(first, 30, reason="dependency down token=s3cr3t")
        assert snoozed.state == JobState.RETRY_WAIT and snoozed.attempt == 0
        assert snoozed.run_after == clock.now() + 30 and "s3cr3t" not in snoozed.last_error
        assert store.claim("w2") is None, "a snoozed job waits its delay"
        clock.advance(30)
        second = store.claim("w2")
        assert second.attempt == 1 and second.lease_token != first.lease_token
        with pytest.raises(LeaseLost):
            store.complete(first)

    def test_redrive_hands_out_a_token_no_earlier_claim_had(self, store):
        job, _ = store.enqueue("k", {}, key="a")
        first = store.claim("w")
        store.fail(first, PermanentError("bug"))
        store.redrive(job.id)
        again = store.claim("w")
        # attempt went back to 1: a token built from the attempt alone would match again.
        assert again.attempt == first.attempt == 1
        assert again.lease_token != first.lease_token
        with pytest.raises(LeaseLost):
            store.complete(first)
        assert [a.attempt for a in store.attempts(job.id)] == [1, 1]

    def test_heartbeat_extends_the_lease_so_nobody_reclaims_it(self, store, clock):
        store.enqueue("k", {}, key="a")
        job = store.claim("w1", lease_s=10)
        clock.advance(8)
        beat = store.heartbeat(job, lease_s=10)
        assert beat.lease_until == clock.now() + 10 and beat.lease_token == job.lease_token
        clock.advance(5)  # past the first lease, inside the extended one
        assert store.claim("w2") is None
        assert store.complete(beat, {"ok": True}).result == {"ok": True}

    def test_crash_loop_is_buried_with_lease_expired_history(self, store, clock):
        job, _ = store.enqueue("k", {}, key="poison", max_attempts=2)
        for _ in range(2):
            store.claim("w", lease_s=5)
            clock.advance(5)
        assert store.claim("w") is None
        dead = store.get(job.id)
        assert dead.state == JobState.DEAD and dead.error_class == "LeaseExpired"
        assert dead.dead_reason.startswith("lease expired on the last attempt (2 of 2)")
        assert [a.outcome for a in store.attempts(job.id)] == ["lease_expired", "lease_expired"]

    def test_attempts_exhausted_by_transient_failures_end_dead(self, make_store, clock):
        store = make_store(clock, retry=RetryPolicy(backoff=constant(1.0)))
        job, _ = store.enqueue("k", {}, key="a", max_attempts=2)
        store.fail(store.claim("w"), TransientError("503"))
        clock.advance(1)
        dead = store.fail(store.claim("w"), TransientError("503 again"))
        assert dead.state == JobState.DEAD
        assert dead.dead_reason.startswith("attempts exhausted (2 of 2)")
        assert [a.outcome for a in store.attempts(job.id)] == ["retry_wait", "dead"]

    def test_redrive_reopens_the_deadline_window(self, make_store, clock):
        policy = RetryPolicy(backoff=constant(1.0), deadline=10.0)
        store = make_store(clock, retry=policy)
        job, _ = store.enqueue("k", {}, key="a")
        clock.advance(100)  # long past the deadline counted from acceptance
        late = store.fail(store.claim("w"), TransientError("503"))
        assert late.state == JobState.DEAD and late.dead_reason.startswith("deadline passed")
        store.redrive(job.id)
        fresh = store.fail(store.claim("w"), TransientError("503"))
        assert fresh.state == JobState.RETRY_WAIT, "the redrive opened a new window"
        assert fresh.run_after == clock.now() + 1.0

    def test_ambiguous_failure_retries_only_with_a_natural_key(self, store):
        keyed, _ = store.enqueue("charge", {"n": 1}, key="charge:1")
        keyless, _ = store.enqueue("charge", {"n": 2})
        by_id = {j.id: j for j in store.claim_many("w", 2)}
        assert store.fail(by_id[keyed.id], ResponseLost("timeout")).state == JobState.RETRY_WAIT
        dead = store.fail(by_id[keyless.id], ResponseLost("timeout"))
        assert dead.state == JobState.DEAD and dead.dead_reason.startswith("outcome unknown")

    def test_dead_letters_report_age_reason_and_a_sanitized_error(self, store, clock):
        store.enqueue("mail", {}, key="a", queue="mail")
        store.fail(store.claim("w", queues=["mail"]), PermanentError("bad address api_key=k3y"))
        clock.advance(60)
        [letter] = store.dead_letters(queue="mail")
        assert letter.age_s == 60 and letter.error_class == "PermanentError"
        assert letter.reason.startswith("permanent error") and "k3y" not in letter.error
        assert store.dead_letters(kind="other") == []

    def test_redrive_where_filters_and_dry_run_changes_nothing(self, store):
        store.enqueue("a", {}, key="a1")
        store.enqueue("b", {}, key="b1")
        store.enqueue("b", {}, key="b2")
        for job in store.claim_many("w", 3):
            store.fail(job, PermanentError("bug"))
        preview = store.redrive_where(limit=10, kind="b", dry_run=True)
        assert sorted(j.key for j in preview) == ["b1", "b2"]
        assert store.counts()["dead"] == 3, "dry_run must change nothing"
        [moved] = store.redrive_where(limit=1, kind="b", note="fixed")
        assert moved.key == "b1" and moved.state == JobState.PENDING
        assert store.redrive_where(limit=5, error_class="NoSuchError") == []
        with pytest.raises(ValueError, match="limit"):
            store.redrive_where(limit=0)

    def test_claim_many_takes_the_oldest_due_first_from_the_named_queues(self, store, clock):
        store.enqueue("k", {}, key="late", run_after=clock.now() + 5)
        store.enqueue("k", {}, key="other", queue="other")
        store.enqueue("k", {}, key="early")
        clock.advance(5)
        taken = store.claim_many("w", 5, queues=["default"])
        assert [j.key for j in taken] == ["early", "late"]
        assert store.claim("w", queues=("other",)).key == "other"

    def test_complete_many_completes_the_holders_and_skips_a_stale_token(self, store, clock):
        for n in range(3):
            store.enqueue("k", {"n": n}, key=f"k{n}")
        jobs = store.claim_many("w1", 3, lease_s=10)
        clock.advance(10)
        stolen = store.claim("w2", lease_s=10)  # the oldest job moved on to w2
        held = [j for j in jobs if j.id != stolen.id]
        done = store.complete_many(jobs, results=[1, 2, 3])
        assert sorted(j.id for j in done) == sorted(j.id for j in held)
        assert store.get(stolen.id).lease_owner == "w2"
        assert store.counts()["succeeded"] == 2

    def test_bad_arguments_are_refused_before_anything_is_written(self, store):
        with pytest.raises(ValueError, match="kind"):
            store.enqueue("", {})
        with pytest.raises(ValueError, match="max_attempts"):
            store.enqueue("k", {}, max_attempts=0)
        with pytest.raises(ValueError, match="lease_s"):
            store.claim("w", lease_s=0)
        with pytest.raises(ValueError, match="limit"):
            store.claim_many("w", 0)
        with pytest.raises(IdempotencyConflict):
            store.enqueue("k", {}, key="x")
            store.enqueue("other-kind", {}, key="x")
        assert sum(store.counts().values()) == 1


class TestTransactionalContract:
    """``enqueue(conn=)`` and ``complete(conn=)`` share the caller's transaction."""

    @pytest.fixture
    def store(self, make_store):
        return make_store(FakeClock())

    def test_enqueue_in_a_rolled_back_transaction_leaves_no_job(self, store, caller_connection):
        conn = caller_connection(store)
        conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER)")
        conn.execute("INSERT INTO orders (id, total) VALUES (1, 100)")
        job, created = store.enqueue("receipt", {"order": 1}, key="receipt:1", conn=conn)
        assert created and job.state == JobState.PENDING
        conn.rollback()
        assert store.get_by_key("receipt:1") is None
        assert store.claim("w") is None

    def test_enqueue_in_a_committed_transaction_is_claimable(self, store, caller_connection):
        conn = caller_connection(store)
        conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER)")
        conn.execute("INSERT INTO orders (id, total) VALUES (1, 100)")
        store.enqueue("receipt", {"order": 1}, key="receipt:1", conn=conn)
        conn.commit()
        assert store.claim("w").key == "receipt:1"

    def test_complete_with_a_stale_token_in_the_callers_transaction_is_lease_lost(
        self, make_store, caller_connection
    ):
        clock = FakeClock()
        store = make_store(clock)
        job, _ = store.enqueue("k", {}, key="a")
        old = store.claim("w1", lease_s=10)
        clock.advance(10)
        store.claim("w2", lease_s=10)
        conn = caller_connection(store)
        with pytest.raises(LeaseLost, match="roll back your transaction"):
            store.complete(old, conn=conn)
        conn.rollback()
        assert store.get(job.id).state == JobState.RUNNING

    def test_complete_in_the_callers_transaction_commits_with_it(self, store, caller_connection):
        store.enqueue("k", {}, key="a")
        job = store.claim("w")
        conn = caller_connection(store)
        done = store.complete(job, {"ledger": 1}, conn=conn)
        assert done.state == JobState.SUCCEEDED
        conn.commit()
        assert store.get(job.id).result == {"ledger": 1}
        assert [a.outcome for a in store.attempts(job.id)] == ["succeeded"]
