"""labkit: the Resilient Jobs Lab's toolkit.

``from labkit import JobStore, FakeClock`` is where every lesson starts; ``Worker``,
``World`` and ``FaultPlan`` are the next things it reaches for. Everything else lives in
its own module (``labkit.retry``, ``labkit.lock``, ``labkit.explore``...).
"""

from labkit.clock import FakeClock, SystemClock
from labkit.errors import (
    AlreadyRunning,
    CircuitOpen,
    IdempotencyConflict,
    LabkitError,
    LeaseLost,
    PayloadError,
    PermanentError,
    ResponseLost,
    SimulatedCrash,
    StoreError,
    TransientError,
)
from labkit.faults import FaultPlan
from labkit.job import Job, JobState
from labkit.keys import fingerprint, operation_key
from labkit.retry import RetryPolicy
from labkit.store import JobStore
from labkit.worker import Worker
from labkit.world import World

__all__ = [
    "AlreadyRunning",
    "CircuitOpen",
    "FakeClock",
    "FaultPlan",
    "IdempotencyConflict",
    "Job",
    "JobState",
    "JobStore",
    "LabkitError",
    "LeaseLost",
    "PayloadError",
    "PermanentError",
    "ResponseLost",
    "RetryPolicy",
    "SimulatedCrash",
    "StoreError",
    "SystemClock",
    "TransientError",
    "Worker",
    "World",
    "fingerprint",
    "operation_key",
]
