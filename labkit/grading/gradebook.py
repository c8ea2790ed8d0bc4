"""What a graded class leaves behind: one ``Graded`` per student and exercise, and the files.

``write_gradebook`` writes ``grades.csv`` (one row per student and exercise, with its
status and why), ``write_totals`` writes ``totals.csv`` (one row per student) and
``write_feedback`` one ``feedback/STUDENT.md`` each, and ``write_outcomes``
``outcomes.json``: every check's outcome as data, for ``labkit.grading.export``.
``labkit.grading.grade`` fills the ``Graded`` rows; nothing here runs or reads student code.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from labkit.grading.checks import CheckStatus, Outcome
from labkit.grading.scoring import cap_note, detail_labels, score, shown, status_text
from labkit.lang import _


class NotebookStatus(StrEnum):
    """What became of one student's notebook as a whole: the totals' ``status`` column."""

    GRADED = "graded"
    MISSING = "missing"
    #: Every check met the stub.
    NOT_STARTED = "not started"
    TIMED_OUT = "timed out"
    #: The student's process hit one of its limits (the note names which).
    LIMIT_HIT = "limit hit"
    #: The student's process died, or the notebook could not be run.
    CRASHED = "crashed"


def notebook_status_text(status: str) -> str:
    """A notebook's status as a student reads it; the CSVs keep the identifier."""
    words: dict[str, str] = {
        NotebookStatus.GRADED: _("graded"),
        NotebookStatus.MISSING: _("missing"),
        NotebookStatus.NOT_STARTED: _("not started"),
        NotebookStatus.TIMED_OUT: _("timed out"),
        NotebookStatus.LIMIT_HIT: _("limit hit"),
        NotebookStatus.CRASHED: _("crashed"),
    }
    return words.get(status, str(status))


@dataclass
class Graded:
    """One student's result on one exercise."""

    student: str
    exercise: str
    title: str
    possible: int
    notebook: str | None = None
    outcomes: list[Outcome] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    status: NotebookStatus = NotebookStatus.GRADED

    @property
    def score(self) -> int:
        """Points earned, capped at half after a severe failure (``scoring.score``)."""
        return score(self.outcomes)[0]

    @property
    def note(self) -> str:
        """The notes in one CSV cell."""
        text = " | ".join(self.notes)
        return text if len(text) <= 400 else text[:397] + "..."


GRADEBOOK_COLUMNS = ["student", "exercise", "score", "max", "status", "notebook", "note"]


def write_gradebook(results: list[Graded], path: Path) -> None:
    """One row per student and exercise: score, status and why."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(GRADEBOOK_COLUMNS)
        for g in sorted(results, key=lambda g: (g.student, g.exercise)):
            writer.writerow(
                [g.student, g.exercise, g.score, g.possible, g.status, g.notebook or "", g.note]
            )


def write_totals(results: list[Graded], path: Path) -> None:
    """One row per student: total score, maximum, and how many exercises had each status."""
    by_student: dict[str, list[Graded]] = {}
    for g in results:
        by_student.setdefault(g.student, []).append(g)
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["student", "score", "max", "percent", "graded", "needs_attention"])
        for student, graded in sorted(by_student.items()):
            score, possible = sum(g.score for g in graded), sum(g.possible for g in graded)
            attention = [
                f"{g.exercise} {g.status}" for g in graded if g.status != NotebookStatus.GRADED
            ]
            writer.writerow(
                [
                    student,
                    score,
                    possible,
                    f"{100 * score / possible:.1f}" if possible else "0.0",
                    sum(g.status == NotebookStatus.GRADED for g in graded),
                    "; ".join(attention),
                ]
            )


def feedback_markdown(student: str, results: list[Graded]) -> str:
    """One student's feedback: a summary table, then every check and every note, in the
    language of ``LABKIT_LANG`` (the CSVs keep English identifiers)."""
    exercise, scored, status = _("exercise"), _("score"), _("status")
    lines = [_("# Feedback for {student}").format(student=student), ""]
    lines += [f"| {exercise} | {scored} | {status} |", "|---|---|---|"]
    for g in results:
        said = notebook_status_text(g.status)
        lines.append(f"| {g.exercise} {shown(g.title)} | {g.score}/{g.possible} | {said} |")
    total = f"{sum(g.score for g in results)}/{sum(g.possible for g in results)}"
    lines.append(f"| **{_('total')}** | **{total}** | |")
    labels = detail_labels()
    for g in results:
        said = notebook_status_text(g.status)
        lines += ["", f"## {g.exercise}: {shown(g.title)} ({g.score}/{g.possible}, {said})", ""]
        if g.notebook:
            lines.append(_("Notebook: `{name}`").format(name=g.notebook))
            lines.append("")
        notes = [*g.notes, *filter(None, [cap_note(g.outcomes)])]
        for note in notes:
            lines.append(_("- Note: {note}").format(note=note))
        if notes:
            lines.append("")
        lines += [f"| {_('check')} | {_('points')} | {_('result')} |", "|---|---|---|"]
        for o in g.outcomes:
            lines.append(f"| {o.label} | {o.earned}/{o.points} | {status_text(o.status)} |")
        for o in g.outcomes:
            quiet = o.status == CheckStatus.NOT_GRADED and not o.got
            if o.status in (CheckStatus.PASSED, CheckStatus.NOT_STARTED) or quiet:
                continue
            lines += ["", f"### {o.check}: {status_text(o.status)}"]
            for label, text in zip(labels, (o.expected, o.got, o.hint), strict=True):
                if text:
                    lines.append(f"- {label} {text}")
    return "\n".join(lines) + "\n"


def write_feedback(results: list[Graded], folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    by_student: dict[str, list[Graded]] = {}
    for g in results:
        by_student.setdefault(g.student, []).append(g)
    for student, graded in by_student.items():
        text = feedback_markdown(student, sorted(graded, key=lambda g: g.exercise))
        (folder / f"{student}.md").write_text(text, encoding="utf-8")


#: The version of ``outcomes.json``'s layout: a reader refuses one it does not know.
OUTCOMES_FORMAT = 1


def write_outcomes(results: list[Graded], path: Path) -> None:
    """Every student's every check as data (the feedback's content, machine-readable).

    One entry per student and exercise, as in ``grades.csv``, with its title and notes,
    the score cap's reason, and per check: its id and label, points, earned, status,
    expected, got, hint, and whether it is hidden or severe. Platform exports
    (``labkit.grading.export``) read it instead of parsing the feedback.
    """
    entries = [
        {
            "student": g.student,
            "exercise": g.exercise,
            "title": g.title,
            "score": g.score,
            "max": g.possible,
            "status": str(g.status),
            "notebook": g.notebook,
            "notes": list(g.notes),
            "cap": cap_note(g.outcomes),
            "checks": [{**o.to_dict(), "label": o.label} for o in g.outcomes],
        }
        for g in sorted(results, key=lambda g: (g.student, g.exercise))
    ]
    document = {"format": OUTCOMES_FORMAT, "results": entries}
    path.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
