"""The crash explorer on a student's function: killed right after each of its writes, for real.

Harness side, ``sweep(folder, files, first, restart, ...)``: the check made the starting
database files in ``folder``. One clean run (the probe) lists the boundaries the
student's code crosses (``labkit.explore.boundaries``: each write, each COMMIT, each
mark the harness adds). Then, for each boundary in turn (all of them when few, else a
sample drawn from the check's seed), the starting files are copied into a life folder of
their own (SQLite's backup API: a consistent snapshot, never a half-copied file), the
student's code runs there in a forked child that is SIGKILLed right after that
boundary, and ``restart`` runs what the exercise's contract says comes next (the
redelivery, the retried request) in another child. Each life's folder is left for the
check.

Check side, ``after_every_kill(ns, target, args, judge, ...)``: calls the harness and
judges every life's files itself with ``judge(folder)``. A life whose kill did not fire
fails the check (the fault must fire); a judgment that fails names the boundary in the
student's words, what the files hold, and how to replay it.
"""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from random import Random
from typing import Any

from labkit.explore.boundaries import Tracer, live, targets
from labkit.grading.checks import CheckFailed, Namespace
from labkit.grading.exercises.helpers import SEED
from labkit.grading.seeds import grading_seed
from labkit.grading.stub import is_stub_text
from labkit.lang import _

#: At most this many kills per sweep (the first and last boundary always among them).
LIMIT = 12


def one_transaction() -> str:
    """What a failed sweep says to do, unless the check knows better."""
    return _(
        "what must happen together must commit in one transaction, so that the restart "
        "finds it all done or not started"
    )


def snapshot(start: Path, life: Path, files: list[str]) -> None:
    """Copy ``files`` from ``start`` into the new folder ``life``, each one consistent."""
    life.mkdir()
    for name in files:
        src, dst = sqlite3.connect(start / name), sqlite3.connect(life / name)
        try:
            src.backup(dst)
        finally:
            src.close()
            dst.close()


def raise_if_stub(ended: str) -> None:
    """A child that ended by raising the exercise stub: raise it here, so the check says
    "not started yet" instead of judging a run that never began."""
    said = ended.removeprefix("raised ")
    if said.startswith("NotImplementedError: ") and is_stub_text(said.partition(": ")[2]):
        raise NotImplementedError(said.partition(": ")[2])


def sweep(
    folder: str,
    files: list[str],
    first: Callable[[Path, Tracer], Any],
    restart: Callable[[Path, Tracer], Any],
    seed: int,
    limit: int = LIMIT,
) -> dict[str, Any]:
    """Kill ``first`` right after each boundary in a copy of ``files``; restart; report.

    Both are called as ``fn(life_folder, tracer)``, each in a child of its own; the
    restart's tracer only watches.

    ``{"probe": ended, "count": n, "lives": [{"index", "boundary", "folder", "killed",
    "restart"}]}``; the probe's folder is ``folder/life-0`` (nobody killed).
    """
    start = Path(folder)
    snapshot(start, start / "life-0", files)
    probe = live(partial(first, start / "life-0"))
    raise_if_stub(probe.ended)
    lives: list[dict[str, Any]] = []
    for k in kill_targets(len(probe.boundaries), limit, seed):
        where = start / f"life-{k}"
        snapshot(start, where, files)
        killed = live(partial(first, where), kill_after=k)
        said = [b.words() for b in killed.boundaries if b.index == k] or ["a write"]
        again = "-"
        if killed.killed:
            again = live(partial(restart, where)).ended
            again = "ran to its end" if again == "returned" else again
        lives.append(
            {
                "index": k,
                "boundary": said[0],
                "folder": str(where),
                "killed": killed.killed,
                "ended": killed.ended,
                "restart": again,
            }
        )
    return {"probe": probe.ended, "count": len(probe.boundaries), "lives": lives}


def with_checks_sample(
    sample: Callable[[int, int, Random], list[int]], count: int, limit: int, seed: int
) -> list[int]:
    """``sample(count, limit, rng)`` drawn with ``check()``'s seed (``SEED``) and, under a
    grading run's own seed, with that one too: a grading seed adds points nobody has seen
    and never loses one ``check()`` would have caught a mistake at (only a run with more
    points than ``limit`` is sampled at all)."""
    chosen = set(sample(count, limit, Random(SEED)))
    if seed != SEED:
        chosen |= set(sample(count, limit, Random(seed)))
    return sorted(chosen)


def kill_targets(count: int, limit: int, seed: int) -> list[int]:
    """Which of boundaries 1..count a sweep kills after (``targets``, ``with_checks_sample``)."""
    return with_checks_sample(targets, count, limit, seed)


def sweep_seed() -> int:
    """What a sweep samples with: the grading run's seed, or in ``check()`` the fixed one."""
    seed = grading_seed()
    return SEED if seed is None else seed


def hash_salt(nth: int) -> int:
    """The ``PYTHONHASHSEED`` of a check's ``nth`` process (server, worker, consumer): from
    the grading seed, never 0 (0 turns the salt off). Consecutive processes hash apart,
    as two machines, or a process and its restart, do: a key built from ``hash()`` does
    not survive a restart, and the same run replays with the same seed."""
    return 1 + (sweep_seed() * 7919 + nth) % (2**32 - 1)


def scene_seeds() -> list[int]:
    """What a check draws its scene (rows, names, an outage, a lease) with: ``check()``'s
    fixed seed and, under a grading run's own seed, that one too. A grading run adds a
    scene nobody has seen to the one a student checked against, and never trades it away:
    a mistake ``check()`` catches in its scene is caught by ``labkit grade`` as well."""
    seed = grading_seed()
    return [SEED] if seed is None or seed == SEED else [SEED, seed]


@contextmanager
def swept(
    ns: Namespace, target: str, make: Callable[[Path], None], args: list[Any]
) -> Iterator[tuple[dict[str, Any], int]]:
    """Make the starting files in a folder of the check's, run ``target(folder, *args, seed)``.

    Yields what the harness reported and the seed; a probe that did not return fails the
    check. The folder and every copy in it go afterwards.
    """
    seed = sweep_seed()
    name = target.rpartition(":")[2]
    with tempfile.TemporaryDirectory(prefix="labkit-sweep-", dir=ns.workdir) as tmp:
        make(Path(tmp))
        got = ns.harness(target, str(tmp), *args, seed)
        if got["probe"] != "returned":
            raise CheckFailed(
                _("a clean run of {name}").format(name=name),
                _("it {ended}").format(ended=got["probe"]),
                "fix that first",
            )
        yield got, seed


def after_every_kill(
    ns: Namespace,
    target: str,
    make: Callable[[Path], None],
    args: list[Any],
    judge: Callable[[Path], tuple[bool, str]],
    want: str,
    restart: str,
    hint: str | None = None,
) -> int:
    """Make the starting files with ``make(folder)``, sweep ``target(folder, *args, seed)``.

    ``judge(life_folder)`` reads one life's files and says ``(ok, what it found)``;
    ``want`` says what must hold ("exactly one email"), ``restart`` what ran after the
    kill ("the redelivery"), ``hint`` what to do (by default ``one_transaction()``).
    Returns how many lives were judged.
    """
    name = target.rpartition(":")[2]
    with swept(ns, target, make, args) as (got, seed):
        if not got["lives"]:
            raise CheckFailed(
                _("{name} to write to the database").format(name=name),
                _("no write at all"),
                "see above",
            )
        for life in got["lives"]:
            replay = _("kill {index} of {count}, sweep seed {seed}").format(
                index=life["index"], count=got["count"], seed=seed
            )
            if not life["killed"]:
                raise CheckFailed(
                    _("a kill right after {boundary} to fire ({replay})").format(
                        boundary=life["boundary"], replay=replay
                    ),
                    _("the run {ended}").format(ended=life["ended"]),
                    "the same call must write the same way each time it runs",
                )
            ok, seen = judge(Path(life["folder"]))
            if not ok:
                raise CheckFailed(
                    _("{want} after a kill -9 right after {boundary} and {restart}").format(
                        want=want, boundary=life["boundary"], restart=restart
                    ),
                    f"{seen} ({replay}; {restart} {life['restart']})",
                    one_transaction() if hint is None else hint,
                )
        return len(got["lives"])
