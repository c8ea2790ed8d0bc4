"""Fair and ordered claiming on top of the JobStore: a queue per account, and serial queues.

**A queue per account with a concurrency cap.** When one customer (seed 002's big ERP
account) drops ten thousand jobs at once, a plain first-in-first-out claim hands every
worker to that customer until the flood is gone, and everyone else waits. Give each
account its own queue (``account:<id>``) and claim with a cap: a queue that already
has ``cap`` jobs running under a live lease is skipped, and the least busy queues go
first, so the accounts take turns and the free workers reach everyone's jobs.
``simulate_accounts`` shows the waiting times per account with and without the cap,
and the price: with only the flood left, workers above the cap stay idle.

**A serial queue.** Some jobs must not overlap and must keep their order: the updates
of one order, the sync of one ERP record. ``SerialQueues`` puts each serial key in its
own queue (``serial:<key>``) and claims only the head of each queue, the oldest live
job: while it runs, or waits in ``retry_wait`` for its next attempt, later jobs of the
same key wait behind it. A dead head stops blocking (it is out of the line, in the
dead-letter report); later jobs go on.

The rules are ``labkit.patterns.queue_rules``'s; this module gives them SQLite's three
engine hooks and statements (``labkit/patterns/queues.sql``), which go through
``JobStore.claim_with``, so leases, attempt counting, lease tokens and burying work
exactly as in a plain claim. ``labkit.backends.postgres.queues`` does the same for
PostgreSQL.

In production: Oban Pro's partitioned queues and ``global_limit``, Sidekiq Enterprise's
limiters, SQS FIFO message groups or Kafka partitions for ordering.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from labkit import queries
from labkit.clock import FakeClock
from labkit.job import Job
from labkit.patterns.queue_rules import (
    ACCOUNT_PREFIX,
    SERIAL_PREFIX,
    AccountRules,
    SerialRules,
    _KeyedQueues,
)
from labkit.store.base import StoreBase
from labkit.store.sqlite import JobStore

SQL = queries.load("patterns/queues.sql")
__all__ = ["ACCOUNT_PREFIX", "SERIAL_PREFIX", "AccountQueues", "SerialQueues", "simulate_accounts"]


class _OnSQLite(_KeyedQueues[JobStore]):
    """The engine hooks of ``labkit.patterns.queue_rules`` with this module's statements."""

    engine: ClassVar[type[StoreBase]] = JobStore

    # -- engine hooks ------------------------------------------------------------------

    def _active(self) -> list[str]:
        """Queues under ``prefix`` that hold live jobs, in name order."""
        # Every character sorts below chr(0x10FFFF), so this range holds exactly the prefix.
        params = {"prefix": self.prefix, "prefix_end": self.prefix + "\U0010ffff"}
        return [r[0] for r in self._sqlite().execute(SQL["active_queues"], params)]

    def _running(self, queue: str) -> int:
        """How many jobs of ``queue`` run under a live lease."""
        params = {"queue": queue, "now": self.store.clock.now()}
        return int(self._sqlite().execute(SQL["running_in_queue"], params).fetchone()[0])

    def _claim(
        self,
        worker: str,
        queues: list[str],
        lease_s: float,
        limit: int,
        name: str,
        extra: dict[str, Any] | None = None,
    ) -> list[Job]:
        """Run the claim statement ``name`` through the store's ``claim_with``."""
        return self.store.claim_with(worker, queues, lease_s, limit, SQL[name], extra)

    def _sqlite(self) -> sqlite3.Connection:
        store = self.store
        assert isinstance(store, JobStore)  # __init__ checked it; this tells the type checker
        return store.conn


class AccountQueues(_OnSQLite, AccountRules[JobStore]):
    """One queue per account, at most ``cap`` running jobs each (``None``: no cap)."""


class SerialQueues(_OnSQLite, SerialRules[JobStore]):
    """At most one running job per serial key, in enqueue order."""


# -- the lesson's simulation ---------------------------------------------------------


@dataclass(frozen=True)
class AccountWaits:
    """How long one account's jobs waited between enqueue and claim, in seconds."""

    account: str
    waits: list[float] = field(default_factory=list)

    @property
    def jobs(self) -> int:
        return len(self.waits)

    @property
    def mean_wait(self) -> float:
        return sum(self.waits) / len(self.waits) if self.waits else 0.0

    @property
    def max_wait(self) -> float:
        return max(self.waits, default=0.0)


def simulate_accounts(
    store: JobStore,
    jobs: Mapping[str, int],
    *,
    workers: int = 3,
    service_s: float = 1.0,
    cap: int | None = 1,
) -> dict[str, AccountWaits]:
    """Run a flood through ``workers`` workers and return each account's waiting times.

    ``jobs`` maps account to job count, enqueued in that order at the same instant
    (put the flooding account first). Every job takes ``service_s`` seconds. The store
    must run on a ``FakeClock``; the run advances it from one job completion to the
    next, so it is instant and gives the same numbers every time. Compare
    ``cap=None`` (plain order) with ``cap=1``.
    """
    clock = store.clock
    if not isinstance(clock, FakeClock):
        raise ValueError("simulate_accounts needs a JobStore on a FakeClock (it moves time itself)")
    if workers < 1 or service_s <= 0:
        raise ValueError("workers must be >= 1 and service_s positive")
    queues = AccountQueues(store, cap=cap)
    for account, count in jobs.items():
        for n in range(count):
            queues.enqueue(account, "work", {"account": account, "n": n})
    result = {account: AccountWaits(account) for account in jobs}
    running: list[tuple[float, Job]] = []
    lease_s = service_s * 10  # comfortably longer than a job: no lease expires here
    while True:
        free = workers - len(running)
        if free > 0:
            for job in queues.claim("sim", limit=free, lease_s=lease_s, accounts=list(jobs)):
                account = job.queue[len(queues.prefix) :]
                result[account].waits.append(clock.now() - job.created_at)
                running.append((clock.now() + service_s, job))
        if not running:
            return result
        running.sort(key=lambda item: (item[0], item[1].id))
        clock.set(running[0][0])
        while running and running[0][0] <= clock.now():
            store.complete(running.pop(0)[1])
