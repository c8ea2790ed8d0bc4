"""The seeds of a grading run: the run's own, which generated inputs are drawn from, and
each check's, which the student's ``random`` module is seeded with.

A run prints its seed and keeps it in ``run.json``; ``labkit grade --seed`` replays it,
inputs and scores alike. ``check()`` has no run seed: it draws the fixed examples a
student can replay in the notebook.
"""

from __future__ import annotations

_grading_seed: list[int] = []


def use_grading_seed(seed: int | None) -> None:
    """Set (or, with None, clear) the seed ``labkit grade`` draws this run's inputs from.

    Checks that generate inputs (``exercises.helpers.holds_for``) draw the same
    examples on every ``check()``, so a student's failure replays; under ``labkit grade``
    they draw from this seed instead, fresh for each run unless ``--seed`` names one,
    so no fixed scene can be learned from ``check()``. The run prints it and keeps it
    in ``run.json``.
    """
    _grading_seed.clear()
    if seed is not None:
        _grading_seed.append(seed)


def grading_seed() -> int | None:
    """The seed of this ``labkit grade`` run, or None in ``check()``."""
    return _grading_seed[0] if _grading_seed else None


def student_seed(check: str) -> str:
    """What the student's ``random`` module is seeded with while ``check`` runs.

    The lab's functions take a seeded ``random.Random``; code that draws from the module
    instead (a mistake some checks catch) would otherwise score differently from run to
    run, and between ``check()`` and ``labkit grade``. Seeded per check, from the run's
    seed, a replay with ``--seed`` gives that code the same draws and the same score.
    """
    seed = grading_seed()
    return f"{'check' if seed is None else seed}:{check}"
