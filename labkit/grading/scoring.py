"""What a set of outcomes is worth, and the report a student reads.

``score`` adds up the points, capped at half once a severe check failed (a lost or doubled
effect, two holders, one owner's data shown to another: ``Check.severe``);
``cap_note`` says why in one line; ``format_report`` is the plain-text report of
``check()`` and the grader's feedback, in the language of ``LABKIT_LANG``
(``labkit.lang``): statuses and labels (a check's hint and expectation come translated
in its ``Outcome``; check names stay identifiers).
"""

from __future__ import annotations

from labkit.grading.checks import CheckStatus, Outcome
from labkit.lang import _
from labkit.tables import format_table


def severe_failures(outcomes: list[Outcome]) -> list[str]:
    """The severe checks (``Check.severe``) a started solution did not pass."""
    untouched = (CheckStatus.NOT_STARTED, CheckStatus.NOT_GRADED)
    return [
        o.check
        for o in outcomes
        if o.severe and o.earned < o.points and o.status not in untouched
    ]


def score(outcomes: list[Outcome]) -> tuple[int, int]:
    """``(earned, possible)`` points: at most half of ``possible`` after a severe failure.

    A solution that charges twice, loses a job or lets two workers hold one lock is not
    "mostly right" because it passes the other checks: a severe mistake caps the score.
    """
    earned, possible = sum(o.earned for o in outcomes), sum(o.points for o in outcomes)
    if severe_failures(outcomes):
        earned = min(earned, possible // 2)
    return earned, possible


def cap_note(outcomes: list[Outcome]) -> str | None:
    """Why the score was capped, in one line, or None."""
    failed = severe_failures(outcomes)
    if not failed:
        return None
    _earned, possible = score(outcomes)
    return _(
        "score capped at half ({half}): {checks} failed, a severe mistake (an effect lost "
        "or done twice, two holders at once, or one owner's data shown to another)"
    ).format(half=possible // 2, checks=", ".join(failed))


def status_text(status: str) -> str:
    """A check's status as a student reads it (reports); the gradebook keeps the identifier."""
    words: dict[str, str] = {
        CheckStatus.PASSED: _("passed"),
        CheckStatus.FAILED: _("failed"),
        CheckStatus.NOT_STARTED: _("not started yet"),
        CheckStatus.TIMED_OUT: _("timed out"),
        CheckStatus.NOT_GRADED: _("not graded"),
    }
    return words.get(status, str(status))


def detail_labels() -> tuple[str, str, str]:
    """The words before what a check expected, what it got, and its hint."""
    return _("expected:"), _("got:"), _("hint:")


def shown(text: str) -> str:
    """An exercise's own words kept as data (its title) in the reader's language, where
    the catalog has them. A check's hint and expectation are already translated when its
    ``Outcome`` is made (``Check.outcome``); what a check got is never looked up."""
    return _(text) if text else text


def format_report(title: str, outcomes: list[Outcome]) -> str:
    """The table a student sees, then one paragraph per check that did not pass."""
    earned, possible = score(outcomes)
    columns = [_("check"), _("points"), _("result")]
    rows = [
        dict(zip(columns, (o.label, f"{o.earned}/{o.points}", status_text(o.status)), strict=True))
        for o in outcomes
    ]
    lines = [title, "", format_table(rows, columns), ""]
    lines.append(_("score: {earned}/{possible}").format(earned=earned, possible=possible))
    note = cap_note(outcomes)
    if note:
        lines.append(note)
    if outcomes and all(o.status == CheckStatus.NOT_STARTED for o in outcomes):
        lines.append(
            _("Not started yet: write your code in the cells above and run this cell again.")
        )
    labels = detail_labels()
    width = max(len(label) for label in labels) + 1
    for o in outcomes:
        if o.status in (CheckStatus.PASSED, CheckStatus.NOT_STARTED):
            continue
        lines += ["", f"{o.check}: {status_text(o.status)}"]
        for label, text in zip(labels, (o.expected, o.got, o.hint), strict=True):
            if text:
                lines.append(f"  {label.ljust(width)}{text}")
    return "\n".join(lines)
