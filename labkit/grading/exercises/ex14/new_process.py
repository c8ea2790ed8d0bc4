"""Exercise 14's jobs run in a new Python process whose str hashes differ.

A set of a policy's steps iterates in hash order, which the grading process's seed may
happen to make the policy's; in the new process (``SCRAMBLING_SEED``) it is not.
"""

from __future__ import annotations

import ast
from collections.abc import MutableMapping
from types import FunctionType
from typing import Any, cast
from unittest import mock

from labkit import queries
from labkit.grading.exercises.common import fresh_state
from labkit.grading.exercises.replay import CannotShip, call_in_fresh_process
from labkit.grading.stub import is_stub_text

#: The ``PYTHONHASHSEED`` of the new process ``run_in_a_new_process`` runs the jobs in:
#: there (CPython 3.11's SipHash) "reserve", "charge", "receipt" and "email" fall in four
#: different slots of a small set, in the order charge, receipt, email, reserve, so any
#: set built of a policy's steps lists them out of the policy's order, however it was
#: built (a set's order is its slots' when no two collide).
SCRAMBLING_SEED = 2


def _drive(schema: str, runs: list[Any]) -> dict[str, Any]:
    """In the new process: each ``(order, version)`` of ``runs`` through the student's
    ``run_order``, on one job database in memory made with ``schema`` and a world kept in
    memory (importing ``labkit.world`` there would cost more than the runs); what each
    run returned and the effects, in order, as ``(service, params)``."""
    import contextlib as _contextlib
    import sqlite3 as _sqlite3

    effects: list[Any] = []
    marks: dict[str, str] = {}

    class _Tx:
        def status(self, key: str) -> str | None:
            return marks.get(key)

        def mark(self, key: str, state: str = "done") -> None:
            marks[key] = state

        def post(self, account: str, amount: int, *, key: str) -> dict[str, Any]:
            effects.append(("ledger", {"account": account, "amount": amount}))
            return {"entry_id": f"le_{len(effects)}"}

    class _Ledger(_Tx):
        @_contextlib.contextmanager
        def transaction(self) -> Any:
            yield _Tx()

    class _Payments:
        def charge(self, customer: str, amount: int, currency: str = "BRL", **_keys: Any) -> Any:
            effects.append(("payments", {"customer": customer, "amount": amount}))
            return {"charge_id": f"ch_{len(effects)}", "amount": amount, "status": "succeeded"}

    class _Mail:
        def send(self, to: str, subject: str, body: str = "", **_keys: Any) -> Any:
            effects.append(("mail", {"to": to, "subject": subject}))
            return {"message_id": f"msg_{len(effects)}"}

    class _World:
        ledger, payments, mail = _Ledger(), _Payments(), _Mail()

    conn = _sqlite3.connect(":memory:", isolation_level=None)
    conn.executescript(schema)
    conn.row_factory = _sqlite3.Row
    ended = []
    for order, version in runs:
        try:
            ended.append(repr(run_order(conn, _World(), dict(order), policy_version=version)))  # type: ignore[name-defined]  # noqa: F821
        except Exception as exc:  # noqa: BLE001 - the student's error is the evidence
            ended.append(f"raised {type(exc).__name__}: {str(exc)[:120]}")
    return {"ended": ended, "effects": effects}


def run_in_a_new_process(values: MutableMapping[str, Any], runs: list[Any]) -> dict[str, Any]:
    """Each ``(order, version)`` of ``runs`` through ``run_order`` on a fresh job
    database (``labdb.steps_db``'s tables), in a new Python process whose str hashes
    differ (``SCRAMBLING_SEED``), as in a restarted worker, with a world in memory there
    (``_drive``).

    A set of steps iterates in hash order, which this process's seed may happen to make
    the policy's; there it is not. ``{"ended": [...], "effects": [(service, params)],
    "how": "process"}``; ``how`` says why not when the functions cannot be shipped
    (``check()`` in Jupyter, a closure) or the run failed there: then ``effects`` is None.
    """
    name = "_labkit_ex14_drive"
    # The student's namespace is a dict (the cells ran in it), as a function's globals must be.
    drive = FunctionType(_drive.__code__, cast(dict[str, Any], values), name)
    with fresh_state(values), mock.patch.dict(values, {name: drive}):
        try:
            [(said, text)] = call_in_fresh_process(
                values,
                name,
                [([queries.load("grading/exercises/labdb.sql")["steps_schema"], runs], {})],
                SCRAMBLING_SEED,
            )
        except CannotShip as exc:
            return {"ended": [], "effects": None, "how": str(exc)}
    if said != "returned":
        return {"ended": [text], "effects": None, "how": text}
    try:
        got: dict[str, Any] = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return {"ended": [text[:200]], "effects": None, "how": "an answer not understood"}
    for ended in got["ended"]:
        said, _sep, message = str(ended).partition(": ")
        if said == "raised NotImplementedError" and is_stub_text(message):
            raise NotImplementedError(message)  # the exercise stub: "not started yet"
    return {**got, "how": "process"}
