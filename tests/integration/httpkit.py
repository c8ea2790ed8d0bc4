"""The lab's HTTP service as the integration tests start it: a real uvicorn process.

``lab_server(db, **env)`` serves ``labkit.integrations.http.service`` over the job
database ``db`` (its log beside it), stopped with its process group on the way out;
``client_of(server)`` is an httpx client on it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from labkit.integrations.http.serve import Server, start_server

APP = "labkit.integrations.http.service:app_from_env"
ALICE = {"Authorization": "Bearer alice-token"}
BOB = {"Authorization": "Bearer bob-token"}


@contextmanager
def lab_server(db: Path, log: str = "server.log", **env: str) -> Iterator[Server]:
    """The service on ``db``, extra environment in ``env`` (``LABKIT_HTTP_...``)."""
    with start_server(
        APP,
        factory=True,
        env={"LABKIT_HTTP_DB": str(db), **env},
        log_path=db.with_name(log),
        ready_path="/healthz",
    ) as srv:
        yield srv
    assert srv.returncode is not None, "the server process outlived its fixture"


@contextmanager
def client_of(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30.0) as client:
        yield client
