"""Where a course's folders live: the labkit package, solutions, hidden checks, exercises, lessons.

One object names them (nbgrader's ``CourseDirectory`` does the same), so the CLI, the
grader, the release and the student kit agree on where things are. ``Course()`` is the
source checkout this labkit was installed from; a kit or a test names another root.
Reading it imports nothing: the grader's student process and ``labkit inspect`` can.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

#: The ``labkit`` package folder (what a sandbox mounts read-only for the student).
PACKAGE = Path(__file__).resolve().parents[1]
#: The checkout that holds the package (and, for an instructor, ``solutions/``).
ROOT = PACKAGE.parent


@dataclass(frozen=True)
class Course:
    """A course's folders, all under ``root``."""

    root: Path = ROOT

    @property
    def solutions(self) -> Path:
        """The instructor's reference notebooks: the single source of every exercise."""
        return self.root / "solutions"

    @property
    def hidden(self) -> Path:
        """The instructor's hidden checks, one ``exNN.py`` each (never in a kit)."""
        return self.solutions / "hidden"

    @property
    def exercises(self) -> Path:
        """The student notebooks ``labkit release`` writes from the solutions."""
        return self.root / "exercises"

    @property
    def notebooks(self) -> Path:
        """The lessons."""
        return self.root / "notebooks"


def hidden_of(solutions: Path) -> Path:
    """The hidden checks' folder of a solutions folder given on the command line."""
    return Path(solutions) / "hidden"
