"""The lab's two languages: one setting, blocks a translator can keep, links that still work."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from labkit.grading.checks import CheckStatus, Outcome
from labkit.grading.scoring import format_report
from labkit.lang import (
    LANG_ENV,
    UnknownLanguage,
    Untranslated,
    _,
    language,
    markdown_blocks,
    message_of,
    needs_translation,
    relink,
    translate_markdown,
)


@pytest.mark.parametrize(
    ("asked", "lang"),
    [("", "en"), ("en", "en"), ("pt_BR", "pt_BR"), ("pt-BR", "pt_BR"), ("pt_BR.UTF-8", "pt_BR"),
     ("pt", "pt_BR"), ("PT_br", "pt_BR"), ("  en  ", "en")],
)
def test_one_setting_names_the_language(asked: str, lang: str) -> None:
    assert language({LANG_ENV: asked}) == lang


def test_a_language_the_lab_lacks_is_refused_with_the_ones_it_has() -> None:
    with pytest.raises(UnknownLanguage) as refused:
        language({LANG_ENV: "fr_FR"})
    assert "'fr_FR'" in str(refused.value) and "en, pt_BR" in str(refused.value)


LINES = st.sampled_from(["", "\n", "text", "| a | b |", "- item", "```", "```python", "  ", "# H"])


@given(st.lists(LINES, max_size=30))
def test_cutting_into_blocks_and_joining_gives_the_text_back(lines: list[str]) -> None:
    text = "\n".join(lines)
    assert "".join(block + gap for block, gap in markdown_blocks(text)) == text


def test_a_fenced_block_with_blank_lines_is_one_block() -> None:
    text = "Before.\n\n```python\nx = 1\n\ny = 2\n```\n\nAfter.\nstill after."
    blocks = [b for b, _gap in markdown_blocks(text)]
    assert blocks == ["Before.\n", "```python\nx = 1\n\ny = 2\n```\n", "After.\nstill after."]
    assert not needs_translation(blocks[1])  # code is never translated
    assert [needs_translation(b) for b in blocks] == [True, False, True]


def test_translating_keeps_the_shape_and_names_a_missing_block() -> None:
    text = "# Title\n\nFirst paragraph,\nwrapped.\n\n| a |\n|---|\n| 1 |\n"
    done = {"# Title": "# Título", "First paragraph,\nwrapped.": "Primeiro parágrafo."}
    with pytest.raises(Untranslated) as missing:
        translate_markdown(text, done, "lesson.po cell 3")
    assert "lesson.po cell 3" in str(missing.value) and "'| a |'" in str(missing.value)
    done[message_of("| a |\n|---|\n| 1 |\n")] = "| a |\n|---|\n| um |"
    expected = "# Título\n\nPrimeiro parágrafo.\n\n| a |\n|---|\n| um |\n"
    assert translate_markdown(text, done, "x") == expected


def test_links_point_at_the_edition_of_a_lesson_and_one_folder_up_for_the_rest() -> None:
    home = Path("/course/notebooks")
    text = (
        "[next](07_dead_letter.ipynb) [terms](glossary.md) [ex](../exercises/ex01_keys.ipynb#top) "
        "[rules](../ops/alerts.yml) [web](https://example.org/x) [here](#section)"
    )
    assert relink(text, home, "pt_BR") == (
        "[next](07_dead_letter.ipynb) [terms](../glossary.md) "
        "[ex](../../exercises/pt_BR/ex01_keys.ipynb#top) [rules](../../ops/alerts.yml) "
        "[web](https://example.org/x) [here](#section)"
    )


def test_messages_follow_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(LANG_ENV, raising=False)
    assert _("passed") == "passed"
    monkeypatch.setenv(LANG_ENV, "pt_BR")
    assert _("passed") == "passou"
    assert _("a text no catalog holds") == "a text no catalog holds"


def test_check_reports_in_portuguese_keep_identifiers(monkeypatch: pytest.MonkeyPatch) -> None:
    outcomes = [
        Outcome("key_is_stable", 2, 0, CheckStatus.FAILED, "x", "y", "z", False, True),
        Outcome("fingerprint_ignores_order", 1, 1, CheckStatus.PASSED, "", "", "", True, False),
    ]
    english = format_report("ex01", outcomes)
    monkeypatch.setenv(LANG_ENV, "pt_BR")
    portuguese = format_report("ex01", outcomes)
    assert "score: 1/3" in english and "nota: 1/3" in portuguese
    assert "key_is_stable (grave)" in portuguese
    assert "fingerprint_ignores_order (oculto)" in portuguese
    for word in ("falhou", "passou", "esperado:", "obtido:", "dica:", "limitada à metade"):
        assert word in portuguese, word
    for word in ("failed", "expected", "hint", "capped"):
        assert word not in portuguese, word


def test_make_lab_opens_the_first_lesson_of_the_edition_asked_for(tmp_path: Path) -> None:
    from labkit.notebook.server import first_lesson

    assert first_lesson(tmp_path, "en") == "notebooks/00_start_here.ipynb"
    assert first_lesson(tmp_path, "pt_BR") == "notebooks/00_start_here.ipynb"  # not built
    (tmp_path / "notebooks" / "pt_BR").mkdir(parents=True)
    (tmp_path / "notebooks" / "pt_BR" / "00_start_here.ipynb").write_text("{}")
    assert first_lesson(tmp_path, "pt_BR") == "notebooks/pt_BR/00_start_here.ipynb"


def test_check_explains_a_failure_in_portuguese_line_for_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A wrong ex01 (every key the same): each expectation and hint a student reads is the
    catalog's Portuguese, not the English again; values from the student stay as they are."""
    from labkit.grading.student import run_public

    wrong = {
        "operation_key": lambda *a, **k: "x",
        "payload_fingerprint": lambda payload: "y",
        "accept": lambda *a, **k: None,
    }

    def details(lang: str) -> list[tuple[str, str]]:
        monkeypatch.setenv(LANG_ENV, lang)
        lines = format_report("ex01", run_public("ex01", dict(wrong))).splitlines()
        return [tuple(line.strip().split(None, 1)) for line in lines if line.startswith("  ")]

    english, portuguese = details("en"), details("pt_BR")
    assert len(english) == len(portuguese) >= 12
    for (label, text), (rotulo, texto) in zip(english, portuguese, strict=True):
        assert {"expected:": "esperado:", "got:": "obtido:", "hint:": "dica:"}[label] == rotulo
        if label != "got:" and any(c.isalpha() for c in text.replace("'x'", "")):
            assert texto != text, f"still English: {text}"
    assert ("obtido:", "'y'") in portuguese  # the student's value, unchanged


def test_the_hidden_checks_words_come_from_the_instructors_catalog(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hidden checks never ship, so neither do their words: loading them from
    ``solutions/hidden/`` adds ``solutions/locale/LANG/hidden.po`` to what ``_()`` reads."""
    from babel.messages.catalog import Catalog
    from babel.messages.pofile import write_po

    import labkit.lang as lang
    from labkit.grading import catalog as checks_catalog

    monkeypatch.setattr(lang, "_EXTRA_CATALOGS", [])
    lang.package_messages.cache_clear()
    (tmp_path / "hidden").mkdir()
    (tmp_path / "hidden" / "ex01.py").write_text(
        "from labkit.grading.checks import Checks\nCHECKS = Checks('ex01', hidden=True)\n"
    )
    po = Catalog(locale="pt_BR")
    po.add("a hidden hint nobody else has", "uma dica oculta que ninguém mais tem")
    (tmp_path / "locale" / "pt_BR").mkdir(parents=True)
    with (tmp_path / "locale" / "pt_BR" / "hidden.po").open("wb") as fh:
        write_po(fh, po)
    monkeypatch.setenv(LANG_ENV, "pt_BR")
    assert _("a hidden hint nobody else has") == "a hidden hint nobody else has"
    checks_catalog.hidden("ex01", tmp_path / "hidden")
    assert _("a hidden hint nobody else has") == "uma dica oculta que ninguém mais tem"
    assert _("passed") == "passou"  # the package's catalog still read
    lang.package_messages.cache_clear()
