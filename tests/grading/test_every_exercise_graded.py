"""Every exercise graded for real: ``labkit grade`` with the sandbox CI has, on each exercise.

The exercises whose checks drive servers and brokers have their own graded classes
(``test_ex08_graded.py``, ``test_service_exercises_graded.py``). This one grades, in one
class, the reference (full marks), the untouched stub (zero, "not started") and entries
of the project's zoo (the first and the last, and every entry a kill sweep must catch)
for each of the other eleven exercises, through the confined grader, and checks each wrong
solution is caught there by the check named after its mistake, capped at half when that
check is severe. That in-process grading gives every notebook the score the sandbox gives
is ``bench/grading.py --same-scores``'s to show, over a whole class.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import pytest
from gradingkit import (
    EXERCISES,
    SOLUTIONS,
    grade_class,
    notebook_for,
    short_scratch,
)
from zoo_notebooks import Entry, every_entry, not_caught

from labkit.grading.isolation.confine import Confinement

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not Confinement.detect().isolated, reason="needs root or bubblewrap (CI has both)"
    ),
]

PLAIN = ["ex01", "ex02", "ex03", "ex04", "ex05", "ex06", "ex07", "ex11", "ex12", "ex13", "ex14"]
#: Checks that kill the student's code after each of its writes (``killsweep``), race
#: two processes of it (``racesweep``) or call it again in a new process (``replay``):
#: every zoo entry they must catch is graded here, since forking, stopping, killing and
#: starting Python again inside the sandbox is what in-process grading cannot show.
SWEPT = {
    "tokens_differ_between_worker_processes",
    "a_killed_redrive_leaves_no_job_half_redriven",
    "two_schedulers_in_every_order_enqueue_each_slot_once",
    "charge_is_the_same_after_a_restart",
    "post_is_the_same_after_a_restart",
    "no_double_claim_under_a_race",
    "two_redrives_at_once_share_nothing",
    "place_order_is_one_transaction",
    "consume_is_one_transaction",
    "a_killed_scheduler_restarts_without_losing_a_slot",
    # Exercise 14's four sweep checks kill at 11 boundaries each: one of them here keeps
    # CI in its budget; the entries of the other three are caught in test_zoo_ex14.
    "every_effect_once_after_a_kill_anywhere",
}


def _picked(exercise: str) -> list[Entry]:
    entries = [e for e in every_entry() if e.exercise == exercise]
    return [e for i, e in enumerate(entries) if i in (0, len(entries) - 1) or e.check in SWEPT]


#: student name -> the zoo entry graded under that name
WRONG = {
    f"zoo-{exercise}-{n}": entry for exercise in PLAIN for n, entry in enumerate(_picked(exercise))
}


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
    for student, entry in WRONG.items():
        (subs / student).mkdir()
        nbformat.write(
            entry.notebook(), subs / student / notebook_for(SOLUTIONS, entry.exercise).name
        )
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


@pytest.mark.parametrize("student", sorted(WRONG))
def test_a_wrong_solution_is_caught_by_its_check_in_the_sandbox(  # type: ignore[no-untyped-def]
    graded, student: str
) -> None:
    rows, feedback = graded
    entry = WRONG[student]
    text = (feedback / f"{student}.md").read_text()
    why = not_caught(entry, rows[(student, entry.exercise)], text)
    assert why is None, f"{entry.mistake}: {why}\n{text}"
    [named] = [line for line in text.splitlines() if line.startswith(f"| {entry.check} ")]
    if "severe" in named:
        assert "score capped at half" in text, text
