"""The grader's side of a warm start: fork a program from an interpreter that imported once.

Exercise 10's checks serve the student's app about twenty times a notebook, and each
new Python imported FastAPI and uvicorn again: about 0.4 s of CPU a server, most of the
exercise's grading. ``Zygotes`` keeps, per notebook, one confined Python per set of
modules and str hash salt (``labkit.grading.isolation.zygote``) that imported them once;
``spawn`` asks it to fork a child that runs ``python -m MODULE ARGS...`` (or ``python
SCRIPT ARGS...``) with the environment, folder and descriptors, pipes included, a plain
start would have had. Exercises 8 and 9 start Celery workers and Redis consumers the
same way (importing Celery or redis-py costs a quarter to a third of a second each).

What a plain start gives a check, a warm one keeps:

- the same sandbox, uid, limits and network (the zygote was started like any spawned
  process, in the notebook's group and namespace);
- a control group of its own: the child waits at a gate until the grader has moved it
  there, so ``kill_tree`` kills whatever it starts, in any session;
- its own str hash salt: a zygote per ``PYTHONHASHSEED`` (two servers of one check that
  must hash differently come from two zygotes);
- a fresh import of the student's module (the zygote never imports it) and a fresh
  ``random`` state (reseeded at fork);
- ``poll``/``wait``/``returncode`` as ``subprocess`` reports them: liveness from a
  pidfd the grader holds, the code from the zygote's report (``-9`` after a SIGKILL).

The zygote runs as the student: the grader takes from it only which child is which, and
looks that up itself among the zygote's own group before it moves anything.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from labkit.clock import SystemClock
from labkit.grading.isolation import zygote as student_side
from labkit.grading.isolation.cgroups import Group
from labkit.grading.isolation.processes import CappedOutput, kill_tree

#: Seconds a zygote may take to import its modules (about one on a loaded machine; a
#: student's file that shadows one of them and hangs costs this once, then the
#: notebook's programs start plainly), and to answer a start.
READY_TIMEOUT_S = 20.0
ANSWER_TIMEOUT_S = 10.0
#: Exit reports kept for children nobody asked about yet: a zygote that floods the
#: socket with made-up ones costs the grader this much memory, no more.
MAX_REPORTS = 1000
#: What, of the environment, an interpreter reads as it starts: a child forked from a
#: zygote keeps the zygote's, so zygotes are told apart by these.
STARTUP_ENV = ("PYTHONHASHSEED", "PYTHONPATH")


class ZygoteFailed(RuntimeError):
    """The zygote did not start or did not answer: start the program plainly instead."""


class WarmProcess(CappedOutput):
    """A program a zygote forked, with the parts of ``subprocess.Popen`` checks use."""

    stdin = None
    #: Read by a harness that looks for its program among the spawned process's
    #: descendants (a plain start may be wrapped): a forked one is the program itself.
    forked = True

    def __init__(
        self, zygote: Zygote, inner: int, host: int, pidfd: int, group: Group, args: list[str]
    ):
        self.args = args
        self.pid = host  # the grader's view: signals and ``kill_tree`` use it
        self.inner = inner
        self.group = group
        self.returncode: int | None = None
        self._zygote = zygote
        self._pidfd = pidfd  # opened before the child ran: it may be gone by now
        self._killed = False
        self.stdout: Any = None
        self.stderr: Any = None
        self.text_mode = False
        self.encoding: str | None = None
        self.errors: str | None = None

    def attach(self, readers: Sequence[int | None], options: dict[str, Any]) -> None:
        """Give it the read ends of its stdout and stderr pipes, read as ``options`` say
        (``text``, ``encoding``, ``errors``, as ``subprocess`` takes them)."""
        self.stdout, self.stderr = (None if fd is None else open(fd, "rb") for fd in readers)
        self.encoding, self.errors = options.get("encoding"), options.get("errors")
        self.text_mode = bool(options.get("text") or self.encoding or self.errors)

    def poll(self) -> int | None:
        if self.returncode is not None:
            return self.returncode
        code = self._zygote.exit_code(self.inner)
        if code is None and _readable(self._pidfd, 0):
            # Gone: the zygote's report follows within its loop's tick, unless the
            # zygote is gone too.
            code = self._zygote.exit_code(self.inner, wait=1.0)
            if code is None:
                code = -signal.SIGKILL if self._killed else 1
        if code is not None:
            self.returncode = code
            with contextlib.suppress(OSError):
                os.close(self._pidfd)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        clock = SystemClock()
        deadline = None if timeout is None else clock.now() + timeout
        while self.poll() is None:
            left = None if deadline is None else deadline - clock.now()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
            _readable(self._pidfd, 0.05 if left is None else min(0.05, left))
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, number: int) -> None:
        if self.poll() is None:
            if number == signal.SIGKILL:
                self._killed = True
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, number)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


class Zygote:
    """One confined interpreter that imported ``modules`` and forks programs on request."""

    def __init__(self, proc: subprocess.Popen[Any], control: socket.socket, group: Group):
        self.proc = proc
        self.group = group
        self._control = control
        self._lock = threading.Lock()
        self._exits: dict[int, int] = {}
        self._closed = False  # the zygote closed its end: no more reports

    @classmethod
    def start(
        cls,
        popen: Callable[..., subprocess.Popen[Any]],
        modules: Sequence[str],
        group: Group,
        timeout: float = READY_TIMEOUT_S,
    ) -> Zygote:
        """Start one with ``popen`` (confined, in ``group``); wait until it imported."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            argv = [sys.executable, "-m", student_side.__name__, str(theirs.fileno()), *modules]
            proc = popen(argv, pass_fds=(theirs.fileno(),))
        finally:
            theirs.close()
        zygote = cls(proc, ours, group)
        try:
            zygote._expect("ready", timeout)
        except ZygoteFailed:
            zygote.close()
            raise
        return zygote

    @property
    def alive(self) -> bool:
        return not self._closed and self.proc.poll() is None

    def spawn(
        self,
        target: tuple[str, str, list[str]],
        env: dict[str, str],
        cwd: Path,
        stdio: tuple[int, int, int],
        pass_fds: Sequence[int],
        group: Group,
    ) -> WarmProcess:
        """Fork ``python -m NAME ARGS...`` (``target`` is ``("module", NAME, ARGS)``) or
        ``python PATH ARGS...`` (``("script", PATH, ARGS)``); it runs once it is a member
        of ``group``."""
        kind, name, args = target
        request = {
            "op": "start",
            kind: name,
            "args": args,
            "env": env,
            "cwd": str(cwd),
            "fds": list(pass_fds),
        }
        with self._lock:
            try:
                socket.send_fds(self._control, [json.dumps(request).encode()], [*stdio, *pass_fds])
            except OSError as exc:
                raise ZygoteFailed(f"the zygote took no request ({exc})") from None
            inner = int(self._expect("started", ANSWER_TIMEOUT_S))
        host = self._host_pid(inner)
        if host is None:
            raise ZygoteFailed(f"the zygote's child {inner} is not in the zygote's group")
        # Held before "go": a program that ends at once (or kills its zygote, whose
        # orphan the sandbox's init then reaps) leaves no pid to open afterwards.
        pidfd = os.pidfd_open(host)
        try:
            group.admit(host)
            with self._lock:
                self._control.send(json.dumps({"op": "go", "pid": inner}).encode())
        except BaseException:
            os.close(pidfd)
            raise
        shown = ["-m", name] if kind == "module" else [name]
        return WarmProcess(self, inner, host, pidfd, group, [sys.executable, *shown, *args])

    def exit_code(self, inner: int, wait: float = 0.0) -> int | None:
        """The code the zygote reported for child ``inner``, reading what it has sent."""
        clock = SystemClock()
        deadline = clock.now() + wait
        with self._lock:
            while inner not in self._exits and not self._closed:
                left = deadline - clock.now()
                if not self._receive(max(0.0, left)) and left <= 0:
                    break
            return self._exits.pop(inner, None)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._control.close()
        kill_tree(self.proc)

    # -- the socket ------------------------------------------------------------------

    def _expect(self, key: str, timeout: float) -> Any:
        clock = SystemClock()
        deadline = clock.now() + timeout
        while True:
            left = deadline - clock.now()
            if left <= 0 or self._closed or self.proc.poll() is not None:
                raise ZygoteFailed(f"no {key!r} from the zygote within {timeout:g} s")
            message = self._receive(min(left, 0.5))
            if message and key in message:
                return message[key]

    def _receive(self, timeout: float) -> dict[str, Any] | None:
        """One message (exit reports are kept aside), or None after ``timeout``."""
        if not _readable(self._control.fileno(), timeout):
            return None
        try:
            data = self._control.recv(student_side.MAX_MESSAGE)
        except OSError:
            data = b""
        if not data:
            self._closed = True
            return None
        try:
            message = json.loads(data)
        except ValueError:
            return None
        if not isinstance(message, dict):
            return None
        if "exited" in message and len(self._exits) < MAX_REPORTS:
            with contextlib.suppress(TypeError, ValueError):
                self._exits[int(message["exited"])] = int(message["code"])
        return message

    def _host_pid(self, inner: int) -> int | None:
        """The grader's pid of the zygote's child ``inner``: a member of the zygote's own
        group whose innermost pid is ``inner``."""
        for pid in self.group.pids():
            if _innermost_pid(pid) == inner:
                return pid
        return None


class Zygotes:
    """A notebook's zygotes, one per (modules, startup environment), started on first use."""

    def __init__(
        self,
        popen: Callable[[list[str], Group, dict[str, str], dict[str, Any]], subprocess.Popen[Any]],
        parent: Group,
    ) -> None:
        self._popen = popen
        self._parent = parent
        self._zygotes: dict[tuple[Any, ...], Zygote] = {}
        self._failed: set[tuple[Any, ...]] = set()
        self._count = 0

    def get(self, modules: Sequence[str], env: dict[str, str]) -> Zygote:
        """The zygote for ``modules`` under ``env``'s startup variables; ``ZygoteFailed``
        when it cannot start (once: later starts of that kind are plain at once)."""
        startup = {k: env[k] for k in STARTUP_ENV if k in env}
        key = (tuple(modules), tuple(sorted(startup.items())))
        if key in self._failed:
            raise ZygoteFailed("this zygote failed to start before")
        found = self._zygotes.get(key)
        if found is not None and found.alive:
            return found
        if found is not None:
            found.close()
        group = self._parent.child(f"zygote-{self._count}")
        self._count += 1

        def popen(argv: list[str], **kwargs: Any) -> subprocess.Popen[Any]:
            return self._popen(argv, group, startup, kwargs)

        try:
            self._zygotes[key] = zygote = Zygote.start(popen, modules, group)
        except ZygoteFailed:
            self._failed.add(key)
            raise
        return zygote

    def close(self) -> None:
        for zygote in self._zygotes.values():
            zygote.close()
        self._zygotes.clear()


#: What a warm start passes on to the forked program; anything else is started plainly.
WARM_OPTIONS = {"env", "stdin", "stdout", "stderr", "pass_fds", "text", "encoding", "errors"}


def warm_target(argv: Sequence[str], options: dict[str, Any]) -> tuple[str, str, list[str]] | None:
    """``("module", name, args)`` of ``[python, "-m", name, *args]``, ``("script", path,
    args)`` of ``[python, path, *args]``, started with only ``WARM_OPTIONS`` and no pipe
    into it; None for anything a warm start does not do."""
    if set(options) - WARM_OPTIONS or options.get("stdin") == subprocess.PIPE:
        return None
    if len(argv) < 2 or argv[0] != sys.executable:
        return None
    if argv[1] == "-m" and len(argv) >= 3:
        return "module", argv[2], list(argv[3:])
    if not argv[1].startswith("-"):
        return "script", argv[1], list(argv[2:])
    return None


@contextlib.contextmanager
def stdio_of(options: dict[str, Any]) -> Iterator[tuple[tuple[int, int, int], list[int | None]]]:
    """The descriptors ``options`` ask for at 0, 1 and 2, as ``subprocess`` reads them
    (None or DEVNULL: /dev/null; STDOUT: stderr to stdout; PIPE: a pipe's write end), open
    for the block; and the read ends of stdout's and stderr's pipes (None: no pipe), which
    stay open for the caller unless the block raises."""
    with contextlib.ExitStack() as stack:
        null = stack.enter_context(open(os.devnull, "r+b"))
        fds: list[int] = []
        readers: list[int | None] = []
        for name in ("stdin", "stdout", "stderr"):
            value = options.get(name)
            reader = None
            if value == subprocess.STDOUT and name == "stderr":
                fds.append(fds[1])
            elif value is None or value == subprocess.DEVNULL:
                fds.append(null.fileno())
            elif value == subprocess.PIPE:
                reader, writer = os.pipe()
                stack.callback(os.close, writer)
                fds.append(writer)
            else:
                fds.append(value if isinstance(value, int) else value.fileno())
            if name != "stdin":
                readers.append(reader)
        try:
            yield (fds[0], fds[1], fds[2]), readers
        except BaseException:
            for fd in readers:
                if fd is not None:
                    os.close(fd)
            raise


def _innermost_pid(pid: int) -> int | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("NSpid:"):
            return int(line.split()[-1])
    return None


def _readable(fd: int, timeout: float) -> bool:
    try:
        return bool(select.select([fd], [], [], timeout)[0])
    except (OSError, ValueError):
        return True
