"""Exercise 2's harness toolkit: one attempt at the student's lock, forked children.

``attempt`` tries ``single_instance`` once and says what it did as text (``"acquired"``,
``"refused: <message>"`` or ``"raised <Type>: <message>"``; a refusal with an
AlreadyRunning that is not labkit's says ``FOREIGN`` after "refused"); ``child`` forks a process
running a body and kills it when the block ends; ``Said`` and ``read`` take what a
child writes to its pipe. ``os.fork`` is what a second cron run is: another process,
same file. The harness functions (``harness.py``) are built from these.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import pathlib
import select
import signal
import time
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any

from labkit.errors import AlreadyRunning
from labkit.grading.exercises.common import need
from labkit.grading.isolation.signals import signals_as_on_the_main_thread
from labkit.grading.stub import is_stub

#: Said after "refused" when the AlreadyRunning raised is a class of the same name that
#: labkit.errors did not define (one written again in the notebook): a worker's
#: ``except AlreadyRunning`` does not catch it.
FOREIGN = " (an AlreadyRunning not from labkit.errors)"

#: The real os.write, for children whose os.write the race checks wrap.
REAL_WRITE = os.write


def is_refusal(exc: BaseException) -> bool:
    """Whether ``exc`` is an AlreadyRunning: labkit's, a subclass of it the notebook wrote
    (``class LockBusy(AlreadyRunning)``: a worker's ``except AlreadyRunning`` catches it),
    or a class of that name written again (``FOREIGN``, for the checks to judge)."""
    return isinstance(exc, AlreadyRunning) or type(exc).__name__ == "AlreadyRunning"


def attempt(values: MutableMapping[str, Any], path: str) -> str:
    try:
        with need(values, "single_instance")(path):
            return "acquired"
    except NotImplementedError as exc:
        if is_stub(exc):
            raise
        return f"raised NotImplementedError: {exc}"
    except Exception as exc:  # noqa: BLE001 - what the attempt did is the evidence
        if is_refusal(exc):
            return f"refused{'' if isinstance(exc, AlreadyRunning) else FOREIGN}: {exc}"
        return f"raised {type(exc).__name__}: {str(exc)[:160]}"


@contextmanager
def plain_holder(path: str, text: str = "1") -> Iterator[Any]:
    """A plain holder of ``path`` for the block: the file opened, flocked and ``text``
    written (its pid), as another process that took the lock would leave it."""
    with open(path, "a+") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.write(text)
        held.flush()
        yield held


@contextmanager
def child(body: Callable[[int], None]) -> Iterator[tuple[int, int]]:
    """Fork a child running ``body(write_fd)``; yield ``(pid, read_fd)``; kill it at the end."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the check
        try:
            os.close(read_fd)
            body(write_fd)
        finally:
            os._exit(0)
    os.close(write_fd)
    try:
        yield pid, read_fd
    finally:
        os.close(read_fd)
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


def on_the_main_thread(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` run in ``signals_as_on_the_main_thread``: a harness function the checks call."""

    @functools.wraps(fn)
    def run(values: MutableMapping[str, Any], *args: Any, **kwargs: Any) -> Any:
        with signals_as_on_the_main_thread(values):
            return fn(values, *args, **kwargs)

    return run


def read(fd: int, timeout: float = 10.0) -> str:
    ready, _, _ = select.select([fd], [], [], timeout)
    return os.read(fd, 512).decode(errors="replace") if ready else ""


def holder(values: MutableMapping[str, Any], path: str) -> Callable[[int], None]:
    def body(write_fd: int) -> None:
        try:
            with need(values, "single_instance")(path):
                os.write(write_fd, b"held")
                time.sleep(30)
        except BaseException as exc:  # noqa: BLE001 - told to the parent, then exit
            os.write(write_fd, f"raised {type(exc).__name__}: {exc}"[:400].encode())

    return body


def file_text(path: str) -> str:
    try:
        return pathlib.Path(path).read_text(errors="replace")
    except OSError as exc:
        return f"<{type(exc).__name__}>"


class Said:
    """Newline-ended messages from one child's pipe, one at a time."""

    def __init__(self, fd: int) -> None:
        self.fd, self.buffer = fd, b""

    def next(self, timeout: float = 10.0) -> str:
        end = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            ready, _, _ = select.select([self.fd], [], [], max(0.0, end - time.monotonic()))
            chunk = os.read(self.fd, 512) if ready else b""
            if not chunk:
                return ""
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.decode(errors="replace")


def ended_within(pid: int, timeout: float) -> bool:
    """Whether the child ``pid`` ended within ``timeout`` (then it is reaped)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, _status = os.waitpid(pid, os.WNOHANG)
        if done:
            return True
        time.sleep(0.01)
    return False


def wait_or_kill(pid: int, timeout: float = 10.0) -> None:
    """Reap the child ``pid``; SIGKILL it first if it is still running after ``timeout``."""
    if ended_within(pid, timeout):
        return
    with contextlib.suppress(ProcessLookupError, ChildProcessError):
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
