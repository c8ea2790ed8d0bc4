"""Harness for exercise 4: errors and seeded rngs built here, from plain descriptions.

A check describes an error as data, ``{"type": "HTTPError", "status": 503,
"retry_after": 120}``, and a random generator by its seed; the harness builds them
beside the student's code and returns what ``classify``, ``backoff`` and
``next_delay`` made of them.
"""

from __future__ import annotations

import asyncio
import errno
import http.client
import random
import socket
import ssl
import urllib.error
from collections.abc import MutableMapping
from http import HTTPStatus
from types import SimpleNamespace
from typing import Any

from labkit.errors import (
    ConnectionLost,
    IdempotencyConflict,
    PayloadError,
    PermanentError,
    StatementTimeout,
    StoreBusy,
    TransientError,
)
from labkit.grading.exercises import linesteps
from labkit.grading.exercises.common import fresh_state, need, outcome
from labkit.grading.exercises.described import ERRORS, build_error
from labkit.grading.exercises.wallclock import in_time_zone


class GatewayLost(TransientError):
    """A client library's own lost answer: a TransientError that says it is ambiguous."""

    ambiguous = True


class ProxyError(ConnectionError):
    """A client library's proxy error: a ConnectionError carrying the proxy's HTTP status."""


class DeadlineExceeded(TimeoutError):
    """A client library's own read timeout, named without the word "Timeout"."""


class ConnectTimeout(TimeoutError):
    """A client library's timeout named after the connect phase: still a TimeoutError, so
    maybe done by rule 4 (only a refusal says nobody listened), whatever its name says."""


class ProxyRefused(ConnectionRefusedError):
    """A client library's proxy error: a ConnectionRefusedError that may carry the proxy's
    HTTP status or the ambiguous flag (the proxy took the request, the answer was lost)."""


class PoolTimeout(TransientError, TimeoutError):
    """No connection came free in the client's pool in time: a TransientError that is
    also a TimeoutError, and nothing was sent."""


class ProxyAuthRequired(PermanentError, ConnectionError):
    """The proxy refused the credentials: a PermanentError that is also a ConnectionError."""


class BadResponse(ValueError):
    """A client library's error for an answer it could not use: a ValueError carrying the
    HTTP status the server gave (rule 3 reads it before rule 5's "ValueError")."""


#: Errors only this exercise describes, beside ``described.ERRORS``. A cancelled task
#: (asyncio.CancelledError, a BaseException) is no failure of the call: "everything else".
LOCAL_ERRORS: dict[str, type[BaseException]] = {
    cls.__name__: cls
    for cls in (
        GatewayLost,
        ProxyError,
        DeadlineExceeded,
        ConnectTimeout,
        ProxyRefused,
        PoolTimeout,
        ProxyAuthRequired,
        BadResponse,
        # labkit's own errors that are no TransientError: a payload that cannot be stored (a
        # ValueError) and a key reused with another payload (a bug): "everything else".
        PayloadError,
        IdempotencyConflict,
        # labkit's store errors, no TransientError: a TimeoutError (a busy database, a
        # statement cut off) and a ConnectionError (a dropped connection), by rule 4.
        StoreBusy,
        StatementTimeout,
        ConnectionLost,
        ConnectionAbortedError,
        asyncio.CancelledError,
        # The standard library's own: the server closed the connection without an answer
        # (a ConnectionResetError), whether or not it had done the work.
        http.client.RemoteDisconnected,
        # Errors the rules do not name, "everything else": a TLS failure (the connection
        # may have carried the request before it broke), a name that did not resolve, and
        # an HTTP protocol error (http.client.HTTPException, no ConnectionError).
        ssl.SSLError,
        ssl.SSLEOFError,
        # The connection closed in the middle of the answer (asyncio's IncompleteReadError
        # is one): the request went out before it, whatever the answer was.
        EOFError,
        socket.gaierror,
        http.client.HTTPException,
        http.client.IncompleteRead,
        # A bare OSError with an errno no subclass maps (EHOSTUNREACH, ENETUNREACH): no
        # ConnectionError, no TimeoutError, so "everything else" by the rules.
        OSError,
    )
}


def _build(spec: dict[str, Any]) -> BaseException:
    """``build_error``, plus this exercise's own classes, an ``ambiguous`` flag and an
    ``errno`` (a name such as ``"ETIMEDOUT"``, with ``strerror``: as a socket raises it)."""
    if spec["type"] == "ExceptionGroup":
        # The failures of an asyncio.TaskGroup, raised together: none of rules 1-4 names
        # a group, so it is "everything else", whatever its members are.
        group: BaseException = BaseExceptionGroup(
            spec.get("message", "unhandled errors in a TaskGroup"),
            [_build(member) for member in spec["members"]],
        )
        return group
    if spec["type"] == "URLError":
        # urllib's own: an OSError carrying the error it met in ``reason`` (a refusal, a
        # timeout). No rule names it: "everything else", whatever its reason is.
        return urllib.error.URLError(_build(spec["reason"]))
    if "args" in spec or "errno" in spec:
        kind = LOCAL_ERRORS.get(spec["type"]) or ERRORS[spec["type"]]
        # Built with the arguments its raiser gives it, e.g. SSLEOFError(8, "EOF occurred
        # in violation of protocol") or gaierror(-2, "Name or service not known"); an
        # errno by its name, as a socket raises it.
        args = spec.get("args") or [getattr(errno, spec["errno"]), spec["strerror"]]
        error: BaseException = kind(*args)
    elif spec["type"] in LOCAL_ERRORS:
        error = LOCAL_ERRORS[spec["type"]](spec.get("message", ""))
        if "status" in spec:
            error.status = spec["status"]  # type: ignore[attr-defined]
    else:
        error = build_error(spec)
    if "ambiguous" in spec:
        error.ambiguous = spec["ambiguous"]  # type: ignore[attr-defined]
    if "response" in spec:
        # A client library's answer kept on the error (error.response.status): the
        # answer's fields, not the error's status attribute.
        error.response = SimpleNamespace(**spec["response"])  # type: ignore[attr-defined]
    for name, value in spec.get("attrs", {}).items():
        # Attributes of a library's own (a decline code, a status_code): no HTTP status.
        setattr(error, name, value)
    if "retry_after" in spec:
        # On any error, as labkit's TransientError(retry_after=...) carries it, status or not.
        error.retry_after = spec["retry_after"]  # type: ignore[attr-defined]
    if spec.get("status_enum"):
        # As some client libraries give it: an http.HTTPStatus member, an int subclass.
        error.status = HTTPStatus(spec["status"])  # type: ignore[attr-defined]
    return error


def classify(values: MutableMapping[str, Any], specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``classify(error)`` for each described error, as outcomes."""
    with fresh_state(values):
        return [outcome(need(values, "classify"), _build(spec)) for spec in specs]


def backoff_draws(values: MutableMapping[str, Any], calls: list[list[Any]]) -> list[dict[str, Any]]:
    """For each ``[n, seed, base, cap, count]``: ``count`` draws from one ``Random(seed)``.

    ``base`` and ``cap`` None: ``backoff(n, rng)``, on the function's own defaults. Each
    result is ``{"returned": [delays]}`` or the outcome of the first call that raised.
    """
    out: list[dict[str, Any]] = []
    with fresh_state(values):
        for n, seed, base, cap, count in calls:
            rng = random.Random(seed)
            draws: list[Any] = []
            failed: dict[str, Any] | None = None
            for _ in range(count):
                given = () if base is None and cap is None else (base, cap)
                one = outcome(need(values, "backoff"), n, rng, *given)
                if "raised" in one:
                    failed = one
                    break
                draws.append(one["returned"])
            out.append(failed or {"returned": draws})
    return out


def leaves_random_alone(values: MutableMapping[str, Any], count: int) -> dict[str, Any]:
    """Whether ``backoff(n, Random(seed), 1.0, 60.0)`` for n in ``range(count)`` leaves the
    random module's own generator as it found it (no ``random.seed``, no ``random.uniform``).
    """
    with fresh_state(values):
        before = random.getstate()
        for n in range(count):
            one = outcome(need(values, "backoff"), n, random.Random(n), 1.0, 60.0)
            if "raised" in one:
                return one
        return {"returned": random.getstate() == before}


def next_delays(values: MutableMapping[str, Any], calls: list[dict[str, Any]]) -> list[Any]:
    """``next_delay(error, attempt, Random(seed), **kwargs)`` per call (``count`` times each).

    A call is ``{"error": spec, "attempt": n, "seed": s, "kwargs": {...}, "count": k}``;
    each result is a list of ``count`` outcomes drawn from one rng.
    """
    out = []
    with fresh_state(values):
        for call in calls:
            rng = random.Random(call.get("seed", 0))
            out.append(
                [
                    outcome(
                        need(values, "next_delay"),
                        _build(call["error"]),
                        call["attempt"],
                        rng,
                        **call.get("kwargs", {}),
                    )
                    for _ in range(call.get("count", 1))
                ]
            )
    return out


def next_delays_in_zone(
    values: MutableMapping[str, Any], calls: list[dict[str, Any]], tz: str
) -> list[Any]:
    """``next_delays`` with the local time zone set to ``tz``: the clock instants the
    checks pass (``now``, ``started_at``) are epoch seconds, the same in every zone."""
    with in_time_zone(tz):
        return next_delays(values, calls)


def _one_call(values: MutableMapping[str, Any], call: dict[str, Any]) -> Any:
    """A thunk for one described call: ``backoff`` or ``next_delay`` on a fresh
    ``Random(seed)`` (and error), built when the thunk runs."""

    def run() -> dict[str, Any]:
        rng = random.Random(call.get("seed", 0))
        if call["fn"] == "backoff":
            fn = need(values, "backoff")
            return outcome(fn, call["n"], rng, call.get("base", 1.0), call.get("cap", 60.0))
        fn = need(values, "next_delay")
        return outcome(fn, _build(call["error"]), call["attempt"], rng, **call.get("kwargs", {}))

    return run


def interleaved(
    values: MutableMapping[str, Any],
    first: dict[str, Any],
    second: dict[str, Any],
    limit: int = 40,
) -> dict[str, Any]:
    """Two described calls raced line by line (``linesteps.interleaved``): ``first``
    stopped after each of its lines of the student's code in turn while ``second`` runs
    whole. A call is ``{"fn": "backoff", "n", "seed", "base", "cap"}`` or ``{"fn":
    "next_delay", "error", "attempt", "seed", "kwargs"}``; each result an outcome (or
    ``{"hung": True}``)."""
    return linesteps.interleaved(values, _one_call(values, first), _one_call(values, second), limit)
