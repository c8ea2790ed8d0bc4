"""Exercise 10's checks of GET /reports/{id}: the owner sees the job as the database
has it, in every state and while the database is down; anyone else gets the 404 of an id
that does not exist."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from labkit.clock import from_isoformat, isoformat
from labkit.grading.checks import Namespace, expect
from labkit.grading.exercises.ex10.crashes import CHECKS
from labkit.grading.exercises.ex10.served import (
    ALICE,
    BOB,
    TIMEOUT,
    WEST_OF_UTC,
    App,
    add_job,
    scratch,
    served,
)
from labkit.lang import _


@CHECKS.add(
    2,
    "GET /reports/{id} by the owner shows the job as the database has it: state, attempts, "
    "next attempt, a sanitized error (use status_view); a database that cannot be read is "
    "a 5xx, never a 404",
    timeout=TIMEOUT,
)
def status_shows_the_job_to_its_owner(ns: Namespace) -> None:
    from labkit.errors import TransientError
    from labkit.store import JobStore

    with scratch(ns) as folder:
        db = folder / "jobs.db"
        # On a server west of UTC: a next attempt shown in the server's local time, without
        # its offset, reads three hours early to a caller.
        with served(ns, db, tz=WEST_OF_UTC, store_fault=True) as app:
            job_id = add_job(db, "alice", {"month": "2026-07"}, "check:status")
            first = app.status(job_id)
            expect(first.status_code == 200, "200 for the owner", first.status_code)
            poll_while_the_store_is_down(app, job_id)
            view = first.json()
            expect(
                (view.get("job_id"), view.get("state"), view.get("attempts"))
                == (job_id, "pending", 0),
                "job_id, state 'pending', attempts 0",
                {k: view.get(k) for k in ("job_id", "state", "attempts")},
            )
            # The check plays the worker: one attempt that fails with a secret in its text.
            with JobStore(db) as store:
                job = store.claim("check-worker")
                expect(job is not None and job.id == job_id, "the job claimable", job)
                assert job is not None
                _shown_while_running(app, job)
                failed = store.fail(
                    job, TransientError("ERP 503 while logging in with password=hunter2")
                )
            waiting = app.status(job_id)
            view = waiting.json()
            expect(
                waiting.status_code == 200,
                _("200 for alice's job {job_id} while it waits for a retry").format(job_id=job_id),
                f"{waiting.status_code} {waiting.text[:160]}",
                _(
                    "answer the owner 200 with status_view(job) in every state: the state "
                    "in the view says the job is not done, not the status code"
                ),
            )
            expect(
                (view.get("state"), view.get("attempts")) == ("retry_wait", 1),
                "state 'retry_wait' and attempts 1, as in the database now",
                {k: view.get(k) for k in ("state", "attempts")},
                "read the job from the store on every GET; do not cache it",
            )
            error = str(view.get("error"))
            expect(
                "503" in error and "hunter2" not in error,
                "the error, sanitized (no password)",
                error[:160],
            )
            expect(view.get("next_attempt_at") is not None, "a next_attempt_at", view)
            shown = _moment(view.get("next_attempt_at"))
            expect(
                shown is not None and abs(shown - failed.run_after) <= 1.5,
                _(
                    "next_attempt_at {due} (UTC, as status_view shows it), on a server whose "
                    "time zone is UTC-3"
                ).format(due=isoformat(failed.run_after)),
                str(view.get("next_attempt_at")),
                _(
                    "return status_view(job), which shows times in UTC; a time you render "
                    "yourself needs its offset (datetime.fromtimestamp(ts, UTC)), not the "
                    "server's local time"
                ),
            )
            # A job that ended dead is still its owner's to see, with why it ended.
            with JobStore(db) as store:
                ended, _new = store.enqueue(
                    "report",
                    {"owner": "alice", "request": {"month": "2026-07", "n": 2}},
                    key="check:dead",
                    queue="check-dead",  # a queue of its own: the first job may be due again
                    max_attempts=1,
                )
                claimed = store.claim("check-worker", queues=("check-dead",))
                expect(claimed is not None and claimed.id == ended.id, "the job claimable", claimed)
                assert claimed is not None
                store.fail(claimed, TransientError("ERP 503 Service Unavailable"))
            dead = app.status(ended.id)
            try:
                ended_view = dead.json() if dead.status_code == 200 else {}
            except ValueError:
                ended_view = {}
            expect(
                dead.status_code == 200 and dead.json().get("state") == "dead",
                _(
                    "200 with state 'dead' for alice's job {job_id}, which failed its last attempt"
                ).format(job_id=ended.id),
                f"{dead.status_code} {dead.text[:160]}",
                _(
                    "show the owner every job of theirs, whatever its state: a job that "
                    "ended dead answered 404 reads as lost, and its owner learns nothing of why"
                ),
            )
            expect(
                "503" in str(ended_view.get("error")),
                _(
                    "the error that ended alice's job {job_id} in its status, sanitized "
                    "('ERP 503 Service Unavailable')"
                ).format(job_id=ended.id),
                str(ended_view.get("error"))[:160],
                _(
                    "return status_view(job) for a dead job too: the last error is how its "
                    "owner learns why it ended"
                ),
            )
            _shown_again_once_redriven(app, db, ended.id)
            # A job that succeeded: its owner reads the result where the status was.
            done = _succeeded_job(db)
            finished = app.status(done)
            try:
                shown = finished.json() if finished.status_code == 200 else None
            except ValueError:
                shown = None
            expect(
                isinstance(shown, dict)
                and shown.get("state") == "succeeded"
                and shown.get("result") == RESULT,
                _(
                    "200 with state 'succeeded' and the result {result} for alice's job "
                    "{job_id}, which a worker finished"
                ).format(result=RESULT, job_id=done),
                f"{finished.status_code} {finished.text[:160]}",
                _(
                    "answer the owner 200 with status_view(job) in every state, succeeded "
                    "too: the result is in it, and a redirect or another code to a route "
                    "of your own leaves the caller without it"
                ),
            )


def _shown_again_once_redriven(app: App, db: Path, job_id: int) -> None:
    """An operator redrives alice's dead job ``job_id``: her next poll shows it pending."""
    from labkit.store import JobStore

    with JobStore(db) as store:
        store.redrive(job_id, "ERP back")
    polled = app.status(job_id)
    try:
        view = polled.json() if polled.status_code == 200 else {}
    except ValueError:
        view = {}
    expect(
        polled.status_code == 200 and isinstance(view, dict) and view.get("state") == "pending",
        _(
            "200 with state 'pending' for alice's job {job_id} once an operator redrove it "
            "(it was dead when she polled it before)"
        ).format(job_id=job_id),
        f"{polled.status_code} {polled.text[:160]}",
        _(
            "read the job with store.get on every GET and keep no answer: a job that ended "
            "(dead) can be redriven and run again, so a view kept for it goes stale"
        ),
    )


def _shown_while_running(app: App, job: Any) -> None:
    """GET the owner's job while a worker holds it: 200 with its view (state 'running')."""
    from labkit.integrations.http.service import status_view

    wanted = status_view(job)
    polled = app.status(job.id)
    try:
        view = polled.json() if polled.status_code == 200 else {}
    except ValueError:
        view = {}
    fields = ("job_id", "state", "attempts")
    expect(
        polled.status_code == 200
        and isinstance(view, dict)
        and all(view.get(k) == wanted.get(k) for k in fields),
        _(
            "200 with state 'running' and attempts {attempts} when alice polls her job "
            "{job_id} while a worker runs it"
        ).format(attempts=wanted.get("attempts"), job_id=job.id),
        f"{polled.status_code} {polled.text[:160]}",
        _(
            "answer the owner 200 with status_view(job) in every state, running too: a 404 "
            "tells the owner the job does not exist (the client sends it again as a new "
            "job), and another code or a view of your own hides what the job is doing"
        ),
    )


#: What the check's worker reports for a job it finished.
RESULT = {"pages": 4, "url": "/files/alice-2026-07.pdf"}


def _succeeded_job(db: Path) -> int:
    """A job of alice's that a worker ran to success (a queue of its own); its id."""
    from labkit.store import JobStore

    with JobStore(db) as store:
        job, _new = store.enqueue(
            "report",
            {"owner": "alice", "request": {"month": "2026-07", "n": 3}},
            key="check:done",
            queue="check-done",
        )
        claimed = store.claim("check-worker", queues=("check-done",))
        if claimed is not None and claimed.id == job.id:
            store.complete(claimed, RESULT)
    return job.id


def poll_while_the_store_is_down(app: App, job_id: int) -> None:
    """GET the owner's job while store.get raises StoreBusy: a 5xx, never a 404 or a 200."""
    with app.store_down():
        reply = app.status(job_id, raw=True)
    if not app.fired("store down at get"):
        return  # the job read some other way: nothing failed to judge
    expect(
        reply.status_code >= 500,
        _(
            "a 500 or 503 when alice polls her job {job_id} while the job database is down "
            "(store.get raised StoreBusy)"
        ).format(job_id=job_id),
        f"{reply.status_code} {reply.text[:160]}",
        _(
            "catch only NotFound around store.get: any other error (the database locked or "
            "down) must propagate (a 500) or be answered 503. A 404 tells the owner the job "
            "does not exist, and the client sends the request again as a new job"
        ),
    )


def _moment(text: object) -> float | None:
    """The epoch time an ISO 8601 text names (one without an offset read as UTC), or None."""
    try:
        return from_isoformat(str(text))
    except ValueError:
        return None


@CHECKS.add(
    2,
    "another caller asking for your job gets 404, exactly like an id that does not exist "
    "(not 403, not the job): ids must leak nothing",
    timeout=TIMEOUT,
    severe=True,
)
def other_owner_gets_404(ns: Namespace) -> None:
    with scratch(ns) as folder:
        db = folder / "jobs.db"
        with served(ns, db) as app:
            job_id = add_job(db, "alice", {"month": "2026-08"}, "check:owner")
            mine = app.status(job_id, ALICE)
            # Any success for the owner (a 202 while the job waits is a contract detail,
            # status_shows_the_job_to_its_owner's to judge): what matters here is bob's answer.
            expect(200 <= mine.status_code < 300, "200 for the owner alice", mine.status_code)
            theirs = app.status(job_id, BOB)
            missing = app.status(job_id + 1000, BOB)
            expect(
                theirs.status_code == 404,
                "404 when bob asks for alice's job",
                f"{theirs.status_code} {theirs.text[:160]}",
                _("answer 404, as for an id that does not exist: a 403 tells bob the job is there")
                if theirs.status_code == 403
                else _("compare job.payload.get('owner') with caller_of(authorization)"),
            )
            # A body may name the id it was asked for: only the id may differ.
            alike = theirs.text.replace(str(job_id), "{id}") == missing.text.replace(
                str(job_id + 1000), "{id}"
            )
            expect(
                missing.status_code == 404 and alike,
                "the same 404 body as for an id that does not exist (only the id asked "
                "for may differ)",
                f"{theirs.text[:80]!r} vs {missing.text[:80]!r}",
            )
            # Finished, the job is still alice's alone: its view shows the report's result.
            # An owner check placed after a branch on the state lets bob read it.
            from labkit.store import JobStore

            with JobStore(db) as store:
                claimed = store.claim("check-worker")
                if claimed is not None and claimed.id == job_id:
                    store.complete(claimed, {"pages": 3, "url": "/files/alice-2026-08.pdf"})
            # Alice polls it first: an answer kept by job id alone (finished jobs no longer
            # change) is what bob would be given next.
            app.status(job_id, ALICE)
            done = app.status(job_id, BOB)
            missing = app.status(job_id + 1000, BOB)
            alike = done.text.replace(str(job_id), "{id}") == missing.text.replace(
                str(job_id + 1000), "{id}"
            )
            expect(
                done.status_code == 404 and alike,
                _(
                    "404 with the body of a missing id when bob asks for alice's job {job_id} "
                    "once it has succeeded and alice has polled it"
                ).format(job_id=job_id),
                f"{done.status_code} {done.text[:160]}",
                _(
                    "check the owner first on every GET, before anything that looks at the "
                    "job's state and before any answer you kept: a finished job is still its "
                    "owner's alone, and a view cached by job id alone goes to whoever asks next"
                ),
            )
            # Jobs other services put in the same store: their owner is not in the payload
            # (the lesson's service keeps it in a side table), or the payload is no object.
            # Nobody's here, so 404 as for a missing id, not a 500 that says the id exists.
            for payload in ({"to": "ops@example.com"}, ["erp", "nightly"]):
                other = foreign_job(db, payload)
                asked = app.status(other, BOB, raw=True)
                absent = app.status(other + 1000, BOB, raw=True)
                same = asked.text.replace(str(other), "{id}") == absent.text.replace(
                    str(other + 1000), "{id}"
                )
                expect(
                    asked.status_code == 404 and same,
                    _(
                        "404 with the body of a missing id when bob asks for job {job_id}, "
                        "another service's job whose payload {payload} names no owner"
                    ).format(job_id=other, payload=payload),
                    f"{asked.status_code} {asked.text[:80]!r} vs {absent.status_code} "
                    f"{absent.text[:80]!r}",
                    _(
                        "read the owner with job.payload.get('owner') after checking that the "
                        "payload is a dict: job.payload['owner'] raises on a job without one, "
                        "and the 500 tells the caller the id exists"
                    ),
                )


def foreign_job(db: Path, payload: Any) -> int:
    """A job another service enqueued in the same store (kind 'email'), without an owner."""
    from labkit.store import JobStore

    with JobStore(db) as store:
        job, _created = store.enqueue("email", payload)
    return job.id
