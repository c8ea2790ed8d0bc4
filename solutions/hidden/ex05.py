"""Hidden checks for exercise 5: the idempotency key must be the job's, not a constant."""

from __future__ import annotations

from labkit.grading.exercises.ex05.checks import run_job
from labkit.grading.checks import Checks, Namespace, expect
from labkit.lang import _

CHECKS = Checks("ex05", hidden=True)

JOBS = (
    ("charge", {"customer": "cus_1", "amount": 1000}, "billing:1:charge:v1"),
    ("charge", {"customer": "cus_2", "amount": 2500}, "billing:2:charge:v1"),
)


@CHECKS.add(
    2,
    "each job has its own key: a constant Idempotency-Key makes the second "
    "invoice look like a repeat of the first",
    timeout=30.0,
    severe=True,
)
def two_invoices_two_charges(ns: Namespace) -> None:
    run = run_job(ns, "charge", [["after_effect", "crash", 1]], jobs=JOBS, seed=11)
    expect(bool(run.fired), "the crash at after_effect to fire", _("it never fired"))
    expect(
        run.outcome == "ok" and run.effects == 2,
        "one charge per invoice (2 in all)",
        _("{outcome}: {effects} charge(s) ({replay})").format(
            outcome=run.outcome, effects=run.effects, replay=run.replay
        ),
    )
