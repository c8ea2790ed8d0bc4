"""Hidden checks for exercise 7: other thresholds, and no wall clock."""

from __future__ import annotations

from unittest import mock

from labkit.clock import FakeClock
from labkit.grading.core import Checks, Namespace, expect

CHECKS = Checks("ex07", hidden=True)


@CHECKS.add(1, "threshold is a parameter: threshold=1 opens at the first failure")
def threshold_of_one(ns: Namespace) -> None:
    breaker = ns.Breaker(threshold=1, cooldown_s=5.0, clock=FakeClock())
    breaker.record_failure()
    expect(breaker.state == "open", "open after one failure with threshold=1", breaker.state)


@CHECKS.add(1, "read time only from the clock you were given")
def ignores_the_wall_clock(ns: Namespace) -> None:
    import time

    clock = FakeClock()
    breaker = ns.Breaker(threshold=1, cooldown_s=5.0, clock=clock)
    breaker.record_failure()
    far = time.time() + 3600
    with mock.patch.object(time, "time", lambda: far), \
            mock.patch.object(time, "monotonic", lambda: far):
        allowed = breaker.allow()
    expect(allowed is False, "allow() False: the fake clock did not move", allowed)
