"""Bad input on every backend: a clear ValueError naming the argument, never a driver error.

Each row of the table is one value a user could pass by mistake; every one of them used
to be accepted (and left a job stuck forever, or never run), or escaped as a raw
sqlite3 / psycopg / OverflowError. After each refusal the store still holds exactly what
it held before: bad input loses nothing and writes nothing. The Hypothesis test then
throws arbitrary values at the same arguments and checks the same two promises.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labkit.clock import FakeClock
from labkit.errors import LabkitError, NotFound, PayloadError
from labkit.job import JobState

NAN, INF = float("nan"), float("inf")


def _deep(levels: int) -> Any:
    value: Any = "bottom"
    for _ in range(levels):
        value = [value]
    return value


def _setup(store: Any) -> dict[str, Any]:
    """A pending job, a running one and a dead one to aim operations at."""
    store.enqueue("charge", {"n": 1}, key="pending-1", queue="side")
    store.enqueue("charge", {"n": 2}, key="running-1")
    running = store.claim("w1")
    store.enqueue("charge", {"n": 3}, key="dead-1", max_attempts=1)
    dying = store.claim("w1")
    dead = store.fail(dying, ValueError("boom"))
    assert dead.state == JobState.DEAD
    return {"running": running, "dead": dead}


def _snapshot(store: Any) -> list[tuple[Any, ...]]:
    return [
        (j.id, j.state, j.attempt, j.run_after, j.lease_until, j.lease_token)
        for j in store.jobs(limit=100)
    ]


# (operation, what it was given, the argument the error must name)
BAD: list[tuple[str, Callable[[Any, dict[str, Any]], Any], str]] = [
    # NaN/inf leases: the job would never be reclaimable after its worker dies.
    ("claim lease nan", lambda s, h: s.claim("w", lease_s=NAN), "lease_s"),
    ("claim lease inf", lambda s, h: s.claim("w", lease_s=INF), "lease_s"),
    ("claim lease negative", lambda s, h: s.claim("w", lease_s=-1), "lease_s"),
    ("claim lease True", lambda s, h: s.claim("w", lease_s=True), "lease_s"),
    ("claim lease text", lambda s, h: s.claim("w", lease_s="30"), "lease_s"),
    ("claim lease 2**70", lambda s, h: s.claim("w", lease_s=2**70), "lease_s"),
    ("claim lease 10**400", lambda s, h: s.claim("w", lease_s=10**400), "lease_s"),
    ("claim_many lease nan", lambda s, h: s.claim_many("w", 3, lease_s=NAN), "lease_s"),
    ("claim_many limit True", lambda s, h: s.claim_many("w", True), "limit"),
    ("claim_many limit 2**70", lambda s, h: s.claim_many("w", 2**70), "limit"),
    ("claim_many limit -1", lambda s, h: s.claim_many("w", -1), "limit"),
    ("claim_many limit 1.5", lambda s, h: s.claim_many("w", 1.5), "limit"),
    ("claim worker None", lambda s, h: s.claim(None), "worker"),
    ("claim worker NUL", lambda s, h: s.claim("w\x00"), "worker"),
    ("claim queues None", lambda s, h: s.claim("w", queues=None), "queues"),
    ("claim queues empty", lambda s, h: s.claim("w", queues=[]), "queues"),
    ("claim queue NUL", lambda s, h: s.claim("w", queues=["a\x00b"]), "queues"),
    ("claim queue None", lambda s, h: s.claim("w", queues=[None]), "queues"),
    ("heartbeat nan", lambda s, h: s.heartbeat(h["running"], lease_s=NAN), "lease_s"),
    ("heartbeat inf", lambda s, h: s.heartbeat(h["running"], lease_s=INF), "lease_s"),
    ("heartbeat negative", lambda s, h: s.heartbeat(h["running"], lease_s=-100), "lease_s"),
    ("heartbeat zero", lambda s, h: s.heartbeat(h["running"], lease_s=0), "lease_s"),
    ("claim worker empty", lambda s, h: s.claim(""), "worker"),
    ("claim worker 1 MB", lambda s, h: s.claim("w" * 2**20), "worker"),
    ("enqueue key 1 MB", lambda s, h: s.enqueue("k", {}, key="k" * 2**20), "key"),
    # run_after NaN never runs on PostgreSQL, raised IntegrityError on SQLite.
    ("run_after nan", lambda s, h: s.enqueue("k", {}, run_after=NAN), "run_after"),
    ("run_after inf", lambda s, h: s.enqueue("k", {}, run_after=INF), "run_after"),
    ("run_after -inf", lambda s, h: s.enqueue("k", {}, run_after=-INF), "run_after"),
    ("run_after 1e300", lambda s, h: s.enqueue("k", {}, run_after=1e300), "run_after"),
    ("run_after True", lambda s, h: s.enqueue("k", {}, run_after=True), "run_after"),
    ("run_after text", lambda s, h: s.enqueue("k", {}, run_after="soon"), "run_after"),
    ("max_attempts True", lambda s, h: s.enqueue("k", {}, max_attempts=True), "max_attempts"),
    ("max_attempts 2**70", lambda s, h: s.enqueue("k", {}, max_attempts=2**70), "max_attempts"),
    ("max_attempts 0", lambda s, h: s.enqueue("k", {}, max_attempts=0), "max_attempts"),
    ("max_attempts 2.0", lambda s, h: s.enqueue("k", {}, max_attempts=2.0), "max_attempts"),
    ("kind None", lambda s, h: s.enqueue(None, {}), "kind"),
    ("kind NUL", lambda s, h: s.enqueue("k\x00", {}), "kind"),
    ("key NUL", lambda s, h: s.enqueue("k", {}, key="a\x00b"), "key"),
    ("key int", lambda s, h: s.enqueue("k", {}, key=5), "key"),
    ("key surrogate", lambda s, h: s.enqueue("k", {}, key="a\ud800"), "key"),
    ("queue None", lambda s, h: s.enqueue("k", {}, queue=None), "queue"),
    ("queue NUL", lambda s, h: s.enqueue("k", {}, queue="q\x00"), "queue"),
    ("payload deep", lambda s, h: s.enqueue("k", _deep(5000)), "payload"),
    ("payload surrogate", lambda s, h: s.enqueue("k", {"a": "x\udc80"}), "payload"),
    ("payload surrogate key", lambda s, h: s.enqueue("k", {"\ud800": 1}), "payload"),
    ("payload nan", lambda s, h: s.enqueue("k", {"a": NAN}), "payload"),
    ("snooze inf", lambda s, h: s.snooze(h["running"], INF), "delay_s"),
    ("snooze nan", lambda s, h: s.snooze(h["running"], NAN), "delay_s"),
    ("snooze negative", lambda s, h: s.snooze(h["running"], -5), "delay_s"),
    ("complete deep result", lambda s, h: s.complete(h["running"], _deep(5000)), "result"),
    ("redrive id True", lambda s, h: s.redrive(True), "job_id"),
    ("redrive id text", lambda s, h: s.redrive("1"), "job_id"),
    ("redrive note None", lambda s, h: s.redrive(h["dead"].id, note=None), "note"),
    ("redrive_where limit True", lambda s, h: s.redrive_where(limit=True), "limit"),
    ("redrive_where limit 2**70", lambda s, h: s.redrive_where(limit=2**70), "limit"),
    ("redrive_where kind NUL", lambda s, h: s.redrive_where(limit=1, kind="\x00"), "kind"),
    ("get id text", lambda s, h: s.get("1"), "job_id"),
    ("get_by_key None", lambda s, h: s.get_by_key(None), "key"),
    ("get_by_key NUL", lambda s, h: s.get_by_key("a\x00"), "key"),
    ("jobs limit -1", lambda s, h: s.jobs(limit=-1), "limit"),
    ("jobs limit 2**70", lambda s, h: s.jobs(limit=2**70), "limit"),
    ("jobs state bogus", lambda s, h: s.jobs(state="bogus"), "state"),
    ("dead_letters limit 2**70", lambda s, h: s.dead_letters(limit=2**70), "limit"),
    ("prune nan", lambda s, h: s.prune_finished(NAN), "older_than_s"),
    ("prune inf", lambda s, h: s.prune_finished(INF), "older_than_s"),
]


@pytest.mark.parametrize("label,call,arg", BAD, ids=[row[0] for row in BAD])
def test_bad_input_is_refused_naming_the_argument_and_writes_nothing(
    make_store: Any, label: str, call: Callable[..., Any], arg: str
) -> None:
    store = make_store(FakeClock(1_000.0))
    held = _setup(store)
    before = _snapshot(store)
    with pytest.raises(ValueError) as caught:
        call(store, held)
    assert arg in str(caught.value), f"{label}: the error must name {arg!r}: {caught.value}"
    assert _snapshot(store) == before, f"{label}: a refused call changed the store"


# Values that are not bad input, but used to reach the driver in a shape it choked on.
ODD_BUT_FINE: list[tuple[str, Callable[[Any, dict[str, Any]], Any]]] = [
    # A huge id cannot exist: NotFound, not OverflowError / NumericValueOutOfRange.
    ("get 2**70", lambda s, h: pytest.raises(NotFound, s.get, 2**70)),
    ("redrive 2**70", lambda s, h: pytest.raises(NotFound, s.redrive, 2**70)),
    ("attempts 2**70", lambda s, h: s.attempts(2**70) == []),
    # Error messages carrying NUL bytes and lone surrogates are stored, cleaned.
    ("fail with NUL", lambda s, h: s.fail(h["running"], ValueError("a\x00b\ud800c"))),
    ("complete with odd result", lambda s, h: s.complete(h["running"], {"x": "\x00\ud800"})),
    ("snooze with NUL reason", lambda s, h: s.snooze(h["running"], 5, reason="r\x00")),
    ("redrive note with NUL", lambda s, h: s.redrive(h["dead"].id, note="n\x00\udc80")),
]


@pytest.mark.parametrize("label,call", ODD_BUT_FINE, ids=[row[0] for row in ODD_BUT_FINE])
def test_odd_values_are_handled_the_same_on_every_backend(
    make_store: Any, label: str, call: Callable[..., Any]
) -> None:
    store = make_store(FakeClock(1_000.0))
    held = _setup(store)
    assert call(store, held), label
    assert all(math.isfinite(j.run_after) for j in store.jobs(limit=100))


def test_a_nan_lease_is_refused_so_no_job_can_be_stuck_running_forever(make_store: Any) -> None:
    """The original finding: a NaN lease made the job unreclaimable once its worker died."""
    clock = FakeClock(1_000.0)
    store = make_store(clock)
    job, _ = store.enqueue("charge", {"n": 1}, key="stuck-1")
    with pytest.raises(ValueError, match="lease_s"):
        store.claim("doomed", lease_s=NAN)
    taken = store.claim("doomed", lease_s=5)  # the worker "dies" holding this lease
    assert taken is not None
    clock.advance(6)
    rescued = store.claim("rescuer", lease_s=5)
    assert rescued is not None and rescued.id == job.id, "the expired lease must come back"


def _driver_errors() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = [sqlite3.Error, OverflowError, TypeError, RecursionError]
    try:
        import psycopg

        errors.append(psycopg.Error)
    except ImportError:  # pragma: no cover - the services extra is not installed
        pass
    return tuple(errors)


anything = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.lists(st.integers(), max_size=2),
)


@settings(
    max_examples=60,
    deadline=None,
    database=None,  # nothing written into the working directory
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    operation=st.sampled_from(
        ["claim", "enqueue_time", "enqueue_count", "enqueue_names", "snooze", "get", "jobs"]
    ),
    value=anything,
)
def test_no_driver_error_escapes_whatever_the_argument(
    make_store: Any, operation: str, value: Any
) -> None:
    store = make_store(FakeClock(1_000.0))
    try:
        if operation == "claim":
            store.enqueue("k", {}, queue="h")
            job = store.claim("w", queues=("h",), lease_s=value)
            if job is not None:
                assert math.isfinite(job.lease_until or NAN)
                store.complete(job)
        elif operation == "enqueue_time":
            job, _ = store.enqueue("k", {"v": repr(value)}, run_after=value)
            assert math.isfinite(job.run_after)
        elif operation == "enqueue_count":
            store.enqueue("k", {"v": repr(value)}, max_attempts=value)
        elif operation == "enqueue_names":
            store.enqueue(value, {"v": repr(value)}, key=value, queue=value)
        elif operation == "snooze":
            store.enqueue("k", {}, queue="s")
            job = store.claim("w", queues=("s",))
            assert job is not None
            try:
                snoozed = store.snooze(job, value)
                assert math.isfinite(snoozed.run_after)
            finally:
                if store.get(job.id).state == JobState.RUNNING:
                    store.complete(job)
        elif operation == "get":
            store.get(value)
        else:
            store.jobs(limit=value)
    except (ValueError, LabkitError) as exc:
        assert not isinstance(exc, _driver_errors())
        assert not isinstance(exc, PayloadError) or "payload" in str(exc)
    except _driver_errors() as exc:  # pragma: no cover - what the test exists to catch
        pytest.fail(f"{operation}({value!r}) let a raw {type(exc).__name__} escape: {exc}")
