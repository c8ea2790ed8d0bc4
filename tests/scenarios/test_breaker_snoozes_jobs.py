"""A worker whose dependency's breaker is open snoozes jobs without spending attempts."""

from __future__ import annotations

import random

from labkit.clock import FakeClock
from labkit.errors import TransientError
from labkit.patterns.breaker import CircuitBreaker
from labkit.retry import RetryPolicy, constant
from labkit.store import JobStore
from labkit.worker import Worker


def store_and_erp_breaker(
    tmp_path, max_attempts: int
) -> tuple[FakeClock, JobStore, CircuitBreaker]:
    """A job store and the ERP's breaker (2 failures open it for 60 s) sharing one file."""
    clock = FakeClock()
    store = JobStore(
        tmp_path / "jobs.db",
        clock=clock,
        rng=random.Random(1),
        retry=RetryPolicy(max_attempts=max_attempts, backoff=constant(1)),
    )
    breaker = CircuitBreaker(
        "erp", threshold=2, cooldown=60, clock=clock, store_path=tmp_path / "jobs.db"
    )
    return clock, store, breaker

def test_open_breaker_snoozes_until_retry_at_and_keeps_the_attempt_budget(tmp_path):
    clock, store, breaker = store_and_erp_breaker(tmp_path, max_attempts=3)
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
        ("closed", "open"),
        ("open", "half_open"),
        ("half_open", "closed"),
    ]


def test_snoozes_outnumber_the_attempt_budget_and_the_history_shows_no_attempt_spent(tmp_path):
    # Budget of 2 attempts per job; the ERP stays down for three cooldowns, so the jobs
    # behind the open breaker are snoozed more times than their budget allows runs.
    clock, store, breaker = store_and_erp_breaker(tmp_path, max_attempts=2)
    erp_up = False
    reached: list[int] = []

    def sync(job, ctx):
        def call_erp():
            reached.append(job.id)
            if not erp_up:
                raise TransientError("ERP answered 503", status=503)
            return "synced"

        return breaker.call(call_erp)

    ids = [store.enqueue("sync", {"n": n}, key=f"erp:{n}:sync:v1")[0].id for n in range(4)]
    worker = Worker(store, {"sync": sync}, clock=clock)
    worker.run_until_idle()
    for _ in range(3):  # each cooldown: one trial call reaches the ERP and fails
        clock.set(breaker.retry_at)
        worker.run_until_idle()
    last = ids[-1]
    assert last not in reached  # the breaker refused it every time
    history = store.attempts(last)
    assert len(history) == 4 > 2  # four claims, twice its budget of runs...
    assert {(a.attempt, a.outcome, a.error_class) for a in history} == {
        (1, "retry_wait", "Snoozed")  # ...each one handed back: always attempt 1 again
    }
    assert store.get(last).attempt == 0 and store.get(last).state == "retry_wait"
    erp_up = True
    for _ in range(3):
        clock.set(max(clock.now(), breaker.retry_at or clock.now()) + 60)
        worker.run_until_idle()
    done = store.get(last)
    assert done.state == "succeeded" and done.attempt == 1  # its first real run
    assert store.attempts(last)[-1].outcome == "succeeded"
