"""labkit.labserver, the launcher behind `make lab`: the URL it shows is the one Jupyter serves.

Jupyter moves to the next free port when the asked one is taken, so the banner is read
from the server's runtime file; and stopping the lab ends its whole process group.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.request

import pytest

from labkit.labserver import start_lab

pytestmark = pytest.mark.slow


def test_lab_url_is_the_port_jupyter_moved_to_and_stop_ends_the_group(tmp_path):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    (tmp_path / "notebooks").mkdir()
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(tmp_path / "config"))
    lab = start_lab(tmp_path, port, runtime_dir=tmp_path / "runtime", env=env,
                    log_path=tmp_path / "lab.log", landing="notebooks/x.ipynb")
    try:
        assert lab.port != port, "Jupyter could not have served the port we held"
        assert f"127.0.0.1:{lab.port}/" in lab.url
        assert lab.lab_url.endswith(f"lab/tree/notebooks/x.ipynb?token={lab.token}")
        listed = subprocess.run(
            [sys.executable, "-m", "jupyter_server", "list", "--json"],
            env={**env, "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")},
            capture_output=True, text=True, timeout=60, check=True,
        ).stdout
        servers = [json.loads(line) for line in listed.splitlines() if line.strip()]
        assert [s["port"] for s in servers] == [lab.port]  # what `jupyter server list` says
        with urllib.request.urlopen(f"{lab.url}api/status?token={lab.token}", timeout=30) as r:
            assert r.status == 200
    finally:
        lab.stop()
        taken.close()
    assert lab.popen.poll() is not None
    with pytest.raises(ProcessLookupError):
        os.killpg(lab.popen.pid, 0)  # nothing left in its process group
