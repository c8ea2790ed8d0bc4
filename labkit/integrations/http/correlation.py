"""One id from an HTTP request to every log line of the job it made: a correlation id.

"What happened to the report I asked for at 10:02?" has an answer only if the request
and the job's work share a name. The caller sends ``X-Request-Id`` (or the service makes
one); the answer echoes it; the service keeps it in ``http_requests`` beside the job's
owner, written in the job's own transaction, and writes a JSON log line with it. The id
is **not** part of the payload: the fingerprint that tells "same Idempotency-Key, same
body" from "same key, other body" never sees it, so a client's retry with a fresh
request id is still a replay of the same job, not a conflict.

A worker knows only the job. ``job_request_ids(db_path)`` is the lookup its log filter
(``labkit.logs.FieldsByJob``) calls with a record's ``job_id``: every line the worker
writes about a job created over HTTP then carries the id of the request that created
it, and one search for that id finds the request, the replays (each names the first
request's id) and every attempt.

In production the W3C ``traceparent`` header and OpenTelemetry do this: the context is
carried in the job's metadata (message headers), never in its arguments.
"""

from __future__ import annotations

import logging
import re
import sqlite3
import sys
import uuid
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

from fastapi import HTTPException

from labkit.clock import Clock
from labkit.logs import JobFormatter
from labkit.redact import id_secret_kinds

#: The header a caller names its request with; the answer carries it back.
REQUEST_ID = "X-Request-Id"
#: Longest request id accepted: long enough for a UUID or a W3C trace id with a prefix.
MAX_REQUEST_ID = 128
#: Characters a request id may hold: nothing that a log viewer or a shell reads as markup.
_SAFE = re.compile(r"[A-Za-z0-9._:/=+@-]+")
#: The logger the service writes its request lines to.
LOGGER = "labkit.http"


def check_request_id(value: str | None) -> str | None:
    """The caller's request id, or None when it sent none; 400 saying what is wrong."""
    if value is None:
        return None
    if len(value) > MAX_REQUEST_ID or not _SAFE.fullmatch(value):
        # Where it goes wrong, never the value: an answer must not echo what was sent.
        wrong = next((i for i, ch in enumerate(value) if not _SAFE.fullmatch(ch)), None)
        fault = (
            f"the one sent is {len(value)} characters long"
            if wrong is None
            else f"character {wrong + 1} of the one sent is not one of them"
        )
        raise HTTPException(
            400,
            f"{REQUEST_ID} must be 1 to {MAX_REQUEST_ID} characters of letters, digits and "
            f". _ : / = + @ - ({fault}); send one id per request (a UUID is fine), or "
            "leave the header out and this service makes one",
        )
    kinds = id_secret_kinds(value)
    if kinds:
        # It would be stored with the job and sent back on the answer: refuse it unsaid.
        raise HTTPException(
            422,
            f"{REQUEST_ID} holds {kinds[0]}; a request id is logged and stored with the "
            "job, so it must never be a credential. Send a fresh random id (a UUID), or "
            "leave the header out and this service makes one",
        )
    return value


def new_request_id() -> str:
    """An id for a request that came without one (random: two servers never repeat it)."""
    return uuid.uuid4().hex


def job_request_ids(db_path: str | Path) -> Callable[[int], dict[str, Any]]:
    """A lookup ``job_id -> {"request_id": ...}`` over the service's database.

    A job that did not come over HTTP (or a database without the service's table) gives
    ``{}``: a log filter must never stop a worker.
    """
    path = str(db_path)

    def lookup(job_id: int) -> dict[str, Any]:
        try:
            with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)) as conn:
                row = conn.execute(
                    "SELECT request_id FROM http_requests WHERE job_id = ?", (job_id,)
                ).fetchone()
        except sqlite3.Error:
            return {}
        return {} if row is None or row[0] is None else {"request_id": row[0]}

    return lookup


def request_logger(clock: Clock | None = None) -> logging.Logger:
    """The service's logger, writing JSON lines (``labkit.logs``) to stderr.

    One handler per process, on the clock of the service built last (a server process
    builds one).
    """
    logger = logging.getLogger(LOGGER)
    for handler in logger.handlers:
        if isinstance(handler.formatter, JobFormatter):
            handler.formatter.clock = clock
            return logger
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JobFormatter(clock))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    return logger
