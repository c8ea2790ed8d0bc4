"""Maintainers' tool: rebuild a lesson's ``.ipynb`` from its paired ``.py`` and execute it.

``python -m labkit.notebook.refresh refresh notebooks/04_job_table.py`` (or ``make notebook
NB=04_job_table``). The stored outputs always come from a real run of the current code;
nobody edits an output by hand.

Every notebook is written the way JupyterLab saves it: through jupytext's contents
manager (``notebooks/jupytext.toml`` pairs each ``.ipynb`` with a ``.py``) and
``pre_save_hook``. So a student who opens a lesson and saves it (autosave included)
writes the very bytes that are committed, and ``git status`` stays clean.
``python -m labkit.notebook.refresh save PATH...`` puts a notebook in that form without running
it (the solutions, after editing their ``.py``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
LANGUAGE_INFO = {"name": "python"}


def pre_save_hook(model: dict[str, Any], **_kwargs: Any) -> None:
    """Jupyter's ``ContentsManager.pre_save_hook``: keep what the running kernel adds out.

    A kernel fills ``language_info`` with its exact Python version and JupyterLab marks
    cells ``trusted``; both describe the machine, not the lesson, and would make every
    save a change. A notebook without a kernelspec gets ``python3``.
    """
    if model.get("type") != "notebook" or not isinstance(model.get("content"), dict):
        return
    nb = model["content"]
    meta = nb.setdefault("metadata", {})
    meta.setdefault("kernelspec", dict(KERNELSPEC))
    info = meta.get("language_info")
    name = info.get("name") if isinstance(info, dict) else None
    meta["language_info"] = {"name": name or LANGUAGE_INFO["name"]}
    for cell in nb.get("cells", []):
        cell.get("metadata", {}).pop("trusted", None)


def save_like_jupyter(ipynb_path: Path) -> None:
    """Open and save ``ipynb_path`` (and its paired ``.py``) as JupyterLab would.

    The same contents manager (jupytext's), the same config file and ``pre_save_hook``
    that ``make lab`` runs: what this writes is what a save in the browser writes.
    """
    # jupytext ships no type information (no py.typed, no stubs package).
    from jupytext import TextFileContentsManager  # type: ignore[import-untyped]

    with warnings.catch_warnings():
        # jupyter_server warns that a hook given at construction "overrides" its default.
        warnings.simplefilter("ignore", UserWarning)
        manager = TextFileContentsManager(
            root_dir=str(ipynb_path.parent.resolve()), pre_save_hook=pre_save_hook
        )
    model = manager.get(ipynb_path.name, content=True)
    manager.save(model, ipynb_path.name)


def refresh(py_path: Path, timeout: int = 120) -> float:
    """Write ``<name>.ipynb`` from ``<name>.py``, executed in the notebook's folder."""
    import jupytext

    nb = jupytext.read(py_path)
    elapsed = execute(nb, py_path.parent, timeout=timeout)
    jupytext.write(nb, py_path.with_suffix(".ipynb"))
    save_like_jupyter(py_path.with_suffix(".ipynb"))
    return elapsed


def execute(
    nb: Any, folder: Path, env: dict[str, str] | None = None, timeout: int = 120
) -> float:
    """Run ``nb`` in place in a fresh kernel started in ``folder`` (with ``env`` added to
    the kernel's environment); the seconds it took. Outputs are made stable for git."""
    from nbclient import NotebookClient

    nb.metadata["kernelspec"] = KERNELSPEC
    nb.metadata["language_info"] = {"name": "python"}
    saved = {name: os.environ.get(name) for name in env or {}}
    os.environ.update(env or {})  # the kernel inherits the environment it starts in
    started = time.perf_counter()
    try:
        NotebookClient(
            nb,
            timeout=timeout,
            kernel_name="python3",
            # Widget state holds ids that change every run: keep it out of the stored file.
            store_widget_state=False,
            record_timing=False,
            resources={"metadata": {"path": str(Path(folder).resolve())}},
        ).execute()
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    elapsed = time.perf_counter() - started
    nb.metadata["language_info"] = {"name": "python"}
    # Stable cell ids keep a re-run of unchanged code byte-identical in git.
    for index, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{index:03d}"
        if cell.cell_type == "code":
            cell.outputs = _coalesce_streams(cell.outputs)
            _stable_widget_ids(cell.outputs, f"cell-{index:03d}")
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
    parser = argparse.ArgumentParser(prog="python -m labkit.notebook.refresh")
    sub = parser.add_subparsers(dest="command", required=True)
    cmd = sub.add_parser("refresh", help="rebuild and execute notebooks from their .py files")
    cmd.add_argument("paths", nargs="+", type=Path)
    save = sub.add_parser("save", help="write notebooks as a save in JupyterLab would")
    save.add_argument("paths", nargs="+", type=Path)
    args = parser.parse_args(argv)
    if args.command == "save":
        for path in args.paths:
            save_like_jupyter(path.with_suffix(".ipynb"))
            print(f"{path.with_suffix('.ipynb')}: saved as JupyterLab saves it")
        return 0
    for path in args.paths:
        path = path.with_suffix(".py")
        elapsed = refresh(path)
        print(f"{path.with_suffix('.ipynb')}: executed in {elapsed:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
