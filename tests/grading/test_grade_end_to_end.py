"""``labkit grade`` for real: the confined student process, the gradebook, feedback.

One small class, one exercise (ex01, the quickest): a reference solution, an untouched
notebook whose check cell was edited to claim full marks, a notebook with a syntax
error, one with an infinite loop (at the top level and inside a function; named abel so
the slowest notebook starts first), a file that is not a notebook, and a student with no
notebook at all. The reference student also ships a ``labkit/`` folder that would break
everything if the grader imported it, and names the file the way a download does
(``ex01_keys (1).ipynb``).
"""

from __future__ import annotations

import csv
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from gradingkit import EXERCISES, SOLUTIONS, notebook_for

from labkit.grading.grade import TIME_ZONES

pytestmark = pytest.mark.slow

# Loose enough that a loaded 2-core machine (pytest -n 2) never times out the reference's
# cells or checks; the loops still hang.
CELL_TIMEOUT, CHECK_TIMEOUT = 5, 5


def _edit(source: Path, target: Path, change) -> None:  # type: ignore[no-untyped-def]
    nb = nbformat.read(source, as_version=4)
    change(nb)
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, target)


def _cell_defining(nb: nbformat.NotebookNode, name: str) -> nbformat.NotebookNode:
    return next(c for c in nb.cells if c.cell_type == "code" and f"def {name}(" in c.source)


@pytest.fixture(scope="module")
def graded(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[dict[str, tuple[int, int]], Path, str]:
    root = tmp_path_factory.mktemp("class")
    subs = root / "submissions"
    ref = notebook_for(SOLUTIONS, "ex01")
    stub = notebook_for(EXERCISES, "ex01")

    (subs / "ana").mkdir(parents=True)
    shutil.copyfile(ref, subs / "ana" / "ex01_keys (1).ipynb")
    # a labkit/ folder in a submission must never be imported by the grader
    (subs / "ana" / "labkit").mkdir()
    (subs / "ana" / "labkit" / "__init__.py").write_text(
        "raise RuntimeError('the student copy of labkit was imported')\n"
    )

    def claims_full_marks(nb: nbformat.NotebookNode) -> None:
        nb.cells[-1].source = (
            'from labkit.grading import check\ncheck("ex01")\n'
            'print("score: 14/14")\nimport builtins; builtins.SCORE = 14'
        )

    _edit(stub, subs / "bia" / stub.name, claims_full_marks)

    def syntax_error(nb: nbformat.NotebookNode) -> None:
        cell = _cell_defining(nb, "accept")
        cell.source = cell.source.replace("-> bool:", "-> bool", 1)

    _edit(ref, subs / "caio" / ref.name, syntax_error)

    def loops_in_accept(nb: nbformat.NotebookNode) -> None:
        # Inside accept, on a repeat, a loop that waits forever: the checks that send a key
        # twice hang and the others pass. It sleeps, so the hangs do not take the CPU the
        # rest of the suite needs; and only some checks hang, since each one waits out the
        # check timeout (every check hanging made this the suite's fourth-longest file).
        cell = _cell_defining(nb, "accept")
        assert cell.source.count("\n    return False\n") == 1, cell.source
        cell.source = cell.source.replace(
            "\n    return False\n",
            "\n    while True:\n        __import__('time').sleep(0.01)\n",
            1,
        )

    def loops_at_the_top(nb: nbformat.NotebookNode) -> None:
        # At the top level, a loop that spins. Apart from abel's notebook: after each hung
        # check the grader starts the notebook again, and would wait out this cell each time.
        nb.cells.insert(-1, nbformat.v4.new_code_cell("while True:\n    pass"))

    _edit(ref, subs / "abel" / ref.name, loops_in_accept)
    _edit(ref, subs / "beto" / ref.name, loops_at_the_top)

    (subs / "edu").mkdir()
    (subs / "edu" / "ex01_keys.ipynb").write_text("{ this is not json")
    (subs / "fil").mkdir()
    (subs / "fil" / "notes.txt").write_text("I forgot to hand it in")

    out = root / "out"
    labkit = Path(sys.executable).parent / "labkit"
    done = subprocess.run(
        [
            str(labkit),
            "grade",
            str(subs),
            "--out",
            str(out),
            "--run-id",
            "monday",
            "--exercise",
            "ex01",
            "--cell-timeout",
            str(CELL_TIMEOUT),
            "--check-timeout",
            str(CHECK_TIMEOUT),
            "--jobs",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=400,  # a bound for a loaded machine, not an expectation
        cwd=root,
    )
    assert done.returncode == 0, done.stderr
    with (out / "monday" / "grades.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == ["student", "exercise", "score", "max", "status", "notebook", "note"]
    scores = {r["student"]: (int(r["score"]), int(r["max"]), r["status"]) for r in rows}
    return scores, out / "monday" / "feedback", done.stdout


def test_reference_gets_full_marks_and_its_labkit_folder_is_ignored(graded) -> None:  # type: ignore[no-untyped-def]
    scores, feedback, _ = graded
    assert scores["ana"][0] == scores["ana"][1] > 0
    assert scores["ana"][2] == "graded"
    text = (feedback / "ana.md").read_text()
    assert "ex01_keys (1).ipynb" in text
    assert "Note:" not in text and "student copy of labkit" not in text


def test_untouched_gets_zero_even_with_a_check_cell_that_claims_full_marks(graded) -> None:  # type: ignore[no-untyped-def]
    scores, feedback, _ = graded
    assert scores["bia"][0] == 0 and scores["bia"][2] == "not started"
    assert "not started yet" in (feedback / "bia.md").read_text()


def test_syntax_error_scores_what_the_other_cells_earned_with_the_reason(graded) -> None:  # type: ignore[no-untyped-def]
    scores, feedback, _ = graded
    score, possible, _ = scores["caio"]
    assert 0 < score < possible
    text = (feedback / "caio.md").read_text()
    assert "syntax error" in text
    assert "key_is_stable (severe) | 2/2 | passed" in text  # the cells before it still count
    assert "no such name" in text  # accept never got defined


def test_infinite_loops_time_out_with_the_reason_and_the_hung_check_named(graded) -> None:  # type: ignore[no-untyped-def]
    scores, feedback, _ = graded
    score, possible, status = scores["abel"]
    assert 0 < score < possible and status == "timed out"
    assert "### accept_new_then_repeat: timed out" in (feedback / "abel.md").read_text()
    score, possible, status = scores["beto"]
    assert score == possible and status == "timed out", (feedback / "beto.md").read_text()
    text = (feedback / "beto.md").read_text()
    assert f"did not finish within {CELL_TIMEOUT}s and was stopped" in text


def test_unreadable_notebook_scores_zero_with_the_reason_and_the_batch_goes_on(graded) -> None:  # type: ignore[no-untyped-def]
    scores, feedback, progress = graded
    assert scores["edu"][0] == 0 and scores["edu"][2] == "crashed"
    assert "not a readable notebook" in (feedback / "edu.md").read_text()
    assert scores["fil"][0] == 0 and scores["fil"][2] == "missing"
    assert "[7/7]" in progress and "grading 7 student(s)" in progress


def test_grade_help_shows_every_default() -> None:
    labkit = Path(sys.executable).parent / "labkit"
    shown = subprocess.run([str(labkit), "grade", "--help"], capture_output=True, text=True)
    for option in ("--jobs", "--cell-timeout", "--memory-mib", "--max-output-kib", "--out"):
        options = shown.stdout[shown.stdout.index("options:") :]
        described = options[options.index(f"  {option}") :].split("\n  -")[0]
        assert "(default:" in " ".join(described.split()), option


def test_the_run_prints_its_grading_seed_and_keeps_it_for_replay(graded) -> None:  # type: ignore[no-untyped-def]
    import json
    import re

    _, feedback, stdout = graded
    found = re.search(
        r"grading seed (\d+): .*runs with TZ=(\S+); replay this run with --seed (\d+)", stdout
    )
    assert found and found.group(1) == found.group(3), stdout
    kept = json.loads((feedback.parent / "run.json").read_text())
    assert kept == {"seed": int(found.group(1)), "timezone": found.group(2)}
    assert found.group(2) in TIME_ZONES
