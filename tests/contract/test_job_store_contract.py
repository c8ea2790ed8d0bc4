"""The JobStore contract, through the public API only, on every backend in conftest.BACKENDS."""

from __future__ import annotations

import importlib
import inspect

import pytest

from labkit.clock import FakeClock
from labkit.errors import (
    IdempotencyConflict,
    InvalidTransition,
    LeaseLost,
    NotFound,
    PermanentError,
    TransientError,
)
from labkit.job import JobState
from labkit.keys import fingerprint
from labkit.store.contract import JobStoreContract, WorkerStore

STATES = {s.value for s in JobState}


def _operations() -> list[str]:
    """Every operation of the contract, the worker's part (``WorkerStore``) included."""
    return sorted(
        {
            name
            for protocol in (JobStoreContract, WorkerStore)
            for name, member in vars(protocol).items()
            if callable(member) and not name.startswith("_")
        }
    )


#: Every backend class, by module: importing one needs its driver (psycopg for PostgreSQL).
STORE_CLASSES = {
    "JobStore": "labkit.store.sqlite",
    "PostgresJobStore": "labkit.backends.postgres.store",
}


def test_every_backend_satisfies_the_protocol(make_store):
    assert isinstance(make_store(FakeClock()), JobStoreContract)


def test_every_backend_is_what_a_worker_runs_on(make_store):
    store = make_store(FakeClock())
    assert isinstance(store, WorkerStore)
    for name in ("claim", "heartbeat", "complete", "fail", "snooze", "get", "next_due"):
        wanted = inspect.signature(getattr(WorkerStore, name))
        have = inspect.signature(getattr(type(store), name))
        assert list(have.parameters)[: len(wanted.parameters)] == list(wanted.parameters), name


@pytest.mark.parametrize("class_name", sorted(STORE_CLASSES))
@pytest.mark.parametrize("name", _operations())
def test_job_store_signatures_match_the_contract(name, class_name):
    cls = getattr(importlib.import_module(STORE_CLASSES[class_name]), class_name)
    wanted = inspect.signature(getattr(JobStoreContract, name))
    have = inspect.signature(getattr(cls, name))
    for param in wanted.parameters.values():
        assert param.name in have.parameters, f"{cls.__name__}.{name} lacks {param.name}"
        got = have.parameters[param.name]
        assert got.kind == param.kind, f"{cls.__name__}.{name}({param.name}) kind differs"
        assert got.default == param.default, f"{cls.__name__}.{name}({param.name}) default differs"


class TestJobStoreContract:
    """Each rule of DESIGN.md's job contract; ``make_store`` supplies the backend."""

    @pytest.fixture
    def clock(self) -> FakeClock:
        return FakeClock()

    @pytest.fixture
    def store(self, make_store, clock) -> JobStoreContract:
        return make_store(clock)

    def test_enqueue_is_idempotent_by_key(self, store):
        a, created = store.enqueue("k", {"n": 1}, key="key-1")
        b, again = store.enqueue("k", {"n": 1}, key="key-1")
        assert created and not again and a.id == b.id
        assert store.counts() == {**dict.fromkeys(STATES, 0), "pending": 1}

    def test_same_key_other_payload_is_a_conflict_naming_both_fingerprints(self, store):
        store.enqueue("k", {"n": 1}, key="key-1")
        with pytest.raises(IdempotencyConflict) as caught:
            store.enqueue("k", {"n": 2}, key="key-1")
        assert fingerprint({"n": 1})[:12] in str(caught.value)
        assert fingerprint({"n": 2})[:12] in str(caught.value)

    def test_no_key_means_a_unique_key(self, store):
        a, _ = store.enqueue("k", {"n": 1})
        b, _ = store.enqueue("k", {"n": 1})
        assert a.key != b.key and a.id != b.id

    def test_claim_leases_with_attempt_plus_one_and_a_token(self, store, clock):
        store.enqueue("k", {}, key="a")
        job = store.claim("w1", lease_s=10)
        assert job.state == JobState.RUNNING and job.attempt == 1 and job.lease_token
        assert job.lease_owner == "w1" and job.lease_until == clock.now() + 10
        assert store.claim("w2") is None

    def test_expired_lease_is_reclaimed_with_a_new_token(self, store, clock):
        store.enqueue("k", {}, key="a")
        first = store.claim("w1", lease_s=10)
        clock.advance(10)
        second = store.claim("w2", lease_s=10)
        assert second.id == first.id and second.attempt == 2
        assert second.lease_token != first.lease_token

    @pytest.mark.parametrize("operation", ["complete", "fail", "heartbeat"])
    def test_stale_token_is_lease_lost_and_changes_nothing(self, store, clock, operation):
        store.enqueue("k", {}, key="a")
        old = store.claim("w1", lease_s=10)
        clock.advance(10)
        store.claim("w2", lease_s=10)
        before = store.get(old.id)
        with pytest.raises(LeaseLost):
            if operation == "complete":
                store.complete(old)
            elif operation == "fail":
                store.fail(old, PermanentError("x"))
            else:
                store.heartbeat(old)
        assert store.get(old.id) == before
        assert len(store.attempts(old.id)) == 2

    def test_transient_failure_goes_to_retry_wait_after_backoff(self, store, clock):
        store.enqueue("k", {}, key="a", max_attempts=3)
        failed = store.fail(store.claim("w"), TransientError("503"))
        assert failed.state == JobState.RETRY_WAIT and failed.run_after >= clock.now()
        clock.advance(failed.run_after - clock.now())
        assert store.claim("w").attempt == 2

    def test_permanent_failure_is_dead_at_once(self, store):
        store.enqueue("k", {}, key="a", max_attempts=5)
        dead = store.fail(store.claim("w"), PermanentError("card declined password=pw1"))
        assert dead.state == JobState.DEAD and dead.error_class == "PermanentError"
        assert "card declined" in dead.last_error and "pw1" not in dead.last_error
        assert dead.dead_reason

    def test_crashes_use_up_attempts_and_end_dead(self, store, clock):
        store.enqueue("k", {}, key="a", max_attempts=2)
        for _ in range(2):
            assert store.claim("w", lease_s=5) is not None
            clock.advance(5)
        assert store.claim("w") is None
        [letter] = store.dead_letters()
        assert letter.attempts == 2 and letter.reason

    def test_redrive_keeps_key_and_history(self, store):
        job, _ = store.enqueue("k", {}, key="a")
        store.fail(store.claim("w1"), PermanentError("bug"))
        back = store.redrive(job.id)
        assert back.state == JobState.PENDING and back.key == "a" and back.redrives == 1
        store.complete(store.claim("w2"))
        assert [a.outcome for a in store.attempts(job.id)] == ["dead", "succeeded"]
        with pytest.raises(InvalidTransition):
            store.redrive(job.id)
        with pytest.raises(NotFound):
            store.redrive(999_999)

    def test_redrive_where_is_limited(self, store):
        for n in range(3):
            store.enqueue("k", {"n": n}, key=f"k{n}")
            store.fail(store.claim("w"), PermanentError("bug"))
        assert len(store.redrive_where(limit=2)) == 2
        assert store.counts()["dead"] == 1 and store.counts()["pending"] == 2

    def test_claim_many_takes_at_most_limit(self, store):
        for n in range(4):
            store.enqueue("k", {"n": n}, key=f"k{n}")
        assert len(store.claim_many("w", 3)) == 3
        assert len(store.claim_many("w", 3)) == 1

    def test_get_by_key_and_not_found(self, store):
        job, _ = store.enqueue("k", {}, key="a")
        assert store.get_by_key("a").id == job.id and store.get_by_key("zz") is None
        with pytest.raises(NotFound):
            store.get(999_999)
