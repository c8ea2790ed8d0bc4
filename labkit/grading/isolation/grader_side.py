"""The trusted side of the channel: a student's confined process and the checks' ``ns``.

``StudentProcess`` starts ``labkit.grading.isolation.student_side`` confined
(``confine``), sends it the notebook's cells, drains its output (counting, up to the
output limit), brackets each check (the student side forks a fresh child per check),
and owns what lives as long as the notebook: its control group, its network namespace
and its services. ``remote.RemoteNamespace`` is the ``Namespace`` checks receive over it.
The process that holds these objects never runs student code.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from labkit.grading.checks import CheckFailed
from labkit.grading.course import ROOT
from labkit.grading.isolation import disk
from labkit.grading.isolation.cgroups import Group
from labkit.grading.isolation.channel import (
    ChannelClosed,
    ChannelTimeout,
    LineReader,
    Op,
    Reply,
    request,
    write,
)
from labkit.grading.isolation.confine import Confinement
from labkit.grading.isolation.limits import limit_of_error, limit_of_signal
from labkit.grading.isolation.netns import NetworkNamespace
from labkit.grading.isolation.netns import available as netns_missing
from labkit.grading.isolation.processes import kill_tree
from labkit.grading.isolation.services import NotebookServices
from labkit.grading.isolation.warm import (
    WarmProcess,
    ZygoteFailed,
    Zygotes,
    stdio_of,
    warm_target,
)

T = TypeVar("T")


#: Imports the instructor's labkit (never a ``labkit/`` folder in the submission).
_BOOT = (
    "import sys; sys.path.insert(0, {root!r}); "
    "from labkit.grading.isolation.student_side import main; main(*{fds!r})"
)


class StudentGone(CheckFailed):
    """The student's process ended or stopped answering; the check cannot go on.

    ``kind`` is ``"timeout"`` (no answer in time) or ``"crash"`` (it ended or sent garbage).
    """

    def __init__(self, why: str, kind: str = "crash") -> None:
        super().__init__("your code to keep running until the check ended", why)
        self.kind = kind


class StudentProcess:
    """One confined process running one notebook's code, restartable between checks."""

    def __init__(
        self,
        confinement: Confinement,
        workdir: Path,
        cells: list[tuple[int, str]],
        cell_timeout: float,
        preload: tuple[str, ...] = (),
    ) -> None:
        self.confinement = confinement
        self.workdir = workdir
        self.cells = cells
        self.cell_timeout = cell_timeout
        #: Harness modules the student side imports once its cells ran, so that each
        #: check's fork has them instead of importing them again (``student_side.main``).
        self.preload = preload
        self.limits_hit: list[str] = []
        self.starts = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._reader: LineReader | None = None
        self._to_student = -1
        self._output = 0
        self._discard_output = False
        #: What the current check's fork seeds its ``random`` module with (``begin_check``).
        self._seed: str | None = None
        self._drain: threading.Thread | None = None
        #: This life's control group (None where the machine has none): the cells'
        #: process and every process a check spawns live in it, and die with it.
        self.group: Group | None = None
        #: This life's network namespace, for an exercise whose code needs TCP (None
        #: otherwise, or where the machine can make none): its processes and services
        #: share it, and nothing else of the machine is in it.
        self.netns: NetworkNamespace | None = None
        self._services: NotebookServices | None = None
        #: Warm interpreters that fork the programs checks start (``warm``), per life.
        self._zygotes: Zygotes | None = None
        self._starter: ThreadPoolExecutor | None = None
        #: CPU seconds the notebook's earlier lives used (``Limits.cpu_total`` is per
        #: notebook), and the event that ends this life's CPU watch.
        self._cpu_before = 0.0
        self._watching = threading.Event()

    # -- life cycle -------------------------------------------------------------

    def start(self) -> dict[str, Any]:
        """Start the process and run the cells; the student side's report on them.

        Raises ``StudentGone`` when the cells never finish (hang past every cell's
        timeout, crash, or a limit that kills the process).
        """
        self.stop()
        self.starts += 1
        root = str(ROOT)
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        out_r, out_w = os.pipe()
        boot = _BOOT.format(root=root, fds=(req_r, rep_w))
        self.group = self.confinement.notebook_group()
        if self.group is not None:
            self._watching = threading.Event()
            threading.Thread(
                target=self._watch_cpu, args=(self.group, self._watching), daemon=True
            ).start()
        if self.confinement.network and netns_missing() is None:
            try:
                self.netns = NetworkNamespace.create()
            except OSError as exc:  # never fall back to the machine's network silently
                raise StudentGone(
                    f"the grading machine could not make this notebook's network ({exc}); "
                    "a grading machine problem, not yours"
                ) from exc
        try:
            self._proc = self.confinement.popen(
                [sys.executable, "-I", "-B", "-c", boot],
                self.workdir,
                group=self.group.child("cells") if self.group else None,
                netns=self.netns,
                stdout=subprocess.DEVNULL if self._discard_output else out_w,
                stderr=subprocess.STDOUT,
                pass_fds=(req_r, rep_w),
            )
        finally:
            for fd in (req_r, rep_w, out_w):
                os.close(fd)
        self._to_student = req_w
        self._reader = LineReader(rep_r)
        self._output = 0
        self._drain = threading.Thread(target=self._read_output, args=(out_r,), daemon=True)
        self._drain.start()
        self.send(
            {
                "cells": self.cells,
                "cell_timeout": self.cell_timeout,
                "isolated": self.confinement.isolated,
                "preload": list(self.preload),
            }
        )
        budget = 30 + self.cell_timeout * (len(self.cells) + 1)
        reply = self.receive(budget)
        if not reply.get(Reply.READY):
            raise StudentGone("the student's process did not get ready")
        return reply

    def _read_output(self, fd: int) -> None:
        """Count what the student's code prints; past the limit, stop reading and kill."""
        cap = self.confinement.limits.output
        try:
            while True:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    return
                self._output += len(chunk)
                if self._output > cap:
                    self._limit("output")
                    self._discard_output = True
                    proc = self._proc
                    if proc is not None:
                        kill_tree(proc)
                    return
        finally:
            os.close(fd)

    def stop(self) -> None:
        """Kill the process with its whole tree (group, sandbox, and everything of its uid)."""
        if self._proc is not None:
            kill_tree(self._proc)
            rc = self._proc.returncode
            limit = limit_of_signal(rc)
            if limit:
                self._limit(limit)
            self._proc = None
        if disk.full(self.workdir):
            self._limit("disk")
        if self.group is not None:
            self._watching.set()
            self._cpu_before += self.group.cpu_seconds() or 0.0
            for limit in self.group.hits():
                self._limit(limit)
            self.group.remove()  # every process of this life, in any session, and its group
            self.group = None
        self.confinement.sweep()
        self._services = None  # its processes were in the group, and are gone
        if self._zygotes is not None:
            self._zygotes.close()  # their processes are gone too: this closes the sockets
            self._zygotes = None
        if self._starter is not None:
            self._starter.shutdown()
            self._starter = None
        if self.netns is not None:
            self.netns.remove()
            self.netns = None
        with contextlib.suppress(OSError):
            if self._to_student >= 0:
                os.close(self._to_student)
        self._to_student = -1
        if self._reader is not None:
            with contextlib.suppress(OSError):
                os.close(self._reader.fd)
            self._reader = None
        if self._drain is not None:
            self._drain.join(5)
            self._drain = None

    def _watch_cpu(self, group: Group, stop: threading.Event) -> None:
        """Kill the life's group once the notebook's processes used ``cpu_total`` together."""
        budget = self.confinement.limits.cpu_total
        while not stop.wait(0.5):
            used = group.cpu_seconds()
            if used is None:
                return  # this machine does not count it
            if self._cpu_before + used > budget:
                self._limit("cpu_total")
                group.kill()
                return

    def services(self) -> NotebookServices | None:
        """This notebook's own RabbitMQ and PostgreSQL (started on first use), or None
        where the machine can make no network namespace."""
        if self.netns is None:
            return None
        if self._services is None:
            self._services = NotebookServices(self.netns, self._start_service, self.workdir)
        return self._services

    def _start_service(self, name: str, argv: list[str], env: dict[str, str]) -> Any:
        """A service of the notebook: confined like its code, in its group and namespace,
        with the room a server needs (``Limits.for_services``), its output in a log."""
        log_path = self.workdir / ".labkit-services" / f"{name}.log"
        self.confinement.hand_over(self.workdir)
        group = self.group.child(f"service-{name}") if self.group else None

        def start() -> subprocess.Popen[Any]:
            with log_path.open("ab") as log:
                return self.confinement.popen(
                    argv,
                    self.workdir,
                    group=group,
                    netns=self.netns,
                    limits=self.confinement.limits.for_services(),
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )

        return self._in_notebook_thread(start)

    def _in_notebook_thread(self, start: Callable[[], T]) -> T:
        """``start()`` run in a thread that lives as long as the notebook.

        bubblewrap's --die-with-parent watches the *thread* that started it, and each
        check runs in a thread of its own: a service started there would die with the
        check.
        """
        if self._starter is None:
            self._starter = ThreadPoolExecutor(1, thread_name_prefix="notebook-services")
        return self._starter.submit(start).result()

    def warm_start(
        self,
        argv: list[str],
        modules: Sequence[str],
        cwd: Path,
        group: Group,
        options: dict[str, Any],
    ) -> WarmProcess | None:
        """``argv`` forked in ``group`` from this notebook's zygote for ``modules``
        (``labkit.grading.isolation.warm``); None where that cannot be done, and the
        caller starts it plainly: no control groups, neither ``python -m MODULE`` nor
        ``python SCRIPT``, a pipe into it or an option a fork cannot honour, or a zygote
        that failed."""
        target = warm_target(argv, options)
        if target is None or self.group is None:
            return None
        env = self.confinement.environment(self.workdir, options.get("env"))
        parent = self.group
        if self._zygotes is None:
            self._zygotes = Zygotes(self._zygote_popen, parent)
        zygotes = self._zygotes
        try:
            zygote = self._in_notebook_thread(lambda: zygotes.get(modules, env))
            with stdio_of(options) as (stdio, readers):
                proc = zygote.spawn(target, env, cwd, stdio, options.get("pass_fds", ()), group)
            proc.attach(readers, options)
            proc.output_cap = self.confinement.limits.output
            return proc
        except ZygoteFailed:
            return None

    def _zygote_popen(
        self, argv: list[str], group: Group, env: dict[str, str], options: dict[str, Any]
    ) -> subprocess.Popen[Any]:
        with (self.workdir / ".labkit-zygote.log").open("ab") as log:
            return self.confinement.popen(
                argv,
                self.workdir,
                group=group,
                netns=self.netns,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                **options,
            )

    @property
    def output_capped(self) -> bool:
        """True once the output limit was hit (later starts discard the output)."""
        return self._discard_output

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None and self._reader is not None

    def _limit(self, what: str) -> None:
        note = self.confinement.limits.hit(what)
        if note not in self.limits_hit:
            self.limits_hit.append(note)

    # -- the channel --------------------------------------------------------------

    def send(self, message: dict[str, Any]) -> None:
        if self._to_student < 0:
            raise StudentGone("the student's process is not running")
        try:
            write(self._to_student, message)
        except OSError as exc:
            raise StudentGone("the student's process stopped reading") from exc

    def receive(self, timeout: float | None) -> dict[str, Any]:
        if self._reader is None:
            raise StudentGone("the student's process is not running")
        try:
            return self._reader.read(timeout)
        except ChannelClosed as exc:
            raise StudentGone(self._ended_how()) from exc
        except ChannelTimeout as exc:
            raise StudentGone(
                f"no answer within {timeout:g}s (a cell or call that never ends?)", "timeout"
            ) from exc
        except ValueError as exc:
            raise StudentGone(f"the student's process sent garbage ({exc})") from exc

    def _ended_how(self) -> str:
        if self._proc is None:
            return "the student's process was stopped"
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(2)
        rc = self._proc.returncode
        limit = limit_of_signal(rc)
        if limit:
            self._limit(limit)
            return self.confinement.limits.hit(limit)
        if self._output > self.confinement.limits.output:
            return self.confinement.limits.hit("output")
        return f"the student's process ended (exit code {rc})"

    def begin_check(self, seed: str | None = None) -> None:
        """Start a check in a fresh fork whose ``random`` module is seeded with ``seed``
        (``seeds.student_seed``)."""
        self._seed = seed
        self.send(request(Op.CHECK, args=seed))

    def end_check(self) -> None:
        """End the current check; the student side reports how its child ended."""
        self.send(request(Op.END))
        reply = self.receive(30)
        while Reply.ENDED not in reply:  # stale replies of a check that gave up early
            reply = self.receive(30)
        self._child_ended(reply[Reply.ENDED])

    def _child_ended(self, code: Any) -> None:
        limit = limit_of_signal(code if isinstance(code, int) else None)
        if limit:
            self._limit(limit)

    def request(self, message: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
        """Send one request inside a check and return the reply (a died child raises)."""
        self.confinement.hand_over(self.workdir)
        self.send(message)
        reply = self.receive(timeout)
        # Again now the student's code has run: the check is about to read its files.
        self.confinement.hand_over(self.workdir)
        if Reply.ENDED in reply:
            self._child_ended(reply[Reply.ENDED])
            # Keep the two sides in step for the next request.
            self.send(request(Op.CHECK, args=self._seed))
            code = reply[Reply.ENDED]
            limit = limit_of_signal(code if isinstance(code, int) else None)
            why = self.confinement.limits.hit(limit) if limit else f"exit code {code}"
            raise CheckFailed(
                "your code to return an answer",
                f"the process running your code ended ({why})",
            )
        return reply

    def note_raised(self, types: tuple[str, ...], message: str) -> None:
        limit = limit_of_error(types, message)
        if limit:
            self._limit(limit)
