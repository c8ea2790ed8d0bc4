"""Maintainers' tool: the Portuguese edition of the lessons and exercises, from catalogs.

English stays the source (``notebooks/NN_name.py``, ``solutions/``). Each lesson and
exercise has a gettext catalog of its markdown (``notebooks/locale/pt_BR/NN_name.po``,
``solutions/locale/pt_BR/exNN_name.po``), a message per block (``labkit.lang``), and the
package has one of its ``_()`` messages (``labkit/locale/pt_BR/labkit.po``)::

    python -m labkit.notebook.translate update   # catalogs follow the English: new
                                                 # blocks empty, edited ones fuzzy
    python -m labkit.notebook.translate build [NN_name ...]   # notebooks/pt_BR/, executed
    python -m labkit.notebook.translate check    # what is untranslated, fuzzy or stale

``make notebooks`` builds both editions; ``make release`` writes ``exercises/pt_BR/``.
A lesson is executed in Portuguese (``LABKIT_LANG=pt_BR``), so what the package prints
there is Portuguese too. Babel reads, writes and merges the catalogs (its ``update`` is
what keeps an edited paragraph's old translation, marked fuzzy, for review).
"""

from __future__ import annotations

import argparse
import copy
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from labkit.clock import LAB_EPOCH
from labkit.grading.catalog import HIDDEN_CATALOG as HIDDEN_CATALOG_NAME
from labkit.grading.course import Course
from labkit.lang import (
    LANG_ENV,
    PACKAGE_CATALOGS,
    PORTUGUESE,
    markdown_blocks,
    message_of,
    needs_translation,
    read_catalog,
    translate_notebook,
    translations_in,
)

COURSE = Course()
ROOT = COURSE.root
LESSONS = COURSE.notebooks
#: Where each edition's catalogs and built notebooks live, below its English folder.
EDITION = PORTUGUESE
#: The hidden checks' messages: the instructor's, so beside solutions/, never shipped.
HIDDEN_CATALOG = COURSE.solutions / "locale" / EDITION / f"{HIDDEN_CATALOG_NAME}.po"


def lesson_sources() -> list[Path]:
    """The lessons' ``.py`` sources."""
    return sorted(LESSONS.glob("[0-9][0-9]_*.py"))


def catalog_of(source: Path) -> Path:
    """``notebooks/locale/pt_BR/NN_name.po`` for a lesson, likewise for an exercise."""
    return source.parent / "locale" / EDITION / f"{source.stem}.po"


def lesson_edition(source: Path) -> Path:
    return LESSONS / EDITION / f"{source.stem}.ipynb"


#: A message and where it comes from: (file or lesson name, line or cell number).
Located = tuple[str, tuple[str, int]]


def _markdown_messages(nb: Any, name: str) -> list[Located]:
    found = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown":
            continue
        for block, _gap in markdown_blocks(cell.source):
            if needs_translation(block):
                found.append((message_of(block), (name, index + 1)))  # cells from 1
    return found


def _released(solution: Path) -> Any:
    from labkit.grading.release import release_notebook

    return release_notebook(solution, COURSE.hidden)


def exercise_sources() -> list[Path]:
    from labkit.grading.release import solution_notebooks

    return solution_notebooks(COURSE.solutions)


def _read_source(path: Path) -> Any:
    if path.suffix == ".ipynb":
        return _released(path)
    import jupytext  # type: ignore[import-untyped]

    return jupytext.read(path)


def update(sources: Iterable[Path], package: bool = True) -> list[Path]:
    """Bring each catalog in line with its English source; the catalogs written."""
    written = []
    for source in sources:
        messages = _markdown_messages(_read_source(source), source.stem)
        written.append(_merge(catalog_of(source), source.stem, messages))
    if package:
        written.append(_merge(PACKAGE_CATALOGS / EDITION / "labkit.po", "labkit", _marked()))
        written.append(_merge(HIDDEN_CATALOG, "hidden checks", _marked(COURSE.hidden)))
    return written


#: Where a call holds text a student reads: the positions (from 0) and the keyword names
#: of its string arguments. ``_("...")`` anywhere, and the literal texts of the checks'
#: own API, translated where a report shows them (``scoring.shown``): a check's hint
#: (``@CHECKS.add(points, hint)``), an exercise's title (``Checks(exercise, title)``),
#: an expectation and its hint (``expect(ok, expected, got, hint)``,
#: ``CheckFailed(expected, got, hint)``).
MESSAGE_ARGUMENTS: dict[str, tuple[tuple[int, ...], tuple[str, ...]]] = {
    "_": ((0,), ()),
    "add": ((1,), ("hint",)),
    "Checks": ((1,), ("title",)),
    "expect": ((1, 3), ("expected", "hint")),
    "CheckFailed": ((0, 2), ("expected", "hint")),
}


def _marked(folder: Path | None = None) -> list[Located]:
    """Every message of the package, in source order, with its line.

    Read with ``ast``, so a dict or a call among the arguments never shifts which one is
    the message (a tokenizer that counts commas, as Babel's Python extractor does, takes
    the wrong string there). A text built with an f-string is not a message: it stays
    English until written as ``_("...{name}").format(name=...)``.
    """
    import ast

    found: list[Located] = []
    folder = folder or ROOT / "labkit"
    for path in sorted(folder.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if name not in MESSAGE_ARGUMENTS:
                continue
            positions, keywords = MESSAGE_ARGUMENTS[name]
            texts = [node.args[i] for i in positions if i < len(node.args)]
            texts += [k.value for k in node.keywords if k.arg in keywords]
            for text in texts:
                if isinstance(text, ast.Constant) and isinstance(text.value, str) and text.value:
                    where = str(path.relative_to(folder))
                    found.append((text.value, (where, text.lineno)))
    return found


def _merge(path: Path, name: str, messages: list[Located]) -> Path:
    from babel.messages.pofile import read_po, write_po

    template = _new_catalog(name)
    for message, where in messages:
        if message in template:
            template[message].locations.append(where)
        else:
            template.add(message, locations=[where])
    catalog = template
    if path.exists():
        with path.open("rb") as fh:
            catalog = read_po(fh, locale=EDITION)
        catalog.update(template, update_header_comment=False)
        catalog.obsolete.clear()  # a block gone from the English is gone here too
    # A fixed date: an update that changes no message changes no byte in git.
    catalog.revision_date = catalog.creation_date = datetime.fromtimestamp(LAB_EPOCH, UTC)
    catalog.fuzzy = False
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as fh:
        write_po(fh, catalog, width=88, omit_header=False, sort_output=False)
    return path


def _new_catalog(name: str) -> Any:
    from babel.messages.catalog import Catalog

    catalog = Catalog(
        locale=EDITION,
        project=f"Resilient Jobs Lab: {name}",
        version="1",
        last_translator="Resilient Jobs Lab",
        language_team="Resilient Jobs Lab, Brazilian Portuguese edition",
        copyright_holder="Resilient Jobs Lab",
    )
    catalog.header_comment = (
        f"# {name}, in Brazilian Portuguese (the Resilient Jobs Lab's Portuguese edition).\n"
        "# One message per markdown block of the English source (#: name:cell). Use the\n"
        "# terms of notebooks/glossary.md; keep code, identifiers and link targets as they\n"
        "# are. After an English edit: python -m labkit.notebook.translate update."
    )
    return catalog


def translated_notebook(source: Path, nb: Any = None) -> Any:
    """The lesson (``nb``, or read from ``source``) with its markdown in Portuguese, its
    code as in English."""
    nb = _read_source(source) if nb is None else nb
    catalog = catalog_of(source)
    return translate_notebook(nb, translations_in(catalog), catalog, source.parent, EDITION)


def build(sources: Iterable[Path]) -> None:
    """Write and execute ``notebooks/pt_BR/NN_name.ipynb`` for each lesson, in Portuguese."""
    import jupytext

    from labkit.notebook.refresh import execute, save_like_jupyter

    for source in sources:
        target = lesson_edition(source)
        target.parent.mkdir(exist_ok=True)
        nb = translated_notebook(source)
        elapsed = execute(nb, target.parent, {LANG_ENV: EDITION})
        jupytext.write(nb, target)
        save_like_jupyter(target)
        print(f"{target.relative_to(ROOT)}: executed in {elapsed:.1f}s")


@dataclass(frozen=True)
class Problem:
    where: str
    what: str

    def __str__(self) -> str:
        return f"{self.where}: {self.what}"


def problems(sources: Iterable[Path] | None = None, package: bool = True) -> list[Problem]:
    """Everything that keeps the Portuguese edition from matching the English one."""
    chosen = list(sources) if sources is not None else [*lesson_sources(), *exercise_sources()]
    found: list[Problem] = []
    for source in chosen:
        nb = _read_source(source)  # once: its messages, then (a lesson) its built edition
        found += _catalog_problems(catalog_of(source), _markdown_messages(nb, source.stem))
        if source.suffix == ".py":
            found += _stale_edition(source, nb)
    if package:
        found += _catalog_problems(PACKAGE_CATALOGS / EDITION / "labkit.po", _marked())
        found += _catalog_problems(HIDDEN_CATALOG, _marked(COURSE.hidden))
    return found


def _catalog_problems(path: Path, messages: list[Located]) -> list[Problem]:
    where = str(path.relative_to(ROOT))
    if not path.exists():
        return [Problem(where, "no catalog: run `python -m labkit.notebook.translate update`")]
    entries = {e.english: e for e in read_catalog(path)}
    found = []
    for message in dict.fromkeys(m for m, _at in messages):
        entry = entries.get(message)
        first = message.splitlines()[0][:70]
        if entry is None:
            found.append(Problem(where, f"not in the catalog (run update): {first!r}"))
        elif entry.fuzzy:
            found.append(Problem(where, f"fuzzy (the English changed; review): {first!r}"))
        elif not entry.translation:
            found.append(Problem(where, f"untranslated: {first!r}"))
    return found


def _stale_edition(source: Path, nb: Any) -> list[Problem]:
    target = lesson_edition(source)
    where = str(target.relative_to(ROOT))
    if not target.exists():
        return [Problem(where, "not built: run `make notebooks`")]
    import nbformat

    try:
        expected = translated_notebook(source, copy.deepcopy(nb))
    except LookupError:
        return []  # the catalog's own problems say what to do
    built = nbformat.read(target, as_version=4)  # type: ignore[no-untyped-call]
    if [(c.cell_type, c.source) for c in built.cells] != [
        (c.cell_type, c.source) for c in expected.cells
    ]:
        return [Problem(where, "older than its lesson or catalog: run `make notebooks`")]
    return []


def sources_named(names: Iterable[str]) -> list[Path]:
    """The lessons and exercises named (``06_crash_matrix``, ``ex03_claim``), or all."""
    every = [*lesson_sources(), *exercise_sources()]
    wanted = {n.removesuffix(".py").removesuffix(".ipynb").removesuffix(".po") for n in names}
    unknown = wanted - {p.stem for p in every}
    if unknown:
        raise SystemExit(f"no lesson or exercise named {sorted(unknown)[0]!r}")
    return [p for p in every if not wanted or p.stem in wanted]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labkit.notebook.translate")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text in (
        ("update", "bring catalogs in line with the English (default: every one)"),
        ("build", "write and execute the Portuguese lessons (default: every one)"),
        ("check", "list what is untranslated, fuzzy or stale (default: everything)"),
    ):
        cmd = sub.add_parser(name, help=text)
        cmd.add_argument("names", nargs="*", help="NN_name of lessons, exNN_name of exercises")
        if name != "build":
            cmd.add_argument("--package", action="store_true", help="the package's catalog")
    args = parser.parse_args(argv)
    package_only = getattr(args, "package", False) and not args.names
    chosen = [] if package_only else sources_named(args.names)
    package = package_only or not args.names or getattr(args, "package", False)
    if args.command == "update":
        for path in update(chosen, package=package):
            print(path.relative_to(ROOT))
        return 0
    if args.command == "build":
        build([p for p in chosen if p.suffix == ".py"])
        return 0
    found = problems(chosen, package=package)
    for problem in found:
        print(problem)
    print(f"{len(found)} problem(s)" if found else "the Portuguese edition is complete")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
