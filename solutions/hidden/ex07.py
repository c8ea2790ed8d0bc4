"""Hidden checks for exercise 7: other thresholds, and no wall clock."""

from __future__ import annotations

from labkit.grading.exercises.helpers import because_of
from labkit.grading.exercises.ex07.checks import drive
from labkit.grading.checks import Checks, Namespace, expect
from labkit.lang import _

CHECKS = Checks("ex07", hidden=True)


@CHECKS.add(1, "threshold is a parameter: threshold=1 opens at the first failure")
def threshold_of_one(ns: Namespace) -> None:
    [_first, state] = drive(ns, [["fail", 0], ["state", 0]], threshold=1, cooldown_s=5.0)
    expect(state == "open", "open after one failure with threshold=1", state)


@CHECKS.add(1, "read time only from the clock you were given")
def ignores_the_wall_clock(ns: Namespace) -> None:
    out = drive(
        ns,
        [["fail", 0], ["state", 0], ["wall", 3600.0], ["allow", 0]],
        threshold=1,
        cooldown_s=5.0,
    )
    expect(
        out[1] == "open",
        _("open after one failure with threshold=1") + because_of("threshold_of_one"),
        out[1],
    )
    expect(out[3] is False, "allow() False: the fake clock did not move", out[3])
