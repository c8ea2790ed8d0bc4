"""Outbox: row and message in one transaction; relay at-least-once; consumer dedup by id."""

from __future__ import annotations

import sqlite3

import pytest

from labkit.clock import FakeClock
from labkit.errors import IdempotencyConflict, LabkitError, PayloadError, SimulatedCrash
from labkit.faults import FaultPlan
from labkit.patterns import outbox
from labkit.patterns.outbox import AFTER_PUBLISH, Broker, Consumer, Relay

SEED = 11


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def shop(tmp_path):
    conn = outbox.connect(tmp_path / "shop.db")
    conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER NOT NULL)")
    outbox.install(conn)
    return conn


@pytest.fixture
def broker(tmp_path, clock):
    return Broker(tmp_path / "broker.db", clock)


def place_order(conn, clock, order_id, total, fail=False):
    with outbox.transaction(conn, clock) as tx:
        tx.execute("INSERT INTO orders (id, total) VALUES (:id, :total)",
                   {"id": order_id, "total": total})
        tx.publish("order.placed", {"order_id": order_id, "total": total},
                   message_id=f"order:{order_id}:placed:v1")
        if fail:
            raise RuntimeError("the request handler failed after both writes")


def make_consumer(tmp_path, broker, clock, faults=None):
    conn = outbox.connect(tmp_path / "billing.db")
    conn.execute("CREATE TABLE IF NOT EXISTS invoices (order_id INTEGER, total INTEGER)")

    def bill(tx: sqlite3.Connection, message: outbox.Message) -> None:
        tx.execute("INSERT INTO invoices VALUES (:order_id, :total)", message.body)

    return Consumer(conn, broker, "order.placed", bill, clock, name="billing", faults=faults)


def invoices(consumer):
    rows = consumer.conn.execute("SELECT order_id, total FROM invoices ORDER BY rowid")
    return [tuple(r) for r in rows]


def test_row_and_message_commit_together(shop, clock):
    place_order(shop, clock, 1, 100)
    assert shop.execute("SELECT count(*) FROM orders").fetchone()[0] == 1
    assert [r["message_id"] for r in outbox.pending(shop)] == ["order:1:placed:v1"]


def test_a_failed_transaction_leaves_neither_row_nor_message(shop, clock):
    with pytest.raises(RuntimeError):
        place_order(shop, clock, 2, 50, fail=True)
    assert shop.execute("SELECT count(*) FROM orders").fetchone()[0] == 0
    assert outbox.rows(shop) == []


def test_the_same_message_id_is_one_message_and_another_body_is_a_conflict(shop, clock):
    with outbox.transaction(shop, clock) as tx:
        assert tx.publish("t", {"a": 1}, message_id="m1") is True
        assert tx.publish("t", {"a": 1}, message_id="m1") is False
    with pytest.raises(IdempotencyConflict):
        with outbox.transaction(shop, clock) as tx:
            tx.publish("t", {"a": 2}, message_id="m1")
    assert len(outbox.rows(shop)) == 1


def test_secrets_are_refused_in_messages(shop, clock):
    with pytest.raises(PayloadError, match="credential"):
        with outbox.transaction(shop, clock) as tx:
            tx.publish("t", {"password": "hunter2"}, message_id="m")


def test_an_open_transaction_is_refused_with_a_reason(shop, clock):
    shop.execute("BEGIN")
    with pytest.raises(LabkitError, match="already has an open transaction"):
        with outbox.transaction(shop, clock):
            pass
    shop.execute("ROLLBACK")


def test_relay_publishes_and_marks_sent_and_the_consumer_applies_once(
    tmp_path, shop, broker, clock
):
    for n in (1, 2):
        place_order(shop, clock, n, n * 10)
    assert Relay(shop, broker, clock).run_once() == ["order:1:placed:v1", "order:2:placed:v1"]
    assert outbox.pending(shop) == []
    assert Relay(shop, broker, clock).run_once() == []  # nothing left to send
    consumer = make_consumer(tmp_path, broker, clock)
    result = consumer.poll()
    assert result.processed == ["order:1:placed:v1", "order:2:placed:v1"]
    assert result.duplicates == []
    assert invoices(consumer) == [(1, 10), (2, 20)]
    assert consumer.poll().processed == []  # the position moved past them


def test_crash_after_publish_before_mark_duplicates_and_the_consumer_absorbs_it(
    tmp_path, shop, broker, clock
):
    place_order(shop, clock, 7, 70)
    plan = FaultPlan(seed=SEED).at(AFTER_PUBLISH, "crash", nth=1)
    print("replay:", plan.replay())
    with pytest.raises(SimulatedCrash):
        Relay(shop, broker, clock, faults=plan).run_once()
    assert plan.fired_at(AFTER_PUBLISH, "crash"), "the crash must have fired"
    # The broker has the message; the outbox still says pending.
    assert broker.count("order:7:placed:v1") == 1
    assert [r["message_id"] for r in outbox.pending(shop)] == ["order:7:placed:v1"]
    # The restarted relay publishes it again: a duplicate on the broker.
    assert Relay(shop, broker, clock, faults=plan).run_once() == ["order:7:placed:v1"]
    assert broker.count("order:7:placed:v1") == 2
    assert outbox.rows(shop)[0]["publishes"] == 2
    consumer = make_consumer(tmp_path, broker, clock)
    result = consumer.poll()
    assert result.processed == ["order:7:placed:v1"]
    assert result.duplicates == ["order:7:placed:v1"]  # absorbed
    assert invoices(consumer) == [(7, 70)]  # billed once


def test_consumer_crash_before_commit_rolls_back_effect_and_dedup_record(
    tmp_path, shop, broker, clock
):
    place_order(shop, clock, 3, 30)
    Relay(shop, broker, clock).run_once()
    plan = FaultPlan(seed=SEED).at(outbox.BEFORE_CONSUMER_COMMIT, "crash", nth=1)
    print("replay:", plan.replay())
    consumer = make_consumer(tmp_path, broker, clock, faults=plan)
    with pytest.raises(SimulatedCrash):
        consumer.poll()
    assert plan.fired_at(outbox.BEFORE_CONSUMER_COMMIT)
    assert invoices(consumer) == [] and consumer.position() == 0
    assert consumer.poll().processed == ["order:3:placed:v1"]  # the retry applies it, once
    assert invoices(consumer) == [(3, 30)]
