"""The crash explorer: every strategy crashed at every point, restarted, and judged from the world.

``from labkit.explore import crash_matrix, run_scenario, replay, Scenario`` is what the
lessons use. Inside: ``matrix`` runs the scenarios and builds the table;
``verdicts`` holds its rows and their pivot; ``strategies`` the lesson-06 strategies
as handlers; ``fuzz`` the randomized runs of many jobs under many faults.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from labkit import lazy_exports

if TYPE_CHECKING:
    from labkit.explore.matrix import (
        Scenario,
        crash_matrix,
        explore_all_boundaries,
        replay,
        run_scenario,
    )

_PUBLIC = ("Scenario", "crash_matrix", "explore_all_boundaries", "replay", "run_scenario")
__all__ = ["Scenario", "crash_matrix", "explore_all_boundaries", "replay", "run_scenario"]
__getattr__, __dir__ = lazy_exports(__name__, dict.fromkeys(_PUBLIC, "labkit.explore.matrix"))
