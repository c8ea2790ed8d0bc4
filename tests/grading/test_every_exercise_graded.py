"""Every exercise graded for real: ``labkit grade`` with the sandbox CI has, on each exercise.

The exercises whose checks drive servers and brokers have their own graded classes
(``test_ex08_graded.py``, ``test_service_exercises_graded.py``). This one grades, in one
class, the reference (full marks), the untouched stub (zero, "not started") and entries
of the project's zoo for each of the other eleven exercises, through the confined
grader, and checks each wrong solution is caught there by the check named after its
mistake, saying what its zoo records, capped at half when that check is severe. The
entries are, of each exercise, one caught by a check that kills, races or restarts the
student's code, and one more, drawn by ``LABKIT_ZOO_SEED`` (``zoograding.in_the_sandbox``): CI's
turn is the commit's place in the history, so successive commits grade every entry in turn;
``LABKIT_ZOO_SEED=all`` grades the whole zoo at once. That in-process grading gives every
notebook the score the sandbox gives is ``bench/grading.py --same-scores``'s to show.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import nbformat
import pytest
from gradingkit import (
    EXERCISES,
    SOLUTIONS,
    grade_class,
    notebook_for,
    short_scratch,
)
from zoo_notebooks import Entry, every_entry
from zoograding import ZOO_SEED, graded_records, in_the_sandbox, not_caught

from labkit.grading.isolation.confine import Confinement

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not Confinement.detect().isolated, reason="needs root or bubblewrap (CI has both)"
    ),
]

PLAIN = ["ex01", "ex02", "ex03", "ex04", "ex05", "ex06", "ex07", "ex11", "ex12", "ex13", "ex14"]

#: student name -> the zoo entry graded under that name
WRONG = {
    f"zoo-{entry.exercise}-{n}": entry
    for n, entry in enumerate(in_the_sandbox([e for e in every_entry() if e.exercise in PLAIN]))
}


@pytest.fixture(scope="module")
def graded(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[dict[tuple[str, str], dict[str, Any]], Path]:
    root = tmp_path_factory.mktemp("everyexercise")
    subs = root / "submissions"
    for student, folder in (("ref", SOLUTIONS), ("stub", EXERCISES)):
        (subs / student).mkdir(parents=True)
        for exercise in PLAIN:
            notebook = notebook_for(folder, exercise)
            shutil.copyfile(notebook, subs / student / notebook.name)
    for student, entry in WRONG.items():
        (subs / student).mkdir()
        nbformat.write(entry.notebook(), subs / student / entry.filename)
    with short_scratch() as scratch:
        # Twice each check's own time: this class grades beside the rest of the suite.
        _, feedback, _ = grade_class(
            root, subs, PLAIN, scratch, ("--jobs", "2", "--timeout-factor", "2")
        )
    return graded_records(feedback.parent), feedback


@pytest.mark.parametrize("exercise", PLAIN)
def test_the_reference_scores_full_marks_and_the_stub_zero(graded, exercise: str) -> None:  # type: ignore[no-untyped-def]
    records, feedback = graded
    ref, stub = records[("ref", exercise)], records[("stub", exercise)]
    full = (ref["max"], "graded")
    assert (ref["score"], ref["status"]) == full, (feedback / "ref.md").read_text()
    assert (stub["score"], stub["status"]) == (0, "not started")


@pytest.mark.parametrize("student", sorted(WRONG))
def test_a_wrong_solution_is_caught_by_its_check_in_the_sandbox(  # type: ignore[no-untyped-def]
    graded, student: str
) -> None:
    records, feedback = graded
    entry: Entry = WRONG[student]
    why = not_caught(records[(student, entry.exercise)], entry.check, entry.says, entry.got)
    assert why is None, (
        f"{entry.mistake}: {why} (drawn by LABKIT_ZOO_SEED={ZOO_SEED})\n"
        + (feedback / f"{student}.md").read_text()
    )
