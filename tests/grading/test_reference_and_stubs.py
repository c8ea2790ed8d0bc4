"""The reference solutions score full marks; the untouched exercises score zero, gently."""

from __future__ import annotations

import pytest
from gradingkit import EXERCISES, SOLUTIONS, grade_values, namespace_of, notebook_for

from labkit.grading import catalog
from labkit.grading.checks import CheckStatus

IDS = catalog.exercises()


@pytest.mark.parametrize("exercise", IDS)
def test_reference_solution_gets_full_marks_on_public_and_hidden_checks(exercise: str) -> None:
    values, notes = namespace_of(notebook_for(SOLUTIONS, exercise))
    assert notes == []
    outcomes = grade_values(exercise, values)
    assert any(o.hidden for o in outcomes.values()), "every exercise has hidden checks"
    failed = {
        name: (o.status, o.expected, o.got)
        for name, o in outcomes.items()
        if o.status != CheckStatus.PASSED
    }
    assert failed == {}
    assert sum(o.earned for o in outcomes.values()) == sum(o.points for o in outcomes.values())


@pytest.mark.parametrize("exercise", IDS)
def test_untouched_exercise_gets_zero_and_says_not_started(exercise: str) -> None:
    values, notes = namespace_of(notebook_for(EXERCISES, exercise))
    assert notes == []  # the stubs only raise when called, so every cell runs
    outcomes = grade_values(exercise, values)
    assert sum(o.earned for o in outcomes.values()) == 0
    assert {o.status for o in outcomes.values()} == {CheckStatus.NOT_STARTED}
