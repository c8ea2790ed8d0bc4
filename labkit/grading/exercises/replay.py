"""Call a student's function again in a brand-new Python process, with its own hash seed.

A notebook function cannot be imported by another process. Under the grader the
namespace knows the cells it was built from (``CELLS``): asked to (``rerun_cells``), the
child runs them again, as a restarted worker would import its module, so a value
computed once at import (a ``uuid4()`` prefix, a start time) is computed afresh there.
Otherwise (and in ``check()`` in Jupyter) this ships the function instead: its code
object (``marshal``, same interpreter), the student functions it calls the same way,
the modules it uses by name and small data by ``pickle``. Either way the child makes
the calls and reports the results. ``PYTHONHASHSEED`` is set per child, so a value
built from ``hash()`` or from the order of a set of strings differs between two
children, as it would between two workers or two cron runs.

The multiprocessing "spawn" start method does the same for importable functions;
nothing in the standard library ships a function defined in ``__main__``.
"""

from __future__ import annotations

import ast
import contextlib
import marshal
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import types
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from labkit.grading.checks import CELLS

_CHILD = r"""
import builtins, importlib, marshal, os, pickle, sys, tempfile, types
spec = pickle.loads(sys.stdin.buffer.read())
answer = os.dup(1)  # what the cells print is theirs, not the answer: fd 1 goes nowhere
os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
sys.stdout = open(os.devnull, "w")
g = {"__builtins__": builtins, "__name__": "__main__"}
if spec["cells"]:
    from labkit.grading.isolation.student_side import run_cells
    scratch = tempfile.TemporaryDirectory(prefix="labkit-replay-")  # gone at exit
    os.chdir(scratch.name)  # a file a cell writes lands here
    g, _notes = run_cells(list(spec["cells"]), spec["cell_timeout"])
for name, (how, what) in spec["globals"].items():
    if how == "module":
        g[name] = importlib.import_module(what)
    elif how == "data":
        g[name] = pickle.loads(what)
for name, (how, what) in spec["globals"].items():
    if how == "function":
        code, defaults, kwdefaults = what
        fn = types.FunctionType(marshal.loads(code), g, name, pickle.loads(defaults))
        fn.__kwdefaults__ = pickle.loads(kwdefaults)
        g[name] = fn
out = []
for args, kwargs in spec["calls"]:
    try:
        out.append(("returned", repr(g[spec["name"]](*args, **kwargs))))
    except Exception as exc:
        out.append(("raised", type(exc).__name__ + ": " + str(exc)[:200]))
os.write(answer, repr(out).encode())
"""


class CannotShip(Exception):
    """The function uses something that cannot be rebuilt in another process."""


@contextlib.contextmanager
def cells_run_again(
    values: Mapping[str, Any],
    around: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
    module: str = "__main__",
) -> Iterator[dict[str, Any] | None]:
    """A namespace built again from the cells that ran cleanly (``CELLS``), here, in this
    process: what a worker restarted later imports, so a value computed once at import
    (a ``uuid4()`` prefix, today's date) is computed afresh. The cells run, and the block
    runs, in a scratch folder, inside ``around()``, as module ``module``. None without the
    cells (``check()`` in Jupyter)."""
    cells = values.get(CELLS)
    if not cells:
        yield None
        return
    from labkit.grading.isolation.student_side import run_cells

    with (
        tempfile.TemporaryDirectory(prefix="labkit-again-") as scratch,
        contextlib.chdir(scratch),
        around(),
    ):
        again, _notes = run_cells(list(cells), CELL_TIMEOUT, module=module)
        yield again


def _names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def _pack(values: Mapping[str, Any], name: str, out: dict[str, tuple[str, Any]]) -> None:
    if name in out or name not in values:
        return  # already packed, or a builtin the child has too
    value = values[name]
    if isinstance(value, types.ModuleType):
        out[name] = ("module", value.__name__)
    elif isinstance(value, types.FunctionType) and value.__globals__ is values:
        if value.__closure__:
            raise CannotShip(f"{name} is a closure")
        out[name] = (
            "function",
            (
                marshal.dumps(value.__code__),
                pickle.dumps(value.__defaults__),
                pickle.dumps(value.__kwdefaults__),
            ),
        )
        for used in sorted(_names(value.__code__)):
            _pack(values, used, out)
    else:
        try:
            out[name] = ("data", pickle.dumps(value))
        except Exception as exc:
            raise CannotShip(f"{name} cannot be sent to another process ({exc})") from None


#: Seconds each cell may run when the child builds the namespace again.
CELL_TIMEOUT = 10.0


def call_in_fresh_process(
    values: Mapping[str, Any],
    name: str,
    calls: list[tuple[list[Any], dict[str, Any]]],
    hash_seed: int,
    timeout: float = 30.0,
    rerun_cells: bool = False,
    prelude: str = "",
    env: Mapping[str, str] | None = None,
) -> list[tuple[str, str]]:
    """``[("returned", repr(value)) | ("raised", "Type: message")]`` per call, from a new python.

    ``rerun_cells``: build the namespace there from the cells (when the namespace has
    them), for a check about values computed at import; every cell runs again, so only
    where that is the point. ``prelude`` is Python run there first, before anything of
    the student's (a clock moved to the next day, say), with ``env`` added to the
    environment. Raises ``CannotShip`` when the function cannot be rebuilt there, or the
    new process fails or hangs.
    """
    packed: dict[str, tuple[str, Any]] = {}
    cells = values.get(CELLS, ()) if rerun_cells else ()
    if not cells:
        _pack(values, name, packed)
    spec = pickle.dumps(
        {
            "name": name,
            "globals": packed,
            "cells": cells,
            "cell_timeout": CELL_TIMEOUT,
            "calls": calls,
        }
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", prelude + _CHILD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **(env or {}), "PYTHONHASHSEED": str(hash_seed)},
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(spec, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise CannotShip(f"the new process did not answer within {timeout:g} s") from None
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    if proc.returncode != 0 or not stdout:
        last = stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        raise CannotShip(f"the new process failed: {last[0][:200]}")
    result: list[tuple[str, str]] = ast.literal_eval(stdout.decode())
    return result
