"""Run one notebook top to bottom in this Python's own kernel; print what its check said.

Not a test: tests/kit/test_kit_exercises.py runs it with the student kit's interpreter
(``.venv/bin/python run_notebook.py NOTEBOOK``), so the notebook meets exactly the
packages the kit installed. It prints one JSON object: the first error a cell raised
(or null) and the text of the cell that calls ``check(...)``.
"""

import json
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

path = Path(sys.argv[1]).resolve()
nb = nbformat.read(path, as_version=4)
client = NotebookClient(nb, timeout=240, kernel_name="python3",
                        resources={"metadata": {"path": str(path.parent)}})
error = None
try:
    client.execute()
except CellExecutionError as exc:
    error = str(exc)[-3000:]
said = []
for cell in nb.cells:
    if cell.cell_type == "code" and "check(" in cell.source:
        for output in cell.get("outputs", []):
            said.append(output.get("text") or output.get("data", {}).get("text/plain", ""))
print(json.dumps({"error": error, "check": "\n".join(said)}))
