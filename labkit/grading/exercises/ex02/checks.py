"""Exercise 2: one instance at a time, with a lock the kernel frees when the holder dies.

The student writes ``single_instance(path)``, a context manager. Every check runs it in
real processes through the harness (``labkit.grading.exercises.ex02.harness``): a second holder,
a holder killed with SIGKILL (the check asserts the kill happened), three processes
released at the same instant, a refused attempt followed by a third process, holders
one after another. The lock file is read by the check itself.

The checks live in two modules: ``holder_checks`` and ``newcomer_race_checks``. Each
registers on ``holding.CHECKS`` when imported; this module imports them in the order the
feedback lists them, and is where the catalog finds ``CHECKS``.
"""

from __future__ import annotations

from labkit.grading.exercises.ex02 import (  # noqa: F401 - imported to register, in order
    holder_checks,
    newcomer_race_checks,
)
from labkit.grading.exercises.ex02.holding import CHECKS

__all__ = ["CHECKS"]
