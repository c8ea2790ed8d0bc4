"""bench/grading.py runs (a tiny class); the benchmark itself is never part of the tests."""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import pytest
from gradingkit import ROOT

from labkit.grading.seeds import grading_seed

sys.path.insert(0, str(ROOT))

from bench import grading  # noqa: E402

pytestmark = pytest.mark.slow


def test_the_generated_class_is_the_same_for_the_same_seed(tmp_path: Path) -> None:
    first = grading.make_class(tmp_path / "a", 3, ["ex01", "ex02"], seed=11)
    again = grading.make_class(tmp_path / "b", 3, ["ex01", "ex02"], seed=11)
    assert first == again and sum(first.values()) == 6
    for a in sorted((tmp_path / "a").rglob("*.ipynb")):
        assert a.read_bytes() == (tmp_path / "b" / a.relative_to(tmp_path / "a")).read_bytes()


@pytest.mark.parametrize("kind", ["wrong", "broken", "hanging"])
def test_each_kind_changes_the_reference(kind: str) -> None:
    reference = grading.make_notebook("reference", "ex01", random.Random(1))
    changed = grading.make_notebook(kind, "ex01", random.Random(1))
    assert [c.source for c in changed.cells] != [c.source for c in reference.cells]


def test_a_tiny_class_is_graded_and_the_rate_reported(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--students", "1", "--exercise", "ex01", "--jobs", "1"]
    zone = os.environ.get("TZ")
    assert grading.main([*argv, "--same-scores", "--per-exercise"]) == 0
    out = capsys.readouterr().out
    assert "1 students x 1 exercises = 1 notebooks" in out
    assert "notebooks/min" in out and "speed-up:" in out
    assert "in-process scores that differ from the graded ones: 0 of 1" in out
    assert "  ex01:   1 notebooks" in out  # the exercise's own rate
    assert grading_seed() is None and os.environ.get("TZ") == zone  # nothing left behind


def test_the_zoo_bench_grades_entries_and_says_they_were_caught(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """bench/zoo.py on the first two entries of one exercise, through the real grader."""
    from bench import zoo

    assert zoo.main(["--exercise", "ex07", "--first", "2", "--jobs", "2", "--same-scores"]) == 0
    said = capsys.readouterr().out
    assert "ex07:   2 of   2 caught by the check named after the mistake" in said, said
    assert "not caught in the sandbox: 0" in said, said
    assert "in-process scores that differ from the graded ones: 0 of 2" in said, said
