"""Harness for exercise 2: the student's ``single_instance`` held by real processes.

Every function forks children that take the lock with the student's code, reports
what each attempt did as text (``"acquired"``, ``"refused: <message>"`` or ``"raised
<Type>: <message>"``) and kills every child before returning. The checks read the lock
file themselves. ``os.fork`` is what a second cron run is: another process, same file.
"""

from __future__ import annotations

import builtins
import contextlib
import fcntl
import os
import pathlib
import select
import signal
import time
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any

from labkit.grading.exercises.common import fresh_state, need
from labkit.grading.stub import is_stub

#: The real os.write, for children whose os.write the race checks wrap.
_WRITE = os.write

#: Pause after each file call in ``start_together``'s children: it widens a gap
#: between "is the file there?" and "create it" so every child falls into it.
SLOW_FILE_S = 0.05


def _attempt(values: MutableMapping[str, Any], path: str) -> str:
    try:
        with need(values, "single_instance")(path):
            return "acquired"
    except NotImplementedError as exc:
        if is_stub(exc):
            raise
        return f"raised NotImplementedError: {exc}"
    except Exception as exc:  # noqa: BLE001 - what the attempt did is the evidence
        if type(exc).__name__ == "AlreadyRunning":
            return f"refused: {exc}"
        return f"raised {type(exc).__name__}: {str(exc)[:160]}"


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
        try:
            with need(values, "single_instance")(path) as held:
                out["second"] = _attempt(values, path)
                out["file_while_held"] = _text(path)
                if raise_inside:
                    raise RuntimeError("the report failed")
        except RuntimeError as exc:
            if str(exc) != "the report failed":
                out["error"] = f"raised RuntimeError: {exc}"
        except NotImplementedError as exc:
            if is_stub(exc):
                raise
            out["error"] = f"raised NotImplementedError: {exc}"
        except Exception as exc:  # noqa: BLE001 - reported to the check
            out["error"] = f"raised {type(exc).__name__}: {str(exc)[:160]}"
        out["after"] = _attempt(values, path)
    del held
    return out


@contextmanager
def _child(body: Callable[[int], None]) -> Iterator[tuple[int, int]]:
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


def _read(fd: int, timeout: float = 10.0) -> str:
    ready, _, _ = select.select([fd], [], [], timeout)
    return os.read(fd, 512).decode(errors="replace") if ready else ""


def _holder(values: MutableMapping[str, Any], path: str) -> Callable[[int], None]:
    def body(write_fd: int) -> None:
        try:
            with need(values, "single_instance")(path):
                os.write(write_fd, b"held")
                time.sleep(30)
        except BaseException as exc:  # noqa: BLE001 - told to the parent, then exit
            os.write(write_fd, f"raised {type(exc).__name__}: {exc}"[:400].encode())

    return body


def kill_the_holder(values: MutableMapping[str, Any], path: str) -> dict[str, Any]:
    """A child takes the lock; attempt while it lives; SIGKILL it; attempt again."""
    out: dict[str, Any] = {}
    with fresh_state(values):
        _attempt(values, path)  # here first, so a stub says "not started yet"
        with _child(_holder(values, path)) as (pid, fd):
            out["child"] = _read(fd)
            out["while_alive"] = _attempt(values, path)
            os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
            out["killed"] = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        out["after"] = _attempt(values, path)
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
        _attempt(values, path)
        with _child(_holder(values, path)) as (pid, fd):
            out["holder"], out["child"] = pid, _read(fd)
            out["refusals"] = [_attempt(values, path) for _ in range(tries)]

            def second(write_fd: int) -> None:
                os.write(write_fd, _attempt(values, path).encode()[:400])

            with _child(second) as (_pid2, fd2):
                out["second_process"] = _read(fd2)
            out["file"] = _text(path)
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
        _attempt(values, path)
        if left_behind:
            pathlib.Path(path).write_text(left_behind)
        for _ in range(n):

            def body(write_fd: int) -> None:
                os.write(write_fd, _attempt(values, path).encode()[:400])

            with _child(body) as (pid, fd):
                said = _read(fd)
                os.waitpid(pid, 0)
            pids.append(pid if said == "acquired" else -pid)
    return pids


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
            said = "refused" if name == "AlreadyRunning" else f"raised {name}: {exc}"
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
        return [stack.enter_context(_child(_contender(values, path, go, p))) for p in pauses]
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
        _attempt(values, path)
        children = _released_together(stack, values, path, [SLOW_FILE_S] * n)
        return [_read(fd) for _pid, fd in children]


def _text(path: str) -> str:
    try:
        return pathlib.Path(path).read_text(errors="replace")
    except OSError as exc:
        return f"<{type(exc).__name__}>"


def error_inside(values: MutableMapping[str, Any], path: str) -> dict[str, str]:
    """Raise a RuntimeError, a BlockingIOError, then a KeyboardInterrupt, inside the with block.

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


class _Said:
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


def _holds(values: MutableMapping[str, Any], path: str, fd: int, until: int | None) -> None:
    """Take the lock and say so; keep it until killed, or until ``until`` is readable."""
    tell = _WRITE  # in a newcomer os.write is wrapped: tell the parent with the real one
    try:
        with need(values, "single_instance")(path):
            tell(fd, b"held\n")
            select.select([until] if until is not None else [], [], [], 30.0)
        tell(fd, b"released\n")
    except BaseException as exc:  # noqa: BLE001 - told to the parent
        name = type(exc).__name__
        said = f"refused: {exc}" if name == "AlreadyRunning" else f"raised {name}: {exc}"
        tell(fd, said.replace("\n", " ")[:300].encode() + b"\n")


def _newcomer(
    values: MutableMapping[str, Any], path: str, stop: int, go: int
) -> Callable[[int], None]:
    """A process that tries the lock, stopped after its ``stop``-th file or lock call."""

    def body(fd: int) -> None:
        tell, calls = _WRITE, [0]

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
    (SIGKILL before the newcomer starts: the holder's file stays behind) or
    ``"released"`` (it leaves its with block while the newcomer waits). Then a third
    process takes the lock whole, and the newcomer goes on. Each schedule, in a folder
    of its own: ``{"stop", "paused", "newcomer", "third"}``, what each one got.
    """
    runs = []
    with fresh_state(values):
        _attempt(values, str(pathlib.Path(folder) / "probe.lock"))
        for stop in stops:
            path = str(pathlib.Path(folder) / f"stop-{stop}" / "report.lock")
            os.makedirs(os.path.dirname(path))
            runs.append(_one_race(values, path, event, stop))
    return runs


def _one_race(values: MutableMapping[str, Any], path: str, event: str, stop: int) -> dict[str, Any]:
    run: dict[str, Any] = {"stop": stop, "paused": False}
    with contextlib.ExitStack() as stack:
        release_r, release_w = os.pipe()
        go_r, go_w = os.pipe()
        for fd in (release_r, release_w, go_r, go_w):
            stack.callback(os.close, fd)
        holder_pid, holder_fd = stack.enter_context(
            _child(lambda fd: _holds(values, path, fd, release_r))
        )
        holder = _Said(holder_fd)
        run["holder"] = holder.next()
        if event == "killed":
            os.kill(holder_pid, signal.SIGKILL)
            os.waitpid(holder_pid, 0)
        newcomer = _Said(stack.enter_context(_child(_newcomer(values, path, stop, go_r)))[1])
        first = newcomer.next()
        run["paused"] = first == "paused"
        if event == "released":
            os.write(release_w, b"release")
            run["released"] = holder.next()
        third = _Said(stack.enter_context(_child(lambda fd: _holds(values, path, fd, None)))[1])
        run["third"] = third.next()
        os.write(go_w, b"go")
        run["newcomer"] = newcomer.next() if run["paused"] else first
    return run


def attempt_once(values: MutableMapping[str, Any], path: str) -> str:
    """One attempt here, alone: ``"acquired"``, ``"refused: ..."`` or ``"raised <Type>: ..."``."""
    with fresh_state(values):
        return _attempt(values, path)


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
        _attempt(values, path)  # here first, so a stub says "not started yet"
        go_read, go_write = os.pipe()
        stack.callback(os.close, go_read)
        stack.callback(os.close, go_write)

        def body(write_fd: int) -> None:
            select.select([go_read], [], [], 10.0)
            os.write(write_fd, _attempt(values, path).encode()[:400])

        _pid, fd = stack.enter_context(_child(body))
        held = need(values, "single_instance")(path)
        held.__enter__()
        released = False
        try:
            os.write(go_write, b"go")
            ready, _, _ = select.select([fd], [], [], patience)
            out["while_held"] = bool(ready)
            released = True
            held.__exit__(None, None, None)
            out["answer"] = _read(fd)
        finally:
            if not released:
                held.__exit__(None, None, None)
    return out


def refused_as_the_holder_leaves(values: MutableMapping[str, Any], path: str) -> dict[str, Any]:
    """A child tries while this process holds the lock; the holder lets go the moment the
    child's flock finds it busy.

    A refused attempt answers AlreadyRunning then, however soon the holder leaves; one that
    tries again (after a pause, in a loop) gets the lock and runs right after the holder.
    The lock here is a plain flock on the file, taken after the fork, so the child does not
    share it. Returns ``{"busy_seen": bool, "answer": ...}``.
    """
    with fresh_state(values), contextlib.ExitStack() as stack:
        _attempt(values, path)  # here first, so a stub says "not started yet"
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
                    _WRITE(fd, b"busy\n")
                    raise

            fcntl.flock = flock
            said = _attempt(values, path)
            _WRITE(fd, said.replace("\n", " ")[:300].encode() + b"\n")

        _pid, fd = stack.enter_context(_child(body))
        said = _Said(fd)
        holder = open(path, "a+")  # noqa: SIM115 - closed below, the release under test
        try:
            fcntl.flock(holder.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            holder.seek(0)
            holder.truncate()
            holder.write(str(os.getpid()))
            holder.flush()
            os.write(go_write, b"go")
            first = said.next(5.0)
        finally:
            holder.close()
        answer = said.next(5.0) if first == "busy" else first
    return {"busy_seen": first == "busy", "answer": answer}


def attempts_beside_a_plain_holder(
    values: MutableMapping[str, Any], folder: str, cases: list[list[Any]]
) -> list[dict[str, Any]]:
    """For each ``[text, age_s]``: a holder here locks a file holding ``text``, last
    written ``age_s`` seconds ago; the student's code tries twice, in this process.

    The holder is a plain ``flock`` on its own open file, alive all along: whatever its
    file says (nothing yet, a pid this process cannot see, an old date), the lock is held.
    Each result: ``{"answer", "again", "same_file"}``, ``same_file`` False when the
    attempts deleted or replaced the holder's file.
    """
    out = []
    with fresh_state(values):
        _attempt(values, str(pathlib.Path(folder) / "probe.lock"))
        for i, (text, age_s) in enumerate(cases):
            path = pathlib.Path(folder) / f"case-{i}" / "report.lock"
            path.parent.mkdir()
            with open(path, "a+") as holder:
                fcntl.flock(holder.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                holder.write(text)
                holder.flush()
                then = time.time() - age_s
                os.utime(path, (then, then))
                inode = os.fstat(holder.fileno()).st_ino
                answer = _attempt(values, str(path))
                again = _attempt(values, str(path))
                try:
                    same = os.stat(path).st_ino == inode
                except OSError:
                    same = False
            out.append({"answer": answer, "again": again, "same_file": same})
    return out


def second_lock_in_one_process(
    values: MutableMapping[str, Any], first: str, second: str
) -> dict[str, Any]:
    """Hold the lock on ``first``, then also on ``second`` (another job's lock, in the same
    scheduler process), and try ``first`` again while both are held."""
    out: dict[str, Any] = {}
    with fresh_state(values):
        lock = need(values, "single_instance")
        try:
            with lock(first):
                with lock(second):
                    out["first_again"] = _attempt(values, first)
        except NotImplementedError as exc:
            if is_stub(exc):
                raise
            out["error"] = f"raised NotImplementedError: {exc}"
        except Exception as exc:  # noqa: BLE001 - reported to the check
            out["error"] = f"raised {type(exc).__name__}: {str(exc)[:160]}"
    return out


def attempt_when_opening_is_refused(values: MutableMapping[str, Any], path: str) -> str:
    """One attempt here while every open of ``path`` fails with PermissionError (a lock
    file the job's user may not open), whoever runs the grader (root opens anything)."""
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

    with fresh_state(values):
        _attempt(values, str(pathlib.Path(path).with_name("probe.lock")))
        builtins.open, os.open = guarded_open, guarded_os_open  # type: ignore[assignment]
        try:
            return _attempt(values, path)
        finally:
            builtins.open, os.open = real_open, real_os_open


def _open_files() -> int:
    """How many file descriptors this process has open."""
    return len(os.listdir("/proc/self/fd"))


def open_files_after_uses(values: MutableMapping[str, Any], path: str, uses: int) -> dict[str, Any]:
    """``uses`` times: hold the lock, be refused once inside, leave the block.

    A scheduler takes the same lock at every run, for months, in one process. Returns
    the open file descriptors before and after (``{"before", "after", "error"?}``) and
    the last refusal.
    """
    out: dict[str, Any] = {}
    with fresh_state(values):
        _attempt(values, path)  # here first, so a stub says "not started yet"
        out["before"] = _open_files()
        try:
            for _ in range(uses):
                with need(values, "single_instance")(path):
                    out["refused"] = _attempt(values, path)
        except NotImplementedError as exc:
            if is_stub(exc):
                raise
            out["error"] = f"raised NotImplementedError: {exc}"
        except Exception as exc:  # noqa: BLE001 - reported to the check
            out["error"] = f"raised {type(exc).__name__}: {str(exc)[:160]}"
        out["after"] = _open_files()
    return out


def file_while_a_forked_worker_holds(values: MutableMapping[str, Any], path: str) -> dict[str, Any]:
    """A worker forked from this process (as a pool starts them, after the code was
    loaded) holds the lock; ``{"pid": its pid, "file": the file's text while it holds}``.
    """
    with fresh_state(values):
        _attempt(values, path)  # here first, so a stub says "not started yet"

        def body(write_fd: int) -> None:
            try:
                with need(values, "single_instance")(path):
                    os.write(write_fd, f"{os.getpid()} {_text(path)}".encode()[:400])
            except Exception as exc:  # noqa: BLE001 - reported to the check
                os.write(write_fd, f"{os.getpid()} <{type(exc).__name__}>".encode())

        with _child(body) as (pid, fd):
            said = _read(fd)
    child, _sep, text = said.partition(" ")
    return {"pid": pid, "child": child, "file": text}


def refused_by_holders_in_turn(values: MutableMapping[str, Any], path: str) -> dict[str, Any]:
    """Two children hold the lock one after the other (the first killed before the second
    starts); this process, one process all along, tries once under each.

    Returns ``{"holders": [pid, pid], "refusals": [text, text], "files": [text, text]}``
    (the file's text at each refusal): a holder's pid kept from the first refusal names
    a process long gone under the second.
    """
    out: dict[str, Any] = {"holders": [], "refusals": [], "files": []}
    with fresh_state(values):
        _attempt(values, path)  # here first, so a stub says "not started yet"
        for _turn in range(2):
            with _child(_holder(values, path)) as (pid, fd):
                _read(fd)
                out["holders"].append(pid)
                out["refusals"].append(_attempt(values, path))
                out["files"].append(_text(path))
    return out


def _wait_or_kill(pid: int, timeout: float = 10.0) -> None:
    """Reap the child ``pid``; SIGKILL it first if it is still running after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, _status = os.waitpid(pid, os.WNOHANG)
        if done:
            return
        time.sleep(0.01)
    with contextlib.suppress(ProcessLookupError, ChildProcessError):
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def attempt_after_a_forked_worker_left(
    values: MutableMapping[str, Any], path: str
) -> dict[str, Any]:
    """Hold the lock here; inside the block fork a worker that leaves the block by an
    exception (as ``sys.exit()`` does in a worker forked there) and exits; then, still
    holding, attempt again as a second copy would.

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
                if pid == 0:
                    raise SystemExit(0)  # the worker leaves the with block, as sys.exit()
                _wait_or_kill(pid)
                out["again"] = _attempt(values, path)
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
        _attempt(values, str(pathlib.Path(path).with_name("probe.lock")))
        pauses = [FIRST_PAUSE_S + i * step for i in range(n)]
        children = _released_together(stack, values, path, pauses)
        out["outcomes"] = [_read(fd) for _pid, fd in children]
        time.sleep(step)  # a late child's last file call, if it made one, is done
        for (pid, _fd), said in zip(children, out["outcomes"], strict=True):
            if said == "acquired":
                out["holder"] = pid
        out["file"] = _text(path)
    return out
