"""What the HTTP service refuses on a request's headers alone, and how it says it is busy.

A real uvicorn server; requests that must be answered *before* their body is read are
sent over a raw socket with a ``Content-Length`` and no body at all: a server that read
the body first would wait for bytes that never come, and the test's socket timeout
would say so. The database is read directly to show nothing was written.
"""

from __future__ import annotations

import socket
import sqlite3
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from httpkit import ALICE, job_count

from labkit.integrations.http.operations import NOT_FOUND, REQUEST_BUSY_S
from labkit.integrations.http.refusals import MAX_BODY_BYTES
from labkit.integrations.http.serve import Server

BODY = {"month": "2026-05", "credential_id": "erp-readonly"}


def headers_only(server: Server, lines: list[str]) -> tuple[int, bytes]:
    """Send a request's head and no body; the status and the answer's bytes."""
    url = urlsplit(server.url)
    head = "\r\n".join(["POST /jobs/report HTTP/1.1", f"Host: {url.netloc}", *lines, "", ""])
    with socket.create_connection((url.hostname, url.port), timeout=10) as sock:
        sock.sendall(head.encode())
        answer = b""
        while not _whole(answer):
            chunk = sock.recv(65536)  # a socket.timeout here: the server waited for the body
            if not chunk:
                break
            answer += chunk
    return int(answer.split(b" ", 2)[1]), answer


def _whole(answer: bytes) -> bool:
    """The answer's head and as much body as its content-length says have arrived."""
    head, sep, body = answer.partition(b"\r\n\r\n")
    if not sep:
        return False
    for line in head.lower().split(b"\r\n"):
        if line.startswith(b"content-length:"):
            return len(body) >= int(line.split(b":", 1)[1])
    return True


def test_an_anonymous_huge_upload_is_refused_before_a_byte_of_it_is_read(
    server: Server, db: Path
) -> None:
    before = job_count(db) if db.exists() else 0
    status, answer = headers_only(
        server, ["Content-Type: application/json", f"Content-Length: {200 * 2**20}"]
    )
    assert status == 401 and b"www-authenticate: bearer" in answer.lower()
    assert job_count(db) == before


@pytest.mark.parametrize(
    ("length", "status", "said"),
    [
        (f"Content-Length: {MAX_BODY_BYTES + 1}", 413, b"byte limit"),
        ("Transfer-Encoding: chunked", 411, b"Content-Length"),
    ],
    ids=["over the limit: 413", "chunked: 411"],
)
def test_a_body_too_long_or_without_a_length_is_refused_before_it_is_read(
    server: Server, db: Path, length: str, status: int, said: bytes
) -> None:
    before = job_count(db)
    got, answer = headers_only(
        server,
        ["Authorization: Bearer alice-token", "Content-Type: application/json", length],
    )
    assert got == status and said in answer
    assert job_count(db) == before


def test_a_body_at_the_limit_is_read_and_judged_on_its_content(
    client: httpx.Client, db: Path
) -> None:
    before = job_count(db)
    padded = b'{"month": "2026-05"' + b" " * (MAX_BODY_BYTES - 20) + b"}"
    assert len(padded) == MAX_BODY_BYTES
    reply = client.post(
        "/jobs/report", content=padded, headers={**ALICE, "Content-Type": "application/json"}
    )
    assert reply.status_code == 202, reply.text
    assert job_count(db) == before + 1


@pytest.mark.parametrize("job_id", ["0", "-1", str(2**63), str(2**70)])
def test_an_id_out_of_the_databases_range_is_the_same_404(client: httpx.Client, job_id) -> None:
    missing = client.get("/jobs/999999", headers=ALICE)
    for reply in (
        client.get(f"/jobs/{job_id}", headers=ALICE),
        client.delete(f"/jobs/{job_id}", headers=ALICE),
    ):
        assert reply.status_code == 404, reply.text
        assert reply.json() == missing.json() == {"detail": NOT_FOUND}


def test_metrics_need_a_token_like_the_jobs(client: httpx.Client) -> None:
    anonymous = client.get("/metrics")
    assert anonymous.status_code == 401 and anonymous.headers["WWW-Authenticate"] == "Bearer"
    served = client.get("/metrics", headers=ALICE)
    assert served.status_code == 200 and "labkit_" in served.text
    assert client.get("/healthz").status_code == 200  # the one open route


def test_a_database_held_by_another_writer_is_503_with_retry_after_and_nothing_lost(
    client: httpx.Client, db: Path
) -> None:
    before = job_count(db)
    holder = sqlite3.connect(db, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")  # another writer holds the write lock
        busy = client.post("/jobs/report", json=BODY, headers={**ALICE, "Idempotency-Key": "b-1"})
        assert busy.status_code == 503, busy.text
        assert busy.headers["Retry-After"] == "2" and "nothing was changed" in busy.text
        assert REQUEST_BUSY_S < 10  # a request gives up sooner than the store's 10 s
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert job_count(db) == before
    again = client.post("/jobs/report", json=BODY, headers={**ALICE, "Idempotency-Key": "b-1"})
    assert again.status_code == 202 and again.json()["created"] is True
    assert job_count(db) == before + 1
