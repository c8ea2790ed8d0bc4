"""The herd simulation: deterministic per seed, and jitter cuts the service's total work."""

from __future__ import annotations

import heapq
import random

import pytest

from labkit.patterns.herd import compare, simulate, strategies
from labkit.retry import constant

SEEDS = list(range(10))


def test_same_seed_same_run_and_every_client_finishes():
    full = strategies()["full_jitter"]
    a = simulate(20, full, random.Random(3), strategy="full_jitter", seed=3)
    b = simulate(20, full, random.Random(3), strategy="full_jitter", seed=3)
    assert a == b and a.write_times_ms == b.write_times_ms
    assert a.calls - a.failures == 20  # one successful write per client
    assert len(a.write_times_ms) == a.calls
    other = simulate(20, full, random.Random(4), strategy="full_jitter", seed=4)
    assert other.write_times_ms != a.write_times_ms


def aws_reference(clients: int, kind: str, rng: random.Random) -> tuple[int, float]:
    """The OCC model of aws-samples/aws-arch-backoff-simulator, written out independently.

    Same events (read, read reply, write, write reply), same draw order (each message's
    network delay, then the backoff), the client's attempt counted from 1 before it asks
    for a backoff, decorrelated jitter's sleep starting at base, base 5 and cap 2000.
    Returns (writes the server handled, time of the last event).
    """
    base, cap = 5.0, 2000.0

    def net() -> float:
        return abs(rng.normalvariate(10, 2))

    def expo(n: int) -> float:
        return min(cap, 2**n * base)

    sleep = [base] * clients
    attempt = [0] * clients

    def backoff(c: int) -> float:
        attempt[c] += 1
        v = expo(attempt[c])
        if kind == "none":
            return 0.0
        if kind == "exponential":
            return v
        if kind == "equal_jitter":
            return v / 2 + rng.uniform(0, v / 2)
        if kind == "full_jitter":
            return rng.uniform(0, v)
        sleep[c] = min(cap, rng.uniform(base, sleep[c] * 3))
        return sleep[c]

    version = calls = 0
    events: list[tuple[float, str, int, object]] = []
    for c in range(clients):
        heapq.heappush(events, (net(), "read", c, None))
    tm = 0.0
    while events:
        tm, what, c, value = heapq.heappop(events)
        if what == "read":
            heapq.heappush(events, (tm + net(), "read_reply", c, version))
        elif what == "read_reply":
            heapq.heappush(events, (tm + net(), "write", c, value))
        elif what == "write":
            calls += 1
            ok = value == version
            version += ok
            heapq.heappush(events, (tm + net(), "write_reply", c, ok))
        elif not value:
            travel = net()
            heapq.heappush(events, (tm + travel + backoff(c), "read", c, None))
    return calls, tm


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("name", list(strategies()))
def test_the_herd_reproduces_the_aws_simulator_for_a_seed(name, seed):
    # Same seed, same numbers: the attempt numbering (first backoff at n = 1, so plain
    # exponential first waits 10 ms) and the draw order are the simulator's.
    ours = simulate(30, strategies()[name], random.Random(seed))
    assert (ours.calls, ours.completion_ms) == aws_reference(30, name, random.Random(seed))


def test_one_client_never_conflicts():
    result = simulate(1, strategies()["exponential"], random.Random(0))
    assert (result.calls, result.failures) == (1, 0)


def test_jitter_cuts_total_calls_compared_with_plain_exponential():
    table = compare(clients=[50], seeds=SEEDS)
    for row in table.rows():
        print(row)
    calls = {name: values[0] for name, values in table.calls.items()}
    # Measured for seeds 0-9 with 50 clients: exponential about 618 calls on average,
    # full jitter about 331, equal jitter about 349, decorrelated about 372.
    assert calls["full_jitter"] < 0.75 * calls["exponential"]
    assert calls["equal_jitter"] < calls["exponential"]
    assert calls["decorrelated_jitter"] < calls["exponential"]
    # ...and the clients finish sooner: plain exponential keeps the herd together.
    done = {name: values[0] for name, values in table.completion_ms.items()}
    assert done["full_jitter"] < done["exponential"] / 5


def test_full_jitter_beats_exponential_for_most_seeds_not_just_on_average():
    backoffs = strategies()
    wins = sum(
        simulate(50, backoffs["full_jitter"], random.Random(s)).calls
        < simulate(50, backoffs["exponential"], random.Random(s)).calls
        for s in SEEDS
    )
    assert wins >= 9


def test_compare_returns_plot_ready_lists():
    table = compare(clients=[5, 10], seeds=[0, 1])
    assert table.clients == [5, 10]
    assert set(table.calls) == set(strategies())
    assert all(len(v) == 2 for v in [*table.calls.values(), *table.completion_ms.values()])
    assert len(table.runs) == 2 * 2 * len(strategies())
    assert len(table.rows()) == 2 * len(strategies())


def test_a_runaway_configuration_stops_with_a_clear_error():
    with pytest.raises(RuntimeError, match="over 50 calls"):
        simulate(30, constant(0), random.Random(0), strategy="none", max_calls=50)
