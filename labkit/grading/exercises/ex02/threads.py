"""Exercise 2's harness: threads of one process at the lock.

flock belongs to an open file, not to a thread: another thread of the holder's process
that opens the file itself is refused at once, as a second process is (one that waits,
behind a module-level threading lock, runs the job again once the holder leaves); and
another job's lock, on another file, is free to another thread while the first is held.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import MutableMapping
from typing import Any

from labkit.grading.exercises.common import fresh_state, need, noted
from labkit.grading.exercises.ex02.forking import attempt


def attempt_from_a_thread_while_holding(
    values: MutableMapping[str, Any], path: str, patience: float
) -> dict[str, Any]:
    """Hold the lock here while another thread of this process tries; let go after
    ``patience`` s without its answer, then wait for it a while.

    flock belongs to an open file, not to a thread: a thread that opens the file itself
    is refused at once, as a second process is. A lock that makes this process's threads
    take turns first (a module-level threading.Lock or RLock) keeps the thread waiting,
    and it runs the job once the holder leaves. ``{"answer": ..., "while_held": bool}``
    (``answer`` "" when the thread had not answered even after the holder left). The
    scene of ``other_lock_from_a_thread_while_holding``, with one file for both threads.
    """
    return other_lock_from_a_thread_while_holding(values, path, path, patience)


#: Calls a thread waits in: a lock's acquire (an Event's or a Condition's wait goes through
#: it) and a sleep before trying again.
_WAITS = frozenset({"acquire", "sleep"})


def attempt_from_a_thread_as_the_holder_leaves(
    values: MutableMapping[str, Any], path: str, patience: float
) -> dict[str, Any]:
    """Hold the lock here while another thread of this process tries; let go the moment
    that thread is found waiting (inside a lock's acquire, or a sleep, having let go of the
    GIL), or once it answered, or after ``patience`` s.

    A thread that refuses at once answers while the lock is held. One that waits a while
    (``acquire(timeout=0.5)`` on a lock the holder's thread holds, a sleep and a retry)
    gets the lock the holder let go of, and runs the job right after it. A non-blocking
    acquire never lets go of the GIL: it is never found waiting. ``{"answer": ...,
    "waited": bool}``.
    """
    out: dict[str, Any] = {"answer": "", "waited": False}
    calls: dict[str, Any] = {"in": None}

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "c_call" and getattr(arg, "__name__", "") in _WAITS:
            calls["in"] = arg  # the last statement: no other thread runs before the call
        elif event in ("c_return", "c_exception"):
            calls["in"] = None

    def other() -> None:
        sys.setprofile(profile)
        try:
            out["answer"] = attempt(values, path)
        finally:
            sys.setprofile(None)

    def waiting(thread: threading.Thread) -> bool:
        # This thread holds the GIL: the other one, inside a waiting call and not in
        # ``profile`` itself, let go of it in that call, so the call waits.
        top = sys._current_frames().get(thread.ident or 0)
        return calls["in"] is not None and top is not None and top.f_code is not profile.__code__

    with fresh_state(values):
        attempt(values, path)  # here first, so a stub says "not started yet"
        thread = threading.Thread(target=other, daemon=True)
        with noted(out), need(values, "single_instance")(path):
            thread.start()
            deadline = time.monotonic() + patience
            while thread.is_alive() and time.monotonic() < deadline:
                if waiting(thread):
                    out["waited"] = True
                    break
                time.sleep(0.001)
        thread.join(5.0)
    return out


def other_lock_from_a_thread_while_holding(
    values: MutableMapping[str, Any], first: str, second: str, patience: float
) -> dict[str, Any]:
    """Hold the lock on ``first`` here while another thread of this process takes the lock
    on ``second``, another job's (a scheduler that runs its jobs on threads); let go after
    ``patience`` s without its answer, then wait for it a while.

    Nobody holds ``second``: the thread takes it, whatever this thread holds. A lock that
    makes the process's threads take turns at every lock (one module-level threading lock
    for all paths) refuses it, or keeps it waiting until this one leaves, and that job
    does not run while the other one does. ``{"answer": what the thread got, "while_held":
    whether it answered while ``first`` was held, "error"?: ...}``.
    """
    out: dict[str, Any] = {"answer": ""}

    def other() -> None:
        out["answer"] = attempt(values, second)

    with fresh_state(values):
        attempt(values, first)  # here first, so a stub says "not started yet"
        thread = threading.Thread(target=other, daemon=True)
        with noted(out), need(values, "single_instance")(first):
            thread.start()
            thread.join(patience)
            out["while_held"] = not thread.is_alive()
        thread.join(5.0)
    return out
