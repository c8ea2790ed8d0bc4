"""Every exercise of the student kit, untouched as shipped, scores zero and says not started.

Graded with the kit's own labkit in the kit's own .venv (grade_in_kit.py, one process
for all of them), from copies outside the kit, as ``check()`` grades: every cell runs
(a stub raises only when a check calls it), then the public checks find nothing started.
That the instructor's grader gives each stub zero on the hidden checks too, through the
sandbox, is in tests/grading (test_every_exercise_graded.py and its siblings).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from studentkit import grade_in_kit, result_of

from labkit.grading import catalog
from labkit.grading.checks import CheckStatus

pytestmark = pytest.mark.slow
IDS = catalog.exercises()


@pytest.fixture(scope="module")
def graded(kit: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return grade_in_kit(kit, sorted((kit / "exercises").glob("ex*.ipynb")),
                        tmp_path_factory.mktemp("untouched"))


@pytest.mark.parametrize("exercise", IDS)
def test_the_untouched_kit_exercise_scores_zero_and_says_not_started(
    graded: dict[str, Any], exercise: str
) -> None:
    name, result = result_of(graded, exercise)
    assert result["possible"] > 0 and result["earned"] == 0, (name, result)
    assert result["statuses"] == [CheckStatus.NOT_STARTED.value], (name, result)
