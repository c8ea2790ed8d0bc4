"""``labkit grade`` on the exercises that spawn servers and consumers (ex09, ex10).

Their checks SIGKILL what they spawned (a consumer holding an entry, the student's HTTP
server) and judge what the kill left. Under the confined grader a spawned process runs
in bubblewrap's own session as the student's uid, where a signal to its process group
reaches only the wrapper; the kill must reach the whole tree (its control group), or the
"killed" consumer finishes its job and the reference loses the recovery checks. So the
reference must score full marks through the real grader, exactly as in ``check()``, the
untouched notebook zero, and nothing of the run may be left alive afterwards.

The zoo entries graded here are the ones whose mistake only shows where processes are
killed, raced or started again (a kill, two consumers at once, a per-process hash
salt); every entry of both zoos is caught in process by ``test_zoo_ex09.py`` and
``test_zoo_ex10.py``, which cost minutes less. One pick of each exercise per turn
(``zoograding.this_turn``: CI's turn is the commit's place in the history, so four
successive commits grade all six; ``LABKIT_ZOO_SEED=all`` grades them at once): each is
a whole notebook of servers and consumers graded with every check, and a wrong one waits
out the checks it hangs, so the six made this file the longest-waiting in CI.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
from gradingkit import (
    EXERCISES,
    SOLUTIONS,
    grade_class,
    notebook_for,
    processes_under,
    require_service,
    short_scratch,
)
from zoo_notebooks import Entry, every_entry
from zoograding import graded_records, not_caught, this_turn

pytestmark = [pytest.mark.services, pytest.mark.slow]

#: The sandbox-only mistakes: (exercise, the start of the zoo entry's name).
PICKS = [
    ("ex09", "acks before the work"),
    ("ex09", "no XAUTOCLAIM"),
    ("ex09", "the done record claimed with SET NX"),
    ("ex09", "the done record read outside the WATCH"),
    ("ex10", "the job key built with hash()"),
    ("ex10", "202 first, the job written in a background task"),
]


def _entry(exercise: str, start: str) -> Entry:
    """The zoo entry of ``exercise`` whose mistake starts with ``start``."""
    found = [e for e in every_entry() if e.exercise == exercise and e.mistake.startswith(start)]
    assert len(found) == 1, f"no single {exercise} zoo entry starts with {start!r}"
    return found[0]


#: The picks graded this turn: one of each exercise's.
TAKEN = [
    (exercise, start)
    for exercise in ("ex09", "ex10")
    for start in this_turn(
        f"sandbox-only {exercise}", [s for e, s in PICKS if e == exercise], many=1
    )
]

#: student name -> the zoo entry graded under that name
WRONG = {f"zoo-{e}-{n}": _entry(e, start) for n, (e, start) in enumerate(TAKEN)}


def test_every_pick_names_one_zoo_entry() -> None:
    """The picks not graded this turn still name an entry each (no stale pick waits for
    its turn to fail)."""
    for exercise, start in PICKS:
        assert _entry(exercise, start).exercise == exercise


@pytest.fixture(scope="module")
def graded(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[dict[tuple[str, str], list[str]], Path, Path]]:
    require_service("redis")
    root = tmp_path_factory.mktemp("serviceclass")
    subs = root / "submissions"
    for student, folder in (("ref", SOLUTIONS), ("stub", EXERCISES)):
        (subs / student).mkdir(parents=True)
        for exercise in ("ex09", "ex10"):
            notebook = notebook_for(folder, exercise)
            shutil.copyfile(notebook, subs / student / notebook.name)
    for student, entry in WRONG.items():
        (subs / student).mkdir()
        nbformat.write(
            entry.notebook(), subs / student / notebook_for(SOLUTIONS, entry.exercise).name
        )
    with short_scratch() as scratch:
        graded, feedback, _ = grade_class(root, subs, ["ex09", "ex10"], scratch)
        rows = {(r["student"], r["exercise"]): [r["score"], r["max"], r["status"]] for r in graded}
        yield rows, feedback, scratch


@pytest.mark.parametrize("exercise", ["ex09", "ex10"])
def test_the_reference_scores_full_marks_under_the_confined_grader(graded, exercise) -> None:  # type: ignore[no-untyped-def]
    rows, feedback, _ = graded
    score, possible, status = rows[("ref", exercise)]
    assert (score, status) == (possible, "graded"), (feedback / "ref.md").read_text()


def test_the_kill_checks_pass_because_the_kill_landed(graded) -> None:  # type: ignore[no-untyped-def]
    _, feedback, _ = graded
    text = (feedback / "ref.md").read_text()
    for check in ("recovers_its_own_pending_after_a_kill", "takes_over_a_dead_consumers_entries"):
        assert any(check in line and "passed" in line for line in text.splitlines()), text


@pytest.mark.parametrize("exercise", ["ex09", "ex10"])
def test_the_untouched_notebook_scores_zero_not_started(graded, exercise) -> None:  # type: ignore[no-untyped-def]
    rows, _, _ = graded
    score, _, status = rows[("stub", exercise)]
    assert (score, status) == ("0", "not started")


def test_no_process_of_the_run_outlives_the_grade(graded) -> None:  # type: ignore[no-untyped-def]
    _, _, scratch = graded
    assert processes_under(scratch) == []


@pytest.mark.parametrize("student", sorted(WRONG))
def test_a_wrong_solution_is_caught_by_its_check_in_the_sandbox(graded, student) -> None:  # type: ignore[no-untyped-def]
    _, feedback, _ = graded
    entry = WRONG[student]
    why = not_caught(graded_records(feedback.parent)[(student, entry.exercise)], entry.check)
    assert why is None, f"{entry.mistake}: {why}\n{(feedback / f'{student}.md').read_text()}"
