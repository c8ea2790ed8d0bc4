"""Grading tests run in their own folder: %%writefile cells and check databases land there."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _own_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # An exercise's %%writefile cell writes into the working directory, and checks read
    # ns.workdir (the working directory by default): never the repository.
    monkeypatch.chdir(tmp_path)
