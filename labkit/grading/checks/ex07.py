"""Exercise 7 (extra): a circuit breaker, closed / open / half_open, on an injected clock.

The student writes the ``Breaker`` class. Every check drives it with a ``FakeClock``,
so a 30-second cooldown passes in no time and the same steps give the same states.
"""

from __future__ import annotations

from typing import Any

from labkit.clock import FakeClock
from labkit.grading.core import Checks, Namespace, expect

CHECKS = Checks("ex07", "circuit breaker", needs=("Breaker",))


def _breaker(ns: Namespace, threshold: int = 3, cooldown_s: float = 30.0) -> tuple[Any, FakeClock]:
    clock = FakeClock()
    return ns.Breaker(threshold=threshold, cooldown_s=cooldown_s, clock=clock), clock


def _open(ns: Namespace) -> tuple[Any, FakeClock]:
    breaker, clock = _breaker(ns)
    for _ in range(3):
        breaker.record_failure()
    expect(breaker.state == "open", "state 'open' after 3 failures in a row", breaker.state)
    return breaker, clock


@CHECKS.add(1, "a new breaker is 'closed' and lets every call through")
def starts_closed(ns: Namespace) -> None:
    breaker, _ = _breaker(ns)
    expect(breaker.state == "closed", "state 'closed'", breaker.state)
    expect(all(breaker.allow() for _ in range(5)), "allow() True while closed", "False")


@CHECKS.add(
    2,
    "count failures in a row: a success resets the count, and the breaker opens "
    "when the count reaches threshold",
)
def opens_after_consecutive_failures(ns: Namespace) -> None:
    breaker, _ = _breaker(ns)
    for outcome in ("fail", "fail", "ok", "fail", "fail"):
        breaker.record_failure() if outcome == "fail" else breaker.record_success()
    expect(
        breaker.state == "closed",
        "still closed: fail, fail, ok, fail, fail is never 3 failures in a row",
        breaker.state,
    )
    breaker.record_failure()
    expect(breaker.state == "open", "open at the 3rd failure in a row", breaker.state)


@CHECKS.add(
    2,
    "while open, allow() is False until cooldown_s has passed on the clock you "
    "were given (clock.now()), never the wall clock",
)
def open_refuses_until_the_cooldown(ns: Namespace) -> None:
    breaker, clock = _open(ns)
    expect(breaker.allow() is False, "allow() False right after opening", "True")
    clock.advance(29.9)
    expect(breaker.allow() is False, "allow() False 29.9 s into a 30 s cooldown", "True")


@CHECKS.add(
    2,
    "after the cooldown, go half_open and let ONE trial call through; the next "
    "callers wait for its result (otherwise a crowd hits a service that is down)",
)
def half_open_allows_one_trial(ns: Namespace) -> None:
    breaker, clock = _open(ns)
    clock.advance(30.0)
    first = breaker.allow()
    expect(first is True, "allow() True once the 30 s cooldown passed", first)
    expect(breaker.state == "half_open", "state 'half_open' during the trial", breaker.state)
    others = [breaker.allow() for _ in range(3)]
    expect(others == [False] * 3, "allow() False for the callers behind the trial", others)


@CHECKS.add(1, "a successful trial closes the breaker and resets the failure count")
def trial_success_closes(ns: Namespace) -> None:
    breaker, clock = _open(ns)
    clock.advance(30.0)
    breaker.allow()
    breaker.record_success()
    expect(breaker.state == "closed", "state 'closed' after a successful trial", breaker.state)
    breaker.record_failure()
    breaker.record_failure()
    expect(
        breaker.state == "closed", "closed after 2 new failures (count was reset)", breaker.state
    )


@CHECKS.add(
    2,
    "a failed trial opens the breaker again with a fresh cooldown from now "
    "(opened_at = clock.now()), not the old one",
)
def trial_failure_reopens_for_a_full_cooldown(ns: Namespace) -> None:
    breaker, clock = _open(ns)
    clock.advance(30.0)
    breaker.allow()
    breaker.record_failure()
    expect(breaker.state == "open", "state 'open' after a failed trial", breaker.state)
    clock.advance(10.0)
    expect(breaker.allow() is False, "allow() False 10 s after the failed trial", "True")
    clock.advance(20.0)
    expect(breaker.allow() is True, "allow() True 30 s after the failed trial", "False")
