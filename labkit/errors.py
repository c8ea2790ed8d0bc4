"""The exceptions labkit raises, each one a sentence a student can act on.

An exception class's docstring is its default message, so most definitions are one line.
``SimulatedCrash`` derives from ``BaseException`` on purpose: a handler's
``except Exception`` must not be able to swallow a crash the lab injected.
"""

from __future__ import annotations

from typing import Any


class LabkitError(Exception):
    """Something went wrong in labkit."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or type(self).__name__).strip())


class PayloadError(LabkitError, ValueError):
    """The job payload cannot be stored: it must be JSON (dict, list, str, number, bool, None)."""


class StoreError(LabkitError):
    """The job database cannot be used as it is."""


class StoreBusy(StoreError, TimeoutError):
    """The job database stayed locked by another connection longer than the busy timeout."""

    # The change was not committed, so RetryPolicy calls it never-sent and a handler
    # that meets it is retried.


class StatementTimeout(StoreBusy):
    """The database ended a statement that ran past its ``statement_timeout``: no lock was
    waited for, the statement was slow (or the timeout set on the role is too short).
    Nothing was committed, so it is retried like ``StoreBusy``."""


class ConnectionLost(StoreError, ConnectionError):
    """The connection to the database was lost during the call; the next call reconnects."""

    def __init__(self, message: str | None = None, *, may_have_committed: bool = False) -> None:
        super().__init__(message)
        #: True when the drop came while committing: the change may or may not be saved.
        self.may_have_committed = may_have_committed
        # The retry policy calls a drop while committing maybe-done (retried only under a
        # job's natural key) and any other drop never-sent: nothing was saved.
        self.ambiguous = may_have_committed


class NotFound(LabkitError, LookupError):
    """No job with that id."""


class InvalidTransition(LabkitError):
    """That state change is not allowed by the job contract."""


class IdempotencyConflict(LabkitError):
    """The same idempotency key was used with a different payload: this is a bug, not a retry."""


class LeaseLost(LabkitError):
    """The lease expired and another worker took the job; this worker's result is discarded."""


class CircuitOpen(LabkitError):
    """The circuit breaker for this dependency is open; calls are refused until it cools down."""

    def __init__(self, message: str | None = None, *, retry_at: float | None = None) -> None:
        super().__init__(message)
        self.retry_at = retry_at


class AlreadyRunning(LabkitError):
    """Another instance already holds the lock; this one must not run."""


class TransientError(LabkitError):
    """A temporary failure that did nothing (refused, 429, 503): the same call may succeed later."""

    #: True when the effect may already have happened (a timeout after sending): the
    #: retry policy then calls it maybe-done, not never-sent.
    ambiguous = False

    def __init__(
        self,
        message: str | None = None,
        *,
        retry_after: float | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.status = status


class ResponseLost(TransientError):
    """The call timed out after it was sent: the effect may or may not have happened."""

    ambiguous = True


class PermanentError(LabkitError):
    """A failure that retrying cannot fix (400, 401, 403, 404, validation): fix the cause."""

    def __init__(self, message: str | None = None, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class SimulatedCrash(BaseException):
    """The lab crashed this worker on purpose at a fault point (not an Exception)."""

    def __init__(self, point: str = "?", detail: Any = None) -> None:
        super().__init__(f"simulated crash at {point}" + (f" ({detail})" if detail else ""))
        self.point = point
