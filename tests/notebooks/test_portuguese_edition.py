"""The Portuguese edition is complete and current, and an English edit cannot land alone.

Every lesson's and exercise's markdown, and every message of the package, has a
finished translation (none empty, none fuzzy); every built Portuguese lesson holds what
building it now would write; the released Portuguese exercises are what release writes.
A test edits one English paragraph (in a copy) and shows each gate close: the catalog
lacks the new text, then holds it fuzzy, then the built notebook is stale.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import pytest

from labkit.grading.release import release
from labkit.notebook import translate

REPO = Path(__file__).resolve().parents[2]


def test_every_message_is_translated_and_every_portuguese_notebook_is_current() -> None:
    found = translate.problems()
    assert not found, (
        f"{len(found)} problem(s) in the Portuguese edition:\n"
        + "\n".join(map(str, found[:40]))
        + "\nrun `python -m labkit.notebook.translate check` to see them all"
    )


def test_the_portuguese_exercises_are_the_release_of_the_solutions(tmp_path: Path) -> None:
    release(REPO / "solutions", tmp_path / "exercises")
    built = sorted(p.name for p in (tmp_path / "exercises" / "pt_BR").glob("ex*.ipynb"))
    assert built == sorted(p.name for p in (REPO / "exercises").glob("ex*.ipynb"))
    for name in built:
        fresh = (tmp_path / "exercises" / "pt_BR" / name).read_text(encoding="utf-8")
        stored = (REPO / "exercises" / "pt_BR" / name).read_text(encoding="utf-8")
        assert fresh == stored, f"exercises/pt_BR/{name} is stale: run `make release`"


def test_the_portuguese_lessons_keep_the_english_code_and_link_their_own_edition() -> None:
    for english in sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        portuguese = REPO / "notebooks" / "pt_BR" / english.name
        en, pt = (nbformat.read(p, as_version=4) for p in (english, portuguese))
        assert [c.source for c in en.cells if c.cell_type == "code"] == [
            c.source for c in pt.cells if c.cell_type == "code"
        ], f"{portuguese.name}: its code differs from the English lesson's"
        markdown = "\n".join(c.source for c in pt.cells if c.cell_type == "markdown")
        assert "](../glossary.md)" in markdown, f"{portuguese.name}: no link to the glossary"
        assert "](../exercises/" not in markdown, f"{portuguese.name}: a link one folder short"


@pytest.fixture
def copied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Lesson 02 with its catalog and its Portuguese notebook, in a copy of the layout."""
    lessons = tmp_path / "notebooks"
    (lessons / "locale" / "pt_BR").mkdir(parents=True)
    (lessons / "pt_BR").mkdir()
    name = "02_lockfile"
    shutil.copyfile(REPO / "notebooks" / f"{name}.py", lessons / f"{name}.py")
    shutil.copyfile(
        REPO / "notebooks" / "locale" / "pt_BR" / f"{name}.po",
        lessons / "locale" / "pt_BR" / f"{name}.po",
    )
    shutil.copyfile(
        REPO / "notebooks" / "pt_BR" / f"{name}.ipynb", lessons / "pt_BR" / f"{name}.ipynb"
    )
    monkeypatch.setattr(translate, "ROOT", tmp_path)
    monkeypatch.setattr(translate, "LESSONS", lessons)
    return lessons / f"{name}.py"


def test_an_edited_english_paragraph_fails_until_translated_and_rebuilt(copied: Path) -> None:
    assert translate.problems([copied], package=False) == []
    import jupytext

    markdown = [c.source for c in jupytext.read(copied).cells if c.cell_type == "markdown"]
    line = next(x for x in markdown[1].splitlines() if len(x) > 40 and not x.startswith("|"))
    text = copied.read_text(encoding="utf-8")
    assert text.count(f"# {line}\n") == 1
    copied.write_text(text.replace(f"# {line}\n", f"# {line} (edited)\n"), encoding="utf-8")

    stale = translate.problems([copied], package=False)
    assert any("not in the catalog" in p.what for p in stale), stale

    translate.update([copied], package=False)  # the catalog follows: the block is fuzzy
    fuzzy = translate.problems([copied], package=False)
    assert [p.what.split(" (")[0] for p in fuzzy] == ["fuzzy"], fuzzy

    catalog = translate.catalog_of(copied)
    from babel.messages.pofile import read_po, write_po

    with catalog.open("rb") as fh:
        messages = read_po(fh, locale="pt_BR")
    for message in messages:
        if message.fuzzy and message.id:
            message.flags.discard("fuzzy")  # a translator reviewed it, and followed the edit
            message.string = f"{message.string} (editado)"
    with catalog.open("wb") as fh:
        write_po(fh, messages, width=88, sort_output=False)
    unbuilt = translate.problems([copied], package=False)
    assert [p.what for p in unbuilt] == [
        "older than its lesson or catalog: run `make notebooks`"
    ], unbuilt
