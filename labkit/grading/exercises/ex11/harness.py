"""Harness for exercise 11: the student's outbox code on files the check made, crashed on purpose.

Each function opens its own connection to the file the check names, wrapped in
``Watched`` (which can crash right after the n-th write statement, as a killed process
stops there), and closes it afterwards without committing, so whatever the student's
code left uncommitted is rolled back as it would be after a real crash. The relay's
``publish`` appends to a ``labkit.patterns.outbox.Broker`` file and can crash before the broker
has the message, crash after it, raise ``ConnectionError`` (the broker is down),
``TimeoutError`` (no confirm came, and the broker never got the message) or the broker
client's own ``BrokerRejectedError`` (it answered, and refused the message); or
the shop can save another order while the relay publishes (``meanwhile``). Each returns
whether the fault fired and an outcome; the check reads the databases. ``one_process``
calls the student's code several times in one process, as a long-lived one runs it.
The checks call every scene through this module.
"""

from __future__ import annotations

import sqlite3
from collections.abc import MutableMapping
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
from labkit.grading.exercises.ex11.meanwhile import relay_after_a_redrive as relay_after_a_redrive
from labkit.grading.exercises.ex11.meanwhile import (
    relay_with_a_write_behind_meanwhile as relay_with_a_write_behind_meanwhile,
)
from labkit.grading.exercises.ex11.meanwhile import (
    relay_with_an_order_meanwhile as relay_with_an_order_meanwhile,
)
from labkit.grading.exercises.ex11.meanwhile import save_order as save_order
from labkit.grading.exercises.ex11.one_process import (
    consume_in_each_database as consume_in_each_database,
)
from labkit.grading.exercises.ex11.one_process import (
    consume_many_then_again as consume_many_then_again,
)
from labkit.grading.exercises.ex11.one_process import (
    place_in_each_database as place_in_each_database,
)
from labkit.grading.exercises.ex11.one_process import (
    relay_again_in_one_process as relay_again_in_one_process,
)
from labkit.grading.exercises.ex11.one_process import (
    relay_an_empty_outbox_then_again as relay_an_empty_outbox_then_again,
)
from labkit.grading.exercises.ex11.one_process import (
    relay_in_each_database as relay_in_each_database,
)
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
