"""Every exercise's reference, run in the student kit, earns every public point.

Each notebook runs top to bottom in a kernel of the kit's own .venv (run_notebook.py
with the kit's interpreter), from a folder outside the kit, the way a student's copy
runs: a package the kit does not install, or a path the exercise expects beside it,
fails here. The reference is the instructor's solution notebook (the stubs as shipped
run in test_kit_untouched.py, on another worker). That the reference also earns the
hidden points is proven through the grader's sandbox (test_every_exercise_graded.py
and its siblings in tests/grading).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from studentkit import SOLUTIONS, run_notebook_in_kit

from labkit.grading import catalog

pytestmark = pytest.mark.slow
#: Exercises 8 and 9 run real Celery workers and Redis consumers in their checks (half
#: this file's time on a 2-core CI machine). Their references are graded whole, public
#: and hidden checks, through the sandbox (test_ex08_graded.py,
#: test_service_exercises_graded.py); the packages they import run in the kit in lessons
#: 13 and 14, and their kit stubs are graded in test_kit_untouched.py.
GRADED_ELSEWHERE = {"ex08", "ex09"}
IDS = [e for e in catalog.exercises() if e not in GRADED_ELSEWHERE]


@pytest.mark.parametrize("exercise", IDS)
def test_the_reference_earns_every_public_point_in_the_kit(
    kit: Path, exercise: str, tmp_path: Path, postgres_dsn: str, redis_url: str, amqp_url: str
) -> None:
    [notebook] = SOLUTIONS.glob(f"{exercise}_*.ipynb")
    error, earned, possible, text = run_notebook_in_kit(kit, notebook, tmp_path)
    assert error is None, error
    assert possible > 0 and earned == possible, text
