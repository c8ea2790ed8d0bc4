"""The other half of the lessons in the student kit: 01, 03, 05, ... (``make check-one``).

test_kit_lessons.py runs the first half and says what the run proves; the two halves
run on two workers, since the whole edition in one test was the suite's longest.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from studentkit import every_other_lesson, make_check_runs

pytestmark = pytest.mark.slow


def test_every_other_lesson_from_the_second_runs_in_the_kit_and_prints_what_is_stored(
    kit: Path, postgres_dsn: str, redis_url: str, amqp_url: str
) -> None:
    make_check_runs(kit, "notebooks", every_other_lesson(kit, 1), {}, every=False)
