"""Harness for exercise 7: the student's ``Breaker`` on a ``FakeClock``, driven by a script.

A check describes what happens as steps and gets back what the breakers said:

- ``["allow", i]`` -> ``allow()`` of breaker ``i`` (True/False);
- ``["fail", i]`` / ``["ok", i]`` -> ``record_failure()`` / ``record_success()``;
- ``["call", i, "ok" | "fail"]`` -> a caller's call through breaker ``i``: ``allow()``
  (what it said is the step's result) and, when it let the call through, the call's
  result recorded; a refused call records nothing, as a caller's does not;
- ``["state", i]`` -> its ``state``;
- ``["advance", s]`` -> the fake clock moves ``s`` seconds;
- ``["renew", i]`` -> breaker ``i`` is dropped and a new one, with the same arguments,
  takes its place: a new object often lands at the address the old one had, so a
  breaker whose state is filed under ``id(self)`` inherits the dead one's;
- ``["wall", s]`` -> from here on the wall clock reads ``s`` seconds later (the fake
  clock does not move: a breaker reading ``time.time()`` gives itself away).
- ``["on", t, step]`` -> ``step`` run on caller thread ``t`` (one thread per ``t``, kept
  for the whole run; the steps still run one at a time, in order): the workers of one
  process share a breaker, and a breaker that keeps its counts per thread gives itself
  away.

``outage`` runs callers against a dependency that is down for a while; every call the
breaker lets through is written to a SQLite file the check reads itself. The races (two
threads in one breaker at chosen instants) are in ``races`` and ``steps``; they are
reached from here, where the grading channel looks for harness functions.
"""

from __future__ import annotations

import contextlib
import queue
import sqlite3
import threading
from collections.abc import Callable, MutableMapping
from pathlib import Path
from typing import Any

from labkit.clock import FakeClock
from labkit.grading.exercises.common import fresh_state, need, plain, raised
from labkit.grading.exercises.ex07.lazy_locks import race_at_the_first_failures
from labkit.grading.exercises.ex07.races import (
    CALLER_STEP_S,
    _state,
    race_at_a_stale_failure_time,
    race_at_the_cooldown,
    race_at_the_failed_trial,
    result_while_a_call_holds_the_breaker,
)
from labkit.grading.exercises.ex07.relocks import (
    locks_through_every_state,
    locks_when_another_breaker_is_made,
)
from labkit.grading.exercises.ex07.steps import (
    race_at_each_step_of_a_failure,
    race_at_each_step_of_a_failure_and_a_success,
    race_at_each_step_of_a_state_read,
    race_at_each_step_of_a_trial_that_fails,
    race_at_each_step_of_the_failed_trial,
    race_at_each_step_of_the_trial,
    race_at_each_step_while_closed,
    race_at_each_write_of_the_failed_trial,
)
from labkit.grading.exercises.wallclock import clock_moved, in_time_zone
from labkit.grading.stub import is_stub

#: The races, for the grading channel (it calls ``exNN.harness`` functions only).
RACES = (
    locks_through_every_state,
    locks_when_another_breaker_is_made,
    race_at_a_stale_failure_time,
    race_at_each_step_of_a_failure,
    race_at_each_step_of_a_failure_and_a_success,
    race_at_each_step_of_a_state_read,
    race_at_each_step_of_a_trial_that_fails,
    race_at_each_step_of_the_failed_trial,
    race_at_each_step_of_the_trial,
    race_at_each_step_while_closed,
    race_at_each_write_of_the_failed_trial,
    race_at_the_cooldown,
    race_at_the_failed_trial,
    race_at_the_first_failures,
    result_while_a_call_holds_the_breaker,
)


class _Caller:
    """One caller thread (a daemon: a step stuck in the student's code never holds the
    process), running the steps it is given one at a time."""

    def __init__(self, number: int) -> None:
        self.number = number
        self.inbox: queue.Queue[tuple[Callable[[], Any], queue.Queue[Any]] | None] = queue.Queue()
        threading.Thread(target=self._serve, name=f"caller-{number}", daemon=True).start()

    def _serve(self) -> None:
        while (item := self.inbox.get()) is not None:
            work, box = item
            try:
                box.put((True, work()))
            except BaseException as exc:  # noqa: BLE001 - handed back to the step that ran it
                box.put((False, exc))

    def call(self, work: Callable[[], Any]) -> Any:
        box: queue.Queue[Any] = queue.Queue(maxsize=1)
        self.inbox.put((work, box))
        try:
            done, value = box.get(timeout=CALLER_STEP_S)
        except queue.Empty:
            raise TimeoutError(
                f"the call on caller thread {self.number} did not return in {CALLER_STEP_S:g} s"
            ) from None
        if not done:
            raise value
        return value

    def stop(self) -> None:
        self.inbox.put(None)


def drive(
    values: MutableMapping[str, Any],
    steps: list[list[Any]],
    threshold: int = 3,
    cooldown_s: float = 30.0,
    breakers: int = 1,
    own_clocks: bool = False,
    start: float | None = None,
    tz: str | None = None,
    settings: list[list[float]] | None = None,
    positional: bool = False,
) -> list[Any]:
    """Run ``steps`` on ``breakers`` new breakers sharing one fake clock; one result per step.

    With ``own_clocks`` each breaker has a fake clock of its own, and the step ``["tick",
    i, s]`` moves breaker ``i``'s clock only (``advance`` moves them all). ``start`` is the
    clocks' first reading (epoch seconds); ``tz`` a POSIX ``TZ`` the process runs in for
    the steps (the machine's local time zone, put back after). ``settings`` gives each
    breaker ``i`` its own ``[threshold, cooldown_s]`` (``settings[i]``), in place of the
    ones they all share. With ``positional`` the breakers are made as the contract writes
    it, ``Breaker(threshold, cooldown_s, clock)``, with no keywords; a breaker that cannot
    be made so (a keyword-only signature) gives ``[{"not_made": the error}]``.
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

        def build(i: int) -> Any:
            own, cooldown = (threshold, cooldown_s) if settings is None else settings[i]
            clock = clocks[i % len(clocks)]
            if positional:
                return need(values, "Breaker")(int(own), float(cooldown), clock)
            return need(values, "Breaker")(
                threshold=int(own), cooldown_s=float(cooldown), clock=clock
            )

        if positional:
            try:
                made: list[Any] = [build(i) for i in range(breakers)]
            except TypeError as exc:
                return [{"not_made": raised(exc)}]
        else:
            made = [build(i) for i in range(breakers)]
        callers: dict[int, _Caller] = {}

        def stop_callers() -> None:
            for caller in callers.values():
                caller.stop()

        stack.callback(stop_callers)

        def one(step: list[Any]) -> Any:
            what, arg = step[0], step[1] if len(step) > 1 else 0
            if what == "allow":
                return plain(made[arg].allow())
            if what == "fail":
                made[arg].record_failure()
            elif what == "ok":
                made[arg].record_success()
            elif what == "call":
                allowed = made[arg].allow()
                if allowed:
                    (made[arg].record_success if step[2] == "ok" else made[arg].record_failure)()
                return plain(allowed)
            elif what == "state":
                return _state(made[arg])
            elif what == "advance":
                for clock in clocks:
                    clock.advance(float(arg))
            elif what == "renew":
                made[arg] = None  # freed here (no cycle: no gc.collect(), which is slow)
                made[arg] = build(arg)
            elif what == "tick":
                clocks[arg % len(clocks)].advance(float(step[2]))
            elif what == "wall":
                stack.enter_context(clock_moved(values, float(arg)))
            elif what == "on":
                if arg not in callers:
                    callers[arg] = _Caller(arg)
                return callers[arg].call(lambda: one(step[2]))
            else:
                raise ValueError(f"unknown step {step!r}")
            return None

        for step in steps:
            try:
                out.append(one(step))
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
