"""The processes the grader starts for a student: their output read with a cap, their tree killed.

``ConfinedPopen.communicate`` keeps at most ``output_cap`` bytes of each stream and
drains the rest, so a spawned consumer that prints gigabytes costs the grader a pipe
buffer, not its memory (``Limits.output``, as for the notebook's own output).
``SandboxedPopen`` also reads bubblewrap's exit codes as the command's. ``kill_tree``
kills a confined process and everything it started: its control group where it has
one (``cgroups``), its session's process group always.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
from collections.abc import Callable
from typing import Any

from labkit.clock import SystemClock
from labkit.grading.isolation.cgroups import Group

#: What a process's output is kept to when nobody set a cap (the default Limits.output).
DEFAULT_CAP = 4 << 20


class CappedOutput:
    """``communicate`` that keeps at most ``output_cap`` bytes of each stream, for a process
    object with ``stdout``, ``stderr``, ``wait`` and ``args`` (a ``Popen``, or a program
    forked warm: ``labkit.grading.isolation.warm``)."""

    output_cap = DEFAULT_CAP
    stdout: Any
    stderr: Any
    args: Any
    wait: Callable[..., int]

    def communicate(
        self, input: Any = None, timeout: float | None = None
    ) -> tuple[Any, Any]:
        """Like ``Popen.communicate``; what a stream prints past the cap is read and dropped."""
        if input is not None:
            raise ValueError("a confined process reads nothing from the grader")
        # Kept across calls: a check that timed out kills the process and reads the rest.
        fds: tuple[int | None, int | None] = self.__dict__.setdefault(
            "_fds", tuple(None if s is None else s.fileno() for s in (self.stdout, self.stderr))
        )
        kept: dict[int, bytearray] = self.__dict__.setdefault(
            "_kept", {fd: bytearray() for fd in fds if fd is not None}
        )
        open_fds: set[int] = self.__dict__.setdefault("_open", set(kept))
        clock = SystemClock()
        deadline = None if timeout is None else clock.now() + timeout
        with selectors.DefaultSelector() as selector:
            for fd in open_fds:
                selector.register(fd, selectors.EVENT_READ)
            while open_fds:
                left = None if deadline is None else deadline - clock.now()
                if left is not None and left <= 0:
                    raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
                for key, _ in selector.select(left):
                    chunk = os.read(key.fd, 1 << 16)
                    if not chunk:
                        selector.unregister(key.fd)
                        open_fds.discard(key.fd)
                        continue
                    room = self.output_cap - len(kept[key.fd])
                    if room > 0:
                        kept[key.fd] += chunk[:room]
        left = None if deadline is None else max(0.0, deadline - clock.now())
        try:
            self.wait(left)
        except subprocess.TimeoutExpired:
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0) from None
        for stream in (self.stdout, self.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        out, err = (None if fd is None else self._decoded(bytes(kept[fd])) for fd in fds)
        return out, err

    def _decoded(self, data: bytes) -> Any:
        # Popen keeps these from its text=, encoding= and errors= (typeshed omits them).
        if not getattr(self, "text_mode", False):
            return data
        encoding = getattr(self, "encoding", None) or "utf-8"
        return data.decode(encoding, getattr(self, "errors", None) or "replace")


class ConfinedPopen(CappedOutput, subprocess.Popen[Any]):
    """A process of the student's; ``communicate`` keeps at most ``output_cap`` bytes a stream."""

    group: Group | None = None


class SandboxedPopen(ConfinedPopen):
    """A process started in bubblewrap, whose return code reads as if it ran bare.

    bwrap exits with ``128 + N`` when the command inside was killed by signal N; this
    turns that back into ``-N``, as ``subprocess`` reports a signal, so a check that
    kills a server (or a CPU limit that stops one) sees the same code either way.
    """

    def _translate(self) -> int | None:
        code = self.returncode
        if code is not None and 128 < code < 128 + 65:
            self.returncode = code = -(code - 128)
        return code

    def poll(self) -> int | None:
        super().poll()
        return self._translate()

    def wait(self, timeout: float | None = None) -> int:
        super().wait(timeout)
        code = self._translate()
        assert code is not None
        return code


def kill_tree(proc: subprocess.Popen[Any]) -> None:
    """Kill a confined process and everything it started; reap it.

    Its control group when it has one (nothing escapes that), then its session's
    process group (all there is on a machine without control groups).
    """
    group: Group | None = getattr(proc, "group", None)
    if group is not None:
        group.kill()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(10)
