"""Slow and idle clients cost the HTTP service a bounded time and a bounded share of it.

A real uvicorn server with small limits (a 1 s head deadline, a 2 s body deadline, a 1 s
keep-alive), raw sockets that send half a request, or trickle it a byte at a time, and
a well-behaved httpx client beside them. Each test asserts that the server closed the
slow connections by a generous bound (the deadline plus several seconds: a loaded
machine is slow, but a connection still open then was never cut), never how fast.
"""

from __future__ import annotations

import select
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from httpkit import ALICE, client_of, job_count, lab_server

from labkit.clock import SystemClock
from labkit.integrations.http.connections import ConnectionLimits
from labkit.integrations.http.serve import Server

LIMITS = ConnectionLimits(head_s=1.0, body_s=2.0, keep_alive_s=1, max_connections=64)
#: Added to a deadline before a connection still open counts as never cut.
MARGIN_S = 8.0
#: Seconds between two bytes of a trickled request.
TRICKLE_S = 0.2
CLOCK = SystemClock()  # real time: the server's deadlines run on its real clock


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("slow") / "jobs.db"


@pytest.fixture(scope="module")
def server(db: Path) -> Iterator[Server]:
    with lab_server(db, limits=LIMITS) as srv:
        yield srv


@dataclass
class Slow:
    """One raw connection: what is left to trickle, what came back, when it was closed."""

    sock: socket.socket
    pending: bytes
    answer: bytes = b""
    closed_after: float | None = None
    sent: int = 0


def connect(server: Server, first: bytes, rest: bytes) -> Slow:
    url = urlsplit(server.url)
    sock = socket.create_connection((url.hostname, url.port), timeout=10)
    sock.sendall(first)
    return Slow(sock, rest)


def drive(conns: list[Slow], until_s: float) -> None:
    """Trickle each connection's pending bytes, one every ``TRICKLE_S``, and read what the
    server sends, until every connection is closed or ``until_s`` seconds have passed."""
    start = CLOCK.now()
    try:
        while CLOCK.now() - start < until_s:
            open_ = [c for c in conns if c.closed_after is None]
            if not open_:
                return
            readable, _, _ = select.select([c.sock for c in open_], [], [], TRICKLE_S)
            for conn in open_:
                if conn.sock in readable:
                    _read(conn, CLOCK.now() - start)
                elif conn.pending:
                    try:
                        conn.sock.send(conn.pending[:1])
                    except OSError:  # the server closed it between two bytes
                        conn.closed_after = CLOCK.now() - start
                        continue
                    conn.pending, conn.sent = conn.pending[1:], conn.sent + 1
    finally:
        for conn in conns:
            conn.sock.close()


def _read(conn: Slow, elapsed: float) -> None:
    try:
        chunk = conn.sock.recv(65536)
    except ConnectionResetError:
        chunk = b""
    if chunk:
        conn.answer += chunk
    else:
        conn.closed_after = elapsed


def status_of(answer: bytes) -> int | None:
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else None


HEAD = (
    b"POST /jobs/report HTTP/1.1\r\nHost: lab\r\nAuthorization: Bearer alice-token\r\n"
    b"Content-Type: application/json\r\nContent-Length: 60\r\n\r\n"
)


@pytest.mark.parametrize(
    ("first", "rest"),
    [
        (b"", b""),  # connected, and not a byte since: an idle connection
        (b"POST /jobs/rep", b""),  # half the request line, then silence
        (HEAD[:-2], b""),  # every header but the blank line that ends the head
        (b"", HEAD),  # the whole head, a byte every 0.2 s (slowloris: never idle)
    ],
    ids=["idle", "half a request line", "no blank line", "trickled head"],
)
def test_a_request_head_that_does_not_arrive_in_time_is_cut_off(
    server: Server, db: Path, first: bytes, rest: bytes
) -> None:
    before = job_count(db)
    conns = [connect(server, first, rest) for _ in range(20)]
    with client_of(server) as good:  # served while the slow ones hold their connections
        assert good.get("/healthz").status_code == 200
    drive(conns, LIMITS.head_s + MARGIN_S)
    still_open = sum(c.closed_after is None for c in conns)
    assert still_open == 0, (
        f"{still_open} of {len(conns)} connections still open "
        f"{LIMITS.head_s + MARGIN_S:g} s after they started sending a head"
    )
    for conn in conns:
        assert status_of(conn.answer) in (None, 408), conn.answer[:200]
        assert conn.pending or not rest, "the trickled head arrived whole before the cut"
    assert job_count(db) == before


@pytest.mark.parametrize(
    ("head", "status"),
    [
        (HEAD, 408),  # a caller with a token: the app waits for the body, then 408
        (HEAD.replace(b"Bearer alice-token", b"Bearer nobody"), 401),  # refused on its
        # headers at once; the trickle after the answer must not hold the connection
    ],
    ids=["authorized", "refused on its headers"],
)
def test_a_body_trickled_a_byte_at_a_time_is_cut_off(
    server: Server, db: Path, head: bytes, status: int
) -> None:
    before = job_count(db)
    body = b'{"month": "2026-05", "note": "' + b"x" * 28 + b'"}'  # 60 bytes: 12 s
    assert len(body) == 60
    conns = [connect(server, head, body) for _ in range(5)]
    with client_of(server) as good:
        assert good.get("/healthz").status_code == 200
    drive(conns, LIMITS.body_s + MARGIN_S)
    for conn in conns:
        assert conn.closed_after is not None, (
            f"a body trickled at one byte per {TRICKLE_S:g} s is still open "
            f"{LIMITS.body_s + MARGIN_S:g} s later ({conn.sent} bytes sent)"
        )
        assert conn.pending, "the whole body arrived before the cut: trickle slower"
        assert status_of(conn.answer) == status, conn.answer[:200]
    assert job_count(db) == before
    with client_of(server) as good:
        reply = good.post("/jobs/report", json={"month": "2026-05"}, headers=ALICE)
        assert reply.status_code == 202, reply.text


def test_requests_past_the_connection_limit_get_503_and_a_good_client_is_answered_throughout(
    tmp_path: Path,
) -> None:
    limits = ConnectionLimits(head_s=3.0, body_s=2.0, keep_alive_s=1, max_connections=8)
    with lab_server(tmp_path / "jobs.db", limits=limits) as srv:
        holders = [connect(srv, b"", b"") for _ in range(limits.max_connections)]
        try:
            CLOCK.sleep(0.3)  # the server accepts them
            past = [connect(srv, b"GET /healthz HTTP/1.1\r\nHost: lab\r\n\r\n", b"")]
            drive(past, 5.0)
            assert status_of(past[0].answer) == 503, past[0].answer[:200]
            seen: list[int] = []
            with httpx.Client(base_url=srv.url, timeout=5.0) as good:
                start = CLOCK.now()
                while CLOCK.now() - start < limits.head_s + MARGIN_S:
                    # Every poll gets an answer (a timeout here would fail the test).
                    seen.append(good.get("/healthz").status_code)
                    if seen[-1] == 200:
                        break
                    CLOCK.sleep(0.2)
        finally:
            for holder in holders:
                holder.sock.close()
    assert seen[0] == 503, f"the limit of {limits.max_connections} never answered 503: {seen}"
    assert seen[-1] == 200, f"the idle holders were never cut, every poll was 503: {seen}"
    assert set(seen) == {503, 200}
