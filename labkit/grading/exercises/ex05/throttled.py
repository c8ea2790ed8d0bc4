"""Exercise 5's scenes of a payment API that answers but does not charge: a 409 (a
request with that Idempotency-Key is under way) and a 429 (rate limited, with a
Retry-After). The handler is called once against such a fake API (``refused.handled_once``),
its sleeps passing at once but counted (``_sleeps_passed``); ``_retried`` says whether
the worker would retry what came out. ``harness`` re-exports the scenes, which the checks
call through it."""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any, SupportsIndex

from labkit.clock import LAB_EPOCH
from labkit.errors import TransientError
from labkit.keys import is_natural
from labkit.retry import RetryPolicy
from labkit.world.records import Effect
from labkit.world.services import KeyInProgress


class _BusyPayments:
    """The payment API while another delivery of the same job holds its Idempotency-Key:
    the first charge gets the 409 ``KeyInProgress``; a later one gets the reply the other
    delivery's charge made (it has finished by then). Nothing is charged here.

    ``find`` tells the truth: nothing while the other delivery is still charging, its
    charge once it has finished (after ``busy_for`` looks, charges and finds together),
    so a handler that polls ``find`` ends, and one that trusts an empty ``find`` is seen."""

    def __init__(
        self,
        reply: dict[str, Any],
        busy_for: int = 1,
        retry_after: float = 1.0,
        params: dict[str, Any] | None = None,
    ) -> None:
        self.reply, self.calls, self.params = reply, 0, dict(params or {})
        #: How many charges in a row get the 409 (the other delivery is slow).
        self.busy_for, self.retry_after = busy_for, retry_after
        #: The Idempotency-Key of each charge, in order.
        self.keys: list[str] = []
        #: How many finds, and whether one found the other delivery's charge.
        self.finds, self.found = 0, False

    def charge(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        self.calls += 1
        self.keys.append(repr(kwargs.get("idempotency_key")))
        if self.calls <= self.busy_for:
            raise KeyInProgress(
                f"409 from payments: a request with Idempotency-Key "
                f"{kwargs.get('idempotency_key')!r} is still running; retry shortly and you "
                "will get its reply",
                status=409,
                retry_after=self.retry_after,
            )
        return dict(self.reply)

    def find(self, key: str, *args: Any, **kwargs: Any) -> list[Any]:
        self.finds += 1
        if self.calls + self.finds <= self.busy_for:
            return []  # the other delivery has not charged yet
        self.found = True
        return [
            Effect(1, "payments", "charge", key, dict(self.params), dict(self.reply), LAB_EPOCH)
        ]


def key_in_progress(
    values: MutableMapping[str, Any],
    folder: str,
    job: list[Any],
    busy_for: int = 1,
    retry_after: float = 1.0,
) -> dict[str, Any]:
    """The student's ``charge_handler`` meeting a 409 (another delivery holds the key),
    for the first ``busy_for`` charges (each 409 saying ``Retry-After: retry_after``).

    Returns ``{"reply": the reply a later charge gets, "calls": charges made, "keys": the
    repr of each charge's Idempotency-Key, "returned": repr of what the handler returned,
    or "raised": "ErrorClass: message", "retried": whether the worker would retry what
    was raised}``.
    """
    from labkit.grading.exercises.ex05.refused import handled_once

    _kind, payload, _key = job
    reply = {"charge_id": "ch_1", "amount": payload["amount"], "status": "succeeded"}
    params = {"customer": payload["customer"], "amount": payload["amount"], "currency": "BRL"}
    payments = _BusyPayments(reply, busy_for, retry_after, params)
    got, error = handled_once(values, folder, job, payments)
    got["reply"] = repr(reply)
    got["calls"] = payments.calls
    got["keys"] = payments.keys
    got["found"] = payments.found
    got["retried"] = error is not None and _retried(error, _key)
    return got


class _RateLimitedPayments:
    """A payment API that answers the first charge with a 429 (``Retry-After:
    retry_after``, nothing done) and every later one with ``reply``."""

    def __init__(self, reply: dict[str, Any], retry_after: float) -> None:
        self.reply, self.retry_after, self.calls = reply, retry_after, 0
        #: When each charge came (time.monotonic()): a retry sooner than Retry-After shows.
        self.times: list[float] = []
        #: The seconds the handler's time.sleep passed at once (``_sleeps_passed``).
        self.slept = 0.0

    def charge(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        self.calls += 1
        self.times.append(time.monotonic() + self.slept)
        if self.calls == 1:
            raise TransientError(
                f"429 from payments.charge: rate limited, retry after {self.retry_after:g}s; "
                "nothing done",
                status=429,
                retry_after=self.retry_after,
            )
        return dict(self.reply)

    def find(self, *args: Any, **kwargs: Any) -> list[Any]:
        return []


class _SleepingClock:
    """The injected clock of ``rate_limited_charge``'s context: its ``sleep`` is
    ``time.sleep`` (looked up at each call, so ``_sleeps_passed`` counts it too), its
    ``now`` the wall clock plus what was slept at once. A handler that sleeps out a 429 on
    ``ctx.clock`` waits as one that calls ``time.sleep`` does."""

    def __init__(self, payments: Any) -> None:
        self._payments = payments

    def now(self) -> float:
        return time.time() + float(self._payments.slept)

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


@contextmanager
def _sleeps_passed(values: MutableMapping[str, Any], payments: Any) -> Iterator[None]:
    """``time.sleep`` (and the student's own name for it) passes at once, adding the
    seconds to ``payments.slept``: a long wait slept out costs no real time."""
    real = time.sleep

    def sleep(seconds: float | SupportsIndex) -> None:
        payments.slept += max(float(seconds), 0.0)

    names = [name for name, value in values.items() if value is real]
    time.sleep = sleep
    values.update(dict.fromkeys(names, sleep))
    try:
        yield
    finally:
        time.sleep = real
        values.update(dict.fromkeys(names, real))


def rate_limited_charge(
    values: MutableMapping[str, Any],
    folder: str,
    job: list[Any],
    retry_after: float,
    sleeps_pass: bool = False,
) -> dict[str, Any]:
    """The student's ``charge_handler`` meeting a 429 that says ``Retry-After:
    retry_after``: ``{"returned"} or {"raised"}`` (see ``refused.handled_once``), the
    charges made, and the ``retry_after`` of what came out (None when it has none).
    With ``sleeps_pass``, the handler's ``time.sleep`` passes no real time (a long
    Retry-After), its seconds still counted in ``waited``."""
    from labkit.grading.exercises.ex05.refused import handled_once

    _kind, payload, _key = job
    reply = {"charge_id": "ch_1", "amount": payload["amount"], "status": "succeeded"}
    payments = _RateLimitedPayments(reply, retry_after)
    with _sleeps_passed(values, payments) if sleeps_pass else contextlib.nullcontext():
        got, error = handled_once(values, folder, job, payments, clock=_SleepingClock(payments))
    got["calls"] = payments.calls
    # How long after the 429 the handler charged again itself (None: it did not).
    times = payments.times
    got["waited"] = times[1] - times[0] if len(times) > 1 else None
    after = getattr(error, "retry_after", None)
    got["retry_after"] = float(after) if isinstance(after, (int, float)) else None
    return got


def _retried(error: Exception, key: str) -> bool:
    """Whether the store's worker retries a job with ``key`` whose first attempt raised
    ``error`` (``RetryPolicy().decide``, as ``store.fail`` asks it): a TransientError, or
    an error ``labkit.retry`` classifies as worth another try."""
    decision = RetryPolicy().decide(error, 1, random.Random(0), idempotent=is_natural(key))
    return decision.retry
