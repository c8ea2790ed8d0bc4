"""``make check``'s kernels listen on Unix sockets of their own (labkit.notebook.nbval_kernels).

A lesson's kernel given TCP ports could lose one to any process binding port 0 at the
wrong moment: a CI run failed so, its kernel alive and silent for 60 seconds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nbformat

PROBE = """\
import json, os
from ipykernel.kernelapp import IPKernelApp
app = IPKernelApp.instance()
with open(os.environ["PROBE_OUT"], "w") as out:
    json.dump({"transport": app.transport, "ip": app.ip, "cwd": os.getcwd()}, out)
print(app.transport)
"""


def test_a_lesson_kernel_listens_on_its_own_unix_sockets_and_leaves_none(tmp_path: Path) -> None:
    lessons = tmp_path / "lessons"
    lessons.mkdir()
    cell = nbformat.v4.new_code_cell(PROBE, execution_count=1)
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="ipc\n")]
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), lessons / "probe.ipynb")
    probe = tmp_path / "probe.json"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p",
         "labkit.notebook.nbval_kernels", "--nbval", "--nbval-current-env", "-q",
         str(lessons / "probe.ipynb")],
        cwd=tmp_path, env={**_env(), "PROBE_OUT": str(probe)}, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    seen = json.loads(probe.read_text())
    assert seen["transport"] == "ipc"
    assert Path(seen["cwd"]) == lessons  # nbval still starts the kernel beside its notebook
    prefix = Path(seen["ip"])
    assert prefix.name.startswith("nbval-") and prefix.parent != lessons
    # jupyter_client removed the kernel's socket files at shutdown; none landed in the
    # lessons' folder (a student's git status would show them).
    assert sorted(prefix.parent.glob(prefix.name + "*")) == []
    assert sorted(p.name for p in lessons.iterdir()) == ["probe.ipynb"]


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "PYTEST_XDIST_WORKER"}
