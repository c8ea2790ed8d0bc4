"""Every argument a job store takes, checked once, in one place, for every backend.

A value that slips past these checks does not fail loudly later: ``lease_s=nan`` leaves
a job ``running`` forever once its worker dies (no lease ever expires), ``run_after=inf``
is a job that never runs, ``max_attempts=True`` is silently 1, ``2**70`` overflows the
driver, a NUL byte is fine for SQLite and an error for PostgreSQL. So each operation of
``labkit.store.base.StoreBase`` (and the ``Worker`` and the ``labkit`` command) passes its
arguments through these functions before anything touches the database; each raises
``ValueError`` (``PayloadError`` for payloads) naming the argument, what it got and what
it wants, and nothing has been written.

In production a validation library does this at the edge (pydantic's ``FiniteFloat`` and
``conint``, attrs validators); labkit writes the few rules it needs by hand.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from labkit.errors import PayloadError

#: The longest duration a store accepts (leases, snoozes, ages): ten years, in seconds.
MAX_SECONDS = 10 * 365 * 24 * 3600.0
#: Timestamps (``run_after``) must lie within this many seconds of the epoch (year ~5000).
MAX_TIMESTAMP = 1e11
#: The largest count (attempts, limits): PostgreSQL's INTEGER.
MAX_COUNT = 2**31 - 1
#: Job ids are 64-bit.
MAX_ID = 2**63 - 1
#: How deep a payload may nest; JSON this deep is a bug, and deeper crashes the encoder.
MAX_DEPTH = 64
#: The longest name (kind, key, queue, worker): a key names an operation, it does not hold one.
MAX_NAME_CHARS = 1024


def _number(name: str, value: Any) -> float:
    # bool is an int in Python; True as a lease or a count is always a mistake.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a number of seconds, not {value!r}")
    try:
        number = float(value)
    except OverflowError:
        raise ValueError(f"{name} is far out of range ({value!r})") from None
    if not math.isfinite(number):
        raise ValueError(
            f"{name} must be a finite number, not {value!r}: a job with a NaN or infinite "
            "time would never run or never come back after a crash"
        )
    return number


def seconds(name: str, value: Any, *, allow_zero: bool = False) -> float:
    """A duration: finite, positive (or zero with ``allow_zero``), at most ten years."""
    number = _number(name, value)
    if number < 0 or (number == 0 and not allow_zero):
        wanted = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be {wanted} seconds, not {value!r}")
    if number > MAX_SECONDS:
        raise ValueError(
            f"{name} must be at most {MAX_SECONDS:.0f} seconds (ten years), not {value!r}"
        )
    return number


def timestamp(name: str, value: Any) -> float:
    """A point in clock time (seconds since the epoch): finite and within reach."""
    number = _number(name, value)
    if abs(number) > MAX_TIMESTAMP:
        raise ValueError(
            f"{name} must be a clock time in seconds (like clock.now() + 60), not {value!r}"
        )
    return number


def count(name: str, value: Any, *, minimum: int = 1, maximum: int = MAX_COUNT) -> int:
    """A whole number in ``[minimum, maximum]``; ``True`` is not 1."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be a whole number, not {value!r}")
    if not minimum <= value <= maximum:
        raise ValueError(f"{name} must be between {minimum} and {maximum}, not {value!r}")
    return value


def job_id(value: Any) -> int:
    """A job id: a whole number (whether such a job exists is the store's question)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"job_id must be a whole number, not {value!r}")
    return value


def in_id_range(value: int) -> bool:
    """Whether ``value`` can be a job id at all (larger ones overflow the drivers)."""
    return 0 < value <= MAX_ID


def name(arg: str, value: Any, *, optional: bool = False) -> str | None:
    """A name (kind, key, queue, worker, filter): a non-empty string without NUL bytes.

    SQLite stores a NUL byte, PostgreSQL refuses it: refusing it here keeps the two
    backends alike. With ``optional``, None passes (a filter that is not set).
    """
    if isinstance(value, str) and len(value) > MAX_NAME_CHARS:
        raise ValueError(
            f"{arg} must be at most {MAX_NAME_CHARS} characters, not {len(value)}: build it "
            "from the ids that make the operation distinct, not from its data"
        )
    if type(value) is str and value.isascii() and value and "\x00" not in value:
        return value  # the common case, decided without encoding the text
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        raise ValueError(f"{arg} must be a non-empty string, not {value!r}")
    if "\x00" in value:
        raise ValueError(f"{arg} must not contain NUL bytes (\\x00): {value!r}")
    _no_lone_surrogates(arg, value, ValueError)
    return value


def text(arg: str, value: Any) -> str:
    """Free text (a note, a reason): any string; NUL bytes are dropped later by sanitize."""
    if not isinstance(value, str):
        raise ValueError(f"{arg} must be a string, not {value!r}")
    return value


def queues(value: Any) -> tuple[str, ...]:
    """The queues a claim takes from: one name or a non-empty sequence of names."""
    if isinstance(value, str):
        value = (value,)
    if not isinstance(value, Sequence) or not value:
        raise ValueError(f"queues must be a queue name or a non-empty list of names, not {value!r}")
    return tuple(str(name("queues", q)) for q in value)


def payload(value: Any, arg: str = "payload") -> None:
    """Refuse what the JSON encoder would choke on: deep nesting, lone surrogates.

    A lone surrogate (``"\\ud800"``) is a valid Python string that no UTF-8 database can
    store; nesting deeper than ``MAX_DEPTH`` makes the encoder hit the recursion limit.
    The rest (types, size, credential fields) is ``labkit.keys.payload_text``'s job,
    which calls this only to say where a payload it refused went wrong.
    """
    stack: list[tuple[Any, int, str]] = [(value, 0, arg)]
    while stack:
        item, depth, path = stack.pop()
        if depth > MAX_DEPTH:
            raise PayloadError(
                f"{arg} nests deeper than {MAX_DEPTH} levels (at {path[:80]}...); a job "
                "carries ids and small facts, flatten it"
            )
        if isinstance(item, str):
            _no_lone_surrogates(path, item, PayloadError)
        elif isinstance(item, dict):
            for key, inner in item.items():
                if isinstance(key, str):
                    _no_lone_surrogates(f"{path} key", key, PayloadError)
                stack.append((inner, depth + 1, f"{path}[{key!r}]"))
        elif isinstance(item, list | tuple):
            stack.extend((inner, depth + 1, f"{path}[{i}]") for i, inner in enumerate(item))


def _no_lone_surrogates(arg: str, value: str, error: type[ValueError]) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise error(
            f"{arg} holds a lone surrogate (invalid Unicode, often a badly decoded "
            f"byte string): {value[:40]!r}; decode the input with errors='replace'"
        ) from None
