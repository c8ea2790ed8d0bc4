"""Start real ``celery worker`` and ``celery beat`` processes, kill them, never leave one behind.

``start_worker(app, queue=..., folder=...)`` runs ``python -m celery -A APP worker`` in
its own session (process group) and returns a ``CeleryWorker``:

- ``wait_ready()`` waits for the worker's "ready." log line (its consumer is up);
- ``kill_child()`` SIGKILLs the prefork pool child that runs tasks (what the kernel's
  OOM killer usually picks); the main process survives and forks a new child;
- ``kill_main()`` SIGKILLs the main process, the one holding the broker connection,
  then the rest of its group (an orphaned pool child would otherwise go on running its
  task unseen; when a machine or container dies, everything dies together);
- ``stop()`` asks for a warm shutdown (SIGTERM: finish the current task, then exit);
- leaving the ``with`` block (or ``close()``) SIGKILLs the whole process tree, whatever
  happened, so no worker outlives the lesson or the test.

``start_beat(app, folder=...)`` does the same for ``celery beat``. ``spawn=`` takes the
function that starts the process (the grader passes ``ns.spawn`` so the worker runs as
the student's code does); it must start a new session, as ``ns.spawn`` does, and gets
plain data only (argv, cwd, env, ``DEVNULL`` streams): the process opens its own log.
The spawned pid may be a wrapper's (the grader's bubblewrap runs the command as its
child, in a session of its own): ``main_pid`` is the celery process, found in the
kernel's process tree, and kills and waits go by the tree, not by the process group.
Killed workers leave nothing behind even when the lab itself is killed: each Celery
process asks Linux to SIGKILL it when its parent dies (``proctree.die_with_parent``).

Every process gets the run's ``tag`` in its command line (the node name, the beat's
schedule file), so ``leftovers(tag)`` can prove nothing of a run remains.

In production a supervisor (systemd, Kubernetes) runs ``celery worker``; this module is
only the lab's hands on it. It is a little over 400 lines: starting, watching, killing
and stopping a Celery process are one life cycle, kept together.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labkit.clock import Clock, SystemClock
from labkit.integrations.celery.proctree import (
    argv_of,
    children_of,
    descendants_of,
    group_members,
    is_alive,
    kill_tree,
    leftovers,
    wait_until,
)
from labkit.orphans import die_with_parent

__all__ = [
    "CeleryBeat",
    "CeleryNotReady",
    "CeleryWorker",
    "children_of",
    "descendants_of",
    "die_with_parent",
    "group_members",
    "is_alive",
    "leftovers",
    "start_beat",
    "start_worker",
    "wait_until",
]

Spawn = Callable[..., "subprocess.Popen[Any]"]

#: The log line a worker prints once its consumer is up: ``celery@NODE ready.``
READY_LINE = " ready."
#: What the main process logs for each message it takes (``Task NAME[ID] received``).
RECEIVED = "] received\n"
#: What the main process logs once it has declared a killed child's task lost.
LOST_LINE = "raised error: WorkerLostError"
#: The log line ``celery beat`` prints when its scheduler starts.
BEAT_LINE = "beat: Starting"


class CeleryNotReady(RuntimeError):
    """The Celery process did not become ready in time (or died first); see its log."""


def _default_spawn(argv: list[str], **kwargs: Any) -> subprocess.Popen[Any]:
    kwargs["start_new_session"] = True
    return subprocess.Popen(argv, **kwargs)


#: Process groups started by this interpreter and not yet killed: killed at exit.
_STARTED: set[int] = set()


@atexit.register
def _kill_leftovers() -> None:
    for pgid in list(_STARTED):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    _STARTED.clear()


def _celery_argv(log_path: Path, args: list[str]) -> list[str]:
    # Through this module's main, so what starts the process needs nothing but plain data
    # (argv, cwd, env): main opens the log, sets the parent-death signal, execs celery.
    return [sys.executable, "-m", __name__, str(log_path), *args]


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m labkit.integrations.celery.harness LOG_PATH CELERY_ARGS...``."""
    args = list(sys.argv[1:] if argv is None else argv)
    log_path, celery_args = args[0], args[1:]
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    die_with_parent(os.getppid())  # exits if the parent is already gone
    if "celery.bin.celery" in sys.modules:
        # A warm start (``ns.spawn(warm=...)``): this interpreter was forked from one that
        # imported Celery already, so Celery runs here rather than in a new interpreter.
        import runpy

        sys.argv = ["celery", *celery_args]
        runpy.run_module("celery", run_name="__main__", alter_sys=True)
        return
    os.execv(sys.executable, [sys.executable, "-m", "celery", *celery_args])


@dataclass
class _CeleryProcess:
    """A ``celery`` command in its own process group, with its log file."""

    popen: subprocess.Popen[Any]
    log_path: Path
    name: str
    clock: Clock = field(default_factory=SystemClock)

    _main: int | None = field(default=None, init=False, repr=False)

    @property
    def pid(self) -> int:
        """The spawned pid: the celery process itself, or the wrapper that runs it."""
        return self.popen.pid

    @property
    def main_pid(self) -> int | None:
        """Pid of the ``celery`` process itself; None until it has started.

        Started bare, that is the spawned pid (this module's ``main`` execs celery). A
        ``spawn`` may wrap the command (the grader's bubblewrap, then an interpreter that
        drops to the student's uid): then it is the nearest descendant running
        ``python -m celery``. Found from the kernel's process tree, never from what the
        worker writes, so a worker cannot point the lab's kills at another process.
        """
        if self._main is None and getattr(self.popen, "forked", False):
            self._main = self.popen.pid  # a warm start: the forked process runs celery itself
        if self._main is None:
            for pid in [self.popen.pid, *descendants_of(self.popen.pid)]:
                argv = argv_of(pid)
                if any(argv[i : i + 2] == ["-m", "celery"] for i in range(len(argv))):
                    self._main = pid
                    break
        return self._main

    @property
    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_text(self) -> str:
        """What the process wrote (Celery's log lines, tracebacks)."""
        if not self.log_path.exists():  # the process has not opened it yet
            return ""
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def _wait_line(self, line: str, timeout: float) -> None:
        def seen() -> bool:
            if not self.alive:
                raise CeleryNotReady(
                    f"{self.name} exited with code {self.popen.returncode} before it was "
                    f"ready; the end of its log ({self.log_path}):\n{self.log_text()[-2000:]}"
                )
            return line in self.log_text()

        try:
            wait_until(seen, timeout, f"{self.name} to log {line.strip()!r}", clock=self.clock)
        except TimeoutError as exc:
            raise CeleryNotReady(f"{exc}; the end of its log:\n{self.log_text()[-2000:]}") from None

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM (warm shutdown), wait up to ``timeout``; then kill the group. Exit code."""
        if self.alive:
            self.popen.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout)
        self.close()
        return self.popen.returncode

    def terminate(self) -> None:
        """SIGTERM the celery process, as a deploy does first, and return at once.

        Celery starts a warm shutdown: it takes no new message and finishes the tasks it
        runs. ``wait_log("Warm shutdown")`` sees it begin, ``popen.wait`` its end; a
        supervisor whose grace period runs out first sends SIGKILL (``kill_main``).
        """
        main = self.main_pid
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid if main is None else main, signal.SIGTERM)

    def wait_log(self, text: str, timeout: float = 30.0) -> None:
        """Wait until the process has logged a line containing ``text``."""
        self._wait_line(text, timeout)

    def close(self, also: Sequence[int] = ()) -> None:
        """SIGKILL the whole tree (wrapper, main process, every child); wait until gone.

        The tree, not only the process group: a wrapper may start the command in a
        session of its own (bubblewrap's ``--new-session``). ``also``: pids that were in
        the tree before a kill orphaned them (killed and waited for too).
        """
        tree = kill_tree(self.pid)
        for pid in also:
            if pid not in tree:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
                tree.append(pid)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(10)
        # SIGKILL is delivered at once but acted on a moment later: wait for the children.
        with contextlib.suppress(TimeoutError):
            wait_until(
                lambda: not group_members(self.pid) and not any(is_alive(p) for p in tree),
                10,
                f"{self.name}'s processes to die",
            )
        _STARTED.discard(self.pid)

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class CeleryWorker(_CeleryProcess):
    """A running ``celery worker`` (see the module docstring)."""

    def wait_ready(self, timeout: float = 60.0) -> CeleryWorker:
        """Wait for the "ready." line; ``CeleryNotReady`` with the log's end if it never comes."""
        self._wait_line(READY_LINE, timeout)
        return self

    def received(self) -> int:
        """How many messages the worker has logged as received (redeliveries included)."""
        return self.log_text().count(RECEIVED)

    def pool_children(self) -> list[int]:
        """Pids of the pool's child processes (empty for ``--pool=solo``, or before start)."""
        main = self.main_pid
        return children_of(main) if main is not None else []

    def kill_child(self, timeout: float = 60.0, *, busy: bool = True) -> int:
        """SIGKILL the (first) pool child and return its pid (see ``kill_children``)."""
        wait_until(lambda: bool(self.pool_children()), timeout, f"a pool child of {self.name}")
        child = self.pool_children()[0]
        self.kill_children([child], timeout, busy=busy)
        return child

    def kill_children(
        self, pids: Sequence[int], timeout: float = 60.0, *, busy: bool = True
    ) -> None:
        """SIGKILL these pool children together.

        With ``busy`` (each was running a task) this returns only once the main process
        has declared every one of those tasks lost (``WorkerLostError`` in its log) and
        so has acked or requeued its message. Celery does that at its next pool check
        after ``worker_lost_wait`` (every 5 s; every ``points.LOST_CHECK_S`` in a worker
        that includes ``labkit.integrations.celery.points`` under the lab): killing
        several children at once pays that wait once.
        """
        strangers = set(pids) - set(self.pool_children())
        if strangers:
            raise ValueError(f"{sorted(strangers)} are not pool children of {self.name}")
        lost_before = self.log_text().count(LOST_LINE)
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        wait_until(
            lambda: not set(pids) & set(self.pool_children()), timeout, f"children {pids} to die"
        )
        if busy:
            wait_until(
                lambda: self.log_text().count(LOST_LINE) >= lost_before + len(pids),
                timeout,
                f"{self.name} to report {len(pids)} lost task(s)",
            )

    def kill_main(self) -> None:
        """SIGKILL the main process (the broker connection dies with it), then the rest."""
        main = self.main_pid
        # Once main is dead its children are orphans, out of the wrapper's tree: note them.
        tree = [self.pid, *descendants_of(self.pid)]
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid if main is None else main, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(30)  # a wrapper exits once the command it ran is dead
        self.close(also=tree)


@dataclass
class CeleryBeat(_CeleryProcess):
    """A running ``celery beat``."""

    def wait_ready(self, timeout: float = 60.0) -> CeleryBeat:
        self._wait_line(BEAT_LINE, timeout)
        return self


def _env(env: Mapping[str, str] | None, folder: Path) -> dict[str, str]:
    merged = dict(os.environ)
    merged.update(env or {})
    # The child imports the app by name: the caller's import path, and its folder first.
    paths = [str(folder), *(p for p in sys.path if p and Path(p).is_dir())]
    merged["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return merged


def start_worker(
    app: str,
    *,
    queue: str,
    folder: str | Path,
    name: str = "w1",
    tag: str = "lab",
    concurrency: int = 1,
    pool: str = "prefork",
    prefetch_multiplier: int | None = None,
    env: Mapping[str, str] | None = None,
    extra: Sequence[str] = (),
    spawn: Spawn | None = None,
    clock: Clock | None = None,
    cwd: str | Path | None = None,
) -> CeleryWorker:
    """Start ``celery -A app worker`` consuming ``queue``; its log goes to ``folder/name.log``.

    The worker runs in ``cwd`` (default: ``folder``), which is also first on its import
    path, so ``app`` may be a module written there. Gossip, mingle and heartbeats are
    off: the lab's workers must not talk to other people's workers on a shared broker,
    and starting is faster without them.
    """
    folder = Path(folder).resolve()
    home = Path(cwd).resolve() if cwd is not None else folder
    log_path = folder / f"{name}.log"
    argv = [
        "-A",
        app,
        "worker",
        "--queues",
        queue,
        "--concurrency",
        str(concurrency),
        "--pool",
        pool,
        "--hostname",
        f"{name}@{tag}",
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
        "--loglevel",
        "INFO",
    ]
    if prefetch_multiplier is not None:
        argv += ["--prefetch-multiplier", str(prefetch_multiplier)]
    argv += list(extra)
    popen = (spawn or _default_spawn)(
        _celery_argv(log_path, argv),
        cwd=home,
        env=_env(env, home),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _STARTED.add(popen.pid)
    return CeleryWorker(popen, log_path, name, clock or SystemClock())


def start_beat(
    app: str,
    *,
    folder: str | Path,
    name: str = "beat1",
    tag: str = "lab",
    env: Mapping[str, str] | None = None,
    spawn: Spawn | None = None,
    clock: Clock | None = None,
) -> CeleryBeat:
    """Start ``celery -A app beat``, its schedule and pid files in ``folder`` (never the cwd)."""
    folder = Path(folder).resolve()
    log_path = folder / f"{name}.log"
    argv = [
        "-A",
        app,
        "beat",
        "--schedule",
        str(folder / f"{name}-{tag}.schedule"),
        "--pidfile",
        str(folder / f"{name}-{tag}.pid"),
        "--loglevel",
        "INFO",
    ]
    popen = (spawn or _default_spawn)(
        _celery_argv(log_path, argv),
        cwd=folder,
        env=_env(env, folder),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _STARTED.add(popen.pid)
    return CeleryBeat(popen, log_path, name, clock or SystemClock())


if __name__ == "__main__":
    main()
