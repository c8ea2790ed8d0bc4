"""Generated examples for checks: the same ones on every run, the failing one shrunk.

``holds(strategy, prop)`` runs ``prop`` on examples Hypothesis generates
(derandomized, no example database, a bounded count), so a check stays inside its
timeout, a failure replays exactly, and the student reads the smallest input that
breaks their code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, Verbosity, given, settings
from hypothesis import strategies as st

from labkit.grading.core import CheckFailed


def holds(
    strategy: st.SearchStrategy[Any], prop: Callable[[Any], None], examples: int = 30
) -> None:
    """Run ``prop(example)`` on generated examples; the first failure fails the check."""
    runner = settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        verbosity=Verbosity.quiet,
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
    )(given(strategy)(prop))
    try:
        runner()
    except BaseExceptionGroup as group:  # a flaky student function: its first failure
        found = group.subgroup(CheckFailed)
        if found is None:
            raise
        first: BaseException = found
        while isinstance(first, BaseExceptionGroup):
            first = first.exceptions[0]
        raise first from None
