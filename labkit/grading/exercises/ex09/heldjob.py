"""Run a script whose job's work lasts until the check lets it end: ``python -m
labkit.grading.exercises.ex09.heldjob GATE WORK_S SCRIPT [ARGS...]``.

Each ``time.sleep(WORK_S)`` (the work ``run_job`` does for an entry whose ``work_s`` is
``WORK_S``) waits until the file ``GATE`` exists instead, for at most ``LIMIT_S``; any
other sleep (a pause between looks) is a real one. A check that needs a consumer to hold
an entry while something else happens (another consumer starts and looks, however long
a loaded machine takes to start it) opens the gate once it has seen that, instead of
betting that a job of a few seconds outlasts it.
"""

from __future__ import annotations

import contextlib
import runpy
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import SupportsIndex

#: The longest a held job waits for its gate: the check opens it well before.
LIMIT_S = 60.0
#: How often a held job looks for its gate.
POLL_S = 0.01


def _install(gate: Path, work_s: float) -> None:
    real_sleep = time.sleep
    real_monotonic = time.monotonic

    def sleep(seconds: float | SupportsIndex) -> None:
        if float(seconds) != work_s:
            real_sleep(seconds)
            return
        until = real_monotonic() + LIMIT_S
        while not gate.exists() and real_monotonic() < until:
            real_sleep(POLL_S)

    time.sleep = sleep


@contextlib.contextmanager
def gate_in(folder: Path) -> Iterator[Path]:
    """A gate's path in ``folder`` (the consumers' own), removed after the block."""
    gate = folder / f".labkit-gate-{uuid.uuid4().hex[:8]}"
    try:
        yield gate
    finally:
        gate.unlink(missing_ok=True)


def main(argv: list[str]) -> None:
    gate, work_s, script, *args = argv
    _install(Path(gate), float(work_s))
    sys.argv = [script, *args]
    sys.path.insert(0, str(Path(script).resolve().parent))
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
