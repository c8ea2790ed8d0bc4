"""Hidden checks for exercise 5: the idempotency key must be the job's, not a constant."""

from __future__ import annotations

from labkit.explore import Scenario, run_scenario
from labkit.faults import FaultPlan
from labkit.grading.core import Checks, Namespace, expect

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
)
def two_invoices_two_charges(ns: Namespace) -> None:
    scenario = Scenario(
        "two invoices",
        {"charge": ns.charge_handler},
        ack=ns.choose_ack(),
        service="payments",
        jobs=JOBS,
    )
    row = run_scenario(scenario, FaultPlan(11).at("after_effect", "crash"), point="after_effect")
    expect(bool(row.fired), "the crash at after_effect to fire", "it never fired")
    expect(
        row.outcome == "ok" and row.effects == 2,
        "one charge per invoice (2 in all)",
        f"{row.outcome}: {row.effects} charge(s) (replay: {row.replay})",
    )
