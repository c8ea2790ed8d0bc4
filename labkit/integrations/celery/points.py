"""Pause a real Celery task at a named point, so the lab can SIGKILL its worker right there.

A crash "after the effect, before the ack" lasts a few microseconds in a real worker:
nobody can aim a ``kill -9`` at it from outside. So the task stops and waits there:

- the lab writes a plan with ``set_pause(folder, point)``;
- the first task to reach ``point`` (its ``checkpoint(point)``) writes a marker file,
  syncs it, and blocks; later arrivals (the redelivery) pass straight through;
- the lab waits for the marker with ``wait_reached(...)``, kills the worker for real,
  and judges what happened from the world and the broker.

Two points need no help from the task's code: importing this module in the worker
(``celery worker --include labkit.integrations.celery.points``, or importing it from
the app module) connects Celery's signals so that ``task_start`` is reached before the
task body runs (``task_prerun``: nothing done yet; the message is already acked unless
``acks_late``) and ``task_end`` after it returned (``task_postrun``: the work is done
and committed; with ``acks_late`` the ack has not been sent). Task code may call
``checkpoint("after_effect")`` (or any name) for points in between.

The folder comes from the worker's environment, ``LABKIT_PAUSE_DIR``; without it every
checkpoint is a no-op, so the same task module runs unchanged in production.

With the folder set, the worker also looks for dead pool children every
``LOST_CHECK_S`` instead of every 5 s (``_notice_lost_children_sooner``): Celery's
prefork pool declares a killed child's task lost at the first pool check after
``worker_lost_wait``, so a lab waited up to 5 s more after each kill. What happens to the
task (requeued, acked, failed) is Celery's, unchanged; only when it happens moves.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from pathlib import Path
from typing import Any

from celery.signals import (
    task_postrun,
    task_prerun,
    task_retry,
    worker_process_init,
    worker_ready,
)

from labkit.integrations.celery.proctree import (
    host_pids,
    pid_namespace,
    wait_until,
)
from labkit.orphans import die_with_parent

#: The environment variable naming the folder that holds the plan and the markers.
ENV = "LABKIT_PAUSE_DIR"
PLAN = "pause-plan.json"
#: How long a paused task waits to be killed before it gives up and goes on.
HOLD_S = 120.0


def set_pause(folder: str | Path, point: str, label: str) -> Path:
    """Pause the next task reaching ``point``; ``label`` names this plan (one pause per label).

    Returns the marker file the paused task will create.
    """
    folder = Path(folder)
    tmp = folder / f".{PLAN}.tmp"
    tmp.write_text(json.dumps({"point": point, "label": label}))
    tmp.replace(folder / PLAN)  # atomic: a task never reads half a plan
    return marker(folder, point, label)


def clear_pause(folder: str | Path) -> None:
    """No more pauses: every checkpoint passes."""
    (Path(folder) / PLAN).unlink(missing_ok=True)


def release_marker(folder: str | Path, label: str) -> Path:
    """The file whose existence lets the task paused under plan ``label`` go on."""
    return Path(folder) / f"released-{label}"


def release(folder: str | Path, label: str) -> None:
    """Let the task paused under plan ``label`` go on, as if it had never stopped."""
    release_marker(folder, label).touch()


def marker(folder: str | Path, point: str, label: str) -> Path:
    return Path(folder) / f"reached-{label}-{point}"


def wait_reached(folder: str | Path, point: str, label: str, timeout: float = 60.0) -> None:
    """Wait until a task is paused at ``point`` under plan ``label``."""
    path = marker(folder, point, label)
    wait_until(path.exists, timeout, f"a task to reach {point!r} ({label})")


def _task_id() -> str:
    from celery import current_task

    request = getattr(current_task, "request", None)
    return str(getattr(request, "id", None) or "-")


def _here() -> str:
    """This process as the lab's logs name it: its pid and its pid namespace."""
    return f"{os.getpid()} {pid_namespace() or '-'}"


def _translate(entries: list[tuple[int, str]]) -> list[int]:
    """Pids written as ``(pid, namespace)`` inside a worker, as this process sees them.

    Outside any pid namespace of its own (a lesson) each is the same number. Inside one
    (a worker the grader spawned) the live process is looked up; a process that is gone
    reads as -1, which no process is.
    """
    wanted = {(ns, pid) for pid, ns in entries if ns not in ("-", pid_namespace())}
    found = host_pids(wanted)
    return [pid if (ns, pid) not in wanted else found.get((ns, pid), -1) for pid, ns in entries]


def paused(folder: str | Path, point: str, label: str) -> tuple[int, str]:
    """``(pid, task id)`` of the task paused at ``point`` under plan ``label``.

    The pid as this process sees it (-1 if that process is gone)."""
    pid, ns, task_id = (marker(folder, point, label).read_text().split() + ["-"])[:3]
    if task_id == "-" and not ns.startswith("pid:"):  # written without a namespace
        ns, task_id = "-", ns
    [host] = _translate([(int(pid), ns)])
    return host, task_id


def checkpoint(point: str) -> None:
    """Block here (until killed) if the plan names ``point`` and nobody has stopped here yet."""
    folder = os.environ.get(ENV)
    if not folder:
        return
    try:
        plan: dict[str, Any] = json.loads((Path(folder) / PLAN).read_text())
    except (OSError, ValueError):
        return
    if plan.get("point") != point:
        return
    path = marker(folder, point, str(plan.get("label")))
    # The marker is the lab's proof that the kill fell here, and says which process to
    # kill and which task it was running. It is written whole and synced under a name of
    # this process's own, then linked into place: the link is the claim (it fails if
    # someone stopped here already), and nobody waiting for the marker can read it empty.
    # (the pid and a random part: two sandboxed workers may both have a child of pid 3)
    draft = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex}")
    fd = os.open(draft, os.O_CREAT | os.O_TRUNC | os.O_WRONLY)
    try:
        os.write(fd, f"{_here()} {_task_id()}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(draft, path)
    except FileExistsError:
        return  # someone stopped here already: this is the redelivery, run through
    finally:
        draft.unlink(missing_ok=True)
    # Until killed, or released: the lab may let a paused task go on (a warm shutdown).
    released = release_marker(folder, str(plan.get("label")))
    with contextlib.suppress(TimeoutError):
        wait_until(released.exists, HOLD_S, "a release")


RUNS = "runs.log"


def _record(event: str, task_id: object) -> None:
    """Append ``start``/``retry``/``end`` of a task run (with the pid) to the folder's runs log."""
    folder = os.environ.get(ENV)
    if folder:
        # One short O_APPEND write per line: lines from several children never interleave.
        with open(Path(folder) / RUNS, "a", encoding="utf-8") as fh:
            fh.write(f"{event} {task_id} {_here()} {os.getppid()}\n")


def runs(folder: str | Path) -> list[tuple[str, str, int, int]]:
    """The runs log: ``(event, task id, pid, parent pid)`` per line, in order.

    Pids as this process sees them (``_translate``: a worker in a pid namespace of its
    own writes its inner numbers; the parent is in the same namespace)."""
    path = Path(folder) / RUNS
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    rows = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 4:  # written without a namespace
            fields.insert(3, "-")
        event, task_id, pid, ns, ppid = fields
        rows.append((event, task_id, int(pid), ns, int(ppid)))
    pids = _translate([(pid, ns) for _, _, pid, ns, _ in rows])
    parents = _translate([(ppid, ns) for _, _, _, ns, ppid in rows])
    return [(r[0], r[1], pid, ppid) for r, pid, ppid in zip(rows, pids, parents, strict=True)]


def running(folder: str | Path, alive: Any) -> list[str]:
    """Task ids whose last run started and has not ended, in a process ``alive(pid)`` says lives.

    A run whose process was killed never ends: it is not running, it is lost (or will
    start again, under the same task id, when redelivered).
    """
    last = {task_id: (event, pid) for event, task_id, pid, _ in runs(folder)}
    return [tid for tid, (event, pid) in last.items() if event == "start" and alive(pid)]


def started_under(folder: str | Path, parent: int) -> int:
    """How many task runs started in the pool children of the worker process ``parent``."""
    return sum(1 for event, _, _, ppid in runs(folder) if event == "start" and ppid == parent)


#: The pid of the process that last forked, as each child inherits it: a pool child asks
#: for the parent-death signal only once Celery initialises it, and a main process
#: SIGKILLed before then would otherwise leave it orphaned for good (seen in a full run).
_FORKED_BY = [os.getpid()]
os.register_at_fork(before=lambda: _FORKED_BY.__setitem__(0, os.getpid()))


@worker_process_init.connect
def _pool_child_dies_with_worker(**_: Any) -> None:
    # A pool child whose main process was SIGKILLed would otherwise live on, orphaned.
    die_with_parent(_FORKED_BY[0])


#: Seconds between the pool checks of a worker under the lab (Celery's own: 5 s).
LOST_CHECK_S = 0.05


@worker_ready.connect
def _notice_lost_children_sooner(sender: Any = None, **_: Any) -> None:
    # The consumer runs the event loop (hub) the prefork pool registered its 5 s timer
    # with; add one more, more often. Not under the lab, or another pool: nothing.
    if not os.environ.get(ENV):
        return
    hub = getattr(sender, "hub", None)
    maintain = getattr(getattr(getattr(sender, "pool", None), "_pool", None), "maintain_pool", None)
    if hub is not None and callable(maintain):
        hub.call_repeatedly(LOST_CHECK_S, maintain)


@task_prerun.connect
def _at_task_start(task_id: str | None = None, **_: Any) -> None:
    _record("start", task_id)
    checkpoint("task_start")


@task_postrun.connect
def _at_task_end(task_id: str | None = None, **_: Any) -> None:
    checkpoint("task_end")
    _record("end", task_id)


@task_retry.connect
def _at_task_retry(request: Any = None, **_: Any) -> None:
    # Celery sends this once ``Task.retry`` has published the retry's message (same task
    # id): a lab waiting for every message to reach a worker waits for that one too.
    _record("retry", getattr(request, "id", None))
