"""The grader's student process loads the grading engine only: no store, worker or world.

The trust boundary (``labkit.grading.isolation``) runs a student's cells and answers
the channel. It must not drag the lab into every student process: the store, the
worker, the world and the engines are what a student's code may import, never what the
boundary needs. Both tests read ``sys.modules`` in a real process: a fresh interpreter
importing the student side, and the confined student process itself, asked over the
channel what its cells found loaded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from gradingkit import confined_student, in_a_check

from labkit.grading.isolation.confine import Confinement
from labkit.grading.isolation.limits import Limits

#: What the student side must not load: the lab itself, as opposed to the grading engine.
LAB = ("labkit.store", "labkit.worker", "labkit.world", "labkit.backends", "labkit.explore")


def _lab_modules(names: list[str]) -> list[str]:
    return sorted(n for n in names if n.startswith(LAB))


def test_importing_labkit_loads_nothing_else() -> None:
    code = "import sys, json, labkit; print(json.dumps(sorted(sys.modules)))"
    loaded = json.loads(subprocess.check_output([sys.executable, "-I", "-c", code], text=True))
    assert [n for n in loaded if n.startswith("labkit")] == ["labkit"]


def test_the_student_side_imports_no_store_worker_or_world() -> None:
    code = (
        "import sys, json; import labkit.grading.isolation.student_side; "
        "print(json.dumps(sorted(sys.modules)))"
    )
    loaded = json.loads(subprocess.check_output([sys.executable, "-I", "-c", code], text=True))
    assert "labkit.grading.isolation.student_side" in loaded  # the probe imported it
    assert _lab_modules(loaded) == []


def test_a_confined_student_process_has_none_of_them_loaded(tmp_path: Path) -> None:
    cells = [(0, "import sys\nLOADED = sorted(sys.modules)\nPID = __import__('os').getpid()\n")]
    with confined_student(tmp_path, Confinement.detect(Limits(cpu_seconds=60)), cells) as student:
        found = in_a_check(student, lambda ns: (ns.LOADED, ns.PID))
    loaded, pid = found  # type: ignore[misc]
    assert pid != os.getpid()  # read from the student's own process
    assert "labkit.grading.isolation.student_side" in loaded
    assert _lab_modules(list(loaded)) == []
