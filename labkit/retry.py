"""Retry math: how long to wait, and whether to retry at all.

Backoff strategies are small pure callables of ``(n, rng, previous)`` where ``n`` counts
retries from 0, ``rng`` is an injected ``random.Random`` and ``previous`` is the delay
used last time. They follow the formulas of AWS's "Exponential Backoff and Jitter"
(Marc Brooker, 2015, and its simulator ``aws-samples/aws-arch-backoff-simulator``),
with ``e(n) = min(cap, base * 2**n)``:

==========================  ==========================================================
strategy                    delay before retry ``n``
==========================  ==========================================================
``none()``                  ``0``
``constant(d)``             ``d``
``exponential(base, cap)``  ``e(n)``: every client that failed together retries together
``full_jitter(base, cap)``  ``U(0, e(n))``: spreads retries over the whole window
``equal_jitter(base, cap)`` ``e(n)/2 + U(0, e(n)/2)``: never less than half the window
``decorrelated_jitter``     ``min(cap, U(base, previous * 3))``, ``previous`` starting
                            at ``base``: grows from the last delay, not from ``n``
``random_uniform(lo, hi)``  ``U(lo, hi)``: a little spread to add to another strategy
``capped(s, cap)``          ``min(cap, s(...))``
``a + b``                   ``a(...) + b(...)``
==========================  ==========================================================

``U(a, b)`` is ``rng.uniform(a, b)``, drawn in the same order as the AWS simulator, so a
seeded ``random.Random`` gives the simulator's numbers exactly for the same ``n``.
Numbering: the simulator's client asks for ``backoff(n)`` with ``n = 1`` after its first
failure (first wait ``e(1) = 2 * base``), and ``labkit.patterns.herd`` does the same to reproduce
it; ``RetryPolicy`` asks with ``n = attempt - 1`` (first wait ``e(0) = base``, as
tenacity and Celery count). Strategies compose the way tenacity's waits do:
``exponential(1) + random_uniform(0, 1)``, ``capped(s, 30)``.

``RetryPolicy`` decides whether to retry at all (classification, attempt budget,
deadline, Retry-After); ``JobStore.fail`` asks it after every failed job attempt, and
``retry_call`` uses it for in-process retries of one call, and a shared ``RetryBudget``
stops retry layers (a client, a queue and a worker, each retrying) from multiplying.

In production, reach for tenacity (in-process retries) or your queue's own retry
settings (Celery's ``retry_backoff``/``retry_jitter``); this module is written by hand
because the formulas are the lesson.
"""

from __future__ import annotations

import math
import random
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from labkit.clock import Clock
from labkit.errors import ConnectionLost, PermanentError, StoreBusy, TransientError

T = TypeVar("T")

#: What a failure says about the call that failed:
#:
#: - ``never_sent``: it never reached the other side, or was refused before any work
#:   (connection refused, a connect timeout, 408, 429, 503): retrying is always safe;
#: - ``maybe_done``: it was sent and the answer did not come back (a read timeout, a reset
#:   connection, 500/502/504, ``ResponseLost``): the effect may have happened, so a retry
#:   is safe only under an idempotency key the destination honours, or after checking;
#: - ``permanent``: retrying repeats the same failure (bad input, other 4xx, a bug).
Verdict = Literal["never_sent", "maybe_done", "permanent"]


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


#: Statuses that say the server did no work: it timed out waiting for the request (408),
#: asks the client to slow down (429) or is not taking requests now (503; RFC 9110 15.6.4).
NEVER_SENT_STATUSES = frozenset({408, 429, 503})
#: Exception class names, from any library, that are raised before a request is sent:
#: httpx's ``ConnectError``/``ConnectTimeout``/``PoolTimeout``, requests' and urllib3's
#: ``ConnectTimeout``/``NewConnectionError``/``NameResolutionError``.
NEVER_SENT_NAMES = frozenset(
    {"ConnectError", "ConnectTimeout", "PoolTimeout", "NewConnectionError", "NameResolutionError"}
)
#: Exception class names raised after the request may have been sent: httpx's and
#: requests' ``ReadTimeout``, httpx's ``WriteTimeout``/``ReadError``/``RemoteProtocolError``,
#: requests' ``Timeout`` and httpx's ``TimeoutException`` when nothing narrower is known.
MAYBE_DONE_NAMES = frozenset(
    {"ReadTimeout", "WriteTimeout", "ReadError", "WriteError", "RemoteProtocolError",
     "Timeout", "TimeoutException", "ChunkedEncodingError"}
)


def _names(error: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(error).__mro__}


def default_classify(error: BaseException) -> Verdict:
    """Sort an error into ``never_sent``, ``maybe_done`` or ``permanent`` (see ``Verdict``).

    In order: an error flagged ``ambiguous`` (``ResponseLost``, a connection lost while
    committing) is maybe-done; labkit's ``TransientError`` says the call did nothing
    (never-sent); ``PermanentError`` is permanent. Then the HTTP status: 408, 429 and 503
    never-sent, every other 5xx maybe-done (the server may have acted before it failed),
    other statuses permanent. Then the exception: a refused connection, a failed name
    lookup, a connect timeout, a local database that stayed locked (``StoreBusy``) and
    a database connection lost before its commit (``ConnectionLost``) never sent
    anything; any other timeout or connection error (a read timeout, a
    reset) came after the request may have left, so it is maybe-done. Anything unknown
    is permanent: retrying a bug only repeats it.
    """
    if getattr(error, "ambiguous", False):
        return "maybe_done"
    if isinstance(error, TransientError):
        return "never_sent"
    if isinstance(error, PermanentError):
        return "permanent"
    status = _status(error)
    if status is not None:
        if status in NEVER_SENT_STATUSES:
            return "never_sent"
        return "maybe_done" if 500 <= status <= 599 else "permanent"
    names = _names(error)
    if isinstance(error, (ConnectionRefusedError, socket.gaierror, StoreBusy, ConnectionLost)) or (
        names & NEVER_SENT_NAMES
    ):
        return "never_sent"
    if isinstance(error, (TimeoutError, ConnectionError)) or names & MAYBE_DONE_NAMES:
        return "maybe_done"
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
    the job was first accepted; no retry is scheduled past it. ``retry_maybe_done``
    decides what happens when the effect may have happened: retrying is only safe when
    the operation carries an idempotency key the destination honours. A ``retry_after``
    carried by the error (a 429's Retry-After) is a floor under the backoff.
    """

    max_attempts: int = 5
    backoff: Backoff = field(default_factory=lambda: full_jitter(base=1.0, cap=300.0))
    deadline: float | None = None
    classify: Callable[[BaseException], Verdict] = default_classify
    retry_maybe_done: bool = True

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
        idempotent: bool = True,
    ) -> Decision:
        """Decide after attempt number ``attempt`` (1 for the first run) failed with ``error``.

        ``previous`` is the last delay (for decorrelated jitter), ``started_at`` and
        ``now`` place the deadline, ``max_attempts`` overrides the policy's budget (a
        job carries its own). ``idempotent=False`` says the call carries no idempotency
        key, so a maybe-done failure is never retried whatever ``retry_maybe_done`` says.
        """
        budget = self.max_attempts if max_attempts is None else max_attempts
        verdict = self.classify(error)
        if verdict == "permanent":
            return Decision(False, 0.0, verdict, "permanent error")
        if verdict == "maybe_done" and not (self.retry_maybe_done and idempotent):
            return Decision(
                False,
                0.0,
                verdict,
                "outcome unknown (the effect may have happened) and the policy does not "
                "retry a maybe-done failure without an idempotency key: check the "
                "destination before running it again",
            )
        if attempt >= budget:
            return Decision(False, 0.0, verdict, f"attempts exhausted ({attempt} of {budget})")
        delay = self.backoff(attempt - 1, rng, previous)
        retry_after = getattr(error, "retry_after", None)
        if isinstance(retry_after, (int, float)) and retry_after > delay:
            delay = float(retry_after)
        if self.deadline is not None and now + delay > started_at + self.deadline:
            return Decision(
                False,
                delay,
                verdict,
                f"deadline passed (next try in {delay:.1f}s would end after the "
                f"{self.deadline:g}s deadline)",
            )
        said = {"never_sent": "never sent", "maybe_done": "maybe done, under its key"}[verdict]
        return Decision(True, delay, verdict, f"{said}: retry in {delay:.1f}s")


@dataclass
class RetryBudget:
    """A shared allowance of retries, so retry layers cannot multiply a failure.

    gRPC's retry throttling (gRFC A6): the budget holds ``max_tokens`` tokens; every
    failed call takes one, every successful call gives back ``token_ratio``; a retry is
    allowed only while more than half the tokens are left. While a dependency is down,
    retries stop after a few failures across every caller that shares the budget, and
    first attempts still go through, so they see the recovery. Share one budget per
    dependency between all the callers in a process.
    """

    max_tokens: float = 10.0
    token_ratio: float = 0.1
    tokens: float = field(init=False)

    def __post_init__(self) -> None:
        self.tokens = self.max_tokens

    def failed(self) -> None:
        self.tokens = max(0.0, self.tokens - 1.0)

    def succeeded(self) -> None:
        self.tokens = min(self.max_tokens, self.tokens + self.token_ratio)

    def allows_retry(self) -> bool:
        return self.tokens > self.max_tokens / 2


def delays(backoff: Backoff, count: int, rng: random.Random) -> list[float]:
    """The first ``count`` delays of ``backoff``, each fed the previous one (for plots)."""
    out: list[float] = []
    previous = 0.0
    for n in range(count):
        previous = backoff(n, rng, previous)
        out.append(previous)
    return out


def retry_call(
    fn: Callable[[], T],
    policy: RetryPolicy,
    clock: Clock,
    rng: random.Random,
    *,
    idempotency_key: str | None = None,
    on_retry: Callable[[int, BaseException, Decision], None] | None = None,
    budget: RetryBudget | None = None,
) -> T:
    """Call ``fn()`` until it returns, retrying as ``policy`` decides; return its result.

    Between attempts it waits with ``clock.sleep`` (a FakeClock makes that instant).
    Never-sent errors are retried with the policy's backoff, floored by the error's
    ``retry_after``; permanent errors are raised at once; a maybe-done error (the call
    may have taken effect) is retried only when ``idempotency_key`` is given, i.e. the
    caller promises ``fn`` sends that key and the destination honours it. The deadline
    counts from the first call. When the policy gives up, the last error is raised with
    a note saying why; ``on_retry(attempt, error, decision)`` is called before each wait.
    A shared ``budget`` is told of every outcome and can refuse a retry the policy
    would allow (the note then says "retry budget spent").

    This is tenacity's job in production (``@retry(stop=..., wait=...,
    retry=retry_if_exception(...))``); it is hand-written here so a lesson can run it on
    a FakeClock and a seeded rng and print every decision.
    """
    started_at = clock.now()
    previous = 0.0
    attempt = 0
    while True:
        attempt += 1
        try:
            result = fn()
        except Exception as error:
            if budget is not None:
                budget.failed()
            decision = policy.decide(
                error,
                attempt,
                rng,
                previous=previous,
                started_at=started_at,
                now=clock.now(),
                idempotent=idempotency_key is not None,
            )
            if decision.retry and budget is not None and not budget.allows_retry():
                decision = Decision(False, 0.0, decision.verdict, "retry budget spent")
            if not decision.retry:
                error.add_note(f"retry_call gave up after attempt {attempt}: {decision.reason}")
                raise
            if on_retry is not None:
                on_retry(attempt, error, decision)
            previous = decision.delay
            clock.sleep(decision.delay)
        else:
            if budget is not None:
                budget.succeeded()
            return result
