"""Grade notebooks with the student kit's own labkit, the way ``check()`` does; print JSON.

Not a test: tests/kit/test_kit_exercises.py and test_kit_untouched.py run it with the
kit's interpreter (``.venv/bin/python grade_in_kit.py NOTEBOOK...``). Each notebook's code cells run
in a namespace of their own, from the notebook's folder (``%%writefile`` cells write
there), then its exercise's public checks run on what they defined. One process for
every notebook: a kernel each would cost a second of start-up per exercise.
"""

import json
import os
import sys
from pathlib import Path

import nbformat

from labkit.grading.isolation.student_side import run_cells
from labkit.grading.student import run_public

said = {}
for arg in sys.argv[1:]:
    path = Path(arg).resolve()
    nb = nbformat.read(path, as_version=4)
    os.chdir(path.parent)
    values, notes = run_cells(
        [(i, c.source) for i, c in enumerate(nb.cells) if c.cell_type == "code"], 60
    )
    outcomes = run_public(path.name.split("_")[0], values)
    said[path.name] = {
        "notes": notes,
        "earned": sum(o.earned for o in outcomes),
        "possible": sum(o.points for o in outcomes),
        "statuses": sorted({str(o.status) for o in outcomes}),
    }
print(json.dumps(said))
