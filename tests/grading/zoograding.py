"""The zoo graded the way an instructor grades: ``labkit grade``, confined, every check.

Each wrong solution of the zoo (``test_zoo_exNN.py``) is the reference notebook with one
more cell, which redefines a function or two with one mistake. ``grade_zoo`` hands each
entry a test module's session selected to ``labkit grade`` as one student's notebook, in
one run (sandbox, own uids, the session's seed), and ``not_caught`` reads a graded
record and says why it does not show the entry's mistake caught, or None. In-process
grading (``check()``) is the students' convenience; the score the zoo is judged by is
this one.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import nbformat
import pytest
from gradingkit import SOLUTIONS, grade_class, notebook_for, short_scratch

from labkit.grading.isolation.confine import Confinement

#: (exercise, mistake, the check that must catch it, the source of the cell appended)
ZooEntry = tuple[str, str, str, str]

#: How the zoo is graded: one notebook at a time (``make test`` already runs several
#: test files at once), each check given three times its own timeout, as an instructor
#: grading on a loaded machine would (``--timeout-factor``): a check cut short by the
#: machine's load would fail for a reason that is not the entry's mistake.
OPTIONS = ("--jobs", "1", "--timeout-factor", "3")

#: For a zoo module's ``pytestmark``: its entries are graded through the sandbox.
CONFINED = pytest.mark.skipif(
    not Confinement.detect().isolated, reason="needs root or bubblewrap (CI has both)"
)


def append_cell(nb: nbformat.NotebookNode, source: str) -> None:
    """``source`` (a zoo entry's mistake) as the notebook's last code cell."""
    nb.cells.append(nbformat.v4.new_code_cell(textwrap.dedent(source).strip()))


def zoo_notebook(exercise: str, source: str) -> nbformat.NotebookNode:
    """The reference notebook with ``source`` as one more code cell (the mistake)."""
    nb = nbformat.read(notebook_for(SOLUTIONS, exercise), as_version=4)
    append_cell(nb, source)
    return nb


def grade_notebooks(
    root: Path, notebooks: dict[str, tuple[str, nbformat.NotebookNode]]
) -> dict[str, dict[str, Any]]:
    """``labkit grade`` on one notebook per student (student -> (exercise, notebook)),
    confined, every check: student -> the record ``outcomes.json`` holds for it."""
    subs = root / "submissions"
    for student, (exercise, nb) in notebooks.items():
        (subs / student).mkdir(parents=True)
        nbformat.write(nb, subs / student / notebook_for(SOLUTIONS, exercise).name)
    with short_scratch() as scratch:
        grade_class(root, subs, sorted({e for e, _ in notebooks.values()}), scratch, OPTIONS)
    results = json.loads((root / "out" / "r" / "outcomes.json").read_text())["results"]
    return {
        r["student"]: r
        for r in results
        if r["student"] in notebooks and r["exercise"] == notebooks[r["student"]][0]
    }


def grade_zoo(request: pytest.FixtureRequest, entries: list[ZooEntry]) -> dict[str, dict[str, Any]]:
    """The entries of the requesting module that this session runs, graded in one
    ``labkit grade`` run: mistake -> its graded record (``outcomes.json``).

    Only the selected ones (``-k``, a node id): a developer trying one entry grades one
    notebook, not the module's whole zoo.
    """
    selected = {
        item.callspec.params.get("mistake")
        for item in request.session.items
        if item.module is request.module and hasattr(item, "callspec")
    }
    picked = [entry for entry in entries if entry[1] in selected]
    if not picked:
        return {}
    notebooks = {
        f"{exercise}-{n:03d}": (exercise, zoo_notebook(exercise, source))
        for n, (exercise, _mistake, _check, source) in enumerate(picked)
    }
    root = request.getfixturevalue("tmp_path_factory").mktemp("zoo")
    graded = grade_notebooks(root, notebooks)
    mistakes = {f"{exercise}-{n:03d}": m for n, (exercise, m, _c, _s) in enumerate(picked)}
    return {mistakes[student]: record for student, record in graded.items()}


def not_caught(
    record: dict[str, Any], check: str, says: str | None = None, got: str | None = None
) -> str | None:
    """Why a graded notebook does not show its mistake caught by ``check``, or None.

    Caught means: ``check`` failed with nothing earned, saying what it expected (``says``
    in it, when given), what the code did (``got`` in it, when given; never a traceback)
    and a hint; the notebook was graded and scored below full marks; some other check
    passed (the feedback points at one mistake); a severe check's failure capped the
    score at half.
    """
    checks = {c["check"]: c for c in record.get("checks", [])}
    named = checks.get(check)
    if named is None:
        return f"{check} is not among the checks graded ({record.get('status')})"
    if named["status"] != "failed" or named["earned"] != 0:
        return f"{check}: {named['status']}, {named['earned']}/{named['points']}"
    if not (named["expected"] and named["got"] and named["hint"]):
        return f"{check} did not say what it expected, what it got and a hint: {named}"
    if "Traceback" in named["got"]:
        return f"{check} showed a traceback: {named['got']}"
    if says is not None and says not in named["expected"]:
        return f"{check} expected {named['expected']!r}, which does not say {says!r}"
    if got is not None and got not in named["got"]:
        return f"{check} got {named['got']!r}, which does not say {got!r}"
    earned, possible = record["score"], record["max"]
    if record["status"] != "graded" or earned >= possible:
        return f"scored {earned}/{possible}, {record['status']}"
    if not any(c["status"] == "passed" for c in checks.values()):
        return "every check failed: the feedback points at no one mistake"
    if named["severe"] and earned > possible // 2:
        return f"a severe mistake scored {earned}/{possible}, more than half"
    return None


def sandbox_tests(
    zoo: list[ZooEntry],
    says: dict[str, str] | None = None,
    got: dict[str, str] | None = None,
) -> tuple[Any, Any]:
    """A zoo module's fixture and test: ``graded, test_... = sandbox_tests(ZOO, SAYS, GOT)``.

    The module's selected entries are graded in one ``labkit grade`` run (``grade_zoo``);
    each entry's test reads its record: caught by its check, which says ``says[mistake]``
    and got ``got[mistake]`` (when given).
    """

    @pytest.fixture(scope="module")
    def graded(request: pytest.FixtureRequest) -> dict[str, dict[str, Any]]:
        return grade_zoo(request, zoo)

    @CONFINED
    @pytest.mark.slow
    @pytest.mark.parametrize(
        ("exercise", "mistake", "check"),
        [entry[:3] for entry in zoo],
        ids=[f"{e}: {m}" for e, m, *_ in zoo],
    )
    def test_wrong_solution_is_caught_by_its_check_in_the_sandbox(
        graded: dict[str, dict[str, Any]], exercise: str, mistake: str, check: str
    ) -> None:
        why = not_caught(
            graded[mistake], check, (says or {}).get(mistake), (got or {}).get(mistake)
        )
        assert why is None, f"{exercise}, {mistake}: {why}"

    return graded, test_wrong_solution_is_caught_by_its_check_in_the_sandbox
