"""What every lesson notebook must be, beyond nbval's output comparison.

- each ``notebooks/NN_*.ipynb`` has its jupytext ``.py`` and the two hold the same cells;
- every code cell has stored outputs (a cell that truly prints nothing carries the tag
  ``no-output``; prefer cells that show something);
- a title cell first, a closing "What you should see" table and an EN/PT-BR glossary;
- the first cell has a "Resumo" in Portuguese and says how long the lesson takes to run;
  the lesson links the glossary and the next lesson (the last lesson has no next), and
  never calls a source article "seed NNN" (students never see those files, and "seed"
  means the random seed printed in the same cells).

nbval itself (strict re-execution with tests/notebooks/sanitize.cfg) runs from
``make test``; ``make check-one NB=...`` runs it for one lesson.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import jupytext
import pytest
from studentkit import as_a_kernel_leaves_it

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
                f"{path.name} cell {n} prints a temporary path: "
                "use labkit.notebook.scratch.fresh_dir"
            )


#: The closing lesson, which has no next lesson to link.
LAST_LESSON = "16_"
SEED_FILE = re.compile(r"\bseeds?\s+0\d\d", re.IGNORECASE)


@pytest.mark.parametrize("path", IPYNBS, ids=ids)
def test_lesson_opens_with_a_resumo_and_its_run_time(path):
    first = jupytext.read(path).cells[0].source
    assert "**Resumo.**" in first, (
        f"{path.name}: the first cell needs a '> **Resumo.** ...' in Brazilian Portuguese "
        "(3-5 lines: what you will see) right after the title and promise"
    )
    assert "Run time:" in first, f"{path.name}: say how long the lesson takes ('Run time: ...')"


@pytest.mark.parametrize("path", IPYNBS, ids=ids)
def test_lesson_links_the_glossary_and_the_next_lesson(path):
    markdown = "\n".join(c.source for c in jupytext.read(path).cells if c.cell_type == "markdown")
    assert "(glossary.md)" in markdown, f"{path.name}: link [Glossary / Glossário](glossary.md)"
    if not path.stem.startswith(LAST_LESSON):
        assert re.search(r"\[Next: [^]]+\]\(\d\d_[a-z0-9_]+\.ipynb\)", markdown), (
            f"{path.name}: end with a link to the next lesson, e.g. "
            "[Next: 12 · Async request-reply](12_request_reply.ipynb)"
        )


@pytest.mark.parametrize("path", IPYNBS, ids=ids)
def test_no_lesson_calls_an_article_a_seed(path):
    for n, cell in enumerate(jupytext.read(path).cells):
        found = SEED_FILE.search(cell.source)
        assert found is None, (
            f"{path.name} cell {n} says {found.group(0)!r}: name the article by its short "
            "name (the cron article, the ERP article, the async-jobs lesson, the "
            "Celery-in-production article; see README, Sources)"
        )


def test_the_glossary_is_searchable_both_ways():
    text = (NOTEBOOKS / "glossary.md").read_text()
    assert "## English → Português" in text and "## Português → English" in text
    tables = text.split("## Português → English")
    english = [r.split("|")[1].strip() for r in tables[0].splitlines() if r.startswith("| ")][1:]
    portuguese = [r.split("|")[1].strip() for r in tables[1].splitlines() if r.startswith("| ")][1:]
    assert len(english) == len(portuguese) > 50
    for column in (english, portuguese):
        assert column == sorted(column, key=_folded), "each table is sorted by its first column"


def _folded(term: str) -> str:
    return unicodedata.normalize("NFKD", term).encode("ascii", "ignore").decode().lower()


# Opening and saving a notebook in JupyterLab must leave `git status` clean. The lab
# saves through jupytext's contents manager (the folder's jupytext.toml pairs .ipynb and
# .py) with the pre_save_hook `make lab` configures; here the same manager, configured
# from the same flag, gets and saves every committed notebook in a copy of its folder.
REPO = NOTEBOOKS.parent
ALL_NOTEBOOKS = sorted(
    p for folder in ("notebooks", "solutions", "exercises")
    for p in (REPO / folder).glob("*.ipynb")
)
ALL_IDS = [f"{p.parent.name}/{p.stem}" for p in ALL_NOTEBOOKS]


def _lab_contents_manager(root: Path):
    from jupytext import TextFileContentsManager

    from labkit.notebook.server import SERVER_FLAGS

    (hook,) = [f.split("=", 1)[1] for f in SERVER_FLAGS if "pre_save_hook" in f]
    # An import string, resolved as Jupyter resolves the flag (at construction).
    return TextFileContentsManager(root_dir=str(root), pre_save_hook=hook)


@pytest.mark.parametrize("path", ALL_NOTEBOOKS, ids=ALL_IDS)
def test_saving_in_jupyterlab_writes_the_committed_bytes(path, tmp_path):
    import shutil

    folder = tmp_path / path.parent.name
    shutil.copytree(path.parent, folder, ignore=shutil.ignore_patterns(".*", "__pycache__"))
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    manager = _lab_contents_manager(tmp_path)
    rel = f"{folder.name}/{path.name}"
    model = manager.get(rel, content=True)
    as_a_kernel_leaves_it(model["content"])
    manager.save(model, rel)
    after = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    changed = sorted(n for n in after if before.get(n) != after[n])
    assert not changed, (
        f"saving {rel} in JupyterLab would rewrite {changed}: write notebooks with "
        f"`python -m labkit.notebook.refresh save {rel}` (make notebook does) and commit the result"
    )


@pytest.mark.parametrize("path", ALL_NOTEBOOKS, ids=ALL_IDS)
def test_every_notebook_names_the_python3_kernel(path):
    nb = jupytext.read(path)
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3", (
        f"{path.parent.name}/{path.name} has no python3 kernelspec, so JupyterLab asks "
        "which kernel to start: `python -m labkit.notebook.refresh save` adds it"
    )
