"""Generated inputs: the same in every ``check()``, this run's own under ``labkit grade``.

``holds_for`` draws a property check's examples. A student sees the same ones each time
they run ``check()``, so a failure replays; the grader draws from the run's seed, so the
examples a class is graded on were never shown, and the same seed draws them again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from hypothesis import strategies as st

from labkit.grading.exercises.helpers import holds_for
from labkit.grading.seeds import grading_seed, use_grading_seed


@pytest.fixture(autouse=True)
def no_seed_left() -> Iterator[None]:
    yield
    use_grading_seed(None)


def _examples() -> list[int]:
    seen: list[int] = []

    def prop(n: int) -> None:  # holds for every n: only what was drawn matters here
        seen.append(n)

    holds_for(st.integers(0, 10**9), prop, examples=20)
    return seen


def test_check_draws_the_same_examples_every_time() -> None:
    assert grading_seed() is None
    assert _examples() == _examples()


def test_a_grading_seed_draws_other_examples_and_replays_them() -> None:
    fixed = _examples()
    use_grading_seed(12345)
    first = _examples()
    assert first == _examples()  # the same seed replays the run
    use_grading_seed(67890)
    other = _examples()
    assert set(first) != set(fixed) and set(other) != set(first)


def test_student_code_runs_in_the_time_zone_the_run_chose(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import dataclasses

    from gradingkit import confined_student, in_a_check

    from labkit.grading.isolation.confine import Confinement

    confined = dataclasses.replace(Confinement.detect(), timezone="Asia/Kolkata")
    cell = "import time\ndef offset():\n    return time.strftime('%z')\n"
    with confined_student(tmp_path, confined, [(0, cell)]) as student:
        assert in_a_check(student, lambda ns: ns.offset()) == "+0530"


def test_a_grading_seed_adds_unseen_inputs_and_keeps_every_one_check_draws() -> None:
    """Found by grading the whole zoo (bench/zoo.py): under seed 7 the drawn payloads held
    no string with blanks around it and the drawn tables no order that exposed "ids in
    table order", so two mistakes check() catches scored full marks in grading."""
    in_check: list[int] = []
    in_grading: list[int] = []

    def drawn_in(seen: list[int]) -> Callable[[int], None]:
        def prop(value: int) -> None:
            seen.append(value)

        return prop

    holds_for(st.integers(0, 10**9), drawn_in(in_check), examples=10)
    use_grading_seed(7)
    try:
        holds_for(st.integers(0, 10**9), drawn_in(in_grading), examples=10)
    finally:
        use_grading_seed(None)
    assert set(in_check) <= set(in_grading), "grading lost inputs check() draws"
    assert set(in_grading) - set(in_check), "the grading seed drew nothing new"


@pytest.mark.parametrize("count", [5, 12, 40])
def test_a_grading_seed_adds_kill_points_and_race_stops_and_keeps_check_ones(count: int) -> None:
    """The sweeps sample where to kill and where to stop the first copy once a run has more
    boundaries than they try: a grading seed adds its own sample to check()'s."""
    from labkit.grading.exercises.helpers import SEED
    from labkit.grading.exercises.killsweep import LIMIT as KILL_LIMIT
    from labkit.grading.exercises.killsweep import kill_targets
    from labkit.grading.exercises.racesweep import LIMIT as RACE_LIMIT
    from labkit.grading.exercises.racesweep import race_stops

    for pick, limit in ((kill_targets, KILL_LIMIT), (race_stops, RACE_LIMIT)):
        points = count + (pick is race_stops)  # a race may also stop before the first
        in_check, in_grading = set(pick(count, limit, SEED)), set(pick(count, limit, 7))
        assert in_check <= in_grading, f"{pick.__name__}: grading lost check()'s points"
        assert len(in_check) == min(limit, points)
        if points > limit:
            assert in_grading - in_check, f"{pick.__name__}: the seed added nothing"
        else:
            assert in_grading == in_check, f"{pick.__name__}: every point is tried anyway"
