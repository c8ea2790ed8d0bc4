"""Exercise 7's scene on a lock swapped for a new one: is the breaker's lock made once?

A breaker that puts a new lock on ``self`` during a call (``self.__init__(...)`` to reset
on a success, ``self._lock = threading.Lock()`` on opening or closing) while a thread
waits on the old one lets that thread in under the old lock alongside a thread that takes
the new one: two callers inside the breaker at once. This scene takes one breaker through
every change of state (closed, open, refused, half open, the trial, a failed trial, a
successful one, a late result) in one thread and notes, after each call, each
threading.Lock or RLock kept on it (on ``self`` or one level down in a helper object of
the student's); a lock that was there before a call and is another object after it is
a swapped lock. No thread, no sleep. The grading channel reaches it through ``harness``.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from labkit.clock import FakeClock
from labkit.grading.exercises.common import fresh_state, need, raised
from labkit.grading.exercises.ex07.races import _LOCK_TYPES, _attributes_of
from labkit.grading.stub import is_stub

#: The calls, (what, argument): "fail", "ok", "allow", or "advance" the clock that many
#: seconds; threshold 2, cooldown 30 s. A failed trial, then a successful one, then a
#: late success and a late failure while open, then a trial that closes it.
TOUR: tuple[tuple[str, float], ...] = (
    ("allow", 0),
    ("ok", 0),
    ("fail", 0),
    ("fail", 0),
    ("allow", 0),
    ("advance", 30.0),
    ("allow", 0),
    ("allow", 0),
    ("fail", 0),
    ("advance", 30.0),
    ("allow", 0),
    ("ok", 0),
    ("allow", 0),
    ("fail", 0),
    ("fail", 0),
    ("ok", 0),
    ("fail", 0),
    ("fail", 0),
    ("fail", 0),
    ("advance", 30.0),
    ("allow", 0),
    ("ok", 0),
)


def _locks_on(breaker: Any) -> dict[str, Any]:
    """Each threading.Lock or RLock kept on ``breaker``, by where (``_lock``, ``_s.lock``)."""
    found: dict[str, Any] = {}
    own = type(breaker).__module__
    for name, value in _attributes_of(breaker).items():
        if isinstance(value, _LOCK_TYPES):
            found[name] = value
        elif type(value).__module__ == own:
            for inner, lock in _attributes_of(value).items():
                if isinstance(lock, _LOCK_TYPES):
                    found[f"{name}.{inner}"] = lock
    return found


def locks_through_every_state(values: MutableMapping[str, Any]) -> dict[str, Any]:
    """``TOUR`` on a new breaker: ``{"swapped": {"where", "call", "step", "state"}}`` for
    the first call after which a lock kept on the breaker is another object, or
    ``{"swapped": None}``; ``{"raised": ...}`` when a call raised (the other checks say
    what)."""
    clock = FakeClock()
    with fresh_state(values):
        try:
            breaker = need(values, "Breaker")(threshold=2, cooldown_s=30.0, clock=clock)
            before = _locks_on(breaker)
            for number, (what, arg) in enumerate(TOUR, start=1):
                if what == "advance":
                    clock.advance(arg)
                    continue
                state = getattr(breaker, "state", None)
                state = getattr(state, "value", state)
                {"allow": breaker.allow, "fail": breaker.record_failure}.get(
                    what, breaker.record_success
                )()
                after = _locks_on(breaker)
                for where, lock in before.items():
                    if where in after and after[where] is not lock:
                        return {
                            "swapped": {
                                "where": where,
                                "call": what,
                                "step": number,
                                "state": state if isinstance(state, str) else repr(state),
                            }
                        }
                before = {**before, **after}
        except NotImplementedError as exc:
            if is_stub(exc):
                raise
            return {"raised": raised(exc)}
        except Exception as exc:  # noqa: BLE001 - the student's error is the evidence
            return {"raised": raised(exc)}
    return {"swapped": None}


def _shared_locks(breaker: Any, values: MutableMapping[str, Any]) -> dict[str, Any]:
    """Each threading.Lock or RLock a breaker can reach: on it (``_locks_on``), on its
    class or a base the notebook wrote (``Breaker._lock``), or a module-level name of the
    notebook (``_LOCK``); by where it is."""
    found = dict(_locks_on(breaker))
    own = type(breaker).__module__
    for klass in type(breaker).__mro__:
        if klass.__module__ != own:
            continue
        for name, value in vars(klass).items():
            if isinstance(value, _LOCK_TYPES):
                found[f"{klass.__name__}.{name}"] = value
    for name, value in values.items():
        if isinstance(value, _LOCK_TYPES):
            found[name] = value
    return found


def locks_when_another_breaker_is_made(values: MutableMapping[str, Any]) -> dict[str, Any]:
    """A breaker made (threshold 2, cooldown 30 s) and used once, then a second one made
    for another dependency (threshold 5, cooldown 60 s): ``{"swapped": where}`` when a lock
    the first breaker reaches (on itself, its class or the notebook's module) is another
    object after the second was made, else ``{"swapped": None}``; ``{"raised": ...}`` when
    the student's code raised (the other checks say what)."""
    with fresh_state(values):
        try:
            make = need(values, "Breaker")
            first = make(threshold=2, cooldown_s=30.0, clock=FakeClock())
            first.record_failure()
            before = _shared_locks(first, values)
            make(threshold=5, cooldown_s=60.0, clock=FakeClock())
            after = _shared_locks(first, values)
        except NotImplementedError as exc:
            if is_stub(exc):
                raise
            return {"raised": raised(exc)}
        except Exception as exc:  # noqa: BLE001 - the student's error is the evidence
            return {"raised": raised(exc)}
    for where, lock in before.items():
        if where in after and after[where] is not lock:
            return {"swapped": where}
    return {"swapped": None}
