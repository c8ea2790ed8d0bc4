"""Exercise 10's checks of POST /reports: the 202 and its Location, the job committed
before the answer, the Idempotency-Key's retries and conflicts, credentials refused."""

from __future__ import annotations

from labkit.grading.checks import Namespace, expect
from labkit.grading.exercises.ex10.crashes import (
    CHECKS,
    crash_at_202,
    nothing_stored_nothing_accepted,
)
from labkit.grading.exercises.ex10.served import (
    TIMEOUT,
    accepted_id,
    jobs_for,
    jobs_in,
    retried_id,
    scratch,
    served,
)
from labkit.lang import _


@CHECKS.add(
    2,
    "POST /reports answers 202 with {'job_id': N}, a Location that GET answers for its "
    "owner, and a Retry-After in seconds; the job is in the database",
    timeout=TIMEOUT,
)
def accept_answers_202_with_location(ns: Namespace) -> None:
    body = {"month": "2026-01", "credential_id": "erp-readonly"}
    with scratch(ns) as folder, served(ns, folder / "jobs.db") as app:
        reply = app.post(body)
        job_id = accepted_id(reply, _("a new report request"), strict=True)
        location = reply.headers.get("Location")
        expect(location is not None, "a Location header (the status URL)", _("none"))
        retry_after = reply.headers.get("Retry-After", "")
        expect(
            retry_after.isdigit() and int(retry_after) >= 1,
            "Retry-After: a whole number of seconds, 1 or more",
            retry_after or _("none"),
        )
        stored = jobs_for(folder / "jobs.db", "alice", body)
        expect(
            [j["id"] for j in stored] == [job_id],
            _(
                "job {job_id} in the database with payload {{'owner': 'alice', 'request': body}}"
            ).format(job_id=job_id),
            _("jobs with that payload: {job_ids}").format(job_ids=[j["id"] for j in stored]),
            "store.enqueue('report', {'owner': owner, 'request': body}, key=...)",
        )
        expect(stored[0]["state"] == "pending", "the new job pending", stored[0]["state"])
        polled = app.status(str(location))
        expect(
            polled.status_code == 200 and polled.json().get("job_id") == job_id,
            _("GET {location} by its owner: 200 with job {job_id}'s status").format(
                location=location, job_id=job_id
            ),
            f"{polled.status_code} {polled.text[:160]}",
        )


@CHECKS.add(
    2,
    "commit the job BEFORE answering: a server killed as its 202 starts must leave the "
    "job in the database (no background task, no write after the answer)",
    timeout=TIMEOUT,
    severe=True,
)
def job_is_committed_before_the_202(ns: Namespace) -> None:
    with scratch(ns) as folder:
        db = folder / "jobs.db"
        with served(ns, db, crash_at_202=True, store_fault=True) as app:
            body, key = nothing_stored_nothing_accepted(app, db)
            # The client sends the refused request again, with its key, once the database
            # is back: now it is taken (and the server dies at its 202).
            crash_at_202(
                ns,
                app,
                body,
                key,
                _(
                    "the request refused while the job database was down, sent again with "
                    "the same Idempotency-Key once the database is back"
                ),
                _(
                    "answer a key's retry from the store (store.enqueue), never from a "
                    "record of an earlier answer: a 500 or 503 kept for the key (as Stripe "
                    "keeps its answers) refuses for ever a request nobody stored"
                ),
            )
        stored = jobs_for(db, "alice", body)
        expect(
            len(stored) == 1,
            "the job in the database although the server died before its 202 went out",
            _("{count} job(s) with that request").format(count=len(stored)),
            "call store.enqueue (which commits) before returning the 202, not in a "
            "BackgroundTask or after the answer",
        )


@CHECKS.add(
    2,
    "the same Idempotency-Key and body sent again (a retry) gets the same job_id and "
    "creates no second job",
    timeout=TIMEOUT,
    severe=True,
)
def same_key_same_job(ns: Namespace) -> None:
    body = {"month": "2026-03"}
    with scratch(ns) as folder, served(ns, folder / "jobs.db") as app:
        first = accepted_id(app.post(body, key="order-77"), _("the first request"))
        again = retried_id(app.post(body, key="order-77"), _("the retry with the same key"))
        expect(
            again == first,
            _("the retry to get job {job_id} again").format(job_id=first),
            _("job {job_id}").format(job_id=again),
            "build the job key from the owner and the Idempotency-Key alone: no X-Request-Id "
            "or anything else a client sends anew with each attempt",
        )
        stored = jobs_for(folder / "jobs.db", "alice", body)
        expect(len(stored) == 1, "one job in the database for the two requests", len(stored))


@CHECKS.add(
    1,
    "the same Idempotency-Key with another body is refused with 409 or 422; the first job "
    "stays as it was, and no second job is made",
    timeout=TIMEOUT,
    severe=True,
)
def same_key_other_body_is_refused(ns: Namespace) -> None:
    with scratch(ns) as folder, served(ns, folder / "jobs.db") as app:
        first = accepted_id(app.post({"month": "2026-04"}, key="k-9"), _("the first request"))
        other = app.post({"month": "2026-05"}, key="k-9")
        expect(
            other.status_code in (409, 422),
            "409 or 422 for a reused key with another body",
            f"{other.status_code} {other.text[:160]}",
            "catch IdempotencyConflict and answer 422 with a message",
        )
        rows = jobs_in(folder / "jobs.db")
        expect(
            [(j["id"], j["payload"]) for j in rows]
            == [(first, {"owner": "alice", "request": {"month": "2026-04"}})],
            "only the first job, with its first body",
            [(j["id"], j["payload"]) for j in rows],
        )


@CHECKS.add(
    1,
    "a body with a credential-looking field (password, token, api_key...) is refused with "
    "422 and a message naming it; no job is stored",
    timeout=TIMEOUT,
)
def credential_in_the_body_is_refused(ns: Namespace) -> None:
    with scratch(ns) as folder, served(ns, folder / "jobs.db") as app:
        reply = app.post({"month": "2026-06", "erp": {"password": "hunter2"}})
        expect(
            reply.status_code == 422,
            "422 for a body holding a password",
            f"{reply.status_code} {reply.text[:160]}",
            "catch PayloadError and answer 422",
        )
        # Each refusal names its own field: a fixed text ("no passwords") tells a caller
        # who sent an api_key nothing about what to take out.
        second = app.post({"month": "2026-06", "api_key": "sk_live_51Hx"})
        # A password at the top of the body too: a check of one's own before enqueue
        # ("no password, token or secret field") must name the field it refused as well.
        third = app.post({"month": "2026-06", "password": "hunter3"})
        for field, value, refused in (
            ("password", "hunter2", reply),
            ("api_key", "sk_live_51Hx", second),
            ("password", "hunter3", third),
        ):
            expect(
                refused.status_code == 422 and field in refused.text and value not in refused.text,
                _("422 and a message naming the field {field}, without its value").format(
                    field=repr(field)
                ),
                f"{refused.status_code} {refused.text[:160]}",
                _("answer with the PayloadError's own message: it names the field it refused"),
            )
        expect(jobs_in(folder / "jobs.db") == [], "no job stored", _("a job was stored"))
