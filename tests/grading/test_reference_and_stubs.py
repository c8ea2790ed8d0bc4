"""The untouched exercises score zero on every check, public and hidden, and say not started.

In-process, with the grader's own checks. That the references pass what ``check()``
runs is proven in the student kit, in a real kernel (tests/kit/test_kit_exercises.py);
that they earn full marks on the hidden checks, through ``labkit grade`` and its
sandbox (``test_every_exercise_graded``, ``test_ex08_graded``,
``test_service_exercises_graded``).
"""

from __future__ import annotations

import pytest
from gradingkit import EXERCISES, HIDDEN, grade_values, namespace_of, notebook_for

from labkit.grading import catalog
from labkit.grading.checks import CheckStatus

IDS = catalog.exercises()


@pytest.mark.parametrize("exercise", IDS)
def test_untouched_exercise_gets_zero_and_says_not_started(exercise: str) -> None:
    values, notes = namespace_of(notebook_for(EXERCISES, exercise))
    assert notes == []  # the stubs only raise when called, so every cell runs
    outcomes = grade_values(exercise, values)
    assert sum(o.earned for o in outcomes.values()) == 0
    assert {o.status for o in outcomes.values()} == {CheckStatus.NOT_STARTED}
    assert catalog.hidden(exercise, HIDDEN), "every exercise has hidden checks"
