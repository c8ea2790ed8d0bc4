"""Wrong ex10 apps, each caught by the check named after its mistake.

Each entry edits the reference ``ex10_app.py`` (old text -> new text, the old text must
be there) and runs two checks on it through real HTTP: the one named after the mistake
must fail, and a control check the mistake does not touch must still pass, so the
feedback points at the mistake and not at everything. Serving the app costs seconds
per check, so the zoo runs these two and not the whole list.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import nbformat
import pytest
from gradingkit import HIDDEN, SOLUTIONS, notebook_for
from zoograding import compiles, runs_its_control, skip_unless_drawn

from labkit.grading import catalog
from labkit.grading.checks import CheckStatus, Namespace, run_check

ACCEPT_OK = "accept_answers_202_with_location"
STATUS_OK = "status_shows_the_job_to_its_owner"

KEY_LINE = '    key = None if idempotency_key is None else f"report:{owner}:{idempotency_key}"\n'
ENQUEUE = (
    '        job, _created = store.enqueue("report", {"owner": owner, "request": body}, key=key)\n'
)
ANSWER = """    return JSONResponse(
        {"job_id": job.id},
        status_code=202,
        headers={"Location": f"/reports/{job.id}", "Retry-After": str(RETRY_AFTER_S)},
    )
"""
#: The reference's accept, from the caller to the answer.
ACCEPT = (
    """    owner = caller_of(authorization)
    # Scoped to the caller: bob's "k1" is not alice's "k1".
"""
    + KEY_LINE
    + "    try:\n"
    + ENQUEUE
    + """    except IdempotencyConflict:
        return JSONResponse(
            {"detail": f"Idempotency-Key {idempotency_key!r} was already used with another "
             "body; resend the original body, or use a new key for a new request"},
            status_code=422,
        )
    except PayloadError as exc:
        return JSONResponse({"detail": str(exc)}, status_code=422)
    # enqueue returned: the job is committed. Only now may the answer say "accepted".
"""
    + ANSWER
)
#: An accept that keeps its own table of keys: a lookup first, the job without a key,
#: then the key's row. Two requests sent together both miss; a crash between the job
#: and the row leaves a job the retry does not find.
SIDE_TABLE = (
    """    import json
    import sqlite3

    owner = caller_of(authorization)
    side = sqlite3.connect(os.environ.get("EX10_DB", "ex10_jobs.db"), timeout=30)
    side.execute("CREATE TABLE IF NOT EXISTS idem (owner TEXT, k TEXT, job_id INTEGER, "
                 "body TEXT, PRIMARY KEY (owner, k))")
    seen = side.execute("SELECT job_id, body FROM idem WHERE owner = ? AND k = ?",
                        (owner, idempotency_key)).fetchone()
    if seen is not None:
        if json.loads(seen[1]) != body:
            return JSONResponse({"detail": f"Idempotency-Key {idempotency_key!r} reused"},
                                status_code=422)
        return JSONResponse({"job_id": seen[0]}, status_code=202,
                            headers={"Location": f"/reports/{seen[0]}", "Retry-After": "2"})
    try:
        job, _created = store.enqueue("report", {"owner": owner, "request": body})
    except PayloadError as exc:
        return JSONResponse({"detail": str(exc)}, status_code=422)
    if idempotency_key is not None:
        side.execute("INSERT OR REPLACE INTO idem VALUES (?, ?, ?, ?)",
                     (owner, idempotency_key, job.id, json.dumps(body)))
        side.commit()
"""
    + ANSWER
)

#: The reference's answer's headers.
LOCATION = (
    '        headers={"Location": f"/reports/{job.id}", "Retry-After": str(RETRY_AFTER_S)},\n'
)
#: The reference's accept, from its caller to the comment before the key.
CALLER = """    owner = caller_of(authorization)
    # Scoped to the caller: bob's "k1" is not alice's "k1".
"""
#: The reference's answer to a body that holds a credential.
REFUSED = """    except PayloadError as exc:
        return JSONResponse({"detail": str(exc)}, status_code=422)
"""

#: The status's owner check, as the reference writes it.
OWNER_CHECK = (
    "    if job is None or not isinstance(job.payload, dict) "
    'or job.payload.get("owner") != owner:\n'
)

#: A module-level connection to the job database, shared by every request (and thread).
SHARED_CONN = """    import sqlite3

    conn = globals().setdefault("CONN", sqlite3.connect(
        os.environ.get("EX10_DB", "ex10_jobs.db"), check_same_thread=False, timeout=30))
"""

ZOO: list[tuple[str, str, str, str, str]] = [
    # (mistake, the check that must fail, a check that must pass, old text, new text)
    (
        # A refusal written once for the field the author thought of: a caller who sent
        # an api_key reads that a password was refused.
        "the credential refusal names 'password' whatever field it refused",
        "credential_in_the_body_is_refused",
        STATUS_OK,
        """    except PayloadError as exc:
        return JSONResponse({"detail": str(exc)}, status_code=422)
""",
        """    except PayloadError:
        return JSONResponse({"detail": "field 'password' refused: never send credentials"},
                            status_code=422)
""",
    ),
    (
        # A broad except after the two the contract names: the request is answered as
        # taken, and nothing holds it.
        "an error of store.enqueue swallowed into a 202 with no job",
        "job_is_committed_before_the_202",
        STATUS_OK,
        """    except PayloadError as exc:
        return JSONResponse({"detail": str(exc)}, status_code=422)
""",
        """    except PayloadError as exc:
        return JSONResponse({"detail": str(exc)}, status_code=422)
    except Exception:  # the database hiccuped: do not bother the client
        return JSONResponse({"job_id": None}, status_code=202,
                            headers={"Retry-After": str(RETRY_AFTER_S)})
""",
    ),
    (
        "an error of store.enqueue answered 400 (the client drops the request)",
        "job_is_committed_before_the_202",
        STATUS_OK,
        """    except PayloadError as exc:
        return JSONResponse({"detail": str(exc)}, status_code=422)
""",
        """    except PayloadError as exc:
        return JSONResponse({"detail": str(exc)}, status_code=422)
    except Exception as exc:
        return JSONResponse({"detail": str(exc)}, status_code=400)
""",
    ),
    (
        "an error of store.enqueue answered 200 with an error in the body",
        "job_is_committed_before_the_202",
        STATUS_OK,
        """    except PayloadError as exc:
        return JSONResponse({"detail": str(exc)}, status_code=422)
""",
        """    except PayloadError as exc:
        return JSONResponse({"detail": str(exc)}, status_code=422)
    except Exception as exc:
        return JSONResponse({"error": type(exc).__name__, "retry": True})
""",
    ),
    (
        "requests without a key share the key 'report:<owner>:None'",
        "requests_without_a_key_are_never_merged",
        STATUS_OK,
        '    key = None if idempotency_key is None else f"report:{owner}:{idempotency_key}"\n',
        '    key = f"report:{owner}:{idempotency_key}"\n',
    ),
    (
        "the job is read before the caller is known (anonymous 404 for a missing id)",
        "no_token_is_401",
        ACCEPT_OK,
        """    owner = caller_of(authorization)
    try:
        job = store.get(job_id)
    except NotFound:
        job = None
""",
        """    try:
        job = store.get(job_id)
    except NotFound:
        return JSONResponse({"detail": "no such job"}, status_code=404)
    owner = caller_of(authorization)
""",
    ),
    (
        "status shows any caller's job",
        "other_owner_gets_404",
        ACCEPT_OK,
        ' or job.payload.get("owner") != owner:',
        ":",
    ),
    (
        "403 for another owner's job (tells them the id exists)",
        "other_owner_gets_404",
        ACCEPT_OK,
        '    if job is None or not isinstance(job.payload, dict) or job.payload.get("owner") '
        "!= owner:\n",
        "    if job is not None and job.payload.get('owner') != owner:\n"
        "        return JSONResponse({'detail': 'not yours'}, status_code=403)\n"
        "    if job is None:\n",
    ),
    (
        "202 first, the job written in a background task after the answer",
        "job_is_committed_before_the_202",
        STATUS_OK,
        """    try:
        job, _created = store.enqueue("report", {"owner": owner, "request": body}, key=key)
    except IdempotencyConflict:""",
        """    from starlette.background import BackgroundTask

    next_id = 1 + len(store.jobs())
    later = BackgroundTask(store.enqueue, "report", {"owner": owner, "request": body}, key=key)
    return JSONResponse({"job_id": next_id}, status_code=202, background=later,
                        headers={"Location": f"/reports/{next_id}", "Retry-After": "2"})
    try:
        job, _created = store.enqueue("report", {"owner": owner, "request": body}, key=key)
    except IdempotencyConflict:""",
    ),
    (
        "a fresh key per request: the Idempotency-Key is ignored",
        "same_key_same_job",
        STATUS_OK,
        'key = None if idempotency_key is None else f"report:{owner}:{idempotency_key}"',
        "key = None",
    ),
    (
        "the key is not scoped to the caller",
        "keys_are_scoped_to_the_caller",
        "same_key_same_job",
        'f"report:{owner}:{idempotency_key}"',
        'f"report:{idempotency_key}"',
    ),
    (
        # hash() of a str is salted per process: the restarted server computes another key.
        "the job key built with hash(), which changes with each server process",
        "retry_after_the_crash_gets_the_same_job",
        "same_key_same_job",
        'f"report:{owner}:{idempotency_key}"',
        'f"report:{hash((owner, idempotency_key))}"',
    ),
    (
        "the status returns the whole job, payload included",
        "status_hides_the_payload",
        ACCEPT_OK,
        "    return JSONResponse(status_view(job))",
        "    return JSONResponse({**status_view(job), 'payload': job.payload})",
    ),
    (
        "200 OK instead of 202 Accepted",
        ACCEPT_OK,
        STATUS_OK,
        "        status_code=202,\n        headers={",
        "        status_code=200,\n        headers={",
    ),
    (
        "a conflict is answered with the first job (200) instead of refused",
        "same_key_other_body_is_refused",
        ACCEPT_OK,
        """    except IdempotencyConflict:
        return JSONResponse(""",
        """    except IdempotencyConflict:
        return JSONResponse({"job_id": store.get_by_key(key).id}, status_code=200)
        return JSONResponse(""",
    ),
    (
        "a conflict answered 202 with the first job's id (the new request dropped)",
        "a_conflict_is_never_answered_as_accepted",
        ACCEPT_OK,
        """    except IdempotencyConflict:
        return JSONResponse(""",
        """    except IdempotencyConflict:
        first = store.get_by_key(key)
        return JSONResponse({"job_id": first.id}, status_code=202,
                            headers={"Location": f"/jobs/{first.id}"})
        return JSONResponse(""",
    ),
    (
        "the key lower-cased: 'Order-77' and 'order-77' become one job",
        "keys_are_compared_exactly",
        "same_key_same_job",
        KEY_LINE,
        KEY_LINE.replace("{idempotency_key}", "{idempotency_key.lower()}"),
    ),
    (
        "the key cut to 32 characters, as a column's width",
        "keys_are_compared_exactly",
        "same_key_same_job",
        KEY_LINE,
        KEY_LINE.replace("{idempotency_key}", "{idempotency_key[:32]}"),
    ),
    (
        # Over 255 characters a key may be refused with a 400, never cut silently.
        "the key cut to 255 characters, a VARCHAR(255)'s width",
        "keys_are_compared_exactly",
        "same_key_same_job",
        KEY_LINE,
        KEY_LINE.replace("{idempotency_key}", "{idempotency_key[:255]}"),
    ),
    (
        "the key 'cleaned' to letters, digits and '-': 'order.77' meets 'order77'",
        "keys_are_compared_exactly",
        "same_key_same_job",
        KEY_LINE,
        KEY_LINE.replace(
            "{idempotency_key}", "{__import__('re').sub('[^A-Za-z0-9-]', '', idempotency_key)}"
        ),
    ),
    (
        "the key made ASCII by dropping what is not: 'plan-ç' meets 'plan-'",
        "keys_are_compared_exactly",
        "same_key_same_job",
        KEY_LINE,
        KEY_LINE.replace(
            "{idempotency_key}", "{idempotency_key.encode('ascii', 'ignore').decode()}"
        ),
    ),
    (
        "a table of keys of its own, read first, the job enqueued without a key",
        "requests_sent_together_get_one_job",
        "same_key_same_job",
        ACCEPT,
        SIDE_TABLE,
    ),
    (
        # A lock makes the lookup and the two writes one step in this process, but a
        # crash between the job and the key's row still leaves a job nobody finds.
        "a table of keys of its own under a lock, written after the job",
        "retry_after_the_crash_gets_the_same_job",
        "requests_sent_together_get_one_job",
        ACCEPT,
        "    import threading\n\n"
        '    with globals().setdefault("KEYS_LOCK", threading.Lock()):\n'
        + textwrap.indent(SIDE_TABLE, "    "),
    ),
    (
        "the key looked up first with SQL built by an f-string (a key with a quote breaks it)",
        "odd_keys_are_data",
        "same_key_same_job",
        KEY_LINE,
        KEY_LINE
        + """    if key is not None:
        conn = store.connect()
        row = conn.execute(f"SELECT id FROM jobs WHERE key = '{key}'").fetchone()
        conn.close()
        if row is not None and store.get(row[0]).payload == {"owner": owner, "request": body}:
            return JSONResponse({"job_id": row[0]}, status_code=202,
                                headers={"Location": f"/reports/{row[0]}", "Retry-After": "2"})
""",
    ),
    (
        "requests without a key deduplicated by their body",
        "requests_without_a_key_are_never_merged",
        "same_key_same_job",
        KEY_LINE,
        "    from labkit.keys import fingerprint\n\n"
        '    key = f"report:{owner}:{idempotency_key or fingerprint(body)}"\n',
    ),
    (
        "a retry answered 202 with its job_id but no Location or Retry-After",
        "every_202_says_where_and_when_to_poll",
        "same_key_same_job",
        ANSWER,
        "    if not _created:\n"
        '        return JSONResponse({"job_id": job.id}, status_code=202)\n' + ANSWER,
    ),
    (
        "Retry-After in milliseconds (2000)",
        "every_202_says_where_and_when_to_poll",
        ACCEPT_OK,
        '"Retry-After": str(RETRY_AFTER_S)',
        '"Retry-After": str(RETRY_AFTER_S * 1000)',
    ),
    (
        "Retry-After as a float ('2.0')",
        ACCEPT_OK,
        STATUS_OK,
        '"Retry-After": str(RETRY_AFTER_S)',
        '"Retry-After": str(float(RETRY_AFTER_S))',
    ),
    (
        "the job enqueued as kind 'reports', which no report worker takes",
        "a_report_worker_claims_the_job",
        ACCEPT_OK,
        ENQUEUE,
        ENQUEUE.replace('"report"', '"reports"'),
    ),
    (
        "a queue per owner, which no worker of the default queue takes",
        "a_report_worker_claims_the_job",
        ACCEPT_OK,
        ENQUEUE,
        ENQUEUE.replace("key=key)", "key=key, queue=owner)"),
    ),
    (
        "the status looks the job up in store.jobs(), which stops at 1000",
        "status_finds_a_job_among_thousands",
        ACCEPT_OK,
        """    try:
        job = store.get(job_id)
    except NotFound:
        job = None
""",
        """    found = [j for j in store.jobs() if j.id == job_id]
    job = found[0] if found else None
""",
    ),
    (
        # A made-up token: 401 for an id that exists, 404 for one that does not.
        "the status checks only that a token is there, and whom it names after the read",
        "no_token_is_401",
        ACCEPT_OK,
        """    owner = caller_of(authorization)
    try:
        job = store.get(job_id)
    except NotFound:
        job = None
""",
        """    from fastapi import HTTPException

    if not authorization:
        raise HTTPException(401, "send Authorization: Bearer <token>")
    try:
        job = store.get(job_id)
    except NotFound:
        return JSONResponse({"detail": "no such job"}, status_code=404)
    owner = caller_of(authorization)
""",
    ),
    (
        # On a server west of UTC the job is due hours after the Retry-After poll.
        "the job due after Retry-After, from datetime.utcnow().timestamp()",
        "every_202_says_where_and_when_to_poll",
        ACCEPT_OK,
        ENQUEUE,
        "        from datetime import datetime, timedelta\n\n"
        "        due = (datetime.utcnow() + timedelta(seconds=RETRY_AFTER_S)).timestamp()\n"
        + ENQUEUE.replace("key=key)", "key=key, run_after=due)"),
    ),
    (
        # The mirror image: on a server east of UTC the job is due hours after the poll.
        # Hours late, not lost: the severe worker check claims it (a day on), every_202 does not.
        "the job due after Retry-After, from the local wall clock labelled as UTC",
        "every_202_says_where_and_when_to_poll",
        "a_report_worker_claims_the_job",
        ENQUEUE,
        "        from datetime import datetime, timezone\n\n"
        "        due = datetime.now().replace(tzinfo=timezone.utc).timestamp() + RETRY_AFTER_S\n"
        + ENQUEUE.replace("key=key)", "key=key, run_after=due)"),
    ),
    (
        # "Reports are expensive: try once": the first transient failure ends the job dead.
        "the job enqueued with max_attempts=1",
        "a_report_worker_claims_the_job",
        ACCEPT_OK,
        ENQUEUE,
        ENQUEUE.replace("key=key)", "key=key, max_attempts=1)"),
    ),
    (
        "`with store:` around the enqueue closes the app's one store after the first request",
        ACCEPT_OK,
        STATUS_OK,
        ENQUEUE,
        "        with store:\n    " + ENQUEUE,
    ),
    (
        # Stripe's answer, not this contract's: a copy sent while the first is inside the
        # handler gets 409 "in progress". Nothing is lost or made twice (the severe check
        # of requests sent together passes); the contract answers it 202 with the job.
        "a key whose first request is still in flight answered 409",
        "copies_sent_while_the_first_runs_get_its_job",
        "requests_sent_together_get_one_job",
        "    try:\n" + ENQUEUE,
        """    import threading

    gate = globals().setdefault("GATE", threading.Lock())
    busy = globals().setdefault("IN_FLIGHT", set())
    with gate:
        if key is not None and key in busy:
            return JSONResponse(
                {"detail": f"Idempotency-Key {idempotency_key!r} is still in progress"},
                status_code=409,
            )
        if key is not None:
            busy.add(key)
    try:
        try:
    """
        + ENQUEUE
        + """        finally:
            with gate:
                busy.discard(key)
""",
    ),
    (
        # "Already processed": the retry of a request whose job has run is refused, as if
        # the key were spent. The caller whose first reply was lost never learns its job.
        "a retry whose job has finished answered 409 'already processed'",
        "copies_sent_while_the_first_runs_get_its_job",
        STATUS_OK,
        ENQUEUE,
        ENQUEUE
        + """        if not _created and str(job.state) in ("succeeded", "dead"):
            return JSONResponse(
                {"detail": f"{idempotency_key!r} already processed"}, status_code=409
            )
""",
    ),
    (
        # A retry answered 200 with its job: the caller may read it as the finished report.
        "a retry answered 200 OK instead of 202",
        "every_202_says_where_and_when_to_poll",
        "same_key_same_job",
        "        status_code=202,\n        headers={",
        "        status_code=202 if _created else 200,\n        headers={",
    ),
    (
        "the body's fingerprint in the key: the same key with another body makes a second job",
        "same_key_other_body_is_refused",
        "same_key_same_job",
        'f"report:{owner}:{idempotency_key}"',
        "f\"report:{owner}:{idempotency_key}:{__import__('labkit.keys').keys.fingerprint(body)}\"",
    ),
    (
        "the conflict answered with a message that does not name the key",
        "a_conflict_names_the_key_it_refused",
        ACCEPT_OK,
        '            {"detail": f"Idempotency-Key {idempotency_key!r} was already used with '
        'another "\n'
        '             "body; resend the original body, or use a new key for a new request"},\n'
        "            status_code=422,",
        """            {"detail": "conflict: this key was already used with another body"},
            status_code=409,""",
    ),
    (
        # 0 for a job due at once: "poll now", and a client hammers the server.
        "Retry-After as the seconds left until the job is due",
        ACCEPT_OK,
        STATUS_OK,
        '"Retry-After": str(RETRY_AFTER_S)',
        '"Retry-After": str(max(0, int(job.run_after - __import__("time").time())))',
    ),
    (
        # Minutes where the header says seconds: the poll finds the job not due yet.
        "the job due RETRY_AFTER_S minutes after it was made",
        "every_202_says_where_and_when_to_poll",
        "a_report_worker_claims_the_job",
        ENQUEUE,
        "        import time\n\n"
        "        due = time.time() + RETRY_AFTER_S * 60\n"
        + ENQUEUE.replace("key=key)", "key=key, run_after=due)"),
    ),
    (
        "the status cached in a dict after its first read",
        "status_shows_the_job_to_its_owner",
        ACCEPT_OK,
        "        job = store.get(job_id)\n",
        "        cache = globals().setdefault('CACHE', {})\n"
        "        job = cache.get(job_id) or cache.setdefault(job_id, store.get(job_id))\n",
    ),
    (
        # 'Bearer stolen-token' becomes the owner 'stolen': a stranger's request is a job.
        "the owner parsed from the token by hand instead of caller_of",
        "no_token_is_401",
        ACCEPT_OK,
        "    owner = caller_of(authorization)\n    # Scoped",
        "    from fastapi import HTTPException\n\n"
        "    if not authorization:\n"
        "        raise HTTPException(401, 'no token')\n"
        "    owner = authorization.removeprefix('Bearer ').split('-')[0]\n"
        "    # Scoped",
    ),
    (
        # Keys that "expire" daily: a retry sent just after midnight makes a second job.
        "the server's local date in the job key",
        "retry_after_the_crash_gets_the_same_job",
        "same_key_same_job",
        'f"report:{owner}:{idempotency_key}"',
        "f\"report:{owner}:{__import__('datetime').date.today()}:{idempotency_key}\"",
    ),
    (
        # store.jobs() stops at 1000: among thousands the 202 names another job.
        "the 202 names the newest job of store.jobs(), not the one enqueue returned",
        "status_finds_a_job_among_thousands",
        "same_key_same_job",
        '        {"job_id": job.id},',
        '        {"job_id": store.jobs()[-1].id if _created else job.id},',
    ),
    (
        # "Tell them it's not theirs": the answer itself says the id exists.
        "another owner's job answered 404 'not your job', a missing one 'no such job'",
        "other_owner_gets_404",
        ACCEPT_OK,
        '        return JSONResponse({"detail": "no such job"}, status_code=404)\n',
        "        if job is None:\n"
        '            return JSONResponse({"detail": "no such job"}, status_code=404)\n'
        '        return JSONResponse({"detail": "not your job"}, status_code=404)\n',
    ),
    (
        "caller_of inside a catch-all: a missing token answered 422, not 401",
        "no_token_is_401",
        ACCEPT_OK,
        "    owner = caller_of(authorization)\n    # Scoped",
        "    try:\n        owner = caller_of(authorization)\n    except Exception as exc:\n"
        '        return JSONResponse({"detail": str(exc)}, status_code=422)\n    # Scoped',
    ),
    (
        # str hashes are salted per process: the restarted server computes another key.
        "the owner hashed with hash() in the job key",
        "retry_after_the_crash_gets_the_same_job",
        "same_key_same_job",
        'f"report:{owner}:{idempotency_key}"',
        'f"report:{hash(owner)}:{idempotency_key}"',
    ),
    (
        "a credential in the body answered 400, not 422",
        "credential_in_the_body_is_refused",
        ACCEPT_OK,
        '        return JSONResponse({"detail": str(exc)}, status_code=422)\n    # enqueue',
        '        return JSONResponse({"detail": str(exc)}, status_code=400)\n    # enqueue',
    ),
    (
        # Alice posts {"owner": "bob", ...}: the job is bob's, and bob sees it.
        "the owner taken from the body when it has one",
        "owner_comes_from_the_token",
        "same_key_same_job",
        ENQUEUE,
        ENQUEUE.replace('{"owner": owner,', '{"owner": body.get("owner", owner),'),
    ),
    (
        # GET /reports/1/ is a 307 to /reports/1: a client that does not follow it is lost.
        "a Location with a trailing slash",
        ACCEPT_OK,
        "same_key_same_job",
        'headers={"Location": f"/reports/{job.id}",',
        'headers={"Location": f"/reports/{job.id}/",',
    ),
    (
        # A contract detail, not a lost job: only the contract's check fails, not the
        # severe checks of keys and crashes (which read "7" as job 7).
        "the job_id sent as a string",
        ACCEPT_OK,
        "same_key_same_job",
        '        {"job_id": job.id},',
        '        {"job_id": str(job.id)},',
    ),
    (
        # A proxy or client library sends a new X-Request-Id with every attempt: each
        # retry is another key, and another job.
        "the request's X-Request-Id appended to the Idempotency-Key",
        "same_key_same_job",
        STATUS_OK,
        "    idempotency_key: Annotated[str | None, Header()] = None,\n) -> JSONResponse:\n",
        "    idempotency_key: Annotated[str | None, Header()] = None,\n"
        "    x_request_id: Annotated[str | None, Header()] = None,\n"
        ") -> JSONResponse:\n"
        '    idempotency_key = idempotency_key and f"{idempotency_key}:{x_request_id}"\n',
    ),
    (
        # The bearer token at rest in the jobs table, and a renewed token another key.
        "the key scoped to the Authorization header instead of the owner",
        "a_renewed_token_is_the_same_caller",
        "same_key_same_job",
        'f"report:{owner}:{idempotency_key}"',
        'f"report:{authorization}:{idempotency_key}"',
    ),
    (
        # No token at rest, but alice's retry with her renewed token is a second job.
        "the key scoped to a sha256 of the Authorization header",
        "a_renewed_token_is_the_same_caller",
        "same_key_same_job",
        'f"report:{owner}:{idempotency_key}"',
        "f\"report:{__import__('hashlib').sha256(authorization.encode()).hexdigest()}:"
        '{idempotency_key}"',
    ),
    (
        # Its own table of tokens knows no renewed token: what is stored still judges it.
        "a table of tokens of its own, and the key scoped to the token",
        "a_renewed_token_is_the_same_caller",
        "same_key_same_job",
        '    owner = caller_of(authorization)\n    # Scoped to the caller: bob\'s "k1" is not '
        'alice\'s "k1".\n' + KEY_LINE,
        "    owner = caller_of(authorization, {'alice-token': 'alice', 'bob-token': 'bob'})\n"
        + KEY_LINE.replace("{owner}", "{authorization}"),
    ),
    (
        # Local time without its offset: on a server at UTC-3 the poll comes 3 hours early.
        "next_attempt_at rewritten in the server's local time, without an offset",
        "status_shows_the_job_to_its_owner",
        ACCEPT_OK,
        "    return JSONResponse(status_view(job))",
        "    from datetime import datetime\n\n"
        "    view = status_view(job)\n"
        "    if view['next_attempt_at'] is not None:\n"
        "        view['next_attempt_at'] = datetime.fromtimestamp(job.run_after).isoformat()\n"
        "    return JSONResponse(view)",
    ),
    (
        # Keys "valid for a day": a retry sent just after UTC midnight makes a second job.
        "the UTC day number, time.time() // 86400, in the job key",
        "retry_after_the_crash_gets_the_same_job",
        "same_key_same_job",
        'f"report:{owner}:{idempotency_key}"',
        "f\"report:{owner}:{int(__import__('time').time() // 86400)}:{idempotency_key}\"",
    ),
    (
        "the UTC date, datetime.now(timezone.utc).date(), in the job key",
        "retry_after_the_crash_gets_the_same_job",
        "same_key_same_job",
        KEY_LINE,
        "    from datetime import datetime, timezone\n\n"
        + KEY_LINE.replace("{owner}:", "{owner}:{datetime.now(timezone.utc).date()}:"),
    ),
    (
        # Hour buckets: a retry sent across the hour makes a second job.
        "the hour, time.time() // 3600, in the job key",
        "retry_after_the_crash_gets_the_same_job",
        "same_key_same_job",
        'f"report:{owner}:{idempotency_key}"',
        "f\"report:{owner}:{int(__import__('time').time() // 3600)}:{idempotency_key}\"",
    ),
    (
        # A clear 400 for a long key loses nothing (the severe key check takes it), but
        # a client's 200-character key is within Stripe's 255.
        "Idempotency-Keys over 128 characters refused with 400",
        "odd_keys_are_data",
        "keys_are_compared_exactly",
        KEY_LINE,
        KEY_LINE + "    if idempotency_key is not None and len(idempotency_key) > 128:\n"
        "        return JSONResponse({'detail': 'Idempotency-Key over 128 characters'}, "
        "status_code=400)\n",
    ),
    (
        # A contract detail, not a lost job: the severe checks of keys and crashes take a
        # 201 with the job, as they take a retry's 200.
        "201 Created instead of 202 Accepted",
        ACCEPT_OK,
        "same_key_same_job",
        "        status_code=202,\n        headers={",
        "        status_code=201,\n        headers={",
    ),
    (
        # The crash point fires on any success to a POST: a 200 does not hide a job
        # written after the answer.
        "200 first, the job written in a background task after the answer",
        "job_is_committed_before_the_202",
        STATUS_OK,
        """    try:
        job, _created = store.enqueue("report", {"owner": owner, "request": body}, key=key)
    except IdempotencyConflict:""",
        """    from starlette.background import BackgroundTask

    next_id = 1 + len(store.jobs())
    later = BackgroundTask(store.enqueue, "report", {"owner": owner, "request": body}, key=key)
    return JSONResponse({"job_id": next_id}, status_code=200, background=later,
                        headers={"Location": f"/reports/{next_id}", "Retry-After": "2"})
    try:
        job, _created = store.enqueue("report", {"owner": owner, "request": body}, key=key)
    except IdempotencyConflict:""",
    ),
    (
        # Microsoft's pattern answers a poll 202 while the job runs; this contract says 200.
        # Nothing leaks: the severe owner check, which judges bob's answer, passes.
        "the status answered 202 while the job waits",
        "status_shows_the_job_to_its_owner",
        "other_owner_gets_404",
        "    return JSONResponse(status_view(job))",
        "    view = status_view(job)\n"
        "    waiting = view['state'] in ('pending', 'running', 'retry_wait')\n"
        "    return JSONResponse(view, status_code=202 if waiting else 200)",
    ),
    (
        # The owner polls a job that ended dead and is told it does not exist.
        "the status answers 404 for a dead or cancelled job",
        "status_shows_the_job_to_its_owner",
        ACCEPT_OK,
        "    return JSONResponse(status_view(job))",
        "    if str(job.state) in ('dead', 'cancelled'):\n"
        "        return JSONResponse({'detail': 'no such job'}, status_code=404)\n"
        "    return JSONResponse(status_view(job))",
    ),
    (
        # "Guard the database": a long note is cut, and the report runs on another request.
        "the request's texts cut to 255 characters",
        "the_request_is_stored_whole",
        "same_key_same_job",
        ENQUEUE,
        "        body = {k: v[:255] if isinstance(v, str) else v for k, v in body.items()}\n"
        + ENQUEUE,
    ),
    (
        # "So a key cannot clash with my ':' separator": 'order:77' meets 'order77'.
        "the ':' taken out of the key, the app's own separator",
        "keys_are_compared_exactly",
        "same_key_same_job",
        KEY_LINE,
        KEY_LINE.replace("{idempotency_key}", "{idempotency_key.replace(':', '')}"),
    ),
    (
        "the ':' in the key turned into '_': 'order:77' meets 'order_77'",
        "keys_are_compared_exactly",
        "same_key_same_job",
        KEY_LINE,
        KEY_LINE.replace("{idempotency_key}", "{idempotency_key.replace(':', '_')}"),
    ),
    (
        "whitespace inside the key collapsed: 'order  77' meets 'order 77'",
        "keys_are_compared_exactly",
        "same_key_same_job",
        KEY_LINE,
        KEY_LINE.replace("{idempotency_key}", "{' '.join(idempotency_key.split())}"),
    ),
    (
        # "Proxies join repeated headers with commas": 'order-77,retry' meets 'order-77'.
        "only the part of the key before a comma kept",
        "keys_are_compared_exactly",
        "same_key_same_job",
        KEY_LINE,
        KEY_LINE.replace("{idempotency_key}", "{idempotency_key.split(',')[0].strip()}"),
    ),
    (
        "null fields dropped from the request before it is stored",
        "the_request_is_stored_whole",
        "same_key_same_job",
        ENQUEUE,
        "        body = {k: v for k, v in body.items() if v is not None}\n" + ENQUEUE,
    ),
    (
        "the request's texts stripped of surrounding spaces",
        "the_request_is_stored_whole",
        "same_key_same_job",
        ENQUEUE,
        "        body = {k: v.strip() if isinstance(v, str) else v for k, v in body.items()}\n"
        + ENQUEUE,
    ),
    (
        "the request's lists cut to 100 items",
        "the_request_is_stored_whole",
        "same_key_same_job",
        ENQUEUE,
        "        body = {k: v[:100] if isinstance(v, list) else v for k, v in body.items()}\n"
        + ENQUEUE,
    ),
    (
        # The no-token check judges it; the renewed-token check takes any refusal of a
        # token the app does not know, 401 or 403.
        "a token of its own allow-list refused with 403, not 401",
        "no_token_is_401",
        "a_renewed_token_is_the_same_caller",
        "    owner = caller_of(authorization)\n    # Scoped",
        "    from fastapi import HTTPException\n\n"
        "    if authorization not in ('Bearer alice-token', 'Bearer bob-token'):\n"
        "        raise HTTPException(403, 'forbidden')\n"
        "    owner = caller_of(authorization)\n    # Scoped",
    ),
    (
        # Keys "valid for a month": a retry sent across New Year's midnight is a new job.
        "the server's local year and month in the job key",
        "retry_after_the_crash_gets_the_same_job",
        "same_key_same_job",
        'f"report:{owner}:{idempotency_key}"',
        "f\"report:{owner}:{__import__('datetime').datetime.now().strftime('%Y-%m')}:"
        '{idempotency_key}"',
    ),
    (
        "spaces taken out of the key: 'order 77' meets 'order77'",
        "keys_are_compared_exactly",
        "same_key_same_job",
        KEY_LINE,
        KEY_LINE.replace("{idempotency_key}", "{idempotency_key.replace(' ', '')}"),
    ),
    (
        # The header is no URL: 'order%2E77' decoded is 'order.77', another client's key.
        "the key percent-decoded",
        "keys_are_compared_exactly",
        "same_key_same_job",
        KEY_LINE,
        KEY_LINE.replace(
            "{idempotency_key}", "{__import__('urllib.parse').parse.unquote(idempotency_key)}"
        ),
    ),
    (
        "underscores in the key turned into dashes: 'order_77' meets 'order-77'",
        "keys_are_compared_exactly",
        "same_key_same_job",
        KEY_LINE,
        KEY_LINE.replace("{idempotency_key}", "{idempotency_key.replace('_', '-')}"),
    ),
    (
        # "Nobody may claim to be someone else": the owner is safe in the payload already,
        # and the report runs on another request than the one sent.
        "a field 'owner' taken out of the stored request",
        "owner_comes_from_the_token",
        "same_key_same_job",
        ENQUEUE,
        "        body = {k: v for k, v in body.items() if k != 'owner'}\n" + ENQUEUE,
    ),
    (
        # Every job in the store taken for a report: another service's job, whose payload
        # names no owner, raises KeyError, and the 500 tells bob that its id exists.
        "the owner read with job.payload['owner']: a job without one answers 500",
        "other_owner_gets_404",
        STATUS_OK,
        '    if job is None or not isinstance(job.payload, dict) or job.payload.get("owner") '
        "!= owner:\n",
        '    if job is None or job.payload["owner"] != owner:\n',
    ),
    (
        "the owner read with job.payload.get('owner') of a payload that is not a dict",
        "other_owner_gets_404",
        STATUS_OK,
        '    if job is None or not isinstance(job.payload, dict) or job.payload.get("owner") '
        "!= owner:\n",
        '    if job is None or job.payload.get("owner") != owner:\n',
    ),
    (
        # Every job gets a key: one made up from a counter in memory when the request has
        # none. Each request of one server's life is a job of its own; after a restart the
        # counter starts again, and a new request meets a job of the last life.
        "a request without a key given one from a counter in memory",
        "retry_after_the_crash_gets_the_same_job",
        STATUS_OK,
        KEY_LINE,
        '    counter = globals().setdefault("AUTO_KEYS", iter(range(1, 10**9)))\n'
        '    key = f"report:{owner}:{idempotency_key}" if idempotency_key is not None else '
        'f"report:{owner}:auto-{next(counter)}"\n',
    ),
    (
        # "If anything goes wrong, the job is not there": a locked database answered 404,
        # and the client takes its job for lost and sends the request again.
        "any error of store.get answered 404 (the database down reads as no such job)",
        STATUS_OK,
        ACCEPT_OK,
        "    except NotFound:\n        job = None\n",
        "    except Exception:\n        job = None\n",
    ),
    (
        # "Staff may file a report for a customer": a body field other than 'owner' names
        # the job's owner, and any caller files jobs as anyone.
        "the owner taken from the body's 'on_behalf_of' when it has one",
        "owner_comes_from_the_token",
        "same_key_same_job",
        ENQUEUE,
        ENQUEUE.replace('{"owner": owner,', '{"owner": body.get("on_behalf_of", owner),'),
    ),
    (
        # "Keys over 64 characters are hashed to fit the column": the hash of the key
        # alone, without the owner, and bob's long key meets alice's job.
        "a long key hashed without its owner (bob's 200-character key meets alice's job)",
        "keys_are_scoped_to_the_caller",
        STATUS_OK,
        KEY_LINE,
        KEY_LINE
        + "    if key is not None and len(key) > 64:\n"
        + "        import hashlib\n"
        + '        key = "report:" + hashlib.sha256(idempotency_key.encode()).hexdigest()\n',
    ),
    (
        # "A finished report is served straight away": a branch on the state placed
        # before the owner check, and bob reads alice's result.
        "a succeeded job's view returned before the owner is checked",
        "other_owner_gets_404",
        ACCEPT_OK,
        OWNER_CHECK,
        '    if job is not None and str(job.state) == "succeeded":\n'
        "        return JSONResponse(status_view(job))  # finished: show the result\n"
        + OWNER_CHECK,
    ),
    (
        # "It is done: here is the result" to a retry whose first reply was lost.
        "a retry whose job has succeeded answered 200 with the job's status",
        "every_202_says_where_and_when_to_poll",
        STATUS_OK,
        ANSWER,
        "    if not _created and str(job.state) == 'succeeded':\n"
        "        return JSONResponse({'job_id': job.id, **status_view(job)}, status_code=200,\n"
        "                            headers={'Location': f'/reports/{job.id}'})\n" + ANSWER,
    ),
    (
        # "Still in progress, try later": a worker has claimed the job, and the client
        # whose reply was lost is told off instead of given its job.
        "a retry whose job a worker is running answered 409",
        "every_202_says_where_and_when_to_poll",
        STATUS_OK,
        ANSWER,
        "    if not _created and str(job.state) == 'running':\n"
        "        return JSONResponse({'detail': f'{idempotency_key!r} is being processed'},\n"
        "                            status_code=409)\n" + ANSWER,
    ),
    (
        # "It failed, so run it again": a second job for the key, which bypasses the
        # person a dead job waits for (redrive) and answers another job_id to a retry.
        "a retry whose job is dead enqueued again as a new job without a key",
        "every_202_says_where_and_when_to_poll",
        STATUS_OK,
        ANSWER,
        "    if not _created and str(job.state) == 'dead':\n"
        "        job, _created = store.enqueue('report', {'owner': owner, 'request': body})\n"
        + ANSWER,
    ),
    (
        # Stripe-style: a key's first answer is kept and replayed, errors included, so the
        # 503 of an outage is all the client's retries ever get.
        "a key's 503 from a store outage kept and replayed to its retries",
        "job_is_committed_before_the_202",
        STATUS_OK,
        "    try:\n" + ENQUEUE,
        "    import json\n\n"
        "    kept = globals().setdefault('KEPT', {})\n"
        "    seen = (key, json.dumps(body, sort_keys=True))\n"
        "    if key is not None and seen in kept:\n"
        "        return JSONResponse({'detail': kept[seen]}, status_code=503)\n"
        "    try:\n"
        "        try:\n"
        "    " + ENQUEUE + "        except (IdempotencyConflict, PayloadError):\n"
        "            raise\n"
        "        except Exception as exc:\n"
        "            kept[seen] = f'try again later: {exc}'\n"
        "            return JSONResponse({'detail': kept[seen]}, status_code=503)\n",
    ),
    (
        # "Show what was asked next to the result": the request, once the job is done.
        "the request shown with the result once the job has succeeded",
        "status_hides_the_payload",
        ACCEPT_OK,
        "    return JSONResponse(status_view(job))\n",
        "    view = status_view(job)\n"
        "    if str(job.state) == 'succeeded':\n"
        "        view['request'] = job.payload.get('request')\n"
        "    return JSONResponse(view)\n",
    ),
    (
        "a retry whose job is dead answered 410 Gone",
        "every_202_says_where_and_when_to_poll",
        STATUS_OK,
        ANSWER,
        "    if not _created and str(job.state) == 'dead':\n"
        "        return JSONResponse({'detail': 'that request failed'}, status_code=410)\n"
        + ANSWER,
    ),
    (
        # The async request-reply pattern's redirect, to a route the app does not have.
        "a succeeded job's status answered 303 See Other to a result route",
        "status_shows_the_job_to_its_owner",
        ACCEPT_OK,
        "    return JSONResponse(status_view(job))\n",
        "    if str(job.state) == 'succeeded':\n"
        "        return JSONResponse({'job_id': job.id, 'state': 'succeeded'}, status_code=303,\n"
        "                            headers={'Location': f'/reports/{job.id}/result'})\n"
        "    return JSONResponse(status_view(job))\n",
    ),
    (
        "the status leaves out the result of a succeeded job",
        "status_shows_the_job_to_its_owner",
        ACCEPT_OK,
        "    return JSONResponse(status_view(job))\n",
        "    view = status_view(job)\n"
        "    view.pop('result', None)\n"
        "    return JSONResponse(view)\n",
    ),
    (
        "a succeeded job's status answered 410 Gone",
        "status_shows_the_job_to_its_owner",
        ACCEPT_OK,
        "    return JSONResponse(status_view(job))\n",
        "    if str(job.state) == 'succeeded':\n"
        "        return JSONResponse({'detail': 'gone'}, status_code=410)\n"
        "    return JSONResponse(status_view(job))\n",
    ),
    (
        # "A finished job never changes": its view kept by job id alone, and served before
        # the owner is compared, to whoever asks after its owner did.
        "finished jobs' views cached by job id and served before the owner check",
        "other_owner_gets_404",
        ACCEPT_OK,
        "    try:\n        job = store.get(job_id)\n    except NotFound:\n        job = None\n"
        + OWNER_CHECK
        + '        return JSONResponse({"detail": "no such job"}, status_code=404)\n'
        "    return JSONResponse(status_view(job))\n",
        "    finished = globals().setdefault('FINISHED', {})\n"
        "    if job_id in finished:\n"
        "        return JSONResponse(finished[job_id])\n"
        "    try:\n        job = store.get(job_id)\n    except NotFound:\n        job = None\n"
        + OWNER_CHECK
        + '        return JSONResponse({"detail": "no such job"}, status_code=404)\n'
        "    view = status_view(job)\n"
        "    if view['state'] in ('succeeded', 'dead', 'cancelled'):\n"
        "        finished[job_id] = view\n"
        "    return JSONResponse(view)\n",
    ),
    (
        # Scoped to the caller, but owner and key run together: team1 + "2-report" and
        # team12 + "-report" are one key, and team12's request gets team1's job.
        "the owner and the key joined with nothing between them",
        "keys_are_scoped_to_the_caller",
        "same_key_same_job",
        'f"report:{owner}:{idempotency_key}"',
        'f"report:{owner}{idempotency_key}"',
    ),
    (
        # The key first, then its owner, nothing between: "7-mari" + ana and "7-" +
        # mariana are one key, and mariana's request gets ana's job.
        "the Idempotency-Key and then the owner joined with nothing between them",
        "keys_are_scoped_to_the_caller",
        "same_key_same_job",
        'f"report:{owner}:{idempotency_key}"',
        'f"report:{idempotency_key}{owner}"',
    ),
    (
        # The same, hashed to fit a column: sha256 of owner + key, nothing between.
        "the job key a sha256 of the owner and the key joined with nothing between",
        "keys_are_scoped_to_the_caller",
        STATUS_OK,
        KEY_LINE,
        "    import hashlib\n"
        "    key = None if idempotency_key is None else "
        '"report:" + hashlib.sha256((owner + idempotency_key).encode()).hexdigest()\n',
    ),
    (
        # The key as the owner's id with the client's key appended, in a column of its own.
        "the job key the owner with the Idempotency-Key appended (owner + key)",
        "keys_are_scoped_to_the_caller",
        STATUS_OK,
        KEY_LINE,
        "    key = None if idempotency_key is None else owner + idempotency_key\n",
    ),
    (
        # "A retry is answered from memory, without touching the database": the answers
        # kept by the Idempotency-Key alone, and bob's request with alice's key is told
        # alice's job (his own never runs).
        "retries answered from a dict in memory keyed by the Idempotency-Key alone",
        "keys_are_scoped_to_the_caller",
        STATUS_OK,
        ACCEPT,
        ACCEPT.replace(
            KEY_LINE,
            KEY_LINE
            + '    answered = globals().setdefault("ANSWERED", {})\n'
            + "    if idempotency_key in answered:\n"
            + "        job_id = answered[idempotency_key]\n"
            + '        return JSONResponse({"job_id": job_id}, status_code=202, headers={\n'
            + '            "Location": f"/reports/{job_id}", "Retry-After": str(RETRY_AFTER_S)})\n',
        ).replace(
            ANSWER,
            "    if idempotency_key is not None:\n"
            + "        answered[idempotency_key] = job.id\n"
            + ANSWER,
        ),
    ),
    # A secret reaches the logs: whoever reads them (and each copy, kept for months) can
    # log in to the ERP with a refused body's password, or call the service as alice.
    (
        # The red team's app: the whole body logged before enqueue refuses it.
        "the request body logged at INFO before enqueue (a refused body's password in the log)",
        "secrets_stay_out_of_the_logs",
        STATUS_OK,
        CALLER,
        CALLER.replace(
            "    # Scoped",
            "    import logging\n\n"
            "    logging.basicConfig(level=logging.INFO)\n"
            '    logging.getLogger("ex10").info(\n'
            '        "report request from %s (Idempotency-Key %r): %s",\n'
            "        owner, idempotency_key, body,\n"
            "    )\n"
            "    # Scoped",
        ),
    ),
    (
        # A debugging print left in: the bearer token on stdout with every request.
        "the Authorization header printed with each request (the bearer token on stdout)",
        "secrets_stay_out_of_the_logs",
        STATUS_OK,
        CALLER,
        '    print(f"POST /reports authorization={authorization!r} key={idempotency_key!r}")\n'
        + CALLER,
    ),
    (
        # No logging set up, so nothing shows here: any server that logs INFO writes it.
        "the body logged at INFO with no logging set up (written wherever INFO is logged)",
        "secrets_stay_out_of_the_logs",
        STATUS_OK,
        CALLER,
        CALLER.replace(
            "    # Scoped",
            '    __import__("logging").getLogger("ex10.accept").info("accepting %r", body)\n'
            "    # Scoped",
        ),
    ),
    (
        # The refusal logged with its traceback and the body it refused: on stderr, by
        # Python's last-resort handler.
        "a refused body logged with log.exception (the password on stderr, with a traceback)",
        "secrets_stay_out_of_the_logs",
        STATUS_OK,
        REFUSED,
        REFUSED.replace(
            "        return",
            '        __import__("logging").getLogger("ex10").exception("refused %s", body)\n'
            "        return",
        ),
    ),
    (
        # The log in a file of the app's own, not on stderr: the password is there all
        # the same.
        "the body logged to a file of its own (logging.basicConfig(filename=...))",
        "secrets_stay_out_of_the_logs",
        STATUS_OK,
        CALLER,
        CALLER.replace(
            "    # Scoped",
            "    import logging\n\n"
            '    logging.basicConfig(filename="ex10_app.log", level=logging.INFO)\n'
            '    logging.info("%s asks for %s", owner, body)\n'
            "    # Scoped",
        ),
    ),
    (
        # An "audit log" of denied polls: who asked, as the Authorization header came.
        "the bearer token logged on the 404 branch (an audit log of denied polls)",
        "secrets_stay_out_of_the_logs",
        ACCEPT_OK,
        OWNER_CHECK,
        OWNER_CHECK
        + '        __import__("logging").getLogger("ex10.audit").warning(\n'
        + '            "denied job %s to %s (%s)", job_id, owner, authorization)\n',
    ),
    (
        # A reused key logged for the operators, with who sent it (the header as it came).
        "the bearer token logged when a key is reused with another body",
        "secrets_stay_out_of_the_logs",
        STATUS_OK,
        "    except IdempotencyConflict:\n",
        "    except IdempotencyConflict:\n"
        '        __import__("logging").getLogger("ex10").warning(\n'
        '            "key %r reused by %s", idempotency_key, authorization)\n',
    ),
    (
        # "A job key of fixed length": 8 hex digits, as git shows a commit. alice's
        # order-94625 and order-162519 share one: the second is answered with the first's job.
        "the job key sha256(owner:key) cut to 8 hex digits",
        "keys_are_compared_exactly",
        STATUS_OK,
        KEY_LINE,
        '    key = None if idempotency_key is None else "report:" + __import__("hashlib").sha256(\n'
        '        f"{owner}:{idempotency_key}".encode()).hexdigest()[:8]\n',
    ),
    (
        # "Reports are expensive: try twice at most": an outage of a few minutes ends it dead.
        "the job enqueued with max_attempts=2",
        "a_report_worker_claims_the_job",
        STATUS_OK,
        ENQUEUE,
        ENQUEUE.replace("key=key)", "key=key, max_attempts=2)"),
    ),
    (
        # "Why it ended is no secret, the error is sanitized": a dead job's view served
        # before the owner check, and bob reads how alice's report failed.
        "a dead job's status shown to whoever asks, before the owner check",
        "status_hides_the_payload",
        ACCEPT_OK,
        OWNER_CHECK,
        '    if job is not None and job.state == "dead":\n'
        "        return JSONResponse(status_view(job))\n" + OWNER_CHECK,
    ),
    (
        # The same for a job waiting for its retry: "it will run again, say when".
        "a waiting job's status shown to whoever asks, before the owner check",
        "status_hides_the_payload",
        ACCEPT_OK,
        OWNER_CHECK,
        '    if job is not None and job.state == "retry_wait":\n'
        "        return JSONResponse(status_view(job))\n" + OWNER_CHECK,
    ),
    (
        # And for a running one: "a worker has it, nothing to hide".
        "a running job's status shown to whoever asks, before the owner check",
        "status_hides_the_payload",
        ACCEPT_OK,
        OWNER_CHECK,
        '    if job is not None and job.state == "running":\n'
        "        return JSONResponse(status_view(job))\n" + OWNER_CHECK,
    ),
    (
        # The owner compared with `in`: 'ali' is in 'alice', and ali reads her jobs.
        "the owner compared as a substring of the job's owner",
        "status_hides_the_payload",
        ACCEPT_OK,
        OWNER_CHECK,
        "    if job is None or not isinstance(job.payload, dict) "
        'or owner not in str(job.payload.get("owner")):\n',
    ),
    (
        # A separator user names hold: mary + 'jane-7' and mary-jane + '7' are one key.
        "owner and key joined with '-', which user names hold",
        "keys_are_scoped_to_the_caller",
        STATUS_OK,
        KEY_LINE,
        '    key = None if idempotency_key is None else f"report-{owner}-{idempotency_key}"\n',
    ),
    (
        # The same with '_': john + 'doe_7' and john_doe + '7' are one key.
        "owner and key joined with '_', which user names hold",
        "keys_are_scoped_to_the_caller",
        STATUS_OK,
        KEY_LINE,
        '    key = None if idempotency_key is None else f"report_{owner}_{idempotency_key}"\n',
    ),
    (
        # "Keep the message short": a UUID key cut to 16 characters names no request.
        "the conflict's message names the key cut to 16 characters",
        "odd_keys_are_data",
        STATUS_OK,
        "Idempotency-Key {idempotency_key!r} was",
        "Idempotency-Key {idempotency_key[:16]!r} was",
    ),
    (
        # "Refused bodies hold secrets; taken ones are fine to log": a password written
        # in a note is taken, and logged with the rest of the body.
        "the body logged once its job is stored",
        "secrets_stay_out_of_the_logs",
        STATUS_OK,
        '    # enqueue returned: the job is committed. Only now may the answer say "accepted".\n',
        '    __import__("logging").getLogger("ex10").info(\n'
        '        "job %s for %s: %s", job.id, owner, body)\n',
    ),
    (
        # The body logged for the operators when the store fails: the database is down,
        # the password in its note is in the log.
        "the body logged when store.enqueue fails",
        "secrets_stay_out_of_the_logs",
        STATUS_OK,
        REFUSED,
        REFUSED
        + "    except Exception:\n"
        + '        __import__("logging").getLogger("ex10").error("could not store %r", body)\n'
        + "        raise\n",
    ),
    (
        # The job in a transaction of the app's own, committed only when enqueue
        # returns: a conflict leaves it open with the write lock, and no worker claims.
        "the app's own transaction left open when a reused key is refused",
        "a_conflict_is_never_answered_as_accepted",
        ACCEPT_OK,
        ENQUEUE,
        "        import sqlite3\n"
        "        import threading\n\n"
        "        conn = globals().setdefault('CONN', sqlite3.connect(\n"
        "            os.environ.get('EX10_DB', 'ex10_jobs.db'),\n"
        "            check_same_thread=False, timeout=10))\n"
        "        with globals().setdefault('LOCK', threading.Lock()):\n"
        '            job, _created = store.enqueue("report", {"owner": owner, "request": body},\n'
        "                                          key=key, conn=conn)\n"
        "            conn.commit()\n",
    ),
    (
        # "Check the key before storing anything": the body is recorded per key before
        # enqueue, so the request refused for a password and sent again without it is
        # refused for ever as a reused key.
        "bodies recorded per key before store.enqueue (the corrected request refused)",
        "a_conflict_is_never_answered_as_accepted",
        ACCEPT_OK,
        CALLER,
        CALLER
        + "    if idempotency_key is not None:\n"
        + "        seen = globals().setdefault('SEEN', {})\n"
        + "        seen = seen.setdefault((owner, idempotency_key), body)\n"
        + "        if seen != body:\n"
        + "            return JSONResponse(\n"
        + '                {"detail": f"Idempotency-Key {idempotency_key!r} reused"},\n'
        + "                status_code=422)\n",
    ),
    (
        # "Another body is another request": the reused key's new body stored without a
        # key, so each copy the client sends of it is one more job.
        "a reused key's new body stored as a job without a key",
        "a_conflict_is_never_answered_as_accepted",
        ACCEPT_OK,
        "    except IdempotencyConflict:\n",
        "    except IdempotencyConflict:\n"
        '        job, _created = store.enqueue("report", {"owner": owner, "request": body})\n'
        "        return JSONResponse(\n"
        '            {"job_id": job.id}, status_code=202,\n'
        '            headers={"Location": f"/reports/{job.id}", "Retry-After": "2"})\n',
    ),
    (
        # "Keep it, just in case": the new body stored under a key of the app's own, and
        # the client told it was refused, so it sends it again under a new key.
        "a reused key's new body stored under a key of its own, yet answered 422",
        "a_conflict_is_never_answered_as_accepted",
        ACCEPT_OK,
        "    except IdempotencyConflict:\n",
        "    except IdempotencyConflict:\n"
        '        store.enqueue("report", {"owner": owner, "request": body}, key=f"{key}:v2")\n',
    ),
    (
        # As "any error of store.get answered 404": the owner is told the job is gone.
        "any error of store.get answered 404: a poll while the store is down reads as no job",
        "a_poll_the_store_cannot_read_is_no_404",
        ACCEPT_OK,
        "    except NotFound:\n        job = None\n",
        "    except Exception:\n        job = None\n",
    ),
    (
        # Made ASCII for a column "that only takes ASCII": each byte that is not becomes
        # '?', so 'plan-ç' and 'plan-é' are both 'plan-??'.
        "the key's non-ASCII letters turned into '?' (encode('ascii', 'replace'))",
        "keys_are_compared_exactly",
        ACCEPT_OK,
        KEY_LINE,
        "    key = None if idempotency_key is None else (\n"
        "        f\"report:{owner}:\" + idempotency_key.encode('ascii', 'replace').decode())\n",
    ),
    (
        # "For SQL safety", though the key goes to the store as a value: 'order'77' and
        # 'order;77' meet 'order77'.
        "quotes and semicolons taken out of the key",
        "keys_are_compared_exactly",
        ACCEPT_OK,
        KEY_LINE,
        "    import re\n"
        "    safe = idempotency_key\n"
        "    if safe is not None:\n"
        "        safe = re.sub(r\"['\\\";]\", '', safe)\n"
        '    key = None if safe is None else f"report:{owner}:{safe}"\n',
    ),
    (
        # Cut from the other end, "where the unique part of a key is": two long keys that
        # differ in their first character meet.
        "a long key cut to its last 64 characters",
        "keys_are_compared_exactly",
        ACCEPT_OK,
        KEY_LINE,
        "    key = None if idempotency_key is None else (\n"
        '        f"report:{owner}:{idempotency_key[-64:]}")\n',
    ),
    (
        "a long key cut to its first and last 40 characters",
        "keys_are_compared_exactly",
        ACCEPT_OK,
        KEY_LINE,
        "    k = idempotency_key\n"
        "    if k is not None and len(k) > 80:\n"
        "        k = k[:40] + k[-40:]\n"
        '    key = None if k is None else f"report:{owner}:{k}"\n',
    ),
    (
        # Ana and ana are two callers: one key between them refuses the second's request.
        "the owner lower-cased in the job key",
        "keys_are_scoped_to_the_caller",
        STATUS_OK,
        KEY_LINE,
        "    key = None if idempotency_key is None else (\n"
        '        f"report:{owner.lower()}:{idempotency_key}")\n',
    ),
    (
        # Alice (another caller) is shown alice's jobs.
        "the owner compared case-insensitively",
        "status_hides_the_payload",
        ACCEPT_OK,
        OWNER_CHECK,
        "    if job is None or not isinstance(job.payload, dict) "
        "or str(job.payload.get('owner')).lower() != owner.lower():\n",
    ),
    (
        # The stored owner looked up in the caller's name: malice is shown alice's jobs.
        "the job's owner looked up in the caller's name (in)",
        "status_hides_the_payload",
        ACCEPT_OK,
        OWNER_CHECK,
        "    if job is None or not isinstance(job.payload, dict) "
        "or str(job.payload.get('owner')) not in owner:\n",
    ),
    (
        # The caller's name lower-cased "to be safe": alice still sees her jobs, and Alice
        # (another caller) is shown them too.
        "the caller's name lower-cased before it is compared with the job's owner",
        "status_hides_the_payload",
        ACCEPT_OK,
        OWNER_CHECK,
        "    if job is None or not isinstance(job.payload, dict) "
        "or job.payload.get('owner') != owner.lower():\n",
    ),
    (
        # "Tidy" the request: an empty text, an empty list, a zero or a false is a field
        # the caller did not mean. It is one they asked for.
        "falsy fields taken out of the request (empty texts and lists, 0, False)",
        "the_request_is_stored_whole",
        ACCEPT_OK,
        ENQUEUE,
        "        tidy = {k: v for k, v in body.items() if v or v is None}\n"
        '        job, _created = store.enqueue("report", {"owner": owner, "request": tidy}, '
        "key=key)\n",
    ),
    (
        # Nulls dropped at every depth, not only at the top (that one is caught above).
        "null fields dropped inside the request's objects",
        "the_request_is_stored_whole",
        ACCEPT_OK,
        ENQUEUE,
        "        tidy = {k: {a: b for a, b in v.items() if b is not None} "
        "if isinstance(v, dict) else v for k, v in body.items()}\n"
        '        job, _created = store.enqueue("report", {"owner": owner, "request": tidy}, '
        "key=key)\n",
    ),
    (
        "the request's lists of texts made unique (an account named twice kept once)",
        "the_request_is_stored_whole",
        ACCEPT_OK,
        ENQUEUE,
        "        tidy = {k: list(dict.fromkeys(v)) if isinstance(v, list) "
        "and all(isinstance(i, str) for i in v) else v for k, v in body.items()}\n"
        '        job, _created = store.enqueue("report", {"owner": owner, "request": tidy}, '
        "key=key)\n",
    ),
    (
        # The cap on lists applied one level down, to the filters' lists.
        "the lists inside the request's objects cut to 100 items",
        "the_request_is_stored_whole",
        ACCEPT_OK,
        ENQUEUE,
        "        tidy = {k: {a: b[:100] if isinstance(b, list) else b for a, b in v.items()} "
        "if isinstance(v, dict) else v for k, v in body.items()}\n"
        '        job, _created = store.enqueue("report", {"owner": owner, "request": tidy}, '
        "key=key)\n",
    ),
    (
        # The caller's own field 'id' taken for a clash with the job's id.
        "a field 'id' taken out of the stored request",
        "the_request_is_stored_whole",
        ACCEPT_OK,
        ENQUEUE,
        '        tidy = {k: v for k, v in body.items() if k not in ("id", "job_id")}\n'
        '        job, _created = store.enqueue("report", {"owner": owner, "request": tidy}, '
        "key=key)\n",
    ),
    (
        # The caller's name that starts with the job's owner: alice2 is shown alice's jobs.
        "the caller's name compared with startswith() to the job's owner",
        "status_hides_the_payload",
        ACCEPT_OK,
        OWNER_CHECK,
        "    if job is None or not isinstance(job.payload, dict) "
        "or not owner.startswith(str(job.payload.get('owner'))):\n",
    ),
    (
        # The error shown only while the job may still run: its owner never learns why
        # it ended.
        "a dead job's status shown without its error",
        "status_shows_the_job_to_its_owner",
        ACCEPT_OK,
        "    return JSONResponse(status_view(job))\n",
        "    view = status_view(job)\n"
        '    if view["state"] == "dead":\n'
        '        view["error"] = None\n'
        "    return JSONResponse(view)\n",
    ),
    (
        # A job a worker holds hidden from its owner ("not visible while leased"): the
        # owner reads that the job does not exist and sends the request again.
        "a running job answered 404 to its owner",
        "status_shows_the_job_to_its_owner",
        ACCEPT_OK,
        "    return JSONResponse(status_view(job))\n",
        '    if job.state == "running":\n'
        '        return JSONResponse({"detail": "no such job"}, status_code=404)\n'
        "    return JSONResponse(status_view(job))\n",
    ),
    (
        # The polling pattern read as "202 until done": the contract answers the owner
        # 200 with the view in every state.
        "a job still in progress answered 202 to its owner",
        "status_shows_the_job_to_its_owner",
        ACCEPT_OK,
        "    return JSONResponse(status_view(job))\n",
        '    if job.state in ("running", "retry_wait"):\n'
        "        return JSONResponse(status_view(job), status_code=202,\n"
        '                            headers={"Retry-After": "2"})\n'
        "    return JSONResponse(status_view(job))\n",
    ),
    (
        # A view of its own for a running job: the attempts the worker made are gone.
        "a running job's status built by hand without its attempts",
        "status_shows_the_job_to_its_owner",
        ACCEPT_OK,
        "    return JSONResponse(status_view(job))\n",
        '    if job.state == "running":\n'
        '        return JSONResponse({"job_id": job.id, "state": "running"})\n'
        "    return JSONResponse(status_view(job))\n",
    ),
    # Found by the red team (ex10, round 2).
    (
        # Copied from a tutorial run on the developer's machine: every client behind a
        # proxy, or on another port, polls a server that is not there.
        "an absolute Location with a host and port written in the code",
        "every_202_says_where_and_when_to_poll",
        STATUS_OK,
        LOCATION,
        LOCATION.replace('f"/reports/', 'f"http://localhost:8000/reports/'),
    ),
    (
        # "So the client can poll without headers": the bearer token in the poll URL,
        # which every proxy and browser history keeps.
        "the bearer token in the Location (?access_token=...)",
        "secrets_stay_out_of_the_logs",
        STATUS_OK,
        LOCATION,
        LOCATION.replace(
            'f"/reports/{job.id}"',
            'f"/reports/{job.id}?access_token={authorization.split()[-1]}"',
        ),
    ),
    (
        # An audit trail of every request, as it came, in a file of the app's own: the
        # password of a refused body is there for whoever reads it.
        "every request appended as it came to an audit file of its own (requests.jsonl)",
        "secrets_stay_out_of_the_logs",
        STATUS_OK,
        CALLER,
        CALLER
        + "    import json\n\n"
        + "    with open('requests.jsonl', 'a', encoding='utf-8') as audit:\n"
        + "        audit.write(json.dumps({'owner': owner, 'key': idempotency_key, "
        + "'body': body}) + '\\n')\n",
    ),
    (
        # The same trail in a table of the job database, written before enqueue refuses.
        "every request kept as it came in an audit table of the job database",
        "secrets_stay_out_of_the_logs",
        STATUS_OK,
        CALLER,
        CALLER
        + "    import json\n    import sqlite3\n\n"
        + "    with sqlite3.connect(os.environ.get('EX10_DB', 'ex10_jobs.db'), timeout=30) as a:\n"
        + "        a.execute('CREATE TABLE IF NOT EXISTS audit (owner TEXT, body TEXT)')\n"
        + "        a.execute('INSERT INTO audit VALUES (?, ?)', (owner, json.dumps(body)))\n",
    ),
    (
        # "Support needs to see what was refused": the refused body kept whole.
        "refused bodies kept whole in a table for support",
        "secrets_stay_out_of_the_logs",
        STATUS_OK,
        REFUSED,
        "    except PayloadError as exc:\n"
        "        import json\n        import sqlite3\n\n"
        "        db = os.environ.get('EX10_DB', 'ex10_jobs.db')\n"
        "        with sqlite3.connect(db, timeout=30) as a:\n"
        "            a.execute('CREATE TABLE IF NOT EXISTS refused (owner TEXT, body TEXT)')\n"
        "            a.execute('INSERT INTO refused VALUES (?, ?)', (owner, json.dumps(body)))\n"
        '        return JSONResponse({"detail": str(exc)}, status_code=422)\n',
    ),
    (
        # "Stripe keeps keys a day": 24 * 60 is a day in minutes; in seconds it is 24
        # minutes, and a client retrying hours after the crash gets a second job.
        "keys expire after 24 * 60 seconds (a day meant), a later retry makes a second job",
        "retry_after_the_crash_gets_the_same_job",
        "same_key_same_job",
        ENQUEUE,
        ENQUEUE
        + "        import time\n\n"
        + "        if not _created and time.time() - job.created_at > 24 * 60:\n"
        + '            job, _created = store.enqueue("report", {"owner": owner, "request": body},\n'
        + '                                          key=f"{key}:{int(time.time())}")\n',
    ),
    (
        # The monotonic clock counts from the boot: the job is due in 1970, ahead of every
        # job already waiting.
        "run_after from time.monotonic(): the report jumps every queue",
        "every_202_says_where_and_when_to_poll",
        STATUS_OK,
        ENQUEUE,
        ENQUEUE.replace("key=key)", "key=key, run_after=__import__('time').monotonic())"),
    ),
    (
        # "Reports first": due an hour ago, ahead of the retries the store has waiting.
        "run_after an hour in the past to put reports first in line",
        "every_202_says_where_and_when_to_poll",
        STATUS_OK,
        ENQUEUE,
        ENQUEUE.replace("key=key)", "key=key, run_after=__import__('time').time() - 3600)"),
    ),
    (
        # An honest estimate, uncapped: among a thousand pending jobs, "come back in an hour".
        "Retry-After estimated from the queue's length, with no cap",
        "status_finds_a_job_among_thousands",
        STATUS_OK,
        LOCATION,
        LOCATION.replace("str(RETRY_AFTER_S)", 'str(max(1, 2 * len(store.jobs(state="pending"))))'),
    ),
    (
        # Jitter so clients do not poll in lockstep, drawn from 0: "poll now" once in three.
        "Retry-After jittered with random.randint(0, 2) (0 says poll at once)",
        "status_finds_a_job_among_thousands",
        STATUS_OK,
        LOCATION,
        LOCATION.replace("str(RETRY_AFTER_S)", 'str(__import__("random").randint(0, 2))'),
    ),
    (
        # A header only the 404 of another's job carries: the job's state, "for debugging".
        "another's job answered with the missing id's 404 plus an X-Job-State header",
        "status_hides_the_payload",
        STATUS_OK,
        OWNER_CHECK + '        return JSONResponse({"detail": "no such job"}, status_code=404)\n',
        "    if job is None:\n"
        + '        return JSONResponse({"detail": "no such job"}, status_code=404)\n'
        + '    if not isinstance(job.payload, dict) or job.payload.get("owner") != owner:\n'
        '        return JSONResponse({"detail": "no such job"}, status_code=404,\n'
        '                            headers={"X-Job-State": str(job.state)})\n',
    ),
    (
        # "Log in as the owner": a WWW-Authenticate only on the 404 of a job that exists.
        "another's job answered with the missing id's 404 plus WWW-Authenticate",
        "status_hides_the_payload",
        STATUS_OK,
        OWNER_CHECK + '        return JSONResponse({"detail": "no such job"}, status_code=404)\n',
        "    if job is None:\n"
        + '        return JSONResponse({"detail": "no such job"}, status_code=404)\n'
        + '    if not isinstance(job.payload, dict) or job.payload.get("owner") != owner:\n'
        '        return JSONResponse({"detail": "no such job"}, status_code=404,\n'
        '                            headers={"WWW-Authenticate": "Bearer"})\n',
    ),
    (
        # Quotes around the key taken off, as if they only quoted it: '"order77"' meets
        # 'order77'.
        "the quotes around the key taken off",
        "keys_are_compared_exactly",
        STATUS_OK,
        KEY_LINE,
        KEY_LINE.replace("{idempotency_key}", "{idempotency_key.strip(chr(34) + chr(39))}"),
    ),
    (
        # Amounts "cleaned" to cents: a rate of 0.125 becomes 0.12.
        "the request's numbers rounded to 2 decimals",
        "the_request_is_stored_whole",
        STATUS_OK,
        ENQUEUE,
        "        body = {k: round(v, 2) if isinstance(v, float) else v for k, v in body.items()}\n"
        + ENQUEUE,
    ),
    (
        # Field names normalised: 'Rate' is stored as 'rate', which the worker never reads.
        "the request's field names lower-cased",
        "the_request_is_stored_whole",
        STATUS_OK,
        ENQUEUE,
        "        body = {str(k).lower(): v for k, v in body.items()}\n" + ENQUEUE,
    ),
    (
        # Every number made a float "for the report's arithmetic": 2**53 + 1 loses its last
        # unit, and 0 becomes 0.0.
        "the request's integers turned into floats",
        "the_request_is_stored_whole",
        STATUS_OK,
        ENQUEUE,
        "        body = {k: float(v) if type(v) is int else v for k, v in body.items()}\n"
        + ENQUEUE,
    ),
]


# Requests without a key given a key made up from the store's listing of jobs: its length,
# or its highest id plus one. store.jobs() lists at most 1000, so among more jobs every
# such request gets the same key, and the second is refused (or merged with the first).
ZOO += [
    (
        "a request without a key keyed by the number of jobs store.jobs() lists",
        "requests_without_a_key_are_never_merged",
        STATUS_OK,
        KEY_LINE,
        '    key = f"report:{owner}:{idempotency_key}" if idempotency_key is not None else '
        'f"report:{owner}:auto-{len(store.jobs())}"\n',
    ),
    (
        "a request without a key keyed by the highest listed job id plus one",
        "requests_without_a_key_are_never_merged",
        STATUS_OK,
        KEY_LINE,
        '    key = f"report:{owner}:{idempotency_key}" if idempotency_key is not None else '
        'f"report:{owner}:next-{max([j.id for j in store.jobs()] or [0]) + 1}"\n',
    ),
]


# A request stored almost whole, a refusal of one's own, and a view kept once a job ended.
ZOO += [
    (
        # "Fields starting with '_' are private": the caller's '_source' is dropped.
        "fields whose name starts with '_' taken out of the stored request",
        "the_request_is_stored_whole",
        STATUS_OK,
        ENQUEUE,
        '        body = {k: v for k, v in body.items() if not k.startswith("_")}\n' + ENQUEUE,
    ),
    (
        "the request's texts normalized to NFC before they are stored",
        "the_request_is_stored_whole",
        STATUS_OK,
        ENQUEUE,
        "        import unicodedata\n"
        '        body = {k: unicodedata.normalize("NFC", v) if isinstance(v, str) else v '
        "for k, v in body.items()}\n" + ENQUEUE,
    ),
    (
        # A pre-check of the author's own before enqueue, with one text for every field.
        "a top-level password refused before enqueue with a message that names no field",
        "credential_in_the_body_is_refused",
        STATUS_OK,
        "    try:\n" + ENQUEUE,
        '    if any(f in body for f in ("password", "secret", "token")):\n'
        '        return JSONResponse({"detail": "credentials are not allowed in a report '
        'request"},\n'
        "                            status_code=422)\n"
        "    try:\n" + ENQUEUE,
    ),
    (
        # "A finished job never changes": its view kept per owner and id, and a dead job
        # an operator redrove still shows dead.
        "views of ended jobs kept per owner and id (a redriven job still shows dead)",
        STATUS_OK,
        ACCEPT_OK,
        """    try:
        job = store.get(job_id)
    except NotFound:
        job = None
"""
        + OWNER_CHECK,
        """    ended = globals().setdefault("ENDED_VIEWS", {})
    if (owner, job_id) in ended:
        return JSONResponse(ended[(owner, job_id)])
    try:
        job = store.get(job_id)
    except NotFound:
        job = None
    if (job is not None and isinstance(job.payload, dict) and job.payload.get("owner") == owner
            and str(job.state) in ("succeeded", "dead", "cancelled")):
        ended[(owner, job_id)] = status_view(job)
"""
        + OWNER_CHECK,
    ),
]


# Keys and numbers "normalized" on the way in.
ZOO += [
    (
        "slashes taken out of the key: 'order/77' meets 'order77'",
        "keys_are_compared_exactly",
        "same_key_same_job",
        KEY_LINE,
        "    key = None if idempotency_key is None else "
        "f\"report:{owner}:{idempotency_key.replace('/', '')}\"\n",
    ),
    (
        "a numeric key read as its number: '077' meets '77'",
        "keys_are_compared_exactly",
        "same_key_same_job",
        KEY_LINE,
        "    if idempotency_key is not None and idempotency_key.isdigit():\n"
        "        idempotency_key = str(int(idempotency_key))\n" + KEY_LINE,
    ),
    (
        "the request's whole floats turned into integers (1.0 stored as 1)",
        "the_request_is_stored_whole",
        STATUS_OK,
        ENQUEUE,
        "        body = {k: int(v) if isinstance(v, float) and v.is_integer() else v "
        "for k, v in body.items()}\n" + ENQUEUE,
    ),
    (
        # A key made up for a request without one from id(body): Python hands the address
        # of a freed body out again, so a later request meets an earlier one's key.
        "a request without a key given the key id(body)",
        "status_finds_a_job_among_thousands",
        STATUS_OK,
        KEY_LINE,
        '    key = (f"report:{owner}:{idempotency_key}" if idempotency_key is not None\n'
        '           else f"report:{owner}:new:{id(body)}")\n',
    ),
    (
        # "Due when the caller is told to poll", from a default argument: evaluated once, it
        # is the time of the server's first request for the rest of its life.
        "run_after from a default argument now=time.time(), evaluated once",
        "every_202_says_where_and_when_to_poll",
        STATUS_OK,
        ENQUEUE,
        "        import time\n\n"
        '        due = globals().setdefault("DUE", lambda after=RETRY_AFTER_S, now=time.time(): '
        "now + after)\n" + ENQUEUE.replace("key=key)", "key=key, run_after=due())"),
    ),
    (
        # One connection for every request, the job enqueued in its transaction, and the
        # refusal rolled back: the rollback undoes another request's job, not yet committed.
        "one sqlite3 connection shared by every request, enqueue(conn=) rolled back on a refusal",
        "a_conflict_is_never_answered_as_accepted",
        "same_key_same_job",
        "    try:\n" + ENQUEUE + "    except IdempotencyConflict:\n",
        SHARED_CONN
        + "    try:\n"
        + ENQUEUE.replace("key=key)", "key=key, conn=conn)")
        + "        conn.commit()\n"
        "    except IdempotencyConflict:\n"
        "        conn.rollback()\n",
    ),
    (
        # The same with `with conn:`, which rolls back on the IdempotencyConflict it lets out.
        "one sqlite3 connection shared by every request, enqueue(conn=) inside `with conn:`",
        "a_conflict_is_never_answered_as_accepted",
        "same_key_same_job",
        "    try:\n" + ENQUEUE + "    except IdempotencyConflict:\n",
        SHARED_CONN
        + "    try:\n"
        + "        with conn:\n"
        + textwrap.indent(ENQUEUE.replace("key=key)", "key=key, conn=conn)"), "    ")
        + "    except IdempotencyConflict:\n",
    ),
    (
        # The caller found once per request by a middleware and kept in a module-level
        # variable: requests in flight together read whoever came last.
        "the caller kept in a module-level variable by a middleware",
        "requests_sent_together_get_one_job",
        STATUS_OK,
        "RETRY_AFTER_S = 2\n",
        """RETRY_AFTER_S = 2
CURRENT: dict = {}
_token_owner = caller_of


@app.middleware("http")
async def identify(request, call_next):
    try:
        CURRENT["owner"] = _token_owner(request.headers.get("authorization"))
    except Exception:
        CURRENT["owner"] = None
    return await call_next(request)


def caller_of(authorization):
    if CURRENT.get("owner") is None:
        return _token_owner(authorization)
    return CURRENT["owner"]
""",
    ),
    (
        # "Callers may pick a faster queue": a field of the body steers the job to a queue
        # no report worker takes.
        "the queue taken from the body's 'queue' field",
        "a_report_worker_claims_the_job",
        STATUS_OK,
        ENQUEUE,
        ENQUEUE.replace("key=key)", 'key=key, queue=body.get("queue", "default"))'),
    ),
    (
        # "Callers may ask for another kind of report": the job's kind from the body.
        "the job's kind taken from the body's 'kind' field",
        "a_report_worker_claims_the_job",
        STATUS_OK,
        ENQUEUE,
        ENQUEUE.replace('store.enqueue("report",', 'store.enqueue(body.get("kind", "report"),'),
    ),
    (
        # "Half a day is plenty": a client offline overnight retries after the key expired,
        # within the day Stripe keeps keys, and gets a second job.
        "keys expire after 12 hours, a retry the next day makes a second job",
        "retry_after_the_crash_gets_the_same_job",
        "same_key_same_job",
        ENQUEUE,
        ENQUEUE
        + "        import time\n\n"
        + "        if not _created and time.time() - job.created_at > 12 * 3600:\n"
        + '            job, _created = store.enqueue("report", {"owner": owner, "request": body},\n'
        + '                                          key=f"{key}:{int(time.time())}")\n',
    ),
]


def reference_app() -> str:
    nb = nbformat.read(notebook_for(SOLUTIONS, "ex10"), as_version=4)
    [cell] = [c for c in nb.cells if c.source.startswith("%%writefile ex10_app.py")]
    return cell.source.partition("\n")[2]


def outcome(check_name: str, workdir: Path):  # type: ignore[no-untyped-def]
    [check] = [c for c in catalog.all_checks("ex10", HIDDEN) if c.name == check_name]
    return run_check(check, Namespace({}, workdir))


#: A database session per request from a FastAPI dependency with ``yield``, as the SQL
#: tutorials write one: the code after its ``yield`` (the commit) runs once the answer is
#: sent, unless the dependency is declared with ``scope="function"``.
SESSION_DEPENDENCY = """import sqlite3

from fastapi import Depends


def db_session():
    conn = sqlite3.connect(os.environ.get("EX10_DB", "ex10_jobs.db"), timeout=30,
                           check_same_thread=False)
    try:
        yield conn
        conn.commit()
    except BaseException:
        conn.rollback()
        raise
    finally:
        conn.close()


"""
#: The end of accept's signature, where a dependency parameter goes.
SIGNATURE_END = """    idempotency_key: Annotated[str | None, Header()] = None,
) -> JSONResponse:
    \"\"\"Accept"""


def _with_session(scope: str) -> list[tuple[str, str]]:
    """The edits that make accept enqueue on the session of ``db_session`` (``scope``:
    the argument of Depends, as source text)."""
    return [
        (
            '@app.post("/reports", status_code=202)',
            SESSION_DEPENDENCY + '@app.post("/reports", status_code=202)',
        ),
        (
            SIGNATURE_END,
            SIGNATURE_END.replace(
                "= None,\n) ->",
                "= None,\n    conn: Annotated[sqlite3.Connection, "
                f"Depends(db_session{scope})] = None,\n) ->",
            ),
        ),
        (ENQUEUE, ENQUEUE.replace("key=key)", "key=key, conn=conn)")),
    ]


def _edited(edits: list[tuple[str, str]], text: str) -> str:
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    return text


#: The lookup of a key the app makes itself before enqueue, answering a retry from it;
#: ``{differ}``: its test that the stored request is another body.
LOOKUP_FIRST = """    if key is not None:
        existing = store.get_by_key(key)
        if existing is not None:
            if {differ}:
                return JSONResponse({"detail": f"Idempotency-Key {idempotency_key!r} was "
                                     "already used with another body"}, status_code=422)
            return JSONResponse({"job_id": existing.id}, status_code=202, headers={
                "Location": f"/reports/{existing.id}", "Retry-After": str(RETRY_AFTER_S)})
    try:
"""

#: The reference's routes, from accept's decorator on; and from there to its enqueue.
_ROUTES = reference_app()[reference_app().index("@app.post") :]
_ACCEPT_TO_ENQUEUE = _ROUTES[: _ROUTES.index(ENQUEUE) + len(ENQUEUE)]

# A commit after the answer, and a body compared by Python's == (False == 0).
ZOO += [
    (
        "the job committed by a yield dependency's exit, after the 202 is sent",
        "job_is_committed_before_the_202",
        STATUS_OK,
        _ACCEPT_TO_ENQUEUE,
        _edited(_with_session(""), _ACCEPT_TO_ENQUEUE),
    ),
    (
        "a retry recognised by a lookup first, bodies compared with == (false taken for 0)",
        "a_conflict_is_never_answered_as_accepted",
        STATUS_OK,
        "    try:\n" + ENQUEUE,
        LOOKUP_FIRST.replace("{differ}", 'existing.payload.get("request") != body') + ENQUEUE,
    ),
]


#: A Pydantic model of the body, as the FastAPI tutorial declares one: fields it does not
#: name are dropped (extra="ignore"), a credential among them too.
PYDANTIC_BODY = """from pydantic import BaseModel


class ReportRequest(BaseModel):
    month: str


"""

# A key made of the clock for a request without one, and a body model that drops fields.
ZOO += [
    (
        # Unique enough on a fine clock; a coarse one (15 ms on some hosts) reads the same
        # for requests that follow each other fast, and they share a key.
        "a request without a key keyed by time.time() (two in one clock tick share a job)",
        "requests_without_a_key_are_never_merged",
        STATUS_OK,
        KEY_LINE,
        "    import time\n\n"
        '    key = f"report:{owner}:{idempotency_key}" if idempotency_key is not None else '
        'f"report:{owner}:at-{time.time()}"\n',
    ),
    (
        "the body read into a Pydantic model, which drops the fields it does not name",
        "the_request_is_stored_whole",
        STATUS_OK,
        _ROUTES[: _ROUTES.index(CALLER) + len(CALLER)],
        _edited(
            [
                (
                    '@app.post("/reports", status_code=202)',
                    PYDANTIC_BODY + '@app.post("/reports", status_code=202)',
                ),
                (
                    "    body: Annotated[dict[str, Any], Body()],\n",
                    "    request: ReportRequest,\n",
                ),
                (CALLER, "    body = request.model_dump()\n" + CALLER),
            ],
            _ROUTES[: _ROUTES.index(CALLER) + len(CALLER)],
        ),
    ),
]


# A request checked for content of its own: the contract takes any JSON object.
ZOO += [
    (
        # "Nothing to report": a validation the contract does not ask for, and the client
        # told by a 4xx that its request (a report with every default) is not one.
        "an empty request {} refused with 422 (a report with every default dropped)",
        "odd_keys_are_data",
        STATUS_OK,
        CALLER,
        CALLER + '    if not body:\n'
        '        return JSONResponse({"detail": "empty report request"}, status_code=422)\n',
    ),
    (
        # The tutorial's json.dumps without sort_keys: the same body with its keys in
        # another order (a client that rebuilt its dict for the retry) reads as a conflict.
        "a retry recognised by a lookup first, bodies compared as json.dumps without sort_keys",
        "retry_after_the_crash_gets_the_same_job",
        STATUS_OK,
        "    try:\n" + ENQUEUE,
        "    import json\n\n"
        + LOOKUP_FIRST.replace(
            "{differ}", 'json.dumps(existing.payload.get("request")) != json.dumps(body)'
        )
        + ENQUEUE,
    ),
    (
        # "So the client sees what was wrong": the refusal sends the password back.
        "a refused body echoed in the 422's message (the credential sent back)",
        "credential_in_the_body_is_refused",
        STATUS_OK,
        '        return JSONResponse({"detail": str(exc)}, status_code=422)\n',
        '        return JSONResponse({"detail": f"{exc}; you sent {body!r}"}, status_code=422)\n',
    ),
    (
        # "The job exists already, poll at once": a retry told Retry-After: 0.
        "a retry answered Retry-After: 0 (poll at once) when its job already exists",
        "every_202_says_where_and_when_to_poll",
        STATUS_OK,
        ANSWER,
        '    return JSONResponse({"job_id": job.id}, status_code=202, headers={\n'
        '        "Location": f"/reports/{job.id}",\n'
        '        "Retry-After": str(RETRY_AFTER_S if _created else 0)})\n',
    ),
    (
        # The 404 of "no such job" for a poll without a valid token too.
        "the status answers 404, not 401, to a missing or unknown token",
        "no_token_is_401",
        ACCEPT_OK,
        "    owner = caller_of(authorization)\n    try:\n        job = store.get(job_id)",
        "    from fastapi import HTTPException\n\n    try:\n"
        "        owner = caller_of(authorization)\n    except HTTPException:\n"
        '        return JSONResponse({"detail": "no such job"}, status_code=404)\n'
        "    try:\n        job = store.get(job_id)",
    ),
    (
        # 401 as "you are not allowed here": it tells the caller the id exists.
        "401 for another owner's job (tells them the id exists)",
        "other_owner_gets_404",
        ACCEPT_OK,
        OWNER_CHECK + '        return JSONResponse({"detail": "no such job"}, status_code=404)\n',
        "    if job is None:\n"
        '        return JSONResponse({"detail": "no such job"}, status_code=404)\n'
        + OWNER_CHECK
        + '        return JSONResponse({"detail": "not your job"}, status_code=401)\n',
    ),
    (
        # The conflict's branch written as a catch-all after the credential's: a locked or
        # absent database is told "key already used", a 4xx the client does not retry.
        "every other error of store.enqueue answered 422 as a reused key",
        "job_is_committed_before_the_202",
        STATUS_OK,
        "    except IdempotencyConflict:\n",
        "    except PayloadError as exc:\n"
        '        return JSONResponse({"detail": str(exc)}, status_code=422)\n'
        "    except Exception:\n",
    ),
    (
        # "Saves a database read for ids that do not exist": a 404 kept per id, and ids
        # are handed out in order, so an id polled too early is never found again.
        "ids found missing kept in a set: a job whose id was polled before it existed is 404",
        "status_finds_a_job_among_thousands",
        ACCEPT_OK,
        """    try:
        job = store.get(job_id)
    except NotFound:
        job = None
""",
        """    missing = globals().setdefault("MISSING", set())
    if job_id in missing:
        return JSONResponse({"detail": "no such job"}, status_code=404)
    try:
        job = store.get(job_id)
    except NotFound:
        missing.add(job_id)
        job = None
""",
    ),
]


# A key left unscoped because it looks unique the world over.
ZOO += [
    (
        # "A UUID is globally unique": bob sending the UUID alice sent (a client library's
        # reused one) is answered with her job, his request never runs.
        "an Idempotency-Key shaped as a UUID used unscoped",
        "keys_are_scoped_to_the_caller",
        ACCEPT_OK,
        KEY_LINE,
        KEY_LINE
        + "    if idempotency_key is not None and len(idempotency_key) == 36 "
        'and idempotency_key.count("-") == 4:\n'
        '        key = f"report:{idempotency_key}"\n',
    ),
]


@pytest.mark.parametrize(
    "mistake, failing, passing, old, new", ZOO, ids=[entry[0] for entry in ZOO]
)
def test_wrong_app_fails_the_check_named_after_its_mistake(
    tmp_path: Path, mistake: str, failing: str, passing: str, old: str, new: str
) -> None:
    source = reference_app()
    assert old in source, f"the zoo entry {mistake!r} no longer matches the reference"
    edited = source.replace(old, new, 1)
    compiles(edited, mistake)
    skip_unless_drawn(mistake)
    (tmp_path / "ex10_app.py").write_text(edited, encoding="utf-8")
    caught = outcome(failing, tmp_path)
    assert caught.status == CheckStatus.FAILED, (caught.status, caught.expected, caught.got)
    assert caught.earned == 0 and caught.expected and caught.got and caught.hint
    assert "Traceback" not in caught.got
    if not runs_its_control(mistake):
        return
    control = outcome(passing, tmp_path)
    assert control.status == CheckStatus.PASSED, (control.status, control.expected, control.got)


def test_missing_app_file_says_which_cell_to_run(tmp_path: Path) -> None:
    result = outcome(ACCEPT_OK, tmp_path)
    assert result.status == CheckStatus.FAILED and "ex10_app.py" in result.expected
    assert "%%writefile" in result.hint


def test_app_that_does_not_import_shows_the_error(tmp_path: Path) -> None:
    (tmp_path / "ex10_app.py").write_text("import no_such_module_x\n", encoding="utf-8")
    result = outcome(ACCEPT_OK, tmp_path)
    assert result.status == CheckStatus.FAILED and "no_such_module_x" in result.got


class Watched(Namespace):
    """A namespace that remembers every process a check spawned."""

    def __init__(self, workdir: Path) -> None:
        super().__init__({}, workdir)
        self.started: list = []

    def spawn(self, argv, **kwargs):  # type: ignore[no-untyped-def]
        proc = super().spawn(argv, **kwargs)
        self.started.append(proc)
        return proc


def test_no_check_leaves_a_server_or_a_scratch_folder_behind(tmp_path: Path) -> None:
    (tmp_path / "ex10_app.py").write_text(reference_app(), encoding="utf-8")
    [check] = [
        c
        for c in catalog.all_checks("ex10", HIDDEN)
        if c.name == "retry_after_the_crash_gets_the_same_job"
    ]
    ns = Watched(tmp_path)
    assert run_check(check, ns).status == CheckStatus.PASSED
    # Per crash point (at the 202, after the enqueue): the server killed, then the healthy one.
    assert len(ns.started) == 4
    assert [p.poll() for p in ns.started] == [-9, -9, -9, -9]
    # Python's own cache of the app is no scratch folder (written unless
    # PYTHONDONTWRITEBYTECODE is set, as on a student's machine).
    left = sorted(p.name for p in tmp_path.iterdir() if p.name != "__pycache__")
    assert left == ["ex10_app.py"]


#: Right apps written otherwise, ``(way, check, source)``: the source replaces the
#: reference's routes (everything from the first ``@app.post``); each must keep the check
#: most likely to trip on it.
RIGHT: list[tuple[str, str, str]] = [
    (
        "HTTPException for every refusal, a 409 conflict, a hashed scoped key",
        "keys_are_scoped_to_the_caller",
        r"""
# HTTPException everywhere, 409 for a conflict, hashed scoped key, Retry-After 5.
import hashlib
import logging

from fastapi import HTTPException

log = logging.getLogger("ex10")
POLL_AFTER = 5
NOT_FOUND = HTTPException(status_code=404, detail="Not Found")


def scoped_key(owner: str, key: str | None) -> str | None:
    if key is None:
        return None
    return hashlib.sha256(f"{owner}\x00{key}".encode()).hexdigest()


@app.post("/reports", status_code=202)
def accept(
    body: Annotated[dict[str, Any], Body()],
    authorization: Annotated[str | None, Header()] = None,
    idempotency_key: Annotated[str | None, Header()] = None,
) -> JSONResponse:
    owner = caller_of(authorization)
    try:
        job, created = store.enqueue("report", {"owner": owner, "request": body},
                                     key=scoped_key(owner, idempotency_key))
    except IdempotencyConflict as exc:
        raise HTTPException(409, detail=f"Idempotency-Key {idempotency_key} reused with "
                                        f"a different body: {exc}") from exc
    except PayloadError as exc:
        raise HTTPException(422, detail=str(exc)) from exc
    log.info("job %s %s for %s", job.id, "created" if created else "found", owner)
    return JSONResponse(content={"job_id": job.id}, status_code=202,
                        headers={"Location": app.url_path_for("status", job_id=job.id),
                                 "Retry-After": f"{POLL_AFTER}"})


@app.get("/reports/{job_id}")
def status(job_id: int, authorization: Annotated[str | None, Header()] = None) -> Any:
    who = caller_of(authorization)
    try:
        job = store.get(job_id)
    except NotFound:
        raise NOT_FOUND from None
    owner = job.payload.get("owner") if isinstance(job.payload, dict) else None
    if owner != who:
        raise NOT_FOUND
    return status_view(job)
""",
    ),
    (
        "async handlers reading the raw body; a 503 when the store fails",
        "job_is_committed_before_the_202",
        r"""
# async handlers reading the raw request; Response param for headers; 503 on store errors.
import json as jsonlib

from fastapi import Request, Response


def _refuse(status: int, message: str) -> JSONResponse:
    return JSONResponse({"detail": message}, status_code=status)


@app.post("/reports")
async def accept(request: Request, response: Response,
                 authorization: Annotated[str | None, Header()] = None,
                 idempotency_key: Annotated[str | None, Header()] = None):
    owner = caller_of(authorization)
    try:
        body = jsonlib.loads(await request.body())
    except ValueError:
        return _refuse(422, "the body must be JSON")
    if not isinstance(body, dict):
        return _refuse(422, "the body must be a JSON object")
    key = f"{owner}/{idempotency_key}" if idempotency_key is not None else None
    try:
        job, _ = store.enqueue("report", {"owner": owner, "request": body}, key=key)
    except IdempotencyConflict:
        return _refuse(409, f"Idempotency-Key {idempotency_key} already names another request")
    except PayloadError as exc:
        return _refuse(422, str(exc))
    except Exception:
        return _refuse(503, "the job store is unavailable; try again later")
    response.status_code = 202
    response.headers["Location"] = f"/reports/{job.id}"
    response.headers["Retry-After"] = "1"
    return {"job_id": job.id}


@app.get("/reports/{job_id}")
async def status(job_id: int, authorization: Annotated[str | None, Header()] = None):
    owner = caller_of(authorization)
    try:
        job = store.get(job_id)
        visible = job.payload["owner"] == owner
    except (NotFound, KeyError, TypeError):
        visible = False
    if not visible:
        return _refuse(404, "no such job")
    return status_view(job)
""",
    ),
    (
        "an absolute Location from url_for; old-style Header(None) parameters",
        "every_202_says_where_and_when_to_poll",
        r"""
# Old-style Header(None)/Optional, plain dict body, absolute Location from url_for,
# a 409 conflict, a dedicated 404 helper, a module-level key separator.
from typing import Optional

from fastapi import HTTPException, Request

SEP = "\N{UNIT SEPARATOR}"


def _no_such_job() -> HTTPException:
    return HTTPException(status_code=404, detail="job not found")


@app.post("/reports", status_code=202)
def accept(request: Request, body: dict = Body(...),
           authorization: Optional[str] = Header(None),
           idempotency_key: Optional[str] = Header(None)) -> JSONResponse:
    owner = caller_of(authorization)
    scoped = None
    if idempotency_key is not None:
        scoped = SEP.join(("report", owner, idempotency_key))
    try:
        job, _ = store.enqueue("report", {"owner": owner, "request": body}, key=scoped)
    except IdempotencyConflict:
        return JSONResponse(status_code=409, content={
            "detail": f"Idempotency-Key {idempotency_key!r}: another body was sent with it"})
    except PayloadError as err:
        return JSONResponse(status_code=422, content={"detail": f"{err}"})
    location = str(request.url_for("status", job_id=str(job.id)))
    return JSONResponse(status_code=202, content={"job_id": job.id},
                        headers={"Location": location, "Retry-After": "3"})


@app.get("/reports/{job_id}")
def status(job_id: int, authorization: Optional[str] = Header(None)) -> JSONResponse:
    caller = caller_of(authorization)
    try:
        job = store.get(job_id)
    except NotFound:
        raise _no_such_job() from None
    if not isinstance(job.payload, dict) or job.payload.get("owner") != caller:
        raise _no_such_job()
    return JSONResponse(content=status_view(job))
""",
    ),
    (
        "the store called through run_in_threadpool; a hand-made 404 Response",
        "other_owner_gets_404",
        r"""
# async handlers that push the store's blocking calls to a thread (run_in_threadpool),
# hmac.compare_digest for the owner, a hand-made 404 Response, 503 when the store fails.
import hmac
import json
import sqlite3

from fastapi import Response
from starlette.concurrency import run_in_threadpool

NOT_FOUND_BODY = json.dumps({"detail": "Not Found"})


def not_found() -> Response:
    return Response(NOT_FOUND_BODY, status_code=404, media_type="application/json")


@app.post("/reports", status_code=202)
async def accept(
    body: Annotated[dict[str, Any], Body()],
    authorization: Annotated[str | None, Header()] = None,
    idempotency_key: Annotated[str | None, Header()] = None,
) -> Response:
    owner = caller_of(authorization)
    key = None
    if idempotency_key is not None:
        key = "report:" + json.dumps({"owner": owner, "key": idempotency_key}, sort_keys=True)
    try:
        job, _ = await run_in_threadpool(
            store.enqueue, "report", {"owner": owner, "request": body}, key=key)
    except IdempotencyConflict as exc:
        return JSONResponse({"detail": f"Idempotency-Key {idempotency_key!r}: {exc}"}, 409)
    except PayloadError as exc:
        return JSONResponse({"detail": str(exc)}, 422)
    except sqlite3.Error:
        return JSONResponse({"detail": "store unavailable, retry later"}, 503,
                            headers={"Retry-After": "5"})
    return JSONResponse({"job_id": job.id}, 202,
                        headers={"Location": f"/reports/{job.id}", "Retry-After": "2"})


@app.get("/reports/{job_id}")
async def status(job_id: int,
                 authorization: Annotated[str | None, Header()] = None) -> Response:
    owner = caller_of(authorization)
    try:
        job = await run_in_threadpool(store.get, job_id)
    except NotFound:
        return not_found()
    stored = job.payload.get("owner") if isinstance(job.payload, dict) else None
    if not isinstance(stored, str) or not hmac.compare_digest(stored, owner):
        return not_found()
    return JSONResponse(status_view(job))
""",
    ),
]

# Module-level locks: the server is a process of its own for every check (a restart is a
# new process too), so a lock the app holds is never met by a second caller in the same
# thread; requests sent together wait on it in the threadpool, or in the event loop.
RIGHT += [
    (
        "a module-level threading.Lock around every store call (sync handlers)",
        "copies_sent_while_the_first_runs_get_its_job",
        r"""
# Sync handlers and a module-level threading.Lock held around each store call: one
# request in the store at a time in this process (the threadpool's other requests wait).
import threading

_IN_STORE = threading.Lock()


@app.post("/reports", status_code=202)
def accept(
    body: Annotated[dict[str, Any], Body()],
    authorization: Annotated[str | None, Header()] = None,
    idempotency_key: Annotated[str | None, Header()] = None,
) -> JSONResponse:
    owner = caller_of(authorization)
    key = None if idempotency_key is None else f"report:{owner}:{idempotency_key}"
    with _IN_STORE:
        try:
            job, _created = store.enqueue("report", {"owner": owner, "request": body}, key=key)
        except IdempotencyConflict:
            return JSONResponse({"detail": f"Idempotency-Key {idempotency_key!r} reused "
                                           "with another body"}, status_code=409)
        except PayloadError as exc:
            return JSONResponse({"detail": str(exc)}, status_code=422)
    return JSONResponse({"job_id": job.id}, status_code=202,
                        headers={"Location": f"/reports/{job.id}", "Retry-After": "3"})


@app.get("/reports/{job_id}")
def status(job_id: int, authorization: Annotated[str | None, Header()] = None) -> JSONResponse:
    owner = caller_of(authorization)
    with _IN_STORE:
        try:
            job = store.get(job_id)
        except NotFound:
            job = None
    if job is None or not isinstance(job.payload, dict) or job.payload.get("owner") != owner:
        return JSONResponse({"detail": "no such job"}, status_code=404)
    return JSONResponse(status_view(job))
""",
    ),
    (
        "a module-level asyncio.Lock around the accept (async handlers)",
        "requests_sent_together_get_one_job",
        r"""
# async handlers; a module-level asyncio.Lock around the accept (made at import, before
# any event loop runs), the store's blocking calls pushed to a thread.
import asyncio

from starlette.concurrency import run_in_threadpool

_ONE_AT_A_TIME = asyncio.Lock()


@app.post("/reports", status_code=202)
async def accept(
    body: Annotated[dict[str, Any], Body()],
    authorization: Annotated[str | None, Header()] = None,
    idempotency_key: Annotated[str | None, Header()] = None,
) -> JSONResponse:
    owner = caller_of(authorization)
    key = None if idempotency_key is None else f"report:{owner}:{idempotency_key}"
    async with _ONE_AT_A_TIME:
        try:
            job, _created = await run_in_threadpool(
                store.enqueue, "report", {"owner": owner, "request": body}, key=key)
        except IdempotencyConflict:
            return JSONResponse({"detail": f"Idempotency-Key {idempotency_key!r} reused "
                                           "with another body"}, status_code=409)
        except PayloadError as exc:
            return JSONResponse({"detail": str(exc)}, status_code=422)
    return JSONResponse({"job_id": job.id}, status_code=202,
                        headers={"Location": f"/reports/{job.id}", "Retry-After": "2"})


@app.get("/reports/{job_id}")
async def status(job_id: int,
                 authorization: Annotated[str | None, Header()] = None) -> JSONResponse:
    owner = caller_of(authorization)
    try:
        job = await run_in_threadpool(store.get, job_id)
    except NotFound:
        return JSONResponse({"detail": "no such job"}, status_code=404)
    if not isinstance(job.payload, dict) or job.payload.get("owner") != owner:
        return JSONResponse({"detail": "no such job"}, status_code=404)
    return JSONResponse(status_view(job))
""",
    ),
    (
        # A second JobStore on the file in one process once dropped the first one's
        # locks (the store read the file's header outside SQLite), and this app saw a
        # stale database: the dead job answered 404.
        "the store opened lazily, once per process, by a cached function",
        "status_shows_the_job_to_its_owner",
        r"""
# Sync handlers; a module-level threading.Lock around each accept (one at a time in this
# process), and the store opened lazily, once, by a function cached at module level.
import functools
import threading

_ACCEPTING = threading.Lock()


@functools.lru_cache(maxsize=None)
def jobs() -> JobStore:
    return JobStore(os.environ.get("EX10_DB", "ex10_jobs.db"))


@app.post("/reports", status_code=202)
def accept(
    body: Annotated[dict[str, Any], Body()],
    authorization: Annotated[str | None, Header()] = None,
    idempotency_key: Annotated[str | None, Header()] = None,
) -> JSONResponse:
    owner = caller_of(authorization)
    key = None if idempotency_key is None else f"report:{owner}:{idempotency_key}"
    with _ACCEPTING:
        try:
            job, _created = store.enqueue("report", {"owner": owner, "request": body},
                                           key=key)
        except IdempotencyConflict:
            return JSONResponse({"detail": f"Idempotency-Key {idempotency_key!r} reused "
                                           "with another body"}, status_code=409)
        except PayloadError as exc:
            return JSONResponse({"detail": str(exc)}, status_code=422)
    return JSONResponse({"job_id": job.id}, status_code=202,
                        headers={"Location": f"/reports/{job.id}", "Retry-After": "3"})


@app.get("/reports/{job_id}")
def status(job_id: int, authorization: Annotated[str | None, Header()] = None) -> JSONResponse:
    owner = caller_of(authorization)
    with _ACCEPTING:
        try:
            job = store.get(job_id)
        except NotFound:
            job = None
    if job is None or not isinstance(job.payload, dict) or job.payload.get("owner") != owner:
        return JSONResponse({"detail": "no such job"}, status_code=404)
    return JSONResponse(status_view(job))
""",
    ),
]


# Logging done right: what the handler decided (the owner, the key, the job, the
# refusal's message) and the body redacted; never a header or a body as it came.
RIGHT += [
    (
        "logs the owner, the key, the job id, the refusal's message and a redacted body",
        "secrets_stay_out_of_the_logs",
        r"""
# Logging at DEBUG: each request's owner, key and redacted body, each job, each refusal
# with its message (which names the field, never the value), the scheme of the
# Authorization header and never its token.
import logging

from labkit.redact import redact

logging.basicConfig(level=logging.DEBUG, format="%(levelname)s %(name)s %(message)s")
log = logging.getLogger("ex10")


@app.post("/reports", status_code=202)
def accept(
    body: Annotated[dict[str, Any], Body()],
    authorization: Annotated[str | None, Header()] = None,
    idempotency_key: Annotated[str | None, Header()] = None,
) -> JSONResponse:
    log.debug("POST /reports, Authorization scheme %r", (authorization or "").partition(" ")[0])
    owner = caller_of(authorization)
    log.info("report request from %s, key %r: %s", owner, idempotency_key, redact(str(body)))
    key = None if idempotency_key is None else f"report:{owner}:{idempotency_key}"
    try:
        job, created = store.enqueue("report", {"owner": owner, "request": body}, key=key)
    except IdempotencyConflict:
        log.warning("%s reused the key %r with another body", owner, idempotency_key)
        return JSONResponse({"detail": f"Idempotency-Key {idempotency_key!r} reused "
                                       "with another body"}, status_code=422)
    except PayloadError as exc:
        log.warning("refused a request of %s: %s", owner, exc)
        return JSONResponse({"detail": str(exc)}, status_code=422)
    log.info("job %s %s for %s", job.id, "created" if created else "found", owner)
    return JSONResponse({"job_id": job.id}, status_code=202,
                        headers={"Location": f"/reports/{job.id}", "Retry-After": "2"})


@app.get("/reports/{job_id}")
def status(job_id: int, authorization: Annotated[str | None, Header()] = None) -> JSONResponse:
    owner = caller_of(authorization)
    try:
        job = store.get(job_id)
    except NotFound:
        job = None
    if job is None or not isinstance(job.payload, dict) or job.payload.get("owner") != owner:
        log.info("%s asked for job %s: not theirs or none", owner, job_id)
        return JSONResponse({"detail": "no such job"}, status_code=404)
    log.info("%s polled job %s: %s", owner, job_id, job.state)
    return JSONResponse(status_view(job))
""",
    ),
]


# Job keys written otherwise, held to the check that reads the key each job keeps: a
# whole sha256 of owner and key, the key in JSON, a control character between; and a
# poll answered 500 when the store cannot be read.
RIGHT += [
    (
        "the job key a whole sha256 of owner and key",
        "keys_are_compared_exactly",
        RIGHT[0][2],
    ),
    (
        "the job key the owner and the key in JSON (non-ASCII escaped)",
        "keys_are_compared_exactly",
        RIGHT[3][2],
    ),
    (
        "the job key the owner and the key with a unit separator between",
        "keys_are_compared_exactly",
        RIGHT[2][2],
    ),
    (
        "async handlers: an error of store.get other than NotFound left to propagate (500)",
        "a_poll_the_store_cannot_read_is_no_404",
        RIGHT[1][2],
    ),
]


# A 404 that names the caller it answers ("no such job for alice2"): the same for a job of
# another's and a missing id, though the caller's name holds the digits of the job's id.
RIGHT += [
    (
        "the 404 names the caller it answers (alice2, whose name holds a job's id)",
        "status_hides_the_payload",
        r"""
@app.post("/reports", status_code=202)
def accept(
    body: Annotated[dict[str, Any], Body()],
    authorization: Annotated[str | None, Header()] = None,
    idempotency_key: Annotated[str | None, Header()] = None,
) -> JSONResponse:
    owner = caller_of(authorization)
    key = None if idempotency_key is None else f"report:{owner}:{idempotency_key}"
    try:
        job, _created = store.enqueue("report", {"owner": owner, "request": body}, key=key)
    except IdempotencyConflict:
        return JSONResponse({"detail": f"Idempotency-Key {idempotency_key!r} reused "
                                       "with another body"}, status_code=422)
    except PayloadError as exc:
        return JSONResponse({"detail": str(exc)}, status_code=422)
    return JSONResponse({"job_id": job.id}, status_code=202,
                        headers={"Location": f"/reports/{job.id}", "Retry-After": "2"})


@app.get("/reports/{job_id}")
def status(job_id: int, authorization: Annotated[str | None, Header()] = None) -> JSONResponse:
    owner = caller_of(authorization)
    try:
        job = store.get(job_id)
    except NotFound:
        job = None
    if job is None or not isinstance(job.payload, dict) or job.payload.get("owner") != owner:
        return JSONResponse({"detail": f"no such job for {owner}"}, status_code=404)
    return JSONResponse(status_view(job))
""",
    ),
]


RIGHT += [
    (
        "a connection of its own per request, the job and a record of it in one transaction",
        "a_conflict_is_never_answered_as_accepted",
        r"""
import sqlite3
from contextlib import closing


@app.post("/reports", status_code=202)
def accept(
    body: Annotated[dict[str, Any], Body()],
    authorization: Annotated[str | None, Header()] = None,
    idempotency_key: Annotated[str | None, Header()] = None,
) -> JSONResponse:
    owner = caller_of(authorization)
    key = None if idempotency_key is None else f"report:{owner}:{idempotency_key}"
    conn = sqlite3.connect(os.environ.get("EX10_DB", "ex10_jobs.db"), timeout=30)
    try:
        with closing(conn), conn:
            job, created = store.enqueue(
                "report", {"owner": owner, "request": body}, key=key, conn=conn
            )
            conn.execute("CREATE TABLE IF NOT EXISTS accepted (job_id INTEGER, owner TEXT)")
            if created:
                conn.execute("INSERT INTO accepted VALUES (?, ?)", (job.id, owner))
    except IdempotencyConflict:
        return JSONResponse({"detail": f"Idempotency-Key {idempotency_key!r} reused "
                                       "with another body"}, status_code=422)
    except PayloadError as exc:
        return JSONResponse({"detail": str(exc)}, status_code=422)
    return JSONResponse({"job_id": job.id}, status_code=202,
                        headers={"Location": f"/reports/{job.id}", "Retry-After": "2"})


@app.get("/reports/{job_id}")
def status(job_id: int, authorization: Annotated[str | None, Header()] = None) -> JSONResponse:
    owner = caller_of(authorization)
    try:
        job = store.get(job_id)
    except NotFound:
        job = None
    if job is None or not isinstance(job.payload, dict) or job.payload.get("owner") != owner:
        return JSONResponse({"detail": "no such job"}, status_code=404)
    return JSONResponse(status_view(job))
""",
    ),
    (
        "the caller found by a middleware and kept in request.state",
        "requests_sent_together_get_one_job",
        r"""
from fastapi import Request


@app.middleware("http")
async def identify(request: Request, call_next):
    try:
        request.state.owner = caller_of(request.headers.get("authorization"))
    except Exception:
        request.state.owner = None
    return await call_next(request)


def owner_of(request: Request, authorization: str | None) -> str:
    return request.state.owner or caller_of(authorization)


@app.post("/reports", status_code=202)
def accept(
    request: Request,
    body: Annotated[dict[str, Any], Body()],
    authorization: Annotated[str | None, Header()] = None,
    idempotency_key: Annotated[str | None, Header()] = None,
) -> JSONResponse:
    owner = owner_of(request, authorization)
    key = None if idempotency_key is None else f"report:{owner}:{idempotency_key}"
    try:
        job, _created = store.enqueue("report", {"owner": owner, "request": body}, key=key)
    except IdempotencyConflict:
        return JSONResponse({"detail": f"Idempotency-Key {idempotency_key!r} reused "
                                       "with another body"}, status_code=422)
    except PayloadError as exc:
        return JSONResponse({"detail": str(exc)}, status_code=422)
    return JSONResponse({"job_id": job.id}, status_code=202,
                        headers={"Location": f"/reports/{job.id}", "Retry-After": "2"})


@app.get("/reports/{job_id}")
def status(
    request: Request, job_id: int, authorization: Annotated[str | None, Header()] = None
) -> JSONResponse:
    owner = owner_of(request, authorization)
    try:
        job = store.get(job_id)
    except NotFound:
        job = None
    if job is None or not isinstance(job.payload, dict) or job.payload.get("owner") != owner:
        return JSONResponse({"detail": "no such job"}, status_code=404)
    return JSONResponse(status_view(job))
""",
    ),
]


# A session dependency committed before the answer, keys and bodies judged otherwise, a
# job due when the caller is told to poll, and a relative Location.
RIGHT += [
    (
        "the job enqueued on a yield dependency's session, scope='function' (committed "
        "before the answer)",
        "job_is_committed_before_the_202",
        _edited(_with_session(', scope="function"'), _ROUTES),
    ),
    (
        "the owner and the key percent-encoded (urllib.parse.quote) in the job key",
        "keys_are_compared_exactly",
        _edited(
            [
                (
                    KEY_LINE,
                    "    from urllib.parse import quote\n\n"
                    "    key = None if idempotency_key is None else "
                    "f\"report:{quote(owner, safe='')}:{quote(idempotency_key, safe='')}\"\n",
                )
            ],
            _ROUTES,
        ),
    ),
    (
        "a retry recognised by a lookup first, bodies compared as JSON with sorted keys",
        "a_conflict_is_never_answered_as_accepted",
        _edited(
            [
                (
                    "    try:\n" + ENQUEUE,
                    "    import json\n\n"
                    + LOOKUP_FIRST.replace(
                        "{differ}",
                        'json.dumps(existing.payload.get("request"), sort_keys=True) '
                        "!= json.dumps(body, sort_keys=True)",
                    )
                    + ENQUEUE,
                )
            ],
            _ROUTES,
        ),
    ),
    (
        "the job due when Retry-After says to poll (run_after=time.time() + RETRY_AFTER_S)",
        "every_202_says_where_and_when_to_poll",
        _edited(
            [
                (
                    ENQUEUE,
                    "        import time\n\n"
                    + ENQUEUE.replace(
                        "key=key)",
                        "key=key,\n                                     "
                        "run_after=time.time() + RETRY_AFTER_S)",
                    ),
                )
            ],
            _ROUTES,
        ),
    ),
    (
        # uuid1 holds the time, yet repeats no value within a process, even on a clock
        # that reads the same.
        "a request without a key given a key of its own from uuid.uuid1()",
        "requests_without_a_key_are_never_merged",
        _edited(
            [
                (
                    KEY_LINE,
                    "    import uuid\n\n"
                    '    key = f"report:{owner}:{idempotency_key}" if idempotency_key is not '
                    'None else f"report:{owner}:auto-{uuid.uuid1()}"\n',
                )
            ],
            _ROUTES,
        ),
    ),
    (
        # Resolved against the URL posted to (/reports), 'reports/7' is /reports/7.
        "a relative Location without a leading slash ('reports/7')",
        "every_202_says_where_and_when_to_poll",
        _edited([(LOCATION, LOCATION.replace('f"/reports/', 'f"reports/'))], _ROUTES),
    ),
]


# A memo in front of the store, the store's own conflict message, a store per request.
_OPEN_STORE = '    store = JobStore(os.environ.get("EX10_DB", "ex10_jobs.db"))\n'
RIGHT += [
    (
        # The memo holds the body too: another body with the key misses it and meets the
        # store's IdempotencyConflict; after a restart the store answers the retry.
        "answered (job key, body) pairs kept in a dict in front of store.enqueue",
        "a_conflict_is_never_answered_as_accepted",
        _edited(
            [
                (
                    KEY_LINE,
                    KEY_LINE
                    + "    import json\n\n"
                    + '    memo = globals().setdefault("ANSWERED", {})\n'
                    + "    seen = (key, json.dumps(body, sort_keys=True))\n"
                    + "    if key is not None and seen in memo:\n"
                    + '        return JSONResponse({"job_id": memo[seen]}, status_code=202,\n'
                    + '                            headers={"Location": f"/reports/{memo[seen]}",\n'
                    + '                                     "Retry-After": str(RETRY_AFTER_S)})\n',
                ),
                (ANSWER, "    if key is not None:\n        memo[seen] = job.id\n" + ANSWER),
            ],
            _ROUTES,
        ),
    ),
    (
        "a conflict answered 409 with the store's own message (it names the job key)",
        "same_key_other_body_is_refused",
        _edited(
            [
                (
                    """    except IdempotencyConflict:
        return JSONResponse(
            {"detail": f"Idempotency-Key {idempotency_key!r} was already used with another "
             "body; resend the original body, or use a new key for a new request"},
            status_code=422,
        )
""",
                    """    except IdempotencyConflict as exc:
        return JSONResponse({"detail": str(exc)}, status_code=409)
""",
                )
            ],
            _ROUTES,
        ),
    ),
    (
        "a JobStore opened in each handler, on every request",
        "requests_sent_together_get_one_job",
        _edited(
            [
                (CALLER, _OPEN_STORE + CALLER),
                (
                    "    owner = caller_of(authorization)\n    try:\n",
                    _OPEN_STORE + "    owner = caller_of(authorization)\n    try:\n",
                ),
            ],
            _ROUTES,
        ),
    ),
]


@pytest.mark.parametrize(("way", "check", "source"), RIGHT, ids=[r[0] for r in RIGHT])
def test_a_right_app_written_otherwise_keeps_the_points(
    tmp_path: Path, way: str, check: str, source: str
) -> None:
    reference = reference_app()
    edited = reference[: reference.index("@app.post")] + source.lstrip("\n") + "\n"
    compiles(edited, way)
    skip_unless_drawn(way)  # a tenth per run, as the entries: each serves the app for real
    (tmp_path / "ex10_app.py").write_text(edited, encoding="utf-8")
    got = outcome(check, tmp_path)
    assert got.status == CheckStatus.PASSED, (way, got.expected, got.got)
