"""Harness for exercise 1: inputs longer than every cut the code writes, and a store that fails.

A key or a payload cut to a width (``key[:1024]``, the first 65,536 characters of the
JSON, a list's first 1000 items) keeps two operations apart only while they differ
before the cut: the checks ask ``ints_written_in`` for the numbers in the student's
code and build inputs just past the largest (``past_every_cut``), differing at their
end and in their middle (a cut that keeps a head and a tail loses the middle). The
long inputs are made here, in the student's process, and only short answers go back.

A ``seen`` that is a real store fails now and then (a dropped connection): an
``accept`` that takes any error of the store for "the key is not there" answers True,
and the work runs again at every redelivery (``accept_on_a_failing_store``).
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any, NoReturn

from labkit.errors import ConnectionLost
from labkit.grading.exercises.common import fresh_state, need, outcome

#: Longer than the widths a key or a payload is cut to (a 64 KiB column or buffer).
LONG_TEXT = 70_000
#: The largest number read as a cut to go past: a longer cut (four million characters)
#: is no plausible width, and the inputs would cost more than the check may.
LONGEST_CUT = 2**22
#: More items than a list is plausibly cut to, and the most a list is made of here.
MANY_ITEMS, MOST_ITEMS = 1_100, 100_000


def past_every_cut(written: list[int], floor: int = LONG_TEXT, ceiling: int = LONGEST_CUT) -> int:
    """A length past ``floor`` and past every number of ``written`` up to ``ceiling``."""
    return max([floor, *(n for n in written if n <= ceiling)]) + 2


def _long(length: int, mark: str, middle: bool) -> str:
    """``length`` characters of filler with ``mark`` at the end, or in the middle."""
    filler = "x" * (length - 1)
    half = len(filler) // 2
    return filler[:half] + mark + filler[half:] if middle else filler + mark


def _short(result: dict[str, Any]) -> dict[str, Any]:
    """An outcome with a long returned value cut for the channel (the long value is no
    part of the verdict, which is computed here)."""
    if isinstance(result.get("returned"), str) and len(result["returned"]) > 80:
        return {"returned": result["returned"][:60] + "..."}
    return result


def keys_of_long_intents(values: MutableMapping[str, Any], length: int) -> list[dict[str, Any]]:
    """``operation_key`` for two intents whose entity ids are ``length`` characters long
    and differ in one character only, at the end or in the middle. One row per pair:
    ``{"middle": bool, "same": whether the two keys are equal, "first", "second": the
    outcomes, long keys cut}``."""
    rows = []
    with fresh_state(values):
        key = need(values, "operation_key")
        for middle in (False, True):
            first, second = (
                outcome(key, "billing", _long(length, mark, middle), "charge") for mark in "12"
            )
            same = "returned" in first and first == second
            rows.append(
                {"middle": middle, "same": same, "first": _short(first), "second": _short(second)}
            )
    return rows


def accept_long_keys(values: MutableMapping[str, Any], length: int) -> list[dict[str, Any]]:
    """``accept`` on one empty ``seen`` for two keys with one payload, each key about
    ``length`` characters long, the two differing in one character, near the end or in
    the middle, in both orders. One row per pair: ``{"middle", "results", "kept"}``."""
    rows = []
    payload = {"amount_cents": 500}
    with fresh_state(values):
        accept = need(values, "accept")
        for middle in (False, True):
            a, b = (f"billing:{_long(length, mark, middle)}:charge:v1" for mark in "12")
            for first, second in ((a, b), (b, a)):
                seen: dict[str, Any] = {}
                results = [outcome(accept, seen, k, dict(payload)) for k in (first, second)]
                rows.append(
                    {"middle": middle, "results": [_short(r) for r in results], "kept": len(seen)}
                )
    return rows


def conflict_on_a_long_key(values: MutableMapping[str, Any], length: int) -> dict[str, Any]:
    """``accept`` for a key about ``length`` characters long, then for the same key with
    another payload. Whether the IdempotencyConflict's message (its first line, as a log
    shows it) holds the whole key is judged here: the channel carries 200 characters of
    a message. ``{"second": the second call's outcome, "whole": bool, "shown": the
    message's length, "key_length"}``."""
    key = f"erp:{_long(length, '7', False)}:sync-with-warehouse:v3"
    caught: list[Exception] = []
    with fresh_state(values):
        accept = need(values, "accept")
        seen: dict[str, Any] = {}
        outcome(accept, seen, key, {"amount_cents": 500})

        def conflicting() -> Any:
            try:
                return accept(seen, key, {"amount_cents": 600})
            except Exception as exc:
                caught.append(exc)
                raise

        second = outcome(conflicting)
    lines = str(caught[0]).strip().splitlines() if caught else []
    message = lines[0] if lines else ""
    return {
        "second": _short(second),
        "whole": key in message,
        "shown": len(message),
        "key_length": len(key),
    }


def accept_long_payloads(
    values: MutableMapping[str, Any], length: int, items: int
) -> list[dict[str, Any]]:
    """``accept`` for one key with a long payload, then with the same payload changed in
    one place: a text field of ``length`` characters changed at its end or in its middle,
    or a list of ``items`` numbers changed in its last item. One row per change:
    ``{"what": "end", "middle" or "last item", "first", "second": outcomes}``."""
    key = "billing:42:charge:v1"
    changes: list[tuple[str, Callable[[str], dict[str, Any]]]] = [
        ("end", lambda mark: {"note": _long(length, mark, False), "amount_cents": 500}),
        ("middle", lambda mark: {"note": _long(length, mark, True), "amount_cents": 500}),
        ("last item", lambda mark: {"lines": [*range(items - 1), int(mark)], "amount_cents": 500}),
    ]
    rows = []
    with fresh_state(values):
        accept = need(values, "accept")
        for what, make in changes:
            seen: dict[str, Any] = {}
            first = outcome(accept, seen, key, make("1"))
            second = outcome(accept, seen, key, make("2"))
            rows.append({"what": what, "first": _short(first), "second": _short(second)})
    return rows


def _down(*_args: Any, **_kwargs: Any) -> NoReturn:
    raise ConnectionLost("the connection to the store was lost (a test of accept)")


class UnreadableStore(dict):  # type: ignore[type-arg]
    """A ``seen`` whose reads fail (the read timed out, the connection dropped) while its
    writes go through: every read raises ``ConnectionLost``. It holds the key already
    (the work ran), which an ``accept`` that writes anyway overwrites."""

    __getitem__ = __contains__ = get = keys = items = values = __iter__ = __len__ = _down
    setdefault = pop = copy = _down


class UnwritableStore(dict):  # type: ignore[type-arg]
    """A ``seen`` that answers reads (it is empty) but whose writes raise ``ConnectionLost``:
    the connection dropped between the read and the write."""

    __setitem__ = setdefault = update = __ior__ = _down


def accept_on_a_failing_store(values: MutableMapping[str, Any], key: str) -> dict[str, Any]:
    """``accept`` for ``key`` on a store that cannot be read, then on one that cannot be
    written: ``{"unreadable": outcome, "unwritable": outcome}``."""
    payload = {"amount_cents": 1990}
    with fresh_state(values):
        accept = need(values, "accept")
        return {
            "unreadable": outcome(accept, UnreadableStore({key: "0" * 64}), key, dict(payload)),
            "unwritable": outcome(accept, UnwritableStore(), key, dict(payload)),
        }
