"""Maintainers' tool: rebuild a lesson's ``.ipynb`` from its paired ``.py`` and execute it.

``python -m labkit.nbtools refresh notebooks/04_job_table.py`` (or ``make notebook
NB=04_job_table``). The stored outputs always come from a real run of the current code;
nobody edits an output by hand.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


def refresh(py_path: Path, timeout: int = 120) -> float:
    """Write ``<name>.ipynb`` from ``<name>.py``, executed in the notebook's folder."""
    # jupytext ships no type information (no py.typed, no stubs package).
    import jupytext  # type: ignore[import-untyped]
    from nbclient import NotebookClient

    nb = jupytext.read(py_path)
    nb.metadata["kernelspec"] = KERNELSPEC
    nb.metadata["language_info"] = {"name": "python"}
    started = time.perf_counter()
    NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        # Widget state holds ids that change every run: keep it out of the stored file.
        store_widget_state=False,
        record_timing=False,
        resources={"metadata": {"path": str(py_path.parent.resolve())}},
    ).execute()
    elapsed = time.perf_counter() - started
    nb.metadata["language_info"] = {"name": "python"}
    # Stable cell ids keep a re-run of unchanged code byte-identical in git.
    for index, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{index:03d}"
        if cell.cell_type == "code":
            cell.outputs = _coalesce_streams(cell.outputs)
            _stable_widget_ids(cell.outputs, f"cell-{index:03d}")
    jupytext.write(nb, py_path.with_suffix(".ipynb"))
    return elapsed


def _coalesce_streams(outputs: list[Any]) -> list[Any]:
    """Join adjacent chunks of one stream: how the kernel flushed stdout is not content."""
    merged: list[Any] = []
    for out in outputs:
        previous = merged[-1] if merged else None
        if (
            out.get("output_type") == "stream"
            and previous is not None
            and previous.get("output_type") == "stream"
            and previous.get("name") == out.get("name")
        ):
            previous["text"] = "".join(previous["text"]) + "".join(out["text"])
        else:
            merged.append(out)
    return merged


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def _stable_widget_ids(outputs: list[Any], prefix: str) -> None:
    """Name each displayed widget after its cell: the kernel's random model id is noise.

    The widget state is not stored (``store_widget_state=False``), so the id points at
    nothing either way; a fixed one keeps re-runs byte-identical.
    """
    count = 0
    for out in outputs:
        view = out.get("data", {}).get(WIDGET_VIEW)
        if isinstance(view, dict) and "model_id" in view:
            view["model_id"] = f"{prefix}-widget-{count}"
            count += 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labkit.nbtools")
    sub = parser.add_subparsers(dest="command", required=True)
    cmd = sub.add_parser("refresh", help="rebuild and execute notebooks from their .py files")
    cmd.add_argument("paths", nargs="+", type=Path)
    args = parser.parse_args(argv)
    for path in args.paths:
        path = path.with_suffix(".py")
        elapsed = refresh(path)
        print(f"{path.with_suffix('.ipynb')}: executed in {elapsed:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
