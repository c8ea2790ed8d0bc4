"""The reference solutions pass what ``check()`` runs; the untouched exercises score zero, gently.

In-process, the way a student's ``check()`` grades: the public checks, cells and checks
in one process. That the reference also earns full marks on the hidden checks is proven
where it counts, through ``labkit grade`` and its sandbox (``test_every_exercise_graded``,
``test_ex08_graded``, ``test_service_exercises_graded``); doing it here as well cost CI
minutes of the same sweeps twice.
"""

from __future__ import annotations

import pytest
from gradingkit import EXERCISES, HIDDEN, SOLUTIONS, grade_values, namespace_of, notebook_for

from labkit.grading import catalog
from labkit.grading.checks import CheckStatus, run_checks

IDS = catalog.exercises()


@pytest.mark.parametrize("exercise", IDS)
def test_reference_solution_passes_every_check_a_student_can_run(exercise: str) -> None:
    values, notes = namespace_of(notebook_for(SOLUTIONS, exercise))
    assert notes == []
    outcomes = run_checks(list(catalog.public(exercise)), values)
    assert outcomes and not any(o.hidden for o in outcomes)
    failed = {o.check: (o.status, o.expected, o.got) for o in outcomes if o.status != "passed"}
    assert failed == {}
    assert sum(o.earned for o in outcomes) == sum(o.points for o in outcomes)
    assert catalog.hidden(exercise, HIDDEN), "every exercise has hidden checks"


@pytest.mark.parametrize("exercise", IDS)
def test_untouched_exercise_gets_zero_and_says_not_started(exercise: str) -> None:
    values, notes = namespace_of(notebook_for(EXERCISES, exercise))
    assert notes == []  # the stubs only raise when called, so every cell runs
    outcomes = grade_values(exercise, values)
    assert sum(o.earned for o in outcomes.values()) == 0
    assert {o.status for o in outcomes.values()} == {CheckStatus.NOT_STARTED}
