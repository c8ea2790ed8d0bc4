"""labkit.notebook.server, behind `make lab`: the URL it shows is the one Jupyter serves.

Jupyter moves to the next free port when the asked one is taken, so the banner is read
from the server's runtime file; and stopping the lab ends its whole process group.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request

import pytest

from labkit.notebook.server import start_lab

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


def test_make_labs_banner_names_the_served_url_and_sigterm_stops_everything(tmp_path):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    runtime = tmp_path / "runtime"
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(tmp_path / "config"),
               JUPYTER_RUNTIME_DIR=str(runtime))
    # What `make lab` runs on a machine without a display.
    launcher = subprocess.Popen(
        [sys.executable, "-m", "labkit.notebook.server", f"--notebook-dir={tmp_path}",
         f"--port={port}"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        start_new_session=True,
    )
    try:
        assert launcher.stdout is not None
        banner = ""
        for line in launcher.stdout:
            banner += line
            if "?token=" in line:
                break
        (info_file,) = runtime.glob("jpserver-*.json")
        info = json.loads(info_file.read_text())
        assert info["port"] != port  # Jupyter moved off the port we held...
        url = f"{info['url']}lab/tree/notebooks/00_start_here.ipynb?token={info['token']}"
        assert url in banner, banner  # ...and the banner says where it went
        assert f":{port}/" not in banner
        server_pid = info["pid"]
        launcher.send_signal(signal.SIGTERM)
        assert launcher.wait(60) == 0
    finally:
        taken.close()
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
            launcher.wait()
    with pytest.raises(ProcessLookupError):
        os.killpg(server_pid, 0)  # the server's group (and its kernels) went with it
