"""One request id from the HTTP request to the job's log lines, with real processes.

A uvicorn server accepts jobs; a worker process (``run_worker_process`` with
``log_fields=job_request_ids``) runs them; both logs are read back as JSON and the
database is read directly. Also: a bad id is 400 with nothing written, a retry with a
fresh id is a replay (the id is not in the payload's fingerprint), and a database made
before request ids gains the column.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import httpx
import pytest
from httpkit import ALICE, client_of, lab_server

from labkit import logs
from labkit.clock import LAB_EPOCH
from labkit.integrations.http.correlation import REQUEST_ID, job_request_ids
from labkit.integrations.http.serve import Server
from labkit.store import JobStore
from labkit.worker_process import run_worker_process

LOOKUP = "labkit.integrations.http.correlation:job_request_ids"
HANDLERS = "labkit.integrations.http.report_job:HANDLERS"
BODY = {"month": "2026-03", "credential_id": "erp-readonly"}


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "jobs.db"


@pytest.fixture
def server(db: Path) -> Iterator[Server]:
    with lab_server(db, "api.log", LABKIT_HTTP_CLOCK_START=str(LAB_EPOCH)) as srv:
        yield srv


@pytest.fixture
def client(server: Server) -> Iterator[httpx.Client]:
    with client_of(server) as c:
        yield c


def stored_request_ids(db: Path) -> dict[int, str | None]:
    with closing(sqlite3.connect(db)) as conn:
        return dict(conn.execute("SELECT job_id, request_id FROM http_requests ORDER BY job_id"))


def test_one_search_for_the_request_id_finds_the_request_the_replay_and_every_attempt(
    db: Path, client: httpx.Client, server: Server
) -> None:
    first = client.post(
        "/jobs/report",
        json=BODY,
        headers={**ALICE, "Idempotency-Key": "mar-1", REQUEST_ID: "req-7f3a"},
    )
    retry = client.post(
        "/jobs/report",
        json=BODY,
        headers={**ALICE, "Idempotency-Key": "mar-1", REQUEST_ID: "req-9b21"},
    )
    other = client.post("/jobs/report", json={"month": "2026-04"}, headers=ALICE)
    assert first.status_code == retry.status_code == other.status_code == 202
    assert first.headers[REQUEST_ID] == "req-7f3a" and retry.headers[REQUEST_ID] == "req-9b21"
    assert retry.headers["Idempotent-Replayed"] == "true"
    job_id, other_id = first.json()["job_id"], other.json()["job_id"]
    assert retry.json()["job_id"] == job_id
    made_up = other.headers[REQUEST_ID]
    assert len(made_up) == 32 and int(made_up, 16) >= 0  # a uuid4's hex, made by the server
    assert stored_request_ids(db) == {job_id: "req-7f3a", other_id: made_up}
    with JobStore(db) as store:
        assert "req-" not in str(store.get(job_id).payload)  # never in the payload

    worker = run_worker_process(
        db,
        HANDLERS,
        name="w1",
        clock_start=LAB_EPOCH + 5,
        log_path=db.with_name("w1.log"),
        log_fields=LOOKUP,
    )
    assert worker.wait(60) == 0, worker.log_text()

    lines = logs.parse(server.log_text()) + logs.parse(worker.log_text())
    about_first = [line for line in lines if line.get("request_id") == "req-7f3a"]
    assert [line["logger"] for line in about_first] == ["labkit.http", "labkit.worker"]
    assert about_first[0]["event"] == f"accepted job {job_id} (report)"
    assert about_first[1]["job_id"] == job_id and about_first[1]["outcome"] == "succeeded"
    assert about_first[1]["worker"] == "w1"
    replays = [line for line in lines if line.get("request_id") == "req-9b21"]
    assert len(replays) == 1 and "accepted by request req-7f3a" in replays[0]["event"]
    worker_lines = [line for line in lines if line["logger"] == "labkit.worker"]
    assert {line["job_id"]: line["request_id"] for line in worker_lines} == {
        job_id: "req-7f3a",
        other_id: made_up,
    }


@pytest.mark.parametrize(
    "bad", ["a b", "x" * 129, "<script>", "id\\n", "ação"], ids=lambda v: repr(v)[:12]
)
def test_a_bad_request_id_is_400_saying_what_is_wrong_and_nothing_is_written(
    db: Path, client: httpx.Client, bad: str
) -> None:
    reply = client.post("/jobs/report", json=BODY, headers={**ALICE, REQUEST_ID: bad.encode()})
    assert reply.status_code == 400, reply.text
    detail = reply.json()["detail"]
    assert "X-Request-Id" in detail and "leave the header out" in detail
    assert stored_request_ids(db) == {}


def test_every_answer_names_its_request_errors_too(client: httpx.Client) -> None:
    for reply in (
        client.get("/jobs/1", headers={REQUEST_ID: "req-a"}),  # 401: no token
        client.get("/jobs/999", headers={**ALICE, REQUEST_ID: "req-b"}),  # 404
        client.post("/jobs/nope", json={}, headers={**ALICE, REQUEST_ID: "req-c"}),  # 404 kind
    ):
        assert reply.status_code in (401, 404)
        assert reply.headers[REQUEST_ID] == reply.request.headers[REQUEST_ID]


def test_a_database_made_before_request_ids_gains_the_column_and_keeps_its_rows(
    tmp_path: Path,
) -> None:
    from labkit.integrations.http.operations import JobService

    db = tmp_path / "old.db"
    with JobStore(db) as store:
        job, _ = store.enqueue("report", {"month": "2025-12"})
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute(
            "CREATE TABLE http_requests (job_id INTEGER PRIMARY KEY REFERENCES jobs (id),"
            " owner TEXT NOT NULL, idempotency_key TEXT, accepted_at REAL NOT NULL,"
            " UNIQUE (owner, idempotency_key))"
        )
        conn.execute("INSERT INTO http_requests VALUES (?, 'alice', 'old-1', 0)", (job.id,))
    with JobStore(db) as store:
        service = JobService(store)
        new, created = service.accept("alice", "report", {"month": "2026-01"}, None, "req-new")
    assert created
    assert stored_request_ids(db) == {job.id: None, new.id: "req-new"}
    lookup = job_request_ids(db)
    assert lookup(job.id) == {} and lookup(new.id) == {"request_id": "req-new"}


def test_the_lookup_gives_nothing_for_a_database_without_the_services_table(
    tmp_path: Path,
) -> None:
    db = tmp_path / "plain.db"
    with JobStore(db) as store:
        job, _ = store.enqueue("report", {})
    assert job_request_ids(db)(job.id) == {}
    assert job_request_ids(tmp_path / "missing.db")(1) == {}
