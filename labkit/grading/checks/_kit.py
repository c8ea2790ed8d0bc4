"""What the checks of exercises 11-13 share: generated examples, and a database to judge.

``holds(strategy, prop)`` runs ``prop`` on examples Hypothesis generates
(derandomized, no example database, a bounded count), so a check stays inside its
timeout, a failure replays exactly, and the student reads the smallest input that
breaks their code. ``lab_file(ns, make)`` gives a fresh database file under the
student's folder and the check's own connection to it, to build the scene and to read
back what the student's code did.
"""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Verbosity, given, settings
from hypothesis import strategies as st

from labkit.grading.core import CheckFailed, Namespace
from labkit.grading.labdb import lab_db


def holds(
    strategy: st.SearchStrategy[Any], prop: Callable[[Any], None], examples: int = 30
) -> None:
    """Run ``prop(example)`` on generated examples; the first failure fails the check."""
    runner = settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        verbosity=Verbosity.quiet,
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
    )(given(strategy)(prop))
    try:
        runner()
    except BaseExceptionGroup as group:  # a flaky student function: its first failure
        found = group.subgroup(CheckFailed)
        if found is None:
            raise
        first: BaseException = found
        while isinstance(first, BaseExceptionGroup):
            first = first.exceptions[0]
        raise first from None


@contextmanager
def lab_file(
    ns: Namespace, make: Callable[[Path], sqlite3.Connection] = lab_db, name: str = "jobs.db"
) -> Iterator[tuple[sqlite3.Connection, Path]]:
    """A fresh database made by ``make`` under the student's folder, and the check's connection."""
    with tempfile.TemporaryDirectory(prefix="labkit-check-", dir=ns.workdir) as tmp:
        path = Path(tmp) / name
        conn = make(path)
        try:
            yield conn, path
        finally:
            conn.close()
