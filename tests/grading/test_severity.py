"""A severe mistake caps the exercise at half its points, and every report says so.

A solution that charges twice, loses a job, lets two workers hold one lock or shows one
owner's data to another is not "mostly right" because it passes the other checks.
Checks that catch such mistakes are marked ``severe``; failing one caps the score at
half (``labkit.grading.scoring.score``). Every exercise notebook names its severe checks.
"""

from __future__ import annotations

import re

import nbformat
import pytest
import test_zoo
from gradingkit import EXERCISES, HIDDEN, notebook_for, with_override

from labkit.grading import catalog
from labkit.grading.checks import CheckStatus, Namespace, Outcome, run_check
from labkit.grading.gradebook import Graded, feedback_markdown
from labkit.grading.scoring import cap_note, format_report, score, severe_failures


def _outcome(name: str, points: int, earned: int, severe: bool, status: str = "") -> Outcome:
    status = status or (CheckStatus.PASSED if earned == points else CheckStatus.FAILED)
    return Outcome(name, points, earned, status, severe=severe)


def test_a_failed_severe_check_caps_the_score_at_half() -> None:
    outcomes = [_outcome("a", 8, 8, False), _outcome("b", 1, 0, True), _outcome("c", 3, 3, True)]
    assert score(outcomes) == (6, 12)  # 11 earned, capped at 12 // 2
    note = cap_note(outcomes)
    assert note is not None and note.startswith("score capped at half (6): b failed")
    report = format_report("t", outcomes)
    assert "score: 6/12" in report and note in report and "b (severe)" in report


def test_other_failures_and_untouched_work_are_not_capped() -> None:
    mild = [_outcome("a", 8, 8, True), _outcome("b", 4, 0, False)]
    assert score(mild) == (8, 12) and cap_note(mild) is None
    stub = [_outcome("a", 8, 0, True, CheckStatus.NOT_STARTED)]
    assert score(stub) == (0, 8) and cap_note(stub) is None


def test_the_gradebook_and_the_feedback_use_the_capped_score() -> None:
    graded = Graded("ana", "ex99", "t", 12, "n.ipynb", [_outcome("a", 11, 11, False),
                                                        _outcome("b", 1, 0, True)])
    assert graded.score == 6
    text = feedback_markdown("ana", [graded])
    assert "| ex99 t | 6/12 |" in text
    assert "- Note: score capped at half (6): b failed" in text
    assert "| b (severe) | 0/1 | failed |" in text


@pytest.mark.parametrize("exercise", catalog.exercises())
def test_each_exercise_notebook_names_its_severe_checks(exercise: str) -> None:
    nb = nbformat.read(notebook_for(EXERCISES, exercise), as_version=4)
    [cell] = [c for c in nb.cells if c.cell_type == "markdown" and "Check your work" in c.source]
    named = set(re.findall(r"`(\w+)`", cell.source))
    severe = {c.name for c in catalog.public(exercise) if c.severe}
    assert named & {c.name for c in catalog.public(exercise)} == severe
    hidden = any(c.severe for c in catalog.all_checks(exercise, HIDDEN) if c.hidden)
    assert ("hidden ones the grader runs" in " ".join(cell.source.split())) == hidden
    if not severe:
        assert "No check of this exercise is marked *severe*" in cell.source


def test_every_zoo_mistake_caught_by_a_severe_check_scores_at_most_half() -> None:
    """Each zoo entry is graded once, through the sandbox, where it lives
    (``zoograding.not_caught`` asserts the cap for an entry whose check is severe). Here:
    that many entries are."""
    severe = {
        (e, c.name) for e in catalog.exercises() for c in catalog.all_checks(e, HIDDEN) if c.severe
    }
    tried = [m for e, m, check, _ in test_zoo.ZOO if (e, check) in severe]
    assert len(tried) >= 20, tried


#: Mistakes that lose an order or a detail but no effect, no job and no owner's data
#: (exercise, the start of the zoo entry's name): graded with every check, each fails
#: the check named after it and no severe one, so its score is not capped at half.
MILD = [
    ("ex06", "redrive newest first"),
]


@pytest.mark.parametrize(("exercise", "start"), MILD, ids=[m for _, m in MILD])
def test_a_mild_mistake_fails_no_severe_check(exercise: str, start: str) -> None:
    [(check, source)] = [
        (c, s) for e, m, c, s in test_zoo.ZOO if e == exercise and m.startswith(start)
    ]
    ns = Namespace(with_override(exercise, source))
    outcomes = [run_check(c, ns) for c in catalog.all_checks(exercise, HIDDEN)]
    failed = {o.check for o in outcomes if o.status != CheckStatus.PASSED}
    assert check in failed, f"{start}: {check} passed"
    assert not severe_failures(outcomes), f"{start}: severe checks failed: {sorted(failed)}"
    earned, possible = score(outcomes)
    assert possible // 2 < earned < possible
