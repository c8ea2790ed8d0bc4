"""A fresh, predictable folder for a lesson's or a demo's files.

Notebooks print paths, so their files live at a fixed relative place
(``.labkit-scratch/<name>``) instead of a random temporary directory: a re-run prints
the same text.
"""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(".labkit-scratch")


def fresh_dir(name: str, root: Path | str | None = None) -> Path:
    """Empty (or create) ``<root>/<name>`` and return it as a relative path."""
    if not name or "/" in name or name.startswith("."):
        raise ValueError(f"scratch folder name must be a plain name, not {name!r}")
    folder = Path(root or ROOT) / name
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    return folder
