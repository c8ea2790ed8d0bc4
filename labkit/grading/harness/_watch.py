"""Tools the harnesses of exercises 11-13 share: a watched connection and forked racers.

``Watched`` wraps the connection a student's function receives: it counts the write
statements, can crash (``SimulatedCrash``) right after the n-th one, as a killed
process would stop there, and can pause after plain reads to widen the window a
read-then-write leaves. ``in_processes`` runs one function in several forked processes
started together and collects what each returned, then kills each one's process group
(a racer that hangs, and anything a racer started).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import queue
import signal
import sqlite3
import time
from collections.abc import Callable, Iterator
from typing import Any

from labkit.errors import SimulatedCrash

WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")


class Rows:
    """The rows of a statement already run to its end, with the cursor's counters."""

    def __init__(self, rows: list[Any], rowcount: int, lastrowid: int | None) -> None:
        self._rows = rows
        self.rowcount = rowcount
        self.lastrowid = lastrowid

    def fetchone(self) -> Any:
        return self._rows.pop(0) if self._rows else None

    def fetchall(self) -> list[Any]:
        rows, self._rows = self._rows, []
        return rows

    def fetchmany(self, size: int = 1) -> list[Any]:
        rows, self._rows = self._rows[:size], self._rows[size:]
        return rows

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())


class Watched:
    """A connection that counts writes, crashes after the ``crash_after``-th, pauses reads."""

    def __init__(
        self, conn: sqlite3.Connection, crash_after: int | None = None, pause: float = 0.0
    ) -> None:
        self._conn = conn
        self.crash_after = crash_after
        self.pause = pause
        self.writes = 0
        self.crashed = False
        self.pauses = 0

    def execute(self, sql: str, params: Any = ()) -> Any:
        verb = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
        reading = verb == "SELECT" and not self._conn.in_transaction
        cursor = self._conn.execute(sql, params)
        # Run the statement to its end now, so a crash "after" it means after it.
        rows = Rows(cursor.fetchall(), cursor.rowcount, cursor.lastrowid)
        if verb in WRITES:
            self.writes += 1
            if self.crash_after is not None and self.writes == self.crash_after:
                self.crashed = True
                raise SimulatedCrash(f"crashed after write statement {self.writes}")
        if reading and self.pause:
            self.pauses += 1
            time.sleep(self.pause)
        return rows

    def executemany(self, sql: str, seq: Any) -> Any:
        result = None
        for params in seq:
            result = self.execute(sql, params)
        return result

    def cursor(self) -> Watched:
        return self

    def __enter__(self) -> Watched:
        self._conn.__enter__()
        return self

    def __exit__(self, *exc: Any) -> Any:
        return self._conn.__exit__(*exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def _not_started(exc: BaseException) -> bool:
    return isinstance(exc, NotImplementedError) and str(exc).startswith("Exercise")


def _child(target: Callable[[int], Any], index: int, start: Any, out: Any) -> None:
    os.setpgrp()  # its own process group, so the parent can kill whatever it starts too
    try:
        start.wait(20)
        result: tuple[str, Any] = ("returned", target(index))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent as data
        kind = "stub" if _not_started(exc) else "raised"
        result = (kind, f"{type(exc).__name__}: {str(exc)[:160]}")
    out.put((index, result))


def in_processes(target: Callable[[int], Any], count: int, timeout: float = 20.0) -> dict[str, Any]:
    """Run ``target(i)`` in ``count`` forked processes released together.

    ``{"results": {i: ["returned", value] | ["raised", text]}, "hung": n}``; processes
    still running after ``timeout`` seconds are killed.
    """
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    start = ctx.Barrier(count)
    children = [ctx.Process(target=_child, args=(target, i, start, out)) for i in range(count)]
    for proc in children:
        proc.start()
    results: dict[str, Any] = {}
    deadline = time.monotonic() + timeout
    try:
        while len(results) < count:
            index, result = out.get(timeout=max(0.1, deadline - time.monotonic()))
            results[str(index)] = list(result)
    except queue.Empty:
        pass
    finally:
        for proc in children:
            proc.join(1)
            if proc.pid is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)  # the racer and anything it started
            proc.join(5)
    for kind, text in results.values():
        if kind == "stub":
            raise NotImplementedError(text.partition(": ")[2])
    return {"results": results, "hung": count - len(results)}
