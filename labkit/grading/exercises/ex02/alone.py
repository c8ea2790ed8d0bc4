"""Exercise 2's harness: the student's lock in one process, against what surrounds it.

Errors raised inside the block, a lock file this process may not open or lock, a second lock
held at once, a plain ``flock`` holder in the same process, and the descriptors months of
runs leave open (its threads at the lock: ``threads``). No child is forked here.
"""

from __future__ import annotations

import builtins
import errno
import fcntl
import io
import os
import pathlib
import signal
import time
from collections.abc import MutableMapping
from typing import Any
from unittest import mock

from labkit.errors import AlreadyRunning
from labkit.grading.exercises.common import fresh_state, need, noted
from labkit.grading.exercises.ex02.forking import attempt, file_text, plain_holder
from labkit.grading.stub import is_stub


def attempt_once(values: MutableMapping[str, Any], path: str) -> str:
    """One attempt here, alone: ``"acquired"``, ``"refused: ..."`` or ``"raised <Type>: ..."``."""
    with fresh_state(values):
        return attempt(values, path)


def error_inside(values: MutableMapping[str, Any], path: str) -> dict[str, str]:
    """Raise a RuntimeError, a BlockingIOError, a KeyboardInterrupt, a SystemExit, then an
    AlreadyRunning (the job's own lock on another file), inside the with block.

    For each: ``"propagated <Type>"`` when that very error came out of the block,
    ``"swallowed"`` when nothing did, ``"raised <Type>: ..."`` for anything else.
    """
    out: dict[str, str] = {}
    with fresh_state(values):
        for error in (
            RuntimeError("the report failed"),
            BlockingIOError(11, "the report's socket would block"),
            # Ctrl-C (or a SIGINT from the scheduler) is no Exception: a lock that
            # swallows it lets the program carry on as if the job had finished.
            KeyboardInterrupt(),
            # sys.exit(3) in the job: swallowed, the program ends with status 0 and the
            # scheduler counts a failed run as done.
            SystemExit(3),
            # The job's own lock on another file refused it: that refusal is the job's
            # to report, not the outer lock's to swallow as if it were its own.
            AlreadyRunning("another job's lock is held (pid 4194304)"),
        ):
            name = type(error).__name__
            try:
                with need(values, "single_instance")(path):
                    raise error
                out[name] = "swallowed"
            except NotImplementedError as exc:
                if is_stub(exc):
                    raise
                out[name] = f"raised NotImplementedError: {exc}"
            except BaseException as exc:  # noqa: BLE001 - what came out is the evidence
                same = exc is error
                out[name] = f"propagated {name}" if same else f"raised {type(exc).__name__}: {exc}"
    return out


def attempts_by_a_relative_path(values: MutableMapping[str, Any], folder: str) -> list[str]:
    """A holder here locks ``folder/relative/report.lock``; this process moves into that
    folder (after the student's cells ran) and tries twice with the path ``report.lock``.

    A relative path names a file from the folder the process is in when it is opened:
    code that joins it to a folder read earlier (``os.getcwd()`` at import) locks another
    file, and two jobs run. The working folder is put back afterwards.

    First the same relative path is taken (free) from a sibling folder: code that keeps
    what a path meant the first time (its absolute path cached) locks that file again.
    """
    here = pathlib.Path(folder) / "relative"
    here.mkdir()
    elsewhere = pathlib.Path(folder) / "earlier"
    elsewhere.mkdir()
    before = os.getcwd()
    with fresh_state(values), plain_holder(str(here / "report.lock")):
        os.chdir(elsewhere)
        try:
            attempt(values, "report.lock")
        finally:
            os.chdir(before)
        os.chdir(here)
        try:
            return [attempt(values, "report.lock"), attempt(values, "report.lock")]
        finally:
            os.chdir(before)


def attempts_beside_a_plain_holder(
    values: MutableMapping[str, Any], folder: str, cases: list[list[Any]], name: str = "report.lock"
) -> list[dict[str, Any]]:
    """For each ``[text, age_s]``: a holder here locks a file holding ``text``, last
    written ``age_s`` seconds ago; the student's code tries twice, in this process.
    The file is ``folder/case-<i>/<name>``.

    The holder is a plain ``flock`` on its own open file, alive all along: whatever its
    file says (nothing yet, a pid this process cannot see, an old date), the lock is held.
    Each result: ``{"answer", "again", "same_file", "file", "pid"}``, ``same_file`` False
    when the attempts deleted or replaced the holder's file, ``file`` its text after
    them (still held), ``pid`` this process's, the one that tried.
    """
    out = []
    with fresh_state(values):
        attempt(values, str(pathlib.Path(folder) / "probe.lock"))
        for i, (text, age_s) in enumerate(cases):
            path = pathlib.Path(folder) / f"case-{i}" / name
            path.parent.mkdir()
            with open(path, "a+") as holder:
                fcntl.flock(holder.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                holder.write(text)
                holder.flush()
                then = time.time() - age_s
                os.utime(path, (then, then))
                inode = os.fstat(holder.fileno()).st_ino
                answer = attempt(values, str(path))
                again = attempt(values, str(path))
                try:
                    same = os.stat(path).st_ino == inode
                except OSError:
                    same = False
                text_after = file_text(str(path))
            out.append(
                {
                    "answer": answer,
                    "again": again,
                    "same_file": same,
                    "file": text_after,
                    "pid": os.getpid(),
                }
            )
    return out


def second_lock_in_one_process(
    values: MutableMapping[str, Any], first: str, second: str
) -> dict[str, Any]:
    """Hold the lock on ``first``, then also on ``second`` (another job's lock, in the same
    scheduler process), and try ``first`` again while both are held."""
    out: dict[str, Any] = {}
    with fresh_state(values):
        lock = need(values, "single_instance")
        with noted(out), lock(first), lock(second):
            out["first_again"] = attempt(values, first)
    return out


def attempt_when_opening_is_refused(values: MutableMapping[str, Any], path: str) -> str:
    """One attempt here while every open of ``path`` fails with PermissionError (a lock
    file the job's user may not open), whoever runs the grader (root opens anything):
    open (io.open, which pathlib's Path.open calls), os.open and io.FileIO, by those names
    or by a name the notebook imported one under."""
    target = os.path.abspath(path)
    real_open, real_os_open = builtins.open, os.open

    def refused(file: Any) -> bool:
        return (
            isinstance(file, (str, bytes, os.PathLike))
            and os.path.abspath(os.fsdecode(file)) == target
        )

    def guarded_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        if refused(file):
            raise PermissionError(13, "Permission denied", os.fsdecode(file))
        return real_open(file, *args, **kwargs)

    def guarded_os_open(file: Any, *args: Any, **kwargs: Any) -> int:
        if refused(file):
            raise PermissionError(13, "Permission denied", os.fsdecode(file))
        return real_os_open(file, *args, **kwargs)

    class GuardedFileIO(io.FileIO):
        def __init__(self, file: Any, *args: Any, **kwargs: Any) -> None:
            if refused(file):
                raise PermissionError(13, "Permission denied", os.fsdecode(file))
            super().__init__(file, *args, **kwargs)

    swaps = ((real_open, guarded_open), (real_os_open, guarded_os_open), (io.FileIO, GuardedFileIO))
    with fresh_state(values):
        attempt(values, str(pathlib.Path(path).with_name("probe.lock")))
        names = {
            name: fake for name, value in values.items() for real, fake in swaps if value is real
        }
        with (
            mock.patch.object(builtins, "open", guarded_open),
            mock.patch.object(io, "open", guarded_open),
            mock.patch.object(os, "open", guarded_os_open),
            mock.patch.object(io, "FileIO", GuardedFileIO),
            mock.patch.dict(values, names),
        ):
            return attempt(values, path)


def attempt_when_locking_fails(values: MutableMapping[str, Any], path: str) -> str:
    """One attempt here while every flock that would take a lock fails with ENOLCK ("No
    locks available": a lock folder on an NFS mount without its lock daemon), called as
    ``fcntl.flock`` or by a name the notebook imported it under. Nobody holds the lock:
    a refusal reports a run that never happens as "already running"."""
    real = fcntl.flock

    def failing(fd: Any, operation: int) -> None:
        if operation & (fcntl.LOCK_EX | fcntl.LOCK_SH):
            raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))
        real(fd, operation)

    with fresh_state(values):
        attempt(values, str(pathlib.Path(path).with_name("probe.lock")))
        names = [name for name, value in values.items() if value is real]
        with (
            mock.patch.object(fcntl, "flock", failing),
            mock.patch.dict(values, dict.fromkeys(names, failing)),
        ):
            return attempt(values, path)


def _open_files() -> int:
    """How many file descriptors this process has open."""
    return len(os.listdir("/proc/self/fd"))


def open_files_after_uses(values: MutableMapping[str, Any], path: str, uses: int) -> dict[str, Any]:
    """``uses`` times: hold the lock, be refused once inside, leave the block.

    A scheduler takes the same lock at every run, for months, in one process. Returns
    the open file descriptors before and after (``{"before", "after", "error"?}``) and
    the last refusal. A refusal that took over a second waited for the lock (what
    ``second_holder_is_refused`` says): the runs stop there, ``"waited"`` set, instead of
    waiting out ``uses`` times the student's loop.
    """
    out: dict[str, Any] = {}
    with fresh_state(values):
        attempt(values, path)  # here first, so a stub says "not started yet"
        out["before"] = _open_files()
        with noted(out):
            for _ in range(uses):
                with need(values, "single_instance")(path):
                    began = time.monotonic()
                    out["refused"] = attempt(values, path)
                if time.monotonic() - began > 1.0:
                    out["waited"] = True
                    break
        out["after"] = _open_files()
    return out


def refusals_under_holders_in_turn(
    values: MutableMapping[str, Any], path: str, texts: list[str]
) -> list[str]:
    """Plain holders here, one after another on the same file, each writing one of
    ``texts`` into it (a pid, nothing yet, another job's text) once it holds the flock;
    the student's code tries once under each, in this one process.

    A holder that has just taken the lock has not written its pid yet: a refusal then
    reads an empty file, whatever an earlier refusal read there. Returns the answers.
    """
    answers = []
    with fresh_state(values):
        attempt(values, str(pathlib.Path(path).parent / "probe.lock"))
        for text in texts:
            with open(path, "a+") as holder:
                fcntl.flock(holder.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                holder.seek(0)
                holder.truncate()
                holder.write(text)
                holder.flush()
                answers.append(attempt(values, path))
    return answers


#: The signals that end a job (the scheduler's stop, Ctrl-C, its terminal closing, a quit,
#: the user signals a program keeps for itself): what the process does on each is its own,
#: set by its own code, not by a lock it used.
_ENDING_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")


def _disposition(handler: Any) -> str:
    """A signal's handler as text, for the message: its name."""
    if handler is None or isinstance(handler, signal.Handlers):
        return str(getattr(handler, "name", "set outside Python"))
    return str(getattr(handler, "__qualname__", type(handler).__qualname__))


def _process_state() -> dict[str, Any]:
    """The folder this process is in, its umask and what it does on the signals that end
    it: what a lock has no business changing."""
    mask = os.umask(0o022)
    os.umask(mask)
    try:
        folder = os.getcwd()
    except OSError:  # the folder it was moved to was deleted since
        folder = "(a folder since deleted)"
    handlers = {name: signal.getsignal(getattr(signal, name)) for name in _ENDING_SIGNALS}
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    return {
        "cwd": folder,
        "umask": mask,
        # Signals held back (a mask a lock set for its block and never undid: the process
        # can no longer be stopped by them) and an alarm still set (it ends the process
        # later, SIGALRM's default, long after the lock is gone).
        "blocked": sorted(signal.Signals(s).name for s in blocked),
        "alarm": signal.getitimer(signal.ITIMER_REAL)[0] > 0,
        # The handler's name to say, its identity to compare (a new function of the same
        # name is another handler). The handlers found are alive all along: no id reused.
        "signals": {name: _disposition(h) for name, h in handlers.items()},
        "signal_ids": {name: id(h) for name, h in handlers.items()},
    }


def _programs_own_stop(signum: int, frame: Any) -> None:
    """The handler the program set for its graceful stop, before it took the lock."""
    raise SystemExit(128 + signum)


def process_state_around_a_run(values: MutableMapping[str, Any], path: str) -> dict[str, Any]:
    """This process's folder, umask and signal handlers before a run of the lock, inside
    its with block, after it, after a refused attempt and after a block that raised; all
    are put back as they were at the end.

    Returns ``{"before", "inside", "after", "after_refusal", "after_error", "error"?}``,
    each a ``{"cwd", "umask", "signals"}`` (after a block that raised for
    ``"after_error"``): the job in the block, and whatever the process runs next, reads
    relative paths from that folder, creates files under that umask and ends as its own
    signal handlers say. The run starts in the folder above ``path``'s, with umask 0o027
    (not the common 0o022: a lock that sets that one for good would not show).
    """
    out: dict[str, Any] = {}
    found = _process_state()
    found_mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    found_alarm = signal.getitimer(signal.ITIMER_REAL)
    handlers = {name: signal.getsignal(getattr(signal, name)) for name in _ENDING_SIGNALS}
    # A known state to start from (the folder above the lock's, a umask of its own), whatever
    # an earlier run of the lock in this process left.
    os.chdir(pathlib.Path(path).parent.parent)
    os.umask(0o027)
    # The program's own handlers (a graceful stop): a lock that "puts back" the default
    # instead of what it found drops them.
    for name in _ENDING_SIGNALS:
        signal.signal(getattr(signal, name), _programs_own_stop)
    before = _process_state()
    out["before"] = before
    try:
        with fresh_state(values):
            with noted(out), need(values, "single_instance")(path):
                out["inside"] = _process_state()
                os.chdir(before["cwd"])
                os.umask(before["umask"])
                out["refused"] = attempt(values, path)
                out["after_refusal"] = _process_state()
            out["after"] = _process_state()
            # A job that fails: what the lock set up must be undone on that way out too.
            try:
                with need(values, "single_instance")(path):
                    raise RuntimeError("the report failed")
            except Exception:  # noqa: BLE001, S110 - its error or a refusal: the state tells
                pass
            out["after_error"] = _process_state()
    finally:
        signal.setitimer(signal.ITIMER_REAL, *found_alarm)
        signal.pthread_sigmask(signal.SIG_SETMASK, found_mask)
        for name, handler in handlers.items():
            if handler is not None:
                signal.signal(getattr(signal, name), handler)
        os.umask(found["umask"])
        try:
            os.chdir(found["cwd"])
        except OSError:  # it was deleted since: stay in the one this run started from
            os.chdir(before["cwd"])
    return out
