"""Harness for exercise 11: the student's outbox code on files the check made, crashed on purpose.

Each function opens its own connection to the file the check names, wrapped in
``Watched`` (which can crash right after the n-th write statement, as a killed process
stops there), and closes it afterwards without committing, so whatever the student's
code left uncommitted is rolled back as it would be after a real crash. The relay's
``publish`` appends to a ``labkit.patterns.outbox.Broker`` file and can crash before the broker
has the message, crash after it, raise ``ConnectionError`` (the broker is down),
``TimeoutError`` (no confirm came, and the broker never got the message) or the broker
client's own ``BrokerRejectedError`` (it answered, and refused the message); or
the shop can save another order while the relay publishes. Each returns whether the
fault fired and an outcome; the check reads the databases.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, MutableMapping
from pathlib import Path
from typing import Any

from labkit.clock import FakeClock
from labkit.errors import SimulatedCrash
from labkit.grading.exercises.common import begin_refused_once as begin_refused_once
from labkit.grading.exercises.common import fresh_state, outcome
from labkit.grading.exercises.common import interrupted_then_again as interrupted_then_again
from labkit.grading.exercises.common import on_one_connection as on_one_connection  # checks call it
from labkit.grading.exercises.ex11.caps import SCALE_ABOVE as SCALE_ABOVE
from labkit.grading.exercises.ex11.caps import SCALED_CAP as SCALED_CAP
from labkit.grading.exercises.ex11.caps import _ints_written_in as _ints_written_in
from labkit.grading.exercises.ex11.caps import _run
from labkit.grading.exercises.ex11.caps import relay_into_a_list as relay_into_a_list
from labkit.grading.exercises.killsweep import sweep
from labkit.grading.exercises.labdb import connect
from labkit.grading.exercises.racers import in_processes
from labkit.grading.exercises.tracing import Impatient, Watched
from labkit.patterns.outbox import Broker

FAULTS = (
    "crash_before_publish",
    "crash_after_publish",
    "broker_down",
    "broker_timeout",
    "broker_rejects",
)


class BrokerRejectedError(Exception):
    """A broker client's own error (not a ``ConnectionError``): the broker answered, and
    refused the message ("503 Service Unavailable", "message too large")."""


def place_order(
    values: MutableMapping[str, Any], path: str, order: list[Any], crash_after: int | None
) -> dict[str, Any]:
    """``place_order(conn, *order)``, crashing after write ``crash_after`` (None: never)."""
    conn = connect(path)
    watched = Watched(conn, crash_after=crash_after)
    try:
        got = _run(values, values["place_order"], watched, *order)
    finally:
        conn.close()
    return {**got, "fired": watched.crashed, "writes": watched.writes}


def consume(
    values: MutableMapping[str, Any],
    path: str,
    message_id: str,
    body: str,
    crash_after: int | None,
) -> dict[str, Any]:
    """``consume(conn, message_id, body)``, crashing after write ``crash_after``."""
    conn = connect(path)
    watched = Watched(conn, crash_after=crash_after)
    try:
        got = _run(values, values["consume"], watched, message_id, body)
    finally:
        conn.close()
    return {**got, "fired": watched.crashed, "writes": watched.writes}


def relay_once(
    values: MutableMapping[str, Any],
    path: str,
    broker_path: str,
    now: float,
    fault: str | None,
    nth: int,
) -> dict[str, Any]:
    """``relay_once(conn, publish, now)`` with ``fault`` on the ``nth`` publish call."""
    if fault is not None and fault not in FAULTS:
        raise ValueError(f"fault must be one of {FAULTS}, not {fault!r}")
    broker = Broker(broker_path, FakeClock(now))
    calls = {"n": 0, "fired": False}
    conn = connect(path)
    watched = Watched(conn)  # killed by a crash in publish: see tracing

    def publish(topic: str, message_id: str, body: str) -> None:
        calls["n"] += 1
        hit = fault is not None and calls["n"] == nth
        if hit and fault == "broker_down":
            calls["fired"] = True
            raise ConnectionError("the broker refused the connection")
        if hit and fault == "broker_timeout":
            calls["fired"] = True  # no confirm came: the broker never got it
            raise TimeoutError("no confirm from the broker within 5 s")
        if hit and fault == "broker_rejects":
            calls["fired"] = True  # the broker answered no: it does not have the message
            raise BrokerRejectedError("the broker rejected the message: 503 Service Unavailable")
        if hit and fault == "crash_before_publish":
            calls["fired"] = True
            watched.kill()
            raise SimulatedCrash("crashed while publishing, before the broker had it")
        broker.publish(topic, message_id, body)
        if hit and fault == "crash_after_publish":
            calls["fired"] = True
            watched.kill()
            raise SimulatedCrash("crashed after the broker had it, before marking")

    try:
        got = _run(values, values["relay_once"], watched, publish, now)
        left_open = conn.in_transaction  # a long-lived relay connection would keep it
    finally:
        conn.close()
        broker.close()
    return {**got, "fired": calls["fired"], "publishes": calls["n"], "left_open": left_open}


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


def _commit_aside(path: str, write: Callable[[sqlite3.Connection], object]) -> None:
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
        _commit_aside(path, lambda other: save_order(other, order))

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


def consume_in_processes(
    values: MutableMapping[str, Any], path: str, messages: list[list[str]], pause: float
) -> dict[str, Any]:
    """Two forked consumers each receive every message (a redelivery to another process).

    Their plain reads pause, so a consumer that checks in one statement and records in
    another lets both apply the same message. Returns ``in_processes``' result.
    """

    def consumer(index: int) -> list[Any]:
        conn = connect(path)
        watched = Watched(conn, pause=pause)
        try:
            return [values["consume"](watched, mid, body) for mid, body in messages]
        finally:
            conn.close()

    return in_processes(consumer, 2)


def place_in_processes(
    values: MutableMapping[str, Any], path: str, order: list[Any], pause: float
) -> dict[str, Any]:
    """Two forked shop processes place the same ``order`` at once (a retried request).

    Their plain reads pause, so a place_order that looks for the order before its
    transaction and inserts inside it has both see nothing. ``in_processes``' result.
    """

    def shop(index: int) -> Any:
        conn = connect(path)
        try:
            return values["place_order"](Watched(conn, pause=pause), *order)
        finally:
            conn.close()

    return in_processes(shop, 2)


def _call(values: MutableMapping[str, Any], name: str, path: Path, *args: Any) -> Any:
    """The student's ``name(conn, *args)`` on its own connection, closed without a commit."""
    conn = connect(path)
    try:
        return values[name](conn, *args)
    finally:
        conn.close()


def place_order_kills(
    values: MutableMapping[str, Any], folder: str, order: list[Any], seed: int
) -> dict[str, Any]:
    """``place_order`` killed right after each of its writes in ``folder/shop.db``'s copies.

    After each kill the request is retried (``place_order`` again, as the shop's caller
    would). See ``killsweep.sweep``.
    """

    def once(life: Path, _tracer: Any) -> Any:
        return _call(values, "place_order", life / "shop.db", *order)

    return sweep(folder, ["shop.db"], once, once, seed)


def consume_kills(
    values: MutableMapping[str, Any], folder: str, message_id: str, body: str, seed: int
) -> dict[str, Any]:
    """``consume`` killed right after each of its writes in ``folder/mail.db``'s copies.

    After each kill the broker redelivers (``consume`` again with the same message).
    """

    def once(life: Path, _tracer: Any) -> Any:
        return _call(values, "consume", life / "mail.db", message_id, body)

    return sweep(folder, ["mail.db"], once, once, seed)


def place_order_kills_unretried(
    values: MutableMapping[str, Any], folder: str, order: list[Any], seed: int
) -> dict[str, Any]:
    """``place_order`` killed right after each of its writes, and never retried.

    The customer gave up (closed the tab): nobody places the order again, so what the
    kill left in ``folder/shop.db``'s copy is what the relay will publish. The restart
    does nothing. See ``killsweep.sweep``.
    """

    def once(life: Path, _tracer: Any) -> Any:
        return _call(values, "place_order", life / "shop.db", *order)

    def nobody(_life: Path, _tracer: Any) -> None:
        return None

    return sweep(folder, ["shop.db"], once, nobody, seed)


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


def call_while_locked(
    values: MutableMapping[str, Any], name: str, path: str, args: list[Any]
) -> dict[str, Any]:
    """``name(conn, *args)`` while another process holds the write lock, then again freed.

    Another connection holds ``BEGIN IMMEDIATE`` on ``path`` and the student's connection
    waits 0.05 s for it (a busy timeout that runs out, as a slow writer makes it; one the
    code sets is set back to that, see ``tracing.Impatient``), so
    its ``BEGIN IMMEDIATE`` raises "database is locked". Then the lock is released and
    the same call runs on a fresh connection. Returns both outcomes.
    """
    blocker = sqlite3.connect(path, isolation_level=None)
    try:
        blocker.execute("BEGIN IMMEDIATE")
        conn = sqlite3.connect(path, timeout=0.05, isolation_level=None)
        conn.row_factory = sqlite3.Row
        try:
            with fresh_state(values):
                locked = outcome(values[name], Impatient(conn), *args)
        finally:
            conn.close()
        blocker.execute("ROLLBACK")
    finally:
        blocker.close()
    conn = connect(path)
    try:
        with fresh_state(values):
            freed = outcome(values[name], Watched(conn), *args)
    finally:
        conn.close()
    return {"locked": locked, "freed": freed}


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
    shop's rows of the same ids sent.
    """
    published: list[list[str]] = []

    def publisher(run: int) -> Callable[[str, str, str], None]:
        """Each shop's run gets its own publish (its own broker): a relay that keeps the
        first publish it was given (in a module global) sends the second shop's messages
        to the first shop's broker, and they never reach their own."""

        def publish(topic: str, message_id: str, body: str) -> None:
            if run == 0 and len(published[0]) + 1 == refuse:
                raise ConnectionError("the broker refused the connection")
            published[run].append(message_id)

        return publish

    runs: list[dict[str, Any]] = []
    with fresh_state(values):
        for run, path in enumerate(paths):
            published.append([])
            conn = connect(path)
            conn.execute("PRAGMA synchronous=OFF")
            try:
                runs.append(outcome(values["relay_once"], Watched(conn), publisher(run), now))
            finally:
                conn.close()
    return {"runs": runs, "published": published}


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
        _commit_aside(path, lambda other: [other.execute(sql, ps) for sql, ps in statements])

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
