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
  is still being handled is ``409`` (both as the draft says). A body with a field named
  like a credential is ``422``: a job carries a reference to a secret
  (``credential_id``), which the worker resolves.
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
- Every answer carries ``X-Request-Id``: the caller's, or one the service made. The id of
  the request that created a job is kept beside its owner and reaches every log line
  about the job (``labkit.integrations.http.correlation``); it is not part of the
  payload, so a retry with a new request id still replays the same job.

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
import sqlite3
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from fastapi import Body, FastAPI, Header, HTTPException, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse

from labkit import dbfile, keys, queries
from labkit.clock import Clock, FakeClock, SystemClock, isoformat
from labkit.errors import (
    IdempotencyConflict,
    InvalidTransition,
    LabkitError,
    NotFound,
    PayloadError,
    StoreBusy,
)
from labkit.faults import FaultPlan, Fired
from labkit.integrations.http.correlation import (
    REQUEST_ID,
    check_request_id,
    new_request_id,
    request_logger,
)
from labkit.integrations.http.idempotency import REPLAYED, check_idempotency_key
from labkit.job import Job, JobState
from labkit.metrics import exposition
from labkit.redact import sanitize
from labkit.store import JobStore
from labkit.store.sqlite import SQL as STORE_SQL

SQL = queries.load("integrations/http/service.sql")

#: The lab's callers: bearer token -> owner. A real service asks its identity provider.
LAB_TOKENS: Mapping[str, str] = {"alice-token": "alice", "bob-token": "bob"}
#: Seconds a client is told to wait before polling a job's status.
RETRY_AFTER_S = 2
#: The largest request body read: twice the largest payload a job may carry, for the
#: whitespace and escapes a client's JSON may have that the stored form has not.
MAX_BODY_BYTES = 2 * keys.MAX_PAYLOAD_BYTES
#: Seconds a request waits for another writer's lock before it is answered 503.
REQUEST_BUSY_S = 2.0
#: Job ids are SQLite integers: anything outside 1 .. 2**63 - 1 is no job.
MAX_JOB_ID = 2**63 - 1
#: Routes anyone may call without a token.
OPEN_PATHS = frozenset({"/healthz"})
#: Environment of ``app_from_env``, the factory a uvicorn process starts.
DB_ENV, FAULTS_ENV, CLOCK_ENV = "LABKIT_HTTP_DB", "LABKIT_HTTP_FAULTS", "LABKIT_HTTP_CLOCK_START"
PAUSE_ENV = "LABKIT_HTTP_PAUSE"

#: The ``Authorization`` header a route reads the caller from.
Auth = Annotated[str | None, Header()]
#: The optional ``Idempotency-Key`` header.
IdemKey = Annotated[str | None, Header()]

#: The one answer for "no such job" and "not your job": nothing tells them apart.
NOT_FOUND = "no job with this id for this caller"


def caller_of(authorization: str | None, tokens: Mapping[str, str] = LAB_TOKENS) -> str:
    """The owner named by an ``Authorization: Bearer <token>`` header; 401 otherwise."""
    scheme, _, token = (authorization or "").partition(" ")
    owner = tokens.get(token.strip()) if scheme.lower() == "bearer" else None
    if owner is None:
        raise HTTPException(
            401,
            "send 'Authorization: Bearer <token>' with a valid token; this service tells "
            "callers apart by their token and shows each one only its own jobs",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return owner


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


class CannotCancel(InvalidTransition):
    """The job is running or finished; only a job waiting to run can be cancelled."""


class KeyInUse(LabkitError):
    """Another request with this Idempotency-Key is still being handled."""


@dataclass(frozen=True)
class Pause:
    """Hold the first keyed request while it holds its key, until the lab says resume.

    The server calls ``hold(key)``: the first call creates ``folder/paused`` (holding the
    key) and waits, on the real clock, until ``folder/resume`` exists; every later call
    passes at once. The lab calls ``wait_until_held()``, sends what it wants to the
    waiting server, then ``resume()``. Files, because the two sides are processes.
    """

    folder: Path
    timeout_s: float = 60.0

    def hold(self, key: str, clock: Clock | None = None) -> None:
        try:
            fd = os.open(self.folder / "paused", os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        except FileExistsError:
            return
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(key)
        self._wait_for(self.folder / "resume", clock)

    def wait_until_held(self, clock: Clock | None = None) -> str:
        """The key of the request now held (TimeoutError if none arrives in time)."""
        self._wait_for(self.folder / "paused", clock)
        return (self.folder / "paused").read_text(encoding="utf-8")

    def resume(self) -> None:
        (self.folder / "resume").touch()

    def _wait_for(self, path: Path, clock: Clock | None) -> None:
        # Real time: another process creates the file, which a fake clock would never see.
        clock = clock or SystemClock()
        deadline = clock.now() + self.timeout_s
        while not path.exists():
            if clock.now() > deadline:
                raise TimeoutError(f"{path} did not appear within {self.timeout_s:g}s")
            clock.sleep(0.02)


class JobService:
    """The HTTP service's operations as plain Python: accept, status, cancel, per owner."""

    def __init__(
        self, store: JobStore, faults: FaultPlan | None = None, pause: Pause | None = None
    ) -> None:
        self.store = store
        self.faults = faults if faults is not None else FaultPlan()
        self.pause = pause
        # The keys of the requests this process is handling now. A crash empties it with
        # the process, so no key stays stuck "in progress". Across server processes the
        # unique key still gives one job (the second waits on SQLite's write lock).
        self._in_progress: set[tuple[str, str]] = set()
        self._in_progress_lock = threading.Lock()
        with closing(self._connect()) as conn, dbfile.transaction(conn):
            dbfile.run_script(conn, SQL["schema"])
            columns = {row["name"] for row in conn.execute("PRAGMA table_info(http_requests)")}
            if "request_id" not in columns:  # a database made before request ids
                conn.execute(SQL["add_request_id"])
        self.log = request_logger(self.clock)

    @property
    def clock(self) -> Clock:
        return self.store.clock

    def _connect(self) -> sqlite3.Connection:
        # One connection per request: the server's threads never share a transaction.
        # A request waits REQUEST_BUSY_S for another writer, not the store's 10 s.
        conn = dbfile.connect(self.store.path)
        conn.execute(f"PRAGMA busy_timeout = {int(REQUEST_BUSY_S * 1000)}")
        return conn

    def accept(
        self,
        owner: str,
        kind: str,
        body: Any,
        idempotency_key: str | None = None,
        request_id: str | None = None,
    ) -> tuple[Job, bool]:
        """Commit the job and its owner in one transaction; ``(job, created)``.

        Raises ``KeyInUse`` (a request with this key is still being handled here),
        ``IdempotencyConflict`` (same key, other body) and ``PayloadError`` (not JSON, too
        large, or a credential-looking field) with nothing written.
        """
        with self._holding(owner, idempotency_key):
            return self._accept(owner, kind, body, idempotency_key, request_id)

    @contextmanager
    def _holding(self, owner: str, idempotency_key: str | None) -> Iterator[None]:
        if idempotency_key is None:
            yield
            return
        claim = (owner, idempotency_key)
        with self._in_progress_lock:
            if claim in self._in_progress:
                raise KeyInUse()
            self._in_progress.add(claim)
        try:
            if self.pause is not None:
                self.pause.hold(idempotency_key)
            yield
        finally:
            with self._in_progress_lock:
                self._in_progress.discard(claim)

    def _accept(
        self,
        owner: str,
        kind: str,
        body: Any,
        idempotency_key: str | None,
        request_id: str | None,
    ) -> tuple[Job, bool]:
        key = None if idempotency_key is None else f"http:{owner}:{idempotency_key}"
        with closing(self._connect()) as conn:
            with dbfile.transaction(conn):
                job, created = self.store.enqueue(kind, body, key=key, conn=conn)
                params = {
                    "job_id": job.id,
                    "owner": owner,
                    "idempotency_key": idempotency_key,
                    "request_id": request_id,
                    "now": self.clock.now(),
                }
                conn.execute(SQL["remember_request"], params)
                first = conn.execute(SQL["request_of"], {"job_id": job.id}).fetchone()
        self._log_accepted(job, created, request_id, first["request_id"] if first else None)
        # Committed, not yet answered: a crash here is the one a client's retry must survive.
        self.faults.hit("after_commit", key=job.key, clock=self.clock)
        return job, created

    def _log_accepted(
        self, job: Job, created: bool, request_id: str | None, first: str | None
    ) -> None:
        fields = {"job_id": job.id, "key": job.key, "request_id": request_id}
        if created:
            self.log.info("accepted job %d (%s)", job.id, job.kind, extra=fields)
        else:
            self.log.info(
                "replayed job %d to a retry: it was accepted by request %s",
                job.id,
                first or "(no id)",
                extra=fields,
            )

    def _owned(self, conn: sqlite3.Connection, owner: str, job_id: int) -> None:
        if not 1 <= job_id <= MAX_JOB_ID:
            raise NotFound(NOT_FOUND)
        row = conn.execute(SQL["owner_of"], {"job_id": job_id}).fetchone()
        if row is None or row["owner"] != owner:
            raise NotFound(NOT_FOUND)

    def status(self, owner: str, job_id: int) -> Job:
        """The job, if ``owner`` created it; ``NotFound`` otherwise (whoever else owns it)."""
        with closing(self._connect()) as conn:
            self._owned(conn, owner, job_id)
            return Job.from_row(conn.execute(STORE_SQL["job_by_id"], {"id": job_id}).fetchone())

    def cancel(self, owner: str, job_id: int) -> Job:
        """Cancel a job that is not running; ``CannotCancel`` says why one cannot be."""
        with closing(self._connect()) as conn, dbfile.transaction(conn):
            self._owned(conn, owner, job_id)
            row = conn.execute(
                SQL["cancel"], {"job_id": job_id, "now": self.clock.now()}
            ).fetchone()
            if row is not None:
                return Job.from_row(row)
            current = Job.from_row(conn.execute(STORE_SQL["job_by_id"], {"id": job_id}).fetchone())
        raise CannotCancel(_why_not_cancelled(current))


def _why_not_cancelled(job: Job) -> str:
    if job.state == JobState.RUNNING:
        return (
            f"job {job.id} is running (attempt {job.attempt}) and cannot be cancelled now: "
            "a worker is in the middle of it; poll its status until it finishes"
        )
    if job.state == JobState.CANCELLED:
        return f"job {job.id} is already cancelled"
    return f"job {job.id} already finished ({job.state}); there is nothing left to cancel"


def _error(status: int, message: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"detail": message}, status_code=status, headers=dict(headers or {}))


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

    @app.middleware("http")
    async def correlate(request: Request, call_next: Any) -> Response:
        # Every answer names its request, errors too: that is what a caller quotes.
        try:
            request_id = check_request_id(request.headers.get(REQUEST_ID))
        except HTTPException as exc:
            return _error(exc.status_code, str(exc.detail))
        request.state.request_id = request_id or new_request_id()
        refused = _refused_before_the_body(request, tokens)
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
            return _error(404, f"no job kind {kind!r} here; the kinds are {', '.join(kinds)}")
        key = check_idempotency_key(idempotency_key)
        try:
            job, created = service.accept(owner, kind, body, key, request.state.request_id)
        except KeyInUse:
            return _error(
                409,
                f"a request with Idempotency-Key {key!r} is still being handled; retry it "
                "unchanged after Retry-After seconds to get its answer",
                {"Retry-After": str(retry_after_s)},
            )
        except IdempotencyConflict:
            return _error(
                422,
                f"Idempotency-Key {key!r} was already used with a different request body; "
                "resend the original body to get the original job, or use a new key for a "
                "new request",
            )
        except PayloadError as exc:
            return _error(422, str(exc))
        except StoreBusy:
            return _busy(retry_after_s)
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
            return _error(404, NOT_FOUND)
        headers = {} if _finished(job) else {"Retry-After": str(retry_after_s)}
        return JSONResponse(status_view(job), headers=headers)

    @app.delete("/jobs/{job_id}")
    def cancel(job_id: int, authorization: Auth = None) -> JSONResponse:
        owner = caller_of(authorization, tokens)
        try:
            job = service.cancel(owner, job_id)
        except NotFound:
            return _error(404, NOT_FOUND)
        except CannotCancel as exc:
            return _error(409, str(exc))
        except StoreBusy:
            return _busy(retry_after_s)
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


def _refused_before_the_body(request: Request, tokens: Mapping[str, str]) -> Response | None:
    """The answer for a request refused on its headers alone, or None to go on."""
    if request.url.path in OPEN_PATHS:
        return None
    try:
        caller_of(request.headers.get("authorization"), tokens)
    except HTTPException as exc:
        return _error(exc.status_code, str(exc.detail), exc.headers)
    if request.method != "POST":
        return None
    length = request.headers.get("content-length")
    if length is None or not length.isdigit():
        return _error(
            411,
            "send the request body with a Content-Length header (not chunked): this "
            f"service reads at most {MAX_BODY_BYTES} bytes and says so before reading any",
        )
    if int(length) > MAX_BODY_BYTES:
        return _error(
            413,
            f"the body is {int(length)} bytes, over the {MAX_BODY_BYTES} byte limit; a job "
            "carries what the work needs (ids, references), never the data itself",
        )
    return None


def _busy(retry_after_s: int) -> JSONResponse:
    return _error(
        503,
        "the job database is busy with another writer; nothing was changed, retry the same "
        "request after Retry-After seconds",
        {"Retry-After": str(retry_after_s)},
    )


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
