"""``grade_folder``: a whole class graded as jobs, resumable, with its gradebook written once.

1. The run's folder ``OUT/RUN_ID`` holds ``jobs.db`` (the job store), ``plan.json`` (the
   settings), ``tasks.json`` (the current job of each student and exercise) and the
   notebooks as enqueued; with ``queue=postgresql://...`` all of it is in PostgreSQL
   instead (``labkit.classroom.place``), where grading workers on other machines
   (``labkit grade-worker``) find it. Started again with the same ``--run-id``, the run
   resumes: the class is enqueued again, which adds jobs only for new or changed notebooks.
2. ``jobs`` grading workers (``labkit.classroom.worker``) drain the queue here (none with
   ``jobs=0`` on a queue: other machines grade); this process only watches the store and
   prints each result as it lands.
3. When every current job is finished, ``grades.csv``, ``totals.csv`` and ``feedback/``
   are written from the store, each replaced whole (a reader never sees half a file).

Killed at any moment, nothing graded is lost: a result is stored with its job's
completion. ``run_status`` says how far a run is.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from labkit.backends.spec import open_store
from labkit.classroom import queue
from labkit.classroom.place import (
    STORE,
    DatabasePlace,
    Place,
    place_of,
    write_atomically,
)
from labkit.classroom.plan import Plan
from labkit.classroom.runlock import give_back_orphans, only_grader
from labkit.clock import Clock, SystemClock
from labkit.grading import catalog
from labkit.grading.checks import CheckStatus
from labkit.grading.course import hidden_of
from labkit.grading.grade import (
    Settings,
    find_notebooks,
    run_id,
    seeded_environment,
    sweep_abandoned,
)
from labkit.grading.gradebook import (
    Graded,
    NotebookStatus,
    write_feedback,
    write_gradebook,
    write_outcomes,
    write_totals,
)
from labkit.grading.release import exercise_of, solution_notebooks
from labkit.grading.report_html import write_report
from labkit.job import JobState

POLL_S = 0.2


def grade_folder(
    submissions: Path,
    out: Path,
    settings: Settings,
    jobs: int | None = None,
    only: list[str] | None = None,
    progress: Callable[[str], None] = print,
    run: str | None = None,
    clock: Clock | None = None,
    lease_s: float = 10.0,
    queue_url: str | None = None,
) -> tuple[Path, list[Graded]]:
    """Grade every student folder in ``submissions`` into ``out/RUN_ID``; return both.

    A ``run`` whose folder already holds a job store is resumed with the settings it
    started with; any other existing folder is left alone and the run gets ``RUN-2``.
    One grader at a time works on a run (a lock in its folder says which).
    """
    if not submissions.is_dir():
        raise FileNotFoundError(f"{submissions} is not a folder of student folders")
    exercises = _exercises(settings.solutions, only)
    students = sorted(p for p in submissions.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not students:
        raise ValueError(f"{submissions} has no student folders (one folder per student)")
    run_dir = _run_folder(out, run, clock, resumable=queue_url is not None)
    where = str(run_dir) if queue_url is None else queue_spec(queue_url, run_dir.name)
    with only_grader(run_dir) as lock, open_store(_store_spec(where), SystemClock()) as store:
        place = place_of(where)
        try:
            return _grade(
                store, place, where, run_dir, students, exercises, settings, jobs, progress,
                lease_s, lock,
            )
        finally:
            if isinstance(place, DatabasePlace):
                place.close()


def queue_spec(url: str, run: str) -> str:
    """The PostgreSQL queue of run ``run``: the URL's ``#schema=`` or ``grading_<run>``."""
    if "#" in url:
        return url
    schema = "grading_" + re.sub(r"[^a-z0-9_]", "_", run.lower())
    return f"{url}#schema={schema[:63]}"


def _store_spec(where: str) -> str:
    return where if where.startswith("postgresql://") else str(Path(where) / STORE)


def _grade(
    store: Any,
    place: Place,
    where: str,
    run_dir: Path,
    students: list[Path],
    exercises: list[str],
    settings: Settings,
    jobs: int | None,
    progress: Callable[[str], None],
    lease_s: float,
    lock: int,
) -> tuple[Path, list[Graded]]:
    plan = Plan.of(settings, lease_s)
    kept_plan = place.plan()
    resumed = kept_plan is not None
    if kept_plan is not None:
        kept = Plan.from_json(kept_plan)
        if kept != plan:
            progress(f"resuming run {run_dir.name} with the settings it started with")
        plan = kept
    else:
        place.save_plan(plan.to_json())
    tasks: list[queue.Task] = []
    for folder in students:
        found, notes = find_notebooks(folder, exercises)
        tasks += [queue.task(folder.name, e, found.get(e), notes.get(e)) for e in exercises]
    jobs = min((os.cpu_count() or 1) if jobs is None else jobs, len(tasks))
    if where == str(run_dir):
        jobs = max(1, jobs)  # a run in its folder is graded here or nowhere
    progress(settings.confinement.describe())
    if plan.seed is not None:
        zone = seeded_environment(plan.seed)["TZ"]
        progress(
            f"grading seed {plan.seed}: generated inputs differ from check()'s, and "
            f"student code runs with TZ={zone}; replay this run with --seed {plan.seed}"
        )
        kept_seed = {"seed": plan.seed, "timezone": zone}
        write_atomically(run_dir / "run.json", json.dumps(kept_seed) + "\n")
    networked = [e for e in exercises if catalog.public(e).network]
    if networked and not settings.confinement.network:
        shared = dataclasses.replace(settings.confinement, network=True)
        progress(f"{', '.join(networked)}: student code needs TCP: {shared.network_words()}")
    if resumed and where == str(run_dir):
        given_back = give_back_orphans(store)
        if given_back:
            progress(
                f"{given_back} notebook(s) were being graded when the run stopped: "
                "graded again now, without waiting for their lease"
            )
    queue.enqueue(store, place, tasks)
    gave_up = _gave_up(settings.solutions)
    done, waiting = queue.collect(store, tasks, gave_up)
    verb = f"resuming: {len(done)} of {len(tasks)} already graded, " if resumed else ""
    here = f"{jobs} at a time here" if jobs else "by grading workers on other machines"
    progress(
        f"{verb}grading {len(students)} student(s) x {len(exercises)} exercise(s) = "
        f"{len(tasks)} notebooks, {here}, into {run_dir}"
    )
    if where != str(run_dir):
        progress(f"the queue: labkit grade-worker --queue '{_redacted(where)}'")
    if waiting:
        solutions = settings.solutions
        done += _drain(
            store, where, run_dir, solutions, plan, waiting, len(done), jobs, progress, lock
        )
    done.sort(key=lambda g: (g.student, g.exercise))
    _write_gradebook(done, run_dir)
    progress(f"wrote grades.csv, totals.csv and {len(students)} feedback file(s) in {run_dir}")
    return run_dir, done


def _exercises(solutions: Path, only: list[str] | None) -> list[str]:
    exercises = [e for e in (exercise_of(p) for p in solution_notebooks(solutions)) if e]
    exercises = exercises or catalog.exercises()
    if only:
        unknown = sorted(set(only) - set(exercises))
        if unknown:
            raise ValueError(
                f"unknown exercise(s) {', '.join(unknown)}; known: {', '.join(exercises)}"
            )
        exercises = [e for e in exercises if e in only]
    return exercises


def _run_folder(out: Path, run: str | None, clock: Clock | None, resumable: bool) -> Path:
    """The run's folder: a named run's own to resume (its store is in it, or in the
    queue), else a new one (an existing folder of that name gets ``-2``)."""
    name = run or run_id(clock or SystemClock())
    run_dir = out / name
    if run is not None and run_dir.is_dir() and (resumable or (run_dir / STORE).exists()):
        return run_dir
    suffix = 1
    while run_dir.exists():
        suffix += 1
        run_dir = out / f"{name}-{suffix}"
    run_dir.mkdir(parents=True)
    return run_dir


def _redacted(spec: str) -> str:
    from labkit.redact import redact

    return redact(spec)


def _gave_up(solutions: Path) -> queue.GaveUp:
    hidden = hidden_of(solutions.resolve())

    def row(student: str, exercise: str, why: str) -> Graded:
        checks = catalog.all_checks(exercise, hidden)
        graded = Graded(
            student, exercise, catalog.public(exercise).title, sum(c.points for c in checks)
        )
        graded.outcomes = [c.outcome(CheckStatus.NOT_GRADED) for c in checks]
        graded.status = NotebookStatus.CRASHED
        graded.notes.append(why)
        return graded

    return row


def _drain(
    store: Any,
    where: str,
    run_dir: Path,
    solutions: Path,
    plan: Plan,
    waiting: list[queue.Task],
    before: int,
    jobs: int,
    progress: Callable[[str], None],
    lock: int,
) -> list[Graded]:
    """Start the grading workers and print each result as it lands; the new results."""
    logs = run_dir / "workers"
    logs.mkdir(exist_ok=True)
    jobs = min(jobs, len(waiting))
    workers = [
        start_worker(where, solutions, plan, f"g{n}", logs, lock) for n in range(1, jobs + 1)
    ]
    gave_up = _gave_up(solutions)
    total, done = before + len(waiting), list[Graded]()
    try:
        while waiting:
            landed, waiting = queue.collect(store, waiting, gave_up)
            for graded in landed:
                done.append(graded)
                progress(
                    f"[{before + len(done)}/{total}] {graded.student} {graded.exercise}: "
                    f"{graded.score}/{graded.possible} {graded.status}"
                )
            if waiting and workers and all(w.poll() is not None for w in workers):
                raise RuntimeError(_stopped_early(workers, logs, len(waiting)))
            if waiting:
                time.sleep(POLL_S)
    finally:
        # Every current job is finished (or the run is stopping): an idle worker would
        # only sleep out another's lease before it noticed. A job a worker still held
        # goes back to the queue when its lease runs out, for the next run to grade.
        for w in workers:
            if w.poll() is None:
                w.kill()
            w.wait()
        sweep_abandoned()  # the scratch folders (and tmpfs) of a worker that was killed
    return done


def start_worker(
    where: str,
    solutions: Path,
    plan: Plan,
    name: str,
    logs: Path | None,
    lock: int | None = None,
) -> subprocess.Popen[bytes]:
    """A grading worker process on the run at ``where``; its output in ``logs/NAME.log``
    (None: this process's own output). It keeps ``lock`` (the run's, see
    ``labkit.classroom.runlock``) open for as long as it lives."""
    env = {**os.environ, **plan.environment()}
    argv = [where, str(solutions.resolve()), name, str(os.getpid())]
    command = [sys.executable, "-m", "labkit.classroom.worker", *argv]
    kept = () if lock is None else (lock,)
    if logs is None:
        return subprocess.Popen(command, stdin=subprocess.DEVNULL, env=env, pass_fds=kept)
    with (logs / f"{name}.log").open("ab") as log:
        return subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
            pass_fds=kept,
        )


def grade_workers(where: str, solutions: Path, jobs: int) -> None:
    """``labkit grade-worker``: ``jobs`` grading workers on this machine, until the queue has
    nothing left to grade. LookupError when no run is there."""
    place = place_of(where, create=False)
    try:
        text = place.plan()
    finally:
        if isinstance(place, DatabasePlace):
            place.close()
    if text is None:
        raise LookupError(
            f"no grading run in {_redacted(where)}: start it with labkit grade ... --queue"
        )
    plan = Plan.from_json(text)
    stamp = f"{socket.gethostname()}-{os.getpid()}"
    workers = [start_worker(where, solutions, plan, f"{stamp}-g{n}", None) for n in range(jobs)]
    try:
        codes = [w.wait() for w in workers]
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
            w.wait()
    sweep_abandoned()
    if any(codes):
        raise RuntimeError(f"grading workers ended with exit codes {codes}; see their output")


def _stopped_early(workers: list[subprocess.Popen[bytes]], logs: Path, left: int) -> str:
    tails = []
    for n, w in enumerate(workers, 1):
        text = (logs / f"g{n}.log").read_text(encoding="utf-8", errors="replace").strip()
        tails.append(f"g{n} (exit {w.returncode}): {text.splitlines()[-1] if text else '-'}")
    return (
        f"every grading worker stopped with {left} notebook(s) left: "
        + "; ".join(tails)
        + f". Their logs are in {logs}; run labkit grade again with the same --run-id"
    )


def _write_gradebook(results: list[Graded], run_dir: Path) -> None:
    """grades.csv, totals.csv, outcomes.json and feedback/, each replaced whole; index.html."""
    writers = (
        ("grades.csv", write_gradebook),
        ("totals.csv", write_totals),
        ("outcomes.json", write_outcomes),
    )
    for name, write in writers:
        part = run_dir / f".{name}.part"
        write(results, part)
        os.replace(part, run_dir / name)
    fresh, old = run_dir / ".feedback.part", run_dir / ".feedback.old"
    for left in (fresh, old):
        shutil.rmtree(left, ignore_errors=True)
    write_feedback(results, fresh)
    if (run_dir / "feedback").exists():
        os.replace(run_dir / "feedback", old)
    os.replace(fresh, run_dir / "feedback")
    shutil.rmtree(old, ignore_errors=True)
    write_report(results, run_dir)


def run_status(run_dir: Path, queue_url: str | None = None) -> str:
    """How far a run is: its jobs by state, and whether its gradebook is written."""
    where = str(run_dir) if queue_url is None else queue_spec(queue_url, run_dir.name)
    if queue_url is None and not (run_dir / STORE).exists():
        raise FileNotFoundError(f"{run_dir} holds no grading run (no {STORE})")
    with open_store(_store_spec(where), SystemClock()) as store:
        place = place_of(where)
        try:
            current = place.tasks()
        finally:
            if isinstance(place, DatabasePlace):
                place.close()
        states = [store.get_by_key(key) for key in current]
    finished = sum(j is not None and j.state in (JobState.SUCCEEDED, JobState.DEAD) for j in states)
    running = sum(j is not None and j.state == JobState.RUNNING for j in states)
    gave_up = sum(j is not None and j.state == JobState.DEAD for j in states)
    book = run_dir / "grades.csv"
    lines = [
        f"run {run_dir.name}: {finished} of {len(current)} notebooks graded, {running} being "
        f"graded, {len(current) - finished - running} waiting"
        + (f"; {gave_up} the grader gave up on" if gave_up else ""),
        f"gradebook: {book}"
        if book.exists() and finished == len(current)
        else "gradebook: not written yet (labkit grade again with this --run-id finishes it)",
    ]
    return "\n".join(lines)
