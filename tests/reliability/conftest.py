"""Sizes for the reliability suite: small under ``make test``, large under ``make soak``.

``--soak`` is registered in tests/conftest.py. Every test that kills a process counts the
kills that fired (return code -9) and prints its seed with a one-line replay.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest


@dataclass(frozen=True)
class Sizes:
    jobs: int
    soak_jobs: int
    kills: int
    #: The chaos runs (test_chaos.py): jobs, and how many faults to inject.
    chaos_jobs: int = 200
    chaos_events: int = 6


@pytest.fixture
def sizes(request: pytest.FixtureRequest) -> Sizes:
    """How big to go: 10,000 jobs and dozens of kills under --soak, a few hundred in CI."""
    if request.config.getoption("--soak"):
        return Sizes(jobs=10_000, soak_jobs=2_000, kills=30, chaos_jobs=5_000, chaos_events=60)
    return Sizes(jobs=400, soak_jobs=300, kills=5)
