"""A grading worker: the lab's own ``Worker`` claiming grading jobs and grading them, confined.

``python -m labkit.classroom.worker WHERE SOLUTIONS NAME PARENT`` (WHERE: a run folder,
or a ``postgresql://...#schema=NAME`` queue) opens the run's job store and its place
(``labkit.classroom.place``), rebuilds the run's ``Settings`` from its plan with this
machine's confinement, and drains the grading queue: claim a notebook under a lease,
grade it (``grade_notebook``: student code in its sandbox, checks here), and complete the
job with the result in the same write. A thread renews the lease while a notebook is
graded, so the lease can be short: a worker that dies (SIGKILL, OOM, a lost machine)
leaves its notebook to be graded again a lease later by whichever worker is free.

A worker dies with the grader that started it (``PR_SET_PDEATHSIG`` on Linux): a
grader killed and started again does not race its own orphans.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from labkit.backends.spec import open_store
from labkit.classroom import queue, results
from labkit.classroom.place import Place, place_of
from labkit.classroom.plan import Plan
from labkit.clock import SystemClock
from labkit.errors import ConnectionLost, LeaseLost, StoreError
from labkit.grading.grade import Settings, grade_notebook
from labkit.job import Job
from labkit.orphans import die_with_parent
from labkit.worker import Context, Worker


@contextmanager
def renewing(ctx: Context, every_s: float) -> Iterator[None]:
    """Renew the job's lease every ``every_s`` seconds while the block runs."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(every_s):
            try:
                ctx.heartbeat()
            except LeaseLost:
                return  # another worker has it now: its result will count, not ours
            except (ConnectionLost, StoreError):
                continue  # a dropped connection: the next beat reconnects

    thread = threading.Thread(target=beat, name="lease", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def handler(place: Place, settings: Settings, lease_s: float) -> Any:
    """The ``grade`` job's handler for this run."""

    def grade(job: Job, ctx: Context) -> dict[str, Any]:
        tasks = place.tasks()
        if job.key not in tasks:
            return {"superseded": True}  # resubmitted since: its new content has a job
        notebook = queue.notebook_of(place, job, tasks)
        with renewing(ctx, lease_s / 4):
            graded = grade_notebook(
                str(job.payload["student"]), str(job.payload["exercise"]), notebook, settings
            )
        return results.to_json(graded)

    return grade


def store_spec(where: str, name: str) -> str:
    """The job store of the run at ``where``; a PostgreSQL session named after the worker."""
    if not where.startswith("postgresql://"):
        return str(Path(where) / "jobs.db")
    url, _, fragment = where.partition("#")
    joiner = "&" if "?" in url else "?"
    return f"{url}{joiner}application_name=labkit-grade-{name}#{fragment}"


def main(argv: list[str]) -> int:
    where, solutions, name, parent = argv[0], Path(argv[1]), argv[2], int(argv[3])
    die_with_parent(parent)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    store = open_store(store_spec(where, name), SystemClock())
    place = place_of(where)
    text = place.plan()
    if text is None:
        print(f"grading worker {name}: no grading run at {where}", file=sys.stderr)
        return 2
    plan = Plan.from_json(text)
    try:
        settings = plan.settings(solutions)
    except RuntimeError as refused:
        print(f"grading worker {name} refuses to grade: {refused}", file=sys.stderr)
        return 2
    with store:
        worker = Worker(
            store,
            {queue.KIND: handler(place, settings, plan.lease_s)},
            name=name,
            queues=[queue.QUEUE],
            lease_s=plan.lease_s,
        )
        signal.signal(signal.SIGTERM, lambda signum, frame: worker.stop())
        worker.drain()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
