"""A student's own handler, in a module of their own: labkit is not edited to break it.

It charges, fires a point the student named, then records the charge in the ledger.
A child process imports it by path (``student_handlers:charge_then_note``).
"""

from __future__ import annotations

from typing import Any

from labkit.job import Job
from labkit.worker import Context


def charge_then_note(job: Job, ctx: Context) -> Any:
    """Charge with the job key as Idempotency-Key, then note it in the ledger."""
    customer, amount = str(job.payload["customer"]), int(job.payload["amount"])
    reply = ctx.world.payments.charge(customer, amount, key=job.key, idempotency_key=job.key)
    ctx.point("between_charge_and_note")
    ctx.world.ledger.mark(job.key, "charged")
    return reply


def charge_twice_unsafely(job: Job, ctx: Context) -> Any:
    """Charge without a key, then reach the student's point: a crash there repeats it."""
    customer, amount = str(job.payload["customer"]), int(job.payload["amount"])
    reply = ctx.world.payments.charge(customer, amount, key=job.key)
    ctx.point("between_charge_and_note")
    return reply
