"""Exercise 7's step races: a second thread let in after each step of a breaker call in turn.

``races`` lets thread B in at one chosen instant of thread A's call. A breaker can be
wrong between any two of its steps, though: a trial flag set after the lock is released,
a failure counted before the lock is taken. The step races
(``race_at_each_step_of_the_trial``, ``race_at_each_step_of_a_failure``) run A's call
once per step and let B in right after A's n-th step (an attribute of the breaker read or
written, counted on A's thread only), for every n in turn, up to ``STEPS_SWEPT``: B's call
either runs whole inside A's (the state was not locked there) or blocks on the breaker's
lock until A is done. When that lock is a threading.Lock or RLock kept on the breaker, B
is seen to block (``_watch_locks``), so no sleep decides anything; a lock kept elsewhere
costs a short wait per step. ``race_at_each_write_of_the_failed_trial`` is the same with B
let in after each attribute write of the failed trial's ``record_failure()``.

The grading channel reaches these through ``harness`` (it calls ``exNN.harness`` only).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, MutableMapping
from typing import Any

from labkit.clock import FakeClock
from labkit.grading.exercises.common import fresh_state, need, plain, raised
from labkit.grading.exercises.ex07.races import (
    CALLER_STEP_S,
    _ask_into,
    _opened_and_cooled,
    _slot_names,
    _state,
    _trial_let_out,
    _watch_locks,
)
from labkit.grading.stub import is_stub

#: The most attribute writes of one record_failure() the write-point race stops after.
WRITES_SWEPT = 8
#: The most steps (attribute reads and writes, lock releases) of one call the step races
#: stop after when the breaker's lock is watched (a step costs no wait): a long call (a
#: breaker keeping metrics) can be unlocked late, after its 16th step.
STEPS_SWEPT = 64
#: The same for a breaker whose lock this cannot watch (each step may wait STEP_WAIT_S).
UNWATCHED_STEPS_SWEPT = 16
#: The longest thread A waits at a step for B to return or block on the breaker's lock:
#: a lock this cannot watch (kept elsewhere) costs this per step, a watched one nothing.
STEP_WAIT_S = 0.2


def race_at_each_write_of_the_failed_trial(
    values: MutableMapping[str, Any],
    threshold: int = 3,
    cooldown_s: float = 30.0,
    wait_s: float = 0.05,
) -> list[dict[str, Any]]:
    """``race_at_the_failed_trial`` with B let in right after each attribute write of the
    trial's ``record_failure()`` in turn, not at its clock read: a breaker that reads the
    clock first, then writes its state with no lock, is halfway only between two writes
    (the state "open", the opening time still the old one). One breaker per write, up to
    ``WRITES_SWEPT``: ``[{"after": n, "B": ..., "state": ...}]``, ending where the writes
    do; empty when the breaker's class cannot be hooked (a C type)."""
    runs: list[dict[str, Any]] = []
    with fresh_state(values):
        for after in range(1, WRITES_SWEPT + 1):
            got: dict[str, Any] = {"after": after}
            made = _made(lambda: _trial_let_out(values, threshold, cooldown_s, FakeClock()))
            if made is None:
                return runs
            breaker, opened = made
            if opened.get("trial") is not True:
                return runs  # half_open_allows_one_trial says so, or what it raised
            other = threading.Thread(target=_ask_into, args=(breaker, got, "B"), daemon=True)

            def let_in(other: threading.Thread = other) -> None:
                other.start()
                other.join(wait_s)

            steps = [0]
            try:
                breaker.__class__ = _hooked(type(breaker), _stepper(after, steps, let_in))
            except TypeError:
                return runs
            try:
                breaker.record_failure()
            except Exception as exc:  # noqa: BLE001 - the student's error is the evidence
                got["failure"] = raised(exc)
            if steps[0] < after:
                return runs  # no write left to stop after
            other.join(CALLER_STEP_S)
            got["B_done"] = not other.is_alive()
            got["state"] = _state(breaker)
            runs.append(got)
    return runs


def race_at_each_step_of_the_trial(
    values: MutableMapping[str, Any], threshold: int = 3, cooldown_s: float = 30.0
) -> list[dict[str, Any]]:
    """Two threads ask ``allow()`` when the cooldown is over, B let in after A's n-th step.

    For each n, a breaker opened by ``threshold`` failures and its clock moved
    ``cooldown_s`` on; thread A asks ``allow()`` and B asks too right after A's n-th step
    (an attribute of the breaker read or written, or its lock released).
    ``[{"after": n, "A": ..., "B": ..., "B_done": ..., "step": its words}]``, ending where
    A's steps do (empty when the breaker's class cannot be hooked). A breaker that
    takes the trial under its lock answers True to one of them whatever n is; one that
    marks the trial taken after releasing the lock lets B in between and says True twice.
    """

    def fresh() -> Any:
        return _opened_and_cooled(values, FakeClock(), threshold, cooldown_s)[0]

    return _sweep(values, _allow, _allow, fresh)


def race_at_each_step_of_a_trial_that_fails(
    values: MutableMapping[str, Any], threshold: int = 3, cooldown_s: float = 30.0
) -> list[dict[str, Any]]:
    """``race_at_each_step_of_the_trial`` with B's trial failing at once: when B is let
    out, it records a failure (the dependency still down, the call refused at once)
    before returning. ``[{"after": n, "A": ..., "B": ..., "B_done": ..., "then": a
    third caller's allow()}]``: True for one of A and B whatever n is, and False for the
    third (open again, a fresh cooldown). An allow() that reads the clock under one
    ``with self._lock:`` and half-opens or takes the trial under a second one lets B's
    whole trial run between the two: A half-opens the breaker B's failure just opened
    again and sends a second trial in the fresh cooldown."""

    def fresh() -> Any:
        return _opened_and_cooled(values, FakeClock(), threshold, cooldown_s)[0]

    return _sweep(values, _allow, _allow_and_fail, fresh, _allow)


def race_at_each_step_of_the_failed_trial(
    values: MutableMapping[str, Any], threshold: int = 3, cooldown_s: float = 30.0
) -> list[dict[str, Any]]:
    """The trial (let out ``cooldown_s`` after the opening) fails: thread A records it and
    thread B asks ``allow()`` right after A's n-th step (an attribute read or written, or
    a lock released). ``[{"after": n, "A": ..., "B": ..., "state": ...}]``: B is refused
    whatever n is (the trial is out, or the breaker open again). A ``record_failure()``
    that opens the breaker in one ``with self._lock:`` and sets the opening time in
    another shows B, between the two, the old cooldown over: a second trial."""

    def fresh() -> Any:
        breaker, opened = _trial_let_out(values, threshold, cooldown_s, FakeClock())
        if opened.get("trial") is not True:
            raise ValueError("no trial")  # half_open_allows_one_trial says so
        return breaker

    return _sweep(values, _fail, _allow, fresh)


def race_at_each_step_of_a_state_read(
    values: MutableMapping[str, Any], threshold: int = 3, cooldown_s: float = 30.0
) -> list[dict[str, Any]]:
    """Thread A reads ``state`` when the cooldown is over (nobody has asked ``allow()``
    yet) and thread B asks ``allow()`` right after A's n-th step; then one more
    ``allow()``. ``[{"after": n, "A": the state read, "B": ..., "then": ...}]``: B gets
    the trial and the next caller does not, whatever n is. A ``state`` property that
    half-opens the breaker (and frees the trial) with no lock writes over the trial B
    took in between, and the next caller gets a second one."""

    def fresh() -> Any:
        return _opened_and_cooled(values, FakeClock(), threshold, cooldown_s)[0]

    return _sweep(values, _state, _allow, fresh, _allow)


def race_at_each_step_while_closed(
    values: MutableMapping[str, Any], threshold: int = 3
) -> list[dict[str, Any]]:
    """Two threads ask ``allow()`` of a new (closed) breaker, B let in after A's n-th step;
    ``[{"after": n, "A": ..., "B": ..., "state": ...}]``. Both get True whatever n is: a
    breaker whose allow() gives up when another thread holds its lock
    (``acquire(blocking=False)``, a short timeout) refuses calls while closed."""

    return _sweep(values, _allow, _allow, functools.partial(_new_breaker, values, threshold))


def race_at_each_step_of_a_failure(
    values: MutableMapping[str, Any], threshold: int = 2
) -> list[dict[str, Any]]:
    """Two threads record a failure on a new breaker (``threshold`` 2), B let in after A's
    n-th step; ``[{"after": n, "A": ..., "B": ..., "state": ...}]``. Both failures count
    whatever n is, and the breaker is open; one that counts ``self.failures += 1`` before
    taking its lock (or reads the count under it and writes it after) loses one of them."""

    return _sweep(values, _fail, _fail, functools.partial(_new_breaker, values, threshold))


def race_at_each_step_of_a_failure_and_a_success(
    values: MutableMapping[str, Any], threshold: int = 3, first: str = "fail", trial: bool = False
) -> list[dict[str, Any]]:
    """Thread A records a failure and thread B a success (``first`` "ok": the other way
    round) on a breaker one failure short of ``threshold`` (with ``trial``: opened, 30 s
    on and its trial let out), B let in after A's n-th step; then one more failure.
    ``[{"after": n, "A": ..., "B": ..., "state": ..., "then": the state after it}]``, each
    to end as the two one after the other do (the check runs them so, with ``drive``). A
    success whose reset of the count and closing are not one locked step with the
    failure's count lets the failure write back the count it read before the reset, or
    open the breaker it closed; a failure that reads the state before its lock opens the
    breaker a success just closed."""

    def failed_before() -> Any:
        if trial:
            return _trial_let_out(values, threshold, 30.0, FakeClock())[0]
        breaker = _new_breaker(values, threshold)
        for _ in range(threshold - 1):
            _fail(breaker)
        return breaker

    def then_fail(breaker: Any) -> Any:
        _fail(breaker)
        return _state(breaker)

    calls = (_fail, _succeed) if first == "fail" else (_succeed, _fail)
    return _sweep(values, *calls, failed_before, then_fail)


def _new_breaker(values: MutableMapping[str, Any], threshold: int) -> Any:
    """A new (closed) breaker of the student's class on a fake clock, cooldown 30 s."""
    return need(values, "Breaker")(threshold=threshold, cooldown_s=30.0, clock=FakeClock())


def _fail(breaker: Any) -> None:
    breaker.record_failure()


def _succeed(breaker: Any) -> None:
    breaker.record_success()


def _allow(breaker: Any) -> Any:
    return breaker.allow()


def _allow_and_fail(breaker: Any) -> Any:
    """A caller's call to a dependency still down: allow(), and the failure when let out."""
    let_out = breaker.allow()
    if let_out is True:
        breaker.record_failure()
    return let_out


def _sweep(
    values: MutableMapping[str, Any],
    a_call: Callable[[Any], Any],
    b_call: Callable[[Any], Any],
    fresh: Callable[[], Any],
    then: Callable[[Any], Any] | None = None,
) -> list[dict[str, Any]]:
    """Run ``a_call`` on a breaker from ``fresh`` once per step, B's ``b_call`` let in after
    its n-th step; with ``then``, what it returns of the breaker once both are done."""
    runs: list[dict[str, Any]] = []
    with fresh_state(values):
        sweep = STEPS_SWEPT
        after = 0
        while after < sweep:
            after += 1
            got: dict[str, Any] = {"after": after}
            breaker = _made(fresh)
            if breaker is None:
                return runs  # making or opening it raised: the other checks say so
            moved = threading.Event()
            locks = _watch_locks(breaker, moved)
            if not locks:
                sweep = UNWATCHED_STEPS_SWEPT

            def as_b(breaker: Any = breaker, got: dict[str, Any] = got,
                     moved: threading.Event = moved) -> None:  # fmt: skip
                try:
                    got["B"] = plain(b_call(breaker))
                except Exception as exc:  # noqa: BLE001 - the student's error is the evidence
                    got["B"] = raised(exc)
                finally:
                    moved.set()

            other = threading.Thread(target=as_b, daemon=True)

            def let_in(other: threading.Thread = other, moved: threading.Event = moved) -> None:
                other.start()
                # Until B has returned or blocks on the breaker's lock; bounded, for a
                # lock this cannot watch (one kept elsewhere, beside an unused one here).
                moved.wait(STEP_WAIT_S)

            steps: list[int] = [0]
            where: list[str] = []
            step = _stepper(after, steps, let_in, where)
            for name, lock in locks.items():  # "just after the release" is a step
                lock.after_release = functools.partial(step, f"self.{name}.release()")
            try:
                breaker.__class__ = _hooked(type(breaker), step, reads=True)
            except TypeError:
                return runs
            try:
                got["A"] = plain(a_call(breaker))
            except Exception as exc:  # noqa: BLE001 - the student's error is the evidence
                got["A"] = raised(exc)
            if steps[0] < after:
                return runs  # no step left to stop after
            other.join(CALLER_STEP_S)
            got["B_done"] = not other.is_alive()
            got["state"] = _state(breaker)
            got["step"] = where[0] if where else ""
            if then is not None and got["B_done"]:
                try:
                    got["then"] = then(breaker)
                except Exception as exc:  # noqa: BLE001 - the student's error is the evidence
                    got["then"] = raised(exc)
            runs.append(got)
    return runs


def _made(make: Callable[[], Any]) -> Any:
    """What ``make`` (the student's breaker, set up) returns; None when it raised (the other
    checks say what), except the exercise stub's own error, which goes on."""
    try:
        return make()
    except NotImplementedError as exc:
        if is_stub(exc):
            raise
        return None
    except Exception:  # noqa: BLE001 - the other checks show what the code raised
        return None


def _stepper(
    after: int, steps: list[int], let_in: Callable[[], None], where: list[str] | None = None
) -> Callable[[str], None]:
    """A step counter for this thread: calls ``let_in`` at its ``after``-th step, whose
    words (code: ``self.failures``, ``self.state = …``) go to ``where``; ``steps[0]``
    counts them."""
    racer = threading.get_ident()

    def step(what: str) -> None:
        if threading.get_ident() == racer:
            steps[0] += 1
            if steps[0] == after:
                if where is not None:
                    where.append(what)
                let_in()

    return step


def _hooked(base: type, step: Callable[[str], None], reads: bool = False) -> type:
    """``base`` whose instances take a ``step`` right after each attribute write (and, with
    ``reads``, each read of an attribute the instance holds)."""
    cls: Any = base  # the student's class: its own __setattr__, if it has one
    slotted = frozenset(_slot_names(base))

    def held(self: Any, name: str) -> bool:
        if name in slotted:
            return True
        try:
            return name in object.__getattribute__(self, "__dict__")
        except AttributeError:  # a breaker with __slots__ only
            return False

    def hooked_set(self: Any, name: str, value: Any) -> None:
        cls.__setattr__(self, name, value)
        step(f"self.{name} = …")

    def hooked_get(self: Any, name: str) -> Any:
        value = cls.__getattribute__(self, name)
        if not name.startswith("__") and held(self, name):
            step(f"self.{name}")
        return value

    # No __dict__ of its own (__slots__ empty): the same layout as ``base``, so a breaker
    # written with __slots__ can take this class too.
    body: dict[str, Any] = {"__setattr__": hooked_set, "__slots__": ()}
    if reads:
        body["__getattribute__"] = hooked_get
    return type("Hooked", (base,), body)
