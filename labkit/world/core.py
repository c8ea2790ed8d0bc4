"""``World``: the outside world's own SQLite file, its transactions and its records.

The services (``labkit.world.services``) and the ledger (``labkit.world.ledger``) do
their work through the ``World`` that owns them: one connection, one lock, one clock,
one ``FaultPlan``.
"""

from __future__ import annotations

import sqlite3
import threading
from contextlib import AbstractContextManager
from pathlib import Path

from labkit import dbfile
from labkit.clock import Clock, SystemClock
from labkit.faults import FaultPlan
from labkit.world.ledger import Ledger
from labkit.world.records import SCHEMA_VERSION, SQL, WORLD_FILE, Call, Effect
from labkit.world.services import Mail, Payments, Webhook


class World:
    """The outside world in one SQLite file: ``mail``, ``payments``, ``webhook``, ``ledger``."""

    def __init__(
        self, path: str | Path, clock: Clock | None = None, faults: FaultPlan | None = None
    ) -> None:
        self.path = Path(path)
        self.clock: Clock = clock or SystemClock()
        self.faults = faults
        self._lock = threading.RLock()
        self.conn = self._open()
        self.payments = Payments(self, "payments")
        self.mail = Mail(self, "mail")
        self.webhook = Webhook(self, "webhook")
        self.ledger = Ledger(self)

    def _open(self) -> sqlite3.Connection:
        dbfile.check_file(self.path, WORLD_FILE)
        # WAL + NORMAL: a committed effect survives the death of any process (the lab's
        # crashes); only a power cut could lose the last commits, which no lesson simulates.
        conn = dbfile.connect(self.path, synchronous="NORMAL")
        with dbfile.transaction(conn, self._lock):
            dbfile.run_script(conn, SQL["schema"])
            conn.execute(SQL["set_meta"], {"name": "schema_version", "value": str(SCHEMA_VERSION)})
        return conn

    def _tx(self) -> AbstractContextManager[sqlite3.Connection]:
        """One all-or-nothing transaction on the world's file (a crash inside undoes it)."""
        return dbfile.transaction(self.conn, self._lock)

    def close(self) -> None:
        with self._lock:
            self.conn.close()

    def __enter__(self) -> World:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"World({str(self.path)!r})"

    # -- reading the truth -------------------------------------------------------------

    def effects(self, service: str | None = None, key: str | None = None) -> list[Effect]:
        """Every effect done, in order, optionally only one service's and/or one key's."""
        with self._lock:
            rows = self.conn.execute(SQL["effects"], {"service": service, "key": key}).fetchall()
        return [Effect.from_row(r) for r in rows]

    def count(self, key: str, service: str | None = None) -> int:
        """How many effects were done for ``key`` (1 is right, 0 lost, 2+ duplicated)."""
        return len(self.effects(service=service, key=key))

    def calls(self, service: str | None = None) -> list[Call]:
        """Every call received, in order, with how it ended."""
        with self._lock:
            rows = self.conn.execute(SQL["calls"], {"service": service}).fetchall()
        return [Call(**dict(r)) for r in rows]

    # -- shared by the services --------------------------------------------------------

    def _log(
        self, service: str, action: str, key: str | None, outcome: str, status: int | None
    ) -> None:
        with self._tx() as conn:
            conn.execute(
                SQL["insert_call"],
                {
                    "service": service,
                    "action": action,
                    "key": key,
                    "outcome": outcome,
                    "status": status,
                    "now": self.clock.now(),
                },
            )

    def _hit(self, point: str, key: str | None) -> None:
        if self.faults is not None:
            self.faults.hit(point, key=key, clock=self.clock)
