"""What a set of outcomes is worth, and the report a student reads.

``score`` adds up the points, capped at half once a severe check failed (a lost or doubled
effect, two holders, one owner's data shown to another: ``Check.severe``);
``cap_note`` says why in one line; ``format_report`` is the plain-text report of
``check()`` and the grader's feedback.
"""

from __future__ import annotations

from labkit.grading.checks import CheckStatus, Outcome
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
    _, possible = score(outcomes)
    return (
        f"score capped at half ({possible // 2}): {', '.join(failed)} failed, a severe mistake "
        "(an effect lost or done twice, two holders at once, or one owner's data shown to "
        "another)"
    )


def format_report(title: str, outcomes: list[Outcome]) -> str:
    """The table a student sees, then one paragraph per check that did not pass."""
    earned, possible = score(outcomes)
    rows = [
        {
            "check": o.label,
            "points": f"{o.earned}/{o.points}",
            "result": o.status,
        }
        for o in outcomes
    ]
    lines = [title, "", format_table(rows, ["check", "points", "result"]), ""]
    lines.append(f"score: {earned}/{possible}")
    note = cap_note(outcomes)
    if note:
        lines.append(note)
    if outcomes and all(o.status == CheckStatus.NOT_STARTED for o in outcomes):
        lines.append("Not started yet: write your code in the cells above and run this cell again.")
    for o in outcomes:
        if o.status in (CheckStatus.PASSED, CheckStatus.NOT_STARTED):
            continue
        lines += ["", f"{o.check}: {o.status}"]
        if o.expected:
            lines.append(f"  expected: {o.expected}")
        if o.got:
            lines.append(f"  got:      {o.got}")
        if o.hint:
            lines.append(f"  hint:     {o.hint}")
    return "\n".join(lines)
