"""What a check spawns for a student dies when the check kills it, whatever it did to hide.

Under ``labkit grade`` as root, a spawned process runs as the student's uid inside
bubblewrap's own session, so signalling its process group reaches only the wrapper. Each
notebook's processes therefore live in a control group of their own
(``labkit.grading.isolation.cgroups``): ``ns.kill(proc)`` kills the spawned tree's
group, a grandchild that left with ``setsid`` included, and the notebook's limits hold
for all its processes together. These tests run a real confined student process and
real spawned processes; they need root and control groups (CI has both).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from gradingkit import (
    HIDING,
    alive,
    confined_student,
    hidden_grandchild,
    in_a_check,
    wait_for,
)

from labkit.clock import SystemClock
from labkit.grading.checks import Check, Namespace, run_check
from labkit.grading.isolation.confine import Confinement
from labkit.grading.isolation.grader_side import StudentGone, StudentProcess
from labkit.grading.isolation.limits import Limits
from labkit.grading.isolation.remote import RemoteNamespace

CONFINED = Confinement.detect(Limits(cpu_seconds=60, memory_total=384 << 20))
pytestmark = pytest.mark.skipif(
    CONFINED.groups is None, reason="needs root and control groups (cgroup v1 or v2)"
)

#: Fills 200 MiB (every page written), then waits: three of them pass 384 MiB together.
HOG = "import time\nb = b'x' * (200 << 20)\ntime.sleep(30)\n"


@pytest.fixture
def student(tmp_path: Path) -> Iterator[StudentProcess]:
    with confined_student(tmp_path, CONFINED) as proc:
        yield proc


def test_a_killed_consumer_does_not_finish_its_job_through_a_hidden_grandchild(
    student: StudentProcess,
) -> None:
    work = student.workdir
    (work / "hiding.py").write_text(HIDING)

    def body(ns: Namespace) -> int:
        proc = ns.spawn([sys.executable, "hiding.py"])
        assert wait_for(work / "started", 30), "the grandchild never started"
        grandchild = hidden_grandchild(work)
        assert alive(grandchild)  # the job is running in its own session
        ns.kill(proc)
        return grandchild

    grandchild = in_a_check(student, body)
    assert isinstance(grandchild, int)
    assert not alive(grandchild)
    assert not wait_for(work / "finished", 6.0), "the killed consumer's job ran to its end"


def test_processes_a_check_started_die_with_its_end_even_unkilled(
    student: StudentProcess,
) -> None:
    work = student.workdir
    (work / "hiding.py").write_text(HIDING)

    def body(ns: Namespace) -> int:
        ns.spawn([sys.executable, "hiding.py"])
        assert wait_for(work / "started", 30), "the grandchild never started"
        return hidden_grandchild(work)

    grandchild = in_a_check(student, body)  # the check ends without killing anything
    assert isinstance(grandchild, int)
    assert not alive(grandchild)
    assert not wait_for(work / "finished", 6.0)


def test_the_notebooks_memory_is_counted_across_its_processes(
    student: StudentProcess,
) -> None:
    work = student.workdir
    (work / "hog.py").write_text(HOG)

    def body(ns: Namespace) -> list[int | None]:
        procs = [ns.spawn([sys.executable, "hog.py"]) for _ in range(3)]
        clock = SystemClock()
        deadline = clock.now() + 20  # each one alone is well under every per-process limit
        while clock.now() < deadline and all(p.poll() is None for p in procs):
            clock.sleep(0.1)
        return [p.poll() for p in procs]

    codes = in_a_check(student, body)
    assert isinstance(codes, list)
    assert -9 in codes, codes  # the group's memory limit killed one of them
    student.stop()
    assert any("of memory together" in note for note in student.limits_hit), student.limits_hit


def test_a_spawned_process_printing_hundreds_of_mib_costs_the_grader_a_capped_buffer(
    student: StudentProcess,
) -> None:
    import resource

    work = student.workdir
    (work / "loud.py").write_text(
        "import sys\nchunk = 'y' * (1 << 20)\nfor _ in range(300):\n    sys.stdout.write(chunk)\n"
        "sys.stderr.write('done')\n"
    )
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux

    def body(ns: Namespace) -> tuple[int, str]:
        import subprocess

        proc = ns.spawn(
            [sys.executable, "loud.py"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        out, err = proc.communicate(timeout=60)
        return len(out), err

    kept, err = in_a_check(student, body)  # type: ignore[misc]
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert err == "done"  # it ran to its end: all 300 MiB went through the pipe
    assert kept == CONFINED.limits.output  # the first 4 MiB kept, the rest dropped
    assert grown_mib < 100, f"the grader grew by {grown_mib:.0f} MiB reading it"


def test_a_spawned_process_sees_its_own_tree_not_the_hosts_processes(
    student: StudentProcess,
) -> None:
    import subprocess

    count = (
        "import os; print(len([p for p in os.listdir('/proc') if p.isdigit()]), "
        "os.readlink('/proc/self/ns/pid'))"
    )

    def body(ns: Namespace) -> str:
        proc = ns.spawn([sys.executable, "-c", count], stdout=subprocess.PIPE)
        out, _ = proc.communicate(timeout=30)
        return out.decode()

    seen, namespace = str(in_a_check(student, body)).split()
    host = len([p for p in os.listdir("/proc") if p.isdigit()])
    assert host > 20  # the machine runs many: the grader, the services, this test
    assert int(seen) <= 3, f"a spawned process saw {seen} processes"  # bwrap's init and itself
    assert namespace != os.readlink("/proc/self/ns/pid")


def test_cpu_is_counted_for_the_notebook_as_a_whole(tmp_path: Path) -> None:
    """Two busy processes, each far under the per-process CPU limit, pass the notebook's."""
    import dataclasses

    limits = dataclasses.replace(CONFINED.limits, cpu_total=3)
    confined = dataclasses.replace(CONFINED, limits=limits)
    assert confined.groups is not None
    probe = confined.groups.group("probe-cpu")
    counted = probe.cpu_seconds() is not None
    probe.remove()
    if not counted:
        pytest.skip("this machine's control groups do not count CPU time")
    busy = "while True:\n    pass\n"
    with confined_student(tmp_path, confined) as student:
        (student.workdir / "busy.py").write_text(busy)

        def body(ns: Namespace) -> list[int | None]:
            procs = [ns.spawn([sys.executable, "busy.py"]) for _ in range(2)]
            clock = SystemClock()
            deadline = clock.now() + 30  # 3 CPU seconds on two cores: about 1.5 s
            while clock.now() < deadline and any(p.poll() is None for p in procs):
                clock.sleep(0.1)
            return [p.poll() for p in procs]

        box: dict[str, object] = {}
        student.begin_check()
        run_check(
            Check("busy", 1, "", lambda ns: box.update(codes=body(ns)), timeout=60),
            RemoteNamespace(student),
        )
        # The whole notebook's group was killed, the cells' process with it.
        with pytest.raises(StudentGone):
            student.end_check()
        assert box["codes"] == [-9, -9], box  # killed by the notebook's CPU budget...
        assert limits.hit("cpu_total") in student.limits_hit  # ...and named for it
        assert limits.cpu_seconds > 3  # no single process reached its own limit
