"""The lab's two languages: English (the source) and Brazilian Portuguese, from catalogs.

Everything is written in English first. Portuguese comes from gettext catalogs (``.po``
files, read and written with Babel): one for the package's own messages
(``labkit/locale/pt_BR/labkit.po``: what ``check()`` and ``labkit grade`` tell a
student, marked ``_()`` where they are written), and one per lesson and exercise for
its markdown, a message per block (a paragraph, a table, a list, a heading), so an
English edit marks only that block for review (``labkit.notebook.translate``).

Which language the package speaks is one setting, ``LABKIT_LANG`` (``en`` or
``pt_BR``; ``make lab`` sets it from ``LANG``). Identifiers never change: the
gradebook's columns and statuses, check names, code and SQL stay English.

This is gettext's model (msgid = the English text), as Django and Sphinx use it; a
project with plural forms or many languages would use ``gettext.translation`` over
compiled ``.mo`` files, or Babel's ``Translations`` directly.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ENGLISH = "en"
PORTUGUESE = "pt_BR"
LANGUAGES = (ENGLISH, PORTUGUESE)
#: The one setting: which language the lab speaks to a student.
LANG_ENV = "LABKIT_LANG"
#: The package's own catalog for each translated language.
PACKAGE_CATALOGS = Path(__file__).parent / "locale"


class UnknownLanguage(ValueError):
    """``LABKIT_LANG`` names a language the lab has no edition of."""


class Untranslated(LookupError):
    """A block of a lesson has no translation (or only a fuzzy one) in its catalog."""


def language(env: Mapping[str, str] | None = None) -> str:
    """The language asked for by ``LABKIT_LANG`` (English when unset or empty)."""
    asked = (os.environ if env is None else env).get(LANG_ENV, "").strip()
    if not asked:
        return ENGLISH
    normal = asked.split(".")[0].replace("-", "_")
    for known in LANGUAGES:
        if normal.lower() == known.lower() or normal.lower() == known.split("_")[0].lower():
            return known
    raise UnknownLanguage(
        f"{LANG_ENV}={asked!r} is not a language of the lab: use one of {', '.join(LANGUAGES)}"
    )


def _(text: str) -> str:
    """``text`` in the language of ``LABKIT_LANG`` (English when no translation is kept).

    Mark each message where it is written, with named fields filled after translation:
    ``_("{name} failed").format(name=name)``, never an f-string (its words would differ
    each time and match no catalog entry).
    """
    lang = language()
    if lang == ENGLISH:
        return text
    return package_messages(lang).get(text) or text


#: Catalogs beside the package's, in the order added (``add_catalogs``).
_EXTRA_CATALOGS: list[Path] = []


def add_catalogs(folder: Path, name: str) -> None:
    """Also read ``folder/LANG/name.po`` for each language: the messages of code that
    does not ship with the package (the instructor's hidden checks, in
    ``solutions/locale/``), added where that code is loaded."""
    path = Path(folder) / "{lang}" / f"{name}.po"
    if path not in _EXTRA_CATALOGS:
        _EXTRA_CATALOGS.append(path)
        package_messages.cache_clear()


@functools.cache
def package_messages(lang: str) -> dict[str, str]:
    """Every catalog of ``lang`` the lab reads: English -> translation, finished entries."""
    messages: dict[str, str] = {}
    for pattern in [PACKAGE_CATALOGS / "{lang}" / "labkit.po", *_EXTRA_CATALOGS]:
        path = Path(str(pattern).replace("{lang}", lang))
        if path.exists():
            messages.update(translations_in(path))
    return messages


@dataclass(frozen=True)
class Entry:
    """One message of a catalog as the lab uses it."""

    english: str
    translation: str
    fuzzy: bool


def read_catalog(path: Path) -> list[Entry]:
    """Every message of a ``.po`` file (the header excluded)."""
    from babel.messages.pofile import read_po

    with Path(path).open("rb") as fh:
        catalog = read_po(fh, locale=PORTUGUESE, abort_invalid=True)
    return [
        Entry(str(m.id), str(m.string or ""), m.fuzzy)
        for m in catalog
        if m.id and isinstance(m.id, str)
    ]


def translations_in(path: Path) -> dict[str, str]:
    """English -> translation for what a reader may be shown: not empty, not fuzzy."""
    return {e.english: e.translation for e in read_catalog(path) if e.translation and not e.fuzzy}


_FENCE = re.compile(r"^\s*(```|~~~)")


def markdown_blocks(text: str) -> list[tuple[str, str]]:
    """``text`` cut at blank lines into (block, the blank lines after it).

    A block is what a translator translates whole: a paragraph, a heading, a table, a
    list without blank lines, a quote. A fenced code block is one block, blank lines and
    all. Joining every block with its separator gives ``text`` back, byte for byte.
    """
    blocks: list[tuple[str, str]] = []
    current: list[str] = []
    gap: list[str] = []
    fenced = False
    for line in text.splitlines(keepends=True):
        blank = not line.strip()
        if blank and not fenced:
            gap.append(line)
            continue
        if gap and current:
            blocks.append(("".join(current), "".join(gap)))
            current = []
        elif gap:  # blank lines before the first block
            blocks.append(("", "".join(gap)))
        gap = []
        current.append(line)
        if _FENCE.match(line):
            fenced = not fenced
    if current or gap:
        blocks.append(("".join(current), "".join(gap)))
    return blocks


def needs_translation(block: str) -> bool:
    """Whether a block holds words: not blank, not only a fenced code block."""
    stripped = block.strip()
    return bool(stripped) and not (_FENCE.match(stripped) and stripped.endswith(("```", "~~~")))


def message_of(block: str) -> str:
    """The catalog message of a block: the block without its trailing line break."""
    return block.rstrip("\n")


def translate_markdown(text: str, translations: Mapping[str, str], where: str) -> str:
    """``text`` with every block replaced by its translation (``Untranslated`` if one lacks)."""
    out = []
    for block, gap in markdown_blocks(text):
        if needs_translation(block):
            message = message_of(block)
            translated = translations.get(message)
            if translated is None:
                first = message.splitlines()[0][:80]
                raise Untranslated(
                    f"{where}: no finished translation of the block starting {first!r}: "
                    "run `python -m labkit.notebook.translate update`, translate it in the "
                    "catalog (and clear its fuzzy flag), then build again"
                )
            block = translated + block[len(message) :]
        out.append(block + gap)
    return "".join(out)


def translate_notebook(
    nb: Any, translations: Mapping[str, str], where: Path, home: Path, lang: str
) -> Any:
    """``nb``'s markdown in ``lang``, cell by cell (``Untranslated`` naming the catalog
    ``where`` and the cell, counted from 1, if a block lacks), its links made right from
    ``home/lang`` (``relink``); the code as it was. ``nb`` itself is changed."""
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            text = translate_markdown(cell.source, translations, f"{where} cell {index + 1}")
            cell.source = relink(text, home, lang)
    return nb


_LINK = re.compile(r"\]\((?!https?:|#|mailto:)([^)\s]+)\)")
#: The folders whose notebooks have an edition per language (``notebooks/pt_BR/``, ...).
EDITION_FOLDERS = ("notebooks", "exercises")


def relink(text: str, home: Path, lang: str) -> str:
    """The relative links of markdown from ``home``, made right from ``home/lang``.

    A lesson or an exercise points at its edition in ``lang``; any other target (the
    glossary, ``ops/``) at the same file as before, from one folder further down.
    """

    def swap(found: re.Match[str]) -> str:
        target, _, anchor = found[1].partition("#")
        original = Path(os.path.normpath(Path(home).resolve() / target))
        if original.suffix == ".ipynb" and original.parent.name in EDITION_FOLDERS:
            original = original.parent / lang / original.name
        new = os.path.relpath(original, Path(home).resolve() / lang)
        return f"]({new}{'#' + anchor if anchor else ''})"

    return _LINK.sub(swap, text)
