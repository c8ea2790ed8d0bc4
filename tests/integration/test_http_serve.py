"""The launcher: a server on a kernel-picked port, its whole group killed, a clear failure."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from labkit.integrations.http.serve import start_server

APP = "labkit.integrations.http.service:app_from_env"


def test_two_servers_get_two_ports_and_stop_kills_the_group(tmp_path: Path) -> None:
    env = {"LABKIT_HTTP_DB": str(tmp_path / "jobs.db")}
    with start_server(APP, factory=True, env=env, ready_path="/healthz") as one:
        with start_server(APP, factory=True, env=env, ready_path="/healthz") as two:
            assert one.url != two.url
            assert httpx.get(two.url + "/healthz").json() == {"status": "ok"}
            group = os.getpgid(two.popen.pid)
            assert group == two.popen.pid  # its own process group
        assert two.returncode is not None
        with pytest.raises(ProcessLookupError):
            os.killpg(group, 0)
        assert httpx.get(one.url + "/healthz").status_code == 200
    assert one.returncode is not None


def test_an_app_that_cannot_start_fails_at_once_with_its_log(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    with pytest.raises(RuntimeError, match="exited before it answered"):
        # No LABKIT_HTTP_DB: the factory refuses to build the app.
        start_server(APP, factory=True, env={"LABKIT_HTTP_DB": ""}, log_path=log)
    assert "LABKIT_HTTP_DB" in log.read_text()
