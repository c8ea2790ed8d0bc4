"""Hidden checks for exercise 11: names JSON must escape, and two consumer processes at once."""

from __future__ import annotations

import json

from labkit.grading.exercises.kit import lab_file
from labkit.grading.exercises.ex11.checks import HARNESS, ORDERS, emails, message_id, place
from labkit.grading.checks import Checks, Namespace, expect
from labkit.grading.exercises.labdb import consumer_db, outbox_db, rows_of

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
            body = f"not JSON ({exc})"
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
            "your code raised " + "; ".join(raised) if raised else f"{got['hung']} still running",
        )
        expect(
            sorted(emails(conn)) == [(o, c) for o, c, _ in ORDERS],
            "one email per order",
            emails(conn),
        )
