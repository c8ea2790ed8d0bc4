"""What the checks that judge a database file share: a database file to judge, and errors as text.

``lab_file(ns, make)`` gives a fresh database file under the student's folder and the
check's own connection to it, to build the scene and to read back what the student's
code did; ``reading(path)`` is the check's own connection to a file the student's code
made (a sweep's copy). ``raised_a(got, name)`` tells whether a harness outcome raised
``name``.
"""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from labkit.grading.checks import Namespace
from labkit.grading.exercises.labdb import connect, lab_db


def raised_a(got: dict[str, Any], name: str) -> bool:
    """True when the outcome raised ``name`` or a subclass of it."""
    return name in got.get("raised", [])


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


@contextmanager
def reading(path: Path) -> Iterator[sqlite3.Connection]:
    """The check's own connection to a database file the student's code wrote."""
    conn = connect(path)
    try:
        yield conn
    finally:
        conn.close()
