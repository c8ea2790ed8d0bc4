"""The lab's HTTP service as the integration tests start it: a real uvicorn process.

``lab_server(db, **env)`` serves ``labkit.integrations.http.service`` over the job
database ``db`` (its log beside it), stopped with its process group on the way out;
``limits=`` passes the server's connection limits (small deadlines for a test).
``client_of(server)`` is an httpx client on it; ``job_count(db)`` reads the database.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import httpx

from labkit.integrations.http.connections import ConnectionLimits
from labkit.integrations.http.serve import Server, start_server

APP = "labkit.integrations.http.service:app_from_env"
ALICE = {"Authorization": "Bearer alice-token"}
BOB = {"Authorization": "Bearer bob-token"}


@contextmanager
def lab_server(
    db: Path, log: str = "server.log", limits: ConnectionLimits | None = None, **env: str
) -> Iterator[Server]:
    """The service on ``db``, extra environment in ``env`` (``LABKIT_HTTP_...``)."""
    with start_server(
        APP,
        factory=True,
        env={"LABKIT_HTTP_DB": str(db), **env},
        log_path=db.with_name(log),
        ready_path="/healthz",
        limits=limits,
    ) as srv:
        yield srv
    assert srv.returncode is not None, "the server process outlived its fixture"


@contextmanager
def client_of(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30.0) as client:
        yield client


def job_count(db: Path) -> int:
    """How many jobs the database holds, read from the file (0 before it exists)."""
    if not db.exists():
        return 0
    with closing(sqlite3.connect(db)) as conn:
        return int(conn.execute("SELECT count(*) FROM jobs").fetchone()[0])
