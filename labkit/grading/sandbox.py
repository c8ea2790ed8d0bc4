"""The grading process: run a student's code cells, then the instructor's checks on them.

``labkit grade`` starts this module in a fresh interpreter for each notebook, as
``python -I -c BOOT`` with the instructor's labkit first on ``sys.path`` and a scratch
folder as working directory, so neither a ``labkit/`` folder in the submission nor the
student's environment can stand in for the instructor's code. The request (cells,
exercise, timeouts, a one-time nonce) arrives on stdin; the answer is one line on
stdout that starts with the nonce, so nothing the student prints can pass for it.

Check cells are never run: lines that import ``labkit.grading`` or call ``check(`` are
removed, and ``check`` is a no-op in the namespace. This is a guard against honest
mistakes and edited check cells, not a security sandbox: code that sets out to attack
the grader runs with the grader's rights (so does nbgrader's, without Docker).
"""

from __future__ import annotations

import builtins
import contextlib
import io
import json
import re
import sys
from functools import partial
from pathlib import Path
from typing import Any

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
    cells: list[tuple[int, str]], cell_timeout: float
) -> tuple[dict[str, Any], list[str]]:
    """Execute each cell in one namespace; return it and notes on cells that broke or hung."""
    from labkit.grading.core import run_with_timeout

    namespace: dict[str, Any] = {
        "__name__": "__main__",
        "__builtins__": builtins,
        "check": _no_check,
    }
    notes: list[str] = []
    for index, source in cells:
        note = write_file_cell(source, Path.cwd())
        if note:
            notes.append(f"cell {index}: {note}")
        code_text = student_code(source)
        if not code_text.strip():
            continue
        try:
            code = compile(code_text, f"<cell {index}>", "exec")
        except SyntaxError as exc:
            notes.append(
                f"cell {index} has a syntax error (line {exc.lineno}: {exc.msg}); "
                "it was skipped, so what it defines is missing"
            )
            continue
        finished, error = run_with_timeout(partial(exec, code, namespace), cell_timeout)
        if not finished:
            notes.append(
                f"cell {index} did not finish within {cell_timeout:g}s and was stopped "
                "(a loop that never ends at the top level?)"
            )
        elif error is not None and not (
            isinstance(error, NotImplementedError) and str(error).startswith("Exercise")
        ):
            notes.append(f"cell {index} raised {_first_line(error)}")
    return namespace, notes


def grade_request(request: dict[str, Any]) -> dict[str, Any]:
    """Run the cells and the checks a request names; return outcomes and notes."""
    from labkit.grading import catalog
    from labkit.grading.core import run_checks

    hidden_dir = request.get("hidden_dir")
    checks = catalog.all_checks(request["exercise"], Path(hidden_dir) if hidden_dir else None)
    cells = [(int(i), str(s)) for i, s in request["cells"]]
    namespace, notes = run_cells(cells, float(request["cell_timeout"]))
    outcomes = run_checks(checks, namespace, float(request["check_timeout"]), Path.cwd())
    return {"outcomes": [o.to_dict() for o in outcomes], "notes": notes}


def main() -> None:
    request = json.loads(sys.stdin.read())
    nonce = request["nonce"]
    real_stdout = sys.stdout
    import labkit

    expected_root = Path(request["labkit_root"]).resolve()
    actual = Path(labkit.__file__).resolve().parents[1]
    if actual != expected_root:
        answer: dict[str, Any] = {
            "error": f"grader imported labkit from {actual}, not {expected_root}"
        }
    else:
        sink = io.StringIO()
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            try:
                answer = grade_request(request)
            except Exception as exc:  # noqa: BLE001 - reported to the grader, never lost
                answer = {"error": _first_line(exc)}
    real_stdout.write(nonce + json.dumps(answer) + "\n")
    real_stdout.flush()
    # Threads left running by hung checks must not keep the process alive.
    import os

    os._exit(0)
