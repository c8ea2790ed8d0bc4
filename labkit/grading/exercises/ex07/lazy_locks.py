"""Exercise 7's race on a lock made on first use: two threads record a new breaker's
first failures, each paused in turn after each of its steps.

A breaker that makes its lock on its first call (``if self._lock is None``), not in
``__init__``, races itself: both threads find none, each makes one and holds its own, and
a failure counted under one lock is written over under the other. The step races of
``steps`` see such a lock only once it exists; this race pauses thread A after its n-th
step and thread B after its m-th, for every n and m up to ``FIRST_STEPS_SWEPT``.
The grading channel reaches it through ``harness``.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, MutableMapping
from typing import Any

from labkit.grading.exercises.common import fresh_state
from labkit.grading.exercises.ex07.races import (
    CALLER_STEP_S,
    _attributes_of,
    _state,
    _WatchedLock,
)
from labkit.grading.exercises.ex07.steps import STEP_WAIT_S, _fail, _made, _new_breaker

#: The most steps of each thread's first record_failure() the paired race stops after.
FIRST_STEPS_SWEPT = 10


def race_at_the_first_failures(
    values: MutableMapping[str, Any], threshold: int = 2
) -> dict[str, Any]:
    """Two threads record the first failures of a new breaker (``threshold`` 2), each
    paused in turn: thread B comes in after A's n-th step, runs up to its own m-th step
    and waits there while A goes on, for every n and m up to ``FIRST_STEPS_SWEPT``.

    Only for a breaker whose lock appears on its first call (made on first use, not in
    ``__init__``): ``{"lazy": False}`` for any other, which the other races judge. A lock
    made on first use races itself: A finds none, B finds none, each makes one and holds
    its own, and a failure counted in one is written over by the other.
    ``{"lazy": True, "runs": [{"after": n, "b_after": m, "state": ..., "A_step": ...,
    "B_step": ...}]}``; each run is to end "open". A lock set on the breaker (or found on
    it at a step) is watched: a thread blocked on it lets the other go on at once.
    """
    with fresh_state(values):
        probe = _made(functools.partial(_new_breaker, values, threshold))
        if probe is None:
            return {"lazy": False}
        before = {id(v) for v in _attributes_of(probe).values() if isinstance(v, _LOCK_TYPES)}
        try:
            _fail(probe)
        except Exception:  # noqa: BLE001 - the other checks show what the code raised
            return {"lazy": False}
        made = [v for v in _attributes_of(probe).values() if isinstance(v, _LOCK_TYPES)]
        if before or not made:
            return {"lazy": False}
        runs: list[dict[str, Any]] = []
        for after in range(1, FIRST_STEPS_SWEPT + 1):
            last = None
            for b_after in range(1, FIRST_STEPS_SWEPT + 1):
                run = _paired_run(values, threshold, after, b_after)
                if run is None:
                    break  # A has no step left to stop after
                runs.append(run)
                last = run
                if not run["b_parked"]:
                    break  # B has no step left to pause at
            if last is None:
                break
    return {"lazy": True, "runs": runs}


_LOCK_TYPES = (type(threading.Lock()), type(threading.RLock()))


def _paired_run(
    values: MutableMapping[str, Any], threshold: int, after: int, b_after: int
) -> dict[str, Any] | None:
    """One run of ``race_at_the_first_failures``; None when A has fewer than ``after`` steps."""
    breaker = _made(functools.partial(_new_breaker, values, threshold))
    if breaker is None:
        return None
    a_id = threading.get_ident()
    b_ids: list[int] = []
    counts = {"A": 0, "B": 0}
    where = {"A": "", "B": ""}
    b_stop = threading.Event()  # B done, parked, or blocked: A goes on
    a_stop = threading.Event()  # A done or blocked: B goes on
    parked = [False]

    def blocked(ident: int) -> None:
        (a_stop if ident == a_id else b_stop).set()

    def watch() -> None:
        for name, value in _attributes_of(breaker).items():
            if isinstance(value, _LOCK_TYPES):
                try:
                    object.__setattr__(
                        breaker, name, _WatchedLock(value, blocked, timed_waits_fail=False)
                    )
                except (AttributeError, TypeError):
                    continue

    def as_b() -> None:
        b_ids.append(threading.get_ident())
        try:
            _fail(breaker)
        except Exception:  # noqa: BLE001 - the other checks show what the code raised
            pass
        finally:
            b_stop.set()

    other = threading.Thread(target=as_b, daemon=True)

    def step(what: str) -> None:
        me = threading.get_ident()
        who = "A" if me == a_id else "B" if b_ids and me == b_ids[0] else ""
        if not who:
            return
        counts[who] += 1
        watch()
        if who == "A" and counts["A"] == after:
            where["A"] = what
            other.start()
            b_stop.wait(STEP_WAIT_S)
        elif who == "B" and counts["B"] == b_after:
            where["B"], parked[0] = what, True
            b_stop.set()
            a_stop.wait(STEP_WAIT_S)

    try:
        breaker.__class__ = _lazy_hooked(type(breaker), step)
    except TypeError:
        return None
    try:
        _fail(breaker)
    except Exception:  # noqa: BLE001 - the other checks show what the code raised
        pass
    a_stop.set()
    if counts["A"] < after:
        return None
    other.join(CALLER_STEP_S)
    return {
        "after": after,
        "b_after": b_after,
        "b_parked": parked[0],
        "B_done": not other.is_alive(),
        "state": _state(breaker),
        "A_step": where["A"],
        "B_step": where["B"],
    }


def _lazy_hooked(base: type, step: Callable[[str], None]) -> type:
    """``base`` whose instances take a ``step`` after each attribute write and each read of a
    data attribute (the instance's or the class's, not a method), a read that finds none
    included (``hasattr(self, "_lock")``, ``if self._lock is None``)."""
    import inspect

    cls: Any = base

    def hooked_set(self: Any, name: str, value: Any) -> None:
        cls.__setattr__(self, name, value)
        step(f"self.{name} = …")

    def hooked_get(self: Any, name: str) -> Any:
        if name.startswith("__"):
            return cls.__getattribute__(self, name)
        try:
            value = cls.__getattribute__(self, name)
        except AttributeError:
            step(f"self.{name} (none yet)")
            raise
        if not inspect.isroutine(value):
            step(f"self.{name}")
        return value

    body: dict[str, Any] = {"__setattr__": hooked_set, "__getattribute__": hooked_get}
    body["__slots__"] = ()
    return type("Hooked", (base,), body)
