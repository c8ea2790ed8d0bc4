"""A run's gradebook as Canvas, Moodle and Gradescope import it (``labkit.grading.export``).

The run is written with the gradebook's own writers from outcomes built here (no student
code runs): ana finished ex01 (with a hidden check) and failed a severe check of ex03,
so it is capped; bia handed in no ex01 and half of ex03. Each file is checked against
its platform's documented columns; ``labkit export`` and ``labkit grade --export`` run
for real on a run ``labkit grade`` finished (with no notebooks, so it grades in seconds).
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from gradingkit import SOLUTIONS, run_in_group

from labkit.grading.checks import CheckStatus, Outcome
from labkit.grading.export import ExportError, export, gradescope_results, read_roster
from labkit.grading.gradebook import Graded, NotebookStatus, write_gradebook, write_outcomes

EX01 = "ex01 stable keys and payload fingerprints"
EX03 = "ex03 atomic claim with a lease"
CANVAS_HEADER = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", EX01, EX03]
MOODLE_HEADER = [
    "Email address", "Username", "ID number", "Student", EX01, EX03,
    f"{EX01} (feedback)", f"{EX03} (feedback)",
]
ROSTER = (
    "student,name,id,sis_user_id,sis_login_id,section,email\n"
    "ana,\"Souza, Ana\",101,S-1,ana.souza,A,ana@example.edu\n"
    "bia,\"Lima, Bia\",102,S-2,bia.lima,B,bia@example.edu\n"
    "caio,\"Reis, Caio\",103,S-3,caio.reis,A,caio@example.edu\n"  # never handed in a folder
)


def _passed(name: str, points: int, *, hidden: bool = False, severe: bool = False) -> Outcome:
    return Outcome(name, points, points, CheckStatus.PASSED, hidden=hidden, severe=severe)


def _failed(name: str, points: int, *, hidden: bool = False, severe: bool = False) -> Outcome:
    return Outcome(name, points, 0, CheckStatus.FAILED, "one claim", "two claims", "lock it",
                   hidden=hidden, severe=severe)


def _class() -> list[Graded]:
    ana01 = Graded("ana", "ex01", "stable keys and payload fingerprints", 9, "ex01_keys.ipynb",
                   [_passed("same_intent", 5), _passed("fingerprint", 4, hidden=True)])
    # 8 of 10 earned, but a severe check failed: capped at 5
    ana03 = Graded("ana", "ex03", "atomic claim with a lease", 10, "ex03_claim.ipynb",
                   [_passed("claims_one", 8), _failed("no_double_claim", 2, severe=True)])
    bia01 = Graded("bia", "ex01", "stable keys and payload fingerprints", 9, None,
                   [Outcome("same_intent", 5, 0, CheckStatus.NOT_GRADED),
                    Outcome("fingerprint", 4, 0, CheckStatus.NOT_GRADED, hidden=True)],
                   ["no notebook for ex01: expected a file named ex01_*.ipynb"],
                   NotebookStatus.MISSING)
    bia03 = Graded("bia", "ex03", "atomic claim with a lease", 10, "ex03_claim.ipynb",
                   [_failed("claims_one", 8), _passed("no_double_claim", 2, severe=True)])
    return [ana01, ana03, bia01, bia03]


@pytest.fixture
def run(tmp_path: Path) -> Path:
    folder = tmp_path / "grading" / "r"
    results = _class()
    write_gradebook(results, folder / "grades.csv")
    write_outcomes(results, folder / "outcomes.json")
    return folder


@pytest.fixture
def roster(tmp_path: Path) -> Path:
    path = tmp_path / "roster.csv"
    path.write_text(ROSTER)
    return path


def _rows(path: Path) -> list[list[str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.reader(fh))


def test_canvas_csv_has_canvas_columns_a_points_row_and_a_score_per_student(
    run: Path, roster: Path
) -> None:
    [written] = export(run, ["canvas"], roster)
    assert written.path == run / "canvas.csv"
    rows = _rows(written.path)
    assert rows[0] == CANVAS_HEADER
    assert rows[1] == ["Points Possible", "", "", "", "", "9", "10"]
    assert rows[2:] == [
        ["Souza, Ana", "101", "S-1", "ana.souza", "A", "9", "5"],  # ex03 capped at half
        ["Lima, Bia", "102", "S-2", "bia.lima", "B", "0", "2"],  # no ex01 notebook: 0
    ]
    # caio is in the roster but has no folder: said, not invented
    assert any("caio" in gap and "not in this run" in gap for gap in written.to_complete)


def test_canvas_without_a_roster_names_the_columns_to_fill(run: Path) -> None:
    [written] = export(run, ["canvas"])
    rows = _rows(written.path)
    assert rows[0] == CANVAS_HEADER
    assert [r[:5] for r in rows[2:]] == [["ana", "", "", "", ""], ["bia", "", "", "", ""]]
    gaps = " ".join(written.to_complete)
    assert "ID, SIS User ID, SIS Login ID and Section" in gaps and "--roster" in gaps


def test_moodle_csv_has_identifier_columns_a_grade_and_a_feedback_per_exercise(
    run: Path, roster: Path
) -> None:
    [written] = export(run, ["moodle"], roster)
    rows = _rows(written.path)
    assert rows[0] == MOODLE_HEADER
    assert len(rows) == 3  # one row per student, no other row Moodle would read as one
    ana, bia = rows[1], rows[2]
    # the roster's login and SIS id stand in for Moodle's username and ID number
    assert ana[:6] == ["ana@example.edu", "ana.souza", "S-1", "ana", "9", "5"]
    assert bia[:6] == ["bia@example.edu", "bia.lima", "S-2", "bia", "0", "2"]
    assert bia[6].startswith("0/9, missing: no notebook for ex01")  # the status, in feedback
    assert ana[7].startswith("5/10, graded")
    assert any("maximum grade (ex01 9, ex03 10)" in gap for gap in written.to_complete)


def test_moodle_without_a_roster_says_rows_without_an_identifier_are_skipped(run: Path) -> None:
    [written] = export(run, ["moodle"])
    rows = _rows(written.path)
    assert [r[:4] for r in rows[1:]] == [["", "", "", "ana"], ["", "", "", "bia"]]
    gaps = " ".join(written.to_complete)
    assert "Email address, Username and ID number" in gaps and "skips a row" in gaps


def assert_gradescope_results(results: dict[str, Any]) -> None:
    """results.json as Gradescope's autograder specification documents it."""
    assert set(results) <= {"score", "execution_time", "output", "visibility",
                            "stdout_visibility", "extra_data", "tests", "leaderboard"}
    assert isinstance(results["score"], int | float)
    assert isinstance(results["output"], str)
    if "execution_time" in results:
        assert isinstance(results["execution_time"], int | float)
    tests = results["tests"]
    assert isinstance(tests, list) and tests
    for test in tests:
        assert {"name", "score", "max_score", "output", "visibility"} <= set(test), test
        assert isinstance(test["name"], str) and test["name"]
        assert isinstance(test["score"], int | float)
        assert isinstance(test["max_score"], int | float)
        assert isinstance(test["output"], str)
        assert test["visibility"] in {"hidden", "after_due_date", "after_published", "visible"}
        assert test.get("status", "passed") in {"passed", "failed"}
        assert isinstance(test.get("number", ""), str)
    assert results["score"] == sum(t["score"] for t in tests)


def test_gradescope_results_one_test_per_check_hidden_ones_after_published(run: Path) -> None:
    [written] = export(run, ["gradescope"], execution_time=12.4)
    ana = json.loads((written.path / "ana.json").read_text())
    assert_gradescope_results(ana)
    assert ana["execution_time"] == 12
    tests = {t["name"]: t for t in ana["tests"]}
    assert tests["ex01: same_intent"]["visibility"] == "visible"
    assert tests["ex01: fingerprint (hidden)"]["visibility"] == "after_published"
    failed = tests["ex03: no_double_claim (severe)"]
    assert (failed["score"], failed["max_score"], failed["status"]) == (0, 2, "failed")
    assert "expected: one claim" in failed["output"] and "hint: lock it" in failed["output"]
    cap = tests["ex03: score capped at half (a severe mistake)"]
    assert cap["score"] == -3 and cap["visibility"] == "visible"  # 8 earned, capped at 5
    assert ana["score"] == 9 + 5
    assert "9/" not in ana["output"]  # no score that counts hidden checks before publishing


def test_gradescope_missing_notebook_scores_zero_and_says_why(run: Path) -> None:
    export(run, ["gradescope"])
    bia = json.loads((run / "gradescope" / "bia.json").read_text())
    assert_gradescope_results(bia)
    ex01 = [t for t in bia["tests"] if t["name"].startswith("ex01")]
    assert [t["score"] for t in ex01] == [0, 0]
    assert all(t["status"] == "failed" for t in ex01)
    assert "ex01 stable keys and payload fingerprints: missing" in bia["output"]
    assert "no notebook for ex01" in bia["output"]
    assert bia["score"] == 2


def test_a_hidden_severe_failure_keeps_its_cap_until_published() -> None:
    checks = [
        {**_passed("a", 8).to_dict(), "label": "a"},
        {**_failed("b", 2, hidden=True, severe=True).to_dict(), "label": "b (hidden, severe)"},
    ]
    entry = {"exercise": "ex03", "title": "t", "score": 5, "status": "graded", "notes": [],
             "cap": "score capped at half (5): b failed", "checks": checks}
    results = gradescope_results([entry])
    assert_gradescope_results(results)
    assert results["tests"][-1]["visibility"] == "after_published"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("name,id\nAna,1\n", "student column"),  # no student column
        ("student,phone\nana,5\n", "unknown column(s): phone"),  # a column we do not know
        ("student,id\nana,1\nana,2\n", "listed twice"),  # one folder, two people
    ],
)
def test_a_roster_that_cannot_be_read_right_is_refused(
    tmp_path: Path, text: str, says: str
) -> None:
    path = tmp_path / "roster.csv"
    path.write_text(text)
    with pytest.raises(ExportError, match=says.replace("(", r"\(").replace(")", r"\)")):
        read_roster(path)


def test_a_folder_that_is_not_a_run_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ExportError, match="no grades.csv"):
        export(tmp_path, ["canvas"])


def test_gradescope_needs_the_per_check_outcomes(run: Path) -> None:
    (run / "outcomes.json").unlink()
    with pytest.raises(ExportError, match="no outcomes.json"):
        export(run, ["gradescope"])
    export(run, ["canvas"])  # the CSV exports need grades.csv only (titles from labkit)
    assert _rows(run / "canvas.csv")[0] == CANVAS_HEADER


def _labkit(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``labkit ARGV``, in its own process group, killed whole if it outlives the test."""
    labkit = Path(sys.executable).parent / "labkit"
    return run_in_group(
        [str(labkit), *argv], cwd, {**os.environ, "TMPDIR": str(cwd)}, timeout=300
    )


def test_labkit_export_on_a_finished_run(run: Path, roster: Path, tmp_path: Path) -> None:
    done = _labkit(["export", str(run), "--to", "moodle,canvas", "--to", "gradescope",
                    "--roster", str(roster), "--execution-time", "3"], tmp_path)
    assert done.returncode == 0, done.stderr
    for platform, path in (("moodle", "moodle.csv"), ("canvas", "canvas.csv"),
                           ("gradescope", "gradescope")):
        assert f"wrote {platform} export {run / path}" in done.stdout
    assert "in the roster but not in this run (no row written): caio" in done.stdout
    assert _rows(run / "canvas.csv")[0] == CANVAS_HEADER
    assert [r[1] for r in _rows(run / "canvas.csv")[2:]] == ["101", "102"]
    assert _rows(run / "moodle.csv")[0] == MOODLE_HEADER
    assert_gradescope_results(json.loads((run / "gradescope" / "ana.json").read_text()))

    wrong = _labkit(["export", str(run), "--to", "blackboard"], tmp_path)
    assert wrong.returncode == 2 and "unknown platform(s) blackboard" in wrong.stderr
    not_a_run = _labkit(["export", str(tmp_path), "--to", "canvas"], tmp_path)
    assert not_a_run.returncode == 2 and "no grades.csv" in not_a_run.stderr


@pytest.mark.slow
def test_labkit_grade_export_writes_the_files_after_grading(tmp_path: Path) -> None:
    subs = tmp_path / "submissions"
    for student in ("ana", "bia"):
        (subs / student).mkdir(parents=True)  # nothing handed in: no student process runs
    graded = _labkit(
        ["grade", str(subs), "--out", "grading", "--run-id", "r", "--seed", "7",
         "--solutions", str(SOLUTIONS), "--exercise", "ex01", "--jobs", "1",
         "--export", "canvas", "--export", "moodle"],
        tmp_path,
    )
    assert graded.returncode == 0, graded.stderr
    run = tmp_path / "grading" / "r"
    assert "before importing: canvas.csv: ID, SIS User ID" in graded.stdout
    assert "before importing: moodle.csv: Email address, Username" in graded.stdout
    rows = _rows(run / "canvas.csv")
    assert rows[0] == [*CANVAS_HEADER[:5], EX01]
    assert rows[1:] == [["Points Possible", "", "", "", "", rows[1][5]],
                        ["ana", "", "", "", "", "0"], ["bia", "", "", "", "", "0"]]
    assert int(rows[1][5]) > 0  # the exercise's points, hidden checks included
    assert [r[3:5] for r in _rows(run / "moodle.csv")[1:]] == [["ana", "0"], ["bia", "0"]]
