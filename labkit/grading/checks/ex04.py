"""Exercise 4: a retry policy: classify the error, full jitter, a cap, Retry-After, a deadline.

The student writes ``classify``, ``backoff`` and ``next_delay``. Every random draw comes
from ``random.Random(SEED)`` handed to the student's code, so results replay exactly.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from labkit.errors import PermanentError, TransientError
from labkit.grading.checks._helpers import SEED
from labkit.grading.core import Checks, Namespace, expect

CHECKS = Checks("ex04", "retry policy", needs=("classify", "backoff", "next_delay"))


class HTTPError(Exception):
    """An error from an HTTP client, carrying its status code."""

    def __init__(self, status: int, retry_after: float | None = None) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.retry_after = retry_after


TRANSIENT = {
    "TimeoutError()": TimeoutError(),
    "ConnectionError()": ConnectionError(),
    "TransientError()": TransientError(),
    "HTTP 429": HTTPError(429),
    "HTTP 503": HTTPError(503),
    "HTTP 500": HTTPError(500),
    "HTTP 408": HTTPError(408),
}
PERMANENT = {
    "PermanentError()": PermanentError(),
    "ValueError('bad amount')": ValueError("bad amount"),
    "KeyError('customer')": KeyError("customer"),
    "HTTP 400": HTTPError(400),
    "HTTP 401": HTTPError(401),
    "HTTP 404": HTTPError(404),
    "HTTP 422": HTTPError(422),
}


def _verdicts(ns: Namespace, table: Mapping[str, BaseException], want: str) -> None:
    wrong = {name: ns.classify(err) for name, err in table.items()}
    wrong = {name: got for name, got in wrong.items() if got != want}
    expect(
        not wrong,
        f"{want!r} for " + ", ".join(table),
        "; ".join(f"{got!r} for {name}" for name, got in wrong.items()),
    )


@CHECKS.add(1, "timeouts, connection errors, TransientError, 408, 429 and 5xx may succeed later")
def classify_transient(ns: Namespace) -> None:
    _verdicts(ns, TRANSIENT, "transient")


@CHECKS.add(
    1,
    "bad input and other 4xx fail the same way every time: retrying only repeats "
    "the bug; anything unknown is permanent too",
)
def classify_permanent(ns: Namespace) -> None:
    _verdicts(ns, PERMANENT, "permanent")


@CHECKS.add(
    2,
    "full jitter is rng.uniform(0, min(cap, base * 2**n)): anywhere from zero to "
    "the ceiling, so a crowd of clients spreads out instead of retrying in lockstep",
)
def backoff_has_full_jitter(ns: Namespace) -> None:
    rng = random.Random(SEED)
    draws = [ns.backoff(3, rng, 1.0, 60.0) for _ in range(200)]
    outside = [d for d in draws if not 0 <= d <= 8.0]
    expect(
        not outside,
        "every delay for n=3 (base 1, cap 60) within [0, 8]",
        f"{len(outside)} outside, e.g. {outside[0]!r}" if outside else "",
    )
    expect(
        len(set(draws)) > 100,
        "200 different delays (jitter)",
        f"{len(set(draws))} distinct value(s), e.g. {draws[0]!r}",
    )
    expect(
        min(draws) < 1.0 and max(draws) > 7.0,
        "delays spread over the whole range 0..8 (full jitter, not half or a sliver)",
        f"min {min(draws):.2f}, max {max(draws):.2f}",
    )


@CHECKS.add(
    2,
    "cap the ceiling before drawing: min(cap, base * 2**n); without a cap the 30th "
    "retry waits 34 years (and 2**2000 overflows a float)",
)
def backoff_is_capped(ns: Namespace) -> None:
    rng = random.Random(SEED)
    for n in (10, 30, 2000):
        delays = [ns.backoff(n, rng, 1.0, 60.0) for _ in range(20)]
        expect(
            all(0 <= d <= 60.0 for d in delays),
            f"delays within [0, 60] for n={n}",
            f"{max(delays)!r}",
        )


@CHECKS.add(
    1,
    "draw only from the rng you are given (rng.uniform), never the random module: "
    "tests and notebooks pass a seeded rng to replay a run",
)
def backoff_uses_the_given_rng(ns: Namespace) -> None:
    first = [ns.backoff(n, random.Random(SEED), 1.0, 60.0) for n in range(6)]
    again = [ns.backoff(n, random.Random(SEED), 1.0, 60.0) for n in range(6)]
    expect(
        first == again,
        "the same delays from two rngs with the same seed",
        f"{first[:3]} then {again[:3]}",
    )


@CHECKS.add(1, "a permanent error gets no retry: return None")
def gives_up_on_permanent(ns: Namespace) -> None:
    got = ns.next_delay(HTTPError(400), 1, random.Random(SEED), started_at=0.0, now=0.0)
    expect(got is None, "None for HTTP 400 on the first attempt", got)


@CHECKS.add(1, "attempt counts every run, the first included; at attempt == max_attempts stop")
def gives_up_after_max_attempts(ns: Namespace) -> None:
    rng = random.Random(SEED)
    before = ns.next_delay(TimeoutError(), 4, rng, started_at=0.0, now=0.0, max_attempts=5)
    last = ns.next_delay(TimeoutError(), 5, rng, started_at=0.0, now=0.0, max_attempts=5)
    expect(isinstance(before, (int, float)), "a delay after attempt 4 of 5", before)
    expect(last is None, "None after attempt 5 of 5", last)


@CHECKS.add(
    2,
    "the server said when to come back: use max(backoff, error.retry_after) "
    "(getattr(error, 'retry_after', None))",
)
def honours_retry_after(ns: Namespace) -> None:
    got = ns.next_delay(
        HTTPError(429, retry_after=120.0),
        1,
        random.Random(SEED),
        started_at=0.0,
        now=0.0,
        deadline=3600.0,
    )
    expect(
        isinstance(got, (int, float)) and got >= 120.0,
        "at least 120 s for a 429 with Retry-After: 120",
        got,
    )
    small = ns.next_delay(
        HTTPError(503, retry_after=0.001), 3, random.Random(SEED), started_at=0.0, now=0.0
    )
    expect(
        isinstance(small, (int, float)) and small <= 4.0,
        "the backoff (at most 4 s after attempt 3) when Retry-After is tiny",
        small,
    )


@CHECKS.add(
    2, "no retry may be scheduled past started_at + deadline: if now + delay is later, return None"
)
def respects_deadline(ns: Namespace) -> None:
    got = ns.next_delay(
        TimeoutError(), 1, random.Random(SEED), started_at=0.0, now=299.5, deadline=300.0
    )
    expect(
        got is None or got <= 0.5, "None (or at most 0.5 s) at 299.5 s into a 300 s deadline", got
    )
    late = ns.next_delay(
        HTTPError(429, retry_after=120.0),
        1,
        random.Random(SEED),
        started_at=0.0,
        now=250.0,
        deadline=300.0,
    )
    expect(late is None, "None: Retry-After 120 s at 250 s ends after the 300 s deadline", late)
