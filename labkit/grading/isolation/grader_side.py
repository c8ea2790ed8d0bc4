"""The trusted side of the channel: a student's confined process and the checks' ``ns``.

``StudentProcess`` starts ``labkit.grading.isolation.student_side`` confined
(``confine``), sends it the
notebook's cells, drains its output (counting, up to the output limit), and brackets
each check (the student side forks a fresh child per check). ``RemoteNamespace`` is the
``Namespace`` a check receives under ``labkit grade``: ``ns.NAME(*args)``,
``ns.harness(...)``, ``ns.workdir``, ``ns.spawn(...)``, exactly the contract of
``labkit.grading.checks.Namespace``, with every value crossing as plain data.

A student exception comes back as ``StudentRaised`` with the student's line; the
exercise stub comes back as ``NotImplementedError`` so the check reads "not started".
The process that holds these objects never runs student code.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from labkit.grading.checks import CheckFailed, Namespace, StudentRaised
from labkit.grading.course import ROOT
from labkit.grading.isolation.cgroups import Group
from labkit.grading.isolation.channel import (
    ChannelClosed,
    ChannelTimeout,
    LineReader,
    NotData,
    Op,
    Reply,
    decode,
    encode,
    harness_target,
    request,
    write,
)
from labkit.grading.isolation.confine import Confinement
from labkit.grading.isolation.limits import limit_of_error, limit_of_signal
from labkit.grading.isolation.processes import kill_tree
from labkit.grading.isolation.services import private_redis
from labkit.grading.stub import is_stub_text

_PLAIN = "plain data (None, bool, int, float, str, bytes, list, tuple, dict)"
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
    ) -> None:
        self.confinement = confinement
        self.workdir = workdir
        self.cells = cells
        self.cell_timeout = cell_timeout
        self.limits_hit: list[str] = []
        self.starts = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._reader: LineReader | None = None
        self._to_student = -1
        self._output = 0
        self._discard_output = False
        self._drain: threading.Thread | None = None
        #: This life's control group (None where the machine has none): the cells'
        #: process and every process a check spawns live in it, and die with it.
        self.group: Group | None = None

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
        try:
            self._proc = self.confinement.popen(
                [sys.executable, "-I", "-B", "-c", boot],
                self.workdir,
                group=self.group.child("cells") if self.group else None,
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
        if self.group is not None:
            for limit in self.group.hits():
                self._limit(limit)
            self.group.remove()  # every process of this life, in any session, and its group
            self.group = None
        self.confinement.sweep()
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

    def begin_check(self) -> None:
        self.send(request(Op.CHECK))

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
            self.send(request(Op.CHECK))  # keep the two sides in step for the next request
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


class RemoteFunction:
    """``ns.NAME`` for a callable definition: calling it sends the arguments as data."""

    def __init__(self, ns: RemoteNamespace, name: str) -> None:
        self._ns = ns
        self.__name__ = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._ns._call(Op.CALL, self.__name__, args, kwargs)

    def __repr__(self) -> str:
        return f"<student function {self.__name__}>"


class RemoteNamespace(Namespace):
    """The ``Namespace`` contract over the channel: the student's code is in another process."""

    def __init__(self, student: StudentProcess) -> None:
        super().__init__({}, student.workdir)
        self._student = student
        self._redis: str | None = None

    def redis_url(self) -> str:
        """A Redis for this check alone, on a socket in the student's folder (see services)."""
        if self._redis is None:
            self._redis = private_redis(self.spawn, self.workdir)
        return self._redis

    def _call(self, op: Op, name: str, args: Any, kwargs: Any) -> Any:
        try:
            message = request(op, name, encode(list(args)), encode(dict(kwargs)))
        except NotData as exc:
            raise TypeError(f"a check passed something that is not data to {name}: {exc}") from exc
        reply = self._student.request(message)
        return self._value(reply, name, op == Op.HARNESS)

    def _value(self, reply: dict[str, Any], name: str, harness: bool) -> Any:
        if Reply.VALUE in reply:
            try:
                return decode(reply[Reply.VALUE])
            except (NotData, ValueError, TypeError) as exc:
                raise CheckFailed(_PLAIN, f"a malformed answer from {name} ({exc})") from None
        if Reply.NOT_DATA in reply:
            raise CheckFailed(
                f"{name} to return {_PLAIN}",
                str(reply[Reply.NOT_DATA])[:200],
                "return numbers, strings, lists, tuples or dicts, not objects",
            )
        if Reply.FAILED in reply:  # a harness's verdict: it can only take points away
            failed = reply[Reply.FAILED] if isinstance(reply[Reply.FAILED], dict) else {}
            raise CheckFailed(
                str(failed.get("expected", ""))[:300],
                str(failed.get("got", ""))[:300],
                str(failed.get("hint", ""))[:300] or None,
            )
        if Reply.MISSING in reply:
            raise self._missing(str(reply.get("name") or name)[:100])
        if Reply.RAISED in reply:
            raise self._raised(reply[Reply.RAISED], harness)
        raise CheckFailed("an answer from your code", f"an unexpected reply to {name}")

    def _raised(self, data: Any, harness: bool) -> BaseException:
        data = data if isinstance(data, dict) else {}
        types = tuple(str(t) for t in data.get("types", ()) if isinstance(t, str))[:20]
        message = str(data.get("message", ""))[:300]
        where = str(data.get("where", ""))[:100]
        self._student.note_raised(types, message)
        if "NotImplementedError" in types and is_stub_text(message):
            return NotImplementedError(message)
        if harness and not data.get("student"):
            return RuntimeError(f"the harness raised {types[:1] or ('an error',)[0]}: {message}")
        return StudentRaised(types, message, where)

    @staticmethod
    def _missing(name: str) -> CheckFailed:
        return CheckFailed(
            f"a definition named {name!r} in the notebook",
            "no such name",
            f"run the cell that defines {name} (and do not rename it), then check again",
        )

    def harness(self, target: str, *args: Any, **kwargs: Any) -> Any:
        harness_target(target)  # refused here, before anything is sent
        return self._call(Op.HARNESS, target, args, kwargs)

    def spawn(self, argv: list[str], **kwargs: Any) -> subprocess.Popen[Any]:
        """Start ``argv`` confined like the student's process, killed after the check."""
        student = self._student
        cwd = Path(kwargs.pop("cwd", self.workdir))
        student.confinement.hand_over(self.workdir)
        # The host's pid namespace: checks signal a spawned worker's children by the pids
        # it reports (ex08 kills one Celery pool process). Its tree still dies with the
        # check (its session is killed) and, as root, with the notebook (its uid is swept).
        group = student.group.child(f"spawn-{len(self._spawned)}") if student.group else None
        proc = student.confinement.popen(argv, cwd, own_pids=False, group=group, **kwargs)
        self._spawned.append(proc)
        return proc

    def kill(self, proc: subprocess.Popen[Any]) -> None:
        """SIGKILL a process ``spawn`` started, with everything it started; reap it."""
        kill_tree(proc)

    def close(self) -> None:
        for proc in self._spawned:
            self.kill(proc)
        self._spawned.clear()
        self._redis = None  # it was one of them

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        reply = self._student.request(request(Op.GET, name))
        if reply.get(Reply.CALLABLE):
            return RemoteFunction(self, name)
        return self._value(reply, name, False)
