"""Two calls of the student's code raced line by line: a small race explorer for functions.

``interleaved`` runs ``first`` in a thread that stops after its k-th line of the
student's own code (the notebook's cells, traced with ``sys.settrace``; labkit's and the
standard library's lines are not counted), for k = 1, 2, ... in turn, while ``second``
runs whole in another thread, then lets ``first`` go on. Every interleaving of one
preemption, in order: state kept at module level (a verdict, an rng, a cache) written
before the stop and read after it shows whatever the machine's timing. It is what
``labkit.explore`` does to the lab's own jobs (every crash point in turn), done to a pair
of calls the lab did not write. Exercise 7's breaker races (``ex07/steps.py``) stop at
attribute reads and writes of one object instead; the process races (``racesweep``)
stop processes at their writes to a database.

A thread blocked on the student's own lock while ``first`` waits is the serialization
working: after ``INTERLEAVE_GRACE_S`` the schedule counts as blocked and ``first`` is
let go, so a slow machine can only miss a schedule, never fail a right solution.
"""

from __future__ import annotations

import sys
import sysconfig
import threading
import types
from collections.abc import Callable, MutableMapping
from pathlib import Path
from typing import Any

import labkit
from labkit.grading.exercises.common import fresh_state

#: How long the second thread may take, while the first waits, before it counts as blocked
#: by the first's lock (a lock held across the call is the serialization working: the first
#: is then let go). The student's functions take microseconds: this is slack, not a bet.
INTERLEAVE_GRACE_S = 0.05
#: How long any one thread may take at all before the schedule is reported as hung.
INTERLEAVE_HANG_S = 5.0


def _student_files(values: MutableMapping[str, Any]) -> set[str]:
    """The files of the student's own functions (the notebook's cells), not labkit's or
    the standard library's: the lines a stopped thread counts."""
    skip = [str(Path(labkit.__file__).parent)]
    skip += [p for p in {sysconfig.get_path("stdlib"), sysconfig.get_path("purelib")} if p]
    files = set()
    for value in list(values.values()):
        funcs = [value] if isinstance(value, types.FunctionType) else []
        if isinstance(value, type):
            funcs = [v for v in vars(value).values() if isinstance(v, types.FunctionType)]
        for func in funcs:
            name = func.__code__.co_filename
            if not any(name.startswith(prefix) for prefix in skip):
                files.add(name)
    return files


def interleaved(
    values: MutableMapping[str, Any],
    first: Callable[[], Any],
    second: Callable[[], Any],
    limit: int = 40,
) -> dict[str, Any]:
    """Two calls, each in a thread of its own, one schedule per stop: ``first`` stopped
    after its line ``k`` of the student's code (k = 1, 2, ... up to ``limit``) while
    ``second`` runs whole, then let go. Every interleaving of one preemption, in order,
    so module-level state written before the stop and read after it shows, whatever the
    machine's timing.

    ``first`` and ``second`` are thunks that call the student's code afresh (each run
    in a fresh module state). Returns ``{"alone": [first, second], "count": lines of
    first alone, "schedules": [{"after", "stopped", "blocked", "first", "second"}]}``,
    each call's result what its thunk returned (or ``{"hung": True}``); what a thunk
    raised is raised again.
    """
    files = _student_files(values)

    def in_thread(run: Any, stop_at: int | None, paused: Any, go: Any) -> dict[str, Any]:
        box: dict[str, Any] = {"lines": 0}

        def local(frame: Any, event: str, arg: Any) -> Any:
            if event == "line":
                box["lines"] += 1
                if box["lines"] == stop_at:
                    paused.set()
                    go.wait(INTERLEAVE_HANG_S)
            return local

        def tracer(frame: Any, event: str, arg: Any) -> Any:
            return local if frame.f_code.co_filename in files else None

        def target() -> None:
            if stop_at is not None:
                sys.settrace(tracer)
            try:
                box["result"] = run()
            except BaseException as exc:  # noqa: BLE001 - the stub, raised again below
                box["stub"] = exc
            finally:
                sys.settrace(None)
                paused.set()

        box["thread"] = threading.Thread(target=target, daemon=True)
        box["thread"].start()
        return box

    def ended(box: dict[str, Any]) -> dict[str, Any]:
        box["thread"].join(INTERLEAVE_HANG_S)
        if "stub" in box:
            raise box["stub"]
        if box["thread"].is_alive() or "result" not in box:
            return {"hung": True}
        return dict(box["result"])

    with fresh_state(values):
        probe = in_thread(first, 10**9, threading.Event(), threading.Event())
        alone_first = ended(probe)
    with fresh_state(values):
        alone_second = ended(in_thread(second, None, threading.Event(), threading.Event()))
    schedules = []
    for stop in range(1, min(probe["lines"], limit) + 1):
        with fresh_state(values):
            paused, go = threading.Event(), threading.Event()
            one = in_thread(first, stop, paused, go)
            paused.wait(INTERLEAVE_HANG_S)
            stopped = one["thread"].is_alive() and "result" not in one
            other = in_thread(second, None, threading.Event(), threading.Event())
            other["thread"].join(INTERLEAVE_GRACE_S if stopped else INTERLEAVE_HANG_S)
            blocked = other["thread"].is_alive()
            go.set()
            schedules.append(
                {
                    "after": stop,
                    "stopped": stopped,
                    "blocked": blocked,
                    "first": ended(one),
                    "second": ended(other),
                }
            )
    return {"alone": [alone_first, alone_second], "count": probe["lines"], "schedules": schedules}
