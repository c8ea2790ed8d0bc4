"""The grader reads a notebook's code cells without nbformat, and agrees with nbformat."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from gradingkit import SOLUTIONS

from labkit.grading.grade import code_cells


def test_every_solution_notebook_reads_as_nbformat_reads_it() -> None:
    for path in sorted(SOLUTIONS.glob("ex*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        expected = [(i, c.source) for i, c in enumerate(nb.cells) if c.cell_type == "code"]
        assert code_cells(path) == expected, path.name


def test_sources_saved_as_lists_of_lines_are_joined(tmp_path: Path) -> None:
    path = tmp_path / "ex01_x.ipynb"
    cells = [
        {"cell_type": "markdown", "source": ["# title\n"], "metadata": {}},
        {"cell_type": "code", "source": ["x = 1\n", "y = 2"], "metadata": {}, "outputs": []},
    ]
    path.write_text(
        json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells})
    )
    assert code_cells(path) == [(1, "x = 1\ny = 2")]


def test_an_old_notebook_goes_through_nbformat(tmp_path: Path) -> None:
    old = nbformat.v3.new_notebook(
        worksheets=[nbformat.v3.new_worksheet(cells=[nbformat.v3.new_code_cell(input="z = 3")])]
    )
    path = tmp_path / "ex01_old.ipynb"
    path.write_text(nbformat.writes(old, version=3))
    assert code_cells(path) == [(0, "z = 3")]


@pytest.mark.parametrize(
    "text",
    [
        "not json",  # a file that is not JSON at all
        '{"nbformat": 4, "cells": {}}',  # cells not a list
        '{"nbformat": 4, "cells": [1]}',  # a cell that is not an object
        '{"nbformat": 4, "cells": [{"cell_type": "code", "source": 7}]}',  # source not text
    ],
)
def test_a_broken_notebook_raises(tmp_path: Path, text: str) -> None:
    path = tmp_path / "ex01_bad.ipynb"
    path.write_text(text)
    with pytest.raises(ValueError):
        code_cells(path)
