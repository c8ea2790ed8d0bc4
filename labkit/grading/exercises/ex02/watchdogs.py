"""Exercise 2's harness: a lock's own watchdog, and a refuser's patience, given hours in
milliseconds.

A lock may start a thread, a ``threading.Timer`` or an alarm that lets go of the lock
(closes or deletes the file) after a while, so a job that runs long loses its lock while
it still runs. Here a forked child holds the lock while every sleep and timed wait
returns at once and the clocks (``time``'s and ``datetime``'s) move on, so such a
watchdog fires at once; this process then tries, and must be refused. And the other way
round: a child whose time flies is refused, a minute apart, for weeks of its clocks while
this process holds the lock, and must be refused every time.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import json
import os
import pathlib
import select
import signal
import threading
import time
from collections.abc import Iterator, MutableMapping
from typing import Any

from labkit.grading.exercises.common import fresh_state, need
from labkit.grading.exercises.ex02.forking import (
    REAL_WRITE,
    Said,
    attempt,
    child,
    file_text,
    plain_holder,
)
from labkit.grading.exercises.ex02.holders import NEWCOMER
from labkit.grading.exercises.wallclock import STEADY_CLOCK_IDS

#: The real monotonic clock, for the waits of a child whose time flies (``_time_flies``).
_REAL_MONOTONIC = time.monotonic
#: How long (real seconds) a holder whose time flies keeps its block before saying it
#: still holds: the lock's own threads (a watchdog) run meanwhile, hours passing for them.
#: It says so sooner once its lock is seen free, or once nothing is left that could let
#: go of it (``_let_go``).
FLYING_S = 0.2
#: The least each sleep or timed wait moves the clocks on: a watchdog that looks at the
#: time every second sees an hour go by in four looks, not in 3,600.
LEAP_S = 900.0


#: The clocks ``_time_flies`` moves that count in seconds, and their twins in nanoseconds.
_CLOCKS = ("time", "monotonic", "perf_counter")
_CLOCKS_NS = ("time_ns", "monotonic_ns", "perf_counter_ns")


@contextlib.contextmanager
def _time_flies(values: MutableMapping[str, Any]) -> Iterator[None]:
    """In this (forked) child: every sleep and timed wait returns at once, and the clocks
    move on by what it was to wait, ``LEAP_S`` at least: a watchdog thread or timer of
    seconds or hours fires within milliseconds. The clocks are time.time, time.monotonic
    and time.perf_counter, their ``_ns`` twins, clock_gettime(_ns) of the wall and steady
    clocks, and datetime's now(), utcnow() and today() (a watchdog timed with any of them
    sees the hours go by)."""
    real_sleep, real_wait = time.sleep, threading.Condition.wait
    clocks = {name: getattr(time, name) for name in (*_CLOCKS, *_CLOCKS_NS)}
    gettime = {name: getattr(time, name) for name in ("clock_gettime", "clock_gettime_ns")}
    steady = {getattr(time, n) for n in STEADY_CLOCK_IDS if hasattr(time, n)}
    moving = {time.CLOCK_REALTIME} | steady
    real_datetime, real_date = _dt.datetime, _dt.date
    ahead = [0.0]

    def sleep(seconds: float) -> None:
        ahead[0] += max(LEAP_S, float(seconds))
        real_sleep(0)  # the other threads run meanwhile

    def wait(self: Any, timeout: float | None = None) -> bool:
        if timeout is None:
            return real_wait(self, timeout)
        woken = real_wait(self, min(float(timeout), 0.001))
        if not woken:
            ahead[0] += max(LEAP_S, float(timeout))
        return woken

    def moved(real: Any) -> Any:
        return lambda: real() + ahead[0]

    def moved_ns(real: Any) -> Any:
        return lambda: real() + int(ahead[0] * 1e9)

    def clock_gettime(clock: int) -> float:
        return float(gettime["clock_gettime"](clock) + (ahead[0] if clock in moving else 0.0))

    def clock_gettime_ns(clock: int) -> int:
        later = int(ahead[0] * 1e9) if clock in moving else 0
        return int(gettime["clock_gettime_ns"](clock) + later)

    class Flying(_dt.datetime):
        @classmethod
        def now(cls, tz: Any = None) -> Any:
            return real_datetime.now(tz) + _dt.timedelta(seconds=ahead[0])

        @classmethod
        def utcnow(cls) -> Any:
            now = real_datetime.now(_dt.UTC).replace(tzinfo=None)
            return now + _dt.timedelta(seconds=ahead[0])

        @classmethod
        def today(cls) -> Any:
            return cls.now()

    class FlyingDate(_dt.date):
        @classmethod
        def today(cls) -> Any:
            return real_date.fromtimestamp(clocks["time"]() + ahead[0])

    fast = {
        real_sleep: sleep,
        **{clocks[name]: moved(clocks[name]) for name in _CLOCKS},
        **{clocks[name]: moved_ns(clocks[name]) for name in _CLOCKS_NS},
        gettime["clock_gettime"]: clock_gettime,
        gettime["clock_gettime_ns"]: clock_gettime_ns,
    }
    # The student's own names for the classes (from datetime import datetime, date) too;
    # the module's datetime class is swapped, its date class stays (isinstance checks).
    classes = {real_datetime: Flying, real_date: FlyingDate}
    setattr(time, "sleep", sleep)  # noqa: B010 - a plain assignment does not type-check
    setattr(threading.Condition, "wait", wait)  # noqa: B010
    for name, real in (*clocks.items(), *gettime.items()):
        setattr(time, name, fast[real])
    setattr(_dt, "datetime", Flying)  # noqa: B010
    for name, value in list(values.items()):  # in this child only: it never returns
        for real, moving_one in (*fast.items(), *classes.items()):
            if value is real:
                values[name] = moving_one
    try:
        yield
    finally:
        setattr(time, "sleep", real_sleep)  # noqa: B010
        setattr(threading.Condition, "wait", real_wait)  # noqa: B010
        for name, real in (*clocks.items(), *gettime.items()):
            setattr(time, name, real)
        setattr(_dt, "datetime", real_datetime)  # noqa: B010


def _alarms_ring() -> None:
    """An alarm or interval timer the lock set goes off now (its handler runs here)."""
    if signal.alarm(0):
        signal.raise_signal(signal.SIGALRM)
    delay, _interval = signal.setitimer(signal.ITIMER_REAL, 0)
    if delay:
        signal.raise_signal(signal.SIGALRM)


def _nothing_else_runs() -> bool:
    """No thread but this one and no child process: nothing the lock started is left to
    let go of it later (what one did is done). Unsure (no /proc): False."""
    if threading.active_count() > 1:
        return False
    try:
        tasks = os.listdir("/proc/self/task")
        if len(tasks) > 1:
            return False
        for task in tasks:
            with open(f"/proc/self/task/{task}/children") as children:
                if children.read().strip():
                    return False
    except OSError:
        return False
    return True


def _let_go(path: str, within: float) -> bool:
    """Whether the lock on ``path`` is seen free (a flock on a file of its own succeeds)
    within ``within`` real seconds: looked at every few milliseconds, and once more only
    when nothing else runs in this process (``_nothing_else_runs``)."""
    end = _REAL_MONOTONIC() + within
    while True:
        alone = _nothing_else_runs()  # before the look: what ran before it is seen
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            pass
        finally:
            os.close(fd)
        if alone or _REAL_MONOTONIC() >= end:
            return False
        select.select([], [], [], 0.005)


def attempt_while_time_flies(values: MutableMapping[str, Any], path: str) -> dict[str, Any]:
    """A child holds the lock, and for what the lock started there (a watchdog thread, a
    threading.Timer, signal.alarm) hours go by in milliseconds; then this process tries.

    A lock held for the whole with block refuses; one a watchdog let go of after a few
    seconds lets a second copy run beside a job that still runs. A watchdog that ends the
    job itself (kills the process, raises into it) ends the block: the child then never
    says it still holds. ``{"held": the child still in its block before and after the
    attempt, "answer": the attempt, "child": what the child said first}``.
    """
    with fresh_state(values), contextlib.ExitStack() as stack:
        attempt(values, path)  # here first, so a stub says "not started yet"
        go_read, go_write = os.pipe()
        stack.callback(os.close, go_read)
        stack.callback(os.close, go_write)

        def body(fd: int) -> None:
            try:
                with _time_flies(values), need(values, "single_instance")(path):
                    _alarms_ring()
                    _let_go(path, FLYING_S)
                    REAL_WRITE(fd, b"held\n")
                    select.select([go_read], [], [], 10.0)
                    REAL_WRITE(fd, b"still\n")
            except BaseException as exc:  # noqa: BLE001 - told to the parent
                said = f"raised {type(exc).__name__}: {exc}".replace("\n", " ")[:300]
                REAL_WRITE(fd, said.encode() + b"\n")

        _pid, fd = stack.enter_context(child(body))
        said = Said(fd)
        first = said.next()
        if first != "held":
            return {"held": False, "answer": "", "child": first}
        answer = attempt(values, path)
        os.write(go_write, b"go")
        still = said.next() == "still"
    return {"held": still, "answer": answer, "child": first}


#: How long (real seconds) a holder that left its block waits for what its lock started
#: to end before a newcomer takes the lock: a thread the block stopped finishes its last
#: write first.
SETTLE_S = 0.05


def _settled(within: float) -> None:
    """Wait until nothing but this thread runs here, ``within`` real seconds at most."""
    end = _REAL_MONOTONIC() + within
    while not _nothing_else_runs() and _REAL_MONOTONIC() < end:
        select.select([], [], [], 0.005)


def file_after_the_holder_left_while_time_flies(
    values: MutableMapping[str, Any], path: str
) -> dict[str, Any]:
    """A child takes the lock and leaves its with block; this process, a newcomer, then
    takes the lock (a plain flock) and writes ``NEWCOMER`` in the file, while for what
    the lock started in the child (a heartbeat thread that writes the pid every few
    seconds) hours go by in milliseconds.

    A lock that stops what it started before its block ends leaves the newcomer's text
    alone. ``{"left": what the child said, "file": the file's text after, None when the
    lock was never taken or never let go}``.
    """
    with fresh_state(values), contextlib.ExitStack() as stack:
        attempt(values, path)  # here first, so a stub says "not started yet"
        go_read, go_write = os.pipe()
        stack.callback(os.close, go_read)
        stack.callback(os.close, go_write)

        def body(fd: int) -> None:
            try:
                with _time_flies(values):
                    with need(values, "single_instance")(path):
                        pass
                    _settled(SETTLE_S)
                    REAL_WRITE(fd, b"left\n")
                    select.select([go_read], [], [], 10.0)
                    _settled(FLYING_S)
                    REAL_WRITE(fd, b"done\n")
            except BaseException as exc:  # noqa: BLE001 - told to the parent
                said = f"raised {type(exc).__name__}: {exc}".replace("\n", " ")[:300]
                REAL_WRITE(fd, said.encode() + b"\n")

        _pid, fd = stack.enter_context(child(body))
        said = Said(fd)
        left = said.next()
        if left != "left":
            return {"left": left, "file": None}
        lock = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        stack.callback(os.close, lock)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return {"left": "still held", "file": None}
        os.ftruncate(lock, 0)
        os.pwrite(lock, NEWCOMER.encode(), 0)
        os.write(go_write, b"go")
        said.next()
        return {"left": left, "file": file_text(path)}


#: What the plain holder of ``refusals_while_time_flies`` writes: a pid alive here (init).
ALIVE_HOLDER = "1"


def refusals_while_time_flies(
    values: MutableMapping[str, Any], path: str, tries: int
) -> dict[str, Any]:
    """A plain holder here keeps the lock (its file names pid 1, alive) while a child, a
    scheduler that lives for weeks, tries ``tries`` times with a minute's sleep between
    tries, and for it each sleep lasts ``LEAP_S`` at least: days go by in its clocks.

    No number of refusals in a row, and no time spent refused, makes a held lock stale.
    ``{"refused": how many tries were refused, "others": the first few other answers,
    "days": how long the child's clocks say it tried, "same_file": the holder's file still
    at the path}``.
    """
    with fresh_state(values), contextlib.ExitStack() as stack:
        attempt(values, str(pathlib.Path(path).with_name("probe.lock")))  # a stub says so
        holder = stack.enter_context(plain_holder(path, ALIVE_HOLDER))
        inode = os.fstat(holder.fileno()).st_ino

        def body(fd: int) -> None:
            refused, others = 0, list[str]()
            began = time.time()
            with _time_flies(values):
                for _ in range(tries):
                    said = attempt(values, path)
                    if said.startswith("refused"):
                        refused += 1
                    elif len(others) < 2:
                        others.append(said[:160])
                    time.sleep(60)
                days = (time.time() - began) / 86_400
            told = {"refused": refused, "others": others, "days": round(days, 1)}
            REAL_WRITE(fd, json.dumps(told).encode() + b"\n")

        with child(body) as (_pid, fd):
            told = Said(fd).next(30.0)
        try:
            same = os.stat(path).st_ino == inode
        except OSError:
            same = False
    out: dict[str, Any] = json.loads(told) if told else {"refused": 0, "others": [], "days": 0}
    return {**out, "same_file": same}
