"""Hidden checks for exercise 11: names JSON must escape, two consumer processes at once,
hundreds of pending rows in id order, and a message the consumer cannot apply."""

from __future__ import annotations

import json
from random import Random

from labkit.grading.checks import Checks, Namespace, expect
from labkit.grading.exercises.ex11.checks import (
    HARNESS,
    ORDERS,
    broker_log,
    consistent,
    did,
    emails,
    message_id,
    place,
    relay,
    seed_outbox,
)
from labkit.grading.exercises.killsweep import scene_seeds
from labkit.grading.exercises.kit import lab_file
from labkit.grading.exercises.labdb import consumer_db, outbox_db, rows_of
from labkit.lang import _

CHECKS = Checks("ex11", hidden=True)


@CHECKS.add(
    1,
    "build the body with json.dumps, never with an f-string: a customer called "
    'Zé "Tuca" d\'Ávila must survive the trip',
)
def body_is_json_for_any_name(ns: Namespace) -> None:
    name = 'Zé "Tuca" d\'Ávila\\'
    with lab_file(ns, outbox_db, "shop.db") as (conn, path):
        place(ns, path, [123456789, name, 0])
        [row] = rows_of(conn, "all_outbox")
        try:
            body = json.loads(row["body"])
        except ValueError as exc:
            body = _("not JSON ({error})").format(error=exc)
        expect(
            body == {"order_id": 123456789, "customer": name, "total": 0},
            "the order as JSON, the name intact",
            body,
        )


@CHECKS.add(
    2,
    "two consumer processes receive the same messages at the same moment: the id and "
    "the email commit in one BEGIN IMMEDIATE transaction, or both send the email",
    timeout=40.0,
    severe=True,
)
def two_consumer_processes_send_each_email_once(ns: Namespace) -> None:
    messages = [
        [message_id(o), json.dumps({"order_id": o, "customer": c, "total": t})]
        for o, c, t in ORDERS
    ]
    with lab_file(ns, consumer_db, "mail.db") as (conn, path):
        got = ns.harness(HARNESS + "consume_in_processes", str(path), messages, 0.05)
        raised = [v[1] for v in got["results"].values() if v[0] == "raised"]
        expect(
            not raised and got["hung"] == 0,
            "both consumers to finish",
            _("your code raised {errors}").format(errors="; ".join(raised))
            if raised
            else _("{count} still running").format(count=got["hung"]),
        )
        expect(
            sorted(emails(conn)) == [(o, c) for o, c, _total in ORDERS],
            "one email per order",
            emails(conn),
        )


@CHECKS.add(
    1,
    "two shop processes place the same order at once (a retried request): decide inside "
    "the transaction (INSERT ... ON CONFLICT (id) DO NOTHING after BEGIN IMMEDIATE), not "
    "with a SELECT before it, or the second one fails on the primary key instead of "
    "returning False",
    timeout=40.0,
)
def two_shop_processes_place_the_same_order(ns: Namespace) -> None:
    order = [7, "ana", 4200]
    with lab_file(ns, outbox_db, "shop.db") as (conn, path):
        got = ns.harness(HARNESS + "place_in_processes", str(path), order, 0.05)
        results = list(got["results"].values())
        raised = [v[1] for v in results if v[0] == "raised"]
        expect(
            not raised and got["hung"] == 0,
            "both place_order(7, 'ana', 4200) calls to return (True once, False once)",
            _("your code raised {errors}").format(errors="; ".join(raised))
            if raised
            else _("{count} still running").format(count=got["hung"]),
        )
        returned = sorted(repr(v[1]) for v in results)
        ok, seen = consistent(conn)
        expect(
            returned == ["False", "True"] and ok and len(rows_of(conn, "all_outbox")) == 1,
            "True once and False once, one order and one message",
            _("returned {returned}; {seen}").format(returned=", ".join(returned), seen=seen),
        )


@CHECKS.add(
    2,
    "publish EVERY pending row, by outbox id (the order they were saved in): no LIMIT "
    "on the run, no ORDER BY message_id (as text, 'order:10:...' sorts before "
    "'order:9:...'), and rows already sent are not published again",
    timeout=40.0,
)
def relay_publishes_every_pending_row_oldest_first(ns: Namespace) -> None:
    for seed in scene_seeds():
        _relay_publishes_every_pending_row_oldest_first_in(ns, Random(seed))


def _relay_publishes_every_pending_row_oldest_first_in(ns: Namespace, rng: Random) -> None:
    count = rng.randint(150, 260)
    ids = rng.sample(range(1, 20000), count)  # saved in no particular order of id
    orders = [[i, f"c{i}", rng.randint(0, 10**6)] for i in ids]
    sent = set(rng.sample(ids, count // 10))
    with lab_file(ns, outbox_db, "shop.db") as (conn, path):
        seed_outbox(conn, orders)
        conn.executemany(
            "UPDATE outbox SET sent_at = 50 WHERE message_id = ?", [(message_id(i),) for i in sent]
        )
        broker = path.parent / "broker.db"
        relay(ns, path, broker)
        want = [message_id(i) for i in ids if i not in sent]
        log = broker_log(broker)
        first = next((n for n, (a, b) in enumerate(zip(log, want, strict=False)) if a != b), None)
        if first is None and len(log) != len(want):
            first = min(len(log), len(want))
        expect(
            first is None,
            _(
                "the broker to get all {pending} pending messages of {count} rows, by outbox id"
            ).format(pending=len(want), count=count),
            _(
                "it got {count}; the first difference at position {position}: {got_message} "
                "where {due_message} was due"
            ).format(
                count=len(log),
                position=first,
                got_message=log[first] if first is not None and first < len(log) else _("nothing"),
                due_message=(
                    want[first] if first is not None and first < len(want) else _("nothing")
                ),
            ),
        )


@CHECKS.add(
    2,
    "a message consume cannot apply (its email INSERT fails: customer null) rolls back "
    "with its id: the consumer's long-lived connection must stay usable for the next "
    "messages, and the failed id stays unrecorded, so a fixed redelivery applies it",
    severe=True,
)
def consume_rolls_back_a_message_it_cannot_apply(ns: Namespace) -> None:
    poison = [message_id(5), json.dumps({"order_id": 5, "customer": None, "total": 1})]
    calls = [poison] + [
        [message_id(o), json.dumps({"order_id": o, "customer": c, "total": t})]
        for o, c, t in ORDERS[:2]
    ]
    with lab_file(ns, consumer_db, "mail.db") as (conn, path):
        got = ns.harness(HARNESS + "on_one_connection", "consume", str(path), calls)
        held = sorted(r[0] for r in conn.execute("SELECT message_id FROM processed_messages"))
        said = "; ".join(f"{mid}: {did(g)}" for (mid, _body), g in zip(calls, got, strict=True))
        expect(
            emails(conn) == [(1, "ana"), (2, "bia")] and len(held) == 2 and poison[0] not in held,
            _(
                "after {message_id} failed, orders 1 and 2 applied on the same connection "
                "(emails [(1, 'ana'), (2, 'bia')]), and only their 2 ids in processed_messages"
            ).format(message_id=message_id(5)),
            _("emails {emails}, processed_messages {held} ({calls})").format(
                emails=emails(conn), held=held, calls=said
            ),
        )
