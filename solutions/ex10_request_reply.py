# %% [markdown]
# # Exercise 10: async request-reply over HTTP
#
# A report takes minutes to build, so the HTTP request that asks for it must not wait
# for it. Your service **accepts** the request as a durable job and answers at once
# with `202 Accepted`, the job's id, a `Location` to poll and a `Retry-After`; the
# caller then **polls** the status, and only the caller who asked may see it.
#
# You write two route handlers in `ex10_app.py` (the `%%writefile` cell below writes
# the file next to this notebook). The checks start your app as a real server
# (uvicorn, on a free port), call it over HTTP, read the job database themselves,
# and kill the server at the worst moment once.
#
# The contract, which the checks rely on:
#
# | route | answer |
# |---|---|
# | `POST /reports` with a JSON object, `Authorization: Bearer <token>`, optional `Idempotency-Key` | `202`, body `{"job_id": N}`, headers `Location` (the status URL) and `Retry-After` (seconds) |
# | the same key and body again (a retry) | `202` with the **same** `job_id`; no second job |
# | the same key, another body | `409` or `422` with a message; nothing changes |
# | a body with a credential-looking field (`password`, `token`...) | `422`; no job |
# | `GET /reports/{job_id}` by the job's owner | `200` with `status_view(job)` |
# | `GET /reports/{job_id}` by anyone else | `404`, the same answer as for an id that does not exist |
#
# Each job is stored with `store.enqueue("report", {"owner": OWNER, "request": BODY},
# key=...)`: the owner travels in the payload (the lesson's service keeps it in a side
# table instead). Choose the key so that two callers who happen to pick the same
# `Idempotency-Key` never get each other's job.
#
# Helpers you may use: `caller_of(authorization)` (the owner named by the bearer token,
# or a 401; tokens `alice-token` and `bob-token`), `status_view(job)` (what an owner may
# see: state, attempts, next attempt, sanitized error, never the payload), and the
# store's `enqueue`, `get`; `IdempotencyConflict`, `PayloadError` and `NotFound` are the
# errors they raise.

# %%
# %%writefile ex10_app.py
"""Exercise 10: accept report requests as durable jobs; owner-scoped status.

Served by the checks as ``python -m labkit.integrations.http.serve ex10_app:app --fd N`` with
``EX10_DB`` naming the job database; without it the app uses ``ex10_jobs.db`` here.
"""

import os
from typing import Annotated, Any

from fastapi import Body, FastAPI, Header
from fastapi.responses import JSONResponse

from labkit.errors import IdempotencyConflict, NotFound, PayloadError
from labkit.grading.exercises.ex10.harness import install
from labkit.integrations.http.service import caller_of, status_view
from labkit.store import JobStore

store = JobStore(os.environ.get("EX10_DB", "ex10_jobs.db"))
app = install(FastAPI(title="ex10 reports"))
RETRY_AFTER_S = 2


@app.post("/reports", status_code=202)
def accept(
    body: Annotated[dict[str, Any], Body()],
    authorization: Annotated[str | None, Header()] = None,
    idempotency_key: Annotated[str | None, Header()] = None,
) -> JSONResponse:
    """Accept a report request as a durable job; answer 202 only once it is committed.

    - The caller: ``owner = caller_of(authorization)`` (a 401 for a missing or unknown
      token).
    - The job: ``store.enqueue("report", {"owner": owner, "request": body}, key=...)``.
      It is committed when ``enqueue`` returns, so answer after it, never before (no
      ``BackgroundTasks``, no thread).
    - ``idempotency_key``: the same key and body again gets the same job. Scope the key
      to the owner. The same key with another body raises ``IdempotencyConflict``:
      answer 409 or 422 with a message that names the key.
    - A credential-looking field raises ``PayloadError``: answer 422 with its message.
      Never log, print or raise with the body or the ``Authorization`` header as they
      came (a refused body holds the very secret it was refused for): log what you
      decided, the owner, the key and the job id.
    - Any other error of ``enqueue`` (the database locked or down) stored nothing: let it
      propagate (a 500) or answer 503, never a 2xx or a 4xx, so the client sends the
      request again later instead of dropping it.
    - The answer: 202, ``{"job_id": job.id}``, headers ``Location: /reports/<id>`` and
      ``Retry-After: <seconds>``.
    """
    ### BEGIN SOLUTION
    owner = caller_of(authorization)
    # Scoped to the caller: bob's "k1" is not alice's "k1".
    key = None if idempotency_key is None else f"report:{owner}:{idempotency_key}"
    try:
        job, _created = store.enqueue("report", {"owner": owner, "request": body}, key=key)
    except IdempotencyConflict:
        return JSONResponse(
            {"detail": f"Idempotency-Key {idempotency_key!r} was already used with another "
             "body; resend the original body, or use a new key for a new request"},
            status_code=422,
        )
    except PayloadError as exc:
        return JSONResponse({"detail": str(exc)}, status_code=422)
    # enqueue returned: the job is committed. Only now may the answer say "accepted".
    return JSONResponse(
        {"job_id": job.id},
        status_code=202,
        headers={"Location": f"/reports/{job.id}", "Retry-After": str(RETRY_AFTER_S)},
    )
    ### END SOLUTION


@app.get("/reports/{job_id}")
def status(job_id: int, authorization: Annotated[str | None, Header()] = None) -> JSONResponse:
    """The status of job ``job_id`` for its owner, and nothing for anyone else.

    - The caller: ``caller_of(authorization)``.
    - Read the job on every call (``store.get``, which raises ``NotFound``).
    - A job whose ``payload["owner"]`` is not the caller gets exactly the answer of a
      job that does not exist: 404, the same body (a 403 would confirm the id exists).
    - The owner gets 200 with ``status_view(job)``: state, attempts, next attempt
      time, sanitized error; never the payload.
    """
    ### BEGIN SOLUTION
    owner = caller_of(authorization)
    try:
        job = store.get(job_id)
    except NotFound:
        job = None
    if job is None or not isinstance(job.payload, dict) or job.payload.get("owner") != owner:
        return JSONResponse({"detail": "no such job"}, status_code=404)
    return JSONResponse(status_view(job))
    ### END SOLUTION


# %% [markdown]
# Try it by hand (optional): start your app with the lab's launcher, post a report
# request and poll it. The cell defines `try_it()`; call it in a cell of your own once
# your handlers are written. It stops the server afterwards, and its job database lives
# in a temporary folder that goes with it, so nothing is left beside this notebook.

# %%
def try_it(body=None):
    import tempfile
    from pathlib import Path

    import httpx

    from labkit.integrations.http.serve import start_server

    headers = {"Authorization": "Bearer alice-token", "Idempotency-Key": "try-1"}
    with tempfile.TemporaryDirectory() as folder:
        db = str(Path(folder) / "ex10_try.db")
        with start_server("ex10_app:app", env={"EX10_DB": db}) as server:
            accepted = httpx.post(server.url + "/reports", json=body or {"month": "2026-01"},
                                  headers=headers)
            polled = httpx.get(server.url + accepted.headers.get("Location", "/"),
                               headers=headers)
    return accepted.status_code, accepted.json(), polled.status_code, polled.json()


# %% [markdown]
# ## Check your work
#
# Checks marked *severe* catch a mistake that loses or duplicates an effect, lets two
# holders run, shows one owner's data to another or never runs a retried job again:
# failing one caps the exercise's score at half. Here:
# `job_is_committed_before_the_202`, `same_key_same_job`,
# `same_key_other_body_is_refused`, `other_owner_gets_404`, and hidden ones the grader
# runs.
#
# Each check starts your app in a fresh process, so re-run the `%%writefile` cell after
# every change. The checks take about ten seconds.

# %%
from labkit.grading import check

check("ex10")
