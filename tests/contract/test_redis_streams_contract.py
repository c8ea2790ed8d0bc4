"""The stream-shaped subset of the job contract, on a real Redis (labkit.backends.redis).

Every test works under its own key prefix and deletes it afterwards. Idle times are
Redis's own clock: tests age an entry with ``XCLAIM ... IDLE`` instead of sleeping.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from labkit.clock import FakeClock
from labkit.errors import IdempotencyConflict, LeaseLost, PermanentError, TransientError
from labkit.job import JobState
from labkit.store.contract import JobStoreContract, WorkerStore

redis = pytest.importorskip("redis")

from labkit.backends.redis.store import StreamJobStore  # noqa: E402
from labkit.backends.redis.streams import StreamQueue  # noqa: E402


@pytest.fixture
def prefix() -> str:
    return f"test:{uuid.uuid4().hex[:12]}"


@pytest.fixture
def queue(redis_url: str, prefix: str, clock: FakeClock) -> Iterator[StreamQueue]:
    q = StreamQueue(redis_url, prefix, clock=clock)
    yield q
    q.delete_all()
    assert not list(q.r.scan_iter(match=f"{prefix}:*")), "keys left behind"
    q.close()


@pytest.fixture
def store(redis_url: str, prefix: str, clock: FakeClock, rng) -> Iterator[StreamJobStore]:
    s = StreamJobStore(redis_url, prefix, clock=clock, rng=rng, reclaim_idle_ms=30_000)
    yield s
    s.delete_all()
    s.close()


# -- the stream moves ------------------------------------------------------------------


def test_same_key_adds_one_entry_and_other_payload_conflicts(queue):
    first, created = queue.add("charge", {"amount": 1}, "k1")
    again, created_again = queue.add("charge", {"amount": 1}, "k1")
    assert created and first is not None
    assert (again, created_again) == (None, False)
    assert queue.length() == 1
    with pytest.raises(IdempotencyConflict, match="k1"):
        queue.add("charge", {"amount": 2}, "k1")
    assert queue.length() == 1


def test_key_record_lives_key_ttl_s_and_then_the_key_is_new_again(redis_url, prefix):
    q = StreamQueue(redis_url, prefix, key_ttl_s=60)
    try:
        assert q.add("charge", {"n": 1}, "k1")[1]
        record = f"{prefix}:key:k1"
        assert 0 < q.r.ttl(record) <= 60
        q.r.delete(record)  # what the TTL does when it runs out
        assert q.add("charge", {"n": 1}, "k1")[1] and q.length() == 2
        with pytest.raises(ValueError, match="key_ttl_s"):
            StreamQueue(q.r, prefix, key_ttl_s=0)
    finally:
        q.delete_all()


def test_restarted_consumer_reads_its_own_pending_with_zero(queue):
    queue.add("charge", {"n": 1}, "k1")
    (got,) = queue.read_new("c1")
    # c1 "restarts": new work is empty, its own pending entry is still there for it.
    assert queue.read_new("c1") == []
    (again,) = queue.read_own_pending("c1")
    assert again.id == got.id
    assert [(p.consumer, p.deliveries) for p in queue.pending()] == [("c1", 2)]
    assert queue.read_own_pending("c2") == []  # another consumer's pending is not its own


def test_autoclaim_takes_only_entries_idle_past_the_threshold(queue):
    queue.add("charge", {"n": 1}, "k1")
    (got,) = queue.read_new("dead-consumer")
    assert queue.autoclaim("rescuer", min_idle_ms=30_000).entries == []  # fresh: not taken
    queue.age(got.id, 60_000)
    claimed = queue.autoclaim("rescuer", min_idle_ms=30_000)
    assert [e.id for e in claimed.entries] == [got.id]
    (row,) = queue.pending()
    assert (row.consumer, row.deliveries) == ("rescuer", 2)
    assert queue.ack(got.id) == 1 and queue.pending() == []


def test_dead_letter_copies_with_reason_and_acks_in_one_step(queue):
    queue.add("charge", {"n": 1}, "poison")
    (got,) = queue.read_new("c1")
    queue.dead_letter(got, "delivered 3 times", deliveries=3)
    assert queue.pending() == []
    (dead,) = queue.dead_letters()
    assert (dead.key, dead.fields["reason"], dead.fields["origin"]) == (
        "poison",
        "delivered 3 times",
        got.id,
    )


def test_redrive_needs_a_limit_keeps_the_key_and_moves_at_most_limit(queue):
    for n in range(3):
        queue.add("charge", {"n": n}, f"k{n}")
    for entry in queue.read_new("c1", count=3):
        queue.dead_letter(entry, "bad")
    with pytest.raises(ValueError, match="limit"):
        queue.redrive(0)
    moved = queue.redrive(2, note="fixed the bug")
    assert len(moved) == 2 and len(queue.dead_letters()) == 1
    back = queue.read_new("c2", count=5)
    assert [e.key for e in back] == ["k0", "k1"]
    assert all(e.fields["redriven_from"] for e in back)


def test_two_redrives_at_once_move_each_dead_letter_once(queue, monkeypatch):
    for n in range(2):
        queue.add("charge", {"n": n}, f"k{n}")
    for entry in queue.read_new("c1", count=2):
        queue.dead_letter(entry, "bad")
    # Operator 2 reads the dead letters, then operator 1's whole redrive runs before
    # operator 2 writes: the interleaving that moved every entry twice.
    read = type(queue).dead_letters
    seen = []

    def read_then_let_the_other_run(self, count=100):  # type: ignore[no-untyped-def]
        letters = read(self, count=count)
        if not seen:
            seen.append(letters)
            monkeypatch.setattr(type(queue), "dead_letters", read)
            seen.append(queue.redrive(5, note="operator 1"))
        return letters

    monkeypatch.setattr(type(queue), "dead_letters", read_then_let_the_other_run)
    second = queue.redrive(5, note="operator 2")
    first = seen[1]
    assert len(seen[0]) == 2, "operator 2 read both dead letters before operator 1 wrote"
    assert (len(first), second) == (2, [])
    back = queue.read_new("c2", count=10)
    assert sorted(e.key for e in back) == ["k0", "k1"]
    assert queue.dead_letters() == []


def test_maxlen_trims_a_pending_entry_and_autoclaim_reports_it_deleted(queue):
    queue.add("charge", {"n": 0}, "k0")
    (held,) = queue.read_new("c1")
    for n in range(1, 4):
        queue.add("charge", {"n": n}, f"k{n}", maxlen=2)
    assert queue.length() == 2
    claimed = queue.autoclaim("c2", min_idle_ms=0)
    assert held.id in claimed.deleted  # still pending, but its payload is gone
    assert held.id not in [e.id for e in claimed.entries]


def test_idempotency_record_is_set_once_and_forgotten_when_it_expires(queue):
    assert queue.remember("k1", ttl_s=60)
    assert not queue.remember("k1", ttl_s=60)
    assert 0 < queue.r.ttl(f"{queue.prefix}:done:k1") <= 60
    queue.forget("k1")  # what the TTL does once it runs out
    assert queue.remember("k1", ttl_s=60)  # a late redelivery would run the effect again
    with pytest.raises(ValueError, match="ttl_s"):
        queue.remember("k2", ttl_s=0)


# -- the worker's store on a stream ------------------------------------------------------


def test_stream_store_satisfies_the_contract_protocol(store):
    assert isinstance(store, JobStoreContract)
    assert isinstance(store, WorkerStore)  # the worker runs on it as on the others


def test_enqueue_is_idempotent_by_key(store):
    job, created = store.enqueue("charge", {"a": 1}, key="k1")
    again, created_again = store.enqueue("charge", {"a": 1}, key="k1")
    assert created and not created_again and again.id == job.id
    assert store.q.length() == 1
    with pytest.raises(IdempotencyConflict):
        store.enqueue("charge", {"a": 2}, key="k1")


def test_two_consumers_never_get_the_same_job(store):
    for n in range(5):
        store.enqueue("charge", {"n": n}, key=f"k{n}")
    got = [store.claim(w) for w in ("a", "b", "a", "b", "a", "b")]
    ids = [j.id for j in got if j is not None]
    assert len(ids) == 5 and len(set(ids)) == 5


def test_complete_acks_and_a_reclaimed_holder_gets_lease_lost(store):
    store.enqueue("charge", {}, key="k1")
    slow = store.claim("slow")
    assert slow is not None and slow.attempt == 1
    store.q.age(slow.lease_token.split("|")[0], 60_000)
    taken = store.claim("fast")
    assert taken is not None and taken.attempt == 2 and taken.lease_owner == "fast"
    with pytest.raises(LeaseLost, match="no longer pending"):
        store.complete(slow, "late")
    assert store.get(slow.id).state == JobState.RUNNING  # the stale ack changed nothing
    done = store.complete(taken, "ok")
    assert done.state == JobState.SUCCEEDED and store.q.pending() == []


def test_transient_failure_waits_in_the_pel_until_run_after(store, clock):
    store.enqueue("charge", {}, key="k1", max_attempts=3)
    job = store.claim("w")
    failed = store.fail(job, TransientError("503"))
    assert failed.state == JobState.RETRY_WAIT and failed.run_after > clock.now()
    assert store.claim("w") is None  # not due: it stays pending, not redelivered
    assert len(store.q.pending()) == 1
    clock.set(failed.run_after + 0.001)
    again = store.claim("w")
    assert again is not None and again.attempt == 2


def test_a_job_enqueued_for_later_waits_and_runs_as_attempt_one(store, clock):
    store.enqueue("charge", {}, key="later", run_after=clock.now() + 10)
    assert store.claim("w") is None  # read from the stream, but not due: not run
    clock.advance(10)
    job = store.claim("w")
    assert job is not None and job.key == "later" and job.attempt == 1


def test_next_due_is_the_next_wait_or_lease_end_on_the_clock(store, clock):
    assert store.next_due() is None
    store.enqueue("charge", {}, key="later", run_after=clock.now() + 10)
    assert store.next_due() == clock.now() + 10
    clock.advance(10)
    job = store.claim("w", lease_s=30)
    assert store.next_due() == job.lease_until == clock.now() + 30
    store.complete(job)
    assert store.next_due() is None


def test_permanent_failure_goes_to_the_dead_letter_stream_acked(store):
    store.enqueue("charge", {}, key="k1")
    job = store.claim("w")
    dead = store.fail(job, PermanentError("card declined"))
    assert dead.state == JobState.DEAD and "card declined" in (dead.dead_reason or "")
    assert store.q.pending() == []
    (letter,) = store.q.dead_letters()
    assert letter.key == "k1" and "card declined" in letter.fields["reason"]


def test_redrive_sends_a_dead_job_back_with_its_key(store):
    store.enqueue("charge", {}, key="k1")
    store.fail(store.claim("w"), PermanentError("bug"))
    with pytest.raises(ValueError, match="limit"):
        store.redrive_where(limit=0)
    (back,) = store.redrive_where(limit=5, note="bug fixed")
    assert back.state == JobState.PENDING and back.key == "k1" and back.redrives == 1
    assert store.q.dead_letters() == []
    again = store.claim("w")
    assert again is not None and again.key == "k1" and again.attempt == 1


# -- the shared contract suite, where it applies ----------------------------------------

import test_hardening_contract as hardening  # noqa: E402
import test_job_store_contract as shared  # noqa: E402
import test_job_store_contract_details as shared_details  # noqa: E402


@pytest.fixture
def make_store(redis_url: str) -> Iterator[Any]:
    """The contract suite's factory, here opening StreamJobStores under fresh prefixes."""
    opened: list[StreamJobStore] = []

    def make(clock: FakeClock, **options: Any) -> StreamJobStore:
        opened.append(
            StreamJobStore(redis_url, f"contract:{uuid.uuid4().hex[:12]}", clock=clock, **options)
        )
        return opened[-1]

    yield make
    for s in opened:
        s.delete_all()
        s.close()


class TestSharedContractOnStreams(shared.TestJobStoreContract):
    """Every rule of test_job_store_contract.py, on Redis Streams."""


def _not_kept(why: str) -> Any:
    @pytest.mark.skip(reason=f"not kept on Redis Streams: {why}")
    def test(self: Any) -> None:
        raise AssertionError("skipped")

    return test


class TestSharedDetailsOnStreams(shared_details.TestJobStoreContractDetails):
    """The finer rules on Redis Streams; the ones a stream cannot keep say why."""

    test_snooze_spends_no_attempt_and_retires_the_token = _not_kept(
        "a delivery cannot be handed back without counting it"
    )
    test_claim_many_takes_the_oldest_due_first_from_the_named_queues = _not_kept(
        "one stream is one queue; use a stream per queue"
    )


#: The walk `labkit retry-failed` leans on, run here with the streams' make_store.
test_dead_by_reason_walks_every_matching_dead_job_once_in_order = (
    hardening.test_dead_by_reason_walks_every_matching_dead_job_once_in_order
)


def test_dead_by_reason_refuses_a_bad_argument_at_the_call(store):
    store.enqueue("charge", {}, key="k1", max_attempts=1)
    store.fail(store.claim("w"), TransientError("503"))
    with pytest.raises(ValueError, match="batch"):
        store.dead_by_reason(("attempts exhausted",), batch=0)
    with pytest.raises(ValueError, match="kind"):
        store.count_dead_by_reason(("attempts exhausted",), kind="")
    assert [j.key for j in store.dead_by_reason(("attempts exhausted",))] == ["k1"]
    assert store.count_dead_by_reason(("attempts exhausted",), matching=False) == 0


@pytest.mark.parametrize("name", shared._operations())
def test_stream_store_signatures_match_the_contract(name):
    import inspect

    wanted = inspect.signature(getattr(JobStoreContract, name))
    have = inspect.signature(getattr(StreamJobStore, name))
    for param in wanted.parameters.values():
        assert param.name in have.parameters, f"StreamJobStore.{name} lacks {param.name}"
        got = have.parameters[param.name]
        assert (got.kind, got.default) == (param.kind, param.default), f"{name}({param.name})"


@pytest.mark.parametrize(
    ("label", "call", "arg"),
    [
        ("heartbeat negative", lambda s, job: s.heartbeat(job, lease_s=-100), "lease_s"),
        ("heartbeat zero", lambda s, job: s.heartbeat(job, lease_s=0), "lease_s"),
        ("heartbeat nan", lambda s, job: s.heartbeat(job, lease_s=float("nan")), "lease_s"),
        ("heartbeat inf", lambda s, job: s.heartbeat(job, lease_s=float("inf")), "lease_s"),
        ("claim worker empty", lambda s, job: s.claim(""), "worker"),
        ("claim worker 1 MB", lambda s, job: s.claim("w" * 2**20), "worker"),
        ("enqueue key 1 MB", lambda s, job: s.enqueue("k", {}, key="k" * 2**20), "key"),
    ],
    ids=lambda v: v if isinstance(v, str) and " " in v else "",
)
def test_bad_lease_worker_and_key_are_refused_as_on_the_other_engines(
    store: StreamJobStore, label: str, call: Any, arg: str
) -> None:
    """The same validators as SQLite and PostgreSQL (labkit.store.rules, labkit.jobargs)."""
    store.enqueue("charge", {"n": 1}, key="held")
    store.enqueue("charge", {"n": 2}, key="waiting")
    job = store.claim("w1", lease_s=30)
    assert job is not None
    with pytest.raises(ValueError) as caught:
        call(store, job)
    assert arg in str(caught.value), f"{label}: {caught.value}"
    # Nothing moved: the held job keeps its lease, the other is still there to claim.
    assert store.get(job.id).lease_until == job.lease_until
    other = store.claim("w2", lease_s=30)
    assert other is not None and other.key == "waiting"


def test_malformed_entries_are_set_aside_one_at_a_time_and_the_rest_runs(
    store: StreamJobStore,
) -> None:
    """An entry without a key, one without a job record, a job whose payload is not
    JSON: each goes to the dead-letter stream with its reason; every good job still runs."""
    first, _ = store.enqueue("charge", {"n": 1}, key="good-1")
    store.r.xadd(store.q.stream, {"kind": "charge"})  # no key field
    store.r.xadd(store.q.stream, {"key": "ghost"})  # no job record behind it
    broken, _ = store.enqueue("charge", {"n": 2}, key="broken")
    store.r.hset(store._hash("broken"), "payload", "{not json")  # a hand edit
    last, _ = store.enqueue("charge", {"n": 3}, key="good-2")

    ran = []
    while (job := store.claim("w1", lease_s=30)) is not None:
        ran.append(job.key)
        store.complete(job)
    assert ran == ["good-1", "good-2"]
    letters = [fields for _id, fields in store.r.xrange(store.q.dead)]
    reasons = [f["reason"] for f in letters]
    assert len(letters) == 3, reasons
    assert "no 'key' field" in reasons[0] and "ghost" in reasons[1]
    assert "broken" in reasons[2] and "not JSON" in reasons[2]
    assert all(r.startswith("malformed entry:") for r in reasons)
    assert store.q.pending() == []  # nothing left pending for anyone to trip on again
    assert store.get(broken.id).state == JobState.DEAD  # and still readable
    assert store.counts()["succeeded"] == 2 and store.counts()["dead"] == 1


@pytest.mark.parametrize(
    ("field", "value"),
    [
        # Each a hand edit of a job record that the claim script or Job cannot read.
        ("attempt", "abc"),
        ("max_attempts", ""),
        ("run_after", "soon"),
        ("state", "bogus"),
        ("created_at", "nan?"),
    ],
)
def test_a_job_record_with_an_unreadable_field_is_set_aside_and_the_rest_runs(
    store: StreamJobStore, field: str, value: str
) -> None:
    """Not only the payload: a record whose numbers or state cannot be read stopped
    every claim at its entry (a Lua error or a ValueError, again at each claim)."""
    broken, _ = store.enqueue("charge", {"n": 1}, key="broken")
    store.r.hset(store._hash("broken"), field, value)
    store.enqueue("charge", {"n": 2}, key="good")
    job = store.claim("w1", lease_s=30)
    assert job is not None and job.key == "good"
    [(_id, letter)] = store.r.xrange(store.q.dead)
    assert "broken" in letter["reason"] and field in letter["reason"], letter["reason"]
    store.complete(job)
    assert store.claim("w1", lease_s=30) is None
    assert store.q.pending() == []  # nothing left for the next claim to trip on
    # Still listed and counted as dead; its dead letter keeps the value as it was.
    assert store.get(broken.id).state == JobState.DEAD
    assert store.counts()["dead"] == 1 and store.counts()["succeeded"] == 1
    assert f'"{field}": "{value}"' in letter["payload"]


def test_a_plain_consumer_gets_the_good_entries_of_a_batch_with_a_bad_one(
    queue: StreamQueue,
) -> None:
    good = [queue.r.xadd(queue.stream, {"key": f"k{n}", "kind": "x", "payload": "{}"})
            for n in range(2)]  # fmt: skip
    bad = queue.r.xadd(queue.stream, {"key": "bad", "kind": "x", "payload": "{oops"})
    also = queue.r.xadd(queue.stream, {"key": "k9", "kind": "x", "payload": '{"a": 1}'})
    got = queue.read_new("c1", count=10)
    assert [e.id for e in got] == [*good, also]
    letters = queue.r.xrange(queue.dead)
    assert [f["origin"] for _i, f in letters] == [bad] and "not JSON" in letters[0][1]["reason"]
    assert [p.id for p in queue.pending()] == [*good, also]  # the bad one is acked


def test_a_crashed_workers_job_behind_a_page_of_delayed_ones_is_still_found(
    store: StreamJobStore, clock: FakeClock
) -> None:
    from labkit.backends.redis.store import PENDING_PAGE

    later = clock.now() + 3600
    for n in range(PENDING_PAGE + 20):
        store.enqueue("charge", {"n": n}, key=f"later-{n}", run_after=later)
    store.enqueue("charge", {"n": -1}, key="victim")
    first = store.claim("w1", lease_s=30)  # reads past the delayed ones: they stay pending
    assert first is not None and first.key == "victim"
    assert len(store.q.pending(count=1000)) == PENDING_PAGE + 21
    clock.sleep(31)  # w1 died holding it; its lease ran out
    again = store.claim("w2", lease_s=30)
    assert again is not None and again.key == "victim" and again.lease_owner == "w2"
