"""How a student's ``check("exNN")`` looks in JupyterLab: the score on top, pass/fail colour.

``check_report(title, outcomes)`` is a ``labkit.tables.Rich``: HTML for the notebook
(the score first, then one coloured row per check, then what was expected, what
happened and the hint for each check that did not pass) with ``format_report``'s
plain text as its twin, which nbval and terminals read. nbgrader and otter-grader show
the same kind of summary after their autograded cells.
"""

from __future__ import annotations

import html

from labkit.grading.checks import CheckStatus, Outcome
from labkit.grading.scoring import (
    cap_note,
    detail_labels,
    format_report,
    score,
    status_text,
)
from labkit.lang import _
from labkit.tables import TABLE_STYLE, Rich, html_cell

#: Row colours by result: green passed, grey not started, red failed, amber timed out.
STATUS_COLOURS: dict[str, str] = {
    CheckStatus.PASSED: "#c8e6c9",
    CheckStatus.NOT_STARTED: "#eeeeee",
    CheckStatus.TIMED_OUT: "#ffe0b2",
}
FAILED_COLOUR = "#ffcdd2"


def _banner(earned: int, possible: int, outcomes: list[Outcome]) -> str:
    if outcomes and all(o.status == CheckStatus.NOT_STARTED for o in outcomes):
        colour, words = STATUS_COLOURS[CheckStatus.NOT_STARTED], _("not started yet")
    elif earned == possible:
        colour, words = STATUS_COLOURS[CheckStatus.PASSED], _("every check passed")
    else:
        failing = sum(o.status != CheckStatus.PASSED for o in outcomes)
        colour, words = FAILED_COLOUR, _("{count} check(s) to fix").format(count=failing)
    scored = _("score: {earned}/{possible}").format(earned=earned, possible=possible)
    return (
        f'<div style="background:{colour};color:#000;padding:6px 10px;margin:0.2em 0;'
        f'font-size:1.15em"><b>{html.escape(scored)}</b> &mdash; {html.escape(words)}</div>'
    )


def check_report(title: str, outcomes: list[Outcome]) -> Rich:
    """The report of one ``check()`` run (see the module docstring)."""
    earned, possible = score(outcomes)
    rows = ""
    for o in outcomes:
        colour = STATUS_COLOURS.get(o.status, FAILED_COLOUR)
        fill = f"background:{colour};color:#000"
        rows += (
            "<tr>"
            + html_cell(o.label, "td", fill)
            + html_cell(f"{o.earned}/{o.points}", "td", fill + ";white-space:nowrap")
            + html_cell(status_text(o.status), "td", fill + ";white-space:nowrap;font-weight:bold")
            + "</tr>"
        )
    columns = (_("check"), _("points"), _("result"))
    head = "".join(html_cell(c, "th", "white-space:nowrap") for c in columns)
    details = ""
    labels = detail_labels()
    for o in outcomes:
        if o.status in (CheckStatus.PASSED, CheckStatus.NOT_STARTED):
            continue
        parts = [f"<b>{html.escape(o.check)}</b>: {html.escape(status_text(o.status))}"]
        parts += [
            f"<i>{html.escape(label)}</i> {html.escape(value)}"
            for label, value in zip(labels, (o.expected, o.got, o.hint), strict=True)
            if value
        ]
        details += (
            '<div style="margin:0.4em 0;padding-left:8px;border-left:3px solid '
            f'{STATUS_COLOURS.get(o.status, FAILED_COLOUR)};white-space:pre-wrap">'
            + "<br>".join(parts)
            + "</div>"
        )
    not_started = outcomes and all(o.status == CheckStatus.NOT_STARTED for o in outcomes)
    footer = (
        "<p>"
        + html.escape(
            _("Not started yet: write your code in the cells above and run this cell again.")
        )
        + "</p>"
        if not_started
        else ""
    )
    capped = cap_note(outcomes)
    footer += f"<p><b>{html.escape(capped)}</b></p>" if capped else ""
    body = (
        f"<div><b>{html.escape(title)}</b></div>{_banner(earned, possible, outcomes)}"
        f'<table style="{TABLE_STYLE}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{rows}</tbody></table>{footer}{details}"
    )
    return Rich(format_report(title, outcomes), body)
