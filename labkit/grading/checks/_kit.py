"""What the checks of exercises 11-13 share: a database file to build a scene and judge.

``lab_file(ns, make)`` gives a fresh database file under the student's folder and the
check's own connection to it, to build the scene and to read back what the student's
code did.
"""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from labkit.grading.core import Namespace
from labkit.grading.labdb import lab_db


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
