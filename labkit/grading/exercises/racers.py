"""Forked racers: one student function run in several processes started together.

``in_processes`` runs one function in several forked processes started together and
collects what each returned, then kills each one's process group (a racer that hangs,
and anything a racer started). Exercises 11-13 race their students' code with it.
``in_a_forked_child`` runs one call in one such process: a worker of a prefork pool,
started from the student's process as the notebook left it (exercises 3 and 13).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import queue
import signal
import time
from collections.abc import Callable
from typing import Any

from labkit.grading.stub import is_stub
from labkit.orphans import die_with_parent


def _not_started(exc: BaseException) -> bool:
    return is_stub(exc)


def _child(target: Callable[[int], Any], index: int, start: Any, out: Any, parent: int) -> None:
    os.setpgrp()  # its own process group, so the parent can kill whatever it starts too
    # A parent that dies without its finally (a kernel killed mid-check) takes the racer
    # with it, instead of leaving it waiting on the barrier or the queue for good.
    die_with_parent(parent)
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
    children = [
        ctx.Process(target=_child, args=(target, i, start, out, os.getpid())) for i in range(count)
    ]
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


def in_a_forked_child(call: Callable[[], dict[str, Any]], timeout: float = 20.0) -> dict[str, Any]:
    """``call()`` in one forked process (``in_processes``): the dict it returned,
    ``{"hung": True}`` when it did not answer within ``timeout`` seconds, or what it
    raised as ``{"raised": [class name], "message": ...}``."""
    ran = in_processes(lambda _index: call(), 1, timeout)
    if ran["hung"]:
        return {"hung": True}
    kind, value = ran["results"]["0"]
    if kind == "returned":
        return dict(value)
    error, _colon, message = str(value).partition(": ")
    return {"raised": [error], "message": message}
