"""Exercise 7's races: a second thread let into the student's breaker at chosen instants.

``race_at_the_cooldown`` lets thread B ask ``allow()`` while thread A is between its
clock reading and its answer, at the instant the cooldown ends: a breaker with no lock
gives both a trial. ``race_at_the_failed_trial`` lets B ask while the failed trial's
``record_failure()`` reads the clock: a breaker whose ``record_failure`` changes the state
with no lock lets B see the old cooldown over and send a second trial at once.
``result_while_a_call_holds_the_breaker`` has B record a result while A is inside
``allow()``: a result that gives up on a busy lock is lost.

The step races, which let B in after every step of A's call in turn, are in ``steps``.
The grading channel reaches these through ``harness`` (it calls ``exNN.harness`` only).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, MutableMapping
from typing import Any

from labkit.clock import FakeClock
from labkit.grading.exercises.common import fresh_state, need, plain, raised
from labkit.grading.stub import is_stub

#: How long one step on a caller thread may take: a breaker call is microseconds, so a
#: step still running after this is stuck (a lock that another thread was to release).
CALLER_STEP_S = 5.0


def _state(breaker: Any) -> Any:
    state = getattr(breaker, "state", None)
    state = getattr(state, "value", state)  # an Enum of states is fine too
    return state if isinstance(state, (str, type(None))) else repr(state)


class _RacingClock(FakeClock):
    """A fake clock that, once armed for a thread, runs ``hook`` the first time that thread
    reads it: the instant a caller has looked at the time but not yet acted on it."""

    def __init__(self) -> None:
        super().__init__()
        self._armed: tuple[int, Callable[[], None]] | None = None
        self.fired = False

    def arm(self, thread: int, hook: Callable[[], None]) -> None:
        self._armed = (thread, hook)

    def disarm(self) -> None:
        """No hook any more (a call that never read the clock leaves it armed)."""
        self._armed = None

    def _fire(self) -> None:
        """Run the hook, once, if this thread is the one it is armed for."""
        armed = self._armed
        if armed is not None and armed[0] == threading.get_ident():
            self._armed, self.fired = None, True
            armed[1]()

    def now(self) -> float:
        self._fire()
        return super().now()


def race_at_the_cooldown(
    values: MutableMapping[str, Any],
    threshold: int = 3,
    cooldown_s: float = 30.0,
    wait_s: float = 0.1,
) -> dict[str, Any]:
    """Two threads ask ``allow()`` at the instant the cooldown ends; what each got.

    A breaker is opened by ``threshold`` failures and the clock moved ``cooldown_s`` on.
    Thread A calls ``allow()``; the first time A reads the clock, thread B calls
    ``allow()`` too, and A's reading waits up to ``wait_s`` for B to finish. A breaker
    that reads and changes its state with no lock lets B's whole ``allow()`` run inside
    A's (both see "the cooldown is over"); a locked one keeps B waiting until A is done.
    A breaker that never read the clock in A's call gets B's call after A's.
    """
    clock = _RacingClock()
    with fresh_state(values):
        breaker, got = _opened_and_cooled(values, clock, threshold, cooldown_s)
        if breaker is None:
            return got
        _b_asks_at_the_clock_reading(
            breaker, got, clock, wait_s, lambda: _ask_into(breaker, got, "A")
        )
    return got


def race_at_the_failed_trial(
    values: MutableMapping[str, Any],
    threshold: int = 3,
    cooldown_s: float = 30.0,
    wait_s: float = 0.1,
) -> dict[str, Any]:
    """Another thread asks ``allow()`` while the trial's ``record_failure()`` reads the clock.

    A breaker is opened by ``threshold`` failures, the clock moved ``cooldown_s`` on, and
    the trial let out (``allow()``, got as "trial"). The trial fails: the first time its
    ``record_failure()`` reads the clock, thread B calls ``allow()`` (got as "B"), and the
    reading waits up to ``wait_s`` for B. A breaker that changes its state in
    ``record_failure`` with no lock lets B in halfway (the state written, the new opening
    time not yet); a locked one keeps B waiting until the breaker is open again.
    """
    clock = _RacingClock()
    with fresh_state(values):
        breaker, got = _trial_let_out(values, threshold, cooldown_s, clock)
        if "opening" in got:
            return got

        def fail() -> None:
            try:
                breaker.record_failure()
            except Exception as exc:  # noqa: BLE001 - the student's error is the evidence
                got["failure"] = raised(exc)

        _b_asks_at_the_clock_reading(breaker, got, clock, wait_s, fail)
    return got


class _StaleClock(_RacingClock):
    """A racing clock whose hook runs after the reading is taken: the armed thread goes on
    with a time the clock has since left behind (as a caller descheduled right after its
    reading does)."""

    def now(self) -> float:
        value = FakeClock.now(self)
        self._fire()
        return value


def race_at_a_stale_failure_time(
    values: MutableMapping[str, Any],
    threshold: int = 2,
    cooldown_s: float = 30.0,
    late_s: float = 40.0,
    after_s: float = 25.0,
    wait_s: float = 0.1,
    scene: str = "closed",
) -> dict[str, Any]:
    """Thread B's failure opens the breaker while thread A's failure holds an old reading.

    First a probe: does this breaker restart its cooldown on a failure that comes while it
    is open (``got["extends"]``)? Then a breaker ``threshold - 1`` failures from opening
    (``scene`` "closed"), opened ("open"), or opened, ``cooldown_s`` on and its trial let
    out ("trial", what allow() said in ``got["trial"]``): thread A records a failure;
    right after A's first clock reading, the clock moves ``late_s`` on and thread B
    records a failure too (A waits up to ``wait_s`` for it).
    ``after_s`` later, ``allow()`` is asked (``got["C"]``). Whichever of A and B opened it,
    the other came while it was open, at ``late_s`` or later: a breaker that restarts its
    cooldown then refuses. One that read A's time before taking its lock writes that old
    reading after B's opening, and lets a trial out early.
    """
    clock = _StaleClock()
    got: dict[str, Any] = {}
    with fresh_state(values):
        make = need(values, "Breaker")
        try:
            probe_clock = FakeClock()
            probe = make(threshold=threshold, cooldown_s=cooldown_s, clock=probe_clock)
            for _ in range(threshold):
                probe.record_failure()
            probe_clock.advance(late_s - after_s)
            probe.record_failure()
            probe_clock.advance(after_s)
            got["extends"] = plain(probe.allow()) is False
            breaker = make(threshold=threshold, cooldown_s=cooldown_s, clock=clock)
            for _ in range(threshold - 1 if scene == "closed" else threshold):
                breaker.record_failure()
            if scene == "trial":
                clock.advance(cooldown_s)
                got["trial"] = plain(breaker.allow())
                if got["trial"] is not True:
                    return got
        except NotImplementedError as exc:
            if is_stub(exc):
                raise
            return {"opening": raised(exc)}
        except Exception as exc:  # noqa: BLE001 - the student's error is the evidence
            return {"opening": raised(exc)}

        def fail_into(name: str) -> None:
            try:
                breaker.record_failure()
            except Exception as exc:  # noqa: BLE001 - the student's error is the evidence
                got[name] = raised(exc)

        other = threading.Thread(target=fail_into, args=("B",), name="caller-B", daemon=True)

        def b_fails_later() -> None:
            clock.advance(late_s)
            other.start()
            other.join(wait_s)

        clock.arm(threading.get_ident(), b_fails_later)
        fail_into("A")
        clock.disarm()
        got["inside"] = clock.fired
        if not clock.fired:
            return got
        other.join(CALLER_STEP_S)
        got["B_done"] = not other.is_alive()
        if got["B_done"]:
            clock.advance(after_s)
            _ask_into(breaker, got, "C")
    return got


def _b_asks_at_the_clock_reading(
    breaker: Any,
    got: dict[str, Any],
    clock: _RacingClock,
    wait_s: float,
    a_call: Callable[[], None],
) -> None:
    """Run ``a_call`` on this thread (thread A); at its first reading of ``clock``, thread
    B asks ``breaker.allow()`` (into ``got["B"]``) and the reading waits up to ``wait_s``
    for it. A call that never read the clock gets B after it. Then ``got`` says whether B
    came in inside A's call, whether B returned, and the state."""
    other = threading.Thread(
        target=_ask_into, args=(breaker, got, "B"), name="caller-B", daemon=True
    )

    def let_b_in() -> None:
        other.start()
        other.join(wait_s)

    clock.arm(threading.get_ident(), let_b_in)
    a_call()
    clock.disarm()  # reading the state below is not A's call
    got["inside"] = clock.fired
    if not clock.fired:
        other.start()
    other.join(CALLER_STEP_S)
    got["B_done"] = not other.is_alive()
    got["state"] = _state(breaker)


def _trial_let_out(
    values: MutableMapping[str, Any], threshold: int, cooldown_s: float, clock: FakeClock
) -> tuple[Any, dict[str, Any]]:
    """A breaker opened by ``threshold`` failures, ``clock`` moved ``cooldown_s`` on, and
    its trial asked for: the breaker, and ``{"trial": what allow() said}``, or
    ``{"opening": the error}`` when the code raised on the way (the stub's own goes on)."""
    breaker = need(values, "Breaker")(threshold=threshold, cooldown_s=cooldown_s, clock=clock)
    try:
        for _ in range(threshold):
            breaker.record_failure()
        clock.advance(cooldown_s)
        return breaker, {"trial": plain(breaker.allow())}
    except NotImplementedError as exc:
        if is_stub(exc):
            raise
        return breaker, {"opening": raised(exc)}
    except Exception as exc:  # noqa: BLE001 - the student's error is the evidence
        return breaker, {"opening": raised(exc)}


def _opened_and_cooled(
    values: MutableMapping[str, Any], clock: FakeClock, threshold: int, cooldown_s: float
) -> tuple[Any, dict[str, Any]]:
    """A breaker opened by ``threshold`` failures, then the clock moved ``cooldown_s`` on:
    ``(breaker, {"opened": its state})``, or ``(None, {"opening": the error})`` when
    opening it raised (the exercise stub is not caught: "not started yet")."""
    breaker = need(values, "Breaker")(threshold=threshold, cooldown_s=cooldown_s, clock=clock)
    try:
        for _ in range(threshold):
            breaker.record_failure()
    except NotImplementedError as exc:
        if is_stub(exc):
            raise
        return None, {"opening": raised(exc)}
    except Exception as exc:  # noqa: BLE001 - the student's error is the evidence
        return None, {"opening": raised(exc)}
    got: dict[str, Any] = {"opened": _state(breaker)}
    clock.advance(cooldown_s)
    return breaker, got


def _ask_into(breaker: Any, got: dict[str, Any], name: str) -> None:
    """``got[name]``: what ``breaker.allow()`` said, or the error it raised."""
    try:
        got[name] = plain(breaker.allow())
    except Exception as exc:  # noqa: BLE001 - the student's error is the evidence
        got[name] = raised(exc)


#: How long a result waits to be seen either returning or blocked on the breaker's lock
#: when that lock is not a threading.Lock or RLock found on the breaker (one it cannot
#: watch): a right breaker only costs this wait, its result is the same.
UNWATCHED_WAIT_S = 0.5

_LOCK_TYPES = (type(threading.Lock()), type(threading.RLock()))


class _WatchedLock:
    """A breaker's own lock, wrapped: a thread about to block on it calls ``blocked`` first
    (with its ident), so the thread waiting for that goes on; ``after_release`` (when set)
    runs each time it is released (a step, for ``steps``). With ``timed_waits_fail``, a
    wait with a timeout on it while another thread holds it times out at once."""

    def __init__(
        self, inner: Any, blocked: Callable[[int], None], timed_waits_fail: bool = True
    ) -> None:
        self._inner, self._blocked, self._timed_waits_fail = inner, blocked, timed_waits_fail
        self.after_release: Callable[[], None] | None = None

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if self._inner.acquire(False):
            return True
        if not blocking or timeout == 0:
            return False
        self._blocked(threading.get_ident())
        if self._timed_waits_fail and timeout is not None and timeout > 0:
            # A wait with a timeout on a busy lock: the holder may be slower than any
            # timeout (a descheduled thread), so it is taken as timed out, with no sleep.
            return False
        return bool(self._inner.acquire(True, timeout))

    def release(self) -> None:
        self._inner.release()
        if self.after_release is not None:
            self.after_release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)  # locked(), an RLock's _is_owned() ...


def _slot_names(cls: type) -> list[str]:
    """The attributes instances of ``cls`` keep in ``__slots__`` (its own and its bases'),
    by the names they are stored under (``__lock`` in class ``Breaker``: ``_Breaker__lock``)."""
    names: list[str] = []
    for klass in cls.__mro__:
        slots = klass.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name in ("__dict__", "__weakref__"):
                continue
            if name.startswith("__") and not name.endswith("__"):
                name = f"_{klass.__name__.lstrip('_')}{name}"
            names.append(name)
    return names


def _attributes_of(breaker: Any) -> dict[str, Any]:
    """What ``breaker`` holds, name -> value: its ``__dict__`` and its ``__slots__`` that are
    set (a breaker written with ``__slots__`` has no ``vars()``)."""
    held: dict[str, Any] = {}
    for name in _slot_names(type(breaker)):
        try:
            held[name] = object.__getattribute__(breaker, name)
        except AttributeError:
            continue  # a slot never set
    try:
        held.update(object.__getattribute__(breaker, "__dict__"))
    except AttributeError:
        pass
    return held


def _watch_locks(breaker: Any, moved: threading.Event) -> dict[str, _WatchedLock]:
    """Wrap each threading.Lock or RLock kept on ``breaker`` (whatever its name, in its
    ``__dict__`` or its ``__slots__``), or one level down on an object of the student's
    own kept there (``self._s.lock``, state kept in a helper object); the wrapped ones by
    where they are (``_lock``, ``_s.lock``)."""
    found: dict[str, _WatchedLock] = {}
    own = type(breaker).__module__
    for name, value in _attributes_of(breaker).items():
        places = [(name, breaker, value)]
        if not isinstance(value, _LOCK_TYPES) and type(value).__module__ == own:
            places = [
                (f"{name}.{inner}", value, lock) for inner, lock in _attributes_of(value).items()
            ]
        for where, holder, lock in places:
            if not isinstance(lock, _LOCK_TYPES):
                continue
            watched = _WatchedLock(lock, lambda _ident: moved.set())
            try:
                object.__setattr__(holder, where.rsplit(".", 1)[-1], watched)
            except (AttributeError, TypeError):
                continue  # a read-only attribute: the lock stays unwatched
            found[where] = watched
    return found


def result_while_a_call_holds_the_breaker(
    values: MutableMapping[str, Any], result: str, cooldown_s: float = 30.0
) -> dict[str, Any]:
    """Thread B records ``result`` ("ok" or "fail") while thread A is inside ``allow()``.

    A breaker (threshold 1) is opened and the clock moved ``cooldown_s`` on. Thread A
    asks ``allow()``; at its first clock reading (under the breaker's lock, in a locked
    breaker) thread B calls ``record_success()`` or ``record_failure()``, and A's reading
    waits until B has returned or is blocked on the breaker's lock. No sleep decides
    anything: a breaker whose lock is a threading.Lock or RLock on self says when B
    blocks. A breaker that never read the clock in A's call gets B's call after A's.
    What each said, then the state and ``allow()`` now and ``cooldown_s`` later.
    """
    clock = _RacingClock()
    with fresh_state(values):
        breaker, got = _opened_and_cooled(values, clock, 1, cooldown_s)
        if breaker is None:
            return got
        moved = threading.Event()
        watched = _watch_locks(breaker, moved)
        waited = CALLER_STEP_S if watched else UNWATCHED_WAIT_S

        def record() -> None:
            try:
                (breaker.record_success if result == "ok" else breaker.record_failure)()
            except Exception as exc:  # noqa: BLE001 - the student's error is the evidence
                got["B"] = raised(exc)
            finally:
                moved.set()

        b = threading.Thread(target=record, daemon=True)

        def let_b_in() -> None:
            if b.ident is None:  # not started by a run that gave up on A
                b.start()
            moved.wait(waited)

        def ask_as_a() -> None:
            clock.arm(threading.get_ident(), let_b_in)
            _ask_into(breaker, got, "A")

        a = threading.Thread(target=ask_as_a, daemon=True)
        a.start()
        a.join(CALLER_STEP_S + waited)
        if b.ident is None:  # A never read the clock (or never got that far): B after A
            b.start()
        b.join(CALLER_STEP_S)
        got["done"] = not a.is_alive() and not b.is_alive()
        got["state"] = _state(breaker)
        try:
            got["then"] = plain(breaker.allow())
            clock.advance(cooldown_s)
            got["later"] = plain(breaker.allow())
        except Exception as exc:  # noqa: BLE001 - the student's error is the evidence
            got["after"] = raised(exc)
    return got
