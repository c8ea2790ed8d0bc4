"""``labkit release OUT``: the student notebooks, made from the instructor's solutions.

Each ``solutions/exNN_name.ipynb`` is the single source of its exercise. Release copies
it with every region between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` replaced by
``raise NotImplementedError("Exercise N")`` at the region's indentation, with outputs
and execution counts cleared, and with a note before the check cell saying how many
hidden checks the instructor runs and how many points they carry (counted from
``solutions/hidden/`` at release time; their code never ships). The output depends only
on the input, so CI can assert that the committed ``exercises/`` is exactly what release
makes. ``labkit release --bundle DIR`` writes the whole student kit (``bundle``).

nbgrader does this from per-cell metadata that editors lose; labkit needs only the two
marker comments, which survive any editor and any diff tool.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from labkit.grading import catalog
from labkit.grading.course import hidden_of
from labkit.grading.stub import stub_line

if TYPE_CHECKING:
    import nbformat

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
NOTEBOOK_NAME = re.compile(r"^(ex(\d\d))_[a-z0-9_]+\.ipynb$")


class ReleaseError(ValueError):
    """A solution notebook cannot be released as it is."""


def exercise_of(path: Path) -> str | None:
    """``"ex03"`` for ``ex03_claim.ipynb``; None for any other file name."""
    match = NOTEBOOK_NAME.match(path.name)
    return match.group(1) if match else None


def strip_solution(source: str, number: int, where: str = "cell") -> str:
    """Replace every solution region in ``source`` by a stub raising NotImplementedError."""
    out: list[str] = []
    inside = False
    for lineno, line in enumerate(source.splitlines(), 1):
        marker = line.strip()
        if marker == BEGIN:
            if inside:
                raise ReleaseError(
                    f"{where}, line {lineno}: {BEGIN} inside another solution region"
                )
            indent = line[: len(line) - len(line.lstrip())]
            if not indent:
                raise ReleaseError(
                    f"{where}, line {lineno}: a solution region must sit inside a function "
                    "body (indented), so the stub's raise runs only when the function is called"
                )
            out.append(f"{indent}{stub_line(number)}")
            inside = True
        elif marker == END:
            if not inside:
                raise ReleaseError(f"{where}, line {lineno}: {END} without a {BEGIN}")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ReleaseError(f"{where}: {BEGIN} is never closed by {END}")
    return "\n".join(out)


def hidden_note(exercise: str, hidden_dir: Path) -> str:
    """The Markdown a student reads about the checks they cannot see."""
    hidden = catalog.hidden(exercise, hidden_dir) if hidden_dir.is_dir() else []
    public = sum(c.points for c in catalog.public(exercise))
    points = sum(c.points for c in hidden)
    if not hidden:
        return f"Grading runs only the public checks below ({public} points)."
    checks = "check" if len(hidden) == 1 else "checks"
    return (
        f"**Hidden checks.** Besides the public checks below ({public} points), grading "
        f"runs {len(hidden)} hidden {checks} worth {points} points (total "
        f"{public + points}). They test the same contracts, with other inputs: code that "
        "follows each docstring passes them; code fitted to the public examples may not."
    )


def release_notebook(path: Path, hidden_dir: Path | None = None) -> nbformat.NotebookNode:
    """The student version of one solution notebook."""
    exercise = exercise_of(path)
    if exercise is None:
        raise ReleaseError(f"{path.name}: solution notebooks are named exNN_name.ipynb")
    number = int(exercise[2:])
    import nbformat  # two seconds of start-up (its jsonschema): only where notebooks are written

    nb = nbformat.read(path, as_version=4)  # type: ignore[no-untyped-call]
    regions = 0
    calls_check = False
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        regions += cell.source.count(BEGIN)
        calls_check = calls_check or f'check("{exercise}")' in cell.source
        cell.source = strip_solution(cell.source, number, f"{path.name} cell {index}")
        cell.outputs = []
        cell.execution_count = None
        cell.metadata = {}
    if regions == 0:
        raise ReleaseError(f"{path.name} has no {BEGIN} region: nothing for the student to write")
    if not calls_check:
        raise ReleaseError(f'{path.name} has no cell calling check("{exercise}")')
    if hidden_dir is not None:
        at = next(
            i
            for i, c in enumerate(nb.cells)
            if c.cell_type == "code" and f'check("{exercise}")' in c.source
        )
        note = nbformat.v4.new_markdown_cell(hidden_note(exercise, hidden_dir))  # type: ignore[no-untyped-call]
        note.id = f"{exercise}-hidden-checks"
        nb.cells.insert(at, note)
    nb.metadata = {
        "kernelspec": {
            "display_name": "Python 3 (ipykernel)",
            "language": "python",
            "name": "python3",
        },
        "language_info": {"name": "python"},
    }
    released: nbformat.NotebookNode = nb
    return released


def solution_notebooks(solutions: Path) -> list[Path]:
    """Every ``exNN_name.ipynb`` in ``solutions``, in exercise order."""
    return sorted(p for p in Path(solutions).glob("ex*.ipynb") if exercise_of(p))


def release(solutions: Path, out: Path) -> list[Path]:
    """Write the student notebooks into ``out``; return their paths.

    Stale ``exNN_*.ipynb`` files in ``out`` (an exercise renamed or removed) are deleted,
    so ``out`` always equals the release of ``solutions``.
    """
    if Path(out).resolve() == Path(solutions).resolve():
        raise ReleaseError(
            f"{out} is the solutions folder: releasing into it would replace every "
            "solution with its stub; pass another folder, such as exercises"
        )
    sources = solution_notebooks(solutions)
    if not sources:
        raise ReleaseError(f"no exNN_name.ipynb notebooks in {solutions}")
    hidden_dir = hidden_of(solutions)
    import nbformat

    built = {
        p.name: nbformat.writes(release_notebook(p, hidden_dir)) + "\n"  # type: ignore[no-untyped-call]
        for p in sources
    }
    written = _write_folder(out, built)
    for catalogs in sorted(p for p in (Path(solutions) / "locale").glob("*") if p.is_dir()):
        written += _release_edition(sources, hidden_dir, catalogs, out / catalogs.name)
    return written


def _release_edition(
    sources: list[Path], hidden_dir: Path | None, catalogs: Path, out: Path
) -> list[Path]:
    """The exercises in another language: each one's markdown from its catalog
    (``solutions/locale/LANG/exNN_name.po``, ``labkit.notebook.translate``), code as in
    English. A missing or unfinished catalog stops the release, naming what lacks."""
    import nbformat

    from labkit.lang import Untranslated, translate_notebook, translations_in

    lang = catalogs.name
    built = {}
    for path in sources:
        catalog = catalogs / f"{path.stem}.po"
        if not catalog.exists():
            raise ReleaseError(
                f"{catalog} is missing: run `python -m labkit.notebook.translate update` "
                f"and translate it, or remove {catalogs} to release English only"
            )
        nb = release_notebook(path, hidden_dir)
        try:
            translate_notebook(nb, translations_in(catalog), catalog, out.parent, lang)
        except Untranslated as exc:
            raise ReleaseError(str(exc)) from None
        built[path.name] = nbformat.writes(nb) + "\n"  # type: ignore[no-untyped-call]
    return _write_folder(out, built)


def _write_folder(out: Path, built: dict[str, str]) -> list[Path]:
    """Write each notebook of ``built`` into ``out``; exercises not in it are deleted
    (an exercise renamed or removed), so ``out`` is always exactly this release."""
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("ex*.ipynb"):
        if exercise_of(old) and old.name not in built:
            old.unlink()
    written = []
    for name, text in built.items():
        (out / name).write_text(text, encoding="utf-8")
        written.append(out / name)
    return written
