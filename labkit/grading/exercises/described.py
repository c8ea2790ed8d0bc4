"""Errors built from plain descriptions, beside the student's code (exercises 4 and 6).

A check describes an error as data, ``{"type": "HTTPError", "status": 503,
"retry_after": 120}``; ``build_error`` builds it in the student's process, so no
exception object ever crosses the channel. The classes stand for a client library's own
errors: subclasses the student never saw.
"""

from __future__ import annotations

import errno
import os
from typing import Any

from labkit.errors import PermanentError, ResponseLost, TransientError


class HTTPError(Exception):
    """An error from an HTTP client, carrying its status code (and Retry-After)."""

    def __init__(self, status: Any, retry_after: Any = None) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.retry_after = retry_after


class RateLimited(TransientError):
    """A library's own transient error: a subclass the student never saw."""


class BadRequest(PermanentError):
    """A library's own permanent error."""


class ReadTimeout(TimeoutError):
    """A client library's read timeout: the request went out, the answer did not come."""


class QuotaExceeded(HTTPError):
    """An HTTP error subclass, as client libraries define them (status 429)."""


ERRORS: dict[str, type[BaseException]] = {
    cls.__name__: cls
    for cls in (
        TimeoutError,
        ConnectionError,
        ConnectionResetError,
        ConnectionRefusedError,
        BrokenPipeError,
        TransientError,
        ResponseLost,
        ReadTimeout,
        PermanentError,
        RateLimited,
        BadRequest,
        ValueError,
        KeyError,
        TypeError,
        ZeroDivisionError,
        PermissionError,
        FileNotFoundError,
        RuntimeError,
    )
}


def build_error(spec: dict[str, Any]) -> BaseException:
    """The exception a description names; ``"cause"`` (a description too) chains it,
    as ``raise error from cause`` does, with the traceback that raising leaves;
    ``"context"`` (a description) is its ``__context__``, as ``raise error`` inside an
    ``except`` block leaves it."""
    kind = spec["type"]
    if kind in ("HTTPError", "QuotaExceeded"):
        cls = HTTPError if kind == "HTTPError" else QuotaExceeded
        error: BaseException = cls(spec["status"], spec.get("retry_after"))
    elif kind == "ConnectionRefusedError" and "message" not in spec:
        # As a socket raises it, with its errno: code that recognises a refusal by
        # errno.ECONNREFUSED is right, and must not be graded on a bare instance. Its
        # words are the C library's, or ``"strerror"`` (a socket's in another locale).
        words = spec.get("strerror", os.strerror(errno.ECONNREFUSED))
        error = ConnectionRefusedError(errno.ECONNREFUSED, words)
    else:
        error = ERRORS[kind](spec.get("message", ""))
        if "status" in spec:
            error.status = spec["status"]  # type: ignore[attr-defined]
    if "context" in spec:
        error.__context__ = build_error(spec["context"])
    if "cause" in spec:
        try:
            raise error from build_error(spec["cause"])
        except BaseException as raised:  # noqa: BLE001 - the very error built above
            return raised
    return error
