"""Every exercise graded for real: ``labkit grade`` with the sandbox CI has, on each exercise.

The exercises whose checks drive servers and brokers have their own graded classes
(``test_ex08_graded.py``, ``test_service_exercises_graded.py``). This one grades, in one
class, the reference (full marks) and the untouched stub (zero, "not started") of each of
the other eleven exercises, through the confined grader. Their zoos' wrong solutions are
graded the same way, every one, beside their entries (``test_zoo_exNN.py``,
``zoograding``). That in-process grading gives every notebook the score the sandbox gives
is ``bench/grading.py --same-scores``'s to show, over a whole class.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from gradingkit import (
    EXERCISES,
    SOLUTIONS,
    grade_class,
    notebook_for,
    short_scratch,
)

from labkit.grading.isolation.confine import Confinement

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not Confinement.detect().isolated, reason="needs root or bubblewrap (CI has both)"
    ),
]

PLAIN = ["ex01", "ex02", "ex03", "ex04", "ex05", "ex06", "ex07", "ex11", "ex12", "ex13", "ex14"]


@pytest.fixture(scope="module")
def graded(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[dict[tuple[str, str], dict[str, str]], Path]:
    root = tmp_path_factory.mktemp("everyexercise")
    subs = root / "submissions"
    for student, folder in (("ref", SOLUTIONS), ("stub", EXERCISES)):
        (subs / student).mkdir(parents=True)
        for exercise in PLAIN:
            notebook = notebook_for(folder, exercise)
            shutil.copyfile(notebook, subs / student / notebook.name)
    with short_scratch() as scratch:
        rows, feedback, _ = grade_class(root, subs, PLAIN, scratch)
    return {(r["student"], r["exercise"]): r for r in rows}, feedback


@pytest.mark.parametrize("exercise", PLAIN)
def test_the_reference_scores_full_marks_and_the_stub_zero(graded, exercise: str) -> None:  # type: ignore[no-untyped-def]
    rows, feedback = graded
    ref, stub = rows[("ref", exercise)], rows[("stub", exercise)]
    full = (ref["max"], "graded")
    assert (ref["score"], ref["status"]) == full, (feedback / "ref.md").read_text()
    assert (stub["score"], stub["status"]) == ("0", "not started")
