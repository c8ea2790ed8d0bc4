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


_PROBE = """
def loaded():
    import sys
    return sorted(sys.modules)

def scrubber_ready():
    import labkit.redact
    return labkit.redact._vendor_patterns.cache_info().currsize
"""


def test_a_graded_process_loads_its_exercises_harness_once_and_nothing_else_it_is_sent(
    tmp_path: Path,
) -> None:
    """Each check forks the process its cells ran in, and the fork ends with the check: a
    harness imported there would be imported again by every check. So the grader names
    the exercise's harness; the student side imports it (and runs its ``warm_up``) before
    the first fork, and refuses any name a harness request could not name."""
    harness = "labkit.grading.exercises.ex06.harness"
    sent = (harness, "antigravity", "labkit.grading.exercises.ex99.harness", "this is not a name")
    confinement = Confinement.detect(Limits(cpu_seconds=60))
    (tmp_path / "a").mkdir()
    with confined_student(tmp_path / "a", confinement, [(0, _PROBE)], preload=sent) as student:
        loaded, ready = in_a_check(student, lambda ns: (ns.loaded(), ns.scrubber_ready()))  # type: ignore[misc]
    assert harness in loaded
    assert "antigravity" not in loaded, "a module outside the harnesses was imported"
    assert ready == 1, "the harness's warm_up never ran before the checks"
    (tmp_path / "b").mkdir()
    with confined_student(tmp_path / "b", confinement, [(0, _PROBE)]) as student:
        loaded, ready = in_a_check(student, lambda ns: (ns.loaded(), ns.scrubber_ready()))  # type: ignore[misc]
    assert harness not in loaded and ready == 0, "nothing was sent, yet it was loaded"
