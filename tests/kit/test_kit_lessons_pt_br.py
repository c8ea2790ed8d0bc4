"""Every Portuguese lesson, run in the student kit with the kit's own ``make check``.

The same proof as ``test_kit_lessons.py`` gives the English lessons, for the edition a
student opens with ``LANG=pt_BR make lab``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from studentkit import language_make_picks, make_check_runs

pytestmark = pytest.mark.slow


def test_every_portuguese_lesson_runs_in_the_kit_in_portuguese(
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
    picked = language_make_picks(kit, {"LANG": "pt_BR.UTF-8", "LABKIT_LANG": ""})
    assert picked == ["pt_BR", "notebooks/pt_BR"]
    make_check_runs(kit, "notebooks/pt_BR", lessons, {"LABKIT_LANG": "pt_BR"})
