"""Exercise 5: a handler that survives a crash after its effect.

The student writes ``choose_ack``, ``charge_handler`` (a payment through the world's
payment API, which honours an Idempotency-Key) and ``post_handler`` (an entry in the
application's own ledger). Each check runs the job through the harness
(``labkit.grading.exercises.ex05.harness``: a real worker,
``labkit.explore.run_scenario``) in a
folder under the student's folder, crashing the worker once at one point (a fixed
seed, a fresh worker after the crash), asserts that the crash really fired, then
opens the job store and the world's database itself: exactly one effect is ``ok``.
The ledger handler is crashed after each of its commits in turn, so work split over
several transactions is caught wherever the split is.

Beyond the one job of the scenes: invoices generated from the grading seed (one customer
billed the same amount twice, names that are prefixes of one another, ``_`` and
non-ASCII, names that differ only in case or in an accent, long keys that differ only at
the end), each effect of the amount and for the customer the job names, with the reply
kept as the job's result, a call to the API or the ledger that fails (it must fail the
attempt, so the job is retried, not swallowed), a job delivered twice at once, and the
handler called again in new processes, as a restarted worker would be: a key built with
``hash()`` or from a value computed at import changes there, and the restart charges
aga

The checks live in two modules: ``crash_checks`` (one job crashed at one point) and
``every_job_checks`` (many jobs, failures, restarts). Each registers on ``runs.CHECKS``
when imported; this module imports them in the order the feedback lists them, and is
where the catalog finds ``CHECKS``.
"""

from __future__ import annotations

from labkit.grading.exercises.ex05 import (  # noqa: F401 - imported to register, in order
    crash_checks,
    every_job_checks,
)
from labkit.grading.exercises.ex05.runs import CHECKS

__all__ = ["CHECKS"]
