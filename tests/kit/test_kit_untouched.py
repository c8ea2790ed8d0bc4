"""Every exercise of the student kit, untouched as shipped, scores zero and says not started.

Run like the references (tests/kit/test_kit_exercises.py): top to bottom in a kernel of
the kit's own .venv, from a folder outside the kit. A stub raises only when a check
calls it, so every cell runs and ``check()`` answers, gently, with 0 points.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from studentkit import run_notebook_in_kit

from labkit.grading import catalog

pytestmark = pytest.mark.slow
IDS = catalog.exercises()


@pytest.mark.parametrize("exercise", IDS)
def test_the_untouched_kit_exercise_scores_zero_and_says_not_started(
    kit: Path, exercise: str, tmp_path: Path
) -> None:
    [notebook] = (kit / "exercises").glob(f"{exercise}_*.ipynb")
    error, earned, possible, text = run_notebook_in_kit(kit, notebook, tmp_path)
    assert error is None, error  # the stubs raise only when a check calls them
    assert possible > 0 and earned == 0, text
    assert "Not started yet" in text, text
