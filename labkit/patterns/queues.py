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

Both pass their own claim statement (``labkit/patterns/queues.sql``) to ``JobStore.claim_with``,
so leases, attempt counting, lease tokens and burying work exactly as in a plain
claim. The same two classes run on PostgreSQL: ``labkit.backends.postgres.queues`` supplies
only its statements and the three engine hooks of ``_KeyedQueues``.

In production: Oban Pro's partitioned queues and ``global_limit``, Sidekiq Enterprise's
limiters, SQS FIFO message groups or Kafka partitions for ordering.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from labkit import queries
from labkit.clock import FakeClock
from labkit.job import Job
from labkit.store import JobStore
from labkit.store.base import StoreBase

SQL = queries.load("patterns/queues.sql")
ACCOUNT_PREFIX = "account:"
SERIAL_PREFIX = "serial:"

S = TypeVar("S", bound=StoreBase)


class _KeyedQueues(Generic[S]):
    """A queue per key under one prefix, on one store: what both queue kinds share.

    The rules are written once, in the two classes below. What an engine changes is
    three hooks: how the live queues are listed (``_active``), how a queue's running
    jobs are counted (``_running``) and how a claim statement is run (``_claim``, given
    the statement's name). Here they run SQLite's statements; ``labkit.backends.postgres.queues``
    overrides them, and sets ``engine``, for PostgreSQL.
    """

    #: The store class the hooks' SQL is written for.
    engine: ClassVar[type[StoreBase]] = JobStore

    def __init__(self, store: S, prefix: str) -> None:
        if not isinstance(store, self.engine):
            raise TypeError(
                f"{type(self).__name__} needs a {self.engine.__name__}, not a "
                f"{type(store).__name__}: its SQL is written for that engine "
                "(labkit.patterns.queues "
                "for SQLite, labkit.backends.postgres.queues for PostgreSQL)"
            )
        self.store = store
        self.prefix = prefix

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


class AccountQueues(_KeyedQueues[S]):
    """One queue per account, claimed so that no account runs more than ``cap`` jobs.

    ``cap=None`` claims in plain oldest-first order across the same queues (the
    starving baseline the lesson compares against).
    """

    def __init__(self, store: S, cap: int | None = 2, prefix: str = ACCOUNT_PREFIX) -> None:
        if cap is not None and (not isinstance(cap, int) or cap < 1):
            raise ValueError(f"cap must be a whole number >= 1 (or None for no cap), not {cap!r}")
        super().__init__(store, prefix)
        self.cap = cap

    def queue_for(self, account: str | int) -> str:
        """The queue name of an account: ``account:<id>``."""
        text = str(account)
        if not text:
            raise ValueError("account id is empty")
        return self.prefix + text

    def enqueue(
        self, account: str | int, kind: str, payload: Any, **options: Any
    ) -> tuple[Job, bool]:
        """``store.enqueue`` into the account's queue (same options, ``queue`` excluded)."""
        if "queue" in options:
            raise ValueError("the account decides the queue; do not pass queue=")
        return self.store.enqueue(kind, payload, queue=self.queue_for(account), **options)

    def queues(self) -> list[str]:
        """Account queues that hold live jobs now."""
        return self._active()

    def running(self, account: str | int) -> int:
        """How many of the account's jobs run under a live lease."""
        return self._running(self.queue_for(account))

    def claim(
        self,
        worker: str,
        limit: int = 1,
        lease_s: float = 30.0,
        accounts: Sequence[str | int] | None = None,
    ) -> list[Job]:
        """Lease up to ``limit`` jobs, least busy account first, skipping accounts at their cap."""
        queues = [self.queue_for(a) for a in accounts] if accounts is not None else self.queues()
        if not queues:
            return []
        if self.cap is None:
            return self.store.claim_many(worker, limit, queues=queues, lease_s=lease_s)
        return self._claim(worker, queues, lease_s, limit, "claim_capped", {"cap": self.cap})


class SerialQueues(_KeyedQueues[S]):
    """At most one running job per serial key, in enqueue order."""

    def __init__(self, store: S, prefix: str = SERIAL_PREFIX) -> None:
        super().__init__(store, prefix)

    def queue_for(self, serial_key: str) -> str:
        """The queue name of a serial key: ``serial:<key>``."""
        if not serial_key:
            raise ValueError("serial key is empty; name what must not overlap, e.g. 'order:42'")
        return self.prefix + serial_key

    def enqueue(self, serial_key: str, kind: str, payload: Any, **options: Any) -> tuple[Job, bool]:
        """``store.enqueue`` behind the earlier jobs of ``serial_key``."""
        if "queue" in options:
            raise ValueError("the serial key decides the queue; do not pass queue=")
        return self.store.enqueue(kind, payload, queue=self.queue_for(serial_key), **options)

    def claim(
        self,
        worker: str,
        limit: int = 1,
        lease_s: float = 30.0,
        keys: Sequence[str] | None = None,
    ) -> list[Job]:
        """Lease the ready heads of up to ``limit`` serial keys."""
        queues = [self.queue_for(k) for k in keys] if keys is not None else self._active()
        if not queues:
            return []
        return self._claim(worker, queues, lease_s, limit, "claim_serial")


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
