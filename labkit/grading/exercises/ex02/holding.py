"""What exercise 2's checks share: ``CHECKS``, on which ``holder_checks`` and
``newcomer_race_checks`` register; a lock file path in a fresh folder of the student's;
and one holder's run through the harness."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from labkit.grading.checks import Checks, Namespace, expect

CHECKS = Checks("ex02", "single-instance lock", needs=("single_instance",))
HARNESS = "labkit.grading.exercises.ex02.harness:"


@contextmanager
def lock_path(ns: Namespace) -> Iterator[Path]:
    """A lock file path in a fresh folder under the student's folder, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="labkit-ex02-", dir=ns.workdir) as tmp:
        yield Path(tmp) / "report.lock"


def _holding(ns: Namespace, path: Path, raise_inside: bool = False) -> dict[str, Any]:
    run: dict[str, Any] = ns.harness(HARNESS + "attempt_while_holding", str(path), raise_inside)
    expect("error" not in run, "the with block to run and end", run.get("error", ""))
    return run
