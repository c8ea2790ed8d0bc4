"""Harness for exercise 7: the student's ``Breaker`` on a ``FakeClock``, driven by a script.

A check describes what happens as steps and gets back what the breakers said:

- ``["allow", i]`` -> ``allow()`` of breaker ``i`` (True/False);
- ``["fail", i]`` / ``["ok", i]`` -> ``record_failure()`` / ``record_success()``;
- ``["state", i]`` -> its ``state``;
- ``["advance", s]`` -> the fake clock moves ``s`` seconds;
- ``["wall", s]`` -> from here on the wall clock reads ``s`` seconds later (the fake
  clock does not move: a breaker reading ``time.time()`` gives itself away).

``outage`` runs callers against a dependency that is down for a while; every call the
breaker lets through is written to a SQLite file the check reads itself.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

from labkit.clock import FakeClock
from labkit.grading.exercises.common import fresh_state, need, plain, raised
from labkit.grading.exercises.wallclock import clock_moved, in_time_zone
from labkit.grading.stub import is_stub


def _state(breaker: Any) -> Any:
    state = getattr(breaker, "state", None)
    state = getattr(state, "value", state)  # an Enum of states is fine too
    return state if isinstance(state, (str, type(None))) else repr(state)


def drive(
    values: MutableMapping[str, Any],
    steps: list[list[Any]],
    threshold: int = 3,
    cooldown_s: float = 30.0,
    breakers: int = 1,
    own_clocks: bool = False,
    start: float | None = None,
    tz: str | None = None,
) -> list[Any]:
    """Run ``steps`` on ``breakers`` new breakers sharing one fake clock; one result per step.

    With ``own_clocks`` each breaker has a fake clock of its own, and the step ``["tick",
    i, s]`` moves breaker ``i``'s clock only (``advance`` moves them all). ``start`` is the
    clocks' first reading (epoch seconds); ``tz`` a POSIX ``TZ`` the process runs in for
    the steps (the machine's local time zone, put back after).
    A step whose call raised gives ``{"raised": [...], "message": ...}`` and ends the run.
    """
    clocks = [
        FakeClock() if start is None else FakeClock(start)
        for _ in range(breakers if own_clocks else 1)
    ]
    out: list[Any] = []
    with fresh_state(values), contextlib.ExitStack() as stack:
        if tz is not None:
            stack.enter_context(in_time_zone(tz))
        made = [
            need(values, "Breaker")(
                threshold=threshold, cooldown_s=cooldown_s, clock=clocks[i % len(clocks)]
            )
            for i in range(breakers)
        ]
        for step in steps:
            what, arg = step[0], step[1] if len(step) > 1 else 0
            try:
                if what == "allow":
                    out.append(plain(made[arg].allow()))
                elif what == "fail":
                    made[arg].record_failure()
                    out.append(None)
                elif what == "ok":
                    made[arg].record_success()
                    out.append(None)
                elif what == "state":
                    out.append(_state(made[arg]))
                elif what == "advance":
                    for clock in clocks:
                        clock.advance(float(arg))
                    out.append(None)
                elif what == "tick":
                    clocks[arg % len(clocks)].advance(float(step[2]))
                    out.append(None)
                elif what == "wall":
                    stack.enter_context(clock_moved(values, float(arg)))
                    out.append(None)
                else:
                    raise ValueError(f"unknown step {step!r}")
            except NotImplementedError as exc:
                if is_stub(exc):
                    raise
                out.append(raised(exc))
                break
            except Exception as exc:  # noqa: BLE001 - the student's error is the evidence
                out.append(raised(exc))
                break
    return out


def outage(
    values: MutableMapping[str, Any],
    folder: str,
    callers: int,
    seconds: int,
    down_until: float,
    threshold: int = 3,
    cooldown_s: float = 30.0,
) -> int:
    """``callers`` callers each try once a second for ``seconds`` s through one breaker.

    The dependency fails every call before ``down_until`` and answers after. Each call
    the breaker lets through goes into ``folder/calls.db`` (time, caller, ok); the
    number of calls refused is returned.
    """
    clock = FakeClock()
    db = sqlite3.connect(Path(folder) / "calls.db", isolation_level=None)
    refused = 0
    try:
        db.execute("CREATE TABLE IF NOT EXISTS calls (t REAL, caller INTEGER, ok INTEGER)")
        db.execute("BEGIN")  # one commit at the end: a commit per call is slow on a busy disk
        with fresh_state(values):
            breaker = need(values, "Breaker")(
                threshold=threshold, cooldown_s=cooldown_s, clock=clock
            )
            start = clock.now()
            for _second in range(seconds):
                for caller in range(callers):
                    if not breaker.allow():
                        refused += 1
                        continue
                    t = clock.now() - start
                    ok = t >= down_until
                    db.execute("INSERT INTO calls VALUES (?, ?, ?)", (t, caller, int(ok)))
                    breaker.record_success() if ok else breaker.record_failure()
                clock.advance(1.0)
        db.execute("COMMIT")
    finally:
        db.close()
    return refused
