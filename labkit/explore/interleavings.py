"""Race code you did not write against itself, one schedule at a time.

A scripted race (two threads, a pause after each read) tries one interleaving and
hopes it is the bad one. This module tries them in order instead. Two copies of the
same call, ``first`` and ``second``, run in forked children, each with its SQLite
connections watched (``Connection.set_trace_callback``, so every statement counts,
reads too: a read is where a check-then-act goes wrong). For each ``n``:

1. ``first`` starts and is stopped right before its statement ``n + 1``, that is just
   after statement ``n`` (``n = 0``: before it sends anything);
2. ``second`` runs to its end while ``first`` waits there (if ``second`` cannot go on,
   because ``first`` holds the write lock, it is given ``grace`` seconds and then
   ``first`` is let go: that lock is the serialization working);
3. ``first`` goes on and both finish; the caller judges the files.

Each schedule is one preemption of ``first`` by a whole run of ``second``, and
``schedules(count, limit, rng)`` picks which (every ``n`` when there are few, else a
seeded sample with both ends). A check-then-act with any statement between its check
and its act loses under one of them, whatever the machine's timing, and the same ``n``
replays it. This is the one-preemption bound of systematic concurrency testing (CHESS,
and Loom or Shuttle in Rust are the tools a team would reach for in production); the
lab keeps it to two copies of one call, which is where its exercises' races live.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from random import Random
from typing import Any

from labkit.explore.boundaries import parse_lines, targets, trace_every_connection


@dataclass(frozen=True)
class Copy:
    """How one copy ended: returned (with its value), raised, or hung; its statements."""

    ended: str
    returned: Any
    statements: int


@dataclass(frozen=True)
class Schedule:
    """One schedule run: ``first`` stopped after ``after`` statements while ``second`` ran."""

    after: int
    stopped: bool  # first really waited there (it had that many statements)
    second_blocked: bool  # second could not finish while first waited
    first: Copy
    second: Copy


class _Stopper:
    """In the child: counts statements; before statement ``stop_at + 1`` waits for a go."""

    def __init__(self, out: int, go: int, stop_at: int | None) -> None:
        self.out, self.go, self.stop_at = out, go, stop_at
        self.count = 0

    def statement(self, _sql: str) -> None:
        if self.count == self.stop_at:
            self.send({"stopped": self.count})
            os.read(self.go, 1)  # the parent lets it go on
        self.count += 1

    def send(self, message: dict[str, Any]) -> None:
        os.write(self.out, (json.dumps(message, default=repr) + "\n").encode())


def _start(run: Callable[[], Any], stop_at: int | None) -> tuple[int, int, int]:
    """Fork a copy; ``(pid, its output fd, the fd that lets it go on)``."""
    out_r, out_w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(out_r)
        os.close(go_w)
        code = 0
        try:
            os.setpgrp()
            stopper = _Stopper(out_w, go_r, stop_at)
            trace_every_connection(stopper.statement)
            stopper.send({"began": True})
            try:
                returned = run()
                stopper.send({"returned": returned, "statements": stopper.count})
            except BaseException as exc:  # noqa: BLE001 - reported to the parent as data
                said = f"{type(exc).__name__}: {str(exc)[:200]}"
                stopper.send({"raised": said, "statements": stopper.count})
        except BaseException:  # noqa: BLE001 - a child never returns into the caller's code
            code = 70
        finally:
            os._exit(code)
    os.close(out_w)
    os.close(go_r)
    return pid, out_r, go_w


def _read_until(fd: int, key: str, deadline: float, got: list[dict[str, Any]]) -> bool:
    """Read ``fd``'s lines into ``got`` until one has ``key`` (True) or EOF / deadline."""
    buffer = b""
    while True:
        if any(key in m for m in got):
            return True
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return False
        chunk = os.read(fd, 65536)
        if not chunk:
            got.extend(parse_lines(buffer))
            return any(key in m for m in got)
        buffer += chunk
        *whole, rest = buffer.split(b"\n")
        got.extend(parse_lines(b"\n".join(whole)))
        buffer = rest


def _end(pid: int, fd: int, got: list[dict[str, Any]], deadline: float) -> Copy:
    finished = _read_until(fd, "statements", deadline, got)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)  # a hung copy, and whatever a copy started
    os.waitpid(pid, 0)
    os.close(fd)
    last = next((m for m in got if "statements" in m), None)
    if not finished or last is None:
        return Copy("hung", None, -1)
    if "raised" in last:
        return Copy(f"raised {last['raised']}", None, int(last["statements"]))
    return Copy("returned", last.get("returned"), int(last["statements"]))


def one_schedule(
    first: Callable[[], Any],
    second: Callable[[], Any],
    after: int,
    grace: float = 1.0,
    timeout: float = 20.0,
) -> Schedule:
    """Run ``first`` stopped after ``after`` statements while ``second`` runs whole."""
    deadline = time.monotonic() + timeout
    a_pid, a_out, a_go = _start(first, after)
    a_got: list[dict[str, Any]] = []
    stopped = _read_until(a_out, "stopped", deadline, a_got)
    b_pid, b_out, b_go = _start(second, None)
    b_deadline = time.monotonic() + timeout  # its own: a first that hung used up its own
    b_got: list[dict[str, Any]] = []
    # The grace counts from the moment the second copy runs, not from its fork: on a
    # loaded machine a fork can take longer to get going than the grace, and a second
    # copy that had not even read yet was taken for one blocked by the first's lock.
    began = _read_until(b_out, "began", b_deadline, b_got)
    ran = began and _read_until(b_out, "statements", time.monotonic() + grace, b_got)
    blocked = stopped and not ran
    with contextlib.suppress(OSError):
        os.write(a_go, b"g")
    os.close(a_go)
    os.close(b_go)
    one = _end(a_pid, a_out, a_got, deadline)
    two = _end(b_pid, b_out, b_got, b_deadline)
    return Schedule(after, stopped, blocked, one, two)


def schedules(count: int, limit: int, rng: Random) -> list[int]:
    """Which stops to try for a ``first`` of ``count`` statements: 0..count, or a sample."""
    return [n - 1 for n in targets(count + 1, limit, rng)]


def alone(run: Callable[[], Any], timeout: float = 20.0) -> Copy:
    """Run one copy with nobody else: how it ends and how many statements it sends."""
    pid, out, go = _start(run, None)
    os.close(go)
    return _end(pid, out, [], time.monotonic() + timeout)
