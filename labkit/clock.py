"""Time as an argument.

Everything in labkit that needs the time takes a ``Clock``. Production code passes
``SystemClock``; tests and notebooks pass ``FakeClock``, whose ``sleep`` advances time
instantly, so a lesson about a one-hour backoff runs in a millisecond and prints the
same numbers on every run. Nothing outside this module reads the wall clock.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from typing import Protocol, runtime_checkable

#: 2026-01-01T00:00:00Z, where every FakeClock starts unless told otherwise.
LAB_EPOCH = 1_767_225_600.0


@runtime_checkable
class Clock(Protocol):
    """Where labkit reads the time (seconds since the Unix epoch) and waits."""

    def now(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The real wall clock."""

    def now(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)

    def __repr__(self) -> str:
        return "SystemClock()"


class FakeClock:
    """A clock that only moves when told to: ``sleep`` and ``advance`` move it forward."""

    def __init__(self, start: float = LAB_EPOCH) -> None:
        self._now = float(start)
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._now

    def sleep(self, seconds: float) -> None:
        self.advance(max(0.0, seconds))

    def advance(self, seconds: float) -> float:
        """Move time forward by ``seconds`` and return the new time."""
        if seconds < 0:
            raise ValueError(f"a clock cannot go back in time (advance({seconds}))")
        with self._lock:
            self._now += seconds
            return self._now

    def set(self, when: float) -> None:
        """Jump to ``when``; it may not be earlier than now."""
        with self._lock:
            if when < self._now:
                raise ValueError(f"a clock cannot go back in time ({when} < {self._now})")
            self._now = float(when)

    def __repr__(self) -> str:
        return f"FakeClock({isoformat(self._now)})"


def isoformat(ts: float | None) -> str:
    """Render an epoch timestamp as a short UTC string, for tables and logs."""
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S")
