"""Exercise 5's zoo: each plausible wrong solution loses the check named after it.

Exercise 5 is about a handler safe against a crash after the effect. Each entry
overrides one or two functions of the reference solution with a classic mistake, then
runs every public and hidden check; ``gradingkit.assert_caught_by_name`` says what the
named check must report. ``test_zoo.py`` checks the zoo as a whole.
"""

from __future__ import annotations

import pytest
from gradingkit import assert_caught_by_name

ZOO: list[tuple[str, str, str, str]] = [
    # (exercise, name, the check that must fail, source replacing the reference)
    (
        "ex05",
        "no idempotency key (at-least-once)",
        "charge_survives_crash_after_effect",
        """
        def charge_handler(job, ctx):
            return ctx.world.payments.charge(job.payload["customer"], job.payload["amount"],
                                             key=job.key)
    """,
    ),
    (
        "ex05",
        "check-then-act in two transactions",
        "charge_survives_crash_after_effect",
        """
        def charge_handler(job, ctx):
            if ctx.world.ledger.status(job.key) == "done":
                return {"skipped": True}
            reply = ctx.world.payments.charge(job.payload["customer"], job.payload["amount"],
                                              key=job.key)
            ctx.world.ledger.mark(job.key, "done")
            return reply
    """,
    ),
    (
        "ex05",
        "a new idempotency key per attempt",
        "charge_survives_lost_response",
        """
        import uuid
        def charge_handler(job, ctx):
            return ctx.world.payments.charge(job.payload["customer"], job.payload["amount"],
                                             key=job.key, idempotency_key=uuid.uuid4().hex)
    """,
    ),
    (
        "ex05",
        "ack before the effect",
        "charge_survives_crash_after_commit",
        """
        def choose_ack():
            return "first"
    """,
    ),
    (
        "ex05",
        "ledger entry and mark in two transactions",
        "post_survives_every_crash",
        """
        def post_handler(job, ctx):
            ledger = ctx.world.ledger
            if ledger.status(job.key) == "done":
                return {"skipped": "already posted"}
            with ledger.transaction() as tx:
                reply = tx.post(job.payload["customer"], job.payload["amount"], key=job.key)
            ledger.mark(job.key, "done")
            return reply
    """,
    ),
    (
        "ex05",
        "check, post and mark in three separate transactions",
        "post_survives_every_crash",
        """
        def post_handler(job, ctx):
            ledger = ctx.world.ledger
            with ledger.transaction() as tx:
                done = tx.status(job.key) == "done"
            if done:
                return {"skipped": "already posted"}
            with ledger.transaction() as tx:
                reply = tx.post(job.payload["customer"], job.payload["amount"], key=job.key)
            with ledger.transaction() as tx:
                tx.mark(job.key, "done")
            return reply
    """,
    ),
    (
        "ex05",
        "a typo in the handler (an AttributeError the worker retries)",
        "charge_survives_crash_after_effect",
        """
        def charge_handler(job, ctx):
            return ctx.world.payment.charge(job.payload["customer"], job.payload["amount"],
                                            key=job.key, idempotency_key=job.key)
    """,
    ),
    (
        "ex05",
        "mark checked in its own transaction before posting (two deliveries both post)",
        "post_survives_two_deliveries_at_once",
        """
        def post_handler(job, ctx):
            ledger = ctx.world.ledger
            if ledger.status(job.key) == "done":
                return {"skipped": "already posted"}
            with ledger.transaction() as tx:
                reply = tx.post(job.payload["customer"], job.payload["amount"], key=job.key)
                tx.mark(job.key, "done")
            return reply
    """,
    ),
    (
        "ex05",
        "one constant idempotency key",
        "two_invoices_two_charges",
        """
        def charge_handler(job, ctx):
            return ctx.world.payments.charge(job.payload["customer"], job.payload["amount"],
                                             key=job.key, idempotency_key="charge")
    """,
    ),
]


#: What the named check must say it expected, for each mistake (see test_zoo.py).
SAYS: dict[str, str] = {
    "no idempotency key (at-least-once)": "exactly one charge after a crash",
    "check-then-act in two transactions": "exactly one charge after a crash",
    "a new idempotency key per attempt": "exactly one charge after a lost reply",
    "ack before the effect": "exactly one charge after a crash at after_commit",
    "ledger entry and mark in two transactions": "after the first ledger commit",
    "check, post and mark in three separate transactions": "ledger commit number 2",
    "a typo in the handler (an AttributeError the worker retries)": "to fire",
    "mark checked in its own transaction before posting (two deliveries both post)": (
        "two deliveries of the job at the same moment"
    ),
    "one constant idempotency key": "one charge per invoice",
}

#: What the feedback must name in its "got" line, where the expectation alone would not.
GOT = {
    "a typo in the handler (an AttributeError the worker retries)": (
        "your code raised AttributeError"
    ),
}


@pytest.mark.parametrize(
    ("exercise", "mistake", "check", "source"), ZOO, ids=[f"{e}: {m}" for e, m, _, _ in ZOO]
)
def test_wrong_solution_fails_the_check_that_names_its_mistake(
    exercise: str, mistake: str, check: str, source: str
) -> None:
    assert_caught_by_name(exercise, mistake, check, source, SAYS[mistake], GOT.get(mistake))
