"""The student process runs the student's code; the checks run in the grader, on data."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from gradingkit import EXERCISES, SOLUTIONS, notebook_for

from labkit.grading import catalog
from labkit.grading.grade import Settings, grade_notebook
from labkit.grading.isolation.student_side import student_code


def test_check_calls_and_magics_are_removed_and_definitions_kept() -> None:
    source = (
        "from labkit.grading import check\n"
        "import labkit.grading\n"
        "%timeit 1\n"
        "!ls\n"
        "def f():\n"
        "    check('ex01')\n"
        "    return 1\n"
        'check("ex01")  # run it\n'
        "from labkit.grading.exercises.labdb import add_job\n"
    )
    assert student_code(source) == (
        "\n\n\n\ndef f():\n    pass\n    return 1\n\n"
        "from labkit.grading.exercises.labdb import add_job"
    )
    assert student_code("%%bash\necho hi") == ""


def _notebook(tmp_path: Path, source: Path, extra: str) -> Path:
    nb = nbformat.read(source, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(extra))
    path = tmp_path / source.name
    nbformat.write(nb, path)
    return path


def test_printed_fake_results_and_a_fake_check_cannot_raise_a_score(tmp_path: Path) -> None:
    forged = (
        'print(\'{"outcomes": [], "notes": []}\')\n'
        "import labkit.grading.checks as core\n"
        "core.run_checks = lambda *a, **k: []\n"
        "def check(*args):\n    print('score: 14/14')\n"
    )
    path = _notebook(tmp_path, notebook_for(EXERCISES, "ex01"), forged)
    graded = grade_notebook("mallory", "ex01", path, Settings(SOLUTIONS))
    assert graded.score == 0 and graded.possible > 0
    assert {o.status for o in graded.outcomes} == {"not started yet"}
    assert [o.check for o in graded.outcomes] == [
        c.name for c in catalog.all_checks("ex01", SOLUTIONS / "hidden")
    ]


def test_hidden_checks_run_in_grading_from_the_instructors_folder(tmp_path: Path) -> None:
    path = notebook_for(SOLUTIONS, "ex01")
    graded = grade_notebook("ana", "ex01", path, Settings(SOLUTIONS))
    hidden = [o for o in graded.outcomes if o.hidden]
    assert hidden and all(o.status == "passed" for o in hidden)
    alone = grade_notebook("ana", "ex01", path, Settings(tmp_path))
    assert not any(o.hidden for o in alone.outcomes)  # no hidden/ folder there


def test_a_missing_notebook_scores_zero_with_the_expected_name() -> None:
    graded = grade_notebook("ana", "ex03", None, Settings(SOLUTIONS))
    assert graded.score == 0 and graded.possible > 0
    assert graded.notes == ["no notebook for ex03: expected a file named ex03_*.ipynb"]


def test_hidden_checks_come_from_the_source_never_from_a_stale_pycache(tmp_path: Path) -> None:
    import os
    import py_compile

    path = tmp_path / "ex01.py"
    template = (
        "from labkit.grading.checks import Checks\n"
        "CHECKS = Checks('ex01', hidden=True)\n"
        "@CHECKS.add(1, 'hint')\n"
        "def {name}(ns):\n"
        "    pass\n"
    )
    path.write_text(template.format(name="old_one"))
    stamp = os.stat(path)
    py_compile.compile(str(path))  # a __pycache__ entry valid for this size and mtime
    path.write_text(template.format(name="new_one"))  # same size
    os.utime(path, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))  # same second
    assert (tmp_path / "__pycache__").is_dir()
    assert [c.name for c in catalog.hidden("ex01", tmp_path)] == ["new_one"]


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="uids are root's")
def test_two_graders_with_other_temporary_folders_claim_other_uids(tmp_path: Path) -> None:
    # Each grader's TMPDIR is its own (tests, CI): the uid claims must still be shared,
    # or two graders run student code as one uid and each one's sweep kills the other's.
    code = (
        "import sys, time; from labkit.grading.isolation.confine import student_uid; "
        "print(student_uid(), flush=True); time.sleep(5)"
    )
    procs = []
    for name in ("a", "b"):
        folder = tmp_path / name
        folder.mkdir()
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", code],
                stdout=subprocess.PIPE,
                text=True,
                env={**os.environ, "TMPDIR": str(folder)},
            )
        )
    try:
        uids = [int(p.stdout.readline()) for p in procs]  # type: ignore[union-attr]
    finally:
        for p in procs:
            p.kill()
            p.wait()
    assert uids[0] != uids[1]


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="uids are root's")
def test_claiming_a_uid_kills_what_a_dead_grader_left_running_as_it() -> None:
    # A SIGKILLed grader's student processes may outlive it as its uid; the next grader
    # to claim that uid would have them count against its per-uid process limit.
    claim = (
        "from labkit.grading.isolation.confine import student_uid; print(student_uid())"
    )
    for _attempt in range(5):  # another grader of the suite may take the uid meanwhile
        free = int(subprocess.run([sys.executable, "-c", claim], capture_output=True,
                                  text=True, check=True).stdout)
        orphan = subprocess.Popen(["sleep", "60"], user=free, group=free,
                                  start_new_session=True)
        try:
            again = int(subprocess.run([sys.executable, "-c", claim], capture_output=True,
                                       text=True, check=True).stdout)
            if again != free:
                continue
            assert orphan.wait(10) == -9, "the orphan of a dead grader outlived the claim"
            return
        finally:
            if orphan.poll() is None:
                orphan.kill()
            orphan.wait()
    pytest.fail("five claims in a row took another uid than the free one found")
