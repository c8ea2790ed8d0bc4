"""What JupyterLab shows: HTML tables, the crash matrix grid, check() reports, the screens.

Every rich output carries a plain-text twin that nbval compares, so both faces must
come from the data alone (built twice, byte-identical) and the text must be the one a
terminal prints.
"""

from __future__ import annotations

import html
import re

from hypothesis import given
from hypothesis import strategies as st
from IPython.core.formatters import DisplayFormatter

from labkit.errors import PermanentError
from labkit.explore.verdicts import Matrix, Row
from labkit.grading.checks import CheckStatus, Outcome
from labkit.grading.display import check_report
from labkit.grading.scoring import format_report
from labkit.notebook.dead_letters import dead_letter_screen
from labkit.notebook.fault_panel import fault_panel
from labkit.notebook.timelines import VERDICT_COLOURS, matrix_grid
from labkit.tables import WRAP_AFTER, Table, format_table, html_cell, show

PASSED, FAILED = CheckStatus.PASSED, CheckStatus.FAILED


def mimebundle(obj):
    data, _meta = DisplayFormatter().format(obj)
    return data


def test_a_table_shows_html_in_jupyter_and_the_text_table_as_its_twin():
    rows = [{"id": 1, "state": "dead", "note": None}, {"id": 12, "state": "pending", "note": "x"}]
    data = mimebundle(Table(rows))
    assert data["text/plain"] == format_table(rows)
    page = data["text/html"]
    assert page.count("<tr>") == 3 and page.count("<th ") == 3  # header + one per row
    assert "text-align:left" in page  # JupyterLab right-aligns cells unless told
    assert data == mimebundle(Table(rows))  # deterministic: nbval compares both faces


def test_show_prints_the_text_table_outside_a_notebook(capsys):
    show([{"id": 1, "state": "dead"}])
    assert capsys.readouterr().out == format_table([{"id": 1, "state": "dead"}]) + "\n"


def test_cell_text_is_escaped_so_a_payload_cannot_inject_markup():
    page = Table([{"reason": "<script>alert(1)</script> & more"}])._repr_html_()
    assert "<script>" not in page and "&lt;script&gt;" in page


@given(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=80))
def test_wrap_points_only_follow_separators_and_lose_no_text(text):
    cell = html_cell(text)
    inner = re.fullmatch(r'<td style="[^"]*">(.*)</td>', cell, re.S)
    assert inner is not None
    body = inner.group(1)
    keep = '<span style="white-space:nowrap">'
    assert html.unescape(body.replace("<wbr>", "").replace(keep, "").replace("</span>", "")) == text
    # A break may only follow a separator, never split a word ("Perma/nentError"); one
    # may follow a piece kept whole ("0-&" ends with "&"), after its closing tag.
    flat = body.replace(keep, "").replace("</span>", "")
    for before in re.findall(r"(.{1,5})<wbr>", flat, re.S):
        assert before.endswith(WRAP_AFTER), before
    # Nor a date or a key at its hyphen ("2026-01-" / "01"): a hyphen between two word
    # characters stays inside a piece kept whole. One next to a separator ("0-:") is not
    # a break point: no line breaks before ":" (Unicode line breaking, rule LB13).
    outside = re.sub(re.escape(keep) + ".*?</span>", "", body, flags=re.S)
    for piece in re.split(r"\s|<wbr>", outside):
        assert not re.search(r"[^\s:/?,_<>-]-[^\s:/?,_<>-]", piece), piece


def _row(strategy, point, outcome, fired=True):
    return Row(strategy, point, outcome, 1, ("crash",) if fired else (), 7, "replay")


def test_matrix_grid_colours_each_cell_by_verdict_and_explains_them():
    matrix = Matrix([
        _row("ack_first", "after_commit", "lost"),
        _row("ack_first", "lost_response", "ok"),
        _row("ack_late", "after_commit", "duplicate"),
        _row("ack_late", "lost_response", "ok", fired=False),
    ])
    grid = matrix_grid(matrix)
    data = mimebundle(grid)
    assert data["text/plain"].startswith(matrix.table())
    cells = re.findall(r'<td style="[^"]*background:(#[0-9a-f]{6})[^"]*">([^<]*)</td>',
                       data["text/html"])
    assert cells == [(VERDICT_COLOURS[v], v) for v in ("lost", "ok", "duplicate", "-")]
    legend = data["text/html"].split("</table>", 1)[1]
    for verdict in ("ok", "duplicate", "lost", "-"):
        assert f">{verdict}</span>" in legend and f"  {verdict}" in data["text/plain"]
    assert ">unknown</span>" not in legend  # only verdicts the grid holds
    assert "seed=7" in legend


def _outcomes(*statuses):
    return [
        Outcome(f"check_{n}", 2, 2 if s == PASSED else 0, s, "a <b>", "c", "hint <x>")
        for n, s in enumerate(statuses)
    ]


def test_check_report_puts_the_score_on_top_coloured_by_the_result():
    full = mimebundle(check_report("ex01: keys", _outcomes(PASSED, PASSED)))
    assert full["text/plain"] == format_report("ex01: keys", _outcomes(PASSED, PASSED))
    page = full["text/html"]
    assert page.index("score: 4/4") < page.index("<table")  # the score comes first
    assert "every check passed" in page and "#c8e6c9" in page

    part = mimebundle(check_report("ex01: keys", _outcomes(PASSED, FAILED)))["text/html"]
    assert "score: 2/4" in part and "1 check(s) to fix" in part and "#ffcdd2" in part
    assert "hint &lt;x&gt;" in part and "<x>" not in part  # feedback text is escaped

    fresh = mimebundle(check_report("ex01: keys", _outcomes(CheckStatus.NOT_STARTED)))["text/html"]
    assert "not started yet" in fresh and "#ffcdd2" not in fresh


def test_dead_letter_grid_wraps_reasons_between_words_and_keeps_classes_whole(store, clock):
    reason = "ERP rejected order 9 (400): product SKU-404 is not registered in the catalogue"
    job, _ = store.enqueue("erp.order", {"order": 9}, key="shop:9:order:v1")
    store.fail(store.claim("w1"), PermanentError(reason))
    screen = dead_letter_screen(store)
    (grid,) = screen.table.children
    cells = [getattr(w, "value", None) for w in grid.children]
    assert len(grid.children) == 2 * 8  # header + one row; a tick box + 7 columns each
    assert grid.children[8] is screen.checkboxes[job.id]
    reason_cell = next(c for c in cells if c and "SKU-404" in c)
    assert "white-space:nowrap" not in reason_cell.split(">", 1)[0]  # the reason wraps...
    class_cell = next(c for c in cells if c and ">PermanentError<" in c)
    assert "white-space:nowrap" in class_cell  # ...the error class never breaks
    assert "1fr" in grid.layout.grid_template_columns  # only the reason column stretches


def test_widgets_read_as_one_short_line_before_the_notebook_runs(store):
    for widget in (dead_letter_screen(store), fault_panel()):
        plain = mimebundle(widget)["text/plain"]
        assert "\n" not in plain and len(plain) < 110 and "(" not in plain.split(":")[0]
        assert "children=" not in plain and "Layout" not in plain


def test_fault_panel_labels_are_sized_to_their_words():
    panel = fault_panel()
    for control in (panel.strategy, panel.point, panel.seed):
        assert control.style.description_width == "initial", control.description


def test_jobs_table_shows_as_html_and_prints_as_the_text_table(store, capsys):
    from labkit.tables import jobs_table

    store.enqueue("mail.send", {"to": 1}, key="mail:1:send:v1")
    table = jobs_table(store, columns=("id", "key", "state"))
    print(table)
    assert capsys.readouterr().out.splitlines() == [
        "id  key             state", "--  --------------  -------", "1   mail:1:send:v1  pending"]
    assert "<wbr>" in mimebundle(table)["text/html"]  # a key may wrap after its colons
