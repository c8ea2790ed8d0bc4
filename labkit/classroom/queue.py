"""The class as jobs: one per (student, exercise, notebook content), and the results read back.

A job's key is ``grade/STUDENT/EXERCISE/SHA`` (``missing`` for no notebook): enqueueing
the class again, after a crash or a resubmission, finds the unchanged notebooks' jobs
already there (graded, or waiting) and adds jobs only for new content. Each notebook is
copied into the run folder as enqueued (``notebooks/SHA/NAME``), so a worker grades what
was enqueued even if the student's folder changes meanwhile. ``tasks.json`` says which
job is current for each (student, exercise); a worker that claims a superseded job
(its notebook was resubmitted) completes it without grading.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labkit.classroom import results
from labkit.grading.gradebook import Graded
from labkit.job import Job, JobState

KIND = "grade"
QUEUE = "grading"
#: A notebook that kills its grading worker this often is given up (the crash-loop cap).
MAX_ATTEMPTS = 3
TASKS = "tasks.json"
NOTEBOOKS = "notebooks"


@dataclass(frozen=True)
class Task:
    """One student's notebook for one exercise, as this run grades it."""

    student: str
    exercise: str
    notebook: Path | None
    sha256: str | None
    #: Why another notebook of the student's was left aside, if one was.
    note: str | None = None

    @property
    def key(self) -> str:
        return f"grade/{self.student}/{self.exercise}/{self.sha256 or 'missing'}"


def task(student: str, exercise: str, notebook: Path | None, note: str | None = None) -> Task:
    digest = hashlib.sha256(notebook.read_bytes()).hexdigest() if notebook else None
    return Task(student, exercise, notebook, digest, note)


def enqueue(store: Any, run_dir: Path, tasks: list[Task]) -> list[int]:
    """Copy the notebooks in, name the current jobs, and enqueue what is not there yet."""
    for t in tasks:
        if t.notebook is not None and t.sha256 is not None:
            kept = run_dir / NOTEBOOKS / t.sha256 / t.notebook.name
            if not kept.exists():
                kept.parent.mkdir(parents=True, exist_ok=True)
                temporary = kept.with_name(f".{kept.name}.part")
                shutil.copyfile(t.notebook, temporary)
                os.replace(temporary, kept)
    current = {
        t.key: {"name": t.notebook.name if t.notebook else None, "note": t.note} for t in tasks
    }
    write_atomically(run_dir / TASKS, json.dumps(current, sort_keys=True, indent=1))
    payloads = [{"student": t.student, "exercise": t.exercise, "sha256": t.sha256} for t in tasks]
    ids = store.enqueue_many(
        KIND, payloads, [t.key for t in tasks], queue=QUEUE, max_attempts=MAX_ATTEMPTS
    )
    return [job_id for job_id, _ in ids]


def current_tasks(run_dir: Path) -> dict[str, dict[str, Any]]:
    """What ``tasks.json`` says: each current key with its notebook's name and note."""
    data: dict[str, dict[str, Any]] = json.loads((run_dir / TASKS).read_text(encoding="utf-8"))
    return data


def notebook_of(run_dir: Path, job: Job) -> Path | None:
    """Where the notebook of a current job was kept, or None (missing, or superseded)."""
    entry = current_tasks(run_dir).get(job.key)
    sha = job.payload.get("sha256")
    if entry is None or sha is None or entry["name"] is None:
        return None
    return run_dir / NOTEBOOKS / str(sha) / str(entry["name"])


#: Makes the row of a notebook the grader gave up on: (student, exercise, why) -> Graded.
GaveUp = Callable[[str, str, str], Graded]


def graded_of(job: Job, gave_up: GaveUp, note: str | None = None) -> Graded | None:
    """The ``Graded`` a finished job holds; None while it is waiting or being graded."""
    if job.state == JobState.SUCCEEDED and isinstance(job.result, dict):
        graded = results.from_json(job.result)
    elif job.state == JobState.DEAD:
        graded = gave_up(
            str(job.payload["student"]),
            str(job.payload["exercise"]),
            f"the grader itself could not finish this notebook in {job.attempt} tries "
            f"({job.last_error or job.dead_reason}); fix the cause and run labkit grade "
            "again with the same --run-id",
        )
    else:
        return None
    if note:
        graded.notes.insert(0, note)
    return graded


def collect(store: Any, tasks: list[Task], gave_up: GaveUp) -> tuple[list[Graded], list[Task]]:
    """The results of the current jobs, and the tasks not finished yet."""
    done: list[Graded] = []
    waiting: list[Task] = []
    for t in tasks:
        job = store.get_by_key(t.key)
        graded = None if job is None else graded_of(job, gave_up, t.note)
        if graded is None:
            waiting.append(t)
        else:
            done.append(graded)
    return done, waiting


def write_atomically(path: Path, text: str) -> None:
    """Write ``path`` so that a reader sees the old file or the new one, never half."""
    temporary = path.with_name(f".{path.name}.part")
    with temporary.open("w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(temporary, path)
