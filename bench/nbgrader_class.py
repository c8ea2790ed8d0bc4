"""The bench's class graded by nbgrader's ``autograde``, for ``bench/grading.py --nbgrader``.

Each exercise becomes an nbgrader source notebook: the cells holding ``### BEGIN
SOLUTION`` (nbgrader's own markers) are solution cells, and the ``check("exNN")`` cell
becomes one locked autograder test cell per public check, which runs that one check on
the notebook's globals the way ``check()`` does and fails its assertion when the check
did not pass. ``nbgrader generate_assignment`` releases it; each student's submission is
the released notebook with the student's generated code put back into its cells, so the
cell metadata is nbgrader's own; ``nbgrader autograde`` grades them all, timed.

nbgrader runs in a venv of its own (``bench/.nbgrader-venv``, made on first use): in the
lab's venv its server extensions would load in the students' JupyterLab. That venv has
this checkout installed too, so the kernels nbgrader starts can ``import labkit``.

Not the same work on both sides, and each side's ordinary way: nbgrader runs the public
checks only, one notebook after another, the student's code unconfined in the grader's
own user; ``labkit grade`` runs the public and the hidden checks, ``--jobs`` notebooks
at once, each confined.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from labkit.grading import catalog  # noqa: E402
from labkit.grading.checks import Check  # noqa: E402

NBGRADER = "nbgrader==0.9.6"
VENV = HERE / ".nbgrader-venv"
ASSIGNMENT = "ps1"

#: One public check as an autograder test cell. The header line is read back by the
#: config's ``timeout_for``: a test cell may take its check's own time.
TEST_CELL = """\
# public check {exercise}.{name}: up to {timeout:g} s
from labkit.grading import catalog
from labkit.grading.checks import CheckStatus, Namespace, run_check

_check = next(c for c in catalog.public({exercise!r}) if c.name == {name!r})
_found = run_check(_check, Namespace(globals()))
assert _found.status == CheckStatus.PASSED, f"{{_found.status}}: {{_found.got}}"
"""

#: nbgrader's cell timeout is the labkit cell timeout; a test cell gets its check's own
#: timeout on top (labkit stops the check itself then; this only keeps a stuck kernel
#: from waiting forever).
CONFIG = """\
import re

c = get_config()  # noqa: F821
c.CourseDirectory.root = {root!r}
c.CourseDirectory.course_id = "labkit-bench"
c.ExecutePreprocessor.timeout = {cell_timeout}


def timeout_for(cell):
    found = re.match(r"# public check \\S+: up to ([0-9.]+) s", cell.source)
    return {cell_timeout} + (float(found.group(1)) if found else 0)


c.ExecutePreprocessor.timeout_func = timeout_for
"""


def nbgrader_venv(venv: Path = VENV) -> Path:
    """The ``nbgrader`` command of its own venv, made (a few minutes) on first use."""
    ready = venv / ".ready"
    if not ready.exists() or ready.read_text().strip() != NBGRADER:
        print(f"making {venv} ({NBGRADER} and this checkout): a few minutes, once")
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
        subprocess.run([*pip, NBGRADER], check=True)
        subprocess.run([*pip, "-e", str(ROOT)], check=True)
        ready.write_text(NBGRADER + "\n")
    return venv / "bin" / "nbgrader"


def _is_check_cell(cell: nbformat.NotebookNode, exercise: str) -> bool:
    return cell.cell_type == "code" and f'check("{exercise}")' in cell.source


def test_cell(exercise: str, check: Check) -> nbformat.NotebookNode:
    """The locked autograder test cell that runs one public check."""
    source = TEST_CELL.format(exercise=exercise, name=check.name, timeout=check.timeout)
    cell = nbformat.v4.new_code_cell(source)
    cell.id = f"test-{check.name}"[:64]
    cell.metadata["nbgrader"] = {
        "grade": True,
        "solution": False,
        "locked": True,
        "points": check.points,
        "grade_id": check.name,
        "schema_version": 3,
    }
    return cell


def source_notebook(exercise: str) -> nbformat.NotebookNode:
    """The reference solution as an nbgrader source notebook."""
    [reference] = sorted((ROOT / "solutions").glob(f"{exercise}_*.ipynb"))
    nb = nbformat.read(reference, as_version=4)
    cells = []
    for i, cell in enumerate(nb.cells):
        if _is_check_cell(cell, exercise):
            cells += [test_cell(exercise, check) for check in catalog.public(exercise)]
            continue
        if cell.cell_type == "code" and "### BEGIN SOLUTION" in cell.source:
            cell.metadata["nbgrader"] = {
                "solution": True,
                "grade": False,
                "locked": False,
                "grade_id": f"{exercise}-solution-{i}",
                "schema_version": 3,
            }
        cells.append(cell)
    nb.cells = cells
    return nb


def submission(
    released: nbformat.NotebookNode, student: nbformat.NotebookNode, exercise: str, kind: str
) -> nbformat.NotebookNode:
    """The released notebook as a student of ``kind`` hands it in.

    ``student`` is the notebook ``bench/grading.py`` generated for ``labkit grade``, from
    the reference: its cells fill the released solution cells in order, and a cell it
    added (``wrong``, ``hanging``) goes before the test cells, where it went before the
    ``check()`` cell. A ``stub`` hands in the released notebook untouched.
    """
    nb = nbformat.from_dict(json.loads(json.dumps(released)))
    if kind == "stub":
        return nb
    tests = [i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade")]
    first_test = tests[0] if tests else len(nb.cells)
    body = [c for c in student.cells if not _is_check_cell(c, exercise)]
    added = [c for c in body if c.get("id") == "bench-added"]
    mine = [c for c in body if c.get("id") != "bench-added"]
    for cell, theirs in zip(nb.cells[:first_test], mine, strict=True):
        if cell.metadata.get("nbgrader", {}).get("solution"):
            cell.source = theirs.source
    nb.cells[first_test:first_test] = [nbformat.v4.new_code_cell(c.source) for c in added]
    return nb


def _run(nbgrader: Path, course: Path, *args: str) -> None:
    # nbgrader runs `alembic` from PATH: its venv's bin first.
    env = {**os.environ, "PATH": f"{nbgrader.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    argv = [str(nbgrader), *args]
    done = subprocess.run(argv, cwd=course, env=env, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"nbgrader {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-4000:]}")


def grade_with_nbgrader(
    subs: Path,
    kinds: dict[tuple[str, str], str],
    exercises: list[str],
    course: Path,
    cell_timeout: float,
) -> tuple[float, dict[tuple[str, str], tuple[int, int]]]:
    """Release, hand in and ``nbgrader autograde`` the class: the seconds ``autograde``
    took, and each graded (student, exercise)'s public points (earned, out of).

    ``kinds`` maps (student, exercise) to the notebook's kind.
    """
    nbgrader = nbgrader_venv()
    course.mkdir(parents=True)
    (course / "nbgrader_config.py").write_text(
        CONFIG.format(root=str(course), cell_timeout=int(round(cell_timeout)))
    )
    source = course / "source" / ASSIGNMENT
    source.mkdir(parents=True)
    for exercise in exercises:
        nbformat.write(source_notebook(exercise), source / f"{exercise}.ipynb")
    _run(nbgrader, course, "generate_assignment", ASSIGNMENT, "--force")
    for (student, exercise), kind in sorted(kinds.items()):
        released = nbformat.read(course / "release" / ASSIGNMENT / f"{exercise}.ipynb", 4)
        [mine] = sorted((subs / student).glob(f"{exercise}_*.ipynb"))
        handed_in = submission(released, nbformat.read(mine, 4), exercise, kind)
        folder = course / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True, exist_ok=True)
        nbformat.write(handed_in, folder / f"{exercise}.ipynb")
    started = time.perf_counter()
    _run(nbgrader, course, "autograde", ASSIGNMENT, "--force")
    seconds = time.perf_counter() - started
    return seconds, {
        (path.parent.parent.name, path.stem): public_points(nbformat.read(path, 4))
        for path in (course / "autograded").glob(f"*/{ASSIGNMENT}/*.ipynb")
    }


def public_points(autograded: nbformat.NotebookNode) -> tuple[int, int]:
    """(earned, out of) over an autograded notebook's test cells: a cell without an
    error output passed, as nbgrader scores it."""
    earned = total = 0
    for cell in autograded.cells:
        grading = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and grading.get("grade"):
            total += grading["points"]
            if not any(out.output_type == "error" for out in cell.get("outputs", [])):
                earned += grading["points"]
    return earned, total
