"""Exercise 11's checks of ``consume``: the email and the message id in one
transaction, each message applied once however often it arrives; and the whole
pipeline (place, relay, consume) on generated orders."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from labkit.grading.checks import Namespace, expect
from labkit.grading.exercises.ex11.outbox import (
    CHECKS,
    HARNESS,
    ORDERS,
    _raised,
    consume,
    emails,
    message_id,
    place,
)
from labkit.grading.exercises.helpers import holds_for
from labkit.grading.exercises.killsweep import after_every_kill
from labkit.grading.exercises.kit import lab_file, reading
from labkit.grading.exercises.labdb import consumer_db, outbox_db, rows_of
from labkit.lang import _

#: A second message about order 1 (the shop announced it again, corrected): a new id,
#: so a new email, although an email for order 1 was already sent.
SECOND_MESSAGE = "order:1:placed:v2"


@CHECKS.add(
    1,
    "record the message id in processed_messages and send the email only if the id "
    "was new (a repeat is the same message id, not the same order); return True, and "
    "False for a repeat",
    severe=True,
)
def consume_applies_each_message_once(ns: Namespace) -> None:
    with lab_file(ns, consumer_db, "mail.db") as (conn, path):
        first = consume(ns, path, ORDERS[0])
        again = consume(ns, path, ORDERS[0])
        other = consume(ns, path, ORDERS[1])
        second = consume(ns, path, ORDERS[0], mid=SECOND_MESSAGE)
        got = [r.get("returned") for r in (first, again, other, second)]
        expect(
            got == [True, False, True, True],
            _("True, False (a repeat), True, True ({mid} is another message about order 1)").format(
                mid=SECOND_MESSAGE
            ),
            got,
        )
        expect(
            emails(conn) == [(1, "ana"), (2, "bia"), (1, "ana")],
            _("an email for order 1, one for order 2, and one for {mid}").format(
                mid=SECOND_MESSAGE
            ),
            emails(conn),
        )


@CHECKS.add(
    3,
    "the email and the processed id must commit together (BEGIN IMMEDIATE ... COMMIT): "
    "id first and a crash loses the email; email first and a crash sends it twice",
    severe=True,
)
def consume_is_one_transaction(ns: Namespace) -> None:
    order = ORDERS[0]
    body = json.dumps({"order_id": order[0], "customer": order[1], "total": order[2]})

    def judge(life: Path) -> tuple[bool, str]:
        with reading(life / "mail.db") as conn:
            sent = emails(conn)
            return sent == [(1, "ana")], _("emails {emails}").format(emails=sent)

    after_every_kill(
        ns,
        HARNESS + "consume_kills",
        lambda folder: consumer_db(folder / "mail.db").close(),
        [message_id(order[0]), body],
        judge,
        _("exactly one email"),
        _("the redelivery"),
    )


@CHECKS.add(
    1,
    "record the message id itself in processed_messages (not hash(message_id), not the "
    "order id): hash() of a str changes with each process, so a consumer restarted "
    "after a crash would not know the ids it applied and would send their emails again",
    severe=True,
)
def consume_records_the_message_id(ns: Namespace) -> None:
    with lab_file(ns, consumer_db, "mail.db") as (conn, path):
        for order in ORDERS:
            consume(ns, path, order)
        held = sorted(r[0] for r in conn.execute("SELECT message_id FROM processed_messages"))
        want = sorted(message_id(o[0]) for o in ORDERS)
        expect(
            held == want,
            _("processed_messages to hold {ids}").format(ids=want),
            _("it holds {ids}").format(ids=held),
        )


NAMES = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=12)


@st.composite
def order_streams(draw: Any) -> tuple[list[list[Any]], list[int]]:
    """Orders (some placed twice), then the order in which messages are delivered."""
    ids = draw(st.lists(st.integers(1, 2**31), min_size=1, max_size=4, unique=True))
    orders = [[i, draw(NAMES), draw(st.integers(0, 10**7))] for i in ids]
    placed = draw(
        st.lists(
            st.sampled_from(range(len(orders))), min_size=len(orders), max_size=len(orders) + 3
        )
    )
    placed = list(range(len(orders))) + placed[len(orders) :]  # each at least once
    return [orders[i] for i in placed], draw(st.permutations(range(len(placed))))


@CHECKS.add(
    2,
    "for any orders (any customer name, placed once or retried) and any delivery "
    "order with repeats: one message per order, and one email per order",
    timeout=40.0,
    severe=True,
)
def pipeline_on_generated_orders(ns: Namespace) -> None:
    def prop(example: tuple[list[list[Any]], list[int]]) -> None:
        placed, delivery = example
        unique = {o[0]: o for o in placed}
        with (
            lab_file(ns, outbox_db, "shop.db") as (shop, shop_path),
            lab_file(ns, consumer_db, "mail.db") as (mail, mail_path),
        ):
            for order in placed:
                place(ns, shop_path, order)
            outbox = rows_of(shop, "all_outbox")
            bodies = {r["message_id"]: r["body"] for r in outbox}
            want_ids = sorted(message_id(i) for i in unique)
            expect(
                sorted(bodies) == want_ids and len(outbox) == len(unique),
                _("one outbox row per order ({ids}) after placing {orders}").format(
                    ids=want_ids, orders=placed
                ),
                [r["message_id"] for r in outbox],
            )
            rows = sorted(outbox, key=lambda r: r["id"])
            for n in delivery:  # every message once, in a shuffled order, then again
                row = rows[n % len(rows)]
                for _n in range(2):
                    got = ns.harness(
                        HARNESS + "consume", str(mail_path), row["message_id"], row["body"], None
                    )
                    _raised(got, f"consume({row['message_id']!r}, ...)", _("read the error"))
            want = sorted((i, o[1]) for i, o in unique.items())
            expect(
                sorted(emails(mail)) == want,
                _("one email per order {emails}").format(emails=want),
                sorted(emails(mail)),
            )

    holds_for(order_streams(), prop, examples=15)
