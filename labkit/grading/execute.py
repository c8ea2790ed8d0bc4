"""Run one notebook top to bottom in a fresh kernel, in its own process (``labkit grade``).

A broken cell does not stop the run (``allow_errors``), and a cell that runs past the
timeout is interrupted, so the following cells still execute. The executed notebook is
written back for the grader to read which cells failed.
"""

from __future__ import annotations

import json
import sys

import nbformat
from nbclient import NotebookClient


def main() -> None:
    request = json.loads(sys.stdin.read())
    nb = nbformat.read(request["notebook"], as_version=4)  # type: ignore[no-untyped-call]
    client = NotebookClient(
        nb,
        timeout=int(request["cell_timeout"]),
        startup_timeout=60,
        kernel_name="python3",
        allow_errors=True,
        interrupt_on_timeout=True,
        resources={"metadata": {"path": request["cwd"]}},
    )
    client.execute()
    nbformat.write(nb, request["out"])  # type: ignore[no-untyped-call]
