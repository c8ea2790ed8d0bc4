"""What exercise 10's checks share: ``CHECKS``, on which ``request_checks`` (POST)
and ``status_checks`` (GET) register, and the requests that end a server: one posted to
a server set to die at a crash point (the harness's test points), and one posted while
its job database is down, which must be refused with nothing stored."""

from __future__ import annotations

import contextlib
import signal
import subprocess
from pathlib import Path
from typing import Any

import httpx

from labkit.grading.checks import Checks, Namespace, expect
from labkit.grading.exercises.ex10.served import App, accepted_id, jobs_for
from labkit.lang import _

CHECKS = Checks("ex10", "async request-reply over HTTP", lanes=2)


def crash_at_202(
    ns: Namespace,
    app: App,
    body: Any,
    key: str,
    what: str | None = None,
    hint: str | None = None,
) -> None:
    """POST to a server that dies as its 202 starts; fail unless it really died there
    (``what`` and ``hint`` as ``crash_while_posting`` takes them)."""
    crash_while_posting(
        app,
        body,
        key,
        "kill at 202",
        _("the server killed at the moment it started the 202 (the check's crash point)"),
        what,
        hint,
    )


def crash_while_posting(
    app: App,
    body: Any,
    key: str,
    point: str,
    expected: str,
    what: str | None = None,
    hint: str | None = None,
) -> None:
    """POST to a server set to die at ``point`` (the harness's ``FAULT fired <point>``
    line); fail, expecting ``expected``, unless it really died there. ``what`` and
    ``hint``: what the request is, and what to do, when it was answered instead (a 5xx
    too, when a ``hint`` says why)."""
    try:
        reply = app.post(body, key=key, raw=hint is not None)
    except httpx.TransportError:
        reply = None
    if reply is not None:
        accepted_id(reply, what or _("the report request"), hint)  # not a 202: say so
    with contextlib.suppress(subprocess.TimeoutExpired):
        app.proc.wait(30)
    fired = app.fired(point)
    expect(
        app.proc.returncode == -signal.SIGKILL and fired,
        expected,
        _("exit code {code}, crash point fired: {fired}").format(
            code=app.proc.returncode, fired=fired
        ),
        "keep `app = install(FastAPI(...))` at the top of ex10_app.py",
    )


def nothing_stored_nothing_accepted(app: App, db: Path) -> tuple[dict[str, str], str]:
    """POST while the app's store is down: a 5xx and no job, or the check fails. The
    request's body and Idempotency-Key, for the client's retry.

    The server dies if it starts a success answer (``crash_at_202``), so a 202 for a
    request it could not store ends the server as well as the check."""
    body = {"month": "2026-02", "sent": "while the store was down"}
    with app.store_down():
        try:
            reply: httpx.Response | None = app.post(body, key="down-1", raw=True)
        except httpx.TransportError:
            reply = None
    fired = app.fired("store down at enqueue")
    answer = (
        _("no answer: the server began a success answer, and the check's crash point killed it")
        if reply is None
        else f"{reply.status_code} {reply.text[:160]}"
    )
    failed = reply is not None and reply.status_code >= 500
    expect(
        fired and failed and not jobs_for(db, "alice", body),
        _(
            "with the job database down (store.enqueue raised StoreBusy), a 500 or 503 and "
            "no job: the client keeps the request and sends it again later"
        ),
        _("{answer}; store.enqueue called and failed: {fired}").format(answer=answer, fired=fired),
        _(
            "let an error from store.enqueue propagate (FastAPI answers 500), or answer 503 "
            "with a Retry-After: a 2xx tells the client its request was taken, a 4xx that it "
            "was wrong, and either way the client drops a request nobody stored"
        ),
    )
    return body, "down-1"
