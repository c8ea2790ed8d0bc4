"""The lock of a grading run kept in its folder: one grader at a time, and proof of the dead.

``grader.lock`` in the run's folder is held with ``flock`` by the grader and, inherited,
by every grading worker it starts. The kernel drops the lock when the last of them
exits, however it exits (Ctrl-C, SIGKILL, a reboot), so:

- a second ``labkit grade`` on a running run is refused, naming the grader's pid;
- a grader that takes the lock knows that no worker of an earlier grader of this run is
  alive: a notebook the store still shows as being graded was held by a dead worker,
  and can be graded again at once instead of a lease later (``give_back_orphans``).

Runs on a PostgreSQL queue have workers on other machines that no local lock sees; they
keep relying on leases alone.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from labkit.clock import Clock, SystemClock
from labkit.grading.grade import process_alive
from labkit.job import JobState

#: How long a grader waits for the workers of a grader that has just died to follow it
#: (they die with their parent: a signal the kernel sends, not instantly handled).
WORKERS_FOLLOW_S = 10.0
REASON = "its grading run stopped while grading it"


@contextmanager
def only_grader(run_dir: Path, clock: Clock | None = None) -> Iterator[int]:
    """Hold the run's lock while grading: a second grader on the same run is refused.

    Yields the lock's file descriptor, for the grader's workers to inherit
    (``start_worker``). When the lock is held but the grader that wrote its pid is gone,
    its workers are still dying: wait for them (at most ``WORKERS_FOLLOW_S``).
    """
    clock = clock or SystemClock()
    with (run_dir / "grader.lock").open("a+") as fh:
        deadline = clock.now() + WORKERS_FOLLOW_S
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                fh.seek(0)
                holder = fh.read().strip()
                gone = holder.isdigit() and not process_alive(int(holder))
                if gone and clock.now() < deadline:
                    clock.sleep(0.05)
                    continue
                dying = ", which has stopped, but whose grading workers still hold the run"
                raise RuntimeError(
                    f"run {run_dir.name} is being graded by another labkit grade (pid "
                    f"{holder or '?'}){dying if gone else ''}; wait for it, or see labkit "
                    f"grade --status {run_dir.name}"
                ) from None
        fh.truncate(0)
        fh.write(str(os.getpid()))
        fh.flush()
        yield fh.fileno()


def give_back_orphans(store: Any) -> int:
    """Put back the notebooks a stopped run's workers held; how many there were.

    Call it only holding the lock of a run kept in its folder (``only_grader``): then
    every worker that held a notebook is dead and no lease of theirs will be renewed, so
    waiting those leases out would change nothing but the time. Giving the jobs back
    (``snooze``) spends no attempt, since the grader stopping is not the notebook's
    doing. A worker that dies alone, while its grader runs, leaves its notebook to the
    lease instead, which counts an attempt: a notebook that kills its worker three
    times is given up.
    """
    orphans = store.jobs(JobState.RUNNING)
    for job in orphans:
        store.snooze(job, 0.0, reason=REASON)
    return len(orphans)
