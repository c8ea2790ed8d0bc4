"""The lab's HTTP service for a test module: its database, the server on it, a client.

Each module gets its own database and server (``httpkit.lab_server``), started once;
each test its own client. A module that needs another server defines these again.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from httpkit import client_of, lab_server

from labkit.integrations.http.serve import Server


@pytest.fixture(scope="module")
def db(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp(request.module.__name__.removeprefix("test_")) / "jobs.db"


@pytest.fixture(scope="module")
def server(db: Path) -> Iterator[Server]:
    with lab_server(db) as srv:
        yield srv


@pytest.fixture
def client(server: Server) -> Iterator[httpx.Client]:
    with client_of(server) as c:
        yield c
