"""A zoo of plausible wrong solutions: each loses points on the check that names its mistake.

Each entry overrides one or two functions of the reference solution with a classic
mistake, then runs the named check and others until one passes. The named check must
fail, the score must drop, and not every check may fail (the feedback points at one
mistake).
The entries live beside their exercise, in ``test_zoo_exNN.py``; this file holds what
is checked across the whole zoo.
"""

from __future__ import annotations

import pytest
import test_zoo_ex01
import test_zoo_ex02
import test_zoo_ex03
import test_zoo_ex04
import test_zoo_ex05
import test_zoo_ex06
import test_zoo_ex07
from gradingkit import assert_severe

PARTS = (
    test_zoo_ex01,
    test_zoo_ex02,
    test_zoo_ex03,
    test_zoo_ex04,
    test_zoo_ex05,
    test_zoo_ex06,
    test_zoo_ex07,
)
#: Every entry of exercises 1 to 7, and what each one's check must say it expected.
ZOO = [entry for part in PARTS for entry in part.ZOO]
SAYS = {mistake: says for part in PARTS for mistake, says in part.SAYS.items()}


#: Mistakes so serious that a solution making them cannot score above half the points.
SERIOUS = [
    "retried jobs never run again (only pending is ready)",
    "a refused attempt removes the 'stale' lock file it could not take",  # two run at once
]


@pytest.mark.parametrize("mistake", SERIOUS)
def test_a_serious_mistake_costs_at_least_half_the_points(mistake: str) -> None:
    # Its entry's test proves the named check fails; a severe check's failure is capped.
    [(exercise, check)] = [(e, c) for e, m, c, _ in ZOO if m == mistake]
    assert_severe(exercise, mistake, check)


def test_the_zoo_covers_every_exercise_three_times() -> None:
    from collections import Counter

    from test_zoo_ex08 import ZOO as ZOO_EX08  # ex08's wrong task modules are files too
    from test_zoo_ex09 import ZOO as ZOO_EX09  # ex09's wrong consumers run as processes
    from test_zoo_ex10 import ZOO as ZOO_EX10  # ex10's wrong apps are files: their own zoo
    from test_zoo_ex11_13 import ZOO as ZOO_EX11_13  # exercises 11-13 keep their own zoo
    from test_zoo_ex12 import ZOO as ZOO_EX12  # exercise 12's red-team round
    from test_zoo_ex14 import ZOO as ZOO_EX14  # exercise 14's edits of the reference

    from labkit.grading import catalog

    counts = (
        Counter(e for e, *_ in ZOO)
        + Counter({"ex08": len(ZOO_EX08)})
        + Counter({"ex09": len(ZOO_EX09)})
        + Counter({"ex10": len(ZOO_EX10)})
        + Counter(e for e, *_ in ZOO_EX11_13)
        + Counter(e for e, *_ in ZOO_EX12)
        + Counter(e for e, *_ in ZOO_EX14)
    )
    assert sorted(SAYS) == sorted(m for _, m, _, _ in ZOO)
    assert all(counts[e] >= 3 for e in catalog.exercises()), counts


def test_every_entry_builds_the_notebook_a_student_would_hand_in() -> None:
    # Through the sandbox CI grades a sample of the zoo; an entry whose edit no longer
    # matches the reference (once, in one code cell) would break only the run that drew
    # it, or bench/zoo.py. Building every entry's notebook is cheap: all of them, here.
    from zoo_notebooks import every_entry

    entries = every_entry()
    built = [entry.notebook() for entry in entries]
    assert len(built) > 500, len(built)
    # A mistake's name is its handle everywhere (bench/zoo.py --mistakes, the rotation's
    # place, the sandbox's records): two entries under one name would hide one of them.
    from collections import Counter

    twice = [m for m, n in Counter(e.mistake for e in entries).items() if n > 1]
    assert not twice, twice


def test_every_right_solution_builds_the_notebook_a_student_would_hand_in() -> None:
    # bench/zoo.py --right grades each as a student's notebook through the sandbox, where
    # every check runs on it (the tests here run the one it once lost to, in process).
    from zoo_notebooks import right_entries

    from labkit.grading import catalog

    entries = right_entries()
    built = [entry.notebook() for entry in entries]
    assert {e.exercise for e in entries} == set(catalog.exercises())
    assert len(built) == len(entries) > 100, len(built)


def test_the_rotation_grades_every_entry_through_the_sandbox_in_turn() -> None:
    # CI passes the commit's place in the history as LABKIT_ZOO_SEED: as many successive
    # turns as the longest exercise (or its swept checks) has entries take every entry
    # once, and every exercise with swept checks has one of their entries graded every
    # time. A random draw per commit would leave some ungraded for hundreds of commits.
    from collections import Counter

    from zoo_notebooks import every_entry
    from zoograding import (
        IN_PROCESS,
        PLAIN_IN_PROCESS,
        ROTATING,
        SWEPT,
        SWEPT_ROTATING,
        in_the_sandbox,
        runs_its_control,
        skip_unless_drawn,
        skip_unless_taken,
    )

    entries = every_entry()
    rotating = Counter(e.exercise for e in entries if e.check not in SWEPT)
    swept = Counter(e.exercise for e in entries if e.check in SWEPT)
    turns = max(
        *(-(-n // ROTATING) for n in rotating.values()),
        *(-(-n // SWEPT_ROTATING) for n in swept.values()),
    )
    start = 1234
    taken: Counter[str] = Counter()
    for turn in range(start, start + turns):
        graded = in_the_sandbox(entries, str(turn))
        assert sorted(e.exercise for e in graded if e.check in SWEPT) == sorted(swept)
        taken.update(e.mistake for e in graded)
    assert set(taken) == {e.mistake for e in entries}
    # Each exercise's entries once per round of its own length, none twice in one round.
    mine = [e for e in entries if e.exercise == "ex07" and e.check not in SWEPT]
    once = Counter(
        e.mistake for t in range(start, start + len(mine)) for e in in_the_sandbox(mine, str(t))
    )
    assert set(once.values()) == {1} and len(once) == len(mine)
    # The service exercises' in-process share and their control third: as many turns as
    # each share's inverse run every entry once.
    services = [e.mistake for e in entries if e.exercise in ("ex08", "ex09", "ex10")]
    drawn: Counter[str] = Counter()
    for turn in range(start, start + round(1 / IN_PROCESS)):
        for mistake in services:
            try:
                skip_unless_drawn(mistake, str(turn))
            except pytest.skip.Exception:
                continue
            drawn[mistake] += 1
    assert set(drawn) == set(services) and set(drawn.values()) == {1}
    controlled = Counter(
        m for t in range(start, start + 3) for m in services if runs_its_control(m, str(t))
    )
    assert set(controlled) == set(services) and set(controlled.values()) == {1}
    # The other exercises' in-process share: as many turns as its inverse run every entry
    # once.
    plain = [e.mistake for e in entries if e.exercise not in ("ex08", "ex09", "ex10")]
    ran: Counter[str] = Counter()
    for turn in range(start, start + round(1 / PLAIN_IN_PROCESS)):
        for mistake in plain:
            try:
                skip_unless_taken(mistake, str(turn))
            except pytest.skip.Exception:
                continue
            ran[mistake] += 1
    assert set(ran) == set(plain) and set(ran.values()) == {1}
