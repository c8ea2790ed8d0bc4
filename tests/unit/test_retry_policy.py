"""Backoff formulas against the AWS simulator, the retry policy, and retry_call on a FakeClock."""

from __future__ import annotations

import random
import socket

import pytest

from labkit.clock import FakeClock
from labkit.errors import ConnectionLost, PermanentError, ResponseLost, StoreBusy, TransientError
from labkit.retry import (
    RetryBudget,
    RetryPolicy,
    capped,
    constant,
    decorrelated_jitter,
    default_classify,
    delays,
    equal_jitter,
    exponential,
    full_jitter,
    none,
    random_uniform,
    retry_call,
)

SEEDS = [0, 1, 7, 42, 2015]


# The reference: the backoff classes of aws-samples/aws-arch-backoff-simulator
# (src/backoff_simulator.py), transcribed with the module-level `random` replaced by an
# injected generator. Their `backoff(n)` is called with n = 1, 2, ... (the client
# increments its attempt before asking); both are asked for those same n here.
# (RetryPolicy asks for n = attempt - 1, pinned by test_policy_numbering_...; the herd
# asks for the simulator's n, pinned by tests/unit/test_herd.py.)
class AwsBackoff:
    def __init__(self, base: float, cap: float, rng: random.Random) -> None:
        self.base, self.cap, self.rng = base, cap, rng

    def expo(self, n: int) -> float:
        return min(self.cap, pow(2, n) * self.base)


class AwsExpo(AwsBackoff):
    def backoff(self, n: int) -> float:
        return self.expo(n)


class AwsEqualJitter(AwsBackoff):
    def backoff(self, n: int) -> float:
        v = self.expo(n)
        return v / 2 + self.rng.uniform(0, v / 2)


class AwsFullJitter(AwsBackoff):
    def backoff(self, n: int) -> float:
        v = self.expo(n)
        return self.rng.uniform(0, v)


class AwsDecorr(AwsBackoff):
    def __init__(self, base: float, cap: float, rng: random.Random) -> None:
        super().__init__(base, cap, rng)
        self.sleep = base

    def backoff(self, n: int) -> float:
        self.sleep = min(self.cap, self.rng.uniform(self.base, self.sleep * 3))
        return self.sleep


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        (exponential, AwsExpo),  # no jitter: identical with or without an rng
        (full_jitter, AwsFullJitter),  # U(0, e)
        (equal_jitter, AwsEqualJitter),  # e/2 + U(0, e/2)
        (decorrelated_jitter, AwsDecorr),  # min(cap, U(base, sleep*3)), sleep starts at base
    ],
)
def test_formulas_match_the_aws_simulator_for_a_seeded_rng(ours, theirs, seed):
    # base 5 and cap 2000 are the simulator's own settings; 15 retries reach the cap.
    reference = theirs(5, 2000, random.Random(seed))
    expected = [reference.backoff(n) for n in range(1, 16)]
    backoff, rng, previous, got = ours(base=5, cap=2000), random.Random(seed), 0.0, []
    for n in range(1, 16):
        previous = backoff(n, rng, previous)
        got.append(previous)
    assert got == expected
    assert max(expected) <= 2000


def test_decorrelated_jitter_is_min_cap_of_uniform_base_to_three_times_the_last_sleep():
    # Written out by hand, not through a reference class: sleep starts at base.
    rng, check = random.Random(4), random.Random(4)
    sleep, previous = 5.0, 0.0
    for n in range(1, 12):
        sleep = min(100.0, check.uniform(5.0, sleep * 3))
        previous = decorrelated_jitter(base=5, cap=100)(n, rng, previous)
        assert previous == sleep


def test_policy_numbering_first_retry_waits_base_and_store_fail_uses_it(tmp_path):
    # RetryPolicy counts like tenacity: after attempt 1 fails, n = 0, so e(0) = base.
    policy = RetryPolicy(max_attempts=4, backoff=exponential(base=5, cap=2000))
    rng = random.Random(0)
    assert [policy.decide(TimeoutError(), a, rng).delay for a in (1, 2, 3)] == [5, 10, 20]
    # JobStore.fail asks the same policy: run_after = now + delay, Retry-After a floor.
    from labkit.store import JobStore

    clock = FakeClock(start=100)
    store = JobStore(tmp_path / "jobs.db", clock=clock, rng=random.Random(0), retry=policy)
    store.enqueue("sync", {"n": 1}, key="erp:1:sync:v1")
    first = store.fail(store.claim("w"), TimeoutError("read timed out"))
    assert (first.state, first.run_after) == ("retry_wait", 105)
    clock.set(105)
    second = store.fail(store.claim("w"), TransientError(status=429, retry_after=90))
    assert second.run_after == 105 + 90  # the server's Retry-After beats e(1) = 10


def test_exponential_doubles_until_the_cap():
    assert delays(exponential(base=1, cap=10), 6, random.Random(0)) == [1, 2, 4, 8, 10, 10]


def test_exponential_does_not_overflow_on_huge_attempt_numbers():
    assert exponential(base=1, cap=60)(5000, random.Random(0)) == 60


def test_jitter_stays_inside_its_window_over_many_draws():
    rng = random.Random(3)
    for n in range(12):
        e = min(100.0, 2.0**n)
        assert 0 <= full_jitter(base=1, cap=100)(n, rng) <= e
        assert e / 2 <= equal_jitter(base=1, cap=100)(n, rng) <= e
    previous = 0.0
    for n in range(50):
        delay = decorrelated_jitter(base=2, cap=100)(n, rng, previous)
        assert 2 <= delay <= min(100, max(previous, 2) * 3)
        previous = delay


def test_strategies_compose_by_addition_and_capping():
    rng_a, rng_b = random.Random(9), random.Random(9)
    combined = exponential(base=1) + random_uniform(0, 1)
    got = [combined(n, rng_a) for n in range(5)]
    expected = [2.0**n + rng_b.uniform(0, 1) for n in range(5)]
    assert got == expected
    assert capped(exponential(base=1), 5)(10, rng_a) == 5
    assert (constant(2) + none())(3, rng_a) == 2


# -- classification ------------------------------------------------------------------


class HttpError(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status


@pytest.mark.parametrize(
    ("error", "verdict"),
    [
        (ConnectionRefusedError(), "never_sent"),  # nothing listened: nothing was sent
        (socket.gaierror(), "never_sent"),  # the name did not resolve
        (HttpError(408), "never_sent"),  # the server gave up waiting for the request
        (HttpError(429), "never_sent"),  # rate limited, before any work
        (HttpError(503), "never_sent"),  # not taking requests now
        (TransientError(status=502), "never_sent"),  # labkit's own: says nothing happened
        (StoreBusy(), "never_sent"),  # a local database stayed locked: nothing committed
        (ConnectionLost(), "never_sent"),  # dropped before the commit
        (TimeoutError("read timed out"), "maybe_done"),  # sent; the answer never came
        (ConnectionResetError(), "maybe_done"),  # reset after the request may have left
        (BrokenPipeError(), "maybe_done"),
        (HttpError(500), "maybe_done"),  # the server may have acted before it failed
        (HttpError(502), "maybe_done"),
        (HttpError(504), "maybe_done"),  # the gateway stopped waiting, not the upstream
        (ResponseLost(), "maybe_done"),  # sent, then the answer was lost
        (ConnectionLost(may_have_committed=True), "maybe_done"),
        (HttpError(400), "permanent"),  # bad request: a bug, retrying repeats it
        (HttpError(401), "permanent"),  # credentials
        (HttpError(403), "permanent"),  # forbidden
        (HttpError(404), "permanent"),  # not found
        (ValueError("amount must be positive"), "permanent"),  # validation
        (PermanentError(status=422), "permanent"),
    ],
)
def test_errors_are_classified(error, verdict):
    assert default_classify(error) == verdict


def test_a_real_clients_errors_are_classified_by_what_reached_the_server():
    """httpx against real sockets: a closed port never got the request, a silent server did."""
    httpx = pytest.importorskip("httpx")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    with pytest.raises(httpx.ConnectError) as refused:
        httpx.post(f"http://127.0.0.1:{closed}/charge", timeout=2.0)
    assert default_classify(refused.value) == "never_sent"

    with socket.socket() as silent:  # accepts, reads the request, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        with pytest.raises(httpx.ReadTimeout) as lost:
            httpx.post(f"http://127.0.0.1:{port}/charge", json={"amount": 5}, timeout=0.3)
        conn, _ = silent.accept()
        with conn:
            received = conn.recv(65536)
    assert received.startswith(b"POST /charge"), received  # the server did get it
    assert default_classify(lost.value) == "maybe_done"


def test_maybe_done_is_retried_only_under_an_idempotency_key():
    policy = RetryPolicy(max_attempts=3, backoff=constant(1))
    rng = random.Random(0)
    for error in (ResponseLost(), TimeoutError("read timed out"), HttpError(500)):
        assert policy.decide(error, 1, rng, idempotent=True).retry
        refused = policy.decide(error, 1, rng, idempotent=False)
        assert not refused.retry and "idempotency key" in refused.reason
    assert policy.decide(HttpError(503), 1, rng, idempotent=False).retry  # never sent
    strict = RetryPolicy(max_attempts=3, backoff=constant(1), retry_maybe_done=False)
    assert not strict.decide(ResponseLost(), 1, rng, idempotent=True).retry


def test_retry_after_is_a_floor_under_the_backoff():
    policy = RetryPolicy(max_attempts=3, backoff=constant(1))
    decision = policy.decide(TransientError(status=429, retry_after=30), 1, random.Random(0))
    assert decision.retry and decision.delay == 30


def test_attempt_budget_and_deadline_stop_retries():
    policy = RetryPolicy(max_attempts=3, backoff=constant(10), deadline=25)
    rng = random.Random(0)
    assert not policy.decide(TimeoutError(), 3, rng).retry
    assert policy.decide(TimeoutError(), 1, rng, started_at=0, now=10).retry
    late = policy.decide(TimeoutError(), 2, rng, started_at=0, now=20)
    assert not late.retry and "deadline" in late.reason


# -- retry_call ----------------------------------------------------------------------


class Flaky:
    """Fails with the given errors in order, then returns 'ok'; counts calls."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


def test_retry_call_waits_on_the_clock_and_returns_the_result():
    clock = FakeClock(start=0)
    fn = Flaky(ConnectionRefusedError(), TransientError(status=503))
    seen = []
    result = retry_call(
        fn,
        RetryPolicy(max_attempts=5, backoff=exponential(base=2)),
        clock,
        random.Random(0),
        on_retry=lambda attempt, error, d: seen.append((attempt, d.delay)),
    )
    assert result == "ok" and fn.calls == 3
    assert seen == [(1, 2.0), (2, 4.0)]
    assert clock.now() == 6.0


def test_retry_call_honours_retry_after():
    clock = FakeClock(start=0)
    fn = Flaky(TransientError(status=429, retry_after=60))
    retry_call(fn, RetryPolicy(backoff=constant(1)), clock, random.Random(0))
    assert clock.now() == 60


def test_retry_call_raises_a_permanent_error_at_once():
    fn = Flaky(HttpError(404))
    with pytest.raises(HttpError) as info:
        retry_call(fn, RetryPolicy(), FakeClock(start=0), random.Random(0))
    assert fn.calls == 1
    assert "permanent" in "".join(info.value.__notes__)


def test_retry_call_stops_at_the_attempt_budget():
    fn = Flaky(*[ConnectionRefusedError(f"t{i}") for i in range(10)])
    with pytest.raises(ConnectionRefusedError, match="t2"):
        policy = RetryPolicy(max_attempts=3, backoff=constant(1))
        retry_call(fn, policy, FakeClock(0), random.Random(0))
    assert fn.calls == 3


def test_retry_call_stops_at_the_deadline():
    clock = FakeClock(start=0)
    fn = Flaky(*[ConnectionRefusedError() for _ in range(10)])
    policy = RetryPolicy(max_attempts=10, backoff=constant(4), deadline=10)
    with pytest.raises(ConnectionRefusedError) as info:
        retry_call(fn, policy, clock, random.Random(0))
    assert fn.calls == 3  # at 0, 4 and 8; a wait to 12 would pass the deadline
    assert clock.now() == 8
    assert "deadline" in "".join(info.value.__notes__)


def test_retry_call_retries_a_lost_response_only_with_an_idempotency_key():
    without = Flaky(ResponseLost())
    with pytest.raises(ResponseLost):
        retry_call(without, RetryPolicy(backoff=constant(1)), FakeClock(0), random.Random(0))
    assert without.calls == 1
    with_key = Flaky(ResponseLost())
    result = retry_call(
        with_key, RetryPolicy(backoff=constant(1)), FakeClock(0), random.Random(0),
        idempotency_key="billing:42:charge:v1",
    )
    assert result == "ok" and with_key.calls == 2


def test_retry_call_does_not_repeat_a_read_timeout_without_a_key():
    """A read timeout is the lost answer under another name: one call, then the error."""
    fn = Flaky(TimeoutError("read timed out"))
    with pytest.raises(TimeoutError) as info:
        retry_call(fn, RetryPolicy(backoff=constant(1)), FakeClock(0), random.Random(0))
    assert fn.calls == 1
    assert "outcome unknown" in "".join(info.value.__notes__)


def test_retry_layers_multiply_and_a_shared_budget_stops_them():
    """Three layers of 3, 3 and 5 attempts make 45 calls; a budget keeps retries few."""
    calls = 0

    def down() -> str:
        nonlocal calls
        calls += 1
        raise TransientError("503", status=503)

    def layered(budget: RetryBudget | None) -> None:
        clock, rng = FakeClock(0), random.Random(0)

        def layer(fn, attempts):  # type: ignore[no-untyped-def]
            policy = RetryPolicy(max_attempts=attempts, backoff=constant(0))
            return lambda: retry_call(fn, policy, clock, rng, budget=budget)

        with pytest.raises(TransientError):
            layer(layer(layer(down, 3), 3), 5)()

    layered(None)
    assert calls == 3 * 3 * 5
    calls = 0
    budget = RetryBudget(max_tokens=10, token_ratio=0.1)
    layered(budget)
    # Each layer that sees a failure takes a token: 3 inner failures (10 -> 7), the middle
    # layer's (6), one more inner call (5: half gone, no retry), then middle and outer.
    assert calls == 4 and budget.tokens == 3
    calls = 0
    layered(budget)
    assert calls == 1  # the next request gets its first attempt only


def test_a_retry_budget_refills_on_success():
    budget = RetryBudget(max_tokens=10, token_ratio=0.5)
    for _ in range(5):
        budget.failed()
    assert not budget.allows_retry()
    budget.succeeded()
    assert budget.allows_retry() and budget.tokens == 5.5
    for _ in range(100):
        budget.succeeded()
    assert budget.tokens == 10
