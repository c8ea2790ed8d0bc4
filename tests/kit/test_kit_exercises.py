"""Every exercise's reference, run in the student kit, earns every public point.

Each notebook's cells run top to bottom with the kit's own labkit in the kit's own
.venv (grade_in_kit.py, one process for all of them, as ``check()`` grades), from copies
outside the kit: a package the kit does not install, or a path the exercise expects
beside it, fails here. The browser suite runs a finished exercise 1 in a kernel of
the kit's own JupyterLab (tests/browser). The reference is the instructor's solution
notebook (the stubs as shipped run in test_kit_untouched.py, on another worker). That
the reference also earns the hidden points is proven through the grader's sandbox
(test_every_exercise_graded.py and its siblings in tests/grading).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from studentkit import SOLUTIONS, grade_in_kit, result_of

from labkit.grading import catalog
from labkit.grading.checks import CheckStatus

pytestmark = pytest.mark.slow
#: Exercises 8, 9 and 10 run real Celery workers, Redis consumers and uvicorn servers in
#: their checks (half this file's time on a 2-core CI machine). Their references are
#: graded whole, public and hidden checks, through the sandbox (test_ex08_graded.py,
#: test_service_exercises_graded.py); the packages they import run in the kit in lessons
#: 12, 13 and 14, and their kit stubs are graded in test_kit_untouched.py.
GRADED_ELSEWHERE = {"ex08", "ex09", "ex10"}
IDS = [e for e in catalog.exercises() if e not in GRADED_ELSEWHERE]


@pytest.fixture(scope="module")
def graded(kit: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    references = [p for e in IDS for p in SOLUTIONS.glob(f"{e}_*.ipynb")]
    return grade_in_kit(kit, references, tmp_path_factory.mktemp("references"))


@pytest.mark.parametrize("exercise", IDS)
def test_the_reference_earns_every_public_point_in_the_kit(
    graded: dict[str, Any], exercise: str
) -> None:
    name, result = result_of(graded, exercise)
    assert result["possible"] > 0 and result["earned"] == result["possible"], (name, result)
    assert result["statuses"] == [CheckStatus.PASSED.value], (name, result)
