"""Exercise 2's harness: another process holds the lock, or held it and is gone.

A holder here or in a forked child, killed, leaving by an exception, holding in turn
with others; the student's code tries beside it. What each attempt did comes back as
text (``forking.attempt``); every child is killed before a function returns.
"""

from __future__ import annotations

import builtins
import contextlib
import fcntl
import io
import os
import pathlib
import select
import signal
import time
from collections.abc import Callable, MutableMapping
from typing import Any

from labkit.grading.exercises.common import fresh_state, need, noted
from labkit.grading.exercises.ex02.forking import (
    REAL_WRITE,
    Said,
    attempt,
    child,
    file_text,
    holder,
    read,
    wait_or_kill,
)
from labkit.grading.stub import is_stub


def attempt_while_holding(
    values: MutableMapping[str, Any], path: str, raise_inside: bool = False
) -> dict[str, Any]:
    """Hold the lock here, try again (as a second holder would), then leave the block.

    ``raise_inside`` leaves the block with a RuntimeError instead. Returns the second
    attempt, the file's text while held, and an attempt after the block ended.
    """
    out: dict[str, Any] = {"pid": os.getpid()}
    # What ``with single_instance(path) as held:`` binds stays alive after the block, as
    # in a caller's function: a lock released only when its object is collected is
    # still held when the next run comes.
    held: Any = None
    with fresh_state(values):
        with noted(out):
            try:
                with need(values, "single_instance")(path) as held:
                    began = time.monotonic()
                    out["second"] = attempt(values, path)
                    out["second_s"] = time.monotonic() - began
                    out["file_while_held"] = file_text(path)
                    if raise_inside:
                        raise RuntimeError("the report failed")
            except RuntimeError as exc:
                if str(exc) != "the report failed":
                    raise
        out["after"] = attempt(values, path)
    del held
    return out


def kill_the_holder(values: MutableMapping[str, Any], path: str) -> dict[str, Any]:
    """A child takes the lock; attempt while it lives; SIGKILL it; attempt again."""
    out: dict[str, Any] = {}
    with fresh_state(values):
        attempt(values, path)  # here first, so a stub says "not started yet"
        with child(holder(values, path)) as (pid, fd):
            out["child"] = read(fd)
            out["while_alive"] = attempt(values, path)
            os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
            out["killed"] = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        out["after"] = attempt(values, path)
    return out


def refused_while_a_child_holds(
    values: MutableMapping[str, Any], path: str, tries: int = 2
) -> dict[str, Any]:
    """A child holds the lock; this process tries ``tries`` times; then a second child tries.

    Returns this process's pid (``own``), the holder's pid, each refusal, what the second
    child got while the first still held the lock, and the file's text before the holder
    is killed.
    """
    out: dict[str, Any] = {"own": os.getpid()}
    with fresh_state(values):
        attempt(values, path)
        with child(holder(values, path)) as (pid, fd):
            out["holder"], out["child"] = pid, read(fd)
            out["refusals"] = [attempt(values, path) for _ in range(tries)]

            def second(write_fd: int) -> None:
                os.write(write_fd, attempt(values, path).encode()[:400])

            with child(second) as (_pid2, fd2):
                out["second_process"] = read(fd2)
            out["file"] = file_text(path)
    return out


def holders_in_turn(
    values: MutableMapping[str, Any], path: str, n: int = 3, left_behind: str = ""
) -> list[int]:
    """``n`` processes, one after the other, each take the lock and exit: their pids.

    ``left_behind`` is written into the file after the first attempt here: what a
    holder long gone left in it, longer than any pid.
    """
    pids = []
    with fresh_state(values):
        attempt(values, path)
        if left_behind:
            pathlib.Path(path).write_text(left_behind)
        for _ in range(n):

            def body(write_fd: int) -> None:
                os.write(write_fd, attempt(values, path).encode()[:400])

            with child(body) as (pid, fd):
                said = read(fd)
                os.waitpid(pid, 0)
            pids.append(pid if said == "acquired" else -pid)
    return pids


def refused_by_holders_in_turn(values: MutableMapping[str, Any], path: str) -> dict[str, Any]:
    """Two children hold the lock one after the other (the first killed before the second
    starts); this process, one process all along, tries once under each.

    Returns ``{"holders": [pid, pid], "refusals": [text, text], "files": [text, text]}``
    (the file's text at each refusal): a holder's pid kept from the first refusal names
    a process long gone under the second.
    """
    out: dict[str, Any] = {"holders": [], "refusals": [], "files": []}
    with fresh_state(values):
        attempt(values, path)  # here first, so a stub says "not started yet"
        for _turn in range(2):
            with child(holder(values, path)) as (pid, fd):
                read(fd)
                out["holders"].append(pid)
                out["refusals"].append(attempt(values, path))
                out["files"].append(file_text(path))
    return out


def refused_while_held_briefly(
    values: MutableMapping[str, Any], path: str, patience: float
) -> dict[str, Any]:
    """Hold the lock here while a child tries; let go after ``patience`` s without an answer.

    A lock that refuses answers at once, while the lock is still held. One that waits for
    the lock gets it once this process lets go, and runs right after the holder: the
    second cron copy this lock exists to stop. The child is forked before this process
    takes the lock, so it does not share the holder's open file. Returns
    ``{"answer": ..., "while_held": bool}``.
    """
    out: dict[str, Any] = {}
    with fresh_state(values), contextlib.ExitStack() as stack:
        attempt(values, path)  # here first, so a stub says "not started yet"
        go_read, go_write = os.pipe()
        stack.callback(os.close, go_read)
        stack.callback(os.close, go_write)

        def body(write_fd: int) -> None:
            select.select([go_read], [], [], 10.0)
            os.write(write_fd, attempt(values, path).encode()[:400])

        _pid, fd = stack.enter_context(child(body))
        held = need(values, "single_instance")(path)
        held.__enter__()
        released = False
        try:
            os.write(go_write, b"go")
            ready, _, _ = select.select([fd], [], [], patience)
            out["while_held"] = bool(ready)
            released = True
            held.__exit__(None, None, None)
            out["answer"] = read(fd)
        finally:
            if not released:
                held.__exit__(None, None, None)
    return out


def refused_as_the_holder_leaves(
    values: MutableMapping[str, Any], path: str, text: str = "", empty: bool = False
) -> dict[str, Any]:
    """A child tries while this process holds the lock; the holder lets go the moment the
    child's flock finds it busy.

    A refused attempt answers AlreadyRunning then, however soon the holder leaves; one that
    tries again (after a pause, in a loop) gets the lock and runs right after the holder.
    The lock here is a plain flock on the file, taken after the fork, so the child does not
    share it. The holder writes ``text`` in the file (a pid this process cannot see, say),
    or its own pid; with ``empty``, nothing (a holder that has not written its pid yet).
    Returns ``{"busy_seen": bool, "answer": ...}``.
    """
    with fresh_state(values), contextlib.ExitStack() as stack:
        attempt(values, path)  # here first, so a stub says "not started yet"
        go_read, go_write = os.pipe()
        stack.callback(os.close, go_read)
        stack.callback(os.close, go_write)

        def body(fd: int) -> None:
            select.select([go_read], [], [], 10.0)
            real = fcntl.flock

            def flock(file: Any, operation: int) -> None:
                try:
                    real(file, operation)
                except BlockingIOError:
                    REAL_WRITE(fd, b"busy\n")
                    raise

            fcntl.flock = flock
            said = attempt(values, path)
            REAL_WRITE(fd, said.replace("\n", " ")[:300].encode() + b"\n")

        _pid, fd = stack.enter_context(child(body))
        said = Said(fd)
        holder = open(path, "a+")  # noqa: SIM115 - closed below, the release under test
        try:
            fcntl.flock(holder.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            holder.seek(0)
            holder.truncate()
            holder.write("" if empty else text or str(os.getpid()))
            holder.flush()
            os.write(go_write, b"go")
            first = said.next(5.0)
        finally:
            holder.close()
        answer = said.next(5.0) if first == "busy" else first
    return {"busy_seen": first == "busy", "answer": answer}


def _flock_swapped(values: MutableMapping[str, Any], flock: Any) -> None:
    """``fcntl.flock`` replaced by ``flock`` in this (forked) child, and in the student's
    namespace too, where ``from fcntl import flock`` put the real one."""
    real = fcntl.flock
    fcntl.flock = flock
    for name, value in list(values.items()):
        if value is real:
            values[name] = flock


def refused_as_a_holder_arrives(
    values: MutableMapping[str, Any], path: str, left: str
) -> dict[str, Any]:
    """A child tries the lock on a file a run long gone left ``left`` in; the child is
    held back just before its first flock, while this process takes the lock and writes
    its own pid; then the child's flock goes on, and finds the lock busy.

    A refusal that reads the pid once its flock failed names this process; one that read
    the file before its flock (to have the pid ready) names what was there then, a run
    long gone. The lock here is a plain flock on the file, taken after the fork, so the
    child does not share it. Returns ``{"held_back": bool, "holder": this pid, "answer":
    what the child's attempt got}``; ``held_back`` False: the child made no flock call
    through ``fcntl.flock``, or a ``flock`` imported by name (its answer is then what it
    got on its own).
    """
    pathlib.Path(path).write_text(left)
    with fresh_state(values), contextlib.ExitStack() as stack:
        attempt(values, str(pathlib.Path(path).with_name("probe.lock")))  # a stub says so
        go_read, go_write = os.pipe()
        stack.callback(os.close, go_read)
        stack.callback(os.close, go_write)

        def body(fd: int) -> None:
            real, calls = fcntl.flock, [0]

            def flock(file: Any, operation: int) -> None:
                calls[0] += 1
                if calls[0] == 1:
                    REAL_WRITE(fd, b"flock\n")
                    select.select([go_read], [], [], 10.0)
                real(file, operation)

            _flock_swapped(values, flock)
            said = attempt(values, path)
            REAL_WRITE(fd, said.replace("\n", " ")[:300].encode() + b"\n")

        _pid, fd = stack.enter_context(child(body))
        said = Said(fd)
        first = said.next(5.0)
        if first != "flock":
            return {"held_back": False, "holder": os.getpid(), "answer": first}
        holder = open(path, "a+")  # noqa: SIM115 - closed below, once the child answered
        try:
            fcntl.flock(holder.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            holder.seek(0)
            holder.truncate()
            holder.write(str(os.getpid()))
            holder.flush()
            os.write(go_write, b"go")
            answer = said.next(5.0)
        finally:
            holder.close()
    return {"held_back": True, "holder": os.getpid(), "answer": answer}


def file_while_a_forked_worker_holds(values: MutableMapping[str, Any], path: str) -> dict[str, Any]:
    """A worker forked from this process (as a pool starts them, after the code was
    loaded) holds the lock; ``{"pid": its pid, "file": the file's text while it holds}``.
    """
    with fresh_state(values):
        attempt(values, path)  # here first, so a stub says "not started yet"

        def body(write_fd: int) -> None:
            try:
                with need(values, "single_instance")(path):
                    os.write(write_fd, f"{os.getpid()} {file_text(path)}".encode()[:400])
            except Exception as exc:  # noqa: BLE001 - reported to the check
                os.write(write_fd, f"{os.getpid()} <{type(exc).__name__}>".encode())

        with child(body) as (pid, fd):
            said = read(fd)
    told, _sep, text = said.partition(" ")
    return {"pid": pid, "child": told, "file": text}


#: How a worker forked inside the with block leaves it: ``attempt_after_a_forked_worker_left``.
_WORKER_LEAVES: dict[str, Callable[[], BaseException]] = {
    "exit": lambda: SystemExit(0),
    "failure": lambda: RuntimeError("the worker's job failed"),
    "interrupt": KeyboardInterrupt,
}


def attempt_after_a_forked_worker_left(
    values: MutableMapping[str, Any], path: str, leaving: str = "exit"
) -> dict[str, Any]:
    """Hold the lock here; inside the block fork a worker that leaves the block by an
    exception (``leaving``: "exit", a SystemExit as ``sys.exit()`` raises in a worker
    forked there; "failure", a RuntimeError, its job failed; "interrupt", the
    KeyboardInterrupt a Ctrl-C raises in every process of the group) and exits; then,
    still holding, attempt again as a second copy would.

    The worker shares this process's open file: closing its copy changes nothing, but a
    ``flock(LOCK_UN)`` on the way out releases the lock of the parent, which still runs.
    Returns ``{"again": the attempt after the worker exited, "error"?: ...}``.
    """
    parent = os.getpid()
    out: dict[str, Any] = {}
    with fresh_state(values):
        try:
            with need(values, "single_instance")(path):
                pid = os.fork()
                if pid == 0:  # the worker leaves the with block, as sys.exit() or a failure
                    raise _WORKER_LEAVES[leaving]()
                wait_or_kill(pid)
                out["again"] = attempt(values, path)
        except BaseException as exc:  # noqa: BLE001 - the worker exits; the parent reports
            if os.getpid() != parent:
                os._exit(0)
            if isinstance(exc, NotImplementedError) and is_stub(exc):
                raise
            if not isinstance(exc, Exception):
                raise
            out["error"] = f"raised {type(exc).__name__}: {str(exc)[:160]}"
        finally:
            if os.getpid() != parent:  # never let the worker return into the check
                os._exit(0)
    return out


#: What a newcomer that takes the lock the moment the holder lets go writes in the file.
NEWCOMER = "4194303 (a newcomer)"


def newcomer_as_the_holder_leaves(values: MutableMapping[str, Any], path: str) -> dict[str, Any]:
    """A worker holds the lock and leaves its with block; a newcomer takes the lock the
    moment it is free and writes its pid.

    In a forked child: while the student's code ends the block, each open, truncate or
    unlink of the lock file first lets a newcomer try (a plain flock, non-blocking, on its
    own open file): it succeeds only once the lock is released. A holder that empties or
    rewrites the file after letting go wipes the newcomer's pid; one that empties it while
    it still holds the lock, or leaves it alone, does not. ``{"said": what the attempt
    did, "newcomer": whether the newcomer took the lock, "file": the text at the end}``.
    """
    target = os.path.abspath(path)

    def body(write_fd: int) -> None:
        state: dict[str, Any] = {"leaving": False, "newcomer": None}
        real_open, real_os_open = builtins.open, os.open
        real_truncate, real_unlink, real_remove = os.truncate, os.unlink, os.remove

        def newcomer_tries(file: Any) -> None:
            if not isinstance(file, (str, bytes, os.PathLike)) or not state["leaving"]:
                return
            if state["newcomer"] is not None or os.path.abspath(os.fsdecode(file)) != target:
                return
            fd = real_os_open(target, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)  # still held: the holder has not let go yet
                return
            os.ftruncate(fd, 0)
            REAL_WRITE(fd, NEWCOMER.encode())
            state["newcomer"] = fd

        def wrap(real: Any) -> Any:
            def guarded(file: Any, *args: Any, **kwargs: Any) -> Any:
                newcomer_tries(file)
                return real(file, *args, **kwargs)

            return guarded

        builtins.open = io.open = wrap(real_open)
        os.open, os.truncate = wrap(real_os_open), wrap(real_truncate)
        os.unlink, os.remove = wrap(real_unlink), wrap(real_remove)
        try:
            with need(values, "single_instance")(path):
                state["leaving"] = True
            said = "acquired"
        except BaseException as exc:  # noqa: BLE001 - told to the parent
            said = f"raised {type(exc).__name__}: {exc}"[:200]
        finally:
            builtins.open = io.open = real_open
            os.open, os.truncate, os.unlink, os.remove = (
                real_os_open,
                real_truncate,
                real_unlink,
                real_remove,
            )
        # Nothing touched the file on the way out: the newcomer comes now.
        newcomer_tries(target)
        told = "1" if state["newcomer"] is not None else "0"
        REAL_WRITE(write_fd, f"{told}|{said.replace('|', '/')}|{file_text(path)}".encode()[:600])

    with fresh_state(values):
        attempt(values, path)  # here first, so a stub says "not started yet"
        with child(body) as (_pid, fd):
            told = read(fd)
    newcomer, _sep, rest = told.partition("|")
    said, _sep, text = rest.partition("|")
    return {"said": said, "newcomer": newcomer == "1", "file": text}


def probe_between_two_flocks(values: MutableMapping[str, Any], path: str) -> dict[str, Any]:
    """A child takes the lock; if it calls flock again after a first exclusive flock
    went through (to lock a file it opened again, say), it is held back just before that
    call while this process tries a plain flock on ``path``.

    A lock held from its first flock to the end of the block is busy then. One let go in
    between (the first file closed, another opened with 'w' and flocked) is free: this
    process takes it, writes its pid and holds it while the child goes on. Returns
    ``{"between": "free" | "busy" | None (no second flock), "holder": this pid, "answer":
    the child's attempt, "file": the file's text once the child answered}``.
    """
    pathlib.Path(path).touch()
    with fresh_state(values), contextlib.ExitStack() as stack:
        go_read, go_write = os.pipe()
        stack.callback(os.close, go_read)
        stack.callback(os.close, go_write)

        def body(fd: int) -> None:
            real, state = fcntl.flock, {"took": False, "held_back": False}

            def flock(file: Any, operation: int) -> None:
                if state["took"] and not state["held_back"]:
                    state["held_back"] = True
                    REAL_WRITE(fd, b"again\n")
                    select.select([go_read], [], [], 10.0)
                real(file, operation)
                if operation & fcntl.LOCK_EX:
                    state["took"] = True

            _flock_swapped(values, flock)
            said = attempt(values, path)
            REAL_WRITE(fd, said.replace("\n", " ")[:300].encode() + b"\n")

        _pid, fd = stack.enter_context(child(body))
        said = Said(fd)
        first = said.next(5.0)
        if first != "again":
            return {"between": None, "holder": os.getpid(), "answer": first, "file": ""}
        probe = open(path, "a+")  # noqa: SIM115 - closed below, once the child answered
        try:
            try:
                fcntl.flock(probe.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.write(go_write, b"go")
                answer = said.next(5.0)
                return {"between": "busy", "holder": os.getpid(), "answer": answer, "file": ""}
            probe.seek(0)
            probe.truncate()
            probe.write(str(os.getpid()))
            probe.flush()
            os.write(go_write, b"go")
            answer = said.next(5.0)
            text = pathlib.Path(path).read_text(errors="replace")
        finally:
            probe.close()
    return {"between": "free", "holder": os.getpid(), "answer": answer, "file": text}
