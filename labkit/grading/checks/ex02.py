"""Exercise 2: one instance at a time, with a lock the kernel frees when the holder dies.

The student writes ``single_instance(path)``, a context manager. The kill check forks a
child that takes the lock, confirms the child holds it, kills it with SIGKILL, asserts
the kill happened, and then expects the lock to be free.
"""

from __future__ import annotations

import os
import select
import signal
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from labkit.errors import AlreadyRunning
from labkit.grading.core import Checks, Namespace, expect

CHECKS = Checks("ex02", "single-instance lock", needs=("single_instance",))


@contextmanager
def _lock_path() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="labkit-ex02-") as tmp:
        yield Path(tmp) / "report.lock"


def attempt(ns: Namespace, path: Path) -> str:
    """Try to take the lock and let it go at once: 'acquired', or the AlreadyRunning message."""
    try:
        with ns.single_instance(path):
            return "acquired"
    except AlreadyRunning as exc:
        return f"refused: {exc}"


@contextmanager
def held_by_child(ns: Namespace, path: Path) -> Iterator[int]:
    """A forked child that takes the lock and sleeps until killed; yields its pid."""
    attempt(ns, path)  # in this process first, so a stub says "not started yet"
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: take the lock, say so, wait to be killed
        try:
            os.close(read_fd)
            with ns.single_instance(path):
                os.write(write_fd, b"held")
                time.sleep(30)
        finally:
            os._exit(0)
    os.close(write_fd)
    try:
        ready, _, _ = select.select([read_fd], [], [], 10.0)
        said = os.read(read_fd, 16) if ready else b""
        expect(
            said == b"held",
            "the child process to take the lock",
            "it could not (did single_instance raise in a fresh process?)",
        )
        yield pid
    finally:
        os.close(read_fd)
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


@CHECKS.add(
    2,
    "open the file and fcntl.flock(fd, LOCK_EX | LOCK_NB); on BlockingIOError raise AlreadyRunning",
)
def second_holder_is_refused(ns: Namespace) -> None:
    with _lock_path() as path:
        with ns.single_instance(path):
            second = attempt(ns, path)
        expect(
            second.startswith("refused"), "AlreadyRunning while another holder has the lock", second
        )


@CHECKS.add(
    1,
    "write your pid into the file after you hold the lock, and read it back for "
    "the AlreadyRunning message: 'already running (pid 4242)'",
)
def message_names_the_holder(ns: Namespace) -> None:
    with _lock_path() as path:
        with ns.single_instance(path):
            second = attempt(ns, path)
        expect(
            str(os.getpid()) in second, f"a message naming the holder's pid {os.getpid()}", second
        )


@CHECKS.add(1, "release the lock when the with block ends")
def released_after_exit(ns: Namespace) -> None:
    with _lock_path() as path:
        with ns.single_instance(path):
            pass
        expect(
            attempt(ns, path) == "acquired", "the lock free after the with block", attempt(ns, path)
        )


@CHECKS.add(1, "release in a finally: an exception inside the with block must free the lock")
def released_on_error(ns: Namespace) -> None:
    with _lock_path() as path:
        try:
            with ns.single_instance(path):
                raise RuntimeError("the report failed")
        except RuntimeError:
            pass
        expect(
            attempt(ns, path) == "acquired",
            "the lock free after an error inside the block",
            attempt(ns, path),
        )


@CHECKS.add(
    3,
    "a lock must not depend on the file existing (a pidfile created with O_EXCL "
    "stays behind after kill -9 and blocks every later run); flock is released "
    "by the kernel when the process dies",
    timeout=20.0,
)
def survives_holder_kill_9(ns: Namespace) -> None:
    with _lock_path() as path:
        with held_by_child(ns, path) as pid:
            while_alive = attempt(ns, path)
            expect(
                while_alive.startswith("refused"),
                "AlreadyRunning while the child holds it",
                while_alive,
            )
            os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
            expect(
                os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL,
                "the child killed by SIGKILL (the fault fired)",
                f"wait status {status}",
            )
        after = attempt(ns, path)
        expect(after == "acquired", "the lock free once its holder was killed with SIGKILL", after)
