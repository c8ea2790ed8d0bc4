"""Exercise 6: the dead letter and the redrive that keeps the key.

The student writes ``dead_letter`` and ``redrive`` on the exercise table
(``labkit.grading.exercises.labdb``). Each check makes the database file under the student's
folder, runs the student's functions through the harness
(``labkit.grading.exercises.ex06.harness``, its own connections, errors built from plain
descriptions) and reads the table back itself. Two checks race: two operators
redriving at once, and a redrive while another party redrives the job and a worker
claims it; a redrive that selects and then updates outside one ``BEGIN IMMEDIATE``
transaction is caught by both. The first also races two operators in two processes,
one schedule at a time (``racesweep``), so a lock in Python cannot hide the gap.

The checks live in three modules, by what they call: ``dead_letter_checks``,
``redrive_checks`` (one redrive alone) and ``redrive_races`` (a redrive beside others).
Each registers on ``deadletters.CHECKS`` when imported; this module imports them in the
order the feedback lists them, and is where the catalog finds ``CHECKS``.
"""

from __future__ import annotations

from labkit.grading.exercises.ex06 import (  # noqa: F401 - imported to register, in order
    dead_letter_checks,
    redrive_checks,
    redrive_races,
)
from labkit.grading.exercises.ex06.deadletters import CHECKS

__all__ = ["CHECKS"]
