"""Harness for exercise 1: keys computed later, in other processes, and ``accept`` runs.

``operation_key`` must not depend on the wall clock nor on the process; ``accept``
mutates the ``seen`` dict it is given, so the harness owns that dict and returns it.
"""

from __future__ import annotations

import builtins
from collections.abc import MutableMapping
from typing import Any
from unittest import mock

from labkit.grading.exercises.common import fresh_state, need, outcome, plain
from labkit.grading.exercises.replay import CannotShip, call_in_fresh_process
from labkit.grading.exercises.wallclock import clock_moved

#: Two hash seeds far apart: a hash()-built key differs between them.
HASH_SEEDS = (1, 4242)


def keys_later(
    values: MutableMapping[str, Any], calls: list[list[Any]], seconds: float
) -> list[Any]:
    """``operation_key(*args)`` for each call while the wall clock reads ``seconds`` later."""
    with fresh_state(values), clock_moved(values, seconds):
        return [plain(need(values, "operation_key")(*args)) for args in calls]


def keys_in_processes(values: MutableMapping[str, Any], calls: list[list[Any]]) -> dict[str, Any]:
    """The keys for ``calls`` here and in one new process per hash seed.

    ``{"how": "processes", "here": [...], "seeds": {seed: [...]}}``, values as reprs. When
    the function cannot be shipped (a closure, an unpicklable global), the harness
    swaps ``hash`` for a salted one in this process instead: ``"how": "salted hash()"``.
    """
    with fresh_state(values):
        here = [repr(need(values, "operation_key")(*args)) for args in calls]
        try:
            seeds = {
                str(seed): [
                    text if how == "returned" else f"raised {text}"
                    for how, text in call_in_fresh_process(
                        values, "operation_key", [(list(a), {}) for a in calls], seed
                    )
                ]
                for seed in HASH_SEEDS
            }
            return {"how": "processes", "here": here, "seeds": seeds}
        except CannotShip as exc:
            salted = {"hash": lambda obj: builtins.hash((0x5EED, obj))}
            with mock.patch.dict(values, salted):
                other = [repr(need(values, "operation_key")(*args)) for args in calls]
            return {"how": f"salted hash() ({exc})", "here": here, "seeds": {"salted": other}}


def accept_calls(
    values: MutableMapping[str, Any],
    calls: list[list[Any]],
    seen_before: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Run ``accept(seen, key, payload)`` for each ``[key, payload]`` on one ``seen``.

    ``seen`` starts empty, or as ``seen_before`` (key -> fingerprint, as a store kept it).
    ``{"results": [outcome...], "seen": {...}}``: each outcome is ``{"returned": x}`` or
    ``{"raised": [class names], "message": ...}``; ``seen`` as it was after the last call.
    """
    seen: dict[str, Any] = dict(seen_before or {})
    with fresh_state(values):
        results = [outcome(need(values, "accept"), seen, key, payload) for key, payload in calls]
    return {"results": results, "seen": {str(k): repr(v) for k, v in seen.items()}}
