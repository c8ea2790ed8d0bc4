"""Store operations the worker and the CLI lean on, the same on every backend.

``next_due`` must see every waiting job of the worker's queues however many wait in
other queues (it read only the first 1,000 jobs by id before); ``dead_by_reason`` walks
the dead-letter queue a page at a time, in order, without repeating or skipping a job.
"""

from __future__ import annotations

from typing import Any

from labkit.clock import FakeClock
from labkit.errors import PermanentError, TransientError


def test_next_due_sees_a_job_behind_many_waiting_in_other_queues(make_store: Any) -> None:
    clock = FakeClock(1_000.0)
    store = make_store(clock)
    for n in range(1001):
        store.enqueue("other", {"n": n}, queue="elsewhere", run_after=5_000.0)
    store.enqueue("mine", {}, queue="mine", run_after=1_060.0)
    assert store.next_due(("mine",)) == 1_060.0
    assert store.next_due(("elsewhere", "mine")) == 1_060.0
    assert store.next_due(("nobody",)) is None
    clock.advance(60)
    taken = store.claim("w", queues=("mine",), lease_s=7)
    assert taken is not None
    # A running job is due again when its lease runs out (a dead worker's job comes back).
    assert store.next_due(("mine",)) == 1_067.0


def test_dead_by_reason_walks_every_matching_dead_job_once_in_order(make_store: Any) -> None:
    clock = FakeClock(1_000.0)
    store = make_store(clock)
    for n in range(23):
        store.enqueue("charge" if n % 3 else "mail", {"n": n}, key=f"k{n}", max_attempts=1)
    for n in range(23):
        job = store.claim("w")
        store.fail(job, TransientError("503") if n % 2 == 0 else PermanentError("400"))
        clock.advance(1)
    transient = [j.id for j in store.dead_letters(limit=100) if "exhausted" in j.reason]
    walked = [j.id for j in store.dead_by_reason(("attempts exhausted",), batch=5)]
    assert walked == transient and len(walked) == 12
    mail = [j.id for j in store.dead_by_reason(("attempts exhausted",), kind="mail", batch=2)]
    assert mail and all(store.get(i).kind == "mail" for i in mail)
    assert store.count_dead_by_reason(("attempts exhausted",)) == 12
    assert store.count_dead_by_reason(("attempts exhausted",), matching=False) == 11
    exhausted = ("attempts exhausted",)
    permanent_mail = store.count_dead_by_reason(exhausted, kind="mail", matching=False)
    assert permanent_mail == sum(1 for j in store.dead_letters(limit=100)
                                 if j.kind == "mail" and j.reason.startswith("permanent"))
