"""Exercise 11's checks of ``place_order``: the order and its outbox message written
in one transaction, once per order, rolled back and re-raised on an error, whatever
moment its process is killed at."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from labkit.grading.checks import Namespace, expect
from labkit.grading.exercises.ex11.outbox import (
    CHECKS,
    HARNESS,
    consistent,
    did,
    message_id,
    place,
)
from labkit.grading.exercises.killsweep import after_every_kill
from labkit.grading.exercises.kit import lab_file, reading
from labkit.grading.exercises.labdb import outbox_db, rows_of
from labkit.lang import _

#: The body of order 7 ('ana', 4200): the ids and the total are integers (cents).
ORDER_7_BODY: dict[str, Any] = {"order_id": 7, "customer": "ana", "total": 4200}


@CHECKS.add(
    1,
    "insert the order and an outbox row: message_id 'order:<id>:placed:v1', topic "
    "'order.placed', body json.dumps({'order_id', 'customer', 'total'}), sent_at NULL",
)
def place_order_writes_the_order_and_its_message(ns: Namespace) -> None:
    with lab_file(ns, outbox_db, "shop.db") as (conn, path):
        got = place(ns, path, [7, "ana", 4200])
        expect(got.get("returned") is True, "True for a new order", got.get("returned"))
        orders, outbox = rows_of(conn, "all_orders"), rows_of(conn, "all_outbox")
        expect(
            orders == [{"id": 7, "customer": "ana", "total": 4200}],
            "the order in the orders table",
            orders,
        )
        expect(len(outbox) == 1, "one outbox row", outbox)
        row = outbox[0]
        try:
            body = json.loads(row["body"])
        except (TypeError, ValueError):
            body = row["body"]
        expect(
            row["message_id"] == message_id(7)
            and row["topic"] == "order.placed"
            # Compared as JSON text: 4200.0 equals 4200 in Python, not on the wire.
            and json.dumps(body, sort_keys=True) == json.dumps(ORDER_7_BODY, sort_keys=True)
            and row["sent_at"] is None,
            "message_id 'order:7:placed:v1', topic 'order.placed', the order as JSON, sent_at NULL",
            row,
        )


@CHECKS.add(
    1,
    "a retried place_order for an order that exists writes nothing and returns False "
    "(INSERT ... ON CONFLICT (id) DO NOTHING, and no message when nothing was inserted)",
    severe=True,
)
def place_order_twice_is_one_message(ns: Namespace) -> None:
    with lab_file(ns, outbox_db, "shop.db") as (conn, path):
        place(ns, path, [7, "ana", 4200])
        again = place(ns, path, [7, "ana", 4200])
        expect(again.get("returned") is False, "False the second time", again.get("returned"))
        ok, seen = consistent(conn)
        expect(ok and len(rows_of(conn, "all_outbox")) == 1, "one order, one message", seen)
        # A retry is the same order id, never the same content: ana may order it twice.
        other = place(ns, path, [8, "ana", 4200])
        ok, seen = consistent(conn)
        expect(
            other.get("returned") is True and ok and len(rows_of(conn, "all_outbox")) == 2,
            "True for order 8, ana, 4200 (a new order id with order 7's content), and its "
            "own message: a retry is known by the order id",
            _("{value}; {seen}").format(value=repr(other.get("returned")), seen=seen),
        )
        # Written sent, a message is never published: the relay reads sent_at IS NULL.
        marked = [r["message_id"] for r in rows_of(conn, "all_outbox") if r["sent_at"] is not None]
        expect(
            not marked,
            _("the messages of orders 7 and 8 pending (sent_at NULL) until a relay publishes them"),
            _("marked sent before any relay ran: {ids}").format(ids=marked),
            _("insert the outbox row without sent_at: it stays NULL until the relay sends it"),
        )


@CHECKS.add(
    3,
    "the order and its message must commit together: BEGIN IMMEDIATE, both INSERTs, "
    "COMMIT (ROLLBACK on error); two transactions leave an order without its message "
    "when the process dies between them",
    severe=True,
)
def place_order_is_one_transaction(ns: Namespace) -> None:
    def judge(life: Path) -> tuple[bool, str]:
        with reading(life / "shop.db") as conn:
            ok, seen = consistent(conn)
            return ok and len(rows_of(conn, "all_outbox")) == 1, seen

    after_every_kill(
        ns,
        HARNESS + "place_order_kills",
        lambda folder: outbox_db(folder / "shop.db").close(),
        [[7, "ana", 4200]],
        judge,
        _("one order and one message"),
        _("the retried request"),
    )


@CHECKS.add(
    1,
    "when a statement fails inside place_order's transaction, ROLLBACK and re-raise: "
    "a transaction left open spoils the connection, and the next order on it fails",
)
def place_order_rolls_back_and_re_raises(ns: Namespace) -> None:
    bad, good = [8, None, 100], [9, "ana", 4200]  # customer is NOT NULL: the INSERT fails
    with lab_file(ns, outbox_db, "shop.db") as (conn, path):
        got = ns.harness(HARNESS + "on_one_connection", "place_order", str(path), [bad, good])
        ok, seen = consistent(conn)
        said = [did(g) for g in got]
        expect(
            "raised" in got[0],
            "place_order(conn, 8, None, 100) to raise (customer must not be NULL)",
            _("it {outcome}; {found}").format(outcome=said[0], found=seen),
        )
        expect(
            ok and [r["id"] for r in rows_of(conn, "all_orders")] == [9],
            "order 9 and its message saved by the next place_order on the same connection",
            _("{found}; the second call {outcome}").format(found=seen, outcome=said[1]),
        )
