"""Exercises and grading: ``from labkit.grading import check`` in a notebook, ``labkit grade``
and ``labkit release`` for the instructor."""

from labkit.grading.student import check

__all__ = ["check"]
