"""A thread a cell leaves running does not run during the checks.

The checks of exercise 9 count effects in a Redis the student's code also reaches; a
thread started in a cell and still running beside a check could write the effects the
check counts (or a rival's). Under ``labkit grade`` the cells' process goes on as a
single-threaded copy of itself (``student_side._shed_threads``), so every thread the
cells started ends before the first check. These tests run a real confined student.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from gradingkit import confined_student, in_a_check

from labkit.clock import SystemClock
from labkit.grading.checks import Namespace
from labkit.grading.isolation.confine import Confinement
from labkit.grading.isolation.grader_side import StudentProcess

CONFINED = Confinement.detect()
pytestmark = pytest.mark.skipif(
    not CONFINED.isolated, reason="needs root (own uid per student) or bubblewrap"
)

#: Two threads (one from ``threading``, one from ``_thread``) that tick into files forever.
TICKING = '''
import _thread, os, threading, time

def tick(name):
    while True:
        with open(name, "a") as fh:
            fh.write(".")
        time.sleep(0.01)

threading.Thread(target=tick, args=("tick-a",), daemon=True).start()
_thread.start_new_thread(tick, ("tick-b",))
time.sleep(0.3)

def answer():
    return 42
'''


@pytest.fixture
def student(tmp_path: Path) -> Iterator[StudentProcess]:
    with confined_student(tmp_path, CONFINED, [(0, TICKING)]) as proc:
        yield proc


def _sizes(work: Path) -> tuple[int, int]:
    return tuple(  # type: ignore[return-value]
        (work / name).stat().st_size if (work / name).exists() else 0
        for name in ("tick-a", "tick-b")
    )


def test_threads_the_cells_started_are_gone_before_the_first_check(
    student: StudentProcess,
) -> None:
    work = student.workdir
    before = _sizes(work)
    assert all(size > 5 for size in before), f"the threads never ran: {before}"

    def body(ns: Namespace) -> tuple[tuple[int, int], tuple[int, int], int]:
        first = _sizes(work)
        SystemClock().sleep(0.5)  # fifty ticks, were a thread still alive
        return first, _sizes(work), ns.answer()

    first, later, answer = in_a_check(student, body)  # type: ignore[misc]
    assert first == later, f"a cell's thread kept writing during the check: {first} -> {later}"
    assert answer == 42  # the definitions the cells made are all still there


def test_the_next_check_sees_no_thread_either(student: StudentProcess) -> None:
    in_a_check(student, lambda ns: ns.answer())
    first = _sizes(student.workdir)
    SystemClock().sleep(0.5)
    in_a_check(student, lambda ns: ns.answer())
    assert _sizes(student.workdir) == first
