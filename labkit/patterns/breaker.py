"""A circuit breaker whose state lives in SQLite, so every worker process sees the same one.

When a dependency (an ERP, a payment API) is down, hammering it with every job only
makes it worse and burns each job's attempts. The breaker counts consecutive failures;
at ``threshold`` it opens and refuses calls for ``cooldown`` seconds. Then it turns
half_open and lets at most ``half_open_max`` trial calls through: a success closes it, a
failure opens it for another cooldown.

========== =================================================== ==========
from       event                                               to
========== =================================================== ==========
closed     ``threshold`` consecutive failures                  open
open       ``allow()`` once ``cooldown`` has passed             half_open
half_open  a trial succeeds                                    closed
half_open  a trial fails                                       open
========== =================================================== ==========

Every read and change is one ``BEGIN IMMEDIATE`` transaction on a table in the file you
name, so a transition made by one process is what the next call in any other process
sees. Each transition is also written to ``breaker_events`` (``history()``) and passed
to this instance's listeners. A refused call raises ``CircuitOpen(retry_at=...)``; the
worker snoozes such a job without spending an attempt.

The file can be the JobStore's own (open the store first, so it is recognised as a
labkit database) or a file of its own. In production: pybreaker (with its Redis
storage for sharing between processes), or the breaker in your service mesh.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import TypeVar

from labkit import dbfile, queries
from labkit.clock import Clock, isoformat
from labkit.errors import CircuitOpen, LabkitError
from labkit.retry import default_classify

SQL = queries.load("patterns/breaker.sql")
T = TypeVar("T")


class BreakerState(StrEnum):
    """closed: calls pass; open: calls refused; half_open: a few trial calls pass."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass(frozen=True)
class Transition:
    """One change of a breaker's state, as listeners and ``history()`` see it."""

    name: str
    at: float
    from_state: str
    to_state: str
    reason: str


@dataclass(frozen=True)
class _Row:
    state: BreakerState
    failures: int
    trials: int
    opened_at: float | None
    retry_at: float | None


def counts_as_failure(error: BaseException) -> bool:
    """Never-sent and maybe-done errors say the dependency is unwell; a 404 or a bug does not."""
    return default_classify(error) != "permanent"


class CircuitBreaker:
    """A named breaker shared through the SQLite file at ``store_path``.

    ``threshold`` consecutive failures open it; after ``cooldown`` seconds ``allow()``
    turns it half_open and admits up to ``half_open_max`` trial calls. A trial whose
    caller died and never reported is forgotten after another ``cooldown``, so a crash
    cannot leave the breaker stuck half_open.
    """

    def __init__(
        self,
        name: str,
        threshold: int,
        cooldown: float,
        clock: Clock,
        store_path: str | Path,
        half_open_max: int = 1,
    ) -> None:
        if not name:
            raise ValueError("a breaker needs a name: the dependency it protects, e.g. 'erp'")
        if not isinstance(threshold, int) or threshold < 1:
            raise ValueError(f"threshold must be a whole number >= 1, not {threshold!r}")
        if cooldown <= 0:
            raise ValueError(f"cooldown must be positive seconds, not {cooldown!r}")
        if not isinstance(half_open_max, int) or half_open_max < 1:
            raise ValueError(f"half_open_max must be a whole number >= 1, not {half_open_max!r}")
        self.name = name
        self.threshold = threshold
        self.cooldown = float(cooldown)
        self.clock = clock
        self.half_open_max = half_open_max
        self.path = Path(store_path)
        self._listeners: list[Callable[[Transition], None]] = []
        self._lock = threading.RLock()
        try:
            self.conn = dbfile.connect(self.path)
        except sqlite3.Error as exc:
            raise LabkitError(f"cannot open breaker file {self.path}: {exc}") from None
        with self._tx() as conn:
            dbfile.run_script(conn, SQL["schema"])
            conn.execute(SQL["ensure"], {"name": name, "now": clock.now()})

    # -- storage -------------------------------------------------------------------------

    def _tx(self) -> AbstractContextManager[sqlite3.Connection]:
        return dbfile.transaction(self.conn, self._lock)

    def _read(self, conn: sqlite3.Connection) -> _Row:
        r = conn.execute(SQL["get"], {"name": self.name}).fetchone()
        state = BreakerState(r["state"])
        return _Row(state, r["failures"], r["trials"], r["opened_at"], r["retry_at"])

    def _step(self, change: Callable[[_Row, float], tuple[_Row, str]]) -> _Row:
        """Read, change and write the row in one transaction; notify listeners after commit."""
        now = self.clock.now()
        with self._tx() as conn:
            before = self._read(conn)
            after, reason = change(before, now)
            conn.execute(
                SQL["put"],
                {
                    "name": self.name,
                    "now": now,
                    "state": after.state.value,
                    "failures": after.failures,
                    "trials": after.trials,
                    "opened_at": after.opened_at,
                    "retry_at": after.retry_at,
                },
            )
            moved = after.state != before.state
            if moved:
                conn.execute(
                    SQL["record_event"],
                    {
                        "name": self.name,
                        "now": now,
                        "from_state": before.state.value,
                        "to_state": after.state.value,
                        "reason": reason,
                    },
                )
        if moved:
            event = Transition(self.name, now, before.state.value, after.state.value, reason)
            for listener in list(self._listeners):
                listener(event)
        return after

    def _open(self, row: _Row, now: float) -> _Row:
        return replace(
            row, state=BreakerState.OPEN, trials=0, opened_at=now, retry_at=now + self.cooldown
        )

    # -- the public surface ----------------------------------------------------------------

    @property
    def state(self) -> BreakerState:
        """The state as stored now (an open breaker whose cooldown passed turns half_open
        on the next ``allow()``)."""
        with self._lock:
            return self._read(self.conn).state

    @property
    def retry_at(self) -> float | None:
        """When an open breaker will admit a trial call (None when closed)."""
        with self._lock:
            row = self._read(self.conn)
        return None if row.state == BreakerState.CLOSED else row.retry_at

    @property
    def failures(self) -> int:
        """Consecutive failures counted so far."""
        with self._lock:
            return self._read(self.conn).failures

    def on_transition(self, listener: Callable[[Transition], None]) -> None:
        """Call ``listener(transition)`` after each transition this instance makes."""
        self._listeners.append(listener)

    def allow(self) -> bool:
        """May a call go through now? In half_open, True also reserves one trial slot."""
        admitted = False

        def change(row: _Row, now: float) -> tuple[_Row, str]:
            nonlocal admitted
            if row.state == BreakerState.CLOSED:
                admitted = True
                return row, ""
            if row.state == BreakerState.OPEN:
                if row.retry_at is not None and now >= row.retry_at:
                    admitted = True
                    return (
                        replace(
                            row,
                            state=BreakerState.HALF_OPEN,
                            trials=1,
                            retry_at=now + self.cooldown,
                        ),
                        f"cooldown of {self.cooldown:g}s passed: admitting trial calls",
                    )
                return row, ""
            trials = row.trials
            if trials >= self.half_open_max and row.retry_at is not None and now >= row.retry_at:
                trials = 0  # the trials' callers never reported back: assume they died
            if trials < self.half_open_max:
                admitted = True
                return replace(row, trials=trials + 1), ""
            return row, ""

        self._step(change)
        return admitted

    def record_success(self) -> None:
        """A call succeeded: reset the failure count; a successful trial closes the breaker."""

        def change(row: _Row, now: float) -> tuple[_Row, str]:
            if row.state == BreakerState.HALF_OPEN:
                closed = _Row(BreakerState.CLOSED, 0, 0, None, None)
                return closed, "trial call succeeded"
            if row.state == BreakerState.CLOSED:
                return replace(row, failures=0), ""
            return row, ""  # a late success from before it opened proves nothing now

        self._step(change)

    def record_failure(self) -> None:
        """A call failed: count it; the threshold-th in a row, or a failed trial, opens it."""

        def change(row: _Row, now: float) -> tuple[_Row, str]:
            failures = row.failures + 1
            if row.state == BreakerState.CLOSED and failures >= self.threshold:
                return (
                    self._open(replace(row, failures=failures), now),
                    f"{failures} consecutive failures (threshold {self.threshold})",
                )
            if row.state == BreakerState.HALF_OPEN:
                return self._open(replace(row, failures=failures), now), "trial call failed"
            return replace(row, failures=failures), ""

        self._step(change)

    def refused(self) -> CircuitOpen:
        """The CircuitOpen error for a refused call, with ``retry_at`` set."""
        with self._lock:
            row = self._read(self.conn)
        at = row.retry_at if row.retry_at is not None else self.clock.now() + self.cooldown
        return CircuitOpen(
            f"circuit {self.name!r} is {row.state.value} after {row.failures} consecutive "
            f"failures; calls are refused until {isoformat(at)} UTC. The job waits without "
            "spending an attempt; nothing to do unless the dependency stays down.",
            retry_at=at,
        )

    def call(
        self,
        fn: Callable[[], T],
        counts: Callable[[BaseException], bool] = counts_as_failure,
    ) -> T:
        """Run ``fn()`` through the breaker: CircuitOpen if refused, else record the outcome.

        Only errors for which ``counts(error)`` is True count as failures (by default
        never-sent and maybe-done ones); a permanent error is re-raised and counts as a
        success for the dependency, which did answer.
        """
        if not self.allow():
            raise self.refused()
        try:
            result = fn()
        except Exception as error:
            if counts(error):
                self.record_failure()
            else:
                self.record_success()
            raise
        self.record_success()
        return result

    def history(self) -> list[Transition]:
        """Every transition of this breaker, whichever process made it, oldest first."""
        with self._lock:
            rows = self.conn.execute(SQL["events"], {"name": self.name}).fetchall()
        return [Transition(**dict(r)) for r in rows]

    def close(self) -> None:
        with self._lock:
            self.conn.close()

    def __repr__(self) -> str:
        return (
            f"CircuitBreaker({self.name!r}, threshold={self.threshold}, cooldown={self.cooldown:g})"
        )
