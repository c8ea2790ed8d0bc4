"""The student kit: lessons, exercises and labkit, with no solution and no hidden check in it."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import nbformat
import pytest
from gradingkit import EXERCISES, HIDDEN, ROOT, SOLUTIONS
from studentkit import language_make_picks

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
    # The lessons byte for byte, with their pairs and jupytext's settings: tests/kit runs
    # these very files, and saving one in the kit writes what it had.
    for path in (ROOT / "notebooks").glob("*"):
        if path.suffix in (".ipynb", ".py", ".md", ".toml"):
            assert (kit / "notebooks" / path.name).read_bytes() == path.read_bytes(), path.name
    sanitize = ROOT / "tests" / "notebooks" / "sanitize.cfg"
    assert (kit / "sanitize.cfg").read_bytes() == sanitize.read_bytes()
    for path in EXERCISES.glob("ex*.ipynb"):  # the exercises exactly as released
        assert (kit / "exercises" / path.name).read_bytes() == path.read_bytes()
    assert (kit / "labkit" / "grading" / "exercises" / "ex01" / "checks.py").exists()  # public
    for lesson in (kit / "notebooks").glob("*.ipynb"):  # files a lesson reads beside it
        for target in re.findall(r"\.\./([\w./-]+\.\w+)", lesson.read_text()):
            assert (kit / target).exists(), f"{lesson.name} reads ../{target}"
    # Both editions, the Portuguese one byte for byte as built, with no catalogs.
    for path in (ROOT / "notebooks" / "pt_BR").glob("*.ipynb"):
        assert (kit / "notebooks" / "pt_BR" / path.name).read_bytes() == path.read_bytes()
    for path in (EXERCISES / "pt_BR").glob("ex*.ipynb"):
        assert (kit / "exercises" / "pt_BR" / path.name).read_bytes() == path.read_bytes()
    assert len(list((kit / "exercises" / "pt_BR").glob("ex*.ipynb"))) == len(catalog.exercises())
    assert not (kit / "notebooks" / "locale").exists()
    makefile = (kit / "Makefile").read_text()
    assert re.search(r"^lab: venv$", makefile, re.MULTILINE)
    assert "--notebook-dir=." in makefile  # lessons and exercises both reachable
    assert "labkit.notebook.server" in makefile  # the real URL, and saves that change nothing


def test_the_kit_is_a_repository_whose_one_commit_is_the_kit(kit: Path) -> None:
    def git(*argv: str) -> str:
        return subprocess.run(["git", *argv], cwd=kit, text=True, capture_output=True,
                              check=True).stdout

    assert git("rev-list", "--count", "HEAD").strip() == "1"
    assert git("status", "--porcelain", "--untracked-files=all") == ""
    tracked = set(git("ls-files").split())
    assert {".gitignore", "Makefile", "notebooks/00_start_here.ipynb",
            "exercises/ex01_keys.ipynb"} <= tracked
    ignored = (kit / ".gitignore").read_text()
    for written in (".venv/", ".labkit-scratch/", "*.db"):  # what running the lab writes
        assert written in ignored


#: Paths under the repository's own folders, as a lesson would name one in backquotes.
_PATH = re.compile(r"`((?:tests|solutions|bench|docs|labkit|notebooks|exercises|ops)/[\w./-]+)`")


def test_no_lesson_names_a_file_or_make_target_the_kit_lacks(kit: Path) -> None:
    targets = set(re.findall(r"^([\w-]+):", (kit / "Makefile").read_text(), re.MULTILINE))
    for lesson in sorted((kit / "notebooks").glob("*.ipynb")):
        text = "\n".join(c.source for c in nbformat.read(lesson, as_version=4).cells)
        for path in _PATH.findall(text):
            assert (kit / path).exists(), f"{lesson.name} names {path}, which the kit lacks"
        missing = re.findall(r"(?<![\w./])((?:tests|solutions|bench)/[\w./-]+)", text)
        assert not missing, f"{lesson.name} points at {missing}: the kit has no such folder"
        # A command in backquotes or on a line of a code block: `make check-one NB=...`
        for target in re.findall(r"(?:`|^)make ([a-z][\w-]*)", text, re.MULTILINE):
            assert target in targets, f"{lesson.name} says `make {target}`: not in the kit"


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


def test_a_kit_whose_git_commit_fails_is_whole_and_says_it_is_no_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from labkit.grading import bundle as bundling

    real_run = subprocess.run

    def run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[bytes]:
        if argv[0] == "git" and "commit" in argv:  # a git that refuses, say with no space
            raise subprocess.CalledProcessError(128, argv, stderr=b"fatal: cannot commit")
        return real_run(argv, **kwargs)  # type: ignore[call-overload, no-any-return]

    monkeypatch.setattr(bundling.subprocess, "run", run)
    out = tmp_path / "kit"
    bundle(ROOT, SOLUTIONS, out)
    assert not (out / ".git").exists()
    assert (out / "notebooks" / "00_start_here.ipynb").exists() and (out / "Makefile").exists()
    said = capsys.readouterr().err
    assert "not a git repository: git commit failed: fatal: cannot commit" in said


def test_a_kit_made_in_portuguese_opens_portuguese_unless_asked_otherwise(
    kit: Path, tmp_path: Path
) -> None:
    unset = {"LABKIT_LANG": ""}  # as on a student's machine: only LANG says anything
    assert language_make_picks(kit, {**unset, "LANG": "C.UTF-8"}) == ["en", "notebooks"]
    assert language_make_picks(kit, {**unset, "LANG": "pt_BR.UTF-8"}) == [
        "pt_BR",
        "notebooks/pt_BR",
    ]
    out = tmp_path / "kit-pt"
    bundle(ROOT, SOLUTIONS, out, lang="pt_BR")
    assert language_make_picks(out, {**unset, "LANG": "C.UTF-8"}) == ["pt_BR", "notebooks/pt_BR"]
    assert language_make_picks(out, {"LANG": "C.UTF-8", "LABKIT_LANG": "en"}) == ["en", "notebooks"]
    with pytest.raises(ReleaseError, match="no edition in 'fr'"):
        bundle(ROOT, SOLUTIONS, tmp_path / "kit-fr", lang="fr")
