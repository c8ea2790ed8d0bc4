"""Exercise 11: the transactional outbox, its relay, and a consumer that dedups by message id.

The student writes ``place_order`` (the order and its message in one transaction),
``relay_once`` (publish, then mark) and ``consume`` (the effect and the message id in
one transaction). Each check makes the databases in a folder under the student's
folder and runs the student's code through the harness
(``labkit.grading.exercises.ex11.harness``) on its own connections. The transaction
checks kill the student's process for real (``killsweep``) right after each write and
each COMMIT it sends, then retry or redeliver; the relay checks crash inside
``publish`` before or after the broker has the message, refuse it, or save another
order while it publishes; a few checks make several calls on one connection, as a
long-lived process does, so a transaction left open after an error shows. The check
then reads the shop's database, the broker's log and the consumer's database itself:
every order has exactly one message, no message is lost or marked sent unpublished,
and every order gets exactly one email however often its message arrives.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from random import Random
from typing import Any

from hypothesis import strategies as st

from labkit.clock import FakeClock
from labkit.grading.checks import CheckFailed, Checks, Namespace, expect
from labkit.grading.exercises.ex11.harness import save_order
from labkit.grading.exercises.helpers import holds_for, raised_error, raised_text
from labkit.grading.exercises.killsweep import after_every_kill, scene_seeds
from labkit.grading.exercises.kit import lab_file, reading
from labkit.grading.exercises.labdb import consumer_db, outbox_db, rows_of
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


@CHECKS.add(
    1,
    "publish every pending row (sent_at IS NULL) in id order, set sent_at = now after "
    "each, return the ids; a second run finds nothing pending",
)
def relay_publishes_and_marks(ns: Namespace) -> None:
    with lab_file(ns, outbox_db, "shop.db") as (conn, path):
        seed_outbox(conn, ORDERS)
        broker = path.parent / "broker.db"
        got = relay(ns, path, broker)
        want = [message_id(o[0]) for o in ORDERS]
        expect(
            got.get("returned") == want,
            _("relay_once to return {ids}").format(ids=want),
            got.get("returned"),
        )
        expect(
            broker_log(broker) == want,
            _("the broker's log to be {ids}").format(ids=want),
            broker_log(broker),
        )
        sent = [r["sent_at"] for r in rows_of(conn, "all_outbox")]
        expect(sent == [NOW] * 3, _("every row's sent_at = {now:g}").format(now=NOW), sent)
        again = relay(ns, path, broker, now=NOW + 5)
        expect(again.get("returned") == [], "[] from the second run", again.get("returned"))
        expect(len(broker_log(broker)) == 3, "still 3 messages on the broker", broker_log(broker))
        # The relay's clock stepped back (NTP, or another host's relay ran ahead): rows
        # marked "later" than now are sent all the same. Pending is sent_at IS NULL only.
        back = relay(ns, path, broker, now=NOW - 30)
        expect(
            back.get("returned") == [] and len(broker_log(broker)) == 3,
            _(
                "[] from a third run at now={now:g} (the clock stepped back), and still 3 "
                "messages on the broker"
            ).format(now=NOW - 30),
            _("it returned {value}; the broker has {log}").format(
                value=repr(back.get("returned")), log=broker_log(broker)
            ),
            _(
                "pending is sent_at IS NULL, nothing else: a row marked sent at a time past "
                "now is sent, never compare sent_at with now"
            ),
        )


@CHECKS.add(
    3,
    "publish first, then mark sent: a relay that marks first and dies while publishing "
    "has lost the message for good; one that dies after publishing and before marking "
    "only publishes it again (the consumer drops the repeat)",
    severe=True,
)
def relay_never_loses_a_message(ns: Namespace) -> None:
    want = [message_id(o[0]) for o in ORDERS]
    for fault in ("crash_before_publish", "crash_after_publish"):
        with lab_file(ns, outbox_db, "shop.db") as (conn, path):
            seed_outbox(conn, ORDERS)
            broker = path.parent / "broker.db"
            got = relay(ns, path, broker, fault, nth=2)
            _raised(
                got, "relay_once(conn, publish, now)", _("try relay_once with a list as broker")
            )
            moment = {
                "crash_before_publish": _("crash before publish"),
                "crash_after_publish": _("crash after publish"),
            }[fault]
            what = _("{moment} of message 2").format(moment=moment)
            expect(
                got["fired"],
                _("a {fault} to fire").format(fault=what),
                _("{count} publish call(s)").format(count=got["publishes"]),
            )
            relay(ns, path, broker, now=NOW + 5)
            log = broker_log(broker)
            expect(
                set(log) == set(want),
                _("every message on the broker after a {fault} and a second run").format(
                    fault=what
                ),
                _("the broker has {log}").format(log=log),
            )
            pending = [r["message_id"] for r in rows_of(conn, "all_outbox") if not r["sent_at"]]
            expect(not pending, "every row marked sent after the second run", pending)


@CHECKS.add(
    2,
    "when publish raises, leave that row pending and let the error out: the messages "
    "after it wait for the next run, in order",
)
def relay_stops_when_the_broker_is_down(ns: Namespace) -> None:
    with lab_file(ns, outbox_db, "shop.db") as (conn, path):
        seed_outbox(conn, ORDERS)
        broker = path.parent / "broker.db"
        got = relay(ns, path, broker, "broker_down", nth=2)
        expect(
            got["fired"],
            "the broker to refuse message 2",
            _("{count} publish call(s)").format(count=got["publishes"]),
        )
        rows = {r["message_id"]: r["sent_at"] for r in rows_of(conn, "all_outbox")}
        expect(
            rows[message_id(2)] is None and rows[message_id(3)] is None,
            "messages 2 and 3 still pending (sent_at NULL)",
            rows,
        )
        expect(
            broker_log(broker) == [message_id(1)],
            "only message 1 on the broker: message 3 must not overtake message 2",
            broker_log(broker),
        )
        # The relay's connection lives on: a transaction left open keeps every later run
        # from BEGIN, and the shop's place_order from writing ("database is locked").
        expect(
            not got.get("left_open"),
            "relay_once's connection out of any transaction after publish raised "
            "(ROLLBACK or COMMIT before the error leaves)",
            _("a transaction still open on it"),
        )
        expect(
            rows[message_id(1)] == NOW,
            _(
                "message 1, published before the broker went down, marked sent "
                "(sent_at = {now:g}) right after its publish, not at the end of the run"
            ).format(now=NOW),
            rows,
        )


@CHECKS.add(
    1,
    "when publish raises, relay_once raises too (no try/except around publish that "
    "returns, or re-raise): its caller must learn that the broker is down, to back off "
    "and alert instead of reporting a quiet run",
)
def relay_lets_the_broker_error_out(ns: Namespace) -> None:
    with lab_file(ns, outbox_db, "shop.db") as (conn, path):
        seed_outbox(conn, ORDERS)
        broker = path.parent / "broker.db"
        got = relay(ns, path, broker, "broker_down", nth=2)
        expect(
            got["fired"],
            "the broker to refuse message 2",
            _("{count} publish call(s)").format(count=got["publishes"]),
        )
        pending = [r["message_id"] for r in rows_of(conn, "all_outbox") if r["sent_at"] is None]
        expect(
            "raised" in got,
            "relay_once to raise when the broker refuses message 2 (ConnectionError)",
            _("it returned {value}; the broker has {log}, pending {pending}").format(
                value=repr(got.get("returned")), log=broker_log(broker), pending=pending
            ),
        )
        # The broker's own error, not one of the relay's: a wrapper (raise RuntimeError(...)
        # from exc) hides from the caller that the broker is down, and its retry policy.
        expect(
            "ConnectionError" in got["raised"],
            "relay_once to raise the broker's ConnectionError itself when the broker "
            "refuses message 2",
            _("it raised {error}").format(error=raised_error(got)),
            _("let publish's exception out as it is (a bare raise), never wrap it in another"),
        )
    # The broker down from the first message on: nothing published is no quiet run either.
    with lab_file(ns, outbox_db, "shop.db") as (conn, path):
        seed_outbox(conn, ORDERS)
        broker = path.parent / "broker.db"
        got = relay(ns, path, broker, "broker_down", nth=1)
        expect(
            "ConnectionError" in got.get("raised", []),
            "relay_once to raise the broker's ConnectionError when the broker refuses "
            "message 1, the first of the run",
            _("it {outcome}; the broker has {log}").format(
                outcome=did(got), log=broker_log(broker)
            ),
            _("raise publish's error whether or not a message went out before it"),
        )


@CHECKS.add(
    2,
    "mark each row by its id right after publishing it (UPDATE outbox SET sent_at = :now "
    "WHERE id = :id): one UPDATE of every pending row at the end also marks an order the "
    "shop saved while the relay was publishing, and nobody ever publishes it",
    severe=True,
)
def relay_marks_only_the_rows_it_published(ns: Namespace) -> None:
    for seed in scene_seeds():
        _only_the_rows_published(ns, Random(seed))


def _only_the_rows_published(ns: Namespace, rng: Random) -> None:
    count = rng.randint(2, 6)
    orders = [[i, f"cliente {i}", rng.randint(0, 10**5)] for i in range(1, count + 1)]
    nth = rng.randint(1, count)
    extra = [count + rng.randint(1, 90), "dora", 700]
    scene = _("order {order_id} placed while the relay published message {nth} of {count}").format(
        order_id=extra[0], nth=nth, count=count
    )
    with lab_file(ns, outbox_db, "shop.db") as (conn, path):
        seed_outbox(conn, orders)
        broker = path.parent / "broker.db"
        got = ns.harness(
            HARNESS + "relay_with_an_order_meanwhile", str(path), str(broker), NOW, nth, extra
        )
        _raised(got, "relay_once(conn, publish, now)", _("try relay_once with a list as broker"))
        log = broker_log(broker)
        unpublished = [
            f"{r['message_id']} (sent_at {r['sent_at']:g})"
            for r in rows_of(conn, "all_outbox")
            if r["sent_at"] is not None and r["message_id"] not in log
        ]
        expect(
            not unpublished,
            _("only rows the broker has marked sent, after a run with {scene}").format(scene=scene),
            _("marked sent but never published: {rows}; the broker has {log}").format(
                rows=", ".join(unpublished), log=log
            ),
        )
        relay(ns, path, broker, now=NOW + 5)
        log = broker_log(broker)
        missing = [
            r["message_id"] for r in rows_of(conn, "all_outbox") if r["message_id"] not in log
        ]
        expect(
            not missing,
            _("every message on the broker after a run with {scene}, and a second run").format(
                scene=scene
            ),
            _("never published: {missing}; the broker has {log}").format(missing=missing, log=log),
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
