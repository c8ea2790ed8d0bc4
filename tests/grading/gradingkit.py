"""Helpers for the grading tests: build a namespace from a notebook, run every check.

conftest.py has pytest rewrite this module's asserts, so a failing zoo entry shows its
values as a failing assert in a test file would.
"""

from __future__ import annotations

import csv
import functools
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import nbformat

from labkit.grading import catalog
from labkit.grading.checks import (
    CELLS,
    Check,
    CheckStatus,
    Namespace,
    Outcome,
    run_check,
    run_checks,
)
from labkit.grading.grade import scratch_root
from labkit.grading.isolation.confine import Confinement
from labkit.grading.isolation.grader_side import StudentProcess
from labkit.grading.isolation.remote import RemoteNamespace
from labkit.grading.isolation.student_side import run_cells
from labkit.grading.scoring import score
from labkit.integrations.celery.proctree import argv_of

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = ROOT / "solutions"
EXERCISES = ROOT / "exercises"
HIDDEN = SOLUTIONS / "hidden"

# tests/conftest.py's require_service, for module-scoped fixtures (`import conftest`
# would find tests/grading/conftest.py).
_spec = importlib.util.spec_from_file_location(
    "labkit_tests_root_conftest", Path(__file__).parents[1] / "conftest.py"
)
assert _spec is not None and _spec.loader is not None
_root_conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_root_conftest)
require_service = _root_conftest.require_service
SEED: int = _root_conftest.SEED


@contextmanager
def short_scratch() -> Iterator[Path]:
    """A folder for a grader's ``TMPDIR`` that the grader really uses.

    Under pytest's long temporary paths the grader would put its scratch folders in
    ``/tmp`` instead (``scratch_root``: a student's Redis socket must fit in a unix socket
    address), and a test looking there for what a run left behind would find nothing,
    whatever was left.
    """
    folder = Path(tempfile.mkdtemp(prefix="lks-", dir="/tmp"))
    try:
        assert scratch_root(folder) == folder, f"{folder} is too long to be the grader's scratch"
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def grade_class(
    root: Path,
    subs: Path,
    exercises: list[str],
    scratch: Path,
    options: tuple[str, ...] = ("--jobs", "2"),
) -> tuple[list[dict[str, str]], Path, Path]:
    """``labkit grade`` on ``subs`` as an instructor runs it: grades.csv rows, feedback, scratch.

    The grader's scratch folders (the students' work folders, where their processes
    run) go under ``scratch`` (from ``short_scratch``), so a test can look for anything of
    the run left alive. ``options`` are more of ``labkit grade``'s.
    """
    out = root / "out"
    labkit = Path(sys.executable).parent / "labkit"
    argv = [str(labkit), "grade", str(subs), "--out", str(out), "--run-id", "r", *options]
    argv += ["--seed", str(SEED)]  # the test session's seed: a failing run replays
    for exercise in exercises:
        argv += ["--exercise", exercise]
    done = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=1200,  # a bound for a loaded machine, not an expectation
        cwd=root,
        env={**os.environ, "TMPDIR": str(scratch)},
        start_new_session=True,
    )
    assert done.returncode == 0, done.stderr
    with (out / "r" / "grades.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    return rows, out / "r" / "feedback", scratch


@contextmanager
def confined_student(
    tmp_path: Path,
    confinement: Confinement,
    cells: list[tuple[int, str]] | None = None,
    preload: tuple[str, ...] = (),
) -> Iterator[StudentProcess]:
    """A real confined student process on ``cells`` (one harmless cell by default)."""
    os.chmod(tmp_path, 0o755)
    work = tmp_path / "work"
    work.mkdir()
    confinement.hand_over(work)
    proc = StudentProcess(
        confinement, work, cells or [(0, "x = 1\n")], cell_timeout=20, preload=preload
    )
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


def in_a_check(student: StudentProcess, body: Callable[[Namespace], object]) -> object:
    """Run ``body`` as one check over the channel (it must pass); what it returned."""
    box: dict[str, object] = {}

    def run(ns: Namespace) -> None:
        box["value"] = body(ns)

    student.begin_check()
    outcome = run_check(Check("c", 1, "hint", run, timeout=30), RemoteNamespace(student))
    student.end_check()
    assert outcome.status == CheckStatus.PASSED, outcome
    return box["value"]


#: A spawned program that hands its job to a grandchild in a session of its own, then
#: waits: the grandchild writes ``started`` (its pid and pid namespace), and ``finished``
#: if it lives 5 s. A kill must take the grandchild too.
HIDING = """
import os, sys, time
if os.fork() == 0:
    os.setsid()
    with open("started.tmp", "w") as fh:  # renamed whole: the test never reads half a file
        fh.write(f"{os.getpid()} {os.readlink('/proc/self/ns/pid')}")
    os.rename("started.tmp", "started")
    time.sleep(5.0)
    open("finished", "w").write("the job ran to its end")
    sys.exit(0)
time.sleep(60)
"""


def hidden_grandchild(work: Path) -> int:
    """``HIDING``'s grandchild's pid as the test sees it (it ran in a pid namespace of
    its own, which is asserted)."""
    from labkit.integrations.celery.proctree import host_pids

    pid, ns = (work / "started").read_text().split()
    assert ns != os.readlink("/proc/self/ns/pid"), "the spawned process shares our pid namespace"
    return host_pids({(ns, int(pid))})[(ns, int(pid))]


def wait_for(path: Path, seconds: float) -> bool:
    """True once ``path`` exists; False if it still does not after ``seconds``."""
    from labkit.clock import SystemClock

    clock = SystemClock()
    deadline = clock.now() + seconds
    while not path.exists() and clock.now() < deadline:
        clock.sleep(0.02)
    return path.exists()


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie is not alive)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def processes_under(root: Path) -> list[tuple[int, str]]:
    """Live processes whose working directory or command line is inside ``root``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
        except OSError:
            cwd = ""
        argv = " ".join(argv_of(int(entry.name)))
        if cwd.startswith(str(root)) or str(root) in argv:
            found.append((int(entry.name), argv[:200]))
    return found


def run_in_group(
    argv: list[str], cwd: Path, env: dict[str, str], timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` in its own process group; the whole group is killed however it ends.

    ``timeout`` is a bound for a loaded machine, not an expectation.
    """
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def mounts_under(root: Path) -> list[str]:
    """Mount points inside ``root`` (a grader's tmpfs it never unmounted)."""
    with open("/proc/mounts", encoding="utf-8") as fh:
        points = [line.split()[1] for line in fh]
    return [p for p in points if p.startswith(str(root) + "/")]


def notebook_for(folder: Path, exercise: str) -> Path:
    [path] = sorted(folder.glob(f"{exercise}_*.ipynb"))
    return path


def namespace_of(path: Path, cell_timeout: float = 10.0) -> tuple[dict[str, Any], list[str]]:
    """Run a notebook's code cells the way the grader does (check cells removed)."""
    nb = nbformat.read(path, as_version=4)
    cells = [(i, c.source) for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    return run_cells(cells, cell_timeout)


def grade_values(exercise: str, values: dict[str, Any]) -> dict[str, Outcome]:
    """Public and hidden checks on ``values``, by check name."""
    outcomes = run_checks(catalog.all_checks(exercise, HIDDEN), values)
    return {o.check: o for o in outcomes}


def with_override(exercise: str, source: str) -> dict[str, Any]:
    """The reference solution's namespace with ``source`` run on top (a wrong variant)."""
    values, notes = namespace_of(notebook_for(SOLUTIONS, exercise))
    assert not notes, notes
    exec(compile(textwrap.dedent(source), f"<zoo {exercise}>", "exec"), values)
    # The variant is one more cell, as it would be in a graded notebook: a harness that
    # builds the namespace again in a new process (``replay``) must build this one.
    values[CELLS] = (*values[CELLS], (len(values[CELLS]) + 1000, textwrap.dedent(source)))
    return values


#: A check the reference passes in less time than this is quick enough to be the witness;
#: the search for one stops once it has taken ``WITNESS_SEARCH_S``.
QUICK_S, WITNESS_SEARCH_S = 0.02, 0.5


@functools.cache
def quick_witness(exercise: str) -> str:
    """A check the reference passes, as quick as a short search finds.

    Measured once per process and exercise: the checks in catalog order until one passes
    within ``QUICK_S``, or the quickest that passed once the search took
    ``WITNESS_SEARCH_S`` (the first check, in the exercises whose checks start servers).
    ``grade_named_first`` tries it first as the check that still passes: the first in
    catalog order took 0.12-0.15 s of each of ex01's and ex12's 400 zoo tests. A loaded
    machine may pick another check; any passing one serves.
    """
    values, notes = namespace_of(notebook_for(SOLUTIONS, exercise))
    assert not notes, notes
    ns = Namespace(values)
    passed: dict[str, float] = {}
    began = time.perf_counter()
    for named in catalog.all_checks(exercise, HIDDEN):
        start = time.perf_counter()
        if run_check(named, ns).status == CheckStatus.PASSED:
            passed[named.name] = time.perf_counter() - start
            if passed[named.name] < QUICK_S:
                return named.name
        if passed and time.perf_counter() - began > WITNESS_SEARCH_S:
            break
    assert passed, f"the reference passes no check of {exercise}"
    return min(passed, key=passed.__getitem__)


def grade_named_first(exercise: str, values: dict[str, Any], check: str) -> dict[str, Outcome]:
    """``check``, then the exercise's other checks until one passes: ``quick_witness``
    first, then the rest in catalog order.

    Enough to judge a zoo entry (the named check fails, some other still passes) at a
    fraction of the cost of every check: the sweeps and races of the checks not named
    ran for minutes of CI per exercise. ``best_score`` bounds what the rest could add.
    """
    checks = {c.name: c for c in catalog.all_checks(exercise, HIDDEN)}
    assert check in checks, f"no check called {check}"
    ns = Namespace(values)  # as run_checks makes it: the checks' own scratch folders
    outcomes = {check: run_check(checks[check], ns)}
    witness = quick_witness(exercise)
    for name in dict.fromkeys([witness, *checks]):
        if name != check:
            outcomes[name] = run_check(checks[name], ns)
            if outcomes[name].status == CheckStatus.PASSED:
                break
    return outcomes


def best_score(exercise: str, outcomes: dict[str, Outcome]) -> tuple[int, int]:
    """The most the grader could report, severity cap included, if every check not in
    ``outcomes`` passed: a bound on the real score, so ``<=`` against it is proof."""
    rest = [
        Outcome(c.name, c.points, c.points, CheckStatus.PASSED, hidden=c.hidden, severe=c.severe)
        for c in catalog.all_checks(exercise, HIDDEN)
        if c.name not in outcomes
    ]
    return score([*outcomes.values(), *rest])


def assert_caught_by_name(
    exercise: str,
    mistake: str,
    check: str,
    source: str,
    says: str | None = None,
    got: str | None = None,
) -> dict[str, Outcome]:
    """A zoo entry: the reference with ``source`` on top loses ``check``.

    ``check`` fails with nothing earned, an expectation (that says ``says``, when given),
    a "got" line (naming ``got``, when given) and a hint, and no traceback; some other
    check still passes, so the feedback points at the one mistake; a severe check's
    failure keeps the score at half at most. Returns the outcomes of the checks it ran
    (``grade_named_first``).
    """
    outcomes = grade_named_first(exercise, with_override(exercise, source), check)
    named = outcomes[check]
    assert named.status == "failed", f"{mistake}: {check} was {named.status}"
    assert named.earned == 0 and named.expected and named.got and named.hint
    assert "Traceback" not in named.got
    if says is not None:
        assert says in named.expected, f"{mistake}: {check} said {named.expected!r}"
    if got is not None:
        assert got in named.got, f"{mistake}: {check} got {named.got!r}"
    passed = [o.check for o in outcomes.values() if o.status == CheckStatus.PASSED]
    assert passed, f"{mistake}: every check failed, the feedback would not point at the mistake"
    earned, possible = best_score(exercise, outcomes)
    assert earned < possible, f"{mistake}: the score did not drop"
    if named.severe:  # the score the grader reports, severity cap included
        assert earned <= possible // 2, f"{mistake}: a severe mistake scored {earned}/{possible}"
    return outcomes


def assert_severe(exercise: str, mistake: str, check: str) -> None:
    """``mistake`` is one the exercise calls severe: the check that catches it is severe, so
    its failure (``assert_caught_by_name``) caps the score at half."""
    severe = {c.name for c in catalog.all_checks(exercise, HIDDEN) if c.severe}
    assert check in severe, f"{mistake}: {check} is not a severe check"
