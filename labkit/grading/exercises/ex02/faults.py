"""Exercise 2's harness: faults around the lock's own calls, in a process that lives on.

A disk that is full (here: a child whose files may not grow, ``RLIMIT_FSIZE`` 0) makes
the write of the holder's pid fail once the flock is taken. The attempt then raises, and
must let go of the lock on that way out too: a scheduler keeps the error (a Future, a
log record's traceback), and with it whatever the lock's code left open. And a
descriptor the lock closed is the next one another thread opens: closed twice, it is
another job's lock that goes.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pathlib
import resource
import select
import signal
from collections.abc import MutableMapping
from typing import Any

from labkit.grading.exercises.common import fresh_state, need
from labkit.grading.exercises.ex02.forking import REAL_WRITE, Said, attempt, child, plain_holder


def attempt_after_a_failed_start(values: MutableMapping[str, Any], path: str) -> dict[str, Any]:
    """A child whose files may not grow tries the lock (writing its pid fails with EFBIG,
    as on a full disk), keeps what came out of it, and lives on; then this process tries.

    Nobody runs the job: this process takes the lock, unless the failed attempt kept it
    (the file closed only in a finally around the ``yield``, or a descriptor never closed
    when the write raised). ``{"child": what the child's attempt got, "answer": this
    process's attempt}``.
    """
    with fresh_state(values), contextlib.ExitStack() as stack:
        attempt(values, str(pathlib.Path(path).with_name("probe.lock")))  # a stub says so
        go_read, go_write = os.pipe()
        stack.callback(os.close, go_read)
        stack.callback(os.close, go_write)

        def body(fd: int) -> None:
            kept: list[BaseException] = []  # what a scheduler keeps of a failed run
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of the signal
            _soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
            resource.setrlimit(resource.RLIMIT_FSIZE, (0, hard))
            try:
                with need(values, "single_instance")(path):
                    pass
                said = "acquired"
            except BaseException as exc:  # noqa: BLE001 - kept, as a Future keeps it
                kept.append(exc)
                said = f"raised {type(exc).__name__}: {exc}"
            REAL_WRITE(fd, said.replace("\n", " ")[:300].encode() + b"\n")
            select.select([go_read], [], [], 10.0)

        _pid, fd = stack.enter_context(child(body))
        first = Said(fd).next(10.0)
        answer = attempt(values, path)
        os.write(go_write, b"go")
    return {"child": first, "answer": answer}


def _attempt_as_another_lock_reuses(
    values: MutableMapping[str, Any], path: str, other: str
) -> tuple[str, bool, bool]:
    """One attempt; the first descriptor it closes with ``os.close`` is given at once to a
    plain flock on ``other``. ``(answer, reused, kept)``: whether a descriptor was given,
    and whether the other lock's was still open (and so its lock held) after the attempt."""
    real_close = os.close
    given: dict[str, int] = {}

    def close(fd: int) -> None:
        real_close(fd)
        if given:
            return
        taken = os.open(other, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(taken, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if taken != fd:
            os.dup2(taken, fd, inheritable=False)
            real_close(taken)
        given.update(fd=fd, ino=os.fstat(fd).st_ino)

    os.close = close
    try:
        answer = attempt(values, path)
    finally:
        os.close = real_close
    if not given:
        return answer, False, True
    try:
        kept = os.fstat(given["fd"]).st_ino == given["ino"]
    except OSError:
        kept = False
    if kept:
        os.close(given["fd"])
    return answer, True, kept


def attempts_as_another_lock_reuses_a_closed_descriptor(
    values: MutableMapping[str, Any], path: str, other: str
) -> dict[str, Any]:
    """Two attempts here, one refused (a plain holder here has ``path``) and one that takes
    the lock and leaves; the moment each first closes a descriptor with ``os.close``,
    another job's lock on ``other`` (a plain flock, as another thread of this scheduler
    takes it) gets that very number, as the next open in the process does.

    A lock that closes its descriptor once leaves that number to its new owner. One that
    closes it again (in the refusal and once more in a finally, an error ignored) closes
    the other job's file, and lets go of that job's lock while it runs. ``{"answers":
    [the refused attempt's, the other's], "reused": [whether each closed a descriptor
    given to the other lock], "kept": [whether the other lock was still held after each]}``.
    """
    out: dict[str, Any] = {"answers": [], "reused": [], "kept": []}
    with fresh_state(values):
        attempt(values, str(pathlib.Path(path).with_name("probe.lock")))  # a stub says so
        with plain_holder(path):
            refused = _attempt_as_another_lock_reuses(values, path, other)
        taken = _attempt_as_another_lock_reuses(values, path, other)
    for answer, reused, kept in (refused, taken):
        out["answers"].append(answer)
        out["reused"].append(reused)
        out["kept"].append(kept)
    return out
