"""``labkit release``: exercises/ is exactly what release makes from solutions/."""

from __future__ import annotations

import json
from pathlib import Path

import jupytext
import nbformat
import pytest
from gradingkit import EXERCISES, SOLUTIONS

from labkit.cli import main
from labkit.grading import catalog
from labkit.grading.release import BEGIN, ReleaseError, release, strip_solution


def test_committed_exercises_equal_a_fresh_release(tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    assert main(["release", str(out), "--solutions", str(SOLUTIONS)]) == 0
    made = {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    committed = {
        str(p.relative_to(EXERCISES)): p.read_bytes()
        for p in EXERCISES.rglob("*")
        if p.is_file() and ".ipynb_checkpoints" not in p.parts and ".labkit-scratch" not in p.parts
    }
    assert sorted(made) == sorted(committed), "run `make release` and commit exercises/"
    assert any(name.startswith("pt_BR/") for name in made), "no Portuguese edition released"
    for name, data in made.items():
        assert data == committed[name], f"exercises/{name} is stale: run `make release`"


def test_every_exercise_with_checks_has_a_solution_and_a_stub() -> None:
    ids = [p.name[:4] for p in sorted(SOLUTIONS.glob("ex*.ipynb"))]
    assert ids == catalog.exercises()
    assert len(ids) >= 6


def test_bundle_has_no_solutions_no_hidden_checks_and_stubs_keep_docstrings(tmp_path: Path) -> None:
    release(SOLUTIONS, tmp_path)
    names = sorted(p.name for p in SOLUTIONS.glob("ex*.ipynb"))
    assert sorted(p.name for p in tmp_path.glob("ex*.ipynb")) == names
    assert sorted(p.name for p in (tmp_path / "pt_BR").glob("ex*.ipynb")) == names
    # Both editions: the Portuguese one is built from the same stubs.
    for path in [*tmp_path.glob("ex*.ipynb"), *(tmp_path / "pt_BR").glob("ex*.ipynb")]:
        text = path.read_text()
        assert BEGIN not in text and "END SOLUTION" not in text
        nb = nbformat.read(path, as_version=4)
        number = int(path.name[2:4])
        code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
        assert f'raise NotImplementedError("Exercise {number}")' in code
        assert '"""' in code  # the contracts (docstrings) stay
        assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")
        # no line of a solution region survives, unless the same line is also outside one
        source = nbformat.read(SOLUTIONS / path.name, as_version=4)
        released = [c for c in nb.cells if not c.get("id", "").endswith("-hidden-checks")]
        for sol, out in zip(source.cells, released, strict=True):
            if sol.cell_type != "code":
                continue
            inside, solution, outside = False, set(), set()
            for line in sol.source.splitlines():
                marker = line.strip()
                if marker in (BEGIN, "### END SOLUTION"):
                    inside = marker == BEGIN
                elif marker:
                    (solution if inside else outside).add(marker)
            shipped = {line.strip() for line in out.source.splitlines()}
            assert not (solution - outside) & shipped, f"{path.name} ships solution code"
        # none of the hidden checks' names is revealed
        for hidden in (SOLUTIONS / "hidden").glob("*.py"):
            for line in hidden.read_text().splitlines():
                if line.startswith("def "):
                    assert line.split("(")[0][4:] not in text


def test_py_sources_and_notebooks_are_in_sync() -> None:
    for py in sorted(SOLUTIONS.glob("ex*.py")):
        from_py = [c.source for c in jupytext.read(py).cells]
        from_nb = [c.source for c in nbformat.read(py.with_suffix(".ipynb"), as_version=4).cells]
        assert from_py == from_nb, f"{py.name} and its .ipynb differ: jupytext --sync {py}"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        # a region left open
        ("def f():\n    ### BEGIN SOLUTION\n    return 1\n", "never closed"),
        # a region at the top level would raise when the cell runs, not when called
        ("### BEGIN SOLUTION\nX = 1\n### END SOLUTION\n", "inside a function"),
        # an END without a BEGIN
        ("def f():\n    return 1\n    ### END SOLUTION\n", "without a"),
    ],
)
def test_bad_markers_are_refused_with_the_line(source: str, message: str) -> None:
    with pytest.raises(ReleaseError, match=message):
        strip_solution(source, 1)


def test_stub_keeps_indentation_and_the_exercise_number() -> None:
    source = (
        'def f():\n    """Doc."""\n    ### BEGIN SOLUTION\n    return 42\n    ### END SOLUTION\n'
    )
    assert strip_solution(source, 7) == (
        'def f():\n    """Doc."""\n    raise NotImplementedError("Exercise 7")'
    )


def test_release_refuses_a_notebook_without_a_check_cell(tmp_path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION"
        )
    ]
    (tmp_path / "src").mkdir()
    nbformat.write(nb, tmp_path / "src" / "ex09_demo.ipynb")
    with pytest.raises(ReleaseError, match='check\\("ex09"\\)'):
        release(tmp_path / "src", tmp_path / "out")
    assert main(["release", str(tmp_path / "out"), "--solutions", str(tmp_path / "src")]) == 2
    assert not (tmp_path / "out" / "ex09_demo.ipynb").exists()
    assert json.loads(nbformat.writes(nb))  # the source itself was left alone


def test_release_refuses_to_write_over_the_solutions(tmp_path: Path) -> None:
    solutions = tmp_path / "solutions"
    solutions.mkdir()
    source = next(SOLUTIONS.glob("ex01_*.ipynb"))
    (solutions / source.name).write_bytes(source.read_bytes())
    with pytest.raises(ReleaseError, match="solutions folder"):
        release(solutions, solutions / ".." / "solutions")
    assert (solutions / source.name).read_bytes() == source.read_bytes()
