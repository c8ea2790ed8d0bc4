"""What every harness module needs: fresh student state, results as data, plain rows.

Harness functions run beside the student's code and hand back plain data only. Two
rules keep one check from influencing the next: ``fresh_state(values)`` restores the
student's module-level data (a dict used as a cache, a counter, class attributes)
after each harness call, and ``outcome(fn, ...)`` turns whatever the student's call
did into data (``{"returned": ...}`` or ``{"raised": [...], "message": ...}``), so a
check can read "it raised IdempotencyConflict" without holding the exception object.
``on_one_connection`` makes several calls on one connection, as a long-lived process
does, for the exercises whose functions take the lab database's connection.
"""

from __future__ import annotations

import copy
import enum
import re
import sqlite3
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from typing import Any

from labkit.grading.checks import CheckFailed, StudentRaised
from labkit.grading.exercises.labdb import connect
from labkit.grading.exercises.tracing import (
    AfterFirstWrite,
    LockedAtBegin,
    Watched,
    with_what_it_left,
)
from labkit.grading.stub import is_stub
from labkit.lang import _

_MUTABLE = (dict, list, set, bytearray)
#: IPython's own history names in a notebook's namespace: not the student's state.
_IPYTHON = re.compile(r"^(In|Out|_+|_(i|ii|iii|ih|oh|dh)\d*|_\d+)$")


def need(values: MutableMapping[str, Any], name: str) -> Any:
    """The student's definition ``name``, or the same failure ``ns.NAME`` gives when missing."""
    try:
        return values[name]
    except KeyError:
        raise CheckFailed(
            _("a definition named {name} in the notebook").format(name=repr(name)),
            _("no such name"),
            _("run the cell that defines {name} (and do not rename it), then check again").format(
                name=name
            ),
        ) from None


_UNBOUND = object()


def _mutable_class_attrs(values: MutableMapping[str, Any]) -> list[tuple[type, str, Any]]:
    found = []
    for value in list(values.values()):
        # An Enum's members are fixed (it refuses setattr), and a StrEnum's are strings.
        if isinstance(value, enum.EnumMeta):
            continue
        if isinstance(value, type) and value.__module__ == values.get("__name__", "__main__"):
            for name, attr in list(vars(value).items()):
                if not name.startswith("__") and (
                    isinstance(attr, (*_MUTABLE, int, float, str, bool)) or attr is None
                ):
                    try:
                        found.append((value, name, copy.deepcopy(attr)))
                    except Exception:  # noqa: BLE001, S112 - not restorable, left alone
                        continue
    return found


@contextmanager
def fresh_state(values: MutableMapping[str, Any]) -> Iterator[None]:
    """Run the block, then put the student's module-level data back as it was.

    Module-level dicts, lists and sets and plain class attributes are copied before
    and restored after, so a cache or a counter kept there cannot carry what one
    check did into the next (each check starts from the state the notebook left). A
    module-level name the block rebound (``global _WORLD; _WORLD = ...``, a counter
    ``n += 1``) is bound again to what it held, and one the block added is removed.
    """
    bound = {
        name: value
        for name, value in values.items()
        if not (_IPYTHON.match(name) or name.startswith("__"))
    }
    saved: dict[str, Any] = {}
    for name, value in bound.items():
        if type(value) not in _MUTABLE:
            continue
        try:
            saved[name] = copy.deepcopy(value)
        except Exception:  # noqa: BLE001, S112 - what cannot be copied cannot be restored
            continue
    class_attrs = _mutable_class_attrs(values)
    try:
        yield
    finally:
        for name in [n for n in values if n not in bound]:
            if not (_IPYTHON.match(name) or name.startswith("__")):
                del values[name]
        for name, value in bound.items():
            if values.get(name, _UNBOUND) is not value:
                values[name] = value
        for name, copied in saved.items():
            # The same object, refilled: anything holding it sees the old contents.
            original = bound[name]
            original.clear()
            if isinstance(original, (dict, set)):
                original.update(copied)
            else:
                original.extend(copied)
        for cls, name, value in class_attrs:
            setattr(cls, name, value)


def raised(exc: BaseException) -> dict[str, Any]:
    """An exception as data: class names (most specific first), first line, the student's line."""
    text = str(exc).strip().splitlines()
    return {
        "raised": [k.__name__ for k in type(exc).__mro__ if k is not object],
        "message": (text[0] if text else "")[:200],
        "where": StudentRaised.from_exception(exc).where,
    }


@contextmanager
def noted(
    out: MutableMapping[str, Any], field: str = "error", prefix: str = "raised "
) -> Iterator[None]:
    """Run the block; an error the student's code raises in it ends the block and is noted
    for the check as ``out[field] = "<prefix><Type>: <message>"``.

    The exercise stub is not caught, so a check on it still reads "not started yet".
    """
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - the student's error is the evidence
        if isinstance(exc, NotImplementedError) and is_stub(exc):
            raise
        out[field] = f"{prefix}{type(exc).__name__}: {str(exc)[:160]}"


def plain(value: Any) -> Any:
    """``value`` as plain data (None, bool, int, float, str, lists, str-keyed dicts).

    Whatever else the student's code returned (bytes, a Decimal, an object) becomes its
    repr, so it can cross a process boundary and still show in the feedback.
    """
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, sqlite3.Row):
        value = dict(value)
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, bytes):
        return value.hex()
    return repr(value)[:200]


def outcome(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
    """``{"returned": value}``, or ``raised(exc)`` when the student's call raised.

    The exercise stub is not caught, so a check on it still reads "not started yet".
    """
    try:
        return {"returned": plain(fn(*args, **kwargs))}
    except NotImplementedError as exc:
        if is_stub(exc):
            raise
        return raised(exc)
    except Exception as exc:  # noqa: BLE001 - the student's error is the evidence
        return raised(exc)


def plain_row(row: Any) -> Any:
    """A returned row as a plain dict (sqlite3.Row, a mapping), or the value as it is."""
    if row is None or isinstance(row, (bool, int, float, str)):
        return row
    try:
        return plain(dict(row))
    except (TypeError, ValueError):
        return repr(row)[:200]


@contextmanager
def _kept_open(values: MutableMapping[str, Any], path: str) -> Iterator[sqlite3.Connection]:
    """ONE connection to ``path`` for a run of calls, as a long-lived process keeps it,
    the notebook's state fresh; closed after the last call, which rolls back whatever a
    call left open."""
    conn = connect(path)
    try:
        with fresh_state(values):
            yield conn
    finally:
        conn.close()


def on_one_connection(
    values: MutableMapping[str, Any], name: str, path: str, calls: list[list[Any]]
) -> list[dict[str, Any]]:
    """``name(conn, *args)`` for each of ``calls`` on ONE connection, as a long-lived process.

    A failed call that leaves its transaction open spoils every later call on that
    connection; the connection is closed (rolled back) only after the last call. Every
    call is handed the same connection object, as a long-lived process hands it: state
    kept per ``id(conn)`` (a clock, a cache) carries from one call to the next. An
    outcome says under ``left`` what a call changed of the connection it was handed in
    autocommit mode (``tracing.with_what_it_left``): a transaction still open, or a mode set.
    """
    with _kept_open(values, path) as conn:
        kept = Watched(conn)
        return [with_what_it_left(outcome(values[name], kept, *args), conn) for args in calls]


def begin_refused_once(
    values: MutableMapping[str, Any],
    name: str,
    path: str,
    args: list[Any],
    kwargs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``name(conn, *args, **kwargs)`` whose first BEGIN IMMEDIATE fails "database is
    locked" (``tracing.LockedAtBegin``): the outcome, ``refused`` (whether it sent one)
    and ``unlocked_writes`` (the writes it sent after, without a transaction of its own)."""
    with _kept_open(values, path) as conn:
        watched = LockedAtBegin(conn, path)
        got = outcome(values[name], watched, *args, **(kwargs or {}))
        return {**got, "refused": watched.refused, "unlocked_writes": watched.unlocked_writes}


def interrupted_then_again(
    values: MutableMapping[str, Any],
    name: str,
    path: str,
    calls: list[list[Any]],
    interrupt_after: int,
) -> list[dict[str, Any]]:
    """``name(conn, *calls[0])`` interrupted after write ``interrupt_after``, then the rest.

    Ctrl-C in the notebook, or a worker's SIGINT handler, arrives as a BaseException
    that is no Exception, in a process that lives on: whatever transaction the code left
    open stays open on its long-lived connection. So all run on ONE connection, closed
    (rolled back) only after the last call. The first outcome says ``interrupted``.
    """
    with _kept_open(values, path) as conn:
        first = Watched(conn, crash_after=interrupt_after, crash_with=KeyboardInterrupt)
        try:
            got = [outcome(values[name], first, *calls[0])]
        except KeyboardInterrupt:
            got = [{"interrupted": True}]
        if not first.crashed:
            got = [{**got[0], "not_interrupted": True}]
        first.crash_after = None  # the process lives on, with the same connection object
        got += [outcome(values[name], first, *args) for args in calls[1:]]
        return got


def taken_over_after_its_first_write(
    values: MutableMapping[str, Any],
    name: str,
    path: str,
    args: list[Any],
    write: str,
    params: dict[str, Any],
) -> dict[str, Any]:
    """``name(conn, *args)`` on a new connection; the moment its first change is
    committed (``tracing.AfterFirstWrite``), another connection runs ``write`` (a worker
    takes the job over). The call's outcome, and ``"taken"``: whether ``write`` changed a
    row. A second write of the call, fenced on nothing, then meets the new holder's row."""
    taken: list[bool] = []

    def other() -> None:
        conn = connect(path)
        try:
            taken.append(conn.execute(write, params).rowcount > 0)
        finally:
            conn.close()

    conn = AfterFirstWrite(connect(path), other)
    try:
        with fresh_state(values):
            result = outcome(need(values, name), conn, *args)
    finally:
        conn.close()
    result["taken"] = bool(taken and taken[0])
    return result
