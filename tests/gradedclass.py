"""A small graded class built from ``Graded`` rows, hostile where a student controls text.

For the tests of the run's pages (``labkit.grading.report_html``): the unit tests in
tests/grading and the browser test in tests/browser. No student process is involved.
"""

from __future__ import annotations

from pathlib import Path

from labkit.grading.checks import CheckStatus, Outcome
from labkit.grading.gradebook import (
    Graded,
    NotebookStatus,
    write_feedback,
    write_gradebook,
    write_totals,
)
from labkit.grading.report_html import write_report

#: What student code could print or name a folder: markup that would run if not escaped.
SCRIPT_TAG = "<script>alert(1)</script>"
BREAK_OUT = '"><img src=x onerror=alert(2)>'
HOSTILE_NAME = "<img src=x onerror=alert(3)>"  # a folder name: no "/"
QUOTE_NAME = "\"'><svg onload=alert(4)>"
ODD_NAME = "zoé #1 %41?x"  # needs percent-encoding in a link


def _outcome(check: str, points: int, status: CheckStatus, **said: object) -> Outcome:
    earned = points if status == CheckStatus.PASSED else 0
    return Outcome(check, points, earned, status, **said)  # type: ignore[arg-type]


def hostile_class() -> list[Graded]:
    """Five students, two exercises, every notebook status, hostile text everywhere."""
    passed, failed = CheckStatus.PASSED, CheckStatus.FAILED

    def graded(student: str, exercise: str, outcomes: list[Outcome], **kw: object) -> Graded:
        g = Graded(student, exercise, f"title of {exercise}", sum(o.points for o in outcomes))
        g.outcomes = outcomes
        for name, value in kw.items():
            setattr(g, name, value)
        return g

    full = [_outcome("keys", 5, passed), _outcome("fingerprint", 5, passed)]
    nothing = [_outcome("keys", 5, CheckStatus.NOT_GRADED), _outcome("fingerprint", 5,
                                                                     CheckStatus.NOT_GRADED)]
    return [
        graded("ana", "ex01", full, notebook="ex01_keys.ipynb"),
        graded("ana", "ex02", [
            _outcome("lock", 6, failed, expected="one holder", got=SCRIPT_TAG, hint=BREAK_OUT),
            _outcome("release", 4, passed),
        ], notebook=f"ex02 {BREAK_OUT}.ipynb", notes=[f"printed {SCRIPT_TAG}"]),
        graded(HOSTILE_NAME, "ex01", nothing, status=NotebookStatus.MISSING,
               notes=["no notebook for ex01"]),
        graded(HOSTILE_NAME, "ex02", [
            _outcome("lock", 6, CheckStatus.NOT_GRADED, got=f"died: {SCRIPT_TAG}"),
            _outcome("release", 4, CheckStatus.NOT_GRADED),
        ], status=NotebookStatus.CRASHED, notes=[f"</td></tr></table>{SCRIPT_TAG}"]),
        graded(QUOTE_NAME, "ex01", [
            _outcome("keys", 5, CheckStatus.TIMED_OUT, got="no answer in 5 s"),
            _outcome("fingerprint", 5, passed),
        ], status=NotebookStatus.TIMED_OUT),
        graded(QUOTE_NAME, "ex02", [
            _outcome("lock", 6, CheckStatus.NOT_STARTED), _outcome("release", 4,
                                                                    CheckStatus.NOT_STARTED),
        ], status=NotebookStatus.NOT_STARTED),
        graded("bob", "ex01", full, status=NotebookStatus.LIMIT_HIT,
               notes=["memory limit (1 GiB) hit"]),
        graded("bob", "ex02", [
            Outcome("lock", 6, 0, failed, expected="no lost job", got="a lost job", severe=True),
            _outcome("release", 4, passed),
        ]),
        graded(ODD_NAME, "ex01", full),
        graded(ODD_NAME, "ex02", [_outcome("lock", 6, passed), _outcome("release", 4, passed)]),
    ]


def write_run(results: list[Graded], run_dir: Path) -> Path:
    """What ``grade_folder`` writes, in its order."""
    write_gradebook(results, run_dir / "grades.csv")
    write_totals(results, run_dir / "totals.csv")
    write_feedback(results, run_dir / "feedback")
    return write_report(results, run_dir)
