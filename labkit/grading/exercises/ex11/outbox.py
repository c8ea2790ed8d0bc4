"""What exercise 11's checks share: ``CHECKS``, on which ``place_checks``,
``relay_checks`` and ``consume_checks`` register; the scenes' orders and message ids;
and the student's three functions called through the harness, each on its own
connection, with what the check reads back (the broker's log, the emails sent)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from labkit.clock import FakeClock
from labkit.grading.checks import CheckFailed, Checks, Namespace
from labkit.grading.exercises.ex11.meanwhile import save_order
from labkit.grading.exercises.helpers import raised_error, raised_text
from labkit.grading.exercises.labdb import rows_of
from labkit.lang import _
from labkit.patterns.outbox import Broker

CHECKS = Checks(
    "ex11", "transactional outbox, relay and dedup", needs=("place_order", "relay_once", "consume")
)

HARNESS = "labkit.grading.exercises.ex11.harness:"
NOW = 100.0
ORDERS: list[list[Any]] = [[1, "ana", 4200], [2, "bia", 1500], [3, "caio", 990]]


def message_id(order_id: int) -> str:
    return f"order:{order_id}:placed:v1"


def did(got: dict[str, Any]) -> str:
    """What one harness call did: 'returned True', 'raised KeyError: 'customer''."""
    if "raised" in got:
        return _("raised {error}").format(error=raised_error(got))
    return _("returned {value}").format(value=repr(got.get("returned")))


def _raised(got: dict[str, Any], call: str, hint: str) -> None:
    if "raised" in got:
        raise CheckFailed(_("{call} to run").format(call=call), raised_text(got), hint)


def place(ns: Namespace, path: Path, order: list[Any], crash_after: int | None = None) -> Any:
    got = ns.harness(HARNESS + "place_order", str(path), order, crash_after)
    if crash_after is None:
        _raised(got, f"place_order{tuple(order)}", _("try place_order on outbox_db(...)"))
    return got


def seed_outbox(conn: sqlite3.Connection, orders: list[list[Any]]) -> None:
    """The check's own outbox rows (what a correct place_order writes), to test the relay."""
    for order in orders:
        save_order(conn, order)


def relay(
    ns: Namespace,
    path: Path,
    broker: Path,
    fault: str | None = None,
    nth: int = 0,
    now: float = NOW,
) -> dict[str, Any]:
    got = ns.harness(HARNESS + "relay_once", str(path), str(broker), now, fault, nth)
    if fault is None:
        _raised(got, "relay_once(conn, publish, now)", _("try relay_once with a list as broker"))
    return dict(got)


def broker_log(path: Path) -> list[str]:
    broker = Broker(path, FakeClock())
    try:
        return [m.message_id for m in broker.read("order.placed", limit=1000)]
    finally:
        broker.close()


def consistent(conn: sqlite3.Connection) -> tuple[bool, str]:
    """Every order has its one message and every message its order."""
    orders = {r["id"] for r in rows_of(conn, "all_orders")}
    messages = [r["message_id"] for r in rows_of(conn, "all_outbox")]
    ok = sorted(messages) == sorted(message_id(o) for o in orders)
    return ok, _("orders {orders}, outbox messages {messages}").format(
        orders=sorted(orders), messages=messages
    )


def consume(
    ns: Namespace,
    path: Path,
    order: list[Any],
    crash_after: int | None = None,
    mid: str | None = None,
) -> dict[str, Any]:
    """Deliver ``order``'s message (or another message ``mid`` about the same order)."""
    mid = message_id(order[0]) if mid is None else mid
    body = json.dumps({"order_id": order[0], "customer": order[1], "total": order[2]})
    got = ns.harness(HARNESS + "consume", str(path), mid, body, crash_after)
    if crash_after is None:
        _raised(got, f"consume({mid!r}, ...)", _("try consume on consumer_db(...)"))
    return dict(got)


def emails(conn: sqlite3.Connection) -> list[tuple[Any, Any]]:
    return [(r["order_id"], r["customer"]) for r in rows_of(conn, "all_emails")]
