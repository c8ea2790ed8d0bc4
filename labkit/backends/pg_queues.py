"""``labkit.queues`` on PostgreSQL: a queue per account with a cap, and serial queues.

Same rules as the SQLite version (read ``labkit.queues`` for why each exists): an
account queue that already runs ``cap`` jobs under a live lease is skipped and the
least busy accounts go first; a serial queue runs only its head, the oldest live job.
The statements are in ``labkit/sql/pg_queues.sql`` and go through
``PostgresJobStore._claim``, so leases, attempt counting, tokens and burying are the
plain claim's.

What PostgreSQL adds is concurrency: SQLite has one writer, so a claim's count of
running jobs cannot change under it. Here many workers claim at once, each statement
counting from its own snapshot. ``FOR UPDATE SKIP LOCKED`` with the state re-checked
on the locked row already stops two claimers from taking the same top-ranked rows, but
claimers that rank rows differently (other account lists, clocks a little apart) could
each admit a job from a stale count and pass the cap. So the claim first takes a
transaction-level advisory lock per queue it may touch (``lock_queues``, in name order
so claimers cannot deadlock), then runs the claim statement, whose snapshot starts
after the wait and includes every earlier claim. Claims for other accounts do not
wait; completions never take the locks.

In production: Oban Pro's partitioned queues and ``global_limit``, Sidekiq
Enterprise's limiters, SQS FIFO message groups or Kafka partitions for ordering.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from labkit import queries
from labkit.backends.postgres import PostgresJobStore, _pyformat
from labkit.job import Job
from labkit.queues import ACCOUNT_PREFIX, SERIAL_PREFIX

SQL = {name: _pyformat(text) for name, text in queries.load("pg_queues.sql").items()}


def _active(store: PostgresJobStore, prefix: str) -> list[str]:
    with store._lock:
        rows = store.conn.execute(SQL["active_queues"], {"prefix": prefix}).fetchall()
    return [r["queue"] for r in rows]


def _claim_locked(
    store: PostgresJobStore,
    worker: str,
    queues: list[str],
    lease_s: float,
    limit: int,
    sql: str,
    extra: dict[str, Any] | None = None,
) -> list[Job]:
    # The outer transaction holds the queue locks until the claim commits; _claim's own
    # transaction nests inside it as a savepoint on the same connection.
    with store._tx() as ex:
        ex.execute(SQL["lock_queues"], {"queues": queues})
        return store._claim(worker, queues, lease_s, limit, sql, extra)


class PgAccountQueues:
    """One queue per account, at most ``cap`` running jobs each (``None``: no cap)."""

    def __init__(
        self, store: PostgresJobStore, cap: int | None = 2, prefix: str = ACCOUNT_PREFIX
    ) -> None:
        if cap is not None and (not isinstance(cap, int) or cap < 1):
            raise ValueError(f"cap must be a whole number >= 1 (or None for no cap), not {cap!r}")
        self.store = store
        self.cap = cap
        self.prefix = prefix

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
        return _active(self.store, self.prefix)

    def running(self, account: str | int) -> int:
        """How many of the account's jobs run under a live lease."""
        params = {"queue": self.queue_for(account), "now": self.store.clock.now()}
        with self.store._lock:
            row = self.store.conn.execute(SQL["running_in_queue"], params).fetchone()
        return int(row["n"]) if row else 0

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
        return _claim_locked(
            self.store, worker, queues, lease_s, limit, SQL["claim_capped"], {"cap": self.cap}
        )


class PgSerialQueues:
    """At most one running job per serial key, in enqueue order."""

    def __init__(self, store: PostgresJobStore, prefix: str = SERIAL_PREFIX) -> None:
        self.store = store
        self.prefix = prefix

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
        queues = (
            [self.queue_for(k) for k in keys]
            if keys is not None
            else _active(self.store, self.prefix)
        )
        if not queues:
            return []
        return _claim_locked(self.store, worker, queues, lease_s, limit, SQL["claim_serial"])
