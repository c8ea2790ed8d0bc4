"""Every exercise of the student kit, untouched as shipped, scores zero and says not started.

Graded with the kit's own labkit in the kit's own .venv (grade_untouched.py, one process
for all of them), from copies outside the kit, as ``check()`` grades: every cell runs
(a stub raises only when a check calls it), then the public checks find nothing started.
That the instructor's grader gives each stub zero on the hidden checks too, through the
sandbox, is in tests/grading (test_every_exercise_graded.py and its siblings).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from studentkit import kit_python, run_in_kit

from labkit.grading import catalog
from labkit.grading.checks import CheckStatus

pytestmark = pytest.mark.slow
IDS = catalog.exercises()
GRADER = Path(__file__).resolve().with_name("grade_untouched.py")


@pytest.fixture(scope="module")
def graded(kit: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("untouched")
    copies = []
    for notebook in sorted((kit / "exercises").glob("ex*.ipynb")):
        (folder / notebook.stem).mkdir()
        copies.append(str(shutil.copy(notebook, folder / notebook.stem / notebook.name)))
    done = run_in_kit(kit, [kit_python(kit), str(GRADER), *copies], timeout=300)
    assert done.returncode == 0, done.stdout[-4000:]
    said: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return said


@pytest.mark.parametrize("exercise", IDS)
def test_the_untouched_kit_exercise_scores_zero_and_says_not_started(
    graded: dict[str, Any], exercise: str
) -> None:
    [(name, result)] = [(n, r) for n, r in graded.items() if n.startswith(f"{exercise}_")]
    assert result["notes"] == [], (name, result["notes"])  # every cell ran
    assert result["possible"] > 0 and result["earned"] == 0, (name, result)
    assert result["statuses"] == [CheckStatus.NOT_STARTED.value], (name, result)
