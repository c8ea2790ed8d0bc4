"""Exercise 3: claim a job atomically with a lease, in one ``UPDATE ... RETURNING``.

The student writes ``claim(conn, worker, now, lease_s)`` on the exercise table
(``labkit.grading.exercises.labdb``). Each check makes the database file under the student's
folder, runs ``claim`` through the harness (``labkit.grading.exercises.ex03.harness``, which opens
its own connections) and reads the table back itself. The race check runs real
threads, each with its own connection, and widens the window between a read and a
write (every plain SELECT outside a transaction pauses), so a read-then-write claim is
caught every time instead of once in a while. Boundaries are exact: a job due exactly
now, a lease ending exactly now.

The checks live in two modules: ``what_a_claim_writes`` (what one claim writes) and
``which_job_a_claim_takes`` (which job a claim takes, and never one twice). Each registers on
``claiming.CHECKS`` when imported; this module imports them in the order the feedback
lists them, and is where the catalog finds ``CHECKS``.
"""

from __future__ import annotations

from labkit.grading.exercises.ex03 import (  # noqa: F401 - imported to register, in order
    what_a_claim_writes,
    which_job_a_claim_takes,
)
from labkit.grading.exercises.ex03.claiming import CHECKS

__all__ = ["CHECKS"]
