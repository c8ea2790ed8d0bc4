"""Exercise 11's checks of ``relay_once``: publish, then mark; a crash before or after
the broker has the message loses none, a broker that is down or refuses stops the
relay with its error, and only the rows it published are marked, even when an order is
saved while it publishes."""

from __future__ import annotations

from pathlib import Path
from random import Random
from typing import Any

from labkit.grading.checks import Namespace, expect
from labkit.grading.exercises.ex11.outbox import (
    CHECKS,
    HARNESS,
    NOW,
    ORDERS,
    _raised,
    broker_log,
    did,
    message_id,
    relay,
    seed_outbox,
)
from labkit.grading.exercises.helpers import raised_error
from labkit.grading.exercises.killsweep import scene_seeds
from labkit.grading.exercises.kit import lab_file
from labkit.grading.exercises.labdb import outbox_db, rows_of
from labkit.lang import _


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


def _relayed_with_the_broker_down_at_2(
    ns: Namespace, conn: Any, path: Path
) -> tuple[Path, dict[str, Any]]:
    """The scene's orders relayed to a broker that refuses message 2: the broker's file
    and the run's outcome, once the refusal is seen to have fired."""
    seed_outbox(conn, ORDERS)
    broker = path.parent / "broker.db"
    got = relay(ns, path, broker, "broker_down", nth=2)
    expect(
        got["fired"],
        "the broker to refuse message 2",
        _("{count} publish call(s)").format(count=got["publishes"]),
    )
    return broker, got


@CHECKS.add(
    2,
    "when publish raises, leave that row pending and let the error out: the messages "
    "after it wait for the next run, in order",
)
def relay_stops_when_the_broker_is_down(ns: Namespace) -> None:
    with lab_file(ns, outbox_db, "shop.db") as (conn, path):
        broker, got = _relayed_with_the_broker_down_at_2(ns, conn, path)
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
        broker, got = _relayed_with_the_broker_down_at_2(ns, conn, path)
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
