"""What every lesson notebook must be, beyond nbval's output comparison.

- each ``notebooks/NN_*.ipynb`` has its jupytext ``.py`` and the two hold the same cells;
- every code cell has stored outputs (a cell that truly prints nothing carries the tag
  ``no-output``; prefer cells that show something);
- a title cell first, a closing "What you should see" table and an EN/PT-BR glossary.

nbval itself (strict re-execution with tests/notebooks/sanitize.cfg) runs from
``make test``; ``make check-one NB=...`` runs it for one lesson.
"""

from __future__ import annotations

import re
from pathlib import Path

import jupytext
import pytest

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
LESSON = re.compile(r"^\d\d_[a-z0-9_]+$")
NO_OUTPUT_TAG = "no-output"


def _lessons(suffix: str) -> list[Path]:
    return sorted(p for p in NOTEBOOKS.glob(f"*{suffix}") if LESSON.match(p.stem))


IPYNBS = _lessons(".ipynb")
ids = [p.stem for p in IPYNBS]


def _cells(path: Path) -> list[tuple[str, str]]:
    return [(c.cell_type, c.source.strip()) for c in jupytext.read(path).cells]


def test_every_lesson_is_a_pair():
    stems_py = {p.stem for p in _lessons(".py")}
    stems_nb = {p.stem for p in IPYNBS}
    assert stems_py == stems_nb, (
        f".py without .ipynb: {sorted(stems_py - stems_nb)} (run make notebook NB=...); "
        f".ipynb without .py: {sorted(stems_nb - stems_py)}"
    )


@pytest.mark.parametrize("path", IPYNBS, ids=ids)
def test_py_and_ipynb_hold_the_same_cells(path):
    from_py = _cells(path.with_suffix(".py"))
    from_nb = _cells(path)
    for n, (a, b) in enumerate(zip(from_py, from_nb, strict=False)):
        assert a == b, (
            f"{path.name} cell {n} differs from its .py; edit the .py and run "
            f"`make notebook NB={path.stem}`\n.py:    {a[1][:200]!r}\n.ipynb: {b[1][:200]!r}"
        )
    assert len(from_py) == len(from_nb), f"{path.name}: cell count differs from its .py"


@pytest.mark.parametrize("path", IPYNBS, ids=ids)
def test_every_code_cell_has_stored_outputs(path):
    nb = jupytext.read(path)
    bare = [
        n
        for n, cell in enumerate(nb.cells)
        if cell.cell_type == "code"
        and cell.source.strip()
        and not cell.get("outputs")
        and NO_OUTPUT_TAG not in cell.metadata.get("tags", [])
    ]
    assert not bare, (
        f"{path.name}: code cells {bare} have no stored output. Print the state the cell "
        f"changes, or tag a cell that truly shows nothing with '{NO_OUTPUT_TAG}', then "
        f"`make notebook NB={path.stem}`"
    )
    unexecuted = [
        n for n, c in enumerate(nb.cells) if c.cell_type == "code" and c.execution_count is None
        and c.source.strip()
    ]
    assert not unexecuted, f"{path.name}: cells {unexecuted} were never executed"


@pytest.mark.parametrize("path", IPYNBS, ids=ids)
def test_notebook_has_title_closing_table_and_glossary(path):
    cells = jupytext.read(path).cells
    first = cells[0]
    assert first.cell_type == "markdown" and first.source.lstrip().startswith("# "), (
        f"{path.name}: the first cell must be a markdown '# Title' with a one-line promise"
    )
    markdown = "\n".join(c.source for c in cells if c.cell_type == "markdown").lower()
    assert "what you should see" in markdown, f"{path.name}: no 'What you should see' table"
    assert "glossary" in markdown, f"{path.name}: no EN/PT-BR glossary at the end"


@pytest.mark.parametrize("path", IPYNBS, ids=ids)
def test_outputs_carry_no_temp_paths_or_errors(path):
    nb = jupytext.read(path)
    for n, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            if "raises-exception" not in cell.metadata.get("tags", []):
                assert out.get("output_type") != "error", f"{path.name} cell {n} stored an error"
            text = out.get("text", "") or "".join(out.get("data", {}).get("text/plain", ""))
            assert "/tmp/" not in text and "pytest-of-" not in text, (
                f"{path.name} cell {n} prints a temporary path: use labkit.scratch.fresh_dir"
            )
