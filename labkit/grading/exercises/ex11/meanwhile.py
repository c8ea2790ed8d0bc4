"""What other connections commit while exercise 11's relay runs, and the runs that see it.

The shop saves another order (``save_order``, what a correct ``place_order`` commits)
while the relay waits for the broker; an operator re-drives rows the broker lost; a
slower writer commits a row whose id it took before the rows being published. Each
writes on a connection of its own, as another process would; a relay whose open
transaction holds the database keeps the writer out, and the write then lands after
the run. ``harness`` re-exports the scenes, which the checks call through it.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, MutableMapping
from typing import Any

from labkit.clock import FakeClock
from labkit.grading.exercises.common import fresh_state, outcome
from labkit.grading.exercises.ex11.caps import _run
from labkit.grading.exercises.labdb import connect
from labkit.grading.exercises.tracing import Watched
from labkit.patterns.outbox import Broker


def save_order(conn: Any, order: list[Any]) -> None:
    """What a correct ``place_order`` commits for ``order``: the row and its message."""
    order_id, customer, total = order
    body = json.dumps({"order_id": order_id, "customer": customer, "total": total})
    conn.execute(
        "INSERT INTO orders (id, customer, total) VALUES (?, ?, ?)", (order_id, customer, total)
    )
    conn.execute(
        "INSERT INTO outbox (message_id, topic, body) VALUES (?, 'order.placed', ?)",
        (f"order:{order_id}:placed:v1", body),
    )


def commit_aside(path: str, write: Callable[[sqlite3.Connection], object]) -> None:
    """``write`` committed on a connection of its own, as another process would; a
    relay whose open transaction holds the database makes it raise ``OperationalError``
    (locked) within 0.2 s."""
    other = sqlite3.connect(path, timeout=0.2, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        write(other)
        other.execute("COMMIT")
    finally:
        other.close()


class _Listed:
    """A broker that only lists the message ids it is given: a backlog of thousands of
    rows relayed in milliseconds."""

    def __init__(self) -> None:
        self.ids: list[str] = []

    def publish(self, topic: str, message_id: str, body: str) -> None:
        self.ids.append(message_id)

    def close(self) -> None:
        pass


def _writing_at_publish(
    broker: Broker | _Listed, nth: int, write: Callable[[], None]
) -> tuple[Callable[[str, str, str], None], dict[str, Any]]:
    """A ``publish`` to ``broker`` that runs ``write`` during its ``nth`` call, and the
    count it keeps: ``{"n": publishes, "fired": whether write committed then}`` (False
    when the relay's own transaction kept it out)."""
    calls: dict[str, Any] = {"n": 0, "fired": False}

    def publish(topic: str, message_id: str, body: str) -> None:
        calls["n"] += 1
        if calls["n"] == nth:
            try:
                write()
                calls["fired"] = True
            except sqlite3.OperationalError:  # locked by the relay's own transaction
                pass
        broker.publish(topic, message_id, body)

    return publish, calls


def relay_with_an_order_meanwhile(
    values: MutableMapping[str, Any],
    path: str,
    broker_path: str | None,
    now: float,
    nth: int,
    order: list[Any],
) -> dict[str, Any]:
    """``relay_once`` while another request saves ``order`` during the ``nth`` publish.

    The request commits on a connection of its own, as the shop's web process would,
    while the relay waits for the broker. A relay whose open transaction holds the
    database keeps it out: the order is then saved after the run (``fired`` is False),
    since it could not have slipped in. Without ``broker_path`` the broker only lists
    what it gets (``published``) and the shop's file is not synced at each commit, for
    a backlog of thousands of rows.
    """
    broker = _Listed() if broker_path is None else Broker(broker_path, FakeClock(now))

    def shop_request() -> None:
        commit_aside(path, lambda other: save_order(other, order))

    publish, calls = _writing_at_publish(broker, nth, shop_request)

    conn = connect(path)
    if broker_path is None:
        conn.execute("PRAGMA synchronous=OFF")
    try:
        got = _run(values, values["relay_once"], Watched(conn), publish, now)
    finally:
        conn.close()
        broker.close()
    if not calls["fired"]:
        shop_request()
    listed = {"published": broker.ids} if isinstance(broker, _Listed) else {}
    return {**got, "fired": calls["fired"], "publishes": calls["n"], **listed}


def relay_after_a_redrive(
    values: MutableMapping[str, Any], path: str, broker_path: str, now: float, again: list[str]
) -> dict[str, Any]:
    """``relay_once`` twice in ONE process, with rows made pending again in between.

    The first run publishes the backlog; then an operator sets ``sent_at = NULL`` on the
    rows of ``again`` (the broker lost them: re-drive), as another connection would;
    the second run, ``now + 5``, finds them pending. The student's module state lives on
    between the runs. Returns both runs' outcomes.
    """
    broker = Broker(broker_path, FakeClock(now))

    def publish(topic: str, message_id: str, body: str) -> None:
        broker.publish(topic, message_id, body)

    conn = connect(path)
    try:
        with fresh_state(values):
            first = outcome(values["relay_once"], Watched(conn), publish, now)
            operator = sqlite3.connect(path, isolation_level=None)
            try:
                operator.executemany(
                    "UPDATE outbox SET sent_at = NULL WHERE message_id = ?", [(m,) for m in again]
                )
            finally:
                operator.close()
            second = outcome(values["relay_once"], Watched(conn), publish, now + 5)
    finally:
        conn.close()
        broker.close()
    return {"first": first, "second": second}


def relay_with_a_write_behind_meanwhile(
    values: MutableMapping[str, Any],
    path: str,
    broker_path: str,
    now: float,
    nth: int,
    statements: list[list[Any]],
) -> dict[str, Any]:
    """``relay_once``, while another connection commits ``statements`` during the ``nth``
    publish, then ``relay_once`` again at ``now + 5`` in the same process.

    The statements make a row pending BELOW the rows the relay is publishing: an
    operator re-drives an old row the broker lost, or a slower writer commits a row
    whose id it took before the rows already published (ids committed out of order, as
    a sequence hands them out). The relay read its pending rows before, so that row is
    not its to mark; the next run publishes it. A relay whose open transaction holds the
    database keeps the writer out: the statements then commit after the first run
    (``fired`` is False). Both outcomes; the check reads the databases.
    """
    broker = Broker(broker_path, FakeClock(now))

    def writer() -> None:
        commit_aside(path, lambda other: [other.execute(sql, ps) for sql, ps in statements])

    publish, calls = _writing_at_publish(broker, nth, writer)

    conn = connect(path)
    try:
        with fresh_state(values):
            first = outcome(values["relay_once"], Watched(conn), publish, now)
            if not calls["fired"]:
                writer()
            marked = [
                row[0]
                for row in conn.execute("SELECT message_id FROM outbox WHERE sent_at = ?", (now,))
            ]
            second = outcome(values["relay_once"], Watched(conn), publish, now + 5)
    finally:
        conn.close()
        broker.close()
    return {"first": first, "second": second, "fired": calls["fired"], "marked": marked}
