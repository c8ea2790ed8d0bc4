"""The class as jobs: one per (student, exercise, notebook content), and the results read back.

A job's key is ``grade/STUDENT/EXERCISE/SHA`` (``missing`` for no notebook): enqueueing
the class again, after a crash or a resubmission, finds the unchanged notebooks' jobs
already there (graded, or waiting) and adds jobs only for new content. Each notebook is
kept as enqueued by the run's place (``labkit.classroom.place``: the run folder, or the
database), so a worker grades what was enqueued even if the student's folder changes
meanwhile. The task list says which job is current for each (student, exercise); a
worker that claims a superseded job (its notebook was resubmitted) completes it without
grading.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labkit.classroom import results
from labkit.classroom.place import Place
from labkit.grading.gradebook import Graded
from labkit.job import Job, JobState

KIND = "grade"
QUEUE = "grading"
#: A notebook that kills its grading worker this often is given up (the crash-loop cap).
MAX_ATTEMPTS = 3


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


def enqueue(store: Any, place: Place, tasks: list[Task]) -> list[int]:
    """Keep the notebooks, name the current jobs, and enqueue what is not there yet."""
    for t in tasks:
        if t.notebook is not None and t.sha256 is not None:
            place.save_notebook(t.sha256, t.notebook)
    place.save_tasks(
        {t.key: {"name": t.notebook.name if t.notebook else None, "note": t.note} for t in tasks}
    )
    payloads = [{"student": t.student, "exercise": t.exercise, "sha256": t.sha256} for t in tasks]
    ids = store.enqueue_many(
        KIND, payloads, [t.key for t in tasks], queue=QUEUE, max_attempts=MAX_ATTEMPTS
    )
    return [job_id for job_id, _ in ids]


def notebook_of(place: Place, job: Job, tasks: dict[str, dict[str, Any]]) -> Path | None:
    """Where the notebook of a current job can be read, or None (no notebook was handed in)."""
    entry = tasks.get(job.key)
    sha = job.payload.get("sha256")
    if entry is None or sha is None or entry["name"] is None:
        return None
    return place.notebook(str(sha), str(entry["name"]))


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
