"""Where an exercise's checks come from: public ones in labkit, hidden ones with the instructor.

Public checks live in ``labkit/grading/exercises/exNN/checks.py`` and ship with labkit, so a
student's ``check("exNN")`` can run them. Hidden checks live in the instructor's
``solutions/hidden/exNN.py`` (never in the release bundle) and are loaded by file path
only when grading, each file defining ``CHECKS = Checks("exNN", hidden=True)``.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
import re
import types
from pathlib import Path

from labkit.grading import exercises as _exercises_pkg
from labkit.grading.checks import Check, Checks
from labkit.lang import add_catalogs

EXERCISE_ID = re.compile(r"^ex\d\d$")
#: The hidden checks' catalog in each language: ``solutions/locale/LANG/hidden.po``
#: (beside ``solutions/hidden/``; it never ships, as the checks never do).
HIDDEN_CATALOG = "hidden"


def exercises() -> list[str]:
    """The ids of every exercise labkit has checks for, in order."""
    names = [m.name for m in pkgutil.iter_modules(_exercises_pkg.__path__) if m.ispkg]
    return sorted(n for n in names if EXERCISE_ID.match(n))


def public(exercise: str) -> Checks:
    """The public checks of ``exercise`` (ValueError naming the known ones if it does not exist)."""
    if not EXERCISE_ID.match(exercise) or exercise not in exercises():
        raise ValueError(
            f"no exercise called {exercise!r}; the exercises are {', '.join(exercises())}"
        )
    module = importlib.import_module(f"labkit.grading.exercises.{exercise}.checks")
    found: Checks = module.CHECKS
    return found


def harness_module(exercise: str) -> str:
    """The module of ``exercise``'s harness functions (it may have none)."""
    return f"labkit.grading.exercises.{exercise}.harness"


def hidden(exercise: str, hidden_dir: Path) -> list[Check]:
    """The instructor's hidden checks for ``exercise`` from ``hidden_dir``; [] if none exist."""
    path = Path(hidden_dir) / f"{exercise}.py"
    # Their hints and expectations in Portuguese: solutions/locale/pt_BR/hidden.po.
    add_catalogs(Path(hidden_dir).parent / "locale", HIDDEN_CATALOG)
    if not path.exists():
        return []
    # Read every time and compiled from what was read, never through __pycache__: a .pyc
    # that outlived an edit (same size, same second) must not stand in for the file.
    module = types.ModuleType(f"labkit_hidden_{exercise}")
    module.__file__ = str(path)
    exec(_compiled(path.read_text(encoding="utf-8"), str(path)), module.__dict__)
    collected = getattr(module, "CHECKS", None)
    if not isinstance(collected, Checks):
        raise ValueError(f"{path} must define CHECKS = Checks({exercise!r}, hidden=True)")
    if collected.exercise != exercise or not collected.hidden:
        raise ValueError(f"{path} must define CHECKS = Checks({exercise!r}, hidden=True)")
    return list(collected)


@functools.lru_cache(maxsize=32)
def _compiled(source: str, filename: str) -> types.CodeType:
    """``source`` compiled, once per text: a test run loads a hidden file thousands of
    times, each load as the file reads now, and an edit is another text."""
    return compile(source, filename, "exec")


def all_checks(exercise: str, hidden_dir: Path | None = None) -> list[Check]:
    """Public checks, then hidden ones when ``hidden_dir`` is given."""
    found = list(public(exercise))
    if hidden_dir is not None:
        found += hidden(exercise, hidden_dir)
    return found
