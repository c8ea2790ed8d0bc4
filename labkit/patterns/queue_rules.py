"""The rules of fair and ordered claiming, on any engine: a queue per account, serial queues.

``AccountRules`` caps how many jobs of one account run at once, least busy account
first; ``SerialRules`` runs only the head of each serial key's queue. What an engine
changes is three hooks of ``_KeyedQueues`` (list the live queues, count a queue's
running jobs, run a claim statement): ``labkit.patterns.queues`` has SQLite's
(``AccountQueues``, ``SerialQueues``), ``labkit.backends.postgres.queues`` PostgreSQL's
(``PgAccountQueues``, ``PgSerialQueues``). This module imports neither engine.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Generic, TypeVar

from labkit.job import Job
from labkit.store.base import StoreBase

ACCOUNT_PREFIX = "account:"
SERIAL_PREFIX = "serial:"

S = TypeVar("S", bound=StoreBase)


class _KeyedQueues(Generic[S]):
    """A queue per key under one prefix, on one store: what both queue kinds share.

    The rules are written once, in the two classes below. What an engine changes is
    three hooks: how the live queues are listed (``_active``), how a queue's running
    jobs are counted (``_running``) and how a claim statement is run (``_claim``, given
    the statement's name). ``labkit.patterns.queues`` supplies SQLite's, and
    ``labkit.backends.postgres.queues`` PostgreSQL's; each sets ``engine``.
    """

    #: The store class the hooks' SQL is written for (set by each engine's subclass).
    engine: ClassVar[type[StoreBase]]

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
        raise NotImplementedError

    def _running(self, queue: str) -> int:
        """How many jobs of ``queue`` run under a live lease."""
        raise NotImplementedError

    def _claim(
        self,
        worker: str,
        queues: list[str],
        lease_s: float,
        limit: int,
        name: str,
        extra: dict[str, Any] | None = None,
    ) -> list[Job]:
        """Run the engine's claim statement ``name`` through the store's ``claim_with``."""
        raise NotImplementedError


class AccountRules(_KeyedQueues[S]):
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


class SerialRules(_KeyedQueues[S]):
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
