"""The worker on a bad day: arguments that would strand jobs, a busy database, a long wait.

Every test here failed before the fix it names: ``drain`` stopped early with more than
1,000 not-yet-due jobs in another queue, a NaN lease was accepted, and a busy database
(``StoreBusy``) ended ``run_forever`` instead of making it back off.
"""

from __future__ import annotations

import logging

import pytest

from labkit.clock import FakeClock
from labkit.errors import StoreBusy
from labkit.job import JobState
from labkit.store import JobStore
from labkit.worker import Worker


def test_drain_runs_a_later_job_behind_more_than_a_thousand_waiting_in_another_queue(
    store: JobStore, clock: FakeClock
) -> None:
    # 1,001 jobs due in an hour in another queue fill the first 1,000 pending rows by id.
    for n in range(1001):
        store.enqueue("other", {"n": n}, queue="elsewhere", run_after=clock.now() + 3600)
    mine, _ = store.enqueue("mine", {}, key="mine-1", run_after=clock.now() + 60)
    ran: list[int] = []
    worker = Worker(store, {"mine": lambda job, ctx: ran.append(job.id)}, name="w1")
    assert worker.next_due() == pytest.approx(clock.now() + 60)
    assert worker.drain() == 1
    assert ran == [mine.id] and store.get(mine.id).state == JobState.SUCCEEDED
    # The other queue's jobs were neither run nor waited for (the clock moved ~60 s).
    assert store.counts()["pending"] == 1001
    assert clock.now() < 1_767_225_600 + 3600


@pytest.mark.parametrize("lease_s", [float("nan"), float("inf"), -1.0, 0.0, True])
def test_a_worker_refuses_a_lease_that_would_strand_its_jobs(
    store: JobStore, lease_s: float
) -> None:
    with pytest.raises(ValueError, match="lease_s"):
        Worker(store, {}, lease_s=lease_s)


class FlakyStore:
    """A store whose claim raises StoreBusy the first ``busy`` times (another writer)."""

    def __init__(self, store: JobStore, busy: int) -> None:
        self._store, self.busy, self.refused = store, busy, 0

    def __getattr__(self, name: str) -> object:
        return getattr(self._store, name)

    def claim(self, *args: object, **kwargs: object) -> object:
        if self.refused < self.busy:
            self.refused += 1
            raise StoreBusy("jobs.db stayed locked by another connection")
        return self._store.claim(*args, **kwargs)  # type: ignore[arg-type]


def test_a_worker_backs_off_on_a_busy_database_keeps_going_and_logs_it(
    store: JobStore, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    for n in range(3):
        store.enqueue("charge", {"n": n})
    flaky = FlakyStore(store, busy=4)
    worker = Worker(flaky, {"charge": lambda job, ctx: None}, name="w1")  # type: ignore[arg-type]
    start = clock.now()
    with caplog.at_level(logging.WARNING, logger="labkit.worker"):
        assert worker.run_until_idle() == 3
    assert flaky.refused == 4, "the busy fault must have fired"
    assert store.counts()["succeeded"] == 3
    assert clock.now() > start, "the worker must wait (by its clock) before trying again"
    busy_lines = [r for r in caplog.records if "busy" in r.getMessage()]
    assert len(busy_lines) == 4 and "backing off" in busy_lines[0].getMessage()
