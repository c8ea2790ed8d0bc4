"""The application's own database, kept in the world's file so the judge reads one truth.

``post`` writes a ledger entry (a local effect, recorded like the services' effects),
``status`` / ``mark`` keep a per-key state, and ``transaction()`` does several of these
in one all-or-nothing SQLite transaction. The ledger is local: it has no response to
lose and fires no fault points.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from labkit.world.records import SQL, Effect, record_effect

if TYPE_CHECKING:
    from labkit.world.core import World


def _shown(value: object) -> str:
    """``value`` as an error message shows it: its type and a short repr."""
    text = repr(value)
    return f"{type(value).__name__} {text[:40]}{'...' if len(text) > 40 else ''}"


class LedgerTx:
    """Ledger operations inside one open transaction (see ``Ledger.transaction``)."""

    def __init__(self, world: World, conn: sqlite3.Connection) -> None:
        self.world = world
        self.conn = conn

    def status(self, key: str) -> str | None:
        """The state marked for ``key`` (``"started"``, ``"done"``...), or None."""
        row = self.conn.execute(SQL["mark_get"], {"key": key}).fetchone()
        return None if row is None else str(row["state"])

    def mark(self, key: str, state: str = "done") -> None:
        """Set the state of ``key``."""
        self.conn.execute(
            SQL["mark_set"], {"key": key, "state": state, "now": self.world.clock.now()}
        )

    def post(self, account: str, amount: int, *, key: str) -> dict[str, Any]:
        """Write one ledger entry (a local effect) for ``key``.

        ``account``: a non-empty text; ``amount``: a whole number of cents, negative for a
        debit. Anything else (a payload's missing field passed on as None, a float of
        reais) raises ``ValueError`` and writes nothing, as a NOT NULL or CHECK
        constraint of the application's own table would.
        """
        if not isinstance(account, str) or not account:
            raise ValueError(
                f"a ledger entry needs an account, a non-empty text, not {_shown(account)}: "
                "pass the job's customer as its payload gives it"
            )
        if not isinstance(amount, int) or isinstance(amount, bool):
            raise ValueError(
                f"a ledger entry's amount is a whole number of cents, not {_shown(amount)}: "
                "pass the job's amount as its payload gives it"
            )
        return record_effect(
            self.conn,
            service="ledger",
            action="post",
            key=key,
            params={"account": account, "amount": amount},
            now=self.world.clock.now(),
            reply=lambda effect_id: {"entry_id": f"le_{effect_id}"},
        )


class Ledger:
    """The application's own database: entries and per-key marks, transactional."""

    name = "ledger"

    def __init__(self, world: World) -> None:
        self.world = world

    @contextmanager
    def transaction(self) -> Iterator[LedgerTx]:
        """All the ledger work inside the block commits together, or none of it does."""
        with self.world._tx() as conn:
            yield LedgerTx(self.world, conn)

    def status(self, key: str) -> str | None:
        """The state marked for ``key``, or None."""
        with self.transaction() as tx:
            return tx.status(key)

    def mark(self, key: str, state: str = "done") -> None:
        """Set the state of ``key`` in its own transaction."""
        with self.transaction() as tx:
            tx.mark(key, state)

    def post(self, account: str, amount: int, *, key: str) -> dict[str, Any]:
        """Write one ledger entry in its own transaction."""
        with self.transaction() as tx:
            return tx.post(account, amount, key=key)

    def find(self, key: str) -> list[Effect]:
        """The ledger entries written for ``key``."""
        return self.world.effects(service="ledger", key=key)
