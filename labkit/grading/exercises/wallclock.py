"""A wall clock moved on, or another local time zone, for code that (wrongly) reads them.

A function whose result must not depend on the time it runs (a key, a breaker driven by
the injected clock) gives the same answer with ``clock_moved(values, seconds)`` around it;
one that must not depend on the machine's zone, the same inside ``in_time_zone(tz)``.
A first try and its retry read the clock at ``to_year_end()`` and ``to_year_end(RETRY_S)``:
another day, ISO week, month and year, whatever day it is graded on.
"""

from __future__ import annotations

import datetime as _dt
import os
import time
import types
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any
from unittest import mock

#: The steady clocks ``time.clock_gettime`` reads that ``clock_moved`` moves with
#: ``steady`` (``time.monotonic`` is one of them).
STEADY_CLOCK_IDS = ("CLOCK_MONOTONIC", "CLOCK_MONOTONIC_RAW", "CLOCK_BOOTTIME")

#: Where a first try's wall clock reads, in local time: a Sunday, the last day of a month
#: and of a year (2028-12-31, 15:00). From the real clock, a key holding the year, the
#: month or the ISO week (a "billing period") sent the same key on a retry a day later
#: except at the end of one, and a grade hung on the day it was graded. At 15:00 local,
#: UTC is on the 31st too in every zone from UTC-8 to UTC+14.
YEAR_END = (2028, 12, 31, 15, 0, 0, 0, 0, -1)

#: How long after ``YEAR_END`` its retry reads: a day, an hour, a minute and a second
#: (Monday 2029-01-01, 16:01:01): another second, minute, hour, day, ISO week, month and
#: year, in local time and in UTC.
RETRY_S = 86_400 + 3_600 + 61


def to_year_end(later: float = 0.0, now: float | None = None) -> float:
    """How far to move the wall clock (``clock_moved``) for it to read ``YEAR_END`` now,
    plus ``later`` seconds (``RETRY_S``: the retry). ``YEAR_END`` is local time in the zone
    in force when called: call it where the code runs (``in_time_zone``, another
    machine's zone), so the retry is in the next year there too."""
    return time.mktime(YEAR_END) + later - (time.time() if now is None else now)


@contextmanager
def clock_moved(
    values: MutableMapping[str, Any],
    seconds: float,
    datetime_module: bool = False,
    real_modules: bool = True,
    steady: bool = True,
    stopped: bool = False,
) -> Iterator[None]:
    """Make the wall clock read ``seconds`` later, for code that (wrongly) reads it.

    In the student's namespace, a bound ``datetime`` module or its ``datetime`` and
    ``date`` classes, and the ``time`` functions imported by name (``from time import
    time, strftime``), are swapped for ones reading later, then put back. The calendar
    functions (``strftime('%Y%m%d')``, ``localtime()`` ...) read the C clock, not
    ``time.time``, when called without a time: they are moved too, and so are the
    ``_ns`` twins and ``clock_gettime`` (``CLOCK_REALTIME``; the steady clocks with
    ``steady``; never a CPU-time clock).

    ``real_modules`` (the default): the ``time`` module's own functions are patched too,
    so code that reads ``time.time()`` through any import reads later. Without it, the
    student's ``time`` name is swapped for a moved copy and the real module is left
    alone (the checker's own clocks run on). ``datetime_module``: the ``datetime``
    module's own ``datetime`` class too, for cells run again inside (a worker started
    later imports it afresh); its ``date`` class stays real, since code far from the
    student's checks its arguments with ``isinstance(x, date)``.

    ``stopped``: every clock reads its first reading at every call, as a coarse clock
    does for calls that follow each other fast (15 ms on some hosts; one stepped back
    by NTP): a value made of the time repeats, one drawn from randomness does not.
    """
    clock_names = (
        "time",
        "time_ns",
        "monotonic",
        "monotonic_ns",
        "perf_counter",
        "perf_counter_ns",
        "clock_gettime",
        "clock_gettime_ns",
    )
    real = {name: getattr(time, name) for name in clock_names}
    # What clock_gettime reads that moves with the calendar: the realtime clock always,
    # the steady ones with ``steady`` (never a CPU-time clock of a process or thread).
    moving = {time.CLOCK_REALTIME} | (
        {getattr(time, n) for n in STEADY_CLOCK_IDS if hasattr(time, n)} if steady else set()
    )
    calendar_names = ("localtime", "gmtime", "ctime", "asctime", "strftime")
    calendar = {name: getattr(time, name) for name in calendar_names}
    shift = seconds
    # What the clocks read: the real ones, or (stopped) each one's first reading again.
    read: dict[str, Any] = dict(real)
    if stopped:
        first: dict[tuple[Any, ...], Any] = {}

        def held(name: str) -> Any:
            def reading(*clock: Any) -> Any:
                return first.setdefault((name, *clock), real[name](*clock))

            return reading

        read = {name: held(name) for name in clock_names}

    def now() -> float:
        return float(read["time"]()) + shift

    def at(secs: float | None) -> float:
        return now() if secs is None else secs

    def moved(t: Any) -> Any:
        return calendar["localtime"](now()) if t is None else t

    shift_ns = int(shift * 1e9)
    later = {
        "time": now,
        "time_ns": lambda: read["time_ns"]() + shift_ns,
        **(
            {
                "monotonic": lambda: read["monotonic"]() + shift,
                "monotonic_ns": lambda: read["monotonic_ns"]() + shift_ns,
                "perf_counter": lambda: read["perf_counter"]() + shift,
                "perf_counter_ns": lambda: read["perf_counter_ns"]() + shift_ns,
            }
            if steady or stopped
            else {}
        ),
        "clock_gettime": lambda clock: (
            read["clock_gettime"](clock) + (shift if clock in moving else 0.0)
        ),
        "clock_gettime_ns": lambda clock: (
            read["clock_gettime_ns"](clock) + (shift_ns if clock in moving else 0)
        ),
        "localtime": lambda secs=None: calendar["localtime"](at(secs)),
        "gmtime": lambda secs=None: calendar["gmtime"](at(secs)),
        "ctime": lambda secs=None: calendar["ctime"](at(secs)),
        "asctime": lambda t=None: calendar["asctime"](moved(t)),
        "strftime": lambda fmt, t=None: calendar["strftime"](fmt, moved(t)),
    }

    # The real classes, read now: with datetime_module, _dt.datetime is Later itself.
    real_datetime, real_date = _dt.datetime, _dt.date
    held_at = real_datetime.now(_dt.UTC) if stopped else None

    def instant(tz: Any) -> Any:
        """``datetime.now(tz)``, or (stopped) the first instant in that zone."""
        if held_at is None:
            return real_datetime.now(tz)
        return (
            held_at.astimezone(tz) if tz is not None else held_at.astimezone().replace(tzinfo=None)
        )

    class Later(_dt.datetime):
        @classmethod
        def now(cls, tz: Any = None) -> Any:
            return instant(tz) + _dt.timedelta(seconds=shift)

        @classmethod
        def utcnow(cls) -> Any:
            return instant(_dt.UTC).replace(tzinfo=None) + _dt.timedelta(seconds=shift)

        @classmethod
        def today(cls) -> Any:
            return cls.now()

    class LaterDate(_dt.date):
        @classmethod
        def today(cls) -> Any:
            return real_date.fromtimestamp(now())

    fake_datetime = types.SimpleNamespace(
        **{k: getattr(_dt, k) for k in dir(_dt) if not k.startswith("__")}
    )
    fake_datetime.datetime = Later
    fake_datetime.date = LaterDate
    fake_time = types.SimpleNamespace(
        **{k: getattr(time, k) for k in dir(time) if not k.startswith("__")}
    )
    vars(fake_time).update(later)
    #: What the student may have bound, by identity, and what reads later instead.
    swaps: dict[int, Any] = {
        id(real_datetime): Later,
        id(real_date): LaterDate,
        id(_dt): fake_datetime,
        **{id(fn): later[name] for name, fn in {**real, **calendar}.items() if name in later},
        **({} if real_modules else {id(time): fake_time}),
    }
    saved: dict[str, Any] = {}
    for name, value in list(values.items()):
        if id(value) in swaps:
            saved[name] = value
            values[name] = swaps[id(value)]
    patches: list[Any] = [
        *(
            (mock.patch.object(time, name, fake) for name, fake in later.items())
            if real_modules
            else ()
        ),
        *([mock.patch.object(_dt, "datetime", Later)] if datetime_module else []),
    ]
    try:
        for patch in patches:
            patch.start()
        yield
    finally:
        for patch in patches:
            patch.stop()
        values.update(saved)


@contextmanager
def in_time_zone(tz: str) -> Iterator[None]:
    """The process's local time zone set to ``tz`` (``TZ`` and ``time.tzset()``), then put
    back. A POSIX string (``"<-03>3"``) needs no time zone database."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = tz
    time.tzset()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = before
        time.tzset()
