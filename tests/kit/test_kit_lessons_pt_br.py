"""The Portuguese lessons, run in the student kit with the kit's own ``make check-one``.

The same proof as ``test_kit_lessons.py`` gives the English lessons, for the edition a
student opens with ``LANG=pt_BR make lab``, with one saving: a Portuguese lesson whose
code cells and stored outputs are the English lesson's, cell for cell (the edition is
executed in Portuguese when it is built, so the package printed nothing Portuguese in
it), stores what the English run proves. Those take turns (``turns.py``: CI's turn is the
commit's place in the history; ``LABKIT_ZOO_SEED=all`` or no turn set runs every one);
the lessons that print Portuguese (check reports, localized tables) run on every turn.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from studentkit import language_make_picks, make_check_runs
from turns import this_turn

pytestmark = pytest.mark.slow

#: How many of the lessons that print the same as in English run per turn (14 of 17 on
#: 2026-12-07: the whole edition took 143 s of a worker, as long as the English one).
#: Two until 2026-12-08, when CI's run took 20 minutes on a machine half as fast.
SAME_PER_TURN = 1


def _code_cells(path: Path) -> list[tuple[Any, Any]]:
    """Each code cell's source and stored outputs, as the notebook file holds them."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return [(c["source"], c["outputs"]) for c in cells if c["cell_type"] == "code"]


def test_the_portuguese_lessons_run_in_the_kit_in_portuguese(
    kit: Path, postgres_dsn: str, redis_url: str, amqp_url: str
) -> None:
    """The Portuguese edition, nbval-checked like the English one: ``LANG=pt_BR`` is all a
    student sets, and what the package prints in it (check reports, tables) is Portuguese.
    In a file of its own, so it can run beside the English lessons: lessons 13 and 14
    name their schemas, key prefixes and queues per run, so two runs share the servers
    without touching each other's state."""
    english = sorted(p.name for p in (kit / "notebooks").glob("[0-9]*.ipynb"))
    lessons = sorted(p.name for p in (kit / "notebooks" / "pt_BR").glob("[0-9]*.ipynb"))
    assert lessons == english
    same = [name for name in lessons
            if _code_cells(kit / "notebooks" / "pt_BR" / name)
            == _code_cells(kit / "notebooks" / name)]
    localized = [name for name in lessons if name not in same]
    # Lessons 04, 07 and 11 print check reports and tables in Portuguese: if none did,
    # the comparison above would be comparing something other than the outputs.
    assert len(localized) >= 3, localized
    turn = os.environ.get("LABKIT_ZOO_SEED") or "all"
    picked = sorted(localized + this_turn("Portuguese lessons", same, SAME_PER_TURN, turn))
    picks = language_make_picks(kit, {"LANG": "pt_BR.UTF-8", "LABKIT_LANG": ""})
    assert picks == ["pt_BR", "notebooks/pt_BR"]
    make_check_runs(kit, "notebooks/pt_BR", picked, {"LABKIT_LANG": "pt_BR"},
                    every=picked == lessons)
