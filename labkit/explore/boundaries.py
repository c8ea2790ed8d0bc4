"""Kill code you did not write right after each write it makes, for real.

``labkit.explore.matrix`` kills the lab's own worker at the points the lab named. A
function someone else wrote has points nobody named: between its INSERT and its COMMIT,
between two transactions that should have been one, between its COMMIT and the ack that
follows. This module finds them by watching, then kills there:

1. ``live(run)`` runs ``run(tracer)`` in a forked child whose every SQLite connection is
   watched (``sqlite3.connect`` is wrapped in the child; ``tracer.watch(conn)`` adds a
   connection opened before). Each statement that can change the file is a
   **boundary**: a write (outside a transaction it commits itself), a COMMIT (from
   ``conn.commit()``, ``with conn:`` or the statement itself), a DDL statement. Each is
   recorded with the line of the watched code that issued it ("line 12 of cell 4").
   The caller may add its own with ``tracer.mark("publish")``, right after it happened.
2. ``live(run, kill_after=n)`` runs it again in a new child and SIGKILLs the child's
   whole process group right after boundary ``n``: at the next statement or mark, or
   when ``run`` returns, whichever comes first. Nothing in the child cleans up; an open
   transaction is rolled back by SQLite when the file is next opened, as after a real
   crash. The child announces the kill on the pipe just before it sends it, and the
   parent counts a life as killed only when it read that line and the child died of
   SIGKILL: a kill that did not fire is never mistaken for one that did.
3. ``targets(count, limit, rng)`` picks which boundaries to kill at: every one when
   there are at most ``limit``, else the first, the last and a seeded sample between.

The caller builds the starting files, restarts after the kill and judges the world;
this module only watches, kills and reports. The SQLite trace hook it uses is
``Connection.set_trace_callback``, which fires as each statement starts, which is why
"right after statement n" is "as statement n+1 starts". In production, crash testing of
this kind is what Jepsen's nemesis or a storage engine's own crash suites (SQLite's
``crash.test``) do at larger scale; this is the lab's version for one process.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import signal
import sqlite3
import sys
import sysconfig
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from random import Random
from typing import Any

#: Statements that cannot change the file: never a boundary.
_READS = frozenset({"SELECT", "BEGIN", "PRAGMA", "SAVEPOINT", "ROLLBACK", "EXPLAIN", "VALUES"})
_WRITE_WORD = re.compile(r"\b(INSERT|UPDATE|DELETE|REPLACE)\b", re.IGNORECASE)
_TARGET = re.compile(
    r"^\s*(INSERT(?:\s+OR\s+\w+)?\s+INTO|REPLACE\s+INTO|UPDATE(?:\s+OR\s+\w+)?|DELETE\s+FROM)"
    r"\s+([\w\".]+)",
    re.IGNORECASE,
)


#: Where code that is not the watched code lives: the lab itself and the installed Python.
_NOT_WATCHED = tuple(
    {str(Path(__file__).resolve().parents[1]) + os.sep}
    | {str(Path(sysconfig.get_path(k)).resolve()) + os.sep for k in ("stdlib", "platlib")}
    | {str(Path(sysconfig.get_path("purelib")).resolve()) + os.sep}
)


def trace_every_connection(callback: Callable[[str], None]) -> None:
    """From now on in this process, every SQLite connection calls ``callback(statement)``.

    ``sqlite3.connect`` is wrapped, so a connection the watched code opens itself is
    watched too. Only ever done in a forked child that ends when its run does.
    """
    real_connect = sqlite3.connect

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn: sqlite3.Connection = real_connect(*args, **kwargs)
        conn.set_trace_callback(callback)
        return conn

    sqlite3.connect = connect  # type: ignore[assignment]


def student_code(filename: str) -> bool:
    """Code that is neither the lab's nor Python's: a cell (``<cell 4>`` under the grader,
    an ``ipykernel_*`` file in Jupyter) or a module the student wrote."""
    if filename.startswith("<"):
        return not filename.startswith("<frozen")
    return not os.path.realpath(filename).startswith(_NOT_WATCHED)


def _shown(filename: str) -> str:
    if filename.startswith("<"):
        return filename.strip("<>")
    return "your cell" if "ipykernel_" in filename else os.path.basename(filename)


@dataclass(frozen=True)
class Boundary:
    """One place a run can be killed right after: what was sent and which line sent it."""

    index: int
    what: str
    where: str = ""

    def words(self) -> str:
        """'your COMMIT at line 12 of cell 4', or 'the harness's UPDATE jobs'."""
        return f"your {self.what} at {self.where}" if self.where else f"the harness's {self.what}"


@dataclass(frozen=True)
class Life:
    """One run in a child: its boundaries, where it was killed, and how it ended otherwise."""

    boundaries: tuple[Boundary, ...]
    killed_after: int | None
    ended: str  # "returned", "killed", "timed out", "raised Type: message", "died ..."
    returned: Any = None

    @property
    def killed(self) -> bool:
        return self.killed_after is not None


def describe(sql: str) -> str | None:
    """'INSERT INTO emails', 'COMMIT', 'CREATE' for a statement that can change the file."""
    words = sql.split(None, 1)
    verb = words[0].upper().rstrip(";") if words else ""
    if not verb or verb in _READS:
        return None
    if verb == "WITH" and not _WRITE_WORD.search(sql):
        return None
    found = _TARGET.match(sql)
    if found:
        return f"{' '.join(found.group(1).upper().split())} {found.group(2).strip(chr(34))}"
    return "COMMIT" if verb == "END" else verb


class Tracer:
    """Lives in the child: writes each boundary to the pipe and kills after the chosen one."""

    def __init__(self, out: int, kill_after: int | None, mine: Callable[[str], bool]) -> None:
        self._out, self._kill_after, self._mine = out, kill_after, mine
        self.count = 0
        self._armed = False

    def watch(self, conn: sqlite3.Connection) -> sqlite3.Connection:
        conn.set_trace_callback(self._statement)
        return conn

    def watch_sqlite(self) -> None:
        """Watch every connection opened from now on."""
        trace_every_connection(self._statement)

    def mark(self, what: str) -> None:
        """A boundary the caller names, called right after it happened (a publish returned).

        A kill chosen for a mark falls at once: the caller said the moment is now.
        """
        self._fire_if_armed()
        self._boundary(what)
        self._fire_if_armed()

    def finish(self) -> None:
        """``run`` returned: a kill armed by its last boundary falls now."""
        self._fire_if_armed()

    def _statement(self, sql: str) -> None:
        self._fire_if_armed()
        what = describe(sql)
        if what is not None:
            self._boundary(what)

    def _boundary(self, what: str) -> None:
        self.count += 1
        self.send({"boundary": [self.count, what, self._where()]})
        if self.count == self._kill_after:
            self._armed = True

    def _fire_if_armed(self) -> None:
        if self._armed:
            self.send({"kill": self.count})
            os.killpg(os.getpgid(0), signal.SIGKILL)

    def _where(self) -> str:
        frame = sys._getframe(1)
        while frame is not None:
            name = frame.f_code.co_filename
            if self._mine(name):
                return f"line {frame.f_lineno} of {_shown(name)}"
            frame = frame.f_back  # type: ignore[assignment]
        return ""

    def send(self, message: dict[str, Any]) -> None:
        os.write(self._out, (json.dumps(message, default=repr) + "\n").encode())


def _child(run: Callable[[Tracer], Any], out: int, kill_after: int | None, mine: Any) -> None:
    tracer = Tracer(out, kill_after, mine)
    tracer.watch_sqlite()
    try:
        returned = run(tracer)
        tracer.finish()
        tracer.send({"returned": returned})
    except BaseException as exc:  # noqa: BLE001 - reported to the parent as data
        tracer.send({"raised": f"{type(exc).__name__}: {str(exc)[:200]}"})


def live(
    run: Callable[[Tracer], Any],
    kill_after: int | None = None,
    timeout: float = 20.0,
    mine: Callable[[str], bool] = student_code,
) -> Life:
    """Run ``run(tracer)`` in a forked child, killed right after boundary ``kill_after``."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its own group, so the kill takes whatever it started too
        os.close(read)
        code = 0
        try:
            os.setpgrp()
            _child(run, write, kill_after, mine)
        except BaseException:  # noqa: BLE001 - a child never returns into the caller's code
            code = 70
        finally:
            os._exit(code)
    os.close(write)
    lines, timed_out = _read_all(read, time.monotonic() + timeout)
    # The group goes before the child is reaped (a zombie still holds its group, so the
    # number cannot have passed to anyone else): a hung child, and whatever it started.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    return _life(lines, status, timed_out)


def _read_all(fd: int, deadline: float) -> tuple[list[dict[str, Any]], bool]:
    data = b""
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return parse_lines(data), True
            chunk = os.read(fd, 65536)
            if not chunk:
                return parse_lines(data), False
            data += chunk
    finally:
        os.close(fd)


def parse_lines(data: bytes) -> list[dict[str, Any]]:
    found = []
    for line in data.decode(errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            message = json.loads(line)
            if isinstance(message, dict):
                found.append(message)
    return found


def _life(lines: list[dict[str, Any]], status: int, timed_out: bool) -> Life:
    boundaries = tuple(Boundary(*m["boundary"]) for m in lines if "boundary" in m)
    announced = [m["kill"] for m in lines if "kill" in m]
    by_sigkill = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    if timed_out:
        return Life(boundaries, None, "timed out")
    if announced and by_sigkill:
        return Life(boundaries, int(announced[0]), "killed")
    for m in lines:
        if "returned" in m:
            return Life(boundaries, None, "returned", m["returned"])
        if "raised" in m:
            return Life(boundaries, None, f"raised {m['raised']}")
    if os.WIFSIGNALED(status):
        return Life(boundaries, None, f"died of signal {os.WTERMSIG(status)}")
    return Life(boundaries, None, f"exited with status {os.waitstatus_to_exitcode(status)}")


def targets(count: int, limit: int, rng: Random) -> list[int]:
    """Which of boundaries 1..count to kill after: all, or first, last and a seeded sample."""
    if count <= limit:
        return list(range(1, count + 1))
    middle = rng.sample(range(2, count), max(0, limit - 2))
    return sorted({1, count, *middle})
