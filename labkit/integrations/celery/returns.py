"""What each run of a real Celery task returned, or raised, as the worker saw it.

A task's reply is part of its contract (exercise 8's charge says ``"charged"`` or
``"already charged"``), but the lab's apps ignore results: no backend to read them
from. Loaded into the worker (``celery worker --include
labkit.integrations.celery.returns``), this module appends one line per finished run
to ``returns.log`` in the pause folder (``LABKIT_PAUSE_DIR``): the task id, Celery's
state (``SUCCESS``, ``FAILURE``, ...) and the return value, or the exception's class
name for a run that raised. It only watches; without the folder it does nothing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, NamedTuple

from celery.signals import task_postrun

from labkit.integrations.celery import points

LOG = "returns.log"


class Returned(NamedTuple):
    """One finished run: its task id, Celery's state, and what it returned or raised."""

    task_id: str
    state: str
    value: str


def returned(folder: str | Path) -> list[Returned]:
    """Every finished run in ``folder``'s log, in the order they finished."""
    path = Path(folder) / LOG
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    return [Returned(*json.loads(line)) for line in text.splitlines() if line.strip()]


def _shown(retval: Any) -> str:
    if isinstance(retval, BaseException):
        return type(retval).__name__
    return retval if isinstance(retval, str) else repr(retval)


@task_postrun.connect
def _record_return(
    task_id: str | None = None, retval: Any = None, state: str | None = None, **_: Any
) -> None:
    folder = os.environ.get(points.ENV)
    if not folder:
        return
    line = json.dumps([str(task_id or "-"), str(state or "-"), _shown(retval)])
    # One short O_APPEND write per line: lines from several children never interleave.
    with open(Path(folder) / LOG, "a", encoding="utf-8") as fh:
        fh.write(line + "\n")
