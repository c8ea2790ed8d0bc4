"""The Namespace contract every check is written against: workdir, spawn, %%writefile."""

import sys

from labkit.grading.checks import Check, Namespace, run_check
from labkit.grading.isolation.student_side import write_file_cell


def test_spawn_killed_after_check(tmp_path):
    seen = {}

    def run(ns):
        p = ns.spawn([sys.executable, "-c", "import time; time.sleep(60)"])
        seen["p"] = p
        assert ns.workdir == tmp_path

    out = run_check(Check("c", 1, "h", run), Namespace({}, tmp_path))
    assert out.status == "passed"
    assert seen["p"].poll() is not None


def test_writefile(tmp_path):
    assert write_file_cell("%%writefile tasks.py\nX = 1\n", tmp_path) is None
    assert (tmp_path / "tasks.py").read_text() == "X = 1\n"
    assert "outside" in write_file_cell("%%writefile ../evil.py\nX=1\n", tmp_path)
    assert not (tmp_path.parent / "evil.py").exists()
