"""Exercise 13: a queue per account with a concurrency cap, and a serial queue per key.

The student writes ``claim_capped`` and ``claim_serial`` on the exercise jobs table
(``queue`` holds the account or the serial key). Each check builds the table in a file
under the student's folder, runs the claims through the harness
(``labkit.grading.exercises.ex13.harness``, one new connection per claim, as a worker opens it)
and reads the table back itself. The flood check plays three workers against a
flooding account on a simulated clock, completing jobs itself, and measures from the
table how long the other accounts waited. The race checks run two real processes
whose plain reads pause, so a claim that counts and takes in two statements passes
the cap, or runs two jobs of one serial key, every time instead of once in a while.
One check makes several claims on one connection, as a long-lived worker does, so a
transaction a claim leaves open shows. The module is long (about 520 lines) because
exercise 13 is two policies, each checked alone, in a flood and in a race.

The checks live in two modules, one per claim: ``capped_checks`` and ``serial_checks``.
Each registers on ``claims.CHECKS`` when imported; this module imports them in the
order the feedback lists them, and is where the catalog finds ``CHECKS``.
"""

from __future__ import annotations

from labkit.grading.exercises.ex13 import (  # noqa: F401 - imported to register, in order
    capped_checks,
    serial_checks,
)
from labkit.grading.exercises.ex13.claims import CHECKS

__all__ = ["CHECKS"]
