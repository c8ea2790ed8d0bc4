"""Harness for exercise 1: a bound on ``seen`` counted in calls or in keys, met cheaply.

A store bounded by its size (``len(seen)``, ``sys.getsizeof``) meets the bound at once
in a store that counts years of keys (``harness.VastStore``). A bound counted elsewhere
does not: a counter of calls that clears ``seen`` every 100,000 calls, a deque or an
LRU of the last N keys that deletes the oldest from ``seen``. Such a bound is a number
written in the student's code: ``ints_written_in`` reads them (the walk shared with the
other exercises, ``constants``, reaching into objects), and ``accept_past_calls``
calls ``accept`` just past the largest, each call as cheap as the harness can make it.
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Iterator, MutableMapping
from typing import Any
from unittest import mock

from labkit.grading.exercises.common import fresh_state, need, outcome
from labkit.grading.exercises.constants import whole_numbers_in


def ints_written_in(values: MutableMapping[str, Any], names: list[str]) -> list[int]:
    """The whole numbers written in the notebook's functions ``names`` and in what they
    name of the notebook (its constants, helpers, closures, classes and objects, a deque's
    ``maxlen``, an lru_cache's ``maxsize``: ``_recent = Window(65_536)``), without their
    sign, sorted (``constants.whole_numbers_in``)."""
    glob = values if isinstance(values, dict) else dict(values)
    found = whole_numbers_in((values.get(name) for name in names), objects=True, namespace=glob)
    return sorted({*found, *_numbers_written_as_text(values.get(name) for name in names)})


def _numbers_written_as_text(functions: Any) -> set[int]:
    """Whole numbers written as text in the code of ``functions`` and of the notebook's
    functions they name: a bound read as ``int(os.environ.get("DEDUP_CLEAR_EVERY",
    "200000"))`` at every call is the text '200000' in the code, not a number."""
    found: set[int] = set()
    walked: set[int] = set()

    def walk(code: Any, glob: Any) -> None:
        if id(code) in walked:
            return
        walked.add(id(code))
        for const in code.co_consts:
            if hasattr(const, "co_consts"):
                walk(const, glob)
            elif isinstance(const, str) and 0 < len(const) <= 24:
                with contextlib.suppress(ValueError, OverflowError):
                    number = float(const.replace("_", ""))
                    if number.is_integer() and abs(number) < 2**53:
                        found.add(int(abs(number)))
        for name in code.co_names:
            named = glob.get(name) if isinstance(glob, dict) else None
            inner = getattr(named, "__code__", None)
            if inner is not None and getattr(named, "__globals__", None) is glob:
                walk(inner, glob)

    for fn in functions:
        code = getattr(fn, "__code__", None)
        if code is not None:
            with contextlib.suppress(Exception):
                walk(code, getattr(fn, "__globals__", None))
    return found


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    """No cycle collection inside the block: 100,000 new keys and more would set off full
    collections that walk the store again and again (seconds, not a fraction of one)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


#: The key ``accept_past_calls`` asks about again at the end, and its payload.
FIRST, PAYLOAD = "billing:0:charge:v1", {"invoice": 0, "amount_cents": 1990}


def accept_past_calls(
    values: MutableMapping[str, Any], calls: int, seconds: float, new_keys: bool = True
) -> dict[str, Any] | None:
    """``accept`` for a first key, then for ``calls`` new keys (or, ``new_keys`` false,
    ``calls`` times for one other key: a bound counted in calls only, met sooner), then
    the first key again.

    Each call is made cheap: the new keys share one payload, whose fingerprint
    ``payload_fingerprint`` answers at once (the value it computed for it, the same
    object), and no cycle collection walks the growing store. ``{"first", "repeat":
    outcome, "first_kept": whether the first key was still in seen before the retry,
    "calls": how many calls, "spent": their CPU seconds on a quiet machine}``, or None
    when the calls would take (or took) more than ``seconds`` of CPU on a quiet machine
    (``_slowness``): an accept slow on each call pays no more than that for a number it
    holds for another reason.
    """
    seen: dict[str, Any] = {}
    shared: dict[str, Any] = {"amount_cents": 1}
    with fresh_state(values):
        accept = need(values, "accept")
        first = outcome(accept, seen, FIRST, dict(PAYLOAD))
        real: Any = values.get("payload_fingerprint")
        patch: dict[str, Any] = {}
        try:
            known = real(shared) if callable(real) else None
        except Exception:  # noqa: BLE001 - no stand-in: accept calls the student's own
            known = None
        if known is not None:

            def payload_fingerprint(payload: Any) -> Any:
                return known if payload is shared else real(payload)

            # Under every name the notebook gave it (``_fp = payload_fingerprint``).
            patch.update(
                (name, payload_fingerprint) for name, value in values.items() if value is real
            )
        slower = _slowness()
        started = time.process_time()
        with mock.patch.dict(values, patch), _no_gc():
            done = 0
            while done < calls:
                for n in range(done, min(calls, done + _BLOCK)):
                    try:
                        accept(seen, f"fill:{n}" if new_keys else "fill:again", shared)
                    except Exception:  # noqa: BLE001, S110 - judged by the first key's retry
                        pass
                done = min(calls, done + _BLOCK)
                spent = time.process_time() - started
                if spent > seconds * slower or spent / done * calls > seconds * slower * 1.5:
                    slower = max(slower, _slowness())  # the machine got busier meanwhile?
                    if spent > seconds * slower or spent / done * calls > seconds * slower * 1.5:
                        return None
            kept = FIRST in seen
            repeat = outcome(accept, seen, FIRST, dict(PAYLOAD))
    spent = (time.process_time() - started) / slower
    return {"first": first, "repeat": repeat, "first_kept": kept, "calls": done, "spent": spent}


#: What a call of a Python function that does nothing costs (with its loop) on a quiet
#: machine, in CPU seconds: the yardstick of ``_slowness``.
_QUIET_CALL = 60e-9


def _nothing(value: Any) -> Any:
    return value


def _slowness() -> float:
    """How many times slower than a quiet machine this process runs Python now (1 at
    least): on a busy machine (shared cores and caches) the same calls take more CPU
    seconds, and the budget of ``accept_past_calls`` grows in the same ratio, so what it
    reaches does not depend on the load."""
    best = float("inf")
    for _ in range(3):
        began = time.process_time()
        for _ in range(2_048):
            _nothing(None)
        best = min(best, (time.process_time() - began) / 2_048)
    return max(1.0, best / _QUIET_CALL)


#: How many calls ``accept_past_calls`` makes between two looks at the CPU time it spent.
_BLOCK = 8_192
