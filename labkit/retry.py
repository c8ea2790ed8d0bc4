"""Retry math: how long to wait, and whether to retry at all.

Backoff strategies are small pure callables of ``(n, rng, previous)`` where ``n`` counts
retries from 0, ``rng`` is an injected ``random.Random`` and ``previous`` is the delay
used last time. They follow the formulas of AWS's "Exponential Backoff and Jitter"
(Marc Brooker, 2015) and compose the way tenacity's waits do: ``a + b`` adds delays,
``capped(a, 30)`` bounds one. In production, reach for tenacity (in-process retries) or
your queue's own retry settings (Celery's ``retry_backoff``/``retry_jitter``); this
module is written by hand because the formulas are the lesson.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from labkit.errors import PermanentError, TransientError

Verdict = Literal["transient", "permanent", "ambiguous"]


class Backoff:
    """A delay strategy: ``strategy(n, rng, previous) -> seconds``."""

    def __call__(self, n: int, rng: random.Random, previous: float = 0.0) -> float:
        raise NotImplementedError

    def __add__(self, other: Backoff) -> Backoff:
        return _Sum(self, other)


@dataclass(frozen=True)
class _Sum(Backoff):
    left: Backoff
    right: Backoff

    def __call__(self, n: int, rng: random.Random, previous: float = 0.0) -> float:
        """The two delays added."""
        return self.left(n, rng, previous) + self.right(n, rng, previous)


@dataclass(frozen=True)
class none(Backoff):  # noqa: N801 - reads as a strategy name
    def __call__(self, n: int, rng: random.Random, previous: float = 0.0) -> float:
        """Retry at once: ``0``."""
        return 0.0


@dataclass(frozen=True)
class constant(Backoff):  # noqa: N801
    delay: float = 1.0

    def __call__(self, n: int, rng: random.Random, previous: float = 0.0) -> float:
        """Always the same wait: ``delay``."""
        return self.delay


def _expo(base: float, cap: float, n: int) -> float:
    # 2**n overflows a float near n=1024; the cap is reached long before.
    return cap if n >= 1000 else min(cap, base * 2**n)


@dataclass(frozen=True)
class exponential(Backoff):  # noqa: N801
    base: float = 1.0
    cap: float = math.inf

    def __call__(self, n: int, rng: random.Random, previous: float = 0.0) -> float:
        """``min(cap, base * 2**n)``: doubling, every client in lockstep."""
        return _expo(self.base, self.cap, n)


@dataclass(frozen=True)
class full_jitter(Backoff):  # noqa: N801
    base: float = 1.0
    cap: float = math.inf

    def __call__(self, n: int, rng: random.Random, previous: float = 0.0) -> float:
        """``U(0, min(cap, base * 2**n))``: the AWS recommendation."""
        return rng.uniform(0, _expo(self.base, self.cap, n))


@dataclass(frozen=True)
class equal_jitter(Backoff):  # noqa: N801
    base: float = 1.0
    cap: float = math.inf

    def __call__(self, n: int, rng: random.Random, previous: float = 0.0) -> float:
        """``e/2 + U(0, e/2)`` with ``e = min(cap, base * 2**n)``: never shorter than half."""
        half = _expo(self.base, self.cap, n) / 2
        return half + rng.uniform(0, half)


@dataclass(frozen=True)
class decorrelated_jitter(Backoff):  # noqa: N801
    base: float = 1.0
    cap: float = math.inf

    def __call__(self, n: int, rng: random.Random, previous: float = 0.0) -> float:
        """``min(cap, U(base, previous * 3))``, starting from ``previous = base``."""
        return min(self.cap, rng.uniform(self.base, max(previous, self.base) * 3))


@dataclass(frozen=True)
class random_uniform(Backoff):  # noqa: N801
    low: float = 0.0
    high: float = 1.0

    def __call__(self, n: int, rng: random.Random, previous: float = 0.0) -> float:
        """``U(low, high)``: add to another strategy for a little spread."""
        return rng.uniform(self.low, self.high)


@dataclass(frozen=True)
class capped(Backoff):  # noqa: N801
    inner: Backoff
    cap: float

    def __call__(self, n: int, rng: random.Random, previous: float = 0.0) -> float:
        """``min(cap, inner(...))``."""
        return min(self.cap, self.inner(n, rng, previous))


def _status(error: BaseException) -> int | None:
    for name in ("status", "status_code"):
        value = getattr(error, name, None)
        if isinstance(value, int):
            return value
    response = getattr(error, "response", None)
    value = getattr(response, "status_code", None)
    return value if isinstance(value, int) else None


def default_classify(error: BaseException) -> Verdict:
    """Sort an error into transient, permanent or ambiguous.

    Timeouts, 408, 429 and 5xx are transient; 400, 401, 403, 404, 409, 422 and other
    4xx, validation errors and anything unknown are permanent (retrying a bug only
    repeats it). An error flagged ``ambiguous`` (the request was sent, the answer was
    lost) is ambiguous: the effect may have happened.
    """
    if getattr(error, "ambiguous", False):
        return "ambiguous"
    if isinstance(error, TransientError):
        return "transient"
    if isinstance(error, PermanentError):
        return "permanent"
    status = _status(error)
    if status is not None:
        return "transient" if status in (408, 429) or status >= 500 else "permanent"
    if isinstance(error, (TimeoutError, ConnectionError)):
        return "transient"
    return "permanent"


@dataclass(frozen=True)
class Decision:
    """What to do after a failed attempt."""

    retry: bool
    delay: float
    verdict: Verdict
    reason: str


@dataclass(frozen=True)
class RetryPolicy:
    """When to retry and how long to wait.

    ``max_attempts`` counts every run, the first included. ``deadline`` is seconds after
    the job was first accepted; no retry is scheduled past it. ``retry_ambiguous``
    decides what happens when the effect may have happened: retrying is only safe when
    the operation carries an idempotency key the destination honours. A ``retry_after``
    carried by the error (a 429's Retry-After) is a floor under the backoff.
    """

    max_attempts: int = 5
    backoff: Backoff = field(default_factory=lambda: full_jitter(base=1.0, cap=300.0))
    deadline: float | None = None
    classify: Callable[[BaseException], Verdict] = default_classify
    retry_ambiguous: bool = True

    def decide(
        self,
        error: BaseException,
        attempt: int,
        rng: random.Random,
        *,
        previous: float = 0.0,
        started_at: float = 0.0,
        now: float = 0.0,
        max_attempts: int | None = None,
    ) -> Decision:
        """Decide after attempt number ``attempt`` (1 for the first run) failed with ``error``."""
        budget = self.max_attempts if max_attempts is None else max_attempts
        verdict = self.classify(error)
        if verdict == "permanent":
            return Decision(False, 0.0, verdict, "permanent error")
        if verdict == "ambiguous" and not self.retry_ambiguous:
            return Decision(
                False, 0.0, verdict,
                "outcome unknown (the effect may have happened) and the policy does not "
                "retry ambiguous failures without an idempotency key",
            )
        if attempt >= budget:
            return Decision(False, 0.0, verdict, f"attempts exhausted ({attempt} of {budget})")
        delay = self.backoff(attempt - 1, rng, previous)
        retry_after = getattr(error, "retry_after", None)
        if isinstance(retry_after, (int, float)) and retry_after > delay:
            delay = float(retry_after)
        if self.deadline is not None and now + delay > started_at + self.deadline:
            return Decision(
                False, delay, verdict,
                f"deadline passed (next try in {delay:.1f}s would end after the "
                f"{self.deadline:g}s deadline)",
            )
        return Decision(True, delay, verdict, f"{verdict} error, retry in {delay:.1f}s")
