"""Hidden checks for exercise 2: a refused attempt must not wipe the holder's record."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from labkit.grading.checks.ex02 import attempt, held_by_child
from labkit.grading.core import Checks, Namespace, expect

CHECKS = Checks("ex02", hidden=True)


@CHECKS.add(
    1,
    "open the file without truncating it ('a+' or os.open with O_RDWR | O_CREAT) "
    "and truncate only once you hold the lock: a refused attempt opened with 'w' "
    "erases the holder's pid",
    timeout=20.0,
)
def refused_attempt_keeps_the_holder(ns: Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="labkit-ex02h-") as tmp:
        path = Path(tmp) / "report.lock"
        with held_by_child(ns, path) as pid:
            attempt(ns, path)
            again = attempt(ns, path)
        expect(str(pid) in again, f"the second refusal still naming the holder, pid {pid}", again)


@CHECKS.add(1, "the file records the holder's pid while it holds the lock")
def file_names_the_holder(ns: Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="labkit-ex02h-") as tmp:
        path = Path(tmp) / "report.lock"
        with ns.single_instance(path):
            text = path.read_text()
    expect(str(os.getpid()) in text, f"pid {os.getpid()} in the lock file", repr(text))
