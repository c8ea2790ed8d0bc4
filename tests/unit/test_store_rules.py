"""Every rule of the job contract, one test each, probed through JobStore's public API.

The raw SQLite file is read directly where a rule is about what reaches the disk.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from labkit.clock import FakeClock
from labkit.errors import (
    IdempotencyConflict,
    InvalidTransition,
    LeaseLost,
    NotFound,
    PermanentError,
    ResponseLost,
    StoreError,
    TransientError,
)
from labkit.job import JobState
from labkit.keys import fingerprint
from labkit.retry import RetryPolicy, constant, exponential
from labkit.store import JobStore


def raw_row(path: Path, job_id: int) -> dict[str, object]:
    """The job's row as stored, read with a connection of our own."""
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    try:
        return dict(conn.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone())
    finally:
        conn.close()


def make_store(path: Path, clock: FakeClock, **kw: object) -> JobStore:
    return JobStore(path, clock=clock, **kw)  # type: ignore[arg-type]


# -- enqueue -----------------------------------------------------------------------------


def test_enqueue_twice_with_the_same_key_and_payload_returns_the_first_job(store, clock):
    first, created = store.enqueue("charge", {"invoice": 42}, key="billing:42:charge:v1")
    clock.advance(60)
    again, created_again = store.enqueue("charge", {"invoice": 42}, key="billing:42:charge:v1")
    assert created is True and created_again is False
    assert again.id == first.id and again.created_at == first.created_at
    assert store.counts()["pending"] == 1


def test_enqueue_same_key_other_payload_names_both_fingerprints(store):
    store.enqueue("charge", {"invoice": 42, "amount": 100}, key="k1")
    with pytest.raises(IdempotencyConflict) as caught:
        store.enqueue("charge", {"invoice": 42, "amount": 999}, key="k1")
    message = str(caught.value)
    assert fingerprint({"invoice": 42, "amount": 100})[:12] in message
    assert fingerprint({"invoice": 42, "amount": 999})[:12] in message
    assert "k1" in message
    assert store.counts()["pending"] == 1, "the conflicting call must not add a job"


def test_enqueue_same_key_other_kind_is_a_conflict(store):
    store.enqueue("charge", {"invoice": 1}, key="k")
    with pytest.raises(IdempotencyConflict):
        store.enqueue("refund", {"invoice": 1}, key="k")


def test_enqueue_without_a_key_gets_a_unique_one_and_never_deduplicates(store):
    a, created_a = store.enqueue("mail", {"to": "ana"})
    b, created_b = store.enqueue("mail", {"to": "ana"})
    assert created_a and created_b
    assert a.id != b.id and a.key != b.key
    assert a.key and b.key


def test_enqueue_payload_key_order_does_not_matter(store):
    a, _ = store.enqueue("k", {"x": 1, "y": 2}, key="same")
    b, created = store.enqueue("k", {"y": 2, "x": 1}, key="same")
    assert not created and a.id == b.id


def test_enqueue_is_durable_when_it_returns(store, db_path):
    job, _ = store.enqueue("k", {"n": 1}, key="durable")
    # Another connection (another process would do the same) sees the row at once.
    assert raw_row(db_path, job.id)["key"] == "durable"


def test_enqueue_rejects_bad_arguments_and_stores_nothing(store):
    with pytest.raises(ValueError, match="kind"):
        store.enqueue("", {"a": 1})
    with pytest.raises(ValueError, match="max_attempts"):
        store.enqueue("k", {"a": 1}, max_attempts=0)
    assert sum(store.counts().values()) == 0


# -- claim and leases --------------------------------------------------------------------


def test_claim_adds_one_to_attempt_and_hands_out_a_fresh_token(store, clock):
    job, _ = store.enqueue("k", {"n": 1}, key="a")
    assert job.attempt == 0 and job.lease_token is None
    first = store.claim("w1", lease_s=30)
    assert first is not None and first.id == job.id
    assert first.state == JobState.RUNNING and first.attempt == 1
    assert first.lease_owner == "w1" and first.lease_until == clock.now() + 30
    clock.advance(31)
    second = store.claim("w2", lease_s=30)
    assert second is not None and second.attempt == 2
    assert second.lease_token and second.lease_token != first.lease_token


def test_claim_returns_none_when_nothing_is_ready(store, clock):
    assert store.claim("w") is None
    store.enqueue("k", {}, key="later", run_after=clock.now() + 100)
    assert store.claim("w") is None
    clock.advance(100)
    assert store.claim("w") is not None


def test_a_running_job_with_a_live_lease_is_not_claimable(store, clock):
    store.enqueue("k", {}, key="a")
    assert store.claim("w1", lease_s=30) is not None
    clock.advance(29)
    assert store.claim("w2") is None


def test_an_expired_lease_is_claimable_again(store, clock):
    store.enqueue("k", {}, key="a")
    held = store.claim("w1", lease_s=30)
    clock.advance(30)
    taken = store.claim("w2", lease_s=30)
    assert taken is not None and taken.id == held.id and taken.lease_owner == "w2"


def test_claim_only_looks_at_the_given_queues(store):
    store.enqueue("k", {}, key="a", queue="mail")
    assert store.claim("w", queues=("default",)) is None
    got = store.claim("w", queues=("mail", "default"))
    assert got is not None and got.queue == "mail"


def test_claim_many_leases_up_to_limit_oldest_due_first(store, clock):
    for n in range(5):
        store.enqueue("k", {"n": n}, key=f"k{n}", run_after=clock.now() - n)
    got = store.claim_many("w", 3)
    assert [j.payload["n"] for j in got] == [4, 3, 2]
    assert all(j.state == JobState.RUNNING for j in got)
    with pytest.raises(ValueError, match="limit"):
        store.claim_many("w", -1)


def test_heartbeat_extends_the_lease_of_the_holder(store, clock):
    store.enqueue("k", {}, key="a")
    job = store.claim("w1", lease_s=30)
    clock.advance(20)
    beat = store.heartbeat(job, lease_s=30)
    assert beat.lease_until == clock.now() + 30
    clock.advance(20)  # past the first lease, inside the extended one
    assert store.claim("w2") is None


@pytest.mark.parametrize("operation", ["complete", "fail", "heartbeat"])
def test_a_stale_token_raises_lease_lost_and_changes_nothing(store, clock, db_path, operation):
    store.enqueue("k", {}, key="a")
    old = store.claim("w1", lease_s=10)
    clock.advance(11)
    new = store.claim("w2", lease_s=10)
    before = raw_row(db_path, old.id)
    calls = {
        "complete": lambda: store.complete(old, result={"done": 1}),
        "fail": lambda: store.fail(old, TransientError("boom")),
        "heartbeat": lambda: store.heartbeat(old),
    }
    with pytest.raises(LeaseLost, match="w2"):
        calls[operation]()
    assert raw_row(db_path, old.id) == before
    assert store.get(new.id).lease_token == new.lease_token


def test_a_snoozed_then_reclaimed_job_does_not_accept_the_old_token(store, clock, db_path):
    # A snooze gives the attempt back; the next claim must still get a token of its own.
    store.enqueue("k", {}, key="a")
    old = store.claim("w1")
    store.snooze(old, 5)
    clock.advance(5)
    new = store.claim("w2")
    assert new.attempt == old.attempt and new.lease_token != old.lease_token
    before = raw_row(db_path, old.id)
    with pytest.raises(LeaseLost):
        store.complete(old)
    assert raw_row(db_path, old.id) == before


def test_complete_stores_the_result_and_clears_the_lease(store, db_path):
    store.enqueue("k", {}, key="a")
    done = store.complete(store.claim("w"), result={"receipt": "r-1"})
    assert done.state == JobState.SUCCEEDED and done.result == {"receipt": "r-1"}
    row = raw_row(db_path, done.id)
    assert row["lease_token"] is None and row["lease_owner"] == "w"


def test_get_of_a_missing_job_is_not_found(store):
    with pytest.raises(NotFound, match="999"):
        store.get(999)


# -- failures, retries, dead -------------------------------------------------------------


def test_transient_failure_waits_run_after_now_plus_backoff(db_path, clock):
    policy = RetryPolicy(backoff=exponential(base=2.0))
    with make_store(db_path, clock, retry=policy) as store:
        store.enqueue("k", {}, key="a", max_attempts=3)
        clock.advance(5)
        failed = store.fail(store.claim("w"), TransientError("timeout"))
        assert failed.state == JobState.RETRY_WAIT
        assert failed.run_after == clock.now() + 2.0  # base * 2**0 after attempt 1
        assert failed.error_class == "TransientError" and "timeout" in failed.last_error
        assert store.claim("w") is None, "not before run_after"
        clock.advance(2.0)
        second = store.claim("w")
        failed = store.fail(second, TransientError("timeout"))
        assert failed.run_after == clock.now() + 4.0  # base * 2**1 after attempt 2


def test_transient_failure_on_the_last_attempt_is_dead(db_path, clock):
    with make_store(db_path, clock, retry=RetryPolicy(backoff=constant(1))) as store:
        store.enqueue("k", {}, key="a", max_attempts=2)
        store.fail(store.claim("w"), TransientError("t1"))
        clock.advance(1)
        dead = store.fail(store.claim("w"), TransientError("t2"))
        assert dead.state == JobState.DEAD and "exhausted" in dead.dead_reason


@pytest.mark.parametrize(
    "error",
    [
        PermanentError("card declined", status=402),  # a permanent error of our own
        ValueError("bad invoice id"),  # an unknown bug: retrying only repeats it
        KeyError("customer"),
    ],
)
def test_any_other_error_is_dead_at_once(store, error):
    store.enqueue("k", {}, key="a", max_attempts=5)
    dead = store.fail(store.claim("w"), error)
    assert dead.state == JobState.DEAD and dead.attempt == 1
    assert dead.error_class == type(error).__name__
    assert "permanent" in dead.dead_reason


def test_attempts_exhausted_by_crashes_end_dead_and_never_run_again(store, clock):
    store.enqueue("poison", {}, key="p", max_attempts=3)
    for n in range(1, 4):
        job = store.claim(f"w{n}", lease_s=10)
        assert job is not None and job.attempt == n
        clock.advance(10)  # the worker dies: nobody completes, the lease runs out
    assert store.claim("w4") is None
    dead = store.get(job.id)
    assert dead.state == JobState.DEAD and dead.attempt == 3
    assert dead.error_class == "LeaseExpired" and "last attempt" in dead.dead_reason
    clock.advance(1000)
    assert store.claim("w5") is None and store.get(job.id).state == JobState.DEAD
    history = store.attempts(job.id)
    assert [a.outcome for a in history] == ["lease_expired"] * 3


def test_dead_keeps_reason_class_and_a_sanitized_truncated_message(store, db_path):
    secret_bits = ["hunter2", "tok-98765", "abcDEF123456", "s3cr3tBearer"]
    error = PermanentError(
        "upstream said no: password=hunter2 token=tok-98765 "
        "headers={'Authorization': 'Basic abcDEF123456'} retry with Bearer s3cr3tBearer "
        + "x"
        * 2000
    )
    store.enqueue("k", {}, key="a")
    dead = store.fail(store.claim("w"), error)
    assert dead.state == JobState.DEAD
    assert dead.error_class == "PermanentError" and dead.dead_reason.startswith("permanent")
    assert "upstream said no" in dead.last_error and len(dead.last_error) <= 500
    assert dead.last_error.endswith("[cut]")
    # Read the raw file: no secret reached the database, in the jobs row nor the history.
    store.close()
    blob = b"".join(part.read_bytes() for part in db_path.parent.glob(db_path.name + "*"))
    conn = sqlite3.connect(db_path)
    dumped = "\n".join(conn.iterdump())
    conn.close()
    for bit in secret_bits:
        assert bit not in dumped, f"{bit} reached the database"
        assert bit.encode() not in blob
    assert "upstream said no" in dumped, "the check above must be looking at the right rows"


def test_dead_letters_report_age_reason_and_attempts(store, clock):
    store.enqueue("charge", {}, key="a")
    store.fail(store.claim("w"), PermanentError("card declined"))
    clock.advance(3600)
    [letter] = store.dead_letters()
    assert letter.key == "a" and letter.kind == "charge" and letter.attempts == 1
    assert letter.age_s == 3600 and "card declined" in letter.reason
    assert letter.error_class == "PermanentError"


# -- redrive -----------------------------------------------------------------------------


def test_redrive_keeps_the_key_and_history_and_counts_redrives(store, clock):
    job, _ = store.enqueue("k", {"n": 1}, key="billing:1:charge:v1")
    store.fail(store.claim("w1"), PermanentError("bug"))
    clock.advance(10)
    back = store.redrive(job.id, note="fixed the bug")
    assert back.state == JobState.PENDING and back.key == job.key and back.id == job.id
    assert back.redrives == 1 and back.attempt == 0
    again = store.claim("w2")
    assert again.attempt == 1
    store.complete(again)
    history = store.attempts(job.id)
    assert [(a.worker, a.outcome) for a in history] == [("w1", "dead"), ("w2", "succeeded")]
    # The same key still deduplicates after a redrive.
    same, created = store.enqueue("k", {"n": 1}, key="billing:1:charge:v1")
    assert not created and same.id == job.id


@pytest.mark.parametrize("state", ["pending", "running", "retry_wait", "succeeded"])
def test_redrive_of_a_job_that_is_not_dead_is_a_clear_error(store, state):
    job, _ = store.enqueue("k", {}, key="a")
    if state != "pending":
        claimed = store.claim("w")
        if state == "retry_wait":
            store.fail(claimed, TransientError("t"))
        elif state == "succeeded":
            store.complete(claimed)
    assert store.get(job.id).state == state
    with pytest.raises(InvalidTransition, match=f"is {state}, not dead"):
        store.redrive(job.id)
    assert store.get(job.id).state == state
    with pytest.raises(NotFound):
        store.redrive(12345)


def test_redrive_where_needs_a_limit_and_respects_it(store):
    for n in range(4):
        store.enqueue("k", {"n": n}, key=f"k{n}")
        store.fail(store.claim("w"), PermanentError("bug"))
    with pytest.raises(TypeError):
        store.redrive_where(kind="k")  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="limit"):
        store.redrive_where(limit=0)
    preview = store.redrive_where(limit=3, dry_run=True)
    assert len(preview) == 3 and store.counts()["dead"] == 4
    done = store.redrive_where(limit=3, kind="k")
    assert len(done) == 3 and store.counts() == {
        "pending": 3,
        "running": 0,
        "succeeded": 0,
        "retry_wait": 0,
        "dead": 1,
        "cancelled": 0,
    }
    assert store.redrive_where(limit=5, kind="other") == []


# -- history, time, transactions ---------------------------------------------------------


def test_attempts_table_records_worker_start_end_outcome_and_error(store, clock):
    job, _ = store.enqueue("k", {}, key="a", max_attempts=5)
    first = store.claim("w1", lease_s=10)
    clock.advance(3)
    store.fail(first, TransientError("503 from ERP"))
    clock.advance(100)
    second = store.claim("w2", lease_s=10)
    clock.advance(50)  # w2 dies; its lease runs out
    third = store.claim("w3", lease_s=10)
    clock.advance(1)
    store.complete(third)
    t0 = job.created_at
    rows = [
        (a.attempt, a.worker, a.started_at - t0, a.finished_at - t0, a.outcome, a.error_class)
        for a in store.attempts(job.id)
    ]
    assert rows == [
        (1, "w1", 0, 3, "retry_wait", "TransientError"),
        (2, "w2", 103, 153, "lease_expired", None),
        (3, "w3", 153, 154, "succeeded", None),
    ]
    assert "503 from ERP" in store.attempts(job.id)[0].error
    assert second.attempt == 2


def test_time_comes_only_from_the_injected_clock(db_path):
    clock = FakeClock(1_000_000.0)  # 1970: no wall clock would say this
    with JobStore(db_path, clock=clock) as store:
        job, _ = store.enqueue("k", {}, key="a")
        assert job.created_at == job.updated_at == job.run_after == 1_000_000.0
        clock.advance(7)
        claimed = store.claim("w", lease_s=5)
        assert claimed.updated_at == 1_000_007.0 and claimed.lease_until == 1_000_012.0
        [attempt] = store.attempts(job.id)
        assert attempt.started_at == 1_000_007.0
    conn = sqlite3.connect(db_path)
    stamps = conn.execute(
        "SELECT max(created_at), max(updated_at), max(run_after) FROM jobs"
    ).fetchone()
    conn.close()
    assert max(stamps) < 2_000_000.0


def test_enqueue_with_conn_rolls_back_with_the_callers_transaction(store, db_path):
    conn = sqlite3.connect(db_path)
    conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER)")
    conn.commit()
    conn.execute("INSERT INTO orders (total) VALUES (100)")
    store.enqueue("send_receipt", {"order": 1}, key="receipt:1", conn=conn)
    conn.rollback()
    assert store.get_by_key("receipt:1") is None
    assert conn.execute("SELECT count(*) FROM orders").fetchone()[0] == 0
    conn.close()


def test_enqueue_with_conn_commits_both_writes_together(store, db_path):
    conn = sqlite3.connect(db_path)
    conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER)")
    conn.commit()
    conn.execute("INSERT INTO orders (total) VALUES (100)")
    job, created = store.enqueue("send_receipt", {"order": 1}, key="receipt:1", conn=conn)
    assert created
    assert conn.row_factory is None, "enqueue must not change the caller's connection"
    conn.commit()
    conn.close()
    assert store.get_by_key("receipt:1").id == job.id
    check = sqlite3.connect(db_path)
    assert check.execute("SELECT count(*) FROM orders").fetchone()[0] == 1
    check.close()


def test_enqueue_with_conn_in_autocommit_without_a_transaction_is_refused(store, db_path):
    conn = sqlite3.connect(db_path, isolation_level=None)
    with pytest.raises(StoreError, match="open transaction"):
        store.enqueue("k", {}, key="a", conn=conn)
    conn.close()
    assert store.get_by_key("a") is None


@pytest.mark.parametrize("other", ["another_store", "memory"])
def test_enqueue_with_conn_to_another_database_is_refused(store, tmp_path, clock, other):
    # Another labkit file has a jobs table too: without the check the job would commit
    # into the wrong database and this store would never run it.
    if other == "another_store":
        elsewhere = JobStore(tmp_path / "elsewhere.db", clock=clock)
        conn = sqlite3.connect(elsewhere.path)
    else:
        conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY)")
    conn.execute("INSERT INTO orders DEFAULT VALUES")
    with pytest.raises(StoreError, match="not to this store's file"):
        store.enqueue("k", {}, key="a", conn=conn)
    conn.rollback()
    conn.close()
    assert store.get_by_key("a") is None
    if other == "another_store":
        assert elsewhere.get_by_key("a") is None
        elsewhere.close()


def test_a_redrive_opens_a_fresh_deadline_window(db_path, clock):
    # With a 60 s deadline counted from acceptance only, a job redriven a day later would
    # die on its first transient failure; the deadline restarts at the redrive instead.
    policy = RetryPolicy(max_attempts=3, backoff=constant(5.0), deadline=60.0)
    store = make_store(db_path, clock, retry=policy)
    job, _ = store.enqueue("sync", {"n": 1}, max_attempts=3)
    assert store.fail(store.claim("w1"), PermanentError("400")).state == JobState.DEAD
    clock.advance(86_400)
    store.redrive(job.id)
    after = store.fail(store.claim("w1"), TransientError("503"))
    assert after.state == JobState.RETRY_WAIT, after.dead_reason
    clock.advance(100)
    late = store.fail(store.claim("w1"), TransientError("503"))
    assert late.state == JobState.DEAD and "deadline" in (late.dead_reason or "")


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("billing:42:charge:v1", JobState.RETRY_WAIT),  # a natural key: safe to repeat
        (None, JobState.DEAD),  # no key: nothing can recognise the repeat
    ],
)
def test_an_ambiguous_failure_is_retried_only_under_a_natural_key(store, key, expected):
    job, _ = store.enqueue("charge", {"invoice": 42}, key=key)
    after = store.fail(store.claim("w1"), ResponseLost())
    assert after.state == expected
    if expected == JobState.DEAD:
        assert "outcome unknown" in (after.dead_reason or "")


def test_the_retryable_dead_reasons_name_what_the_store_writes(db_path, clock):
    # `labkit retry-failed` picks dead jobs by these prefixes: if the store's wording
    # drifts, this fails instead of the command silently retrying nothing.
    from labkit.store.contract import LEASE_EXPIRED_REASON, RETRYABLE_DEAD_REASONS

    store = make_store(db_path, clock, retry=RetryPolicy(backoff=constant(5.0), deadline=60.0))
    exhausted, _ = store.enqueue("a", {}, max_attempts=1)
    late, _ = store.enqueue("b", {}, max_attempts=5)
    crashed, _ = store.enqueue("c", {}, max_attempts=1)
    broken, _ = store.enqueue("d", {}, max_attempts=5)
    reasons = {}
    reasons["a"] = store.fail(store.claim("w"), TransientError("503")).dead_reason
    clock.advance(58)
    reasons["b"] = store.fail(store.claim("w"), TransientError("503")).dead_reason
    assert store.claim("w").id == crashed.id  # and its worker dies: it never finishes
    clock.advance(31)
    taken = store.claim("w")  # buries c (its only attempt expired), then takes d
    assert taken.id == broken.id
    reasons["c"] = store.get(crashed.id).dead_reason
    reasons["d"] = store.fail(taken, PermanentError("400")).dead_reason
    assert all((reasons[k] or "").startswith(RETRYABLE_DEAD_REASONS) for k in "ab"), reasons
    assert (reasons["c"] or "").startswith(LEASE_EXPIRED_REASON), reasons
    assert not (reasons["d"] or "").startswith((*RETRYABLE_DEAD_REASONS, LEASE_EXPIRED_REASON))
