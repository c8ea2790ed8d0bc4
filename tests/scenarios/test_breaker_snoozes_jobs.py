"""A worker whose dependency's breaker is open snoozes jobs without spending attempts."""

from __future__ import annotations

import random

from labkit.breaker import CircuitBreaker
from labkit.clock import FakeClock
from labkit.errors import TransientError
from labkit.retry import RetryPolicy, constant
from labkit.store import JobStore
from labkit.worker import Worker


def test_open_breaker_snoozes_until_retry_at_and_keeps_the_attempt_budget(tmp_path):
    clock = FakeClock()
    store = JobStore(
        tmp_path / "jobs.db", clock=clock, rng=random.Random(1),
        retry=RetryPolicy(max_attempts=3, backoff=constant(1)),
    )
    breaker = CircuitBreaker("erp", threshold=2, cooldown=60, clock=clock,
                             store_path=tmp_path / "jobs.db")
    erp_up = False
    calls = []

    def sync(job, ctx):
        def call_erp():
            calls.append(job.id)
            if not erp_up:
                raise TransientError("ERP answered 503", status=503)
            return "synced"

        return breaker.call(call_erp)

    for n in range(4):
        store.enqueue("sync", {"record": n}, key=f"erp:{n}:sync:v1")
    worker = Worker(store, {"sync": sync}, clock=clock)
    worker.run_until_idle()
    # Two real failures open the breaker; the other jobs never reach the ERP.
    assert breaker.state == "open"
    assert len(calls) == 2
    snoozed = [j for j in store.jobs() if j.error_class == "Snoozed"]
    assert len(snoozed) == 2
    assert all(j.attempt == 0 and j.run_after == breaker.retry_at for j in snoozed)
    erp_up = True
    clock.set(breaker.retry_at)
    worker.run_until_idle()
    clock.advance(60)
    worker.run_until_idle()
    assert store.counts()["succeeded"] == 4
    assert breaker.state == "closed"
    assert [(t.from_state, t.to_state) for t in breaker.history()] == [
        ("closed", "open"), ("open", "half_open"), ("half_open", "closed")
    ]
