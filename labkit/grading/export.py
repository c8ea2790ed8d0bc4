"""A finished run's gradebook in the files Canvas, Moodle and Gradescope import.

``export(RUN, ["canvas", "moodle", "gradescope"], roster)`` reads what ``labkit grade``
left in the run's folder (``grades.csv``, and ``outcomes.json`` for the per-check
results) and writes, beside ``grades.csv``:

- ``canvas.csv``, Canvas's Gradebook import (Instructor Guide, "How do I import grades
  in the Gradebook?",
  https://community.canvaslms.com/t5/Instructor-Guide/How-do-I-import-grades-in-the-Gradebook/ta-p/807):
  the columns ``Student``, ``ID``, ``SIS User ID``, ``SIS Login ID``, ``Section`` of
  Canvas's own export, then one column per exercise. Canvas reads a header ending in
  ``(NUMBER)`` as an existing assignment's id and any other header as the title of a new
  assignment, so the headers are ``ex03 atomic claim with a lease``: no ``(ex03)``,
  which would become part of the title. A second row whose ``Student`` is ``Points
  Possible`` carries each exercise's maximum, the points a new assignment is created
  with. Canvas's import has no comment column: a missing notebook is a 0 there.
- ``moodle.csv``, Moodle's CSV grade import (https://docs.moodle.org/en/Grade_import):
  a column per user field Moodle can match a row by (``Email address``, ``Username``,
  ``ID number``: choose one under "Map from", mapped to useremail, username or
  useridnumber), ``Student`` (the lab's name, to map to "ignore"), one column per
  exercise (map each to "new grade item" or to an existing item) and one feedback
  column per exercise with the status and why (map it to that item's feedback).
- ``gradescope/STUDENT.json``, Gradescope's autograder ``results.json``
  (https://gradescope-autograders.readthedocs.io/en/latest/specs/): one test per check
  with ``name``, ``score``, ``max_score``, ``status``, ``output`` and ``visibility``
  (``after_published`` for hidden checks, ``visible`` for public ones), and the
  top-level ``score`` (the sum of the tests'), ``output`` and ``execution_time``.

The lab names a student by the submission folder's name. A roster CSV (``student`` plus
any of ``ROSTER_FIELDS``) maps it to the platform's ids; without one, each export fills
what it can and ``Written.to_complete`` says which columns an instructor must fill
before importing. Nothing here imports or runs student code: it reads the run's files.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labkit.grading.gradebook import GRADEBOOK_COLUMNS, OUTCOMES_FORMAT

PLATFORMS = ("canvas", "moodle", "gradescope")
#: The roster's columns: ``student`` is the submission folder's name, the rest are ids.
ROSTER_FIELDS = (
    "student", "name", "id", "sis_user_id", "sis_login_id", "section", "email", "username",
    "idnumber",
)
CANVAS_IDS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
#: The row Canvas reads each new assignment's points from (under the header row).
CANVAS_POINTS_ROW = "Points Possible"
MOODLE_IDS = ["Email address", "Username", "ID number", "Student"]
#: Where an instructor learns what each roster column means.
ROSTER_HINT = f"--roster FILE with the columns {','.join(ROSTER_FIELDS)}"


class ExportError(ValueError):
    """A run folder or a roster cannot be exported as it is."""


@dataclass(frozen=True)
class Row:
    """One line of a run's ``grades.csv``."""

    student: str
    exercise: str
    score: int
    possible: int
    status: str
    note: str


@dataclass(frozen=True)
class Run:
    """What a finished run left: its rows, exercise titles and (if kept) every check."""

    folder: Path
    rows: list[Row]
    titles: dict[str, str]
    #: outcomes.json's entries, or None for a run graded before it was written.
    outcomes: list[dict[str, Any]] | None

    @property
    def students(self) -> list[str]:
        return sorted({r.student for r in self.rows})

    @property
    def exercises(self) -> list[str]:
        return sorted({r.exercise for r in self.rows})

    def row(self, student: str, exercise: str) -> Row | None:
        return next((r for r in self.rows if (r.student, r.exercise) == (student, exercise)), None)

    def column(self, exercise: str) -> str:
        """The exercise's grade item name: ``ex03 atomic claim with a lease``."""
        return f"{exercise} {self.titles[exercise]}".strip()

    def possible(self, exercise: str) -> int:
        return max(r.possible for r in self.rows if r.exercise == exercise)


@dataclass
class Written:
    """One file an export wrote, and what an instructor must complete before importing it."""

    platform: str
    path: Path
    to_complete: list[str] = field(default_factory=list)


def read_run(folder: Path) -> Run:
    """The run in ``folder`` (``OUT/RUN_ID`` of ``labkit grade``); ExportError if it is not one."""
    folder = Path(folder)
    grades = folder / "grades.csv"
    if not grades.is_file():
        raise ExportError(f"{folder} has no grades.csv: give the folder of a finished run")
    with grades.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        if reader.fieldnames != GRADEBOOK_COLUMNS:
            raise ExportError(f"{grades} does not have the columns {','.join(GRADEBOOK_COLUMNS)}")
        try:
            rows = [
                Row(r["student"], r["exercise"], int(r["score"]), int(r["max"]), r["status"],
                    r["note"])
                for r in reader
            ]
        except (TypeError, ValueError):
            raise ExportError(f"{grades} has a score or max that is not a whole number") from None
    if not rows:
        raise ExportError(f"{grades} has no rows: nothing was graded in that run")
    outcomes = _read_outcomes(folder / "outcomes.json")
    titles = {e["exercise"]: str(e["title"]) for e in outcomes or []}
    for exercise in {r.exercise for r in rows} - set(titles):
        titles[exercise] = _catalog_title(exercise)
    return Run(folder, rows, titles, outcomes)


def _read_outcomes(path: Path) -> list[dict[str, Any]] | None:
    if not path.is_file():
        return None
    document = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(document, dict) or document.get("format") != OUTCOMES_FORMAT:
        raise ExportError(
            f"{path} is not outcomes.json format {OUTCOMES_FORMAT}: export it with the labkit "
            "that graded it, or grade again"
        )
    entries: list[dict[str, Any]] = document["results"]
    return entries


def _catalog_title(exercise: str) -> str:
    """An exercise's title from its public checks (an instructor's labkit module, not a
    student's), for a run graded before outcomes.json kept the titles."""
    from labkit.grading import catalog

    try:
        return catalog.public(exercise).title
    except (ValueError, ImportError):
        return ""


def read_roster(path: Path) -> dict[str, dict[str, str]]:
    """``student`` (the submission folder's name) to that student's roster fields."""
    with Path(path).open(newline="", encoding="utf-8-sig") as fh:  # Excel's BOM too
        reader = csv.DictReader(fh)
        columns = [c.strip() for c in reader.fieldnames or []]
        unknown = [c for c in columns if c not in ROSTER_FIELDS]
        if "student" not in columns or unknown:
            raise ExportError(
                f"{path}: a roster has a student column (the submission folder's name) and "
                f"any of {', '.join(ROSTER_FIELDS[1:])}"
                + (f"; unknown column(s): {', '.join(unknown)}" if unknown else "")
            )
        roster: dict[str, dict[str, str]] = {}
        for line in reader:
            entry = {k.strip(): (v or "").strip() for k, v in line.items() if k}
            student = entry["student"]
            if student in roster:
                raise ExportError(f"{path}: student {student!r} is listed twice")
            if student:
                roster[student] = entry
    return roster


def _ids(roster: Mapping[str, Mapping[str, str]], student: str) -> Mapping[str, str]:
    return roster.get(student, {})


def _roster_gaps(run: Run, roster: Mapping[str, Mapping[str, str]] | None,
                 file: str, ids: tuple[str, ...], what: str) -> list[str]:
    """What to complete when no row in a file can be matched by ``ids`` (roster fields)."""
    if roster is None:
        return [
            f"{file}: {what} are empty: fill them for every row before importing, or export "
            f"again with {ROSTER_HINT}"
        ]
    gaps = []
    absent = [s for s in run.students if s not in roster]
    if absent:
        gaps.append(f"{file}: not in the roster, so their {what} are empty: {', '.join(absent)}")
    blank = [s for s in run.students if s in roster and not any(roster[s].get(i) for i in ids)]
    if blank:
        gaps.append(f"{file}: the roster gives no {' or '.join(ids)} for: {', '.join(blank)}")
    unseen = sorted(set(roster) - set(run.students))
    if unseen:
        gaps.append(
            f"{file}: in the roster but not in this run (no row written): {', '.join(unseen)}"
        )
    return gaps


def canvas(run: Run, roster: Mapping[str, Mapping[str, str]] | None = None) -> Written:
    """``canvas.csv``: Canvas's identity columns, a Points Possible row, a score per exercise."""
    path = run.folder / "canvas.csv"
    exercises = run.exercises
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow([*CANVAS_IDS, *(run.column(e) for e in exercises)])
        writer.writerow([CANVAS_POINTS_ROW, "", "", "", "", *(run.possible(e) for e in exercises)])
        for student in run.students:
            ids = _ids(roster or {}, student)
            writer.writerow(
                [
                    ids.get("name") or student,
                    ids.get("id", ""),
                    ids.get("sis_user_id", ""),
                    ids.get("sis_login_id", ""),
                    ids.get("section", ""),
                    *(_score(run.row(student, e)) for e in exercises),
                ]
            )
    what = "ID, SIS User ID, SIS Login ID and Section (Canvas matches a row by ID or SIS User ID)"
    gaps = _roster_gaps(run, roster, path.name, ("id", "sis_user_id"), what)
    if roster is None:
        gaps.append(f"{path.name}: Student holds each submission folder's name")
    return Written("canvas", path, gaps)


def moodle(run: Run, roster: Mapping[str, Mapping[str, str]] | None = None) -> Written:
    """``moodle.csv``: user-field columns to match rows by, a grade and a feedback per exercise."""
    path = run.folder / "moodle.csv"
    exercises = run.exercises
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(
            [*MOODLE_IDS, *(run.column(e) for e in exercises),
             *(f"{run.column(e)} (feedback)" for e in exercises)]
        )
        for student in run.students:
            ids = _ids(roster or {}, student)
            rows = [run.row(student, e) for e in exercises]
            writer.writerow(
                [
                    ids.get("email", ""),
                    # A university's login and SIS id are usually Moodle's username and
                    # ID number, so one roster serves both platforms.
                    ids.get("username") or ids.get("sis_login_id", ""),
                    ids.get("idnumber") or ids.get("sis_user_id", ""),
                    student,
                    *(_score(r) for r in rows),
                    *(_feedback(r) for r in rows),
                ]
            )
    what = "Email address, Username and ID number (Moodle skips a row whose identifier is empty)"
    gaps = _roster_gaps(run, roster, path.name, ("email", "username", "sis_login_id",
                                                  "idnumber", "sis_user_id"), what)
    maxima = ", ".join(f"{e} {run.possible(e)}" for e in exercises)
    gaps.append(
        f"{path.name}: a new grade item is out of 100 points in Moodle: set each item's "
        f"maximum grade ({maxima}) or create the items first and map the columns to them"
    )
    return Written("moodle", path, gaps)


def _score(row: Row | None) -> int | str:
    return "" if row is None else row.score


def _feedback(row: Row | None) -> str:
    if row is None:
        return ""
    text = f"{row.score}/{row.possible}, {row.status}"
    return f"{text}: {row.note}" if row.note else text


def gradescope(run: Run, execution_time: float | None = None) -> Written:
    """``gradescope/STUDENT.json`` for every student: Gradescope's ``results.json``."""
    if run.outcomes is None:
        raise ExportError(
            f"{run.folder} has no outcomes.json (graded before labkit kept every check's "
            "result): grade again to export to Gradescope"
        )
    folder = run.folder / "gradescope"
    folder.mkdir(exist_ok=True)
    for student in run.students:
        entries = [e for e in run.outcomes if e["student"] == student]
        results = gradescope_results(entries, execution_time)
        (folder / f"{student}.json").write_text(json.dumps(results, indent=1) + "\n", "utf-8")
    return Written("gradescope", folder)


def gradescope_results(
    entries: list[dict[str, Any]], execution_time: float | None = None
) -> dict[str, Any]:
    """One student's outcomes.json entries as Gradescope's results.json.

    A severe failure caps an exercise at half its points (``scoring.score``); the cap is
    one more test with a negative score, so the top-level score is the sum of the tests
    and Gradescope shows why. Hidden checks, and a cap they caused, show only once the
    grades are published; the top-level output holds no score, so it leaks none of them.
    """
    tests: list[dict[str, Any]] = []
    lines = []
    for entry in sorted(entries, key=lambda e: str(e["exercise"])):
        exercise = str(entry["exercise"])
        number = exercise.removeprefix("ex").lstrip("0") or "0"
        checks = entry["checks"]
        for i, check in enumerate(checks, 1):
            tests.append(
                {
                    "name": f"{exercise}: {check['label']}",
                    "number": f"{number}.{i}",
                    "score": check["earned"],
                    "max_score": check["points"],
                    "status": "passed" if check["status"] == "passed" else "failed",
                    "output": _check_output(check),
                    "visibility": "after_published" if check["hidden"] else "visible",
                    "tags": [exercise],
                }
            )
        over = sum(c["earned"] for c in checks) - int(entry["score"])
        if over > 0:
            hidden_cause = any(
                c["severe"] and c["hidden"] and c["earned"] < c["points"] for c in checks
            )
            tests.append(
                {
                    "name": f"{exercise}: score capped at half (a severe mistake)",
                    "number": f"{number}.{len(checks) + 1}",
                    "score": -over,
                    "max_score": 0,
                    "status": "failed",
                    "output": str(entry.get("cap") or ""),
                    "visibility": "after_published" if hidden_cause else "visible",
                    "tags": [exercise],
                }
            )
        lines.append(f"{exercise} {entry['title']}: {entry['status']}")
        lines += [f"  {note}" for note in entry.get("notes") or []]
    results: dict[str, Any] = {
        "score": sum(t["score"] for t in tests),
        "output": "\n".join(lines),
        "tests": tests,
    }
    if execution_time is not None:
        results["execution_time"] = round(execution_time)
    return results


def _check_output(check: Mapping[str, Any]) -> str:
    lines = [str(check["status"]) + (" (severe: failing it caps the exercise at half)"
                                     if check["severe"] else "")]
    lines += [f"{k}: {check[k]}" for k in ("expected", "got", "hint") if check.get(k)]
    return "\n".join(lines)


def export(
    folder: Path,
    platforms: list[str],
    roster: Path | None = None,
    execution_time: float | None = None,
) -> list[Written]:
    """Write each platform's file for the run in ``folder``; what was written, and gaps."""
    chosen = platforms_of(platforms)
    run = read_run(folder)
    names = read_roster(roster) if roster is not None else None
    written = []
    for platform in chosen:
        if platform == "canvas":
            written.append(canvas(run, names))
        elif platform == "moodle":
            written.append(moodle(run, names))
        else:
            written.append(gradescope(run, execution_time))
    return written


def platforms_of(values: list[str] | None) -> list[str]:
    """``--export canvas --export moodle,gradescope`` as a list (argparse's repeated values)."""
    found = [p.strip().lower() for v in values or [] for p in v.split(",") if p.strip()]
    unknown = sorted(set(found) - set(PLATFORMS))
    if unknown:
        known = ", ".join(PLATFORMS)
        raise ExportError(f"unknown platform(s) {', '.join(unknown)}; known: {known}")
    return list(dict.fromkeys(found))
