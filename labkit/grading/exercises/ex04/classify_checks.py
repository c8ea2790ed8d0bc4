"""Exercise 4's checks of ``classify``: never sent, maybe done, permanent, and every
HTTP status."""

from __future__ import annotations

from labkit.grading.checks import Namespace, expect
from labkit.grading.exercises.ex04.policy import (
    CHECKS,
    MAYBE_DONE,
    NEVER_SENT,
    PERMANENT,
    _verdicts,
    http,
    verdict_for_status,
    verdicts,
)
from labkit.lang import _


@CHECKS.add(
    1,
    "never sent, safe to retry: a refused connection (ConnectionRefusedError), labkit's "
    "TransientError and its subclasses (unless ambiguous), 408, 429 and 503: use "
    "isinstance, not the exact class",
)
def classify_never_sent(ns: Namespace) -> None:
    _verdicts(
        ns,
        NEVER_SENT,
        "never_sent",
        _(
            "go through rules 1 to 4 in order with isinstance, on the error you are given: "
            "its own ambiguous flag and status, never those of the error it was raised from "
            "(__cause__, __context__)"
        ),
    )


@CHECKS.add(
    2,
    "maybe done, the request was sent and the answer lost: any error with a true "
    "`ambiguous` attribute (ResponseLost, checked before TransientError), any other "
    "TimeoutError or ConnectionError (a read timeout, a reset), and every 5xx but 503",
)
def classify_maybe_done(ns: Namespace) -> None:
    _verdicts(ns, MAYBE_DONE, "maybe_done")


@CHECKS.add(
    1,
    "bad input and other 4xx fail the same way every time: retrying only repeats "
    "the bug; anything unknown is permanent too",
)
def classify_permanent(ns: Namespace) -> None:
    _verdicts(ns, PERMANENT, "permanent")


@CHECKS.add(
    2,
    "408, 429 and 503 are never_sent; every other status from 500 to 599 is "
    "maybe_done; every other status is permanent",
)
def classify_every_status(ns: Namespace) -> None:
    # Numbers, not text: 5, 50, 5000 and 5030 begin with "5" but are no 5xx status
    # (str(status).startswith("5") or a comparison of strings calls them maybe_done).
    statuses = [*range(100, 600), 600, 601, 700, 999, 5, 50, 5000, 5030]
    got = verdicts(ns, [http(s) for s in statuses])
    want = [verdict_for_status(s) for s in statuses]
    wrong = [(s, g) for s, g, w in zip(statuses, got, want, strict=True) if g != w]
    # The same statuses as http.HTTPStatus members (an int subclass, as some client
    # libraries give them): type(status) is int misses them.
    enums = [408, 429, 503, 500, 502, 404]
    got = verdicts(ns, [{**http(s), "status_enum": True} for s in enums])
    wrong += [
        (f"{s} (http.HTTPStatus)", g)
        for s, g in zip(enums, got, strict=True)
        if g != verdict_for_status(s)
    ]
    expect(
        not wrong,
        _(
            "the right verdict for every HTTP status 100-599, as an int or an http.HTTPStatus "
            "member, and 'permanent' for 600 and above"
        ),
        _("{count} wrong, e.g. {examples}").format(
            count=len(wrong),
            examples=", ".join(
                _("{verdict} for HTTP {status}").format(verdict=repr(g), status=s)
                for s, g in wrong[:4]
            ),
        ),
    )
