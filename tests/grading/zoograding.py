"""How the zoo is judged: every entry in process, and a sample through the sandbox.

Each wrong solution of the zoo (``test_zoo_exNN.py``) is the reference notebook with one
more cell, which redefines a function or two with one mistake.

- ``in_process_test`` gives a zoo module its test: every entry runs its named check, then
  the others until one passes (``gradingkit.assert_caught_by_name``), the quick proof
  that the check catches it. For exercises 8-10, whose checks start real workers, servers
  and consumers, every entry's edit is applied and compiled, a twentieth of them run their
  named check (``skip_unless_drawn``) and a third of those the control check (one the
  variant still passes, ``runs_its_control``), each drawn by ``LABKIT_ZOO_SEED``.
- ``in_the_sandbox`` picks the entries ``test_every_exercise_graded.py`` hands to
  ``labkit grade`` as students' notebooks (sandbox, own uids, every check, the session's
  seed), each record judged by ``not_caught``: of each exercise, one entry caught by a
  check that kills, races or restarts the student's code (``SWEPT``), and ``ROTATING``
  more, all drawn by ``LABKIT_ZOO_SEED``. A whole number is a turn of a rotation: CI
  passes the commit's place in the history (``.ci/run``), and successive commits take
  successive slices of a fixed order, so every entry is graded through the sandbox once
  in as many commits as the longest such list holds entries (``rotation_covers_every_entry`` in
  ``test_zoo.py``); anything else draws at random; ``all`` grades every one. The whole
  zoo through the sandbox costs minutes more than CI's ten allow (about 400 CPU-seconds
  for exercises 1-7 and 11-14 alone): ``bench/zoo.py`` grades it all.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import textwrap
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

import nbformat
import pytest
import turns
from gradingkit import HIDDEN, SEED, assert_caught_by_name, with_override
from turns import place, taken

from labkit.grading import catalog
from labkit.grading.checks import CheckStatus, Namespace, run_check

#: (exercise, mistake, the check that must catch it, the source of the cell appended)
ZooEntry = tuple[str, str, str, str]

#: Checks that kill the student's code after each of its writes (``killsweep``), race
#: two processes of it (``racesweep``) or call it again in a new process (``replay``):
#: every entry they must catch is graded in the sandbox, since forking, stopping, killing
#: and starting Python again inside it is what in-process grading cannot show.
SWEPT = frozenset(
    {
        "tokens_differ_between_worker_processes",
        "tokens_differ_between_forked_workers",
        "a_killed_redrive_leaves_no_job_half_redriven",
        "two_schedulers_in_every_order_enqueue_each_slot_once",
        "charge_is_the_same_after_a_restart",
        "post_is_the_same_after_a_restart",
        "no_double_claim_under_a_race",
        "two_redrives_at_once_share_nothing",
        "place_order_is_one_transaction",
        "consume_is_one_transaction",
        "a_killed_scheduler_restarts_without_losing_a_slot",
        # Exercise 14's four sweep checks kill at 11 boundaries each: one of them here
        # keeps CI in its budget; the rotating draw reaches the other three.
        "every_effect_once_after_a_kill_anywhere",
        # Exercise 14's steps run in a new process under a hash seed of its own.
        "the_steps_run_in_their_policys_order_in_any_process",
    }
)
#: Entries of each exercise graded in the sandbox besides the swept ones, drawn afresh
#: for each ``LABKIT_ZOO_SEED`` (``.ci/run`` sets the commit's place in the history, a
#: turn of the rotation; "all": every one).
#: One since round 7 (952 entries): with two, ``make test`` took 806 s on a slow machine.
ROTATING = 1
#: Entries of each exercise's swept checks graded in the sandbox per turn, the exercise's
#: swept checks taking turns among themselves. Every one of them was, until round 17
#: brought them to 40 (nine for ex03's race alone): each is a whole notebook graded with
#: every check, about 2 CPU-seconds and 3 s of a grading slot, and they made up most of
#: the sandbox class's 200 s in CI's twelve minutes. One of each swept check per turn
#: until 2026-12-08 (13 notebooks; 7 since), when CI's run took 20 minutes on a machine
#: half as fast: the sandbox class was 300 s of it. A swept check is still proven in
#: the sandbox on every turn by the reference, which it must let pass.
SWEPT_ROTATING = 1
ZOO_SEED = os.environ.get("LABKIT_ZOO_SEED") or str(SEED)


class Named(Protocol):
    """A zoo entry as ``in_the_sandbox`` reads it (``zoo_notebooks.Entry``)."""

    @property
    def exercise(self) -> str: ...
    @property
    def mistake(self) -> str: ...
    @property
    def check(self) -> str: ...


E = TypeVar("E", bound=Named)


def in_the_sandbox(entries: Sequence[E], seed: str = ZOO_SEED) -> list[E]:
    """The entries graded through the sandbox under ``seed``, in their order."""
    if seed == "all":
        return list(entries)
    # Each rotation, with how many of its entries a turn takes: an exercise's swept
    # checks', or the rest of an exercise's.
    rotations: defaultdict[tuple[str, int], list[str]] = defaultdict(list)
    for entry in entries:
        if entry.check in SWEPT:
            rotations[f"{entry.exercise}/swept", SWEPT_ROTATING].append(entry.mistake)
        else:
            rotations[entry.exercise, ROTATING].append(entry.mistake)
    drawn = {
        mistake
        for (what, many), mistakes in rotations.items()
        for mistake in taken(what, mistakes, seed, many)
    }
    return [e for e in entries if e.mistake in drawn]


def this_turn(what: str, mistakes: list[str], many: int, seed: str = ZOO_SEED) -> list[str]:
    """The ``many`` of ``mistakes`` (a rotation called ``what``) a turn takes, as
    ``in_the_sandbox`` takes a swept check's; "all": every one."""
    return turns.this_turn(what, mistakes, many, seed)


def _drawn(what: str, mistake: str, share: float, seed: str) -> bool:
    """Whether ``mistake`` is among the ``share`` of entries drawn for ``what`` under
    ``seed``: with a whole-number seed (a turn), the entries whose place falls in this
    turn's bucket of ``round(1 / share)``, so that many successive turns draw every entry
    once; with any other seed, each entry on its own draw; "all": every one."""
    if seed == "all":
        return True
    if seed.isdigit():
        buckets = round(1 / share)
        return int(place(what, mistake), 16) % buckets == int(seed) % buckets
    return random.Random(f"{seed}:{what}:{mistake}").random() < share


#: Of the entries of the exercises that start real workers, servers and consumers (8, 9
#: and 10), the share whose control check (one the variant still passes) runs in CI.
CONTROLLED = 1 / 3


def runs_its_control(mistake: str, seed: str = ZOO_SEED) -> bool:
    """Whether a service exercise's zoo entry also runs its control check this session.

    Every entry always runs the check named after its mistake. The control, a check the
    variant still passes (so the feedback points at one mistake, not at a module that
    does not start), costs a real Celery worker, server or consumer of its own: a third of
    the entries, drawn afresh per ``LABKIT_ZOO_SEED`` as ``in_the_sandbox`` draws, run
    it; "all" runs every one. The others still prove their module compiles
    (``compiles``); the entries ``test_ex08_graded.py`` and
    ``test_service_exercises_graded.py`` grade through the sandbox run every check.
    """
    return _drawn("control", mistake, CONTROLLED, seed)


#: Of the entries of exercises 8, 9 and 10, the share whose named check runs in process
#: in CI (each starts real Celery workers, servers or consumers; round 6 brought them to
#: 172 entries, about four CPU-minutes between them, and CI past 550 s; round 7 to 185,
#: on a machine where the whole suite took 806 s). A sixth since round 20 (2026-12-06:
#: 348 entries, 87 CPU-seconds at a fifth, the suite at 600 s again). An eighth since
#: 2026-12-06 late (a sixth cost 63 CPU-seconds on a machine whose two cores the suite
#: keeps 97% busy, so every CPU-second saved is half a second of CI). A tenth since
#: round 26 (2026-12-07: 470 entries; the suite took 737 s with four workers on a
#: machine whose two cores it kept busy from the first test to the last). A fifteenth
#: since round 31 (2026-12-07: 480 entries; the suite took 502 s on one run and 604 s on
#: the next, on the same machine, with CI's ten minutes around it). A twentieth since
#: 2026-12-08 (CI's run took 20 minutes on a machine half as fast, its cores busy).
IN_PROCESS = 1 / 20


#: Of the entries of the other exercises (1-7, 11-14), the share whose named check runs in
#: process in CI. All of them ran until 2026-12-06: 1,500 entries, about 130 of the 990
#: CPU-seconds of CI's tests, and the whole suite near 600 s on two cores with CI's ten
#: minutes around it. Half of them ran per turn until red-team round 20 (1,360 entries,
#: about 100 CPU-seconds at half, the suite at 600 s again); a third until 2026-12-06
#: late (56 CPU-seconds), a quarter until round 26 (2026-12-07: 1,600 entries, about 75
#: CPU-seconds at a quarter), a fifth until round 31 (2026-12-07: 2,500 entries, about
#: 95 CPU-seconds at a fifth, the suite at 604 s on a slow run), an eighth until
#: 2026-12-08 (CI's run took 20 minutes on a machine half as fast), a tenth now, so ten
#: successive commits run every one; "all" runs every one, and ``bench/zoo.py`` grades
#: every one through the sandbox.
PLAIN_IN_PROCESS = 1 / 10


def skip_unless_taken(mistake: str, seed: str = ZOO_SEED) -> None:
    """Skip an exercise 1-7 or 11-14 zoo entry not in this turn's tenth (``PLAIN_IN_PROCESS``),
    after its source was checked to compile."""
    _skip_unless("plain-in-process", mistake, PLAIN_IN_PROCESS, seed)


def skip_unless_drawn(mistake: str, seed: str = ZOO_SEED) -> None:
    """Skip a service exercise's zoo entry not drawn this session, after its edit was
    applied and compiled: a twentieth of them run their named check in process, drawn
    afresh per ``LABKIT_ZOO_SEED`` (CI's turn is the commit's place in the history, so
    twenty successive commits run every one); "all" runs every one, and ``bench/zoo.py``
    grades every one through the sandbox."""
    _skip_unless("in-process", mistake, IN_PROCESS, seed)


#: Of the right solutions written otherwise (``RIGHT`` of each zoo module), the share that
#: runs in CI. All of them ran until 2026-12-08: 318 entries, 176 s of the suite's workers
#: (a twelfth of them), when CI's run took 20 minutes on a machine half as fast. A
#: quarter now, so four successive commits run every one; "all" runs every one, and
#: ``bench/zoo.py --right`` grades every one through the sandbox.
RIGHT_IN_PROCESS = 1 / 4


def _skip_unless(what: str, mistake: str, share: float, seed: str) -> None:
    """Skip the running test unless ``mistake`` is drawn for ``what`` (``_drawn``)."""
    if not _drawn(what, mistake, share, seed):
        pytest.skip(f"not drawn for LABKIT_ZOO_SEED={seed} (LABKIT_ZOO_SEED=all runs it)")


def compiles(source: str, name: str) -> None:
    """Fail with the syntax error when a zoo entry's edited source does not compile."""
    try:
        compile(source, name, "exec")
    except SyntaxError as exc:
        pytest.fail(f"{name}: the zoo entry's edit does not compile: {exc}")


def append_cell(nb: nbformat.NotebookNode, source: str) -> None:
    """``source`` (a zoo entry's mistake) as the notebook's last code cell."""
    nb.cells.append(nbformat.v4.new_code_cell(textwrap.dedent(source).strip()))


def graded_records(run: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """(student, exercise) -> its record in the run folder's ``outcomes.json``."""
    results = json.loads((run / "outcomes.json").read_text(encoding="utf-8"))["results"]
    return {(r["student"], r["exercise"]): r for r in results}


def not_caught(
    record: dict[str, Any], check: str, says: str | None = None, got: str | None = None
) -> str | None:
    """Why a graded notebook (its record in ``outcomes.json``) does not show its mistake
    caught by ``check``, or None.

    Caught means: ``check`` failed with nothing earned, saying what it expected (``says``
    in it, when given), what the code did (``got`` in it, when given; never a traceback)
    and a hint; the notebook was graded (some other check may have timed out) and scored
    below full marks; some other check passed (the feedback points at one mistake); a
    severe check's failure capped the score at half.
    """
    checks = {c["check"]: c for c in record.get("checks", [])}
    named = checks.get(check)
    if named is None:
        return f"{check} is not among the checks graded ({record.get('status')})"
    if named["status"] != "failed" or named["earned"] != 0:
        return f"{check}: {named['status']}, {named['earned']}/{named['points']}"
    if not (named["expected"] and named["got"] and named["hint"]):
        return f"{check} did not say what it expected, what it got and a hint: {named}"
    if "Traceback" in named["got"]:
        return f"{check} showed a traceback: {named['got']}"
    if says is not None and says not in named["expected"]:
        return f"{check} expected {named['expected']!r}, which does not say {says!r}"
    if got is not None and got not in named["got"]:
        return f"{check} got {named['got']!r}, which does not say {got!r}"
    earned, possible = record["score"], record["max"]
    # "timed out": another check ran out of time on this code (a lock attempt that
    # waits 2 s, met fifty times by a check of file leaks): the score still stands.
    if record["status"] not in ("graded", "timed out") or earned >= possible:
        return f"scored {earned}/{possible}, {record['status']}"
    if not any(c["status"] == "passed" for c in checks.values()):
        return "every check failed: the feedback points at no one mistake"
    if named["severe"] and earned > possible // 2:
        return f"a severe mistake scored {earned}/{possible}, more than half"
    return None


@contextlib.contextmanager
def process_kept() -> Iterator[None]:
    """The test process's folder and umask as they were, whatever the entry did: a wrong
    lock that changes folder (``os.chdir``) or umask and never puts it back, run in
    process, would leave the pytest worker in a folder deleted after the check."""
    folder, mask = os.getcwd(), os.umask(0o022)
    os.umask(mask)
    try:
        yield
    finally:
        os.chdir(folder)
        os.umask(mask)


def in_process_test(
    zoo: list[ZooEntry],
    says: dict[str, str] | None = None,
    got: dict[str, str] | None = None,
) -> Callable[..., None]:
    """A zoo module's test, ``test_wrong_solution_fails_the_check_that_names_its_mistake =
    in_process_test(ZOO, SAYS, GOT)``: each entry loses its check in process
    (``assert_caught_by_name``), which says ``says[mistake]`` and got ``got[mistake]``."""
    says, got = says or {}, got or {}

    @pytest.mark.parametrize(
        ("exercise", "mistake", "check", "source"), zoo, ids=[f"{e}: {m}" for e, m, *_ in zoo]
    )
    def test_wrong_solution_fails_the_check_that_names_its_mistake(
        exercise: str, mistake: str, check: str, source: str
    ) -> None:
        compiles(textwrap.dedent(source), mistake)
        skip_unless_taken(mistake)
        with process_kept():
            assert_caught_by_name(
                exercise, mistake, check, source, says.get(mistake), got.get(mistake)
            )

    return test_wrong_solution_fails_the_check_that_names_its_mistake


def right_test(exercise: str, right: list[tuple[str, str, str]]) -> Callable[..., None]:
    """A zoo module's test of right solutions written otherwise, ``RIGHT`` as ``(way, check,
    source)``: ``test_a_right_solution_written_otherwise_keeps_the_points =
    right_test("exNN", RIGHT)``. Each keeps the check that once took its points; a
    quarter of them run per turn (``RIGHT_IN_PROCESS``), after each source compiled."""

    @pytest.mark.parametrize(("way", "check", "source"), right, ids=[w for w, *_ in right])
    def test_a_right_solution_written_otherwise_keeps_the_points(
        way: str, check: str, source: str
    ) -> None:
        compiles(textwrap.dedent(source), way)
        _skip_unless("right", way, RIGHT_IN_PROCESS, ZOO_SEED)
        [named] = [c for c in catalog.all_checks(exercise, HIDDEN) if c.name == check]
        with process_kept():
            got = run_check(named, Namespace(with_override(exercise, source)))
        assert got.status == CheckStatus.PASSED, (way, got.expected, got.got)

    return test_a_right_solution_written_otherwise_keeps_the_points
