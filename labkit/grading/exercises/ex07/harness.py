"""Harness for exercise 7: the student's ``Breaker`` on a ``FakeClock``, driven by a script.

A check describes what happens as steps and gets back what the breakers said:

- ``["allow", i]`` -> ``allow()`` of breaker ``i`` (True/False);
- ``["fail", i]`` / ``["ok", i]`` -> ``record_failure()`` / ``record_success()``;
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
breaker lets through is written to a SQLite file the check reads itself.
``race_at_the_cooldown`` lets a second thread ask ``allow()`` while the first is between
its clock reading and its answer, at the instant the cooldown ends: a breaker with no lock
gives both a trial. ``race_at_the_failed_trial`` lets a second thread ask ``allow()`` while
the failed trial's ``record_failure()`` reads the clock: a breaker whose ``record_failure``
changes the state with no lock lets that thread see the old cooldown over, and send a
second trial at once.
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
from labkit.grading.exercises.wallclock import clock_moved, in_time_zone
from labkit.grading.stub import is_stub

#: How long one step on a caller thread may take: a breaker call is microseconds, so a
#: step still running after this is stuck (a lock that another thread was to release).
CALLER_STEP_S = 5.0


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

        def build(i: int) -> Any:
            return need(values, "Breaker")(
                threshold=threshold, cooldown_s=cooldown_s, clock=clocks[i % len(clocks)]
            )

        made: list[Any] = [build(i) for i in range(breakers)]
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


class _RacingClock(FakeClock):
    """A fake clock that, once armed for a thread, runs ``hook`` the first time that thread
    reads it: the instant a caller has looked at the time but not yet acted on it."""

    def __init__(self) -> None:
        super().__init__()
        self._armed: tuple[int, Callable[[], None]] | None = None
        self.fired = False

    def arm(self, thread: int, hook: Callable[[], None]) -> None:
        self._armed = (thread, hook)

    def now(self) -> float:
        armed = self._armed
        if armed is not None and armed[0] == threading.get_ident():
            self._armed, self.fired = None, True
            armed[1]()
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
        other = threading.Thread(
            target=_ask_into, args=(breaker, got, "B"), name="caller-B", daemon=True
        )

        def let_b_in() -> None:
            other.start()
            other.join(wait_s)

        clock.arm(threading.get_ident(), let_b_in)
        _ask_into(breaker, got, "A")
        got["inside"] = clock.fired
        if not clock.fired:
            other.start()
        other.join(CALLER_STEP_S)
        got["B_done"] = not other.is_alive()
        got["state"] = _state(breaker)
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
        other = threading.Thread(
            target=_ask_into, args=(breaker, got, "B"), name="caller-B", daemon=True
        )

        def let_b_in() -> None:
            other.start()
            other.join(wait_s)

        clock.arm(threading.get_ident(), let_b_in)
        try:
            breaker.record_failure()
        except Exception as exc:  # noqa: BLE001 - the student's error is the evidence
            got["failure"] = raised(exc)
        got["inside"] = clock.fired
        if not clock.fired:
            other.start()
        other.join(CALLER_STEP_S)
        got["B_done"] = not other.is_alive()
        got["state"] = _state(breaker)
    return got


#: The most attribute writes of one record_failure() the write-point race stops after.
WRITES_SWEPT = 8


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
    do. None when the breaker's class cannot be hooked (``__slots__``, a C type)."""
    runs: list[dict[str, Any]] = []
    with fresh_state(values):
        for after in range(1, WRITES_SWEPT + 1):
            got: dict[str, Any] = {"after": after}
            try:
                breaker, opened = _trial_let_out(values, threshold, cooldown_s, FakeClock())
            except NotImplementedError as exc:
                if is_stub(exc):
                    raise
                return runs
            except Exception:  # noqa: BLE001 - the other checks show what the code raised
                return runs
            if opened.get("trial") is not True:
                return runs  # half_open_allows_one_trial says so, or what it raised
            other = threading.Thread(target=_ask_into, args=(breaker, got, "B"), daemon=True)
            writes = [0]
            try:
                breaker.__class__ = _letting_in_after(type(breaker), after, writes, other, wait_s)
            except TypeError:
                return runs
            try:
                breaker.record_failure()
            except Exception as exc:  # noqa: BLE001 - the student's error is the evidence
                got["failure"] = raised(exc)
            if writes[0] < after:
                return runs  # no write left to stop after
            other.join(CALLER_STEP_S)
            got["B_done"] = not other.is_alive()
            got["state"] = _state(breaker)
            runs.append(got)
    return runs


def _letting_in_after(
    base: type, after: int, writes: list[int], other: threading.Thread, wait_s: float
) -> type:
    """``base`` whose instances start ``other`` (and wait ``wait_s`` for it) right after
    this thread's ``after``-th attribute write; ``writes[0]`` counts them."""
    racer = threading.get_ident()
    cls: Any = base  # the student's class: its own __setattr__, if it has one

    def hooked(self: Any, name: str, value: Any) -> None:
        cls.__setattr__(self, name, value)
        if threading.get_ident() == racer:
            writes[0] += 1
            if writes[0] == after:
                other.start()
                other.join(wait_s)

    return type("Hooked", (base,), {"__setattr__": hooked})


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
    """A breaker's own lock, wrapped: ``moved`` is set when a thread blocks on it."""

    def __init__(self, inner: Any, moved: threading.Event) -> None:
        self._inner, self._moved = inner, moved

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if self._inner.acquire(False):
            return True
        if not blocking or timeout == 0:
            return False
        self._moved.set()
        return bool(self._inner.acquire(True, timeout))

    def release(self) -> None:
        self._inner.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)  # locked(), an RLock's _is_owned() ...


def _watch_locks(breaker: Any, moved: threading.Event) -> bool:
    """Wrap each threading.Lock or RLock kept on ``breaker`` (whatever its name)."""
    try:
        attrs = vars(breaker)
    except TypeError:
        return False
    found = False
    for name, value in list(attrs.items()):
        if isinstance(value, _LOCK_TYPES):
            attrs[name] = _WatchedLock(value, moved)
            found = True
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
