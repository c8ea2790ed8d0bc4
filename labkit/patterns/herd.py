"""The thundering herd, simulated: why backoff needs jitter.

N clients each want to update the same row of one service once. The service uses
optimistic concurrency: a client reads the row's version, then writes with that
version; the write succeeds only if nobody wrote in between, so the service can accept
just one of the clients that read the same version, and every other write is wasted
work that fails with a conflict. A client that fails waits (its backoff strategy) and
tries again from the read. This is the model of the simulator behind AWS's
"Exponential Backoff and Jitter" (aws-samples/aws-arch-backoff-simulator), rewritten as
a deterministic event loop: time is simulated (milliseconds, no real sleep), network
delays are ``|N(mean, sd)|`` drawn from the injected ``random.Random``, and ties are
broken by event order, so a seed always gives the same numbers. It draws its random
numbers in the simulator's order and asks the strategy for the simulator's ``n``, so
for a given seed it reproduces the simulator's calls and completion time exactly
(``tests/unit/test_herd.py`` checks this against an independent rendering of it).

With plain exponential backoff the clients that collided once collide again: they all
wait the same 2**n and come back together. Jitter spreads them out, so fewer writes
fail: the total number of calls (the work the service does) drops, which is the
known result lesson 05 shows. Attempt numbering: the simulator's client counts its
failed attempts and asks ``backoff(n)`` with ``n = 1`` after the first failure, so its
first wait is ``e(1) = 2 * base``; the herd does the same. ``RetryPolicy`` asks with
``n = attempt - 1`` instead (the first retry waits ``e(0) = base``, tenacity's habit);
the formulas at a given ``n`` are the simulator's either way.

Plotting is the notebook's job: ``compare`` returns plain lists for matplotlib.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from labkit.retry import (
    Backoff,
    decorrelated_jitter,
    equal_jitter,
    exponential,
    full_jitter,
    none,
)

#: The AWS simulator's settings: base 5 ms, cap 2 s, network 10 ms +- 2 ms.
BASE_MS = 5.0
CAP_MS = 2000.0
NET_MEAN_MS = 10.0
NET_SD_MS = 2.0


def strategies(base: float = BASE_MS, cap: float = CAP_MS) -> dict[str, Backoff]:
    """The strategies the lesson compares, by name, with the simulator's base and cap."""
    return {
        "none": none(),
        "exponential": exponential(base, cap),
        "full_jitter": full_jitter(base, cap),
        "equal_jitter": equal_jitter(base, cap),
        "decorrelated_jitter": decorrelated_jitter(base, cap),
    }


@dataclass(frozen=True)
class HerdResult:
    """One run: how much work the service did and when the last client finished."""

    strategy: str
    clients: int
    seed: int
    calls: int  # write attempts the service handled, successful or not
    failures: int  # writes refused because another client got there first
    completion_ms: float  # when the last client learned its write succeeded
    write_times_ms: list[float] = field(repr=False)  # every write's arrival, for a histogram


@dataclass
class _Client:
    previous: float = 0.0  # last backoff (decorrelated jitter grows from it)
    retries: int = 0  # failed writes so far: the simulator's ``attempt``


# Event kinds, in the order one round trip visits them.
_READ, _READ_REPLY, _WRITE, _WRITE_REPLY = range(4)


def simulate(
    clients: int,
    backoff: Backoff,
    rng: random.Random,
    *,
    strategy: str = "",
    seed: int = 0,
    net_mean_ms: float = NET_MEAN_MS,
    net_sd_ms: float = NET_SD_MS,
    max_calls: int = 1_000_000,
) -> HerdResult:
    """Run ``clients`` clients to completion against one optimistic-concurrency row.

    ``seed`` is only recorded in the result; the randomness comes from ``rng``.
    ``max_calls`` stops a runaway configuration with a clear error instead of a hang.
    """
    if clients < 1:
        raise ValueError("clients must be >= 1")
    version = 0
    calls = failures = 0
    done_at = 0.0
    writes: list[float] = []
    state = [_Client() for _ in range(clients)]
    queue: list[tuple[float, int, int, int, int]] = []  # (time, order, kind, client, value)
    order = 0

    def net() -> float:
        return abs(rng.normalvariate(net_mean_ms, net_sd_ms))

    def send(at: float, kind: int, client: int, value: int = 0) -> None:
        nonlocal order
        heapq.heappush(queue, (at, order, kind, client, value))
        order += 1

    for client in range(clients):
        send(net(), _READ, client)
    while queue:
        now, _, kind, client, value = heapq.heappop(queue)
        if kind == _READ:  # the service answers with the current version
            send(now + net(), _READ_REPLY, client, version)
        elif kind == _READ_REPLY:  # the client writes, expecting that version
            send(now + net(), _WRITE, client, value)
        elif kind == _WRITE:
            calls += 1
            writes.append(now)
            if calls > max_calls:
                raise RuntimeError(
                    f"{strategy or 'this strategy'} made over {max_calls} calls with "
                    f"{clients} clients; lower the number of clients or raise max_calls"
                )
            ok = value == version
            if ok:
                version += 1
            else:
                failures += 1
            send(now + net(), _WRITE_REPLY, client, int(ok))
        elif value:  # write reply: success, this client is done
            done_at = max(done_at, now)
        else:  # write reply: conflict, back off and start again from the read
            me = state[client]
            me.retries += 1
            # As in the simulator: the network delay is drawn before the backoff, and the
            # backoff is asked for n = the failed attempt's number (1 for the first).
            travel = net()
            delay = backoff(me.retries, rng, me.previous)
            me.previous = delay
            send(now + travel + delay, _READ, client)
    return HerdResult(strategy, clients, seed, calls, failures, done_at, writes)


@dataclass(frozen=True)
class Comparison:
    """Mean calls and completion time per strategy for each client count (lists to plot).

    ``calls["full_jitter"][i]`` is the mean over the seeds for ``clients[i]`` clients.
    """

    clients: list[int]
    seeds: list[int]
    calls: dict[str, list[float]]
    completion_ms: dict[str, list[float]]
    runs: list[HerdResult] = field(repr=False)

    def rows(self) -> list[dict[str, object]]:
        """One row per (clients, strategy), for a table."""
        return [
            {
                "clients": n,
                "strategy": name,
                "calls": round(self.calls[name][i], 1),
                "completion_ms": round(self.completion_ms[name][i], 1),
            }
            for i, n in enumerate(self.clients)
            for name in self.calls
        ]


def compare(
    clients: Sequence[int] = (10, 20, 30, 40, 50),
    seeds: Iterable[int] = range(10),
    chosen: Mapping[str, Backoff] | None = None,
) -> Comparison:
    """Run every strategy for every client count and seed; average over the seeds.

    Each run gets its own ``random.Random(seed)``, so every strategy faces the same
    seeds and a change in one strategy cannot shift another's numbers.
    """
    chosen = dict(chosen if chosen is not None else strategies())
    seed_list = list(seeds)
    if not seed_list:
        raise ValueError("give at least one seed")
    calls: dict[str, list[float]] = {name: [] for name in chosen}
    completion: dict[str, list[float]] = {name: [] for name in chosen}
    runs: list[HerdResult] = []
    for n in clients:
        for name, backoff in chosen.items():
            batch = [
                simulate(n, backoff, random.Random(seed), strategy=name, seed=seed)
                for seed in seed_list
            ]
            runs.extend(batch)
            calls[name].append(sum(r.calls for r in batch) / len(batch))
            completion[name].append(sum(r.completion_ms for r in batch) / len(batch))
    return Comparison(list(clients), seed_list, calls, completion, runs)
