"""``labkit grade SUBMISSIONS``: grade a class with one command, no Docker, no cell metadata.

SUBMISSIONS holds one folder per student with their ``exNN_*.ipynb`` files. For each
notebook the grader

1. executes it top to bottom in a fresh kernel with a per-cell timeout (errors allowed,
   so one broken cell does not hide the rest), to report which cells fail or hang;
2. in another fresh process (``labkit.grading.sandbox``) runs the student's code cells,
   check cells removed, and then the public **and** hidden checks from the instructor's
   labkit and ``solutions/hidden/``; a ``labkit/`` folder in the submission is never on
   the path, so a modified copy cannot change the result.

It writes a CSV gradebook (``student, exercise, score, max``) and a Markdown feedback
file per student. A notebook that is missing, unreadable, broken or hanging scores what
it earned, with the reason, and never stops the batch.
"""

from __future__ import annotations

import csv
import json
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat

import labkit
from labkit.grading import catalog
from labkit.grading.core import DEFAULT_TIMEOUT, NOT_STARTED, PASSED, Check, Outcome
from labkit.grading.release import exercise_of, solution_notebooks

LABKIT_ROOT = Path(labkit.__file__).resolve().parents[1]
#: The instructor's folder of solutions next to this labkit (a source checkout).
DEFAULT_SOLUTIONS = LABKIT_ROOT / "solutions"

_BOOT = "import sys; sys.path.insert(0, {root!r}); from labkit.grading.{module} import main; main()"


@dataclass
class Graded:
    """One student's result on one exercise."""

    student: str
    exercise: str
    title: str
    possible: int
    notebook: str | None = None
    outcomes: list[Outcome] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def score(self) -> int:
        return sum(o.earned for o in self.outcomes)


def _run_child(module: str, request: dict[str, Any], cwd: Path, timeout: float) -> str:
    """Run ``labkit.grading.<module>`` in a fresh isolated interpreter; return its stdout."""
    boot = _BOOT.format(root=str(LABKIT_ROOT), module=module)
    done = subprocess.run(
        [sys.executable, "-I", "-c", boot],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
    )
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise RuntimeError(f"exited with code {done.returncode}: {tail[:200]}")
    return done.stdout


def _execution_notes(executed: nbformat.NotebookNode, cell_timeout: float) -> list[str]:
    notes = []
    for index, cell in enumerate(executed.cells):
        if cell.cell_type != "code":
            continue
        for output in cell.get("outputs", []):
            if output.get("output_type") != "error":
                continue
            name, value = output.get("ename", "Error"), str(output.get("evalue", ""))
            if name == "KeyboardInterrupt":
                notes.append(
                    f"while running the notebook, cell {index} did not finish within "
                    f"{cell_timeout:g}s and was interrupted"
                )
            elif name == "NotImplementedError" and value.startswith("Exercise"):
                continue
            else:
                first = value.splitlines()[0][:160] if value else ""
                notes.append(f"while running the notebook, cell {index} raised {name}: {first}")
    return notes


@dataclass(frozen=True)
class Settings:
    solutions: Path
    cell_timeout: float = 60.0
    #: None: each check's own timeout, the one the student's ``check()`` allowed.
    check_timeout: float | None = None
    execute: bool = True


def check_timeout_for(settings: Settings, checks: list[Check]) -> float:
    """The limit sent to the grading process: it caps each check's own timeout.

    By default it is the largest of them, so a graded check gets exactly the time the
    student's ``check()`` gave it (a 30 s check is not cut to 10 s at grading time).
    """
    if settings.check_timeout is not None:
        return settings.check_timeout
    return max((c.timeout for c in checks), default=DEFAULT_TIMEOUT)


def grade_notebook(
    student: str, exercise: str, notebook: Path | None, settings: Settings
) -> Graded:
    """Grade one notebook (or its absence); never raises for anything the student did."""
    hidden_dir = settings.solutions.resolve() / "hidden"
    checks = catalog.all_checks(exercise, hidden_dir)
    title = catalog.public(exercise).title
    result = Graded(student, exercise, title, sum(c.points for c in checks))

    def zero(reason: str) -> Graded:
        result.notes.append(reason)
        result.outcomes = [
            Outcome(c.name, c.points, 0, "not graded", hidden=c.hidden) for c in checks
        ]
        return result

    if notebook is None:
        return zero(f"no notebook for {exercise}: expected a file named {exercise}_*.ipynb")
    result.notebook = notebook.name
    try:
        nb = nbformat.read(notebook, as_version=4)  # type: ignore[no-untyped-call]
        cells = [(i, c.source) for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    except Exception as exc:  # noqa: BLE001 - any unreadable file is the student's to fix
        return zero(
            f"{notebook.name} is not a readable notebook ({type(exc).__name__}: "
            f"{str(exc)[:120]}); save it again from Jupyter"
        )
    with (
        tempfile.TemporaryDirectory(prefix="labkit-grade-") as tmp,
        ThreadPoolExecutor(max_workers=1) as side,
    ):
        work = Path(tmp)
        # Running the notebook only reports broken cells; the checks never read its
        # outputs, so both run at once.
        ran = (
            side.submit(_execute, notebook, work, len(cells), settings)
            if settings.execute
            else None
        )
        run_dir = work / "checks"
        run_dir.mkdir()
        nonce = secrets.token_hex(16)
        request = {
            "exercise": exercise,
            "cells": cells,
            "nonce": nonce,
            "hidden_dir": str(hidden_dir) if hidden_dir.exists() else None,
            "cell_timeout": settings.cell_timeout,
            "check_timeout": check_timeout_for(settings, checks),
            "labkit_root": str(LABKIT_ROOT),
        }
        limit = check_timeout_for(settings, checks)
        checks_time = sum(min(c.timeout, limit) for c in checks)
        budget = settings.cell_timeout * len(cells) + checks_time + 30
        failure = None
        try:
            stdout = _run_child("sandbox", request, run_dir, budget)
        except subprocess.TimeoutExpired:
            failure = f"grading stopped after {budget:g}s: the checks did not finish"
        except RuntimeError as exc:
            failure = f"the grading process failed ({exc})"
        if ran is not None:
            result.notes += ran.result()
        if failure:
            return zero(failure)
    answer: dict[str, Any] = next(
        (json.loads(line[len(nonce) :]) for line in stdout.splitlines() if line.startswith(nonce)),
        {"error": "the grading process gave no answer"},
    )
    if "error" in answer:
        return zero(f"grading failed: {answer['error']}")
    outcomes = [Outcome(**o) for o in answer["outcomes"]]
    if [o.check for o in outcomes] != [c.name for c in checks]:
        return zero("grading failed: the grading process ran other checks than the instructor's")
    result.notes += answer["notes"]
    result.outcomes = outcomes
    if outcomes and all(o.status == NOT_STARTED for o in outcomes):
        result.notes.append("not started yet: every function is still the stub")
    return result


def _execute(notebook: Path, work: Path, n_cells: int, settings: Settings) -> list[str]:
    run_dir = work / "run"
    run_dir.mkdir()
    # Only the notebook is copied: nothing else from the submission is importable.
    copy = run_dir / notebook.name
    shutil.copyfile(notebook, copy)
    out = work / "executed.ipynb"
    request = {
        "notebook": str(copy),
        "out": str(out),
        "cwd": str(run_dir),
        "cell_timeout": settings.cell_timeout,
    }
    budget = 90 + settings.cell_timeout * (n_cells + 1)
    try:
        _run_child("execute", request, run_dir, budget)
    except subprocess.TimeoutExpired:
        return [f"running the notebook was stopped after {budget:g}s"]
    except RuntimeError as exc:
        return [f"the notebook could not be run in a fresh kernel ({exc})"]
    executed = nbformat.read(out, as_version=4)  # type: ignore[no-untyped-call]
    return _execution_notes(executed, settings.cell_timeout)


def find_notebooks(folder: Path, exercises: list[str]) -> tuple[dict[str, Path], dict[str, str]]:
    """Map each exercise to the student's notebook for it; a note per exercise with duplicates."""
    found: dict[str, Path] = {}
    notes: dict[str, str] = {}
    candidates = sorted(p for p in folder.rglob("ex*.ipynb") if ".ipynb_checkpoints" not in p.parts)
    for path in candidates:
        exercise = exercise_of(path)
        if exercise not in exercises:
            continue
        if exercise in found:
            notes[exercise] = f"graded {found[exercise].name} and ignored {path.name}"
            continue
        found[exercise] = path
    return found, notes


def grade_folder(
    submissions: Path,
    out_csv: Path,
    feedback_dir: Path,
    settings: Settings,
    jobs: int = 2,
    only: list[str] | None = None,
    progress: Callable[[str], None] = print,
) -> list[Graded]:
    """Grade every student folder in ``submissions``; write the gradebook and feedback."""
    if not submissions.is_dir():
        raise FileNotFoundError(f"{submissions} is not a folder of student folders")
    exercises = [e for e in (exercise_of(p) for p in solution_notebooks(settings.solutions)) if e]
    exercises = exercises or catalog.exercises()
    if only:
        unknown = sorted(set(only) - set(exercises))
        if unknown:
            raise ValueError(
                f"unknown exercise(s) {', '.join(unknown)}; known: {', '.join(exercises)}"
            )
        exercises = [e for e in exercises if e in only]
    students = sorted(p for p in submissions.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not students:
        raise ValueError(f"{submissions} has no student folders (one folder per student)")
    tasks: list[tuple[str, str, Path | None]] = []
    duplicates: dict[tuple[str, str], str] = {}
    for folder in students:
        found, notes = find_notebooks(folder, exercises)
        duplicates.update({(folder.name, e): note for e, note in notes.items()})
        tasks += [(folder.name, e, found.get(e)) for e in exercises]
    total = len(tasks)
    progress(
        f"grading {len(students)} student(s) x {len(exercises)} exercise(s) = {total} notebooks"
    )
    done = 0

    def one(task: tuple[str, str, Path | None]) -> Graded:
        nonlocal done
        graded = grade_notebook(*task, settings)
        if (graded.student, graded.exercise) in duplicates:
            graded.notes.insert(0, duplicates[graded.student, graded.exercise])
        done += 1
        flag = f"  ({len(graded.notes)} note(s))" if graded.notes else ""
        progress(
            f"[{done}/{total}] {graded.student} {graded.exercise}: "
            f"{graded.score}/{graded.possible}{flag}"
        )
        return graded

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        results = list(pool.map(one, tasks))
    write_gradebook(results, out_csv)
    write_feedback(results, feedback_dir)
    progress(f"wrote {out_csv} and {len(students)} feedback file(s) in {feedback_dir}")
    return results


def write_gradebook(results: list[Graded], path: Path) -> None:
    """``student, exercise, score, max``: one row per student and exercise."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["student", "exercise", "score", "max"])
        for g in sorted(results, key=lambda g: (g.student, g.exercise)):
            writer.writerow([g.student, g.exercise, g.score, g.possible])


def feedback_markdown(student: str, results: list[Graded]) -> str:
    """One student's feedback: a summary table, then every check and every note."""
    lines = [f"# Feedback for {student}", "", "| exercise | score |", "|---|---|"]
    lines += [f"| {g.exercise} {g.title} | {g.score}/{g.possible} |" for g in results]
    lines.append(
        f"| **total** | **{sum(g.score for g in results)}/{sum(g.possible for g in results)}** |"
    )
    for g in results:
        lines += ["", f"## {g.exercise}: {g.title} ({g.score}/{g.possible})", ""]
        if g.notebook:
            lines.append(f"Notebook: `{g.notebook}`")
            lines.append("")
        for note in g.notes:
            lines.append(f"- Note: {note}")
        if g.notes:
            lines.append("")
        lines += ["| check | points | result |", "|---|---|---|"]
        for o in g.outcomes:
            name = o.check + (" (hidden)" if o.hidden else "")
            lines.append(f"| {name} | {o.earned}/{o.points} | {o.status} |")
        for o in g.outcomes:
            if o.status in (PASSED, NOT_STARTED, "not graded"):
                continue
            lines += ["", f"### {o.check}: {o.status}"]
            for label, text in (("expected", o.expected), ("got", o.got), ("hint", o.hint)):
                if text:
                    lines.append(f"- {label}: {text}")
    return "\n".join(lines) + "\n"


def write_feedback(results: list[Graded], folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    by_student: dict[str, list[Graded]] = {}
    for g in results:
        by_student.setdefault(g.student, []).append(g)
    for student, graded in by_student.items():
        text = feedback_markdown(student, sorted(graded, key=lambda g: g.exercise))
        (folder / f"{student}.md").write_text(text, encoding="utf-8")
