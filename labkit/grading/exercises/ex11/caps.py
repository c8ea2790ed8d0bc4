"""Exercise 11's relay caps: a backlog of thousands of rows relayed into a list, and the
caps (a ``LIMIT``, a ``fetchmany`` size, a number in the code) that would stop a run.

``relay_into_a_list`` runs ``relay_once`` with a ``publish`` that only lists what it is
given, noting every ``LIMIT`` and ``fetchmany`` size it meets and, asked to, running
every cap past ``SCALE_ABOVE`` rows as ``SCALED_CAP``; ``_ints_written_in`` reads the
numbers written in the relay's code (see ``constants.written_in``). Asked to, each
publish moves the clocks the relay may read on (``_slow_broker``, ``datetime.now()``
included), so that a run cut after a time budget shows.
"""

from __future__ import annotations

import contextlib
import datetime
import threading
import time
import types
from collections.abc import Callable, Iterator, MutableMapping
from types import CodeType, FunctionType
from typing import Any, cast
from unittest import mock

from labkit.errors import SimulatedCrash
from labkit.grading.exercises.common import fresh_state, outcome
from labkit.grading.exercises.constants import written_in
from labkit.grading.exercises.labdb import connect
from labkit.grading.exercises.limits import LimitsSeen


def _run(values: MutableMapping[str, Any], fn: Any, *args: Any) -> dict[str, Any]:
    """The student's call as an outcome (or ``crashed``), their module state put back after."""
    with fresh_state(values):
        try:
            return outcome(fn, *args)
        except SimulatedCrash:
            return {"crashed": True}


def relay_into_a_list(
    values: MutableMapping[str, Any],
    path: str,
    now: float,
    scale_caps: bool = False,
    slow_broker: bool = False,
    keep_bodies: bool = True,
) -> dict[str, Any]:
    """``relay_once(conn, publish, now)`` whose ``publish`` only lists what it is given.

    For a backlog of thousands of rows: no broker file, and the shop's database is not
    synced at each of the student's commits (``synchronous=OFF``, this connection only),
    so the run costs milliseconds. ``published`` is what the broker would have got,
    ``topics`` and ``bodies`` the topic and body published with each.

    With ``scale_caps``, every cap above ``SCALE_ABOVE`` (a ``LIMIT``, a ``fetchmany``
    size, an integer in the relay's code or a default of its parameters) runs as
    ``SCALED_CAP``: a backlog past a cap of a million rows is too slow to build, and a
    relay that pages through its backlog publishes it all at any page size. ``scaled``
    names the caps so changed.

    With ``slow_broker``, the clocks the relay may read move on by ``PUBLISH_S`` at each
    publish (``_slow_broker``): a run that stops once a time budget is spent leaves the
    rest pending, as it would behind a slow broker. ``clock_reads`` counts its reads.

    Without ``keep_bodies``, ``topics`` and ``bodies`` come back empty: a backlog built
    past a cap written in the relay (65536, say) holds some 70,000 rows, whose bodies
    would make an answer past the grading channel's 8 MiB.
    """
    published: list[str] = []
    topics: list[str] = []
    bodies: list[Any] = []

    def publish(topic: str, message_id: str, body: str) -> None:
        published.append(message_id)
        if keep_bodies:
            topics.append(topic if isinstance(topic, str) else repr(topic))
            text = body.decode() if isinstance(body, bytes) else body
            bodies.append(text if isinstance(text, str) else repr(text))
        took()

    conn = connect(path)
    conn.execute("PRAGMA synchronous=OFF")
    watched = LimitsSeen(conn, SCALE_ABOVE if scale_caps else None, SCALED_CAP)
    scaled: list[int] = []
    relay = values["relay_once"]
    try:
        with _slow_broker(values, slow_broker) as (took, reads):
            if scale_caps:  # after the clocks are swapped: the rebuilt code sees them
                relay = _scaled_down(relay, scaled)
            got = _run(values, relay, watched, publish, now)
    finally:
        conn.close()
    return {
        **got,
        "published": published,
        "topics": topics,
        "bodies": bodies,
        "limits": watched.limits + _ints_written_in(values["relay_once"]),
        "scaled": sorted(set(scaled + watched.scaled)),
        "clock_reads": reads[0],
    }


#: How far each publish moves the relay's clocks on with ``slow_broker``: a budget of
#: seconds, or of an hour, is spent within the first publishes of the check's backlog.
PUBLISH_S = 60.0
#: The clocks a time budget reads (and their ``_ns`` twins).
_CLOCKS = ("time", "monotonic", "perf_counter")


@contextlib.contextmanager
def _slow_broker(
    values: MutableMapping[str, Any], on: bool = True
) -> Iterator[tuple[Callable[[], None], list[int]]]:
    """``time.time``, ``time.monotonic`` and ``time.perf_counter`` (their ``_ns`` twins,
    and the student's names bound to them, or to the ``datetime`` class or module: see
    ``_moved_datetime``) read ``PUBLISH_S`` later after each call of
    the function handed back, then are put back; the list handed back counts the reads
    made on this thread. Not ``on``: the clocks are left alone."""
    if not on:
        yield (lambda: None), [0]
        return
    names = [*_CLOCKS, *(f"{name}_ns" for name in _CLOCKS)]
    real = {name: getattr(time, name) for name in names}
    ahead, reads, caller = [0.0], [0], threading.get_ident()

    def moved(name: str) -> Callable[[], Any]:
        clock, nanos = real[name], name.endswith("_ns")

        def read() -> Any:
            if threading.get_ident() == caller:
                reads[0] += 1
            return clock() + (int(ahead[0] * 1e9) if nanos else ahead[0])

        return read

    fake = {name: moved(name) for name in names}
    swaps: dict[int, Any] = {id(real[name]): fake[name] for name in names}
    # A budget read with datetime: the student's names bound to the datetime class or
    # module read a class whose now(), utcnow() and today() are as far ahead.
    wall = _moved_datetime(ahead, reads, caller)
    module = types.ModuleType("datetime", datetime.__doc__)
    module.__dict__.update({**vars(datetime), "datetime": wall})
    swaps[id(datetime.datetime)] = wall
    swaps[id(datetime)] = module
    saved = {name: value for name, value in values.items() if id(value) in swaps}

    def took() -> None:
        ahead[0] += PUBLISH_S

    with contextlib.ExitStack() as stack:
        for name in names:
            stack.enter_context(mock.patch.object(time, name, fake[name]))
        values.update({name: swaps[id(value)] for name, value in saved.items()})
        try:
            yield took, reads
        finally:
            values.update(saved)


def _moved_datetime(ahead: list[float], reads: list[int], caller: int) -> type:
    """A ``datetime.datetime`` whose ``now()``, ``utcnow()`` and ``today()`` read
    ``ahead[0]`` seconds later (reads on ``caller``'s thread counted in ``reads``)."""
    real = datetime.datetime

    def later(tz: Any = None) -> datetime.datetime:
        if threading.get_ident() == caller:
            reads[0] += 1
        return real.now(tz) + datetime.timedelta(seconds=ahead[0])

    class MovedDatetime(datetime.datetime):
        @classmethod
        def now(cls, tz: Any = None) -> datetime.datetime:  # type: ignore[override]
            return later(tz)

        @classmethod
        def today(cls) -> datetime.datetime:  # type: ignore[override]
            return later()

        @classmethod
        def utcnow(cls) -> datetime.datetime:  # type: ignore[override]
            return later(datetime.UTC).replace(tzinfo=None)

    MovedDatetime.__name__ = MovedDatetime.__qualname__ = "datetime"
    MovedDatetime.__module__ = "datetime"
    return MovedDatetime


#: A cap above this many rows is run scaled down to ``SCALED_CAP`` (see ``relay_into_a_list``).
SCALE_ABOVE = 100_000
#: Fewer than the pending rows of the check's backlog (over 10000).
SCALED_CAP = 10_000


def _smaller(value: Any, found: list[int]) -> Any:
    """``SCALED_CAP`` for an integer above ``SCALE_ABOVE`` (noted in ``found``), else ``value``."""
    if isinstance(value, int) and not isinstance(value, bool) and value > SCALE_ABOVE:
        found.append(value)
        return SCALED_CAP
    return value


def _scaled_down(fn: Any, found: list[int]) -> Any:
    """``fn`` rebuilt with every integer above ``SCALE_ABOVE`` it holds scaled down.

    The integers of its code (slices and tuples included), of the functions it defines,
    of its parameters' defaults, and of the notebook's functions and integer globals it
    names (``BATCH = 1_000_000``), as ``_ints_written_in`` reads them. The rebuilt
    functions share a copy of the notebook's globals: the notebook itself is untouched.
    """
    glob = getattr(fn, "__globals__", None)
    if not isinstance(glob, dict) or not isinstance(getattr(fn, "__code__", None), CodeType):
        return fn
    copied: dict[str, Any] = dict(glob)
    rebuilt: dict[int, Any] = {}

    def const(value: Any) -> Any:
        if isinstance(value, CodeType):
            return code(value)
        if isinstance(value, slice):
            return slice(*(_smaller(n, found) for n in (value.start, value.stop, value.step)))
        if isinstance(value, tuple):
            return tuple(const(v) for v in value)
        return _smaller(value, found)

    def code(c: CodeType) -> CodeType:
        for name in c.co_names:
            named = glob.get(name)
            if isinstance(named, int) and not isinstance(named, bool):
                copied[name] = _smaller(named, found)
            elif isinstance(named, FunctionType) and named.__globals__ is glob:
                function(named)
        return c.replace(co_consts=tuple(const(v) for v in c.co_consts))

    def function(f: FunctionType) -> FunctionType:
        if id(f) not in rebuilt:
            rebuilt[id(f)] = f  # a function that names itself: rebuilt once
            new = FunctionType(code(f.__code__), copied, f.__name__, None, f.__closure__)
            new.__defaults__ = const(f.__defaults__) if f.__defaults__ else None
            if f.__kwdefaults__:
                new.__kwdefaults__ = {k: _smaller(v, found) for k, v in f.__kwdefaults__.items()}
            rebuilt[id(f)] = copied[f.__name__] = new
        return cast(FunctionType, rebuilt[id(f)])

    try:
        return function(fn)
    except (TypeError, ValueError):  # code this rebuild cannot take: run it as written
        return fn


#: Where ``_ints_written_in`` takes a number from a code's constants: a bare one, a
#: slice's start or stop, a tuple's element (not a slice's step, a nested tuple's, a
#: frozenset's).
_WRITTEN_AS = ((), ("slice.start",), ("slice.stop",), ("tuple",))


def _ints_written_in(fn: Any) -> list[int]:
    """The integer literals of ``fn``'s code, of the functions it defines, and of the
    functions (the notebook's or any other's) and integer globals it names (``BATCH =
    20000``), signs kept; never its parameters' defaults (see ``constants.written_in``).

    A cap kept in Python (``rows[:20000]``, ``islice(rows, 20000)``, a loop that breaks
    at 20000) leaves no ``LIMIT`` in the SQL: its number is in the code.
    """
    return [
        const.value
        for const in written_in([fn])
        if isinstance(const.value, int)
        and (
            (const.source == "code" and const.path in _WRITTEN_AS)
            or (const.source == "global" and const.bare)
        )
    ]
