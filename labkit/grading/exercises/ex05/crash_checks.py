"""Exercise 5's checks of one job crashed at one point: runs once without faults,
survives a crash before or after its effect or commit, a lost response, every commit of
the ledger, and two deliveries at once."""

from __future__ import annotations

import tempfile
from pathlib import Path

from labkit.clock import LAB_EPOCH, FakeClock
from labkit.faults import LOST_RESPONSE, POINTS
from labkit.grading.checks import Namespace, expect
from labkit.grading.exercises.ex05.harness import LEDGER_COMMIT
from labkit.grading.exercises.ex05.runs import (
    CHARGE,
    CHECKS,
    HARNESS,
    POST,
    _judge,
    _raised,
    _what_each_job_did,
    run_job,
)
from labkit.lang import _
from labkit.world import World


@CHECKS.add(
    1,
    "the job runs once and succeeds when nothing goes wrong: it charges job.payload's "
    "amount (already in cents) to its customer, as they are, and returns the API's reply",
    timeout=30.0,
)
def charge_runs_once_without_faults(ns: Namespace) -> None:
    run = run_job(ns, "charge", [])
    expect(
        run.outcome == "ok" and run.effects == 1,
        "one charge, job succeeded",
        _("{outcome} with {effects} charge(s)").format(outcome=run.outcome, effects=run.effects)
        + (f"; {_raised(run, 'charge')}" if run.errors else ""),
    )
    _what_each_job_did(ns, "charge")


@CHECKS.add(
    1,
    "the entry is posted once and the job succeeds when nothing goes wrong: it posts "
    "job.payload's amount for its customer, as they are, and returns tx.post's reply",
    timeout=30.0,
)
def post_runs_once_without_faults(ns: Namespace) -> None:
    run = run_job(ns, "post", [])
    expect(
        run.outcome == "ok" and run.effects == 1,
        "one ledger entry, job succeeded",
        _("{outcome} with {effects} entries").format(outcome=run.outcome, effects=run.effects)
        + (f"; {_raised(run, 'post')}" if run.errors else ""),
    )
    _what_each_job_did(ns, "post")


@CHECKS.add(
    1,
    "a crash before the effect is easy: the job is redelivered and runs",
    timeout=30.0,
    severe=True,
)
def charge_survives_crash_before_effect(ns: Namespace) -> None:
    _judge(ns, "charge", ("after_claim", "before_effect"))


@CHECKS.add(
    3,
    "after the charge, before the job is recorded, the worker dies and the job runs "
    "again: send idempotency_key=job.key so the payment API answers the second "
    "call with the first reply instead of charging twice (a ledger check in "
    "another transaction does not help: the crash falls between the two)",
    timeout=30.0,
    severe=True,
)
def charge_survives_crash_after_effect(ns: Namespace) -> None:
    _judge(ns, "charge", (LOST_RESPONSE, "after_effect", "before_commit"))
    _two_deliveries(ns, "charge")


@CHECKS.add(
    2,
    "acknowledge after the handler (ack 'late'): acknowledging first marks the job "
    "done before the charge, and a crash in between loses it",
    timeout=30.0,
    severe=True,
)
def charge_survives_crash_after_commit(ns: Namespace) -> None:
    _judge(ns, "charge", ("after_commit", "after_ack"))


@CHECKS.add(
    2,
    "the API charged and the reply was lost (a timeout): the retry must carry the "
    "same Idempotency-Key, the job's key, never a new one per attempt",
    timeout=30.0,
    severe=True,
)
def charge_survives_lost_response(ns: Namespace) -> None:
    _judge(ns, "charge", (LOST_RESPONSE,), action="lose_response")


@CHECKS.add(
    3,
    "the ledger is our own database: check, post and mark 'done' inside one "
    "`with ctx.world.ledger.transaction() as tx:` so they commit together",
    timeout=30.0,
    severe=True,
)
def post_survives_every_crash(ns: Namespace) -> None:
    _judge(ns, "post", (LEDGER_COMMIT, *POINTS))


@CHECKS.add(
    2,
    "a job can be delivered twice at the same moment (a lease ran out while the first "
    "worker was still busy): read the mark inside the same "
    "`with ctx.world.ledger.transaction() as tx:` that posts and marks, so the second "
    "delivery waits for the first and then sees 'done'",
    timeout=20.0,
    severe=True,
)
def post_survives_two_deliveries_at_once(ns: Namespace) -> None:
    _two_deliveries(ns, "post")


def _two_deliveries(ns: Namespace, which: str) -> None:
    """The job delivered to two workers at the same moment: one effect in the world."""
    [job] = CHARGE if which == "charge" else POST
    service = "payments" if which == "charge" else "ledger"
    with tempfile.TemporaryDirectory(prefix="labkit-ex05-", dir=ns.workdir) as tmp:
        got = ns.harness(HARNESS + "two_deliveries", which, tmp, list(job))
        with World(Path(tmp) / "world.db", FakeClock(LAB_EPOCH)) as world:
            entries = world.count(job[2], service)
    errors = got["handler_errors"]
    expect(
        entries == 1,
        _("exactly one charge after two deliveries of the job at the same moment")
        if which == "charge"
        else _("exactly one ledger entry after two deliveries of the job at the same moment"),
        (
            _("{entries} charge(s) (the deliveries ended: {deliveries})")
            if which == "charge"
            else _("{entries} entries (the deliveries ended: {deliveries})")
        ).format(entries=entries, deliveries="; ".join(got["deliveries"]))
        + (f"; {errors[0]}" if errors else ""),
        _(
            "two deliveries that both look first (payments.find, a ledger read) both find "
            "nothing and both charge: send idempotency_key=job.key, and the API itself "
            "answers the second with the first reply"
        )
        if which == "charge"
        else None,
    )
