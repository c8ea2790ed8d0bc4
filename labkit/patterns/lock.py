"""One instance at a time: a lock the kernel releases when its holder dies.

``single_instance(path)`` takes an exclusive, non-blocking ``fcntl.flock`` on a file and
writes the holder's pid and start time into it. A second process gets
``AlreadyRunning`` naming that pid and start time. The lock belongs to the open file
description, so when the holder exits, crashes or is killed with SIGKILL the kernel
closes the file and the lock is gone: there is nothing stale to clean up. (The file
itself stays, with the dead holder's details; they mean nothing without the lock.)

``naive_pidfile(path)`` is the version many cron scripts start with, shown in the
lesson because it fails: it creates the file with ``O_EXCL`` and removes it on a clean
exit, so a holder killed with ``kill -9`` leaves a stale file that blocks every later
run until someone deletes it by hand.

flock exists on Linux and macOS only. On Windows, run the lab in WSL. In production,
``filelock`` (cross-platform) or systemd's ``flock(1)`` wrapper around a cron line do
the same job.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from labkit.clock import Clock, SystemClock, isoformat
from labkit.errors import AlreadyRunning, LabkitError

try:
    import fcntl
except ImportError:  # Windows has no fcntl
    fcntl = None  # type: ignore[assignment]

NO_FCNTL = (
    "labkit.patterns.lock needs fcntl.flock, which exists on Linux and macOS but not on Windows: "
    "run the lab inside WSL (Windows Subsystem for Linux)"
)


@dataclass(frozen=True)
class Holder:
    """Who holds a lock: the pid and when it started (epoch seconds)."""

    pid: int
    started_at: float

    def describe(self) -> str:
        return f"pid {self.pid}, started {isoformat(self.started_at)} UTC"


def read_holder(path: str | Path) -> Holder | None:
    """The holder recorded in a lock file or pidfile, or None if it records none."""
    try:
        text = Path(path).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    if not text:
        return None
    try:
        data = json.loads(text)
        return Holder(pid=int(data["pid"]), started_at=float(data["started_at"]))
    except (ValueError, KeyError, TypeError):
        return None


def _this_process(clock: Clock | None, started_at: float | None, pid: int | None) -> Holder:
    """Who is taking the lock: this pid (or ``pid``), started now (or at ``started_at``)."""
    return Holder(
        pid=os.getpid() if pid is None else pid,
        started_at=started_at if started_at is not None else (clock or SystemClock()).now(),
    )


def _record(holder: Holder) -> bytes:
    return (json.dumps({"pid": holder.pid, "started_at": holder.started_at}) + "\n").encode()


@contextmanager
def single_instance(
    path: str | Path,
    clock: Clock | None = None,
    *,
    started_at: float | None = None,
    pid: int | None = None,
) -> Iterator[Holder]:
    """Hold an exclusive lock on ``path`` for the ``with`` block, or raise AlreadyRunning.

    Never waits: if another process holds the lock, ``AlreadyRunning`` names its pid and
    start time at once. The start time recorded is ``started_at`` if given, else
    ``clock.now()`` (the wall clock when no clock is given). The lock is released on
    leaving the block, and by the kernel if the process dies first.
    """
    if fcntl is None:
        raise LabkitError(NO_FCNTL)
    path = Path(path)
    if not path.parent.exists():
        raise LabkitError(f"folder {path.parent} does not exist; create it before locking {path}")
    holder = _this_process(clock, started_at, pid)
    # O_CREAT without O_TRUNC: the file's content belongs to the holder until we have the lock.
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            current = read_holder(path)
            who = current.describe() if current else "a process that has not written its pid yet"
            raise AlreadyRunning(
                f"{path} is locked by another instance ({who}); this run stops here. If that "
                "process is stuck, stop it; the lock frees itself when it exits."
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, _record(holder), 0)
        os.fsync(fd)
        yield holder
    finally:
        # Closing the descriptor drops the flock; the kernel does the same on SIGKILL.
        os.close(fd)


@contextmanager
def naive_pidfile(
    path: str | Path,
    clock: Clock | None = None,
    *,
    started_at: float | None = None,
    pid: int | None = None,
) -> Iterator[Holder]:
    """The pidfile the lesson shows failing: create with O_EXCL, delete on a clean exit.

    If the file exists, ``AlreadyRunning`` names the pid it records, alive or not. A
    holder killed with SIGKILL never reaches the ``finally`` that deletes the file, so
    the file goes stale and blocks every later run: prefer ``single_instance``.
    """
    path = Path(path)
    holder = _this_process(clock, started_at, pid)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        current = read_holder(path)
        who = current.describe() if current else "unknown holder"
        raise AlreadyRunning(
            f"pidfile {path} exists ({who}); this run stops here. If that process is gone "
            "the file is stale: a naive pidfile cannot tell, so delete it by hand."
        ) from None
    try:
        os.write(fd, _record(holder))
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        yield holder
    finally:
        path.unlink(missing_ok=True)
