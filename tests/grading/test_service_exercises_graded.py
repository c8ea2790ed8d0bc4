"""``labkit grade`` on the exercises that spawn servers and consumers (ex09, ex10).

Their checks SIGKILL what they spawned (a consumer holding an entry, the student's HTTP
server) and judge what the kill left. Under the confined grader a spawned process runs
in bubblewrap's own session as the student's uid, where a signal to its process group
reaches only the wrapper; the kill must reach the whole tree (its control group), or the
"killed" consumer finishes its job and the reference loses the recovery checks. So the
reference must score full marks through the real grader, exactly as in ``check()``, the
untouched notebook zero, and nothing of the run may be left alive afterwards.
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
    processes_under,
    require_service,
)

pytestmark = [pytest.mark.services, pytest.mark.slow]


@pytest.fixture(scope="module")
def graded(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[dict[tuple[str, str], list[str]], Path, Path]:
    require_service("redis")
    root = tmp_path_factory.mktemp("serviceclass")
    subs = root / "submissions"
    for student, folder in (("ref", SOLUTIONS), ("stub", EXERCISES)):
        (subs / student).mkdir(parents=True)
        for exercise in ("ex09", "ex10"):
            notebook = notebook_for(folder, exercise)
            shutil.copyfile(notebook, subs / student / notebook.name)
    graded, feedback, scratch = grade_class(root, subs, ["ex09", "ex10"])
    rows = {(r["student"], r["exercise"]): [r["score"], r["max"], r["status"]] for r in graded}
    return rows, feedback, scratch


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
