"""The HTTP service driven for real: a uvicorn process, httpx, the job database read back.

Every test reads the database itself (``JobStore`` on the server's file) instead of
trusting the answers alone. One server serves the whole module, except the in-progress
test, which starts one with a pause; the crash tests start their own
(tests/integration/test_http_crash.py).
"""

from __future__ import annotations

import sqlite3
import threading
from contextlib import closing
from pathlib import Path

import httpx
import pytest
from httpkit import ALICE, APP, BOB

from labkit.clock import SystemClock
from labkit.errors import InvalidTransition, TransientError
from labkit.integrations.http import report_job
from labkit.integrations.http.operations import NOT_FOUND, Pause
from labkit.integrations.http.serve import start_server
from labkit.job import Job, JobState
from labkit.retry import RetryPolicy
from labkit.store import JobStore
from labkit.worker import Worker


def read_store(db: Path) -> JobStore:
    return JobStore(db, clock=SystemClock())


def owner_row(db: Path, job_id: int) -> tuple[str, str | None] | None:
    with closing(sqlite3.connect(db)) as conn:
        row = conn.execute(
            "SELECT owner, idempotency_key FROM http_requests WHERE job_id = ?", (job_id,)
        ).fetchone()
    return None if row is None else (row[0], row[1])


def jobs_with_key(db: Path, key: str) -> list[Job]:
    with read_store(db) as store:
        return [j for j in store.jobs(limit=100_000) if j.key.endswith(":" + key)]


def test_post_answers_202_with_location_and_retry_after_and_the_job_is_in_the_database(
    client: httpx.Client, db: Path
) -> None:
    reply = client.post(
        "/jobs/report", json={"month": "2026-01", "credential_id": "erp-readonly"}, headers=ALICE
    )
    assert reply.status_code == 202
    job_id = reply.json()["job_id"]
    assert reply.headers["Location"] == f"/jobs/{job_id}"
    assert int(reply.headers["Retry-After"]) >= 1
    with read_store(db) as store:
        job = store.get(job_id)
    assert job.state == JobState.PENDING
    assert job.payload == {"month": "2026-01", "credential_id": "erp-readonly"}
    assert owner_row(db, job_id) == ("alice", None)
    # The Location answers for its owner.
    status = client.get(reply.headers["Location"], headers=ALICE)
    assert status.status_code == 200 and status.json()["state"] == "pending"


def test_same_idempotency_key_and_body_returns_the_same_job_once(
    client: httpx.Client, db: Path
) -> None:
    body, headers = {"month": "2026-02"}, {**ALICE, "Idempotency-Key": "same-twice"}
    first = client.post("/jobs/report", json=body, headers=headers)
    second = client.post("/jobs/report", json=body, headers=headers)
    assert first.status_code == second.status_code == 202
    assert first.json()["job_id"] == second.json()["job_id"]
    assert (first.json()["created"], second.json()["created"]) == (True, False)
    # Only the replay says it is one.
    assert "Idempotent-Replayed" not in first.headers
    assert second.headers["Idempotent-Replayed"] == "true"
    assert len(jobs_with_key(db, "same-twice")) == 1


def test_the_drafts_quoted_key_and_the_bare_key_are_one_key(client: httpx.Client, db: Path) -> None:
    body, key = {"month": "2026-02"}, "8e03978e-40d5-43e8-bc93-6894a57f9324"
    quoted = client.post(
        "/jobs/report", json=body, headers={**ALICE, "Idempotency-Key": f'"{key}"'}
    )
    bare = client.post("/jobs/report", json=body, headers={**ALICE, "Idempotency-Key": key})
    assert quoted.status_code == bare.status_code == 202
    assert quoted.json()["created"] is True and bare.json()["created"] is False
    assert bare.json()["job_id"] == quoted.json()["job_id"]
    assert bare.headers["Idempotent-Replayed"] == "true"
    # The quotes are syntax, not part of the key the database holds.
    assert owner_row(db, quoted.json()["job_id"]) == ("alice", key)
    assert len(jobs_with_key(db, key)) == 1


def test_an_escaped_quote_inside_a_quoted_key_is_part_of_the_key(
    client: httpx.Client, db: Path
) -> None:
    reply = client.post(
        "/jobs/report",
        json={"month": "2026-02"},
        headers={**ALICE, "Idempotency-Key": r'"say \"hi\" \\ bye"'},
    )
    assert reply.status_code == 202
    assert owner_row(db, reply.json()["job_id"]) == ("alice", 'say "hi" \\ bye')


def test_same_key_with_another_body_is_422_and_changes_nothing(
    client: httpx.Client, db: Path
) -> None:
    headers = {**ALICE, "Idempotency-Key": "reused-key"}
    first = client.post("/jobs/report", json={"month": "2026-03"}, headers=headers)
    other = client.post("/jobs/report", json={"month": "2026-04"}, headers=headers)
    assert other.status_code == 422
    assert "different" in other.json()["detail"]
    assert "reused-key" not in other.text  # what was sent is never echoed
    [job] = jobs_with_key(db, "reused-key")
    assert job.id == first.json()["job_id"] and job.payload == {"month": "2026-03"}


def test_idempotency_keys_are_scoped_to_their_owner(client: httpx.Client, db: Path) -> None:
    body = {"month": "2026-05"}
    a = client.post("/jobs/report", json=body, headers={**ALICE, "Idempotency-Key": "k-shared"})
    b = client.post("/jobs/report", json=body, headers={**BOB, "Idempotency-Key": "k-shared"})
    assert a.status_code == b.status_code == 202
    assert a.json()["job_id"] != b.json()["job_id"]
    assert owner_row(db, b.json()["job_id"]) == ("bob", "k-shared")


def test_another_owner_gets_the_same_404_as_a_missing_id(client: httpx.Client) -> None:
    job_id = client.post("/jobs/report", json={"month": "2026-06"}, headers=ALICE).json()["job_id"]
    theirs = client.get(f"/jobs/{job_id}", headers=BOB)
    missing = client.get("/jobs/987654", headers=BOB)
    assert theirs.status_code == missing.status_code == 404
    assert theirs.json() == missing.json() == {"detail": NOT_FOUND}
    # Nor can they cancel it.
    assert client.delete(f"/jobs/{job_id}", headers=BOB).status_code == 404
    assert client.get(f"/jobs/{job_id}", headers=ALICE).json()["state"] == "pending"


@pytest.mark.parametrize(
    "headers",
    [
        {},  # no Authorization at all
        {"Authorization": "Bearer not-a-token"},  # a token nobody was given
        {"Authorization": "Basic YWxpY2U6eA=="},  # another scheme
    ],
)
def test_a_caller_without_a_valid_token_gets_401(client: httpx.Client, headers: dict) -> None:
    reply = client.post("/jobs/report", json={"month": "2026-07"}, headers=headers)
    assert reply.status_code == 401
    assert reply.headers["WWW-Authenticate"] == "Bearer"
    assert client.get("/jobs/1", headers=headers).status_code == 401


@pytest.mark.parametrize(
    "body, field",
    [
        ({"month": "2026-08", "password": "hunter2"}, "payload.password"),  # top level
        ({"month": "2026-08", "erp": {"api_key": "abc123"}}, "payload.erp.api_key"),  # nested
        ({"month": "2026-08", "logins": [{"Token": "t-1"}]}, "payload.logins[0].Token"),  # list
    ],
)
def test_a_credential_in_the_body_is_refused_with_nothing_stored(
    client: httpx.Client, db: Path, body: dict, field: str
) -> None:
    with read_store(db) as store:
        before = sum(store.counts().values())
    reply = client.post("/jobs/report", json=body, headers=ALICE)
    assert reply.status_code == 422
    detail = reply.json()["detail"]
    assert f"{field}: a field named like a credential" in detail
    assert "credential_id" in detail
    assert "hunter2" not in reply.text and "abc123" not in reply.text and "t-1" not in reply.text
    with read_store(db) as store:
        assert sum(store.counts().values()) == before


@pytest.mark.parametrize(
    "key",
    [
        "",  # empty
        "k" * 256,  # longer than 255
        '""',  # quoted, but empty inside
        '"' + "k" * 256 + '"',  # quoted, longer than 255 inside
    ],
)
def test_a_malformed_idempotency_key_is_400(client: httpx.Client, key: str) -> None:
    reply = client.post(
        "/jobs/report", json={"month": "2026-09"}, headers={**ALICE, "Idempotency-Key": key}
    )
    assert reply.status_code == 400 and "Idempotency-Key" in reply.json()["detail"]


@pytest.mark.parametrize(
    "key, fault",
    [
        ('"abc', "the closing quote is missing"),  # opened, never closed
        ('"abc"def', "3 characters follow the closing quote"),  # more after the string
        (r'"a\nb"', "character 3 is a backslash before neither"),  # only \" and \\ escape
        ('"a\tb"', "character 3 is not printable ASCII"),  # a tab inside
    ],
)
def test_a_malformed_quoted_key_is_400_saying_what_is_wrong(
    client: httpx.Client, db: Path, key: str, fault: str
) -> None:
    with read_store(db) as store:
        before = sum(store.counts().values())
    reply = client.post(
        "/jobs/report", json={"month": "2026-09"}, headers={**ALICE, "Idempotency-Key": key}
    )
    assert reply.status_code == 400
    detail = reply.json()["detail"]
    assert fault in detail and "not one quoted string" in detail and "bare" in detail
    assert "abc" not in detail and "a\\nb" not in detail  # positions, never the value
    with read_store(db) as store:
        assert sum(store.counts().values()) == before


def test_a_held_request_is_seen_with_its_key_never_empty(tmp_path: Path) -> None:
    # ``paused`` used to be created empty and then written: a lab that looked in between
    # read "" and concluded no request was held (CI saw it once). It now appears whole.
    for n in range(30):
        pause = Pause(tmp_path / f"pause-{n}", timeout_s=30)
        pause.folder.mkdir()
        seen: list[str] = []

        def look(pause: Pause = pause, seen: list[str] = seen) -> None:
            while not (pause.folder / "paused").exists():
                pass
            seen.append((pause.folder / "paused").read_text(encoding="utf-8"))

        reader = threading.Thread(target=look)
        reader.start()
        holder = threading.Thread(target=pause.hold, args=(f"key-{n}",))
        holder.start()
        reader.join(30)
        pause.hold("a later request")  # passes at once: one request is held, not two
        pause.resume()
        holder.join(30)
        assert seen == [f"key-{n}"]
        assert (pause.folder / "paused").read_text(encoding="utf-8") == f"key-{n}"
        assert sorted(p.name for p in pause.folder.iterdir()) == ["paused", "resume"]


def test_the_same_key_while_its_first_request_is_in_progress_is_409(tmp_path: Path) -> None:
    db, pause = tmp_path / "jobs.db", Pause(tmp_path / "pause", timeout_s=30)
    pause.folder.mkdir()
    body, headers = {"month": "2026-02"}, {**ALICE, "Idempotency-Key": '"slow-1"'}
    answers: list[httpx.Response] = []
    env = {"LABKIT_HTTP_DB": str(db), "LABKIT_HTTP_PAUSE": str(pause.folder)}
    with start_server(
        APP, factory=True, env=env, log_path=tmp_path / "server.log", ready_path="/healthz"
    ) as srv:

        def first_request() -> None:
            answers.append(httpx.post(srv.url + "/jobs/report", json=body, headers=headers))

        first = threading.Thread(target=first_request)
        first.start()
        try:
            assert pause.wait_until_held() == "slow-1", "the first request was never paused"
            second = httpx.post(srv.url + "/jobs/report", json=body, headers=headers)
            assert first.is_alive() and not answers, "the first request finished too soon"
        finally:
            pause.resume()
            first.join(30)
        third = httpx.post(srv.url + "/jobs/report", json=body, headers=headers)
    assert second.status_code == 409 and "still being handled" in second.json()["detail"]
    assert int(second.headers["Retry-After"]) >= 1
    [answer] = answers
    assert answer.status_code == 202 and answer.json()["created"] is True
    assert third.json() == {"job_id": answer.json()["job_id"], "state": "pending", "created": False}
    assert third.headers["Idempotent-Replayed"] == "true"
    with read_store(db) as store:
        assert [j.key for j in store.jobs()] == ["http:alice:slow-1"]


def test_status_follows_the_worker_and_never_shows_the_payload(
    client: httpx.Client, db: Path
) -> None:
    secret = report_job.LAB_SECRET_STORE["erp-readonly"]
    body = {"month": "2026-10", "credential_id": "erp-readonly", "note": "payload-marker-q7"}
    job_id = client.post("/jobs/report", json=body, headers=ALICE).json()["job_id"]
    with read_store(db) as store:
        Worker(store, report_job.HANDLERS, name="w-test", queues=("default",)).drain()
        assert store.get(job_id).state == JobState.SUCCEEDED
    reply = client.get(f"/jobs/{job_id}", headers=ALICE)
    view = reply.json()
    assert view["state"] == "succeeded" and view["attempts"] == 1
    assert view["result"]["report"] == "sales 2026-10" and view["result"]["signed_in"] is True
    assert "Retry-After" not in reply.headers  # finished: nothing to poll for
    assert "payload-marker-q7" not in reply.text and secret not in reply.text


def test_status_shows_a_retry_with_its_next_attempt_and_a_sanitized_error(
    client: httpx.Client, db: Path
) -> None:
    job_id = client.post("/jobs/report", json={"month": "2026-11"}, headers=ALICE).json()["job_id"]

    def flaky(job: Job, ctx: object) -> None:
        raise TransientError("ERP said 503 for login password=hunter2 token=abc")

    with read_store(db) as store:
        store.retry = RetryPolicy(max_attempts=5)
        worker = Worker(store, {"report": flaky}, name="w-flaky")
        ran = worker.run_until_idle()
        assert ran >= 1
        assert store.get(job_id).state == JobState.RETRY_WAIT
    view = client.get(f"/jobs/{job_id}", headers=ALICE).json()
    assert view["state"] == "retry_wait" and view["attempts"] == 1
    assert view["next_attempt_at"] is not None
    assert "503" in view["error"] and "hunter2" not in view["error"] and "abc" not in view["error"]


def test_cancel_a_pending_job_and_no_worker_runs_it(client: httpx.Client, db: Path) -> None:
    job_id = client.post("/jobs/report", json={"month": "2027-01"}, headers=ALICE).json()["job_id"]
    reply = client.delete(f"/jobs/{job_id}", headers=ALICE)
    assert reply.status_code == 200
    assert reply.json()["cancelled"] is True and reply.json()["state"] == "cancelled"
    with read_store(db) as store:
        assert store.get(job_id).state == JobState.CANCELLED
        # Not a dead letter: nobody has anything to fix.
        assert job_id not in {d.id for d in store.dead_letters(limit=1000)}
        Worker(store, report_job.HANDLERS, name="w-after-cancel").drain()
        assert store.get(job_id).attempt == 0  # never claimed
        with pytest.raises(InvalidTransition, match="cancelled, not dead: .* is final"):
            store.redrive(job_id)  # and a redrive cannot bring it back
    again = client.delete(f"/jobs/{job_id}", headers=ALICE)
    assert again.status_code == 409 and "already cancelled" in again.json()["detail"]


def test_a_running_job_cannot_be_cancelled(client: httpx.Client, db: Path) -> None:
    job_id = client.post("/jobs/report", json={"month": "2027-02"}, headers=ALICE).json()["job_id"]
    with read_store(db) as store:
        claimed = store.claim("w-busy")
        while claimed is not None and claimed.id != job_id:
            # Older jobs of this module's database come first: finish them out of the way.
            store.complete(claimed)
            claimed = store.claim("w-busy")
        assert claimed is not None and claimed.id == job_id
    reply = client.delete(f"/jobs/{job_id}", headers=ALICE)
    assert reply.status_code == 409
    assert "running" in reply.json()["detail"] and "cannot be cancelled" in reply.json()["detail"]
    with read_store(db) as store:
        assert store.get(job_id).state == JobState.RUNNING


def test_metrics_are_served_in_the_prometheus_text_format(client: httpx.Client) -> None:
    reply = client.get("/metrics", headers=ALICE)
    assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/plain")
    assert 'labkit_jobs{state="pending"}' in reply.text
    assert "labkit_attempts_total" in reply.text


def test_an_unknown_kind_is_404_naming_the_kinds(client: httpx.Client) -> None:
    reply = client.post("/jobs/payroll", json={"month": "2027-03"}, headers=ALICE)
    assert reply.status_code == 404 and "report" in reply.json()["detail"]


def test_a_body_that_is_not_a_json_object_is_422(client: httpx.Client, db: Path) -> None:
    with read_store(db) as store:
        before = sum(store.counts().values())
    for content in (b"[1, 2]", b"not json"):
        reply = client.post(
            "/jobs/report",
            content=content,
            headers={**ALICE, "Content-Type": "application/json"},
        )
        assert reply.status_code == 422
    with read_store(db) as store:
        assert sum(store.counts().values()) == before
