"""The student's side: ``check("ex03")`` in a notebook cell.

It finds the student's definitions in the namespace of the code that called it (the
notebook's globals), runs the exercise's public checks and prints a table. Hidden
checks are not here: they run only when the instructor grades.
"""

from __future__ import annotations

import sys
from typing import Any

from labkit.grading import catalog
from labkit.grading.checks import Outcome, run_checks
from labkit.grading.display import check_report
from labkit.grading.scoring import shown
from labkit.tables import display


def check(exercise: str, namespace: dict[str, Any] | None = None) -> None:
    """Run the public checks of ``exercise`` on the caller's definitions and print the table.

    ``namespace`` defaults to the caller's globals (the notebook). Nothing is returned,
    so the cell shows only the table; tests call ``run_public`` for the outcomes.
    """
    values = namespace if namespace is not None else sys._getframe(1).f_globals
    checks = catalog.public(exercise)
    # HTML with the score on top in a notebook; format_report's text everywhere else.
    display(check_report(f"{exercise}: {shown(checks.title)}", run_public(exercise, values)))


def run_public(exercise: str, values: dict[str, Any]) -> list[Outcome]:
    """The outcomes of the public checks of ``exercise`` on ``values``."""
    return run_checks(list(catalog.public(exercise)), values)
