"""Hidden checks for exercise 10: the retry after the crash, keys per caller, requests
without a key, no payload, 401 (before the job is read)."""

from __future__ import annotations

from labkit.grading.exercises.ex10.served import TIMEOUT, accepted_id, add_job, jobs_for, scratch, served
from labkit.grading.exercises.ex10.checks import crash_at_202
from labkit.grading.checks import Checks, Namespace, expect
from labkit.lang import _

CHECKS = Checks("ex10", hidden=True)


@CHECKS.add(
    1,
    "after the crash, the client's retry with the same key gets the job the "
    "crash left, and no second one",
    timeout=TIMEOUT,
    severe=True,
)
def retry_after_the_crash_gets_the_same_job(ns: Namespace) -> None:
    body = {"month": "2026-09"}
    with scratch(ns) as folder:
        db = folder / "jobs.db"
        with served(ns, db, crash_at_202=True) as doomed:
            crash_at_202(ns, doomed, body, "crash-2")
        left = [j["id"] for j in jobs_for(db, "alice", body)]
        with served(ns, db) as app:
            again = accepted_id(app.post(body, key="crash-2"), _("the client's retry"))
        now = [j["id"] for j in jobs_for(db, "alice", body)]
        expect(
            len(left) == 1 and now == left and again == left[0],
            _("the retry to answer job {job_ids} and the database to still hold one job").format(
                job_ids=left
            ),
            _("retry got {job_id}, jobs now {job_ids}").format(job_id=again, job_ids=now),
            "build the job key from the owner and the Idempotency-Key alone (no hash(), "
            "no clock, no counter in memory): the restarted server must compute the same "
            "key, and only the store remembers what the crashed one did",
        )


@CHECKS.add(
    1, "two callers using the same Idempotency-Key get two different jobs", timeout=TIMEOUT,
    severe=True,
)
def keys_are_scoped_to_the_caller(ns: Namespace) -> None:
    body = {"month": "2026-10"}
    with scratch(ns) as folder, served(ns, folder / "jobs.db") as app:
        a = accepted_id(app.post(body, "alice-token", key="shared-key"), _("alice's request"))
        reply = app.post(body, "bob-token", key="shared-key")
        b = accepted_id(
            reply,
            _("bob's request with the key alice also used"),
            _(
                "put the owner in the job key next to the Idempotency-Key: bob's key must not "
                "meet alice's job (a 409 here means it did)"
            ),
        )
        expect(
            a != b,
            "bob to get a job of his own",
            _("alice's job {job_id}").format(job_id=a),
            "put the owner in the job key next to the Idempotency-Key",
        )
        expect(len(jobs_for(folder / "jobs.db", "bob", body)) == 1, "bob's job stored", 0)


@CHECKS.add(
    1, "the status never shows the payload (the request may hold private data)", timeout=TIMEOUT,
    severe=True,
)
def status_hides_the_payload(ns: Namespace) -> None:
    with scratch(ns) as folder:
        db = folder / "jobs.db"
        with served(ns, db) as app:
            job_id = add_job(db, "alice", {"note": "private-marker-5521"}, "check:hide")
            reply = app.status(job_id)
            expect(reply.status_code == 200, "200 for the owner", reply.status_code)
            expect(
                "private-marker-5521" not in reply.text,
                "no payload in the status",
                reply.text[:160],
                "return status_view(job), not the job itself",
            )


@CHECKS.add(
    1, "a request without a valid bearer token gets 401 on both routes", timeout=TIMEOUT,
    severe=True,
)
def no_token_is_401(ns: Namespace) -> None:
    with scratch(ns) as folder:
        db = folder / "jobs.db"
        with served(ns, db) as app:
            job_id = add_job(db, "alice", {"month": "2026-11"}, "check:401")
            there, missing = app.status(job_id, token=None), app.status(job_id + 1000, token=None)
            codes = (
                app.post({"month": "2026-11"}, token=None).status_code,
                app.post({"month": "2026-11"}, token="stolen").status_code,
                there.status_code,
                missing.status_code,
            )
            expect(
                codes == (401, 401, 401, 401),
                "401 for a POST without a token, with an unknown token, and for a GET "
                "without a token of a job that exists and of one that does not",
                codes,
                "call caller_of(authorization) first in each handler, before reading the "
                "job: an anonymous caller must not learn which ids exist",
            )
            expect(
                there.text == missing.text,
                "the same 401 body for an id that exists and one that does not",
                _("{existing} vs {missing}").format(
                    existing=repr(there.text[:80]), missing=repr(missing.text[:80])
                ),
            )


@CHECKS.add(
    1,
    "requests without an Idempotency-Key are each a job of their own: no key means no "
    "dedup, never one shared key",
    timeout=TIMEOUT,
    severe=True,
)
def requests_without_a_key_are_never_merged(ns: Namespace) -> None:
    bodies = ({"month": "2026-01"}, {"month": "2026-02"})
    with scratch(ns) as folder, served(ns, folder / "jobs.db") as app:
        ids = [
            accepted_id(app.post(body), _("the request {body} without a key").format(body=body))
            for body in bodies
        ]
        stored = [len(jobs_for(folder / "jobs.db", "alice", body)) for body in bodies]
        expect(
            ids[0] != ids[1] and stored == [1, 1],
            "two jobs for two requests without a key",
            _("job ids {ids}, jobs stored per request {stored}").format(ids=ids, stored=stored),
            "pass key=None to store.enqueue when the request has no Idempotency-Key",
        )
