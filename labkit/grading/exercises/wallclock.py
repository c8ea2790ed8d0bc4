"""A wall clock moved on, or another local time zone, for code that (wrongly) reads them.

A function whose result must not depend on the time it runs (a key, a breaker driven by
the injected clock) gives the same answer with ``clock_moved(values, seconds)`` around it;
one that must not depend on the machine's zone, the same inside ``in_time_zone(tz)``.
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


@contextmanager
def clock_moved(
    values: MutableMapping[str, Any], seconds: float, datetime_module: bool = False
) -> Iterator[None]:
    """Make the wall clock read ``seconds`` later, for code that (wrongly) reads it.

    Patches the ``time`` module's functions and, in the student's namespace, a bound
    ``datetime`` class or module, then restores everything. ``datetime_module``: the
    ``datetime`` module's own ``datetime`` class too, for cells run again inside (a worker
    started later imports it afresh). The calendar functions
    (``strftime('%Y%m%d')``, ``localtime()`` ...) read the C clock, not ``time.time``,
    when called without a time: they are moved too, and so are those names where the
    student imported them from ``time``.
    """
    real = {name: getattr(time, name) for name in ("time", "time_ns", "monotonic", "perf_counter")}
    calendar_names = ("localtime", "gmtime", "ctime", "asctime", "strftime")
    calendar = {name: getattr(time, name) for name in calendar_names}
    shift = seconds

    def at(secs: float | None) -> float:
        return real["time"]() + shift if secs is None else secs

    def moved(t: Any) -> Any:
        return calendar["localtime"](at(None)) if t is None else t

    later_calendar = {
        "localtime": lambda secs=None: calendar["localtime"](at(secs)),
        "gmtime": lambda secs=None: calendar["gmtime"](at(secs)),
        "ctime": lambda secs=None: calendar["ctime"](at(secs)),
        "asctime": lambda t=None: calendar["asctime"](moved(t)),
        "strftime": lambda fmt, t=None: calendar["strftime"](fmt, moved(t)),
    }

    # The real class, read now: with datetime_module, _dt.datetime is Later itself.
    real_datetime = _dt.datetime

    class Later(_dt.datetime):
        @classmethod
        def now(cls, tz: Any = None) -> Any:
            return real_datetime.now(tz) + _dt.timedelta(seconds=shift)

        @classmethod
        def utcnow(cls) -> Any:
            return real_datetime.now(_dt.UTC).replace(tzinfo=None) + _dt.timedelta(seconds=shift)

        @classmethod
        def today(cls) -> Any:
            return cls.now()

    fake_module = types.SimpleNamespace(
        **{k: getattr(_dt, k) for k in dir(_dt) if not k.startswith("__")}
    )
    fake_module.datetime = Later
    saved: dict[str, Any] = {}
    #: The student's ``from time import strftime`` and the like, by the function's identity.
    imported = {id(fn): later_calendar[name] for name, fn in calendar.items()}
    for name, value in list(values.items()):
        if value is _dt.datetime:
            saved[name] = value
            values[name] = Later
        elif value is _dt:
            saved[name] = value
            values[name] = fake_module
        elif id(value) in imported:
            saved[name] = value
            values[name] = imported[id(value)]
    patches: list[Any] = [
        mock.patch.object(time, "time", lambda: real["time"]() + shift),
        mock.patch.object(time, "time_ns", lambda: real["time_ns"]() + int(shift * 1e9)),
        mock.patch.object(time, "monotonic", lambda: real["monotonic"]() + shift),
        mock.patch.object(time, "perf_counter", lambda: real["perf_counter"]() + shift),
        *(mock.patch.object(time, name, fake) for name, fake in later_calendar.items()),
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
