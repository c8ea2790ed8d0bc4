"""Exercise 2's harness: processes that try the lock at the same instant.

Children released together, each file call slowed so a check-then-create lock is
caught every time (``start_together``, ``staggered_start``), and a newcomer stopped
after each of its file calls while the holder dies or lets go (``newcomer_race``).
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import fcntl
import os
import pathlib
import select
import signal
import sys
import time
import weakref
from collections.abc import Callable, MutableMapping
from typing import Any

from labkit.grading.exercises.common import fresh_state, need
from labkit.grading.exercises.ex02.exits import is_the_notebooks, keep_only_the_notebooks
from labkit.grading.exercises.ex02.forking import (
    REAL_WRITE,
    Said,
    attempt,
    child,
    ended_within,
    file_text,
    is_refusal,
    read,
    wait_or_kill,
)
from labkit.grading.isolation.signals import install_the_notebooks_handlers

#: Pause after each file call in ``start_together``'s children: it widens a gap
#: between "is the file there?" and "create it" so every child falls into it.
SLOW_FILE_S = 0.05


def _paused(fn: Callable[..., Any], pause: float) -> Callable[..., Any]:
    """``fn``, then a pause of ``pause`` seconds, whether it returned or raised."""

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        finally:
            time.sleep(pause)

    return call


def _contender(
    values: MutableMapping[str, Any], path: str, go: tuple[int, int], pause: float
) -> Callable[[int], None]:
    """A child's body: wait for the ``go`` pipe, make each file call (exists, open,
    os.open) pause ``pause`` s after it returns or raises, try the lock and say what it
    got. A child that gets the lock keeps it until it is killed."""
    go_read, go_write = go

    def body(write_fd: int) -> None:
        os.close(go_write)
        select.select([go_read], [], [], 10.0)
        builtins.open = _paused(builtins.open, pause)
        os.open = _paused(os.open, pause)
        os.path.exists = _paused(os.path.exists, pause)
        pathlib.Path.exists = _paused(pathlib.Path.exists, pause)  # type: ignore[method-assign]
        try:
            with need(values, "single_instance")(path):
                os.write(write_fd, b"acquired")
                time.sleep(30)
        except BaseException as exc:  # noqa: BLE001 - told to the parent
            name = type(exc).__name__
            said = "refused" if is_refusal(exc) else f"raised {name}: {exc}"
            os.write(write_fd, said.encode()[:400])

    return body


def _released_together(
    stack: contextlib.ExitStack, values: MutableMapping[str, Any], path: str, pauses: list[float]
) -> list[tuple[int, int]]:
    """A ``_contender`` child for each of ``pauses``, all released at one instant once
    every one is forked; each child's ``(pid, read_fd)``, killed when ``stack`` closes."""
    go = go_read, go_write = os.pipe()
    stack.callback(os.close, go_read)
    try:
        return [stack.enter_context(child(_contender(values, path, go, p))) for p in pauses]
    finally:
        os.write(go_write, b"go")
        os.close(go_write)


def start_together(values: MutableMapping[str, Any], path: str, n: int = 3) -> list[str]:
    """``n`` processes released at the same instant each try to take the lock.

    Each file call in the children (exists, open, os.open) pauses a little after it
    returns, so a check-then-create lock is caught every time, not once in a while.
    A child that gets the lock keeps it until it is killed, after every child has said
    what it got, so a slow machine cannot make the winner let go too early.
    """
    with fresh_state(values), contextlib.ExitStack() as stack:
        attempt(values, path)
        children = _released_together(stack, values, path, [SLOW_FILE_S] * n)
        return [read(fd) for _pid, fd in children]


#: The file and lock calls after which the race checks stop a newcomer (``newcomer_race``).
_GAPS: list[tuple[Any, str]] = [
    (builtins, "open"),
    (os, "open"),
    (os, "unlink"),
    (os, "remove"),
    (os, "rename"),
    (os, "replace"),
    (os, "kill"),
    (os, "read"),
    (os, "write"),
    (os.path, "exists"),
    (pathlib.Path, "exists"),
    (pathlib.Path, "unlink"),
    (pathlib.Path, "open"),
    (pathlib.Path, "read_text"),
    (pathlib.Path, "write_text"),
    (fcntl, "flock"),
    (fcntl, "lockf"),
]


def _holds(
    values: MutableMapping[str, Any],
    path: str,
    fd: int,
    until: int | None,
    exits: bool = False,
    fails: bool = False,
) -> None:
    """Take the lock and say so; keep it until killed, or until ``until`` is readable.

    ``fails``: the job then raises inside the with block (a RuntimeError), as a job
    that fails does, instead of ending it normally.

    ``exits``: once out of the block, run the exit handlers registered with ``atexit``
    in this child, and the ``weakref.finalize`` finalizers the lock made (they run at
    exit too), before saying "released", as a job that ends normally runs them (a
    forked child leaves by ``os._exit``, which skips them). The handlers inherited from
    the grader are dropped first, all but the notebook's own (registered as its cells
    ran: ``exits.keep_only_the_notebooks``); the ones the lock registers are run however
    it names ``register`` (``atexit.register``, ``from atexit import register``, a
    decorator).
    """
    tell = REAL_WRITE  # in a newcomer os.write is wrapped: tell the parent with the real one
    if exits:
        keep_only_the_notebooks(values)  # in this child only: the grader's never run
    # The finalizers (weakref.finalize) the lock makes, run at exit as atexit's are.
    before = set(weakref.finalize._registry) if exits else set()  # type: ignore[attr-defined]
    try:
        with need(values, "single_instance")(path):
            tell(fd, b"held\n")
            select.select([until] if until is not None else [], [], [], 30.0)
            if fails:
                raise RuntimeError("the job failed")
        if exits:
            sys.unraisablehook = lambda _unraisable: None  # a failing handler says nothing
            atexit._run_exitfuncs()
            for made in list(weakref.finalize._registry):  # type: ignore[attr-defined]
                if made not in before and made.atexit:
                    with contextlib.suppress(Exception):  # a failing one says nothing
                        made()
        tell(fd, b"released\n")
    except BaseException as exc:  # noqa: BLE001 - told to the parent
        name = type(exc).__name__
        said = f"refused: {exc}" if is_refusal(exc) else f"raised {name}: {exc}"
        tell(fd, said.replace("\n", " ")[:300].encode() + b"\n")


def _newcomer(
    values: MutableMapping[str, Any], path: str, stop: int, go: int
) -> Callable[[int], None]:
    """A process that tries the lock, stopped after its ``stop``-th file or lock call."""

    def body(fd: int) -> None:
        tell, calls = REAL_WRITE, [0]

        def pausing(fn: Callable[..., Any]) -> Callable[..., Any]:
            def call(*args: Any, **kwargs: Any) -> Any:
                try:
                    return fn(*args, **kwargs)
                finally:
                    calls[0] += 1
                    if calls[0] == stop:
                        tell(fd, b"paused\n")
                        select.select([go], [], [], 10.0)

            return call

        for owner, name in _GAPS:
            setattr(owner, name, pausing(getattr(owner, name)))
        _holds(values, path, fd, None)

    return body


def newcomer_race(
    values: MutableMapping[str, Any], folder: str, event: str, stops: list[int]
) -> list[dict[str, Any]]:
    """A holder, then a newcomer stopped after its k-th file call, for each k in ``stops``.

    ``event`` is what happens to the holder while the newcomer is stopped: ``"killed"``
    (SIGKILL before the newcomer starts: the holder's file stays behind),
    ``"released"`` (it leaves its with block while the newcomer waits), ``"raised"``
    (its job raises inside the with block while the newcomer waits) or ``"terminated"``
    (SIGTERM while the newcomer waits, as a job is stopped: a SIGTERM handler of the
    lock's runs; SIGKILL if it has not ended ``TERMINATED_S`` later), and the same with
    SIGINT for ``"interrupted"`` (Ctrl-C: a KeyboardInterrupt inside the with block) and
    SIGHUP for ``"hung up"`` (its terminal closed). Then a third
    process takes the lock whole, and the newcomer goes on. Each schedule, in a folder
    of its own: ``{"stop", "paused", "newcomer", "third"}``, what each one got.
    """
    runs = []
    with fresh_state(values):
        attempt(values, str(pathlib.Path(folder) / "probe.lock"))
        for stop in stops:
            path = str(pathlib.Path(folder) / f"stop-{stop}" / "report.lock")
            os.makedirs(os.path.dirname(path))
            runs.append(_one_race(values, path, event, stop))
    return runs


#: How long a holder sent a signal has to end before it is killed with SIGKILL.
TERMINATED_S = 2.0

#: The signal each of ``newcomer_race``'s events sends the holder, and what a process
#: started from a shell does with it by default (Python turns SIGINT into a
#: KeyboardInterrupt).
_SIGNALLED: dict[str, tuple[signal.Signals, Any]] = {
    "terminated": (signal.SIGTERM, signal.SIG_DFL),
    "interrupted": (signal.SIGINT, signal.default_int_handler),
    "hung up": (signal.SIGHUP, signal.SIG_DFL),
}


def _holds_until(
    values: MutableMapping[str, Any], path: str, fd: int, release: int, event: str
) -> None:
    """The holder of ``_one_race``: ``_holds`` until ``release`` is readable, its exit
    handlers run when it is ``"released"``, its job raising when it is ``"raised"``; when
    it is to be sent a signal, the signals a job starts with (``_SIGNALLED``): their
    defaults, whatever the grader's are, unless the notebook set its own handler as its
    cells ran (``signal.signal`` at module level)."""
    if event in _SIGNALLED:
        install_the_notebooks_handlers(values)  # as a job started from the notebook has them
        for signum, default in _SIGNALLED.values():
            if not is_the_notebooks(signal.getsignal(signum), values):
                signal.signal(signum, default)
    _holds(values, path, fd, release, exits=event == "released", fails=event == "raised")


def _one_race(values: MutableMapping[str, Any], path: str, event: str, stop: int) -> dict[str, Any]:
    run: dict[str, Any] = {"stop": stop, "paused": False}
    with contextlib.ExitStack() as stack:
        release_r, release_w = os.pipe()
        go_r, go_w = os.pipe()
        for fd in (release_r, release_w, go_r, go_w):
            stack.callback(os.close, fd)
        holder_pid, holder_fd = stack.enter_context(
            child(lambda fd: _holds_until(values, path, fd, release_r, event))
        )
        holder = Said(holder_fd)
        run["holder"] = holder.next()
        if event == "killed":
            os.kill(holder_pid, signal.SIGKILL)
            os.waitpid(holder_pid, 0)
        newcomer = Said(stack.enter_context(child(_newcomer(values, path, stop, go_r)))[1])
        first = newcomer.next()
        run["paused"] = first == "paused"
        if event in ("released", "raised"):
            os.write(release_w, b"release")
            run["released"] = holder.next()
        if event in _SIGNALLED:
            # A job stopped (systemd, a timeout, Ctrl-C, its terminal closed): the signal,
            # then SIGKILL if it will not go.
            os.kill(holder_pid, _SIGNALLED[event][0])
            let_go = _let_go_while_running(values, path, holder_pid, TERMINATED_S)
            if let_go is not None:
                # Still running: it must have held the lock all along. A handler that let
                # go of it (LOCK_UN) and returned, or let go for a moment (a SIGHUP that
                # "reopens" the lock file), leaves the job running beside the next run.
                run["let_go"] = let_go
                wait_or_kill(holder_pid, 0.0)
        third = Said(stack.enter_context(child(lambda fd: _holds(values, path, fd, None)))[1])
        run["third"] = third.next()
        os.write(go_w, b"go")
        run["newcomer"] = newcomer.next() if run["paused"] else first
    return run


#: How often ``_let_go_while_running`` tries the lock while a signalled holder runs on.
LET_GO_POLL_S = 0.05


def _let_go_while_running(
    values: MutableMapping[str, Any], path: str, pid: int, within: float
) -> bool | None:
    """``None`` when the child ``pid`` ended within ``within`` (then it is reaped); else
    whether an attempt here took the lock at any moment while it ran on.

    Tried every ``LET_GO_POLL_S``, not once at the end: a handler that closes the lock
    file and takes it again a moment later leaves a gap another run falls into. The
    lock free while the holder is on its way out is no fault: only a holder still
    running at the end counts.
    """
    free = False
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        # Once taken, not again: every attempt that gets the lock writes to its file.
        free = free or attempt(values, path) == "acquired"
        if ended_within(pid, LET_GO_POLL_S):
            return None
    return free or attempt(values, path) == "acquired"


#: ``staggered_start``'s first child pauses this long after each file call: every child
#: has looked for the lock file before the first creates it.
FIRST_PAUSE_S = 0.1


def staggered_start(
    values: MutableMapping[str, Any], path: str, n: int = 2, step: float = 0.3
) -> dict[str, Any]:
    """``n`` processes released at one instant, on a folder with no lock file yet, try
    the lock; child ``i`` pauses ``FIRST_PAUSE_S + i * step`` s after each file call
    (exists, open, os.open), a failed one too. All look for the file before the first
    creates it; a later one that found none acts on it ``step`` s after the first took
    the lock and wrote its pid.

    Returns ``{"outcomes": [...], "holder": the pid that said "acquired" or None,
    "file": the file's text while that holder still holds}``.
    """
    out: dict[str, Any] = {"holder": None}
    with fresh_state(values), contextlib.ExitStack() as stack:
        attempt(values, str(pathlib.Path(path).with_name("probe.lock")))
        pauses = [FIRST_PAUSE_S + i * step for i in range(n)]
        children = _released_together(stack, values, path, pauses)
        out["outcomes"] = [read(fd) for _pid, fd in children]
        time.sleep(step)  # a late child's last file call, if it made one, is done
        for (pid, _fd), said in zip(children, out["outcomes"], strict=True):
            if said == "acquired":
                out["holder"] = pid
        out["file"] = file_text(path)
    return out
