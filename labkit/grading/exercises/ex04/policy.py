"""What exercise 4's checks share: ``CHECKS``, on which ``classify_checks``,
``delay_checks`` and ``next_delay_checks`` register; the error tables; and the student's
functions called through the harness."""

from __future__ import annotations

from typing import Any

from labkit.grading.checks import CheckFailed, Checks, Namespace, expect
from labkit.grading.exercises.helpers import SEED, raised_text
from labkit.lang import _

CHECKS = Checks("ex04", "retry policy", needs=("classify", "backoff", "next_delay"))

HARNESS = "labkit.grading.exercises.ex04.harness:"


def http(status: Any, retry_after: Any = None) -> dict[str, Any]:
    return {"type": "HTTPError", "status": status, "retry_after": retry_after}


NEVER_SENT = {
    "ConnectionRefusedError()": {"type": "ConnectionRefusedError"},
    # A socket's refusal in a Portuguese locale: its errno says refused, its words do not.
    "ConnectionRefusedError(ECONNREFUSED, 'Conexão recusada')": {
        "type": "ConnectionRefusedError",
        "strerror": "Conexão recusada",
    },
    "TransientError()": {"type": "TransientError"},
    "HTTP 429": http(429),
    "HTTP 503": http(503),
    "HTTP 408": http(408),
    "RateLimited() (a TransientError subclass)": {"type": "RateLimited"},
    "QuotaExceeded(429) (an HTTPError subclass)": {"type": "QuotaExceeded", "status": 429},
    "TransientError(status=502) (labkit's own says nothing happened)": {
        "type": "TransientError",
        "status": 502,
    },
    # A flag of None is no true flag (rule 1 needs a true one): "is not False" takes it for
    # a lost answer, and a rate limit is never retried without a key.
    "HTTP 429 with ambiguous = None (a flag that is not true)": {**http(429), "ambiguous": None},
    # A refusal raised by hand (a library's own, a test double): no errno, the class says it.
    "ConnectionRefusedError('connection refused') (raised without an errno)": {
        "type": "ConnectionRefusedError",
        "message": "connection refused",
    },
    # A TransientError that is also a TimeoutError: rule 2 comes before rule 4.
    "PoolTimeout() (a TransientError that is also a TimeoutError)": {"type": "PoolTimeout"},
    # A client library's own refusal (a proxy's): a ConnectionRefusedError subclass is a
    # ConnectionRefusedError to isinstance, never sent like the built-in one.
    "ProxyRefused() (a library's ConnectionRefusedError subclass)": {"type": "ProxyRefused"},
    # A bool is an int to isinstance, but no HTTP status: True read as status 1 calls a
    # refusal permanent.
    "ConnectionRefusedError('connection refused') with status = True (a bool, no status)": {
        "type": "ConnectionRefusedError",
        "message": "connection refused",
        "status": True,
    },
    # A second try refused after a lost answer, raised from it: rule 1 reads the flag of the
    # error given, not of the one it was raised from. Nothing reached the server this time.
    "ConnectionRefusedError() raised from a ResponseLost (the retry refused)": {
        "type": "ConnectionRefusedError",
        "cause": {"type": "ResponseLost"},
    },
    # The same retry refused inside the handler of the lost answer (implicit chaining,
    # __context__): still only the flag of the error given counts.
    "ConnectionRefusedError() raised inside `except ResponseLost` (the retry refused)": {
        "type": "ConnectionRefusedError",
        "context": {"type": "ResponseLost"},
    },
}
MAYBE_DONE = {
    "TimeoutError('read timed out')": {"type": "TimeoutError", "message": "read timed out"},
    "ReadTimeout() (a library's TimeoutError subclass)": {"type": "ReadTimeout"},
    "DeadlineExceeded() (a library's TimeoutError subclass)": {"type": "DeadlineExceeded"},
    # Named after the connect phase, still a timeout: rule 4 makes only a refusal never sent.
    "ConnectTimeout() (a library's TimeoutError subclass named after the connect phase)": {
        "type": "ConnectTimeout"
    },
    "ConnectionResetError()": {"type": "ConnectionResetError"},
    "BrokenPipeError()": {"type": "BrokenPipeError"},
    "ConnectionAbortedError()": {"type": "ConnectionAbortedError"},
    "ConnectionError()": {"type": "ConnectionError"},
    # The standard library's own ConnectionResetError: a server (or a proxy) that closed
    # the connection without answering may have done the work first.
    "http.client.RemoteDisconnected() (closed without a response)": {
        "type": "RemoteDisconnected",
        "message": "Remote end closed connection without response",
    },
    "ResponseLost() (a TransientError whose answer was lost)": {"type": "ResponseLost"},
    "HTTP 500": http(500),
    "HTTP 502": http(502),
    "HTTP 504": http(504),
    "HTTP 599": http(599),
    "GatewayLost() (a library's TransientError with ambiguous = True)": {"type": "GatewayLost"},
    "HTTP 503 with ambiguous = True (the answer was lost after it was sent)": {
        **http(503),
        "ambiguous": True,
    },
    "HTTP 503 with ambiguous = 'lost after send' (a true value that is not True)": {
        **http(503),
        "ambiguous": "lost after send",
    },
    # Rule 1 comes before labkit's classes, PermanentError too: the flag says the request
    # was sent, whatever the class says about sending it again.
    "PermanentError(ambiguous = True) (the ambiguous flag is rule 1, before the classes)": {
        "type": "PermanentError",
        "ambiguous": True,
    },
    # A socket's own reset, with its errno: the peer dropped the connection after it may
    # have read the request (an errno says how it broke, not whether it was sent).
    "ConnectionResetError(ECONNRESET, 'Connection reset by peer') (a socket's reset)": {
        "type": "ConnectionResetError",
        "errno": "ECONNRESET",
        "strerror": "Connection reset by peer",
    },
    # A socket's own timeout: its words say "Connection", not whether the request went out.
    "TimeoutError(ETIMEDOUT, 'Connection timed out') (a socket's timeout)": {
        "type": "TimeoutError",
        "errno": "ETIMEDOUT",
        "strerror": "Connection timed out",
    },
}
TLS_EOF = "ssl.SSLEOFError(8, 'EOF occurred in violation of protocol') (a TLS connection broken)"
EOF_MID_ANSWER = "EOFError() (the connection closed mid-answer, as asyncio.IncompleteReadError)"
DNS_FAILED = "socket.gaierror(-2, 'Name or service not known') (a name that did not resolve)"
PERMANENT = {
    "PermanentError()": {"type": "PermanentError"},
    "ValueError('bad amount')": {"type": "ValueError", "message": "bad amount"},
    "KeyError('customer')": {"type": "KeyError", "message": "customer"},
    "HTTP 400": http(400),
    "HTTP 401": http(401),
    "HTTP 404": http(404),
    "HTTP 422": http(422),
    "BadRequest() (a PermanentError subclass)": {"type": "BadRequest"},
    "TypeError()": {"type": "TypeError"},
    "PermissionError() (an OSError, not a connection error)": {"type": "PermissionError"},
    "FileNotFoundError()": {"type": "FileNotFoundError"},
    "HTTP 499": http(499),
    "PermanentError(status=503) (labkit's own says nothing will change)": {
        "type": "PermanentError",
        "status": 503,
    },
    "BadRequest(status=500) (a PermanentError subclass)": {"type": "BadRequest", "status": 500},
    # A cancelled task (a shutdown, a caller gone) may have sent its request: calling it
    # never_sent retries it without a key.
    "asyncio.CancelledError() (the task was cancelled)": {"type": "CancelledError"},
    # labkit's own errors are not all transient: rule 2 names TransientError and its
    # subclasses only, so labkit's other errors go by the rules after it (rule 5 here).
    "labkit's PayloadError() (a ValueError, no TransientError)": {"type": "PayloadError"},
    "labkit's IdempotencyConflict() (a key reused with another payload: a bug)": {
        "type": "IdempotencyConflict"
    },
    # A PermanentError that is also a ConnectionError: rule 2 comes before rule 4.
    "ProxyAuthRequired() (a PermanentError that is also a ConnectionError)": {
        "type": "ProxyAuthRequired"
    },
    # A status that is not an int is not read (rule 3 says "when it is an int"): int()
    # on it makes '503' retryable, and raises on a reason phrase.
    "an HTTP error whose status is the text '503'": http("503"),
    "an HTTP error whose status is the float 503.0": http(503.0),
    "an HTTP error whose status is the text 'Service Unavailable'": http("Service Unavailable"),
    # A TaskGroup's failures raised together: no rule names a group. Judged by its most
    # hopeful member, a read timeout beside a refusal is retried without a key.
    "ExceptionGroup([TimeoutError, ConnectionRefusedError]) (an asyncio.TaskGroup's)": {
        "type": "ExceptionGroup",
        "members": [
            {"type": "TimeoutError", "message": "read timed out"},
            {"type": "ConnectionRefusedError"},
        ],
    },
    "ExceptionGroup([RateLimited()]) (one transient member, still a group)": {
        "type": "ExceptionGroup",
        "members": [{"type": "RateLimited"}],
    },
    # No rule names them: "everything else". A TLS connection that broke (an OSError, no
    # ConnectionError) may have carried the request first; called never_sent, it is
    # retried without a key.
    TLS_EOF: {"type": "SSLEOFError", "args": [8, "EOF occurred in violation of protocol"]},
    "ssl.SSLError(1, 'record layer failure')": {
        "type": "SSLError",
        "args": [1, "record layer failure"],
    },
    DNS_FAILED: {"type": "gaierror", "args": [-2, "Name or service not known"]},
    # An end of stream in the middle of the answer: the request went out first, so called
    # never sent (the connection "just dropped"), a charge that went through runs twice.
    EOF_MID_ANSWER: {"type": "EOFError", "message": "connection closed mid-answer"},
    # http.client's own protocol errors are no ConnectionError (RemoteDisconnected aside).
    "http.client.IncompleteRead() (the body cut short)": {"type": "IncompleteRead"},
    "http.client.HTTPException('bad status line')": {
        "type": "HTTPException",
        "message": "bad status line",
    },
    # An OSError with an errno is no connection error for that: EACCES is not ETIMEDOUT.
    "PermissionError(EACCES, 'Permission denied') (an OSError with an errno)": {
        "type": "PermissionError",
        "errno": "EACCES",
        "strerror": "Permission denied",
    },
}
#: The rules' "everything else" that a policy may take for never sent: retried without a
#: key, a TLS failure or an end of stream mid-answer repeats a charge that may have gone
#: through before it broke. (A
#: failed name lookup sent nothing: called never sent, it breaks rule 5 only, which
#: classify_permanent holds it to.)
UNNAMED_NEVER_SENT_BY_MISTAKE = (TLS_EOF, EOF_MID_ANSWER)
#: An error that never reached the server, for the checks of the waiting rules.
REFUSED = {"type": "ConnectionRefusedError"}


def verdict_for_status(status: int) -> str:
    if status in (408, 429, 503):
        return "never_sent"
    return "maybe_done" if 500 <= status <= 599 else "permanent"


def _results(results: list[dict[str, Any]], what: str) -> list[Any]:
    """The returned values; the first student exception fails the check, named."""
    for result in results:
        if "raised" in result:
            raise CheckFailed(
                _("{call} to return a value").format(call=what),
                raised_text(result),
            )
    return [r["returned"] for r in results]


def verdicts(ns: Namespace, specs: list[dict[str, Any]]) -> list[Any]:
    """What the student's ``classify`` returned for each described error."""
    return _results(ns.harness(HARNESS + "classify", specs), "classify")


def _verdicts(
    ns: Namespace, table: dict[str, dict[str, Any]], want: str, hint: str | None = None
) -> None:
    got = verdicts(ns, list(table.values()))
    wrong = {name: g for name, g in zip(table, got, strict=True) if g != want}
    expect(
        not wrong,
        _("{verdict} for {errors}").format(verdict=repr(want), errors=", ".join(table)),
        "; ".join(
            _("{verdict} for {error}").format(verdict=repr(g), error=name)
            for name, g in wrong.items()
        ),
        hint,
    )


def draws(
    ns: Namespace, n: int, seed: int, base: float | None, cap: float | None, count: int
) -> list[float]:
    """``count`` draws of ``backoff(n, rng, base, cap)`` from one ``Random(seed)``; with
    ``base`` and ``cap`` None, of ``backoff(n, rng)`` on its own defaults."""
    [result] = ns.harness(HARNESS + "backoff_draws", [[n, seed, base, cap, count]])
    call = (
        f"backoff({n}, rng)"
        if base is None or cap is None
        else f"backoff({n}, rng, base={base:g}, cap={cap:g})"
    )
    [values] = _results([result], call)
    return list(values)


def delays(
    ns: Namespace, error: dict[str, Any], attempt: int, count: int = 1, **kwargs: Any
) -> list[Any]:
    call = {"error": error, "attempt": attempt, "seed": SEED, "kwargs": kwargs, "count": count}
    [results] = ns.harness(HARNESS + "next_delays", [call])
    return _results(results, f"next_delay(attempt={attempt})")


def delays_for(ns: Namespace, cases: list[tuple[dict[str, Any], int, dict[str, Any]]]) -> list[Any]:
    """One ``next_delay`` per ``(error, attempt, kwargs)``, each from a fresh ``Random(SEED)``,
    in one call to the harness."""
    calls = [
        {"error": error, "attempt": attempt, "seed": SEED, "kwargs": kwargs, "count": 1}
        for error, attempt, kwargs in cases
    ]
    results = ns.harness(HARNESS + "next_delays", calls)
    return [
        _results(result, f"next_delay(attempt={attempt})")[0]
        for result, (_error, attempt, _kwargs) in zip(results, cases, strict=True)
    ]


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
