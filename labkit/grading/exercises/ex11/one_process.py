"""Exercise 11's student code called several times in ONE process, as a long-lived
shop, relay or consumer runs it: the module's state lives on between the calls.

On several databases in turn (two tenants, or one rebuilt in its place), so what a
call remembers from the last must come from the database it is given; a relay run
again after a refused publish; a consumer fed a thousand messages on one connection,
then redeliveries. ``harness`` re-exports the scenes, which the checks call through it.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, MutableMapping
from typing import Any

from labkit.clock import FakeClock
from labkit.grading.exercises.common import fresh_state, outcome
from labkit.grading.exercises.ex11.meanwhile import commit_aside, save_order
from labkit.grading.exercises.labdb import connect
from labkit.grading.exercises.tracing import Watched, with_what_it_left
from labkit.patterns.outbox import Broker


def _rebuilt(path: str) -> None:
    """Every table of ``path`` emptied, as a database rebuilt (or restored) in its place."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        conn.execute("BEGIN IMMEDIATE")
        for table in tables:
            conn.execute(f'DELETE FROM "{table}"')
        conn.execute("COMMIT")
    finally:
        conn.close()


def _in_each_database(
    values: MutableMapping[str, Any],
    name: str,
    paths: list[str],
    args: list[Any],
    args_each: list[list[Any]] | None = None,
) -> list[dict[str, Any]]:
    """``name(conn, *args)`` once on each of ``paths``, in ONE process.

    A path given again is that database rebuilt in between (its tables emptied, at
    the same path). The student's module state lives on between the calls. With
    ``args_each``, the call on the i-th path gets ``args_each[i]`` instead of ``args``.
    """
    got: list[dict[str, Any]] = []
    seen: set[str] = set()
    with fresh_state(values):
        for i, path in enumerate(paths):
            if path in seen:
                _rebuilt(path)
            seen.add(path)
            conn = connect(path)
            try:
                call_args = args if args_each is None else args_each[i]
                got.append(outcome(values[name], Watched(conn), *call_args))
            finally:
                conn.close()
    return got


def consume_in_each_database(
    values: MutableMapping[str, Any], paths: list[str], message_id: str, body: str
) -> list[dict[str, Any]]:
    """``consume(conn, message_id, body)`` once on each of ``paths``, in ONE process.

    Two consumers' databases (two mail services, or the consumer's database rebuilt):
    what was applied is what each database records, so the message is new to each.
    A path given again is that database rebuilt in between. Returns each outcome.
    """
    return _in_each_database(values, "consume", paths, [message_id, body])


def place_in_each_database(
    values: MutableMapping[str, Any],
    paths: list[str],
    order: list[Any],
    orders: list[list[Any]] | None = None,
) -> list[dict[str, Any]]:
    """``place_order(conn, *order)`` once on each of ``paths``, in ONE process.

    Two shops' databases (two tenants, or the shop's database rebuilt): whether the
    order exists is what each database records, so it is new to each. A path given
    again is that database rebuilt in between. With ``orders``, the i-th path gets
    ``orders[i]`` (one order id, each tenant's own customer and total). Returns each
    outcome.
    """
    each = None if orders is None else [list(o) for o in orders]
    return _in_each_database(values, "place_order", paths, list(order), each)


def relay_in_each_database(
    values: MutableMapping[str, Any], paths: list[str], now: float, refuse: int = 0
) -> dict[str, Any]:
    """``relay_once(conn, publish, now)`` once on each of ``paths``, in ONE process.

    Two shops' databases (two tenants), each relayed on its own connection, closed
    after its run: a relay that keeps the first connection it was given (in a module
    global) reads the first shop again, or a closed connection. ``runs`` is each
    outcome, ``published`` the message ids each run's own ``publish`` was handed.

    With ``refuse``, the broker refuses the ``refuse``-th publish of the first run
    (``ConnectionError``, not listed in ``published``): a relay that keeps the rows it
    had left in module state publishes them in the second shop's run, and marks that
    shop's rows of the same ids sent. ``bodies`` is the body each run's ``publish`` was
    handed with each id: a body kept by message id (in module state) from the first shop
    carries that shop's order into the second shop's message of the same id.
    """
    published: list[list[str]] = []
    bodies: list[list[Any]] = []

    def publisher(run: int) -> Callable[[str, str, str], None]:
        """Each shop's run gets its own publish (its own broker): a relay that keeps the
        first publish it was given (in a module global) sends the second shop's messages
        to the first shop's broker, and they never reach their own."""

        def publish(topic: str, message_id: str, body: str) -> None:
            if run == 0 and len(published[0]) + 1 == refuse:
                raise ConnectionError("the broker refused the connection")
            published[run].append(message_id)
            bodies[run].append(body)

        return publish

    runs: list[dict[str, Any]] = []
    with fresh_state(values):
        for run, path in enumerate(paths):
            published.append([])
            bodies.append([])
            conn = connect(path)
            conn.execute("PRAGMA synchronous=OFF")
            try:
                runs.append(outcome(values["relay_once"], Watched(conn), publisher(run), now))
            finally:
                conn.close()
    return {"runs": runs, "published": published, "bodies": bodies}


def relay_again_in_one_process(
    values: MutableMapping[str, Any], path: str, broker_path: str, now: float, nth: int
) -> dict[str, Any]:
    """``relay_once`` twice in ONE process, as a long-lived relay runs it.

    The broker refuses the ``nth`` publish of the first run (``ConnectionError``) and
    takes everything in the second, ``now + 5``; the student's module state lives on
    between the two runs, so a message remembered as published before the broker had it
    shows. Returns both runs' outcomes.
    """
    broker = Broker(broker_path, FakeClock(now))
    calls = {"n": 0}

    def publish(topic: str, message_id: str, body: str) -> None:
        calls["n"] += 1
        if calls["n"] == nth:
            raise ConnectionError("the broker refused the connection")
        broker.publish(topic, message_id, body)

    conn = connect(path)
    try:
        with fresh_state(values):
            first = outcome(values["relay_once"], Watched(conn), publish, now)
            second = outcome(values["relay_once"], Watched(conn), publish, now + 5)
    finally:
        conn.close()
        broker.close()
    return {"first": first, "second": second}


def consume_many_then_again(
    values: MutableMapping[str, Any], path: str, first: int, count: int, again: list[list[str]]
) -> dict[str, Any]:
    """``consume`` of the messages of orders ``first`` to ``first + count - 1`` on ONE
    connection, as a long-lived consumer receives them, then each of ``again`` (a message
    id and its body: a redelivery, after an outage or a replay).

    The consumer's database is not synced at each of the student's commits
    (``synchronous=OFF``, this connection only): a thousand messages cost a tenth of a
    second. ``applied`` counts the new messages applied (True), ``other`` is the first
    one that was not (its outcome and order id), ``again`` the redeliveries' outcomes.
    """
    conn = connect(path)
    conn.execute("PRAGMA synchronous=OFF")
    applied, other = 0, None
    try:
        with fresh_state(values):
            kept = Watched(conn)  # one connection object, as a long-lived consumer keeps it
            for order_id in range(first, first + count):
                body = json.dumps({"order_id": order_id, "customer": f"c{order_id}", "total": 1})
                got = outcome(values["consume"], kept, f"order:{order_id}:placed:v1", body)
                if got.get("returned") is not True:
                    other = {**got, "order_id": order_id}
                    break
                applied += 1
            redelivered = [outcome(values["consume"], kept, *call) for call in again]
    finally:
        conn.close()
    return {"applied": applied, "other": other, "again": redelivered}


def relay_an_empty_outbox_then_again(
    values: MutableMapping[str, Any], path: str, broker_path: str, now: float
) -> dict[str, Any]:
    """``relay_once`` on ONE connection while nothing is pending, then again, ``now + 5``,
    after another process saved an order (order 5, committed on a connection of its own).

    A run that found nothing to publish and left its transaction open (a ``BEGIN`` ended
    only on the path that publishes) spoils the long-lived relay's connection: its next
    run cannot begin, or reads the old snapshot and misses the new order. Returns both
    runs' outcomes (with ``left``) and ``aside``: the error the other process's commit
    raised, if any.
    """
    broker = Broker(broker_path, FakeClock(now))
    conn = connect(path)
    aside = None
    try:
        with fresh_state(values):
            kept = Watched(conn)
            first = with_what_it_left(
                outcome(values["relay_once"], kept, broker.publish, now), conn
            )
            try:
                commit_aside(path, lambda other: save_order(other, [5, "eva", 900]))
            except sqlite3.Error as exc:
                aside = f"{type(exc).__name__}: {exc}"
            second = with_what_it_left(
                outcome(values["relay_once"], kept, broker.publish, now + 5), conn
            )
    finally:
        conn.close()
        broker.close()
    return {"first": first, "second": second, "aside": aside}
