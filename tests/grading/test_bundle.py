"""The student kit: lessons, exercises and labkit, with no solution and no hidden check in it."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import nbformat
import pytest
from gradingkit import EXERCISES, HIDDEN, ROOT, SOLUTIONS

from labkit.grading import catalog
from labkit.grading.bundle import bundle
from labkit.grading.release import BEGIN, ReleaseError


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("kit") / "student-kit"
    bundle(ROOT, SOLUTIONS, out)
    return out


def test_the_kit_has_what_a_student_needs(kit: Path) -> None:
    assert {p.name for p in kit.iterdir()} >= {
        "labkit",
        "notebooks",
        "exercises",
        "pyproject.toml",
        "Makefile",
        "README.md",
    }
    lessons = sorted(p.name for p in (ROOT / "notebooks").glob("[0-9]*.ipynb"))
    assert sorted(p.name for p in (kit / "notebooks").glob("*.ipynb")) == lessons
    for path in EXERCISES.glob("ex*.ipynb"):  # the exercises exactly as released
        assert (kit / "exercises" / path.name).read_bytes() == path.read_bytes()
    assert (kit / "labkit" / "grading" / "exercises" / "ex01" / "checks.py").exists()  # public
    for lesson in (kit / "notebooks").glob("*.ipynb"):  # files a lesson reads beside it
        for target in re.findall(r"\.\./([\w./-]+\.\w+)", lesson.read_text()):
            assert (kit / target).exists(), f"{lesson.name} reads ../{target}"
    makefile = (kit / "Makefile").read_text()
    assert re.search(r"^lab: venv$", makefile, re.MULTILINE)
    assert "--notebook-dir=." in makefile  # lessons and exercises both reachable


def test_the_kit_has_no_solutions_and_no_hidden_checks_anywhere(kit: Path) -> None:
    names = {p.name for p in kit.rglob("*")}
    assert "solutions" not in names and "hidden" not in names and "tests" not in names
    hidden_defs = [
        f"def {c.run.__name__}(" for e in catalog.exercises() for c in catalog.hidden(e, HIDDEN)
    ]
    hidden_sources = [p.read_text() for p in HIDDEN.glob("ex*.py")]
    assert hidden_defs
    for path in (p for p in kit.rglob("*") if p.is_file()):
        text = path.read_text(errors="replace")
        if path.suffix == ".ipynb":
            nb = nbformat.read(path, as_version=4)
            text = "\n".join(c.source for c in nb.cells)
        assert BEGIN not in {line.strip() for line in text.splitlines()}, path
        assert not any(d in text for d in hidden_defs), path
        assert not any(src.strip() and src in text for src in hidden_sources), path


def test_each_exercise_says_how_many_hidden_checks_and_points(kit: Path) -> None:
    for exercise in catalog.exercises():
        hidden = catalog.hidden(exercise, HIDDEN)
        [path] = (kit / "exercises").glob(f"{exercise}_*.ipynb")
        nb = nbformat.read(path, as_version=4)
        note = next(c.source for c in nb.cells if c.get("id") == f"{exercise}-hidden-checks")
        assert f"{len(hidden)} hidden check" in note
        assert f"worth {sum(c.points for c in hidden)} points" in note
        # the note sits just before the cell that runs the checks
        at = [c.get("id") for c in nb.cells].index(f"{exercise}-hidden-checks")
        assert f'check("{exercise}")' in nb.cells[at + 1].source


def test_a_kit_that_would_ship_an_answer_is_refused_and_not_written(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "labkit", repo / "labkit", ignore=shutil.ignore_patterns("__pycache__"))
    (repo / "notebooks").mkdir()
    (repo / "labkit" / "leak.py").write_text(f"def f():\n    {BEGIN}\n    return 42\n")
    with pytest.raises(ReleaseError, match="would ship an answer"):
        bundle(repo, SOLUTIONS, tmp_path / "kit")
    assert not (tmp_path / "kit").exists()


def test_the_kit_is_not_written_into_the_repository_or_over_a_folder(tmp_path: Path) -> None:
    with pytest.raises(ReleaseError, match="inside the repository"):
        bundle(ROOT, SOLUTIONS, ROOT / "student-kit")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("keep me")
    with pytest.raises(ReleaseError, match="not empty"):
        bundle(ROOT, SOLUTIONS, tmp_path / "full")
    assert (tmp_path / "full" / "x").read_text() == "keep me"
