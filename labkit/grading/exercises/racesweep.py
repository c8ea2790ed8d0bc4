"""The race explorer on a student's function: two copies, every way one can overtake the other.

Harness side, ``race_sweep(folder, files, first, second, seed)``: one clean run of
``first`` alone counts its statements. Then, for each stop ``n`` (all of them when few,
else a sample drawn from the check's seed), the check's starting files are copied into a
folder of their own and ``labkit.explore.interleavings.one_schedule`` runs ``first``
stopped right after its statement ``n`` while ``second`` runs whole, in two forked
processes (so a ``threading.Lock`` or a module-level flag guards nothing, as between
two workers). Each schedule's folder is left for the check.

Check side, ``after_every_schedule(ns, target, make, args, judge, want, hint)``: calls
the harness and judges each schedule's files with ``judge(folder, schedule)``; a failure
names the schedule ("the first worker stopped right after its statement 2 while the
second ran") and the sweep's seed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from labkit.explore.interleavings import Copy, alone, one_schedule, schedules
from labkit.grading.checks import CheckFailed, Namespace
from labkit.grading.exercises.killsweep import (
    raise_if_stub,
    snapshot,
    swept,
    with_checks_sample,
)
from labkit.lang import _

#: At most this many schedules per sweep (stopping before the first statement, and
#: after the last, always among them).
LIMIT = 10
#: How long ``second`` may take before it counts as blocked by ``first``'s lock: this
#: many times what one copy took alone, within the bounds below. A correct solution
#: blocks the second copy in most schedules (that is its lock working), and a fixed
#: second of waiting each time was most of a race check's run.
GRACE_TIMES, GRACE_MIN_S, GRACE_MAX_S = 5.0, 0.2, 1.0


def _said(copy: Copy) -> dict[str, Any]:
    return {"ended": copy.ended, "returned": copy.returned}


def race_stops(count: int, limit: int, seed: int) -> list[int]:
    """Where the first copy stops in each schedule (``schedules``, ``with_checks_sample``)."""
    return with_checks_sample(schedules, count, limit, seed)


def race_sweep(
    folder: str,
    files: list[str],
    first: Callable[[Path], Any],
    second: Callable[[Path], Any],
    seed: int,
    limit: int = LIMIT,
) -> dict[str, Any]:
    """``{"probe", "count", "schedules": [{"after", "folder", "stopped", "blocked",
    "first", "second"}]}``; ``first(folder)`` and ``second(folder)`` run the student's code
    on that folder's files."""
    start = Path(folder)
    snapshot(start, start / "alone", files)
    began = time.monotonic()
    probe = alone(partial(first, start / "alone"))
    took = time.monotonic() - began
    raise_if_stub(probe.ended)
    grace = min(GRACE_MAX_S, max(GRACE_MIN_S, GRACE_TIMES * took))
    runs = []
    for n in race_stops(max(probe.statements, 0), limit, seed):
        where = start / f"order-{n}"
        snapshot(start, where, files)
        run = one_schedule(partial(first, where), partial(second, where), n, grace=grace)
        runs.append(
            {
                "after": n,
                "folder": str(where),
                "stopped": run.stopped,
                "blocked": run.second_blocked,
                "first": _said(run.first),
                "second": _said(run.second),
            }
        )
    return {"probe": probe.ended, "count": probe.statements, "schedules": runs}


def _schedule_words(run: dict[str, Any], who: str) -> str:
    n = run["after"]
    where = (
        _("before its first statement")
        if n == 0
        else _("right after its statement {number}").format(number=n)
    )
    if not run["stopped"]:
        return _("the first {who} ran whole, then the second").format(who=who)
    if run["blocked"]:
        return _("the first {who} stopped {where} (holding the lock the second waited on)").format(
            who=who, where=where
        )
    return _("the first {who} stopped {where} while the second ran whole").format(
        who=who, where=where
    )


def after_every_schedule(
    ns: Namespace,
    target: str,
    make: Callable[[Path], None],
    args: list[Any],
    judge: Callable[[Path, dict[str, Any]], tuple[bool, str]],
    want: str,
    hint: str,
    who: str = "worker",
) -> int:
    """Make the starting files with ``make(folder)``, sweep ``target(folder, *args, seed)``.

    ``judge(schedule_folder, schedule)`` says ``(ok, what it found)``; ``who`` names the
    two copies in the feedback ("worker", "operator"). Returns how many schedules were
    judged.
    """
    with swept(ns, target, make, args) as (got, seed):
        for run in got["schedules"]:
            ok, seen = judge(Path(run["folder"]), run)
            if not ok:
                replay = _("stop {stop} of {count}, sweep seed {seed}").format(
                    stop=run["after"], count=got["count"], seed=seed
                )
                raise CheckFailed(
                    _("{want} when {schedule}").format(
                        want=want, schedule=_schedule_words(run, who)
                    ),
                    f"{seen} ({replay})",
                    hint,
                )
        return len(got["schedules"])
