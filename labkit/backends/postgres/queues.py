"""``labkit.patterns.queues`` on PostgreSQL: a queue per account with a cap, and serial queues.

The classes are ``labkit.patterns.queues``' own, with the same rules (read that module for why
each exists): an account queue that already runs ``cap`` jobs under a live lease is
skipped and the least busy accounts go first; a serial queue runs only its head, the
oldest live job. This module supplies only what PostgreSQL does differently, through
the engine hooks of ``labkit.patterns.queue_rules._KeyedQueues``: the statements in
``labkit/backends/postgres/queues.sql``, and a claim that takes the queue locks below first. The
claim statements go through ``PostgresJobStore.claim_with``, so leases, attempt counting,
tokens and burying are the plain claim's.

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

from typing import Any, ClassVar

from labkit.backends.postgres.sql import load_statements
from labkit.backends.postgres.store import PostgresJobStore
from labkit.job import Job
from labkit.patterns.queue_rules import AccountRules, SerialRules, _KeyedQueues
from labkit.store.base import StoreBase

SQL = load_statements("backends/postgres/queues.sql")


class _OnPostgres(_KeyedQueues[PostgresJobStore]):
    """The engine hooks of ``labkit.patterns.queues`` with this module's statements."""

    engine: ClassVar[type[StoreBase]] = PostgresJobStore

    def _active(self) -> list[str]:
        rows = self.store.read(SQL["active_queues"], {"prefix": self.prefix})
        return [r["queue"] for r in rows]

    def _running(self, queue: str) -> int:
        params = {"queue": queue, "now": self.store.clock.now()}
        rows = self.store.read(SQL["running_in_queue"], params)
        return int(rows[0]["n"]) if rows else 0

    def _claim(
        self,
        worker: str,
        queues: list[str],
        lease_s: float,
        limit: int,
        name: str,
        extra: dict[str, Any] | None = None,
    ) -> list[Job]:
        # The outer transaction holds the queue locks until the claim commits; claim_with's
        # own statement runs inside it on the same connection.
        with self.store.claim_transaction() as ex:
            ex.execute(SQL["lock_queues"], {"queues": queues})
            return self.store.claim_with(worker, queues, lease_s, limit, SQL[name], extra)


class PgAccountQueues(_OnPostgres, AccountRules[PostgresJobStore]):
    """One queue per account, at most ``cap`` running jobs each (``None``: no cap)."""


class PgSerialQueues(_OnPostgres, SerialRules[PostgresJobStore]):
    """At most one running job per serial key, in enqueue order."""
