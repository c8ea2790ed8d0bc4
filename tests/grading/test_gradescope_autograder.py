"""``labkit autograder --gradescope``: the zip, unpacked and run as Gradescope runs it.

The zip is built for ex01 (the quickest exercise) and unpacked into a folder laid out like
Gradescope's ``/autograder``: ``source/`` (the zip's contents), ``submission/`` (what the
student uploaded) and ``results/``. ``run_autograder`` runs there with the labkit of this
virtual environment (``LABKIT_COMMAND``; setup.sh's apt part is Gradescope's to run), on
the reference solution and then on a submission without a notebook, and each
``results.json`` is checked against Gradescope's documented format. The student's code
runs in the real sandbox, so this takes seconds per submission.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from gradingkit import (
    HIDDEN,
    SOLUTIONS,
    notebook_for,
    processes_under,
    run_in_group,
    short_scratch,
)
from test_export import assert_gradescope_results

from labkit.grading import catalog

pytestmark = pytest.mark.slow

LABKIT = Path(sys.executable).parent / "labkit"


@pytest.fixture(scope="module")
def autograder(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """The zip for ex01, unpacked as Gradescope does: ``ROOT/source``, ``ROOT/run_autograder``."""
    tmp = tmp_path_factory.mktemp("gradescope")
    built = run_in_group([str(LABKIT), "autograder", "--gradescope", str(tmp / "ag.zip"),
                  "--exercise", "ex01"], tmp, dict(os.environ))
    assert built.returncode == 0, built.stderr
    root = tmp / "autograder"
    with zipfile.ZipFile(tmp / "ag.zip") as zf:
        names = zf.namelist()
        zf.extractall(root / "source")
        modes = {i.filename: i.external_attr >> 16 for i in zf.infolist()}
    assert modes["run_autograder"] & 0o111 and modes["setup.sh"] & 0o111
    shutil.copyfile(root / "source" / "run_autograder", root / "run_autograder")
    return root, names


def test_the_zip_holds_the_scripts_the_wheel_and_only_the_hidden_checks(
    autograder: tuple[Path, list[str]],
) -> None:
    root, names = autograder
    assert {"setup.sh", "run_autograder", "solutions/hidden/ex01.py"} <= set(names)
    assert [n for n in names if n.endswith(".whl")] == ["labkit-0.1.0-py3-none-any.whl"]
    assert not [n for n in names if n.endswith(".ipynb")]  # never a solution notebook
    shipped = [n for n in names if n.startswith("solutions/") and not n.endswith("/")]
    assert shipped == ["solutions/hidden/ex01.py"]  # the graded exercise's only
    hidden = root / "source" / shipped[0]
    assert hidden.read_bytes() == (HIDDEN / "ex01.py").read_bytes()
    setup = (root / "source" / "setup.sh").read_text()
    assert "apt-get install" in setup and "bubblewrap" in setup and "labkit-*.whl" in setup
    with zipfile.ZipFile(root / "source" / "labkit-0.1.0-py3-none-any.whl") as wheel:
        packaged = wheel.namelist()
    assert "labkit/grading/exercises/ex01/checks.py" in packaged
    assert not [n for n in packaged if "hidden" in n.split("/")]


def _submit(root: Path, files: list[Path]) -> dict[str, Any]:
    """Put ``files`` in ``submission/`` and run ``run_autograder``: results.json."""
    for folder in ("submission", "results"):
        shutil.rmtree(root / folder, ignore_errors=True)
        (root / folder).mkdir()
    for path in files:
        shutil.copyfile(path, root / "submission" / path.name)
    with short_scratch() as scratch:
        env = {**os.environ, "LABKIT_AUTOGRADER_ROOT": str(root), "LABKIT_COMMAND": str(LABKIT),
               "TMPDIR": str(scratch)}
        done = run_in_group(["bash", str(root / "run_autograder")], root, env)
        assert done.returncode == 0, done.stdout + done.stderr
        assert not processes_under(scratch), "a process of the grading outlived run_autograder"
    results: dict[str, Any] = json.loads((root / "results" / "results.json").read_text())
    assert_gradescope_results(results)
    return results


def test_a_reference_solution_gets_full_marks_with_one_test_per_check(
    autograder: tuple[Path, list[str]],
) -> None:
    root, _ = autograder
    results = _submit(root, [notebook_for(SOLUTIONS, "ex01")])
    checks = catalog.all_checks("ex01", HIDDEN)
    tests = results["tests"]
    assert [t["max_score"] for t in tests] == [c.points for c in checks]
    assert results["score"] == sum(c.points for c in checks)
    assert all(t["status"] == "passed" and t["score"] == t["max_score"] for t in tests)
    visibility = {t["name"]: t["visibility"] for t in tests}
    for check in checks:
        name = next(n for n in visibility if n.startswith(f"ex01: {check.name}"))
        assert visibility[name] == ("after_published" if check.hidden else "visible")
    assert any(c.hidden for c in checks), "ex01 has hidden checks: the zip must ship them"
    assert isinstance(results["execution_time"], int)
    assert results["output"].startswith("ex01 stable keys and payload fingerprints: graded")


def test_a_submission_without_the_notebook_scores_zero_and_says_why(
    autograder: tuple[Path, list[str]],
) -> None:
    root, _ = autograder
    notes = root.parent / "notes.txt"
    notes.write_text("I ran out of time\n")
    results = _submit(root, [notes])
    assert results["score"] == 0
    assert all(t["score"] == 0 and t["status"] == "failed" for t in results["tests"])
    assert "ex01 stable keys and payload fingerprints: missing" in results["output"]
    assert "expected a file named ex01_*.ipynb" in results["output"]
