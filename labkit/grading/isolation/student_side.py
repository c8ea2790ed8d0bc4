"""The student's side of ``labkit grade``: run the notebook's code, then answer requests.

``labkit grade`` starts this module in a confined process (``labkit.grading.isolation.confine``:
its own uid, bubblewrap, limits) whose working directory is the student's fresh folder.
It runs the notebook's code cells with the check lines removed (``%%writefile`` cells
are written into the folder), reports each cell that broke or hung, and then serves
the trusted grader over a narrow channel (``labkit.grading.isolation.channel``: JSON lines on fds
3 and 4, plain data only). For each check it forks a child, so every check starts from
the state the cells left and no check sees what an earlier one did to the student's
objects; the child answers ``get NAME``, ``call NAME(*args)`` and ``harness
MODULE:FUNC(values, *args)`` until the check ends.

Nothing here decides a score. Whatever the student's code does to this process
(replace functions, walk frames, print) changes only the data it sends back, which
the grader's checks judge against the state they read themselves.
"""

from __future__ import annotations

import builtins
import contextlib
import importlib
import os
import random
import re
import signal
import sys
import traceback
from functools import partial
from pathlib import Path
from typing import Any

from labkit.clock import SystemClock
from labkit.grading.checks import CELLS, CheckFailed
from labkit.grading.isolation.channel import (
    HARNESS_MODULE,
    LineReader,
    NotData,
    Op,
    Reply,
    encode,
    harness_target,
    reply,
    write,
)
from labkit.grading.isolation.signals import signals_as_on_the_main_thread
from labkit.grading.stub import is_stub

#: Lines of a student's cell that grading drops: the check call and its import.
_CHECK_LINE = re.compile(
    r"^\s*(from\s+labkit\.grading(\.student)?\s+import\s.*\bcheck\b.*|import\s+labkit\.grading\s*$|"
    r"(\w+\s*=\s*)?check\s*\(.*\)\s*(#.*)?)$"
)


#: ``%%writefile [-a] NAME`` at the top of a cell: Jupyter writes the cell's body to NAME.
_WRITEFILE = re.compile(r"^%%writefile(\s+(-a|--append))?\s+(\S+)\s*$")


def write_file_cell(source: str, folder: Path) -> str | None:
    """Do what Jupyter does for a ``%%writefile NAME`` cell, inside ``folder`` only.

    Returns a note when the cell names a path outside the folder (it is not written),
    None otherwise (written, or not a writefile cell).
    """
    first, _, body = source.lstrip().partition("\n")
    match = _WRITEFILE.match(first.strip())
    if not match:
        return None
    name = match.group(3).strip("\"'")
    target = (folder / name).resolve()
    if not target.is_relative_to(folder.resolve()) or target == folder.resolve():
        return f"%%writefile {name} names a path outside your folder; it was not written"
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("a" if match.group(2) else "w", encoding="utf-8") as fh:
        fh.write(body)
    return None


def student_code(source: str) -> str:
    """A code cell as grading runs it: no check calls, no IPython magics or shell lines."""
    if source.lstrip().startswith("%%"):
        return ""
    kept = []
    for line in source.splitlines():
        stripped = line.lstrip()
        indent = line[: len(line) - len(stripped)]
        if _CHECK_LINE.match(line) or stripped.startswith(("%", "!")):
            # An indented line becomes `pass` so the block around it still compiles.
            kept.append(indent + "pass" if indent else "")
        else:
            kept.append(line)
    return "\n".join(kept)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:160]}" if text else type(exc).__name__


def _no_check(*args: Any, **kwargs: Any) -> None:
    """Stands in for ``check``: grading runs the instructor's checks, not the student's call."""


def run_cells(
    cells: list[tuple[int, str]],
    cell_timeout: float,
    errors: list[dict[str, Any]] | None = None,
    module: str = "__main__",
) -> tuple[dict[str, Any], list[str]]:
    """Execute each cell in one namespace; return it and notes on cells that broke or hung.

    ``module`` is the namespace's ``__name__``: ``__main__`` as in a notebook, or the
    name a worker would import the code under (a check about code moved to a module).

    ``errors`` collects what each failing cell raised, as data (``describe``), for the
    grader to tell a resource limit from a bug. The namespace's ``CELLS`` are the cells
    that ran cleanly, which a check may run again as a restarted worker imports its
    module (``replay``): a cell that broke, hung or was stopped at a limit (a fork
    storm, an attack on the grader) has had its say in the notes and is not run twice.
    """
    from labkit.grading.checks import run_with_timeout

    namespace: dict[str, Any] = {
        "__name__": module,
        "__builtins__": builtins,
        "check": _no_check,
    }
    notes: list[str] = []
    clean: list[tuple[int, str]] = []
    for index, source in cells:
        note = write_file_cell(source, Path.cwd())
        if note:
            notes.append(f"cell {index}: {note}")
        code_text = student_code(source)
        if not code_text.strip():
            clean.append((index, source))
            continue
        try:
            code = compile(code_text, f"<cell {index}>", "exec")
        except SyntaxError as exc:
            notes.append(
                f"cell {index} has a syntax error (line {exc.lineno}: {exc.msg}); "
                "it was skipped, so what it defines is missing"
            )
            continue
        finished, error = run_with_timeout(partial(_run_cell, code, namespace), cell_timeout)
        if not finished:
            notes.append(
                f"cell {index} did not finish within {cell_timeout:g}s and was stopped "
                "(a loop that never ends at the top level?)"
            )
        elif error is not None and not (is_stub(error)):
            notes.append(f"cell {index} raised {_first_line(error)}{_at(error)}")
            if errors is not None:
                errors.append({"cell": index, **describe(error)})
        else:
            clean.append((index, source))
    namespace[CELLS] = tuple(clean)
    return namespace, notes


def _run_cell(code: Any, namespace: dict[str, Any]) -> None:
    """One cell, its ``signal.signal`` calls kept as the kernel's main thread would take
    them (the cell runs on a thread of its own here: ``isolation.signals``)."""
    with signals_as_on_the_main_thread(namespace, cells=True):
        exec(code, namespace)


def _student_frames(exc: BaseException) -> list[traceback.FrameSummary]:
    return [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.startswith("<cell ")]


def _at(exc: BaseException) -> str:
    frames = _student_frames(exc)
    if not frames:
        return ""
    last = frames[-1]
    return f" (line {last.lineno} of {last.filename.strip('<>')})"


def describe(exc: BaseException) -> dict[str, Any]:
    """An exception as data: its class names (MRO), first line, and the student's line."""
    names = [k.__name__ for k in type(exc).__mro__ if k is not object]
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    return {
        "types": names,
        "message": first[:197] + "..." if len(first) > 200 else first,
        "where": _at(exc).strip(" ()"),
        "student": bool(_student_frames(exc)),
    }


def _answer(values: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    """Do one request against the student's definitions; the reply as a message."""
    from labkit.grading.isolation.channel import decode

    op = request.get("op")
    name = str(request.get("name", ""))
    if op == Op.GET:
        if name not in values or name.startswith("__"):
            return reply(Reply.MISSING)
        value = values[name]
        return reply(Reply.CALLABLE) if callable(value) else reply(Reply.VALUE, encode(value))
    args = decode(request.get("args", []))
    kwargs = decode(request.get("kwargs", {}))
    if op == Op.CALL:
        func = values.get(name)
        if func is None or not callable(func):
            return reply(Reply.MISSING)
    elif op == Op.HARNESS:
        try:
            module_name, func_name = harness_target(name)
        except ValueError as exc:
            return reply(Reply.REFUSED, str(exc))
        target = getattr(importlib.import_module(module_name), func_name)
        args = [values, *args]
        func = target
    else:
        return reply(Reply.REFUSED, f"unknown request {op!r}")
    try:
        result = func(*args, **kwargs)
    except CheckFailed as exc:
        # A harness's own verdict ("no such name"...): it can only cost the student points.
        verdict = {"expected": exc.expected, "got": exc.got, "hint": exc.hint or ""}
        return reply(Reply.FAILED, verdict)
    except KeyError as exc:
        missing = exc.args[0] if exc.args else None
        if op == Op.HARNESS and isinstance(missing, str) and missing not in values:
            return reply(Reply.MISSING, name=missing)  # the harness looked up a definition
        return reply(Reply.RAISED, describe(exc))
    except BaseException as exc:  # noqa: BLE001 - every failure goes back as data
        return reply(Reply.RAISED, describe(exc))
    try:
        return reply(Reply.VALUE, encode(result))
    except NotData as exc:
        return reply(Reply.NOT_DATA, str(exc))


def serve_check(values: dict[str, Any], reader: LineReader, replies: int) -> None:
    """In the forked child of one check: answer requests until the check ends."""
    while True:
        request = reader.read()
        if request.get("op") == Op.END:
            os._exit(0)
        try:
            answer = _answer(values, request)
        except BaseException as exc:  # noqa: BLE001 - a bad request is reported, not fatal
            answer = reply(Reply.REFUSED, _first_line(exc))
        write(replies, answer)


#: What the original process becomes once the cells ran (``_shed_threads``): it waits
#: for the single-threaded copy that goes on, and ends the way that copy ended.
_WAITER = """
import os, signal, sys
_, status = os.waitpid(int(sys.argv[1]), 0)
if os.WIFSIGNALED(status):
    signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
    os.kill(os.getpid(), os.WTERMSIG(status))
os._exit(os.waitstatus_to_exitcode(status))
"""


def _shed_threads(channel: tuple[int, ...]) -> None:
    """Go on in a copy of this process that has only this thread; the original execs a waiter.

    A thread a cell started (``threading``, ``_thread``, a C library's) would otherwise run
    on beside every check: writing into the check's database or Redis, forging the
    effects the check counts. ``fork`` copies only the calling thread, and ``exec`` ends
    every thread of the original at once; the original's pid, which the grader and the
    sandbox watch, stays alive as the waiter until the copy ends.
    """
    for _ in range(20):
        try:
            child = os.fork()
            break
        except BlockingIOError:  # the cells used up the process limit: clear it, retry
            _stop_strays()
    else:
        raise OSError("could not fork a single-threaded copy: the process limit stays full")
    if child == 0:
        return
    for fd in channel:  # the copy holds the channel; the waiter must not keep it open
        with contextlib.suppress(OSError):
            os.set_inheritable(fd, False)
    os.execv(sys.executable, [sys.executable, "-I", "-S", "-c", _WAITER, str(child)])


def _kill_all_but(keep: set[int]) -> int:
    """SIGKILL every process this one may signal, except ``keep``; how many were signalled."""
    hit = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) not in keep:
            with contextlib.suppress(OSError):
                os.kill(int(entry), signal.SIGKILL)
                hit += 1
    return hit


def _stop_strays(clock: SystemClock | None = None, grace_s: float = 5.0) -> None:
    """Kill processes the cells or a check left behind (this uid / this sandbox only).

    Every process this one may signal goes, except itself, its parent (the waiter of
    ``_shed_threads``) and the sandbox's init. Then reap every child, waiting for them to
    die: a killed child is a zombie until it is reaped, and zombies still count against
    the process limit, so a fork storm in the cells would otherwise leave the next check
    unable to fork and cost honest points.
    """
    clock = clock or SystemClock()
    keep = {1, os.getpid(), os.getppid()}
    for _ in range(20):  # a forking process can add children while we look
        if not _kill_all_but(keep):
            break
    deadline = clock.now() + grace_s
    try:
        while True:
            pid, _ = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                if clock.now() > deadline:
                    return
                clock.sleep(0.005)
    except ChildProcessError:
        pass  # no child left


def preload(modules: object) -> None:
    """Import the exercise's harness modules once, here, before the first check's fork.

    Each check runs in a fork that ends with it: a module it imports, or a cache it fills,
    is imported or filled again by the next one (exercise 6's harness alone took 0.12 s a
    check, and the store's secret scrubbing 0.08 s more). So each harness module is
    imported here, and its ``warm_up()``, if it has one, fills such caches. Only names a
    harness request could name are imported (``HARNESS_MODULE``); one that fails (there
    is none, or the student's code broke importing) is left to the checks, which say so.
    """
    for module in modules if isinstance(modules, list) else []:
        if isinstance(module, str) and HARNESS_MODULE.fullmatch(module):
            with contextlib.suppress(Exception):
                warm = getattr(importlib.import_module(module), "warm_up", None)
                if callable(warm):
                    warm()


def main(requests: int, replies: int) -> None:
    """Entry point in the confined process: cells, then one forked child per check.

    ``requests`` and ``replies`` are the channel's file descriptors, inherited from the
    grader; stdout and stderr go to a pipe the grader only counts.
    """
    reader = LineReader(requests, cap=1 << 30)
    start = reader.read()
    me = os.getpid()
    cells = [(int(i), str(s)) for i, s in start["cells"]]
    errors: list[dict[str, Any]] = []
    values, notes = run_cells(cells, float(start["cell_timeout"]), errors)
    if os.getpid() != me:  # a fork the student's code made ran on past its cell
        os._exit(0)
    preload(start.get("preload"))
    isolated = bool(start.get("isolated"))
    if isolated:
        _stop_strays()  # first: the fork below needs room under the process limit
        _shed_threads((requests, replies))
        _stop_strays()  # what a cell's thread started meanwhile
    write(replies, reply(Reply.READY, notes=notes, errors=errors))
    while True:
        request = reader.read()
        if request.get("op") != Op.CHECK:
            os._exit(0)
        child = os.fork()
        if child == 0:
            if isinstance(request.get("args"), str):
                random.seed(request["args"])  # seeds.student_seed: the same draws in-process
            serve_check(values, reader, replies)
        # What was read past the "check" line belongs to the child, which has a copy.
        reader.discard()
        _, status = os.waitpid(child, 0)
        if isolated:
            _stop_strays()
        write(replies, reply(Reply.ENDED, os.waitstatus_to_exitcode(status)))
