"""``labkit release --bundle DIR``: everything a student needs, and no answers.

The kit holds the lessons (``notebooks/``, and ``ops/`` which they read), the exercises
as released (``exercises/``, stubs only), the ``labkit`` package (public checks only:
hidden checks live in the instructor's ``solutions/hidden/``), ``pyproject.toml`` and
``environment.yml`` to install it, a Makefile whose ``make lab`` opens JupyterLab where
both folders are reachable, and a short README (both kept as files in ``templates/``).
The lessons keep their paired ``.py`` and ``jupytext.toml``, and the kit gets nbval's
sanitize file, so saving a lesson in the kit's JupyterLab writes the bytes it had and
``make check-one`` compares outputs as CI does. The kit is a git repository with one
commit (``git diff`` shows a student their own work) and a ``.gitignore``. It never
copies ``solutions/``, ``tests/`` (the zoo of wrong answers is built from the right
ones) or ``bench/``. After writing, every file is searched for solution markers
and for the hidden checks' names, and the bundle is refused if one is found.

nbgrader's "release" and otter-grader's "assign" produce the same kind of student
folder; this one is a plain directory an instructor can zip or push as its own repo.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

from labkit.grading.course import hidden_of
from labkit.grading.release import BEGIN, END, ReleaseError, release
from labkit.lang import ENGLISH, LANGUAGES

#: Folders next to notebooks/ that lessons read from.
LESSON_FOLDERS = ("ops",)
_SKIP_NAMES = ("__pycache__", "*.pyc", ".ipynb_checkpoints", ".labkit-scratch", "*.db", "*.db-*")
#: What the kit leaves out of notebooks/: the catalogs the Portuguese edition is built
#: from (the kit holds the built edition, notebooks/pt_BR/).
_SKIP_LESSON_NAMES = (*_SKIP_NAMES, "locale")

#: The kit's own Makefile, README and .gitignore, kept as files beside this module.
TEMPLATES = resources.files("labkit.grading").joinpath("templates")
#: What legitimately varies between runs of a lesson (nbval's format), kept with the tests.
SANITIZE = Path("tests", "notebooks", "sanitize.cfg")
#: Who the kit's first commit is by: no git identity is needed on the instructor's machine.
_GIT_AUTHOR = ("-c", "user.name=Resilient Jobs Lab", "-c", "user.email=lab@localhost")


def _hidden_names(hidden_dir: Path) -> list[str]:
    names = []
    for path in sorted(hidden_dir.glob("ex*.py")):
        names += re.findall(r"^def (\w+)\(", path.read_text(encoding="utf-8"), re.MULTILINE)
    return names


def bundle(repo: Path, solutions: Path, out: Path, lang: str = ENGLISH) -> list[Path]:
    """Write the student kit into ``out`` (missing or empty); return the top-level entries.

    The kit holds both editions (``notebooks/pt_BR/``, ``exercises/pt_BR/``); ``lang``
    is the one its ``make lab`` opens and its ``check()`` speaks when ``LANG`` does not
    ask for Portuguese (``LABKIT_LANG`` always wins)."""
    if lang not in LANGUAGES:
        raise ReleaseError(f"no edition in {lang!r}: the lab has {', '.join(LANGUAGES)}")
    repo, out = Path(repo).resolve(), Path(out).resolve()
    if out.exists() and any(out.iterdir()):
        raise ReleaseError(f"{out} is not empty: write the student kit into a new folder")
    if out.is_relative_to(repo):
        raise ReleaseError(f"{out} is inside the repository; choose a folder outside it")
    out.mkdir(parents=True, exist_ok=True)
    shutil.copytree(repo / "labkit", out / "labkit", ignore=shutil.ignore_patterns(*_SKIP_NAMES))
    lessons = repo / "notebooks"
    shutil.copytree(
        lessons, out / "notebooks", ignore=shutil.ignore_patterns(*_SKIP_LESSON_NAMES)
    )
    release(solutions, out / "exercises")
    for name in ("pyproject.toml", "environment.yml", "compose.yaml"):
        if (repo / name).exists():
            shutil.copyfile(repo / name, out / name)
    for name in LESSON_FOLDERS:  # files the lessons read (../ops/alerts.yml)
        if (repo / name).is_dir():
            shutil.copytree(repo / name, out / name, ignore=shutil.ignore_patterns(*_SKIP_NAMES))
    if (repo / SANITIZE).exists():
        shutil.copyfile(repo / SANITIZE, out / "sanitize.cfg")
    for name, target in (("Makefile", "Makefile"), ("README.md", "README.md"),
                         ("gitignore", ".gitignore")):
        text = TEMPLATES.joinpath(name).read_text(encoding="utf-8")
        if name == "Makefile":
            text = text.replace("DEFAULT_LANG := en\n", f"DEFAULT_LANG := {lang}\n", 1)
        (out / target).write_text(text, "utf-8")
    _refuse_answers(out, _hidden_names(hidden_of(solutions)))
    _first_commit(out)
    return sorted(out.iterdir())


def _first_commit(out: Path) -> None:
    """Make the kit a git repository whose one commit is the kit as released.

    Without git on the machine the kit is still complete, only not a repository.
    """
    if shutil.which("git") is None:
        return
    steps = (
        ("init", ["init", "--quiet"]),
        ("symbolic-ref", ["symbolic-ref", "HEAD", "refs/heads/main"]),  # no -b before 2.28
        ("add", ["add", "--all"]),
        ("commit", [*_GIT_AUTHOR, "commit", "--quiet", "--no-verify", "-m",
                    "The student kit as released"]),
    )
    for step, argv in steps:
        try:
            subprocess.run(["git", *argv], cwd=out, check=True, capture_output=True)
        except subprocess.CalledProcessError as exc:  # the kit stays whole, not a repo
            shutil.rmtree(out / ".git", ignore_errors=True)
            print(f"warning: the kit is not a git repository: git {step} failed: "
                  f"{exc.stderr.decode(errors='replace').strip()[:200]}", file=sys.stderr)
            return


def _text_of(path: Path) -> str:
    """A file's text; for a notebook, its cells' sources (what an editor would show)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".ipynb":
        try:
            cells = json.loads(text).get("cells", [])
        except (ValueError, AttributeError):
            return text
        return "\n".join("".join(c.get("source", "")) for c in cells if isinstance(c, dict))
    return text


def _refuse_answers(out: Path, hidden: list[str]) -> None:
    """Fail (and delete the kit) if a solution region or a hidden check is in it."""
    for path in out.rglob("*"):
        if not path.is_file():
            continue
        text = _text_of(path)
        lines = {line.strip() for line in text.splitlines()}
        found = next((m for m in (BEGIN, END) if m in lines), None)
        found = found or next((f"def {n}(" for n in hidden if f"def {n}(" in text), None)
        if found:
            shutil.rmtree(out)
            raise ReleaseError(
                f"{path.relative_to(out)} contains {found!r}: the student kit would ship an "
                "answer; nothing was written"
            )
