"""How the HTTP service says no: one JSON shape, the field and the fault, never the value.

Every refusal is ``{"detail": "<what happened and what to do>"}``; one about fields
adds ``"errors": [{"field": "payload.note", "problem": "..."}]``. None carries back
what the caller sent: an answer that echoes its input hands a log viewer, a proxy's
cache or a browser whatever was in it, secrets and markup included. FastAPI's own
validation answer lists each error's ``input``, so ``validation_refused`` replaces it;
a body field is named from ``payload`` (``payload.items[0].note``), a path or header
field from where it came (``path.job_id``).

The refusals made on the headers alone, before any body is read, live here too
(``refused_before_the_body``): a valid token (``401``) and, for a ``POST``, a
``Content-Length`` (``411``) no larger than ``MAX_BODY_BYTES`` (``413``), so an
anonymous 200 MiB upload costs the server nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fastapi import HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response

from labkit import keys

#: The lab's callers: bearer token -> owner. A real service asks its identity provider.
LAB_TOKENS: Mapping[str, str] = {"alice-token": "alice", "bob-token": "bob"}
#: Routes anyone may call without a token.
OPEN_PATHS = frozenset({"/healthz"})
#: The largest request body read: twice the largest payload a job may carry, for the
#: whitespace and escapes a client's JSON may have that the stored form has not.
MAX_BODY_BYTES = 2 * keys.MAX_PAYLOAD_BYTES


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


def error(status: int, message: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    """A refusal: ``{"detail": message}``."""
    return JSONResponse({"detail": message}, status_code=status, headers=dict(headers or {}))


def field_errors(status: int, message: str, errors: Iterable[tuple[str, str]]) -> JSONResponse:
    """A refusal about fields: ``detail`` plus each ``(field, problem)`` in ``errors``."""
    listed = [{"field": field, "problem": problem} for field, problem in errors]
    return JSONResponse({"detail": message, "errors": listed}, status_code=status)


async def validation_refused(request: Request, exc: Exception) -> JSONResponse:
    """FastAPI's ``RequestValidationError`` as a 422 naming fields and faults, no input."""
    assert isinstance(exc, RequestValidationError)
    errors = [(_field(e["loc"]), _problem(e)) for e in exc.errors()]
    said = "; ".join(f"{field}: {problem}" for field, problem in errors)
    return field_errors(
        422,
        f"the request is not what this route takes ({said}); a job is a JSON object, "
        "POST /jobs/{kind}, and a job id is a whole number",
        errors,
    )


def _field(loc: Sequence[Any]) -> str:
    """``("body", "items", 0)`` is ``payload.items[0]``, ``("path", "job_id")`` is
    ``path.job_id``."""
    where, *rest = loc or ("request",)
    name = "payload" if where == "body" else str(where)
    for part in rest:
        name += f"[{part}]" if isinstance(part, int) else f".{part}"
    return name


def _problem(error: Mapping[str, Any]) -> str:
    if error.get("type") == "json_invalid":
        # The decoder's own words ("Expecting value") and where: never the text itself.
        ctx = error.get("ctx") or {}
        return f"not valid JSON: {ctx.get('error', 'cannot be decoded')}"
    problem = str(error.get("msg", "is not valid"))
    sent = error.get("input")
    if isinstance(sent, str) and sent and sent in problem:
        problem = problem.replace(sent, "(the value sent)")  # no message of ours does this
    return problem


def refused_before_the_body(request: Request, tokens: Mapping[str, str]) -> Response | None:
    """The answer for a request refused on its headers alone, or None to go on."""
    if request.url.path in OPEN_PATHS:
        return None
    try:
        caller_of(request.headers.get("authorization"), tokens)
    except HTTPException as exc:
        return error(exc.status_code, str(exc.detail), exc.headers)
    if request.method != "POST":
        return None
    length = request.headers.get("content-length")
    if length is None or not length.isdigit():
        return error(
            411,
            "send the request body with a Content-Length header (not chunked): this "
            f"service reads at most {MAX_BODY_BYTES} bytes and says so before reading any",
        )
    if int(length) > MAX_BODY_BYTES:
        return error(
            413,
            f"the body is over the {MAX_BODY_BYTES} byte limit; a job carries what the "
            "work needs (ids, references), never the data itself",
        )
    return None


def busy(retry_after_s: int) -> JSONResponse:
    """503: another writer holds the job database; nothing was changed."""
    return error(
        503,
        "the job database is busy with another writer; nothing was changed, retry the same "
        "request after Retry-After seconds",
        {"Retry-After": str(retry_after_s)},
    )
