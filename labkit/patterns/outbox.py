"""The transactional outbox: a business write and its message commit together, or neither.

Writing a row and then publishing a message is two systems and no transaction: crash
in between and the message is lost; publish first and crash, and the message talks
about a row that never existed. The outbox writes the message into a table of the same
database, in the same transaction as the business row::

    outbox.install(conn)
    with outbox.transaction(conn, clock) as tx:
        tx.execute("INSERT INTO orders (id, total) VALUES (:id, :total)", order)
        tx.publish("order.placed", {"order_id": 42}, message_id="order:42:placed:v1")

A ``Relay`` then reads pending rows, publishes each to the ``Broker`` and marks it sent.
If it crashes after publishing and before marking, the next run publishes the message
again: the outbox gives at-least-once delivery, never exactly-once. So the ``Consumer``
removes duplicates by message id, recording each id in its own ``processed_messages``
table in the same transaction as its effect.

``Broker`` is a minimal durable log in SQLite written for this lab (``labkit.world``
has no broker): publishing appends, consumers read from a position they keep
themselves, much like a Redis Stream or a Kafka topic (lesson 13 runs the queue itself on
Redis Streams).
In production, Debezium reads the outbox from the database log (change data capture)
instead of polling; Django and Rails projects use libraries such as
``django-outbox-pattern``, and the consumer side is the same dedup table.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labkit import dbfile, queries
from labkit.clock import Clock
from labkit.errors import IdempotencyConflict
from labkit.faults import FaultPlan
from labkit.keys import check_payload

SQL = queries.load("patterns/outbox.sql")
#: Fired by the Relay after the broker has a message and before the row is marked sent.
AFTER_PUBLISH = "relay_after_publish"
#: Fired by the Consumer after its effect and before its transaction commits.
BEFORE_CONSUMER_COMMIT = "consumer_before_commit"


def connect(path: str | Path) -> sqlite3.Connection:
    """A connection the outbox helpers can drive: autocommit mode, WAL, rows by name."""
    return dbfile.connect(path, check_same_thread=True)


def _immediate(conn: sqlite3.Connection) -> AbstractContextManager[Any]:
    return dbfile.own_transaction(
        conn, "the outbox transaction holds exactly your business write and its message"
    )


def install(conn: sqlite3.Connection) -> None:
    """Create the outbox table in the business database (safe to call every time)."""
    with _immediate(conn):
        dbfile.run_script(conn, SQL["outbox_schema"])


@dataclass(frozen=True)
class Message:
    """A message as the broker delivers it: its position, topic, id and decoded body."""

    seq: int
    topic: str
    message_id: str
    body: Any
    published_at: float


class OutboxTx:
    """The business transaction: run its SQL with ``execute`` and add messages with ``publish``."""

    def __init__(self, conn: sqlite3.Connection, clock: Clock) -> None:
        self.conn = conn
        self.clock = clock
        self.published: list[str] = []

    def execute(self, sql: str, params: Mapping[str, Any] | Sequence[Any] = ()) -> sqlite3.Cursor:
        """Run one statement of the business write in this transaction."""
        return self.conn.execute(sql, params)

    def publish(self, topic: str, body: Any, *, message_id: str) -> bool:
        """Add a message to the outbox in this transaction; False if that id is already there.

        ``message_id`` must name the fact, not the attempt (``order:42:placed:v1``), so a
        retried transaction cannot create a second message and the consumer can spot a
        redelivery. The same id with a different body raises ``IdempotencyConflict``.
        """
        if not topic:
            raise ValueError("publish needs a topic, e.g. 'order.placed'")
        if not message_id:
            raise ValueError("publish needs a message_id naming the fact: 'order:42:placed:v1'")
        text = check_payload(body)
        row = self.conn.execute(
            SQL["outbox_insert"],
            {"message_id": message_id, "topic": topic, "body": text, "now": self.clock.now()},
        ).fetchone()
        if row is not None:
            self.published.append(message_id)
            return True
        existing = self.conn.execute(
            SQL["outbox_by_message_id"], {"message_id": message_id}
        ).fetchone()
        if existing["body"] != text or existing["topic"] != topic:
            raise IdempotencyConflict(
                f"message id {message_id!r} is already in the outbox with another topic or "
                "body; a message id must always carry the same message"
            )
        return False


@contextmanager
def transaction(conn: sqlite3.Connection, clock: Clock) -> Iterator[OutboxTx]:
    """One ``BEGIN IMMEDIATE`` transaction holding the business write and its messages.

    Commits when the block ends, rolls everything back (row and messages) if it raises.
    ``conn`` must have no transaction open; ``outbox.connect(path)`` gives a suitable one.
    """
    with _immediate(conn):
        yield OutboxTx(conn, clock)


def pending(conn: sqlite3.Connection, limit: int = 1000) -> list[dict[str, Any]]:
    """Outbox rows not yet marked sent, oldest first."""
    return [dict(r) for r in conn.execute(SQL["outbox_pending"], {"limit": limit})]


def rows(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """Every outbox row (sent or not), for tables in lessons."""
    return [dict(r) for r in conn.execute(SQL["outbox_all"])]


class Broker:
    """A durable append-only log per topic, in its own SQLite file.

    It stores every publish, duplicates included, exactly as a real broker would: it
    does not know that two publishes are the same message. Consumers keep their own
    position (``read(topic, after=seq)``).
    """

    def __init__(self, path: str | Path, clock: Clock) -> None:
        self.path = Path(path)
        self.clock = clock
        self.conn = connect(self.path)
        with _immediate(self.conn):
            dbfile.run_script(self.conn, SQL["broker_schema"])

    def publish(self, topic: str, message_id: str, body: str) -> int:
        """Append a message (``body`` is JSON text) and return its position."""
        params = {"topic": topic, "message_id": message_id, "body": body, "now": self.clock.now()}
        with _immediate(self.conn):
            return int(self.conn.execute(SQL["broker_append"], params).fetchone()[0])

    def read(self, topic: str, after: int = 0, limit: int = 100) -> list[Message]:
        """Messages of ``topic`` after position ``after``, in order."""
        params = {"topic": topic, "after": after, "limit": limit}
        return [
            Message(r["seq"], r["topic"], r["message_id"], json.loads(r["body"]), r["published_at"])
            for r in self.conn.execute(SQL["broker_read"], params)
        ]

    def count(self, message_id: str) -> int:
        """How many times ``message_id`` was published (2 means a duplicate publish)."""
        return int(self.conn.execute(SQL["broker_count"], {"message_id": message_id}).fetchone()[0])

    def close(self) -> None:
        self.conn.close()


class Relay:
    """Moves pending outbox messages to the broker, marking each sent after publishing.

    ``faults`` (a ``FaultPlan``) is hit at ``relay_after_publish`` for each message, the
    window where a crash leaves a published message unmarked.
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        broker: Broker,
        clock: Clock,
        faults: FaultPlan | None = None,
    ) -> None:
        self.conn = conn
        self.broker = broker
        self.clock = clock
        self.faults = faults

    def run_once(self, limit: int = 100) -> list[str]:
        """Publish up to ``limit`` pending messages; return their ids in publish order."""
        sent: list[str] = []
        for row in pending(self.conn, limit):
            with _immediate(self.conn):
                self.conn.execute(SQL["outbox_count_publish"], {"id": row["id"]})
            self.broker.publish(row["topic"], row["message_id"], row["body"])
            if self.faults is not None:
                self.faults.hit(AFTER_PUBLISH, key=row["message_id"], clock=self.clock)
            params = {"id": row["id"], "now": self.clock.now()}
            with _immediate(self.conn):
                self.conn.execute(SQL["outbox_mark_sent"], params)
            sent.append(row["message_id"])
        return sent


Handler = Callable[[sqlite3.Connection, Message], None]


@dataclass(frozen=True)
class PollResult:
    """What one ``Consumer.poll`` did: ids it applied, and ids it dropped as duplicates."""

    processed: list[str]
    duplicates: list[str]


class Consumer:
    """Reads a topic and applies each message once, whatever the broker redelivers.

    ``handler(conn, message)`` does the effect with ``conn``, inside the same transaction
    that records the message id in ``processed_messages`` and advances the read
    position: the effect, the dedup record and the position commit together.
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        broker: Broker,
        topic: str,
        handler: Handler,
        clock: Clock,
        name: str = "consumer",
        faults: FaultPlan | None = None,
    ) -> None:
        self.conn = conn
        self.broker = broker
        self.topic = topic
        self.handler = handler
        self.clock = clock
        self.name = name
        self.faults = faults
        with _immediate(conn):
            dbfile.run_script(conn, SQL["consumer_schema"])

    def position(self) -> int:
        """The broker position this consumer has processed up to."""
        params = {"consumer": self.name, "topic": self.topic}
        return int(self.conn.execute(SQL["consumer_offset"], params).fetchone()[0])

    def poll(self, limit: int = 100) -> PollResult:
        """Handle up to ``limit`` new messages, one transaction each."""
        processed: list[str] = []
        duplicates: list[str] = []
        for message in self.broker.read(self.topic, after=self.position(), limit=limit):
            params = {
                "consumer": self.name,
                "topic": self.topic,
                "message_id": message.message_id,
                "seq": message.seq,
                "now": self.clock.now(),
            }
            with _immediate(self.conn):
                fresh = self.conn.execute(SQL["consumer_mark_processed"], params).fetchone()
                if fresh is not None:
                    self.handler(self.conn, message)
                if self.faults is not None:
                    self.faults.hit(
                        BEFORE_CONSUMER_COMMIT, key=message.message_id, clock=self.clock
                    )
                self.conn.execute(SQL["consumer_advance"], params)
            (processed if fresh is not None else duplicates).append(message.message_id)
        return PollResult(processed, duplicates)
