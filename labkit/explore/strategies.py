"""Six ways to run "charge invoice 42 once", as handlers the crash explorer compares.

Every handler charges ``job.payload["amount"]`` cents to ``job.payload["customer"]``
and tags the effect with the job's key, so the world's records say how many times it
happened. They differ in what protects the charge when the worker dies:

==================  =================================================================
ack_first           the worker acknowledges the job, then charges (at-most-once)
ack_late            charge, then acknowledge; no protection (at-least-once)
check_then_act      look in our ledger, charge, then write the ledger: two transactions
same_transaction    the effect is local: entry and "done" mark in one transaction
idempotency_key     the payment API honours ``Idempotency-Key`` = the job key
reconcile           ledger "started" before the call; on a retry, ask the API
                    whether the charge exists before charging again
==================  =================================================================

The handlers that need points in the middle of their work fire them with
``ctx.point`` and say so with ``@fires``; the others use the worker's points (see
``labkit.worker``). They are module-level functions so a worker in a child process can
import them by path (``"labkit.explore.strategies:reconcile"``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from labkit.job import Job
from labkit.worker import Context, Handler, fires

KIND = "charge"
#: The points a handler that manages its own effect boundaries fires itself.
EFFECT_POINTS = ("before_effect", "after_effect", "before_commit", "after_commit")


def _args(job: Job) -> tuple[str, int]:
    return str(job.payload["customer"]), int(job.payload["amount"])


def ack_late(job: Job, ctx: Context) -> Any:
    """Charge with the key only as a tag: a second run charges again."""
    customer, amount = _args(job)
    return ctx.world.payments.charge(customer, amount, key=job.key)


#: ack_first runs the same plain handler; the worker acknowledges before calling it.
ack_first = ack_late


@fires(*EFFECT_POINTS)
def check_then_act(job: Job, ctx: Context) -> Any:
    """Check our ledger, charge, mark done: a crash between charge and mark repeats it."""
    customer, amount = _args(job)
    ledger = ctx.world.ledger
    if ledger.status(job.key) == "done":
        return {"skipped": "ledger says done"}
    ctx.point("before_effect")
    reply = ctx.world.payments.charge(customer, amount, key=job.key)
    ctx.point("after_effect")
    ctx.point("before_commit")
    ledger.mark(job.key, "done")
    ctx.point("after_commit")
    return reply


@fires(*EFFECT_POINTS)
def same_transaction(job: Job, ctx: Context) -> Any:
    """A local effect: the ledger entry and the done mark commit together or not at all."""
    customer, amount = _args(job)
    with ctx.world.ledger.transaction() as tx:
        if tx.status(job.key) == "done":
            return {"skipped": "already posted"}
        ctx.point("before_effect")
        reply = tx.post(customer, amount, key=job.key)
        ctx.point("after_effect")
        tx.mark(job.key, "done")
        ctx.point("before_commit")
    ctx.point("after_commit")
    return reply


def idempotency_key(job: Job, ctx: Context) -> Any:
    """Send the job key as Idempotency-Key: the API itself refuses to charge twice."""
    customer, amount = _args(job)
    return ctx.world.payments.charge(customer, amount, key=job.key, idempotency_key=job.key)


@fires(*EFFECT_POINTS)
def reconcile(job: Job, ctx: Context) -> Any:
    """Write intent first; when a previous attempt may have charged, ask before charging."""
    customer, amount = _args(job)
    ledger, payments = ctx.world.ledger, ctx.world.payments
    state = ledger.status(job.key)
    if state == "done":
        return {"skipped": "ledger says done"}
    if state == "started":
        found = payments.find(job.key)
        if found:
            ledger.mark(job.key, "done")
            return {**found[0].response, "reconciled": True}
    else:
        ledger.mark(job.key, "started")
    ctx.point("before_effect")
    reply = payments.charge(customer, amount, key=job.key)
    ctx.point("after_effect")
    ctx.point("before_commit")
    ledger.mark(job.key, "done")
    ctx.point("after_commit")
    return reply


@dataclass(frozen=True)
class Strategy:
    """A named way to run the charge: its handler, ack mode and the service it changes."""

    name: str
    handler: Handler
    ack: Literal["late", "first"]
    service: str
    summary: str

    @property
    def handlers(self) -> Mapping[str, Handler]:
        return {KIND: self.handler}


STRATEGIES: dict[str, Strategy] = {
    s.name: s
    for s in (
        Strategy("ack_first", ack_first, "first", "payments", "ack, then charge"),
        Strategy("ack_late", ack_late, "late", "payments", "charge, then ack"),
        Strategy(
            "check_then_act", check_then_act, "late", "payments", "ledger check, charge, mark"
        ),
        Strategy(
            "same_transaction", same_transaction, "late", "ledger", "local entry + mark, one tx"
        ),
        Strategy(
            "idempotency_key", idempotency_key, "late", "payments", "Idempotency-Key = job key"
        ),
        Strategy("reconcile", reconcile, "late", "payments", "intent, then look up before retry"),
    )
}
#: The strategies that must never duplicate nor lose, whatever the crash.
CORRECT = ("same_transaction", "idempotency_key", "reconcile")
