"""Async request-reply over HTTP: accept a job with 202, let only its owner poll or cancel it.

``create_app(db_path, ...)`` builds a FastAPI app over a labkit job database:

- ``POST /jobs/{kind}`` with a JSON object: the job is committed first, then the answer
  is ``202 Accepted`` with ``{"job_id": ...}``, a ``Location`` of its status and a
  ``Retry-After`` saying when to poll. An ``Idempotency-Key`` header makes a retried POST
  return the same job, marked ``Idempotent-Replayed: true`` (keys are scoped to the
  caller, as Stripe scopes them to an account). The key may come quoted, as the IETF
  draft's String (``"8e03978e-..."``), or bare, as Stripe's clients send it: both are
  the same key; a malformed quoted value is ``400`` saying what is wrong. The same key
  with another body is ``422`` and changes nothing; the same key while its first request
  is still being handled is ``409`` (both as the draft says). A body with a secret in
  it is ``422`` naming each field's path and the kind of secret, and stores nothing: a
  field named like a credential (``password``, ``auth``, ``otp``, or ``password``
  spelled with a Cyrillic letter or a zero-width space) or a value shaped like one (a
  bearer token, a JWT, a PEM key, a URL with its password, ``password=`` in a note, a
  vendor key, a card number), by the rules ``labkit.redact`` scrubs stored errors with.
  A job carries a reference to a secret (``credential_id``), which the worker resolves.
- ``GET /jobs/{id}``: state, attempts, next attempt time, sanitized error and result,
  never the payload. Only the caller who created the job sees it; anyone else gets the
  same ``404`` as for an id that does not exist, so ids leak nothing.
- ``DELETE /jobs/{id}``: a job that is not running (pending, or waiting for a retry) is
  cancelled; a running or finished one is ``409`` with the reason.
- ``GET /metrics``: the store's Prometheus metrics (``labkit.metrics``), to callers with a
  token like every route but ``/healthz`` (a scrape config sends it as
  ``authorization: credentials``).
- Before any body is read, a request must show a valid token (``401``) and, for a
  ``POST``, a ``Content-Length`` (``411``) no larger than ``MAX_BODY_BYTES`` (``413``):
  an anonymous 200 MiB upload costs the server nothing. A database another writer holds
  for over ``REQUEST_BUSY_S`` is a ``503`` with ``Retry-After``, and an id out of the
  database's range the same ``404`` as any missing id.
- Every refusal names the field and the fault and never echoes what was sent, FastAPI's
  validation errors included (``labkit.integrations.http.refusals``).
- What a connection may cost the server (deadlines for a request's head and body, a
  cap on connections) is the server's part: ``labkit.integrations.http.serve`` starts
  uvicorn with ``labkit.integrations.http.connections.ConnectionLimits``.
- Every answer carries ``X-Request-Id``: the caller's, or one the service made. The id of
  the request that created a job is kept beside its owner and reaches every log line
  about the job (``labkit.integrations.http.correlation``); it is not part of the
  payload, so a retry with a new request id still replays the same job.

The routes are thin: the operations are ``JobService`` (accept, status, cancel, per owner)
in ``labkit.integrations.http.operations``, usable without a server.

Callers are identified by a bearer token (``LAB_TOKENS`` in the lab; an identity
provider in production). The owner and the key are kept in the ``http_requests`` table,
written in the same transaction as the job. A fault plan may fire ``after_commit``
between that commit and the answer (``LABKIT_HTTP_FAULTS="after_commit:kill"`` kills
the server there), which is the crash a client's retry with the same key must survive.
``LABKIT_HTTP_PAUSE=<folder>`` holds the first keyed request while it holds its key
(``Pause``), so a lesson can send a second request with that key while the first is
still in progress.

In production this is a FastAPI or Django view in front of Celery, RQ or a job table;
the shape is Microsoft's "Asynchronous Request-Reply" pattern and the key follows
Stripe's idempotent requests and the IETF Idempotency-Key draft.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

from fastapi import Body, FastAPI, Header, HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse

from labkit.clock import Clock, FakeClock, isoformat
from labkit.errors import IdempotencyConflict, NotFound, PayloadError, StoreBusy
from labkit.faults import FaultPlan, Fired
from labkit.integrations.http.correlation import REQUEST_ID, check_request_id, new_request_id
from labkit.integrations.http.idempotency import REPLAYED, check_idempotency_key
from labkit.integrations.http.operations import (
    NOT_FOUND,
    CannotCancel,
    JobService,
    KeyInUse,
    Pause,
    SecretInPayload,
)
from labkit.integrations.http.refusals import (
    LAB_TOKENS,
    busy,
    caller_of,
    error,
    field_errors,
    refused_before_the_body,
    validation_refused,
)
from labkit.job import Job, JobState
from labkit.metrics import exposition
from labkit.redact import sanitize
from labkit.store import JobStore

#: Seconds a client is told to wait before polling a job's status.
RETRY_AFTER_S = 2
#: Environment of ``app_from_env``, the factory a uvicorn process starts.
DB_ENV, FAULTS_ENV, CLOCK_ENV = "LABKIT_HTTP_DB", "LABKIT_HTTP_FAULTS", "LABKIT_HTTP_CLOCK_START"
PAUSE_ENV = "LABKIT_HTTP_PAUSE"

#: The ``Authorization`` header a route reads the caller from.
Auth = Annotated[str | None, Header()]
#: The optional ``Idempotency-Key`` header.
IdemKey = Annotated[str | None, Header()]


def status_view(job: Job) -> dict[str, Any]:
    """What a job's owner may see of it: never the payload, errors sanitized."""
    waiting = job.state in (JobState.PENDING, JobState.RETRY_WAIT)
    return {
        "job_id": job.id,
        "kind": job.kind,
        "state": str(job.state),
        "attempts": job.attempt,
        "max_attempts": job.max_attempts,
        "next_attempt_at": isoformat(job.run_after) if waiting else None,
        "error": None if job.last_error is None else sanitize(job.last_error),
        "dead_reason": job.dead_reason,
        "result": job.result if job.state == JobState.SUCCEEDED else None,
        "cancelled": job.state == JobState.CANCELLED,
    }


def create_app(
    db_path: str | Path,
    *,
    kinds: Sequence[str] = ("report",),
    clock: Clock | None = None,
    faults: FaultPlan | None = None,
    tokens: Mapping[str, str] = LAB_TOKENS,
    retry_after_s: int = RETRY_AFTER_S,
    pause: Pause | None = None,
) -> FastAPI:
    """The FastAPI app over the job database at ``db_path`` (see the module docstring)."""
    store = JobStore(db_path, clock=clock)
    service = JobService(store, faults, pause)
    app = FastAPI(title="labkit jobs", description="Async request-reply over a labkit job store.")
    app.state.service = service
    app.add_exception_handler(RequestValidationError, validation_refused)

    @app.middleware("http")
    async def correlate(request: Request, call_next: Any) -> Response:
        # Every answer names its request, errors too: that is what a caller quotes.
        try:
            request_id = check_request_id(request.headers.get(REQUEST_ID))
        except HTTPException as exc:
            return error(exc.status_code, str(exc.detail))
        request.state.request_id = request_id or new_request_id()
        refused = refused_before_the_body(request, tokens)
        response: Response = refused or await call_next(request)
        response.headers[REQUEST_ID] = request.state.request_id
        return response

    @app.post("/jobs/{kind}", status_code=202)
    def accept(
        kind: str,
        request: Request,
        body: Annotated[dict[str, Any], Body()],
        authorization: Auth = None,
        idempotency_key: IdemKey = None,
    ) -> JSONResponse:
        owner = caller_of(authorization, tokens)
        if kind not in kinds:
            return error(404, f"no such job kind here; the kinds are {', '.join(kinds)}")
        key = check_idempotency_key(idempotency_key)
        try:
            job, created = service.accept(owner, kind, body, key, request.state.request_id)
        except KeyInUse:
            return error(
                409,
                "a request with this Idempotency-Key is still being handled; retry it "
                "unchanged after Retry-After seconds to get its answer",
                {"Retry-After": str(retry_after_s)},
            )
        except IdempotencyConflict:
            return error(
                422,
                "this Idempotency-Key was already used with a different request body; "
                "resend the original body to get the original job, or use a new key for a "
                "new request",
            )
        except SecretInPayload as exc:
            return field_errors(422, str(exc), ((f.path, f.kind) for f in exc.found))
        except PayloadError as exc:
            return error(422, str(exc))
        except StoreBusy:
            return busy(retry_after_s)
        headers = {"Location": f"/jobs/{job.id}", "Retry-After": str(retry_after_s)}
        if not created:
            headers[REPLAYED] = "true"
        return JSONResponse(
            {"job_id": job.id, "state": str(job.state), "created": created},
            status_code=202,
            headers=headers,
        )

    @app.get("/jobs/{job_id}")
    def status(job_id: int, authorization: Auth = None) -> JSONResponse:
        owner = caller_of(authorization, tokens)
        try:
            job = service.status(owner, job_id)
        except NotFound:
            return error(404, NOT_FOUND)
        headers = {} if _finished(job) else {"Retry-After": str(retry_after_s)}
        return JSONResponse(status_view(job), headers=headers)

    @app.delete("/jobs/{job_id}")
    def cancel(job_id: int, authorization: Auth = None) -> JSONResponse:
        owner = caller_of(authorization, tokens)
        try:
            job = service.cancel(owner, job_id)
        except NotFound:
            return error(404, NOT_FOUND)
        except CannotCancel as exc:
            return error(409, str(exc))
        except StoreBusy:
            return busy(retry_after_s)
        return JSONResponse(status_view(job))

    @app.get("/metrics")
    def metrics(authorization: Auth = None) -> PlainTextResponse:
        caller_of(authorization, tokens)
        text, content_type = exposition(store)
        return PlainTextResponse(text, media_type=content_type)

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    return app


def _finished(job: Job) -> bool:
    return job.state in (JobState.SUCCEEDED, JobState.DEAD)


def app_from_env(environ: Mapping[str, str] | None = None) -> FastAPI:
    """The app a server process builds from ``LABKIT_HTTP_DB`` (and the optional
    ``LABKIT_HTTP_FAULTS`` replay line, ``LABKIT_HTTP_CLOCK_START`` fake clock and
    ``LABKIT_HTTP_PAUSE`` folder)."""
    env = os.environ if environ is None else environ
    db = env.get(DB_ENV)
    if not db:
        raise SystemExit(f"set {DB_ENV} to the job database this service accepts jobs into")
    plan = FaultPlan.parse(env[FAULTS_ENV]) if env.get(FAULTS_ENV) else FaultPlan()
    plan.on_fire = _announce
    start = env.get(CLOCK_ENV)
    clock = FakeClock(float(start)) if start else None
    pause = Pause(Path(env[PAUSE_ENV])) if env.get(PAUSE_ENV) else None
    return create_app(db, clock=clock, faults=plan, pause=pause)


def _announce(fired: Fired) -> None:
    # A kill leaves no traceback: this line on stderr is the proof that the fault fired.
    sys.stderr.write(f"FAULT fired {fired.action} at {fired.point} key={fired.key}\n")
    sys.stderr.flush()
