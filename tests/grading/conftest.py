"""Every grading test runs in its own empty folder: the student's folder of the checks.

``%%writefile`` cells land in the working directory and checks put their databases
there (``ns.workdir``), so without this an exercise's files would be written into the
repository.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

# Before any test module imports them: their asserts explain a failure.
pytest.register_assert_rewrite("gradingkit", "zoograding")

from gradingkit import short_scratch  # noqa: E402 - after the rewrite is registered

from labkit.grading.seeds import use_grading_seed  # noqa: E402


@pytest.fixture(autouse=True)
def _check_s_own_scenes() -> Iterator[None]:
    """Every test starts with ``check()``'s scenes: a test that graded in this process
    (``grade_notebook`` sets the run's grading seed and keeps it, as the one process of
    a grading worker should) must not hand its seed to the next test on the worker."""
    use_grading_seed(None)
    yield
    use_grading_seed(None)


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A ``TMPDIR`` for a grader that it really uses (``gradingkit.short_scratch``)."""
    with short_scratch() as folder:
        yield folder


@pytest.fixture(autouse=True)
def _in_a_scratch_folder(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    if "ex09" in request.node.name:
        # Exercise 9 is graded against a real Redis: skip with how to start it (CI: fail).
        request.getfixturevalue("redis_url")
