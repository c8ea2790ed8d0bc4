"""Handlers that take real time, for tests whose workers hold live leases.

A child process imports them by path (``slow_handlers:sleep_for``).
"""

from __future__ import annotations

from typing import Any

from labkit.job import Job
from labkit.worker import Context


def sleep_for(job: Job, ctx: Context) -> Any:
    """Work for ``payload["seconds"]`` of real time (the store's clock sleeps for real)."""
    ctx.clock.sleep(float(job.payload["seconds"]))
    return {"slept": job.payload["seconds"]}
