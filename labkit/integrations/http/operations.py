"""The HTTP service's operations as plain Python: accept, status and cancel, per owner.

``JobService(store)`` is what the routes of ``labkit.integrations.http.service`` call,
and what a test or a lesson may call without a server:

- ``accept(owner, kind, body, idempotency_key, request_id)`` refuses a body with a
  secret in it (``SecretInPayload``, naming each field's path and the secret's kind,
  by ``labkit.redact.find_secrets``), or a key or request id that is a credential
  (``labkit.redact.id_secret_kinds``: both are stored with the job), before anything
  else, then commits the job and its owner, key and request id in one transaction
  (the ``http_requests`` table of ``service.sql``); a key whose first request is still
  being handled here is ``KeyInUse``. A fault plan may fire ``after_commit`` between
  the commit and the return: the crash a client's retry with the same key must survive.
- ``status(owner, job_id)`` and ``cancel(owner, job_id)`` see only the owner's jobs;
  anyone else's, and an id out of range, is ``NotFound`` like a missing one.

Each request gets its own SQLite connection, which waits ``REQUEST_BUSY_S`` for another
writer (then ``StoreBusy``, a ``503``). ``Pause`` holds the first keyed request while it
holds its key, so a lesson can show the ``409`` of a second request meanwhile.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labkit import dbfile, queries
from labkit.clock import Clock, SystemClock
from labkit.errors import InvalidTransition, LabkitError, NotFound, PayloadError
from labkit.faults import FaultPlan
from labkit.integrations.http.correlation import REQUEST_ID, request_logger
from labkit.job import Job, JobState
from labkit.redact import SecretField, find_secrets, id_secret_kinds
from labkit.store import JobStore
from labkit.store.sqlite import SQL as STORE_SQL

SQL = queries.load("integrations/http/service.sql")

#: Seconds a request waits for another writer's lock before it is answered 503.
REQUEST_BUSY_S = 2.0
#: Job ids are SQLite integers: anything outside 1 .. 2**63 - 1 is no job.
MAX_JOB_ID = 2**63 - 1

#: The one answer for "no such job" and "not your job": nothing tells them apart.
NOT_FOUND = "no job with this id for this caller"


class CannotCancel(InvalidTransition):
    """The job is running or finished; only a job waiting to run can be cancelled."""


class KeyInUse(LabkitError):
    """Another request with this Idempotency-Key is still being handled."""


class SecretInPayload(PayloadError):
    """The payload holds a secret; ``found`` says where and what kind, never the value."""

    def __init__(self, found: Sequence[SecretField]) -> None:
        self.found = tuple(found)
        super().__init__(
            "; ".join(f"{f.path}: {f.kind}" for f in self.found)
            + ". Nothing was stored: a job must not carry a secret. Pass a reference "
            "instead (for example 'credential_id') and let the worker look the secret up"
        )


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
        # Written aside, then linked into place: ``paused`` appears with the key in it
        # (a reader that saw it empty once took "no key" for an answer), and only once.
        draft = self.folder / f".paused-{os.getpid()}-{threading.get_ident()}"
        draft.write_text(key, encoding="utf-8")
        try:
            os.link(draft, self.folder / "paused")
        except FileExistsError:
            return
        finally:
            draft.unlink()
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
        ``IdempotencyConflict`` (same key, other body), ``SecretInPayload`` (a secret in a
        field's name or value) and ``PayloadError`` (not JSON, too large) with nothing
        written.
        """
        found = find_secrets(body) + [
            SecretField(header, kind)
            for header, value in (("Idempotency-Key", idempotency_key), (REQUEST_ID, request_id))
            if value is not None
            for kind in id_secret_kinds(value)[:1]
        ]
        if found:
            raise SecretInPayload(found)
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
