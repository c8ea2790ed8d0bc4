"""A notebook graded in lanes (``Checks.lanes``): copies of the student's process at once.

Exercises whose checks mostly wait on real processes (ex09's consumers, ex10's servers)
run their checks in several copies of the confined student process at once, each copy
a lane with its own folder and uid, taking the next check once it is free. These tests
grade a real notebook through the sandbox in lanes and check what must not change: every
check graded once and reported in its place, the outcome the one-lane grader gives, each
lane under a uid of its own (one lane's sweep of its uid must never kill the other's
processes), nothing left alive or on disk afterwards, and a lane whose copy cannot run
the cells leaving its checks to the lanes that can.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from gradingkit import SOLUTIONS, notebook_for, processes_under, short_scratch

from labkit.grading import catalog, grade
from labkit.grading import lanes as runner
from labkit.grading.checks import CheckStatus
from labkit.grading.gradebook import NotebookStatus
from labkit.grading.isolation.confine import Confinement, student_uid

CONFINED = Confinement.detect()
pytestmark = pytest.mark.skipif(
    not CONFINED.drop_uid, reason="needs root: each lane runs as a uid of its own"
)

#: A quick exercise, graded here in two lanes (it has one of its own).
EXERCISE = "ex01"
ONE_CHECK = runner._one_check


@pytest.fixture
def scratch(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The grader's scratch root, private to the test, so what a run leaves is seen."""
    with short_scratch() as folder:
        monkeypatch.setenv("TMPDIR", str(folder))
        monkeypatch.setattr("tempfile.tempdir", None)
        yield folder


def _graded(
    monkeypatch: pytest.MonkeyPatch, notebook: Path, lanes: int
) -> tuple[grade.Graded, list[tuple[str, int, int]]]:
    """``notebook`` graded with ``lanes`` lanes; the result and, for each check, (its name,
    its lane, the uid its lane's process runs as)."""
    monkeypatch.setattr(catalog.public(EXERCISE), "lanes", lanes)
    ran: list[tuple[str, int, int]] = []

    def recorded(student, check, settings):  # type: ignore[no-untyped-def]
        lane = student.confinement.lane
        ran.append((check.name, lane, student.confinement.uid()))
        return ONE_CHECK(student, check, settings)

    monkeypatch.setattr(runner, "_one_check", recorded)
    settings = grade.Settings(SOLUTIONS, confinement=CONFINED, seed=7)
    return grade.grade_notebook("student", EXERCISE, notebook, settings), ran


def _notebook(folder: Path, extra: str = "") -> Path:
    """The reference of ``EXERCISE``, with ``extra`` as a first code cell."""
    path = notebook_for(SOLUTIONS, EXERCISE)
    data = json.loads(path.read_text(encoding="utf-8"))
    if extra:
        cell = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None}
        data["cells"].insert(0, {**cell, "source": extra})
    copy = folder / path.name
    copy.write_text(json.dumps(data), encoding="utf-8")
    return copy


def test_two_lanes_grade_every_check_once_as_one_lane_does(
    monkeypatch: pytest.MonkeyPatch, scratch: Path, tmp_path: Path
) -> None:
    notebook = _notebook(tmp_path)
    alone, ran_alone = _graded(monkeypatch, notebook, lanes=1)
    laned, ran = _graded(monkeypatch, notebook, lanes=2)

    names = [c.name for c in catalog.all_checks(EXERCISE, SOLUTIONS / "hidden")]
    assert [o.check for o in laned.outcomes] == names  # each in its place
    assert sorted(name for name, _lane, _uid in ran) == sorted(names)  # each graded once
    assert {lane for _name, lane, _uid in ran_alone} == {0}
    # Both lanes took checks, each as a uid of its own.
    uids = {lane: uid for _name, lane, uid in ran}
    assert set(uids) == {0, 1}, ran
    assert uids[0] == student_uid(0) != uids[1] == student_uid(1)
    # The same outcomes as one lane: the reference keeps every point either way.
    assert [(o.check, o.status, o.earned) for o in laned.outcomes] == [
        (o.check, o.status, o.earned) for o in alone.outcomes
    ]
    assert laned.status == alone.status and laned.notes == alone.notes
    assert all(o.status == CheckStatus.PASSED for o in laned.outcomes)
    # Nothing of either lane is left: no process in the scratch root, no folder in it.
    assert processes_under(scratch) == []
    assert list(scratch.glob(f"{grade.SCRATCH_PREFIX}*")) == []


def test_a_lane_that_cannot_run_the_cells_leaves_its_checks_to_the_others(
    monkeypatch: pytest.MonkeyPatch, scratch: Path, tmp_path: Path
) -> None:
    # The cells end the process where they run as the second lane's uid, and only there.
    second = student_uid(1)
    notebook = _notebook(tmp_path, f"import os\nif os.getuid() == {second}:\n    os._exit(3)\n")
    laned, ran = _graded(monkeypatch, notebook, lanes=2)

    assert {lane for _name, lane, _uid in ran} == {0}  # the first lane graded them all
    assert all(o.status == CheckStatus.PASSED for o in laned.outcomes), laned.outcomes
    assert laned.status == NotebookStatus.CRASHED  # and the run says one copy ended
    assert processes_under(scratch) == []
    assert list(scratch.glob(f"{grade.SCRATCH_PREFIX}*")) == []
