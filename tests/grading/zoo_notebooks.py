"""Every entry of the project's zoo as the notebook a student would hand in.

The zoo's entries live beside their exercise (``test_zoo_exNN.py``) in four shapes: a
cell appended to the reference (exercises 1-7 and 11-14), a change to the reference's
``%%writefile ex08_tasks.py`` cell (exercise 8), and text edits of the reference's cells
(exercises 9 and 10). ``every_entry()`` gives them one shape, ``Entry``, whose
``notebook()`` is the reference with the mistake in it: what the graded tests and
``bench/zoo.py`` hand to ``labkit grade``, and ``zoograding.not_caught`` judges.
``right_entries()`` does the same for the right solutions written otherwise (each zoo
file's ``RIGHT``), which must keep full marks (``bench/zoo.py --right``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import nbformat
import test_zoo
import test_zoo_ex01
import test_zoo_ex02
import test_zoo_ex03
import test_zoo_ex04
import test_zoo_ex05
import test_zoo_ex06
import test_zoo_ex07
import test_zoo_ex08
import test_zoo_ex09
import test_zoo_ex10
import test_zoo_ex11_13
import test_zoo_ex12
import test_zoo_ex14
from gradingkit import SOLUTIONS, notebook_for
from zoograding import append_cell


@dataclass(frozen=True)
class Entry:
    """One wrong solution: its exercise, its mistake, the check that must name it."""

    exercise: str
    mistake: str
    check: str
    change: Callable[[nbformat.NotebookNode], None]
    #: What the check must say it expected, and what it got, where the zoo records it.
    says: str | None = None
    got: str | None = None

    @property
    def filename(self) -> str:
        """The name a student hands it in under: the released notebook's."""
        return notebook_for(SOLUTIONS, self.exercise).name

    def notebook(self) -> nbformat.NotebookNode:
        nb = nbformat.read(notebook_for(SOLUTIONS, self.exercise), as_version=4)
        self.change(nb)
        return nb


def _appended(source: str) -> Callable[[nbformat.NotebookNode], None]:
    def change(nb: nbformat.NotebookNode) -> None:
        append_cell(nb, source)

    return change


def _edited(mistake: str, edits: list[tuple[str, str]]) -> Callable[[nbformat.NotebookNode], None]:
    def change(nb: nbformat.NotebookNode) -> None:
        for old, new in edits:
            cells = [c for c in nb.cells if c.cell_type == "code" and old in c.source]
            assert len(cells) == 1, f"{mistake!r}: the reference no longer holds {old!r}"
            cells[0].source = cells[0].source.replace(old, new)

    return change


def _task_module(
    mistake: str, rewrite: Callable[[str], str]
) -> Callable[[nbformat.NotebookNode], None]:
    def change(nb: nbformat.NotebookNode) -> None:
        [cell] = [c for c in nb.cells if c.source.startswith("%%writefile ex08_tasks.py")]
        changed = rewrite(cell.source)
        assert changed != cell.source, f"{mistake!r} changes nothing in the reference"
        cell.source = changed

    return change


def every_entry() -> list[Entry]:
    """The whole zoo, every exercise, in the order its files list it."""
    plain = test_zoo.ZOO + test_zoo_ex11_13.ZOO + test_zoo_ex12.ZOO + test_zoo_ex14.ZOO
    says = {**test_zoo.SAYS, **test_zoo_ex11_13.SAYS, **test_zoo_ex12.SAYS, **test_zoo_ex14.SAYS}
    got = {
        **test_zoo_ex05.GOT,
        **test_zoo_ex06.GOT,
        **test_zoo_ex11_13.GOT,
        **test_zoo_ex12.GOT,
    }
    entries = [
        Entry(e, m, c, _appended(source), says.get(m), got.get(m)) for e, m, c, source in plain
    ]
    entries += [
        Entry("ex08", name, fails, _task_module(name, rewrite))
        for name, rewrite, fails, _says, _passes in test_zoo_ex08.ZOO
    ]
    entries += [Entry("ex09", n, c, _edited(n, edits)) for n, c, edits in test_zoo_ex09.ZOO]
    entries += [
        Entry("ex10", n, c, _edited(n, [(old, new)])) for n, c, _ok, old, new in test_zoo_ex10.ZOO
    ]
    return sorted(entries, key=lambda e: e.exercise)


def _writefile(name: str, rewrite: Callable[[str], str]) -> Callable[[nbformat.NotebookNode], None]:
    """A change to the file the reference's ``%%writefile name`` cell writes."""

    def change(nb: nbformat.NotebookNode) -> None:
        [cell] = [c for c in nb.cells if c.source.startswith(f"%%writefile {name}")]
        head, _, body = cell.source.partition("\n")
        changed = rewrite(body)
        assert changed != body, f"{name}: the right variant changes nothing in the reference"
        cell.source = f"{head}\n{changed}"

    return change


def _app_from_post(source: str) -> Callable[[str], str]:
    """Exercise 10's right apps: the reference's module with its handlers replaced."""
    return lambda body: body[: body.index("@app.post")] + source.lstrip("\n") + "\n"


def right_entries() -> list[Entry]:
    """Every right solution written otherwise, as the notebook a student would hand in;
    ``check`` is the one that once took its points (every check must pass)."""
    appended = {
        "ex01": test_zoo_ex01.RIGHT,
        "ex02": test_zoo_ex02.RIGHT,
        "ex03": test_zoo_ex03.RIGHT,
        "ex04": test_zoo_ex04.RIGHT,
        "ex05": test_zoo_ex05.RIGHT,
        "ex06": test_zoo_ex06.RIGHT,
        "ex07": test_zoo_ex07.RIGHT,
        "ex11": test_zoo_ex11_13.RIGHT_EX11,
        "ex12": test_zoo_ex12.RIGHT,
        "ex13": test_zoo_ex11_13.RIGHT_EX13,
        "ex14": test_zoo_ex14.RIGHT,
    }
    entries = [
        Entry(exercise, way, check, _appended(source))
        for exercise, right in appended.items()
        for way, check, source in right
    ]
    entries += [
        Entry("ex08", way, check, _writefile("ex08_tasks.py", change))
        for way, change, check in test_zoo_ex08.RIGHT
    ]
    entries += [
        Entry(
            "ex09",
            way,
            check,
            _writefile("stream_consumer.py", lambda b, s=source: test_zoo_ex09._with_consume(b, s)),
        )
        for way, check, source in test_zoo_ex09.RIGHT
    ]
    entries += [
        Entry("ex10", way, check, _writefile("ex10_app.py", _app_from_post(source)))
        for way, check, source in test_zoo_ex10.RIGHT
    ]
    return sorted(entries, key=lambda e: e.exercise)
