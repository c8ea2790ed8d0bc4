"""Running a notebook's checks in the student's confined process: ``run_notebook``.

The cells run once in a confined ``StudentProcess``; then each check runs in a fresh
fork of it, through a data-only channel. An exercise whose checks mostly wait on real
processes declares lanes (``Checks.lanes``): the cells then run in that many copies of
the process at once, and each copy takes the next check once it is free, so their
waits overlap. ``grade.grade_notebook`` makes the folders and calls ``run_notebook``.
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass, field
from pathlib import Path

from labkit.grading import catalog
from labkit.grading.checks import DEFAULT_TIMEOUT, Check, CheckStatus, Outcome, run_check
from labkit.grading.gradebook import Graded, NotebookStatus
from labkit.grading.isolation.confine import Confinement
from labkit.grading.isolation.grader_side import StudentGone, StudentProcess
from labkit.grading.isolation.remote import RemoteNamespace
from labkit.grading.seeds import student_seed
from labkit.lang import _


@dataclass(frozen=True)
class Settings:
    """How to grade: where the hidden checks are, timeouts, and the confinement."""

    solutions: Path
    cell_timeout: float = 30.0
    #: None: each check's own timeout, the same the student's ``check()`` uses.
    check_timeout: float | None = None
    #: Multiplies each check's own timeout: 1 on a quiet machine; more on a loaded one,
    #: where every call to the student's process waits for a CPU twice.
    timeout_factor: float = 1.0
    confinement: Confinement = field(default_factory=Confinement)
    #: The seed generated inputs are drawn from (``seeds.use_grading_seed``); None:
    #: the fixed examples ``check()`` uses.
    seed: int | None = None


def check_timeout_for(settings: Settings, checks: list[Check]) -> float:
    """The cap on each check's own timeout: ``--check-timeout`` when given, else the largest
    of them, so a graded check gets exactly the time the student's ``check()`` gave it."""
    if settings.check_timeout is not None:
        return settings.check_timeout
    return max((c.timeout for c in checks), default=DEFAULT_TIMEOUT)


def not_graded(checks: list[Check]) -> list[Outcome]:
    return [c.outcome(CheckStatus.NOT_GRADED) for c in checks]


def _clean_notes(raw: object, limit: int = 30) -> list[str]:
    """Notes from the student's process are data from the untrusted side: strings, capped."""
    notes = [str(n)[:300] for n in raw if isinstance(n, str)] if isinstance(raw, list) else []
    return notes[:limit]


def run_notebook(
    result: Graded,
    checks: list[Check],
    cells: list[tuple[int, str]],
    workdirs: list[Path],
    settings: Settings,
) -> None:
    """Run the cells, then the checks: in one process, or in one per folder of
    ``workdirs`` at once (lanes, ``Checks.lanes``), each taking the next check once free.

    The first lane runs the cells first, alone: a notebook that cannot run to the end is
    judged on it, as with one lane. Each other lane runs them in a thread of its own,
    which lives until its process is stopped (bubblewrap's --die-with-parent watches the
    thread that started it), then takes checks too.
    """
    harness = catalog.harness_module(result.exercise)
    lanes = [
        StudentProcess(
            dataclasses.replace(settings.confinement, lane=n),
            workdir,
            cells,
            settings.cell_timeout,
            preload=(harness,),
        )
        for n, workdir in enumerate(workdirs)
    ]
    first = lanes[0]
    crashed = timed_out = False
    try:
        report, why, kind = _start(first)
        if report is None:
            result.outcomes = not_graded(checks)
            result.notes.append(
                _("the notebook's code could not run to the end: {why}").format(why=why)
            )
            timed_out, crashed = kind == "timeout", kind != "timeout"
        else:
            result.notes += _clean_notes(report.get("notes"))
            _note_errors(first, report)
            timed_out = any("did not finish within" in n for n in result.notes)
            todo = _Todo(checks)
            mine = _Lane(first, todo, settings)
            others = [_Lane(student, todo, settings) for student in lanes[1:]]
            for other in others:
                other.start()
            try:
                mine.take()
            finally:
                for other in others:
                    other.join()
            found: dict[int, Outcome] = {}
            for lane in (mine, *others):
                if lane.error is not None:
                    raise lane.error
                found.update(lane.found)
                timed_out = timed_out or lane.timed_out
                crashed = crashed or lane.crashed
            result.outcomes = [found[at] for at in range(len(checks))]
    finally:
        for student in lanes:
            student.stop()
    hit = [limit for student in lanes for limit in student.limits_hit]
    result.notes += list(dict.fromkeys(hit))
    if hit:
        result.status = NotebookStatus.LIMIT_HIT
    elif timed_out:
        result.status = NotebookStatus.TIMED_OUT
    elif crashed:
        result.status = NotebookStatus.CRASHED
    elif result.outcomes and all(o.status == CheckStatus.NOT_STARTED for o in result.outcomes):
        result.status = NotebookStatus.NOT_STARTED
        result.notes.append(_("not started yet: every function is still the stub"))


def _note_errors(student: StudentProcess, report: dict[str, object]) -> None:
    """Tell the grader's side what the cells raised (a limit they hit shows there)."""
    errors = report.get("errors")
    for error in errors if isinstance(errors, list) else []:
        if isinstance(error, dict):
            types = tuple(str(t) for t in error.get("types") or [])
            student.note_raised(types, str(error.get("message", "")))


class _Todo:
    """The checks not yet taken, in their order: each lane takes the next one once it is
    free, so a lane with long checks takes fewer. A check's outcome does not depend on its
    lane (a fresh fork, seeded by the check's name)."""

    def __init__(self, checks: list[Check]) -> None:
        self._left = list(enumerate(checks))
        self._lock = threading.Lock()

    def next(self) -> tuple[int, Check] | None:
        with self._lock:
            return self._left.pop(0) if self._left else None


class _Lane(threading.Thread):
    """One copy of the student's process taking checks until none is left: the first
    one in the grader's thread (``take``), each other one in a thread of its own that
    runs the cells first and stops the process before it ends (``start``)."""

    def __init__(self, student: StudentProcess, todo: _Todo, settings: Settings) -> None:
        super().__init__(name=f"lane-{student.confinement.lane}", daemon=True)
        self.student, self.todo, self.settings = student, todo, settings
        #: Each check's outcome, by its place in the notebook's list of checks.
        self.found: dict[int, Outcome] = {}
        self.timed_out = self.crashed = False
        self.error: BaseException | None = None

    def take(self) -> None:
        while (picked := self.todo.next()) is not None:
            at, check = picked
            outcome, gone = _one_check(self.student, check, self.settings)
            self.found[at] = outcome
            self.timed_out = self.timed_out or outcome.status == CheckStatus.TIMED_OUT
            self.crashed = self.crashed or gone

    def run(self) -> None:
        try:
            report, _why, kind = _start(self.student)
            if report is None:
                # The first lane ran the same cells to the end; this copy did not, and
                # takes no check: the lanes that started grade them all.
                self.timed_out, self.crashed = kind == "timeout", kind != "timeout"
                return
            _note_errors(self.student, report)
            self.take()
        except BaseException as exc:  # noqa: BLE001 - the grader's own error, raised by run_notebook
            self.error = exc
        finally:
            self.student.stop()


def _start(student: StudentProcess) -> tuple[dict[str, object] | None, str, str]:
    """Run the cells; once more with output discarded if the output limit stopped them."""
    why, kind = "", "crash"
    for _attempt in range(2):
        capped = bool(student.limits_hit)
        try:
            return student.start(), "", ""
        except StudentGone as exc:
            why, kind = str(exc.got), exc.kind
        student.stop()
        if capped or not student.output_capped:
            break
    return None, why, kind


def _one_check(student: StudentProcess, check: Check, settings: Settings) -> tuple[Outcome, bool]:
    """Run one check in a fresh fork of the student's process; (outcome, process lost)."""
    if not student.alive:
        report, why, _kind = _start(student)
        if report is None:
            return check.outcome(CheckStatus.NOT_GRADED, got=why), True
    ns = RemoteNamespace(student)
    try:
        student.begin_check(student_seed(check.name))
        if settings.timeout_factor != 1.0:
            check = dataclasses.replace(check, timeout=check.timeout * settings.timeout_factor)
        outcome = run_check(check, ns, check_timeout_for(settings, [check]))
        if outcome.status == CheckStatus.TIMED_OUT:
            student.stop()  # the hung call may still run: kill it, start again next check
            return outcome, False
        student.end_check()
        return outcome, False
    except StudentGone as gone:
        student.stop()
        return check.outcome(
            CheckStatus.FAILED,
            got=_("the student's process ended during the check ({why})").format(why=gone.got),
            hint=check.hint,
        ), True
