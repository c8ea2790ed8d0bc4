"""Time as an argument.

Everything in labkit that needs the time takes a ``Clock``. Production code passes
``SystemClock``; tests and notebooks pass ``FakeClock``, whose ``sleep`` advances time
instantly, so a lesson about a one-hour backoff runs in a millisecond and prints the
same numbers on every run. Nothing outside this module reads the wall clock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
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
    """The real wall clock; ``SystemClock(skew_s=30)`` plays a machine whose clock is 30 s ahead.

    Skew is what NTP trouble, a paused VM or a container on another host gives a worker:
    the tests run one worker process ahead of (or behind) the others to show that a
    server-backed store judges leases by the server's clock, not the worker's.
    """

    def __init__(self, skew_s: float = 0.0) -> None:
        self.skew_s = float(skew_s)

    def now(self) -> float:
        return time.time() + self.skew_s

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)

    def __repr__(self) -> str:
        return f"SystemClock(skew_s={self.skew_s:g})" if self.skew_s else "SystemClock()"


class ServerClock:
    """The time of a shared server (a database, Redis), read at most every ``every_s``.

    Workers on several machines must judge one lease by one clock, or a worker whose
    clock runs ahead takes a live job and one behind loses its own. ``read()`` returns the
    server's time in epoch seconds (PostgreSQL's ``clock_timestamp()``, Redis's ``TIME``);
    between reads the time is carried forward by this machine's monotonic clock, which no
    wall-clock step moves, so a store pays one round trip every ``every_s`` seconds, not
    one per call. Half the read's round trip is added, as NTP does.
    """

    def __init__(self, read: Callable[[], float], every_s: float = 5.0) -> None:
        self._read = read
        self.every_s = every_s
        self._lock = threading.Lock()
        self._anchor: tuple[float, float] | None = None  # (server time, monotonic then)

    def now(self) -> float:
        # The read runs outside the lock: it may wait on a connection whose own lock the
        # calling thread's store holds, and two threads reading at once is harmless.
        with self._lock:
            anchor = self._anchor
        mono = time.monotonic()
        if anchor is None or mono - anchor[1] >= self.every_s:
            before = time.monotonic()
            server = self._read()
            mono = time.monotonic()
            anchor = (server + (mono - before) / 2, mono)
            with self._lock:
                self._anchor = anchor
        return anchor[0] + (mono - anchor[1])

    def forget(self) -> None:
        """Read the server again on the next call (after a reconnect, say)."""
        with self._lock:
            self._anchor = None

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)

    def __repr__(self) -> str:
        return f"ServerClock(every_s={self.every_s:g})"


class FakeClock:
    """A clock that only moves when told to: ``sleep`` and ``advance`` move it forward."""

    #: Simulated time: a server-backed store given this clock takes its time from it
    #: (lessons and tests replay exactly), not from the server (``is_simulated``).
    simulated = True

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


def is_simulated(clock: Clock) -> bool:
    """True for a clock that plays time (``FakeClock``), False for one that reads real time.

    A PostgreSQL or Redis store keeps the time of a simulated clock, so a lesson replays
    to the second, and takes real time from its server instead of from any real clock it
    is given (``ServerClock``), so workers on machines whose clocks disagree agree.
    """
    return bool(getattr(clock, "simulated", False))


def isoformat(ts: float | None) -> str:
    """Render an epoch timestamp as a short UTC string, for tables and logs."""
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S")


def from_isoformat(text: str) -> float:
    """Epoch seconds of an ISO 8601 time; one that names no zone is read as UTC.

    Raises ``ValueError`` for text that is no ISO 8601 time.
    """
    when = datetime.fromisoformat(text)
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()
