"""The gradebook around the grading: file names students really hand in, runs, totals."""

from __future__ import annotations

import csv
import os
from pathlib import Path

import pytest
from gradingkit import SOLUTIONS

from labkit.classroom.run import grade_folder
from labkit.clock import FakeClock
from labkit.grading.grade import Settings, find_notebooks, run_id


def _touch(path: Path, mtime: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{}")
    os.utime(path, (mtime, mtime))
    return path


@pytest.mark.parametrize(
    ("names", "picked"),
    [
        (["ex03_claim (1).ipynb"], "ex03_claim (1).ipynb"),  # a second download
        (["ex03_claim-final.ipynb"], "ex03_claim-final.ipynb"),  # renamed by hand
        (["EX03 copy.ipynb"], "EX03 copy.ipynb"),  # a copy in the file manager
        # the release's own name wins over a newer copy
        (["ex03_claim.ipynb", "ex03_claim (2).ipynb"], "ex03_claim.ipynb"),
        # among copies, the newest (the last one the student saved)
        (["ex03_claim (1).ipynb", "ex03_claim-v2.ipynb"], "ex03_claim-v2.ipynb"),
    ],
)
def test_renamed_and_copied_notebooks_are_found(
    tmp_path: Path, names: list[str], picked: str
) -> None:
    for i, name in enumerate(names):
        _touch(tmp_path / name, 1_000_000 + i)
    _touch(tmp_path / "ex033_other.ipynb", 0)  # not exercise 03
    _touch(tmp_path / ".ipynb_checkpoints" / "ex03_claim-checkpoint.ipynb", 9_999_999)
    found, notes = find_notebooks(tmp_path, ["ex03"])
    assert found["ex03"].name == picked
    if len(names) > 1:
        assert notes["ex03"].startswith(f"graded {picked} and ignored")
    else:
        assert notes == {}


def test_each_run_gets_its_own_folder_with_grades_and_totals(tmp_path: Path) -> None:
    subs = tmp_path / "subs"
    (subs / "zoe").mkdir(parents=True)  # hands in nothing: graded without any process
    settings = Settings(SOLUTIONS)
    lines: list[str] = []
    first, _ = grade_folder(
        subs,
        tmp_path / "out",
        settings,
        jobs=1,
        only=["ex01", "ex02"],
        progress=lines.append,
        clock=FakeClock(0.0),
    )
    second, _ = grade_folder(
        subs,
        tmp_path / "out",
        settings,
        jobs=1,
        only=["ex01"],
        progress=lines.append,
        clock=FakeClock(0.0),
    )
    assert first.name == run_id(FakeClock(0.0)) == "19700101-000000"
    assert second.name == "19700101-000000-2"  # the first run is left as it was
    rows = list(csv.DictReader((first / "grades.csv").open()))
    assert [(r["exercise"], r["status"], r["score"]) for r in rows] == [
        ("ex01", "missing", "0"),
        ("ex02", "missing", "0"),
    ]
    assert "expected a file named ex01_*.ipynb" in rows[0]["note"]
    [total] = list(csv.DictReader((first / "totals.csv").open()))
    assert total["student"] == "zoe" and total["score"] == "0"
    assert total["needs_attention"] == "ex01 missing; ex02 missing"
    assert (first / "feedback" / "zoe.md").exists()
    assert len(list(csv.DictReader((second / "grades.csv").open()))) == 1
