"""labkit: the Resilient Jobs Lab's toolkit.

``from labkit import JobStore, FakeClock`` is where every lesson starts.
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
from labkit.job import Job, JobState
from labkit.keys import fingerprint, operation_key
from labkit.retry import RetryPolicy
from labkit.store import JobStore

__all__ = [
    "AlreadyRunning",
    "CircuitOpen",
    "FakeClock",
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
    "fingerprint",
    "operation_key",
]
