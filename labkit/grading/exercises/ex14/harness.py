"""Harness for exercise 14: the student's multi-step job on the check's files, crashed on purpose.

A check makes a folder with ``steps.db`` (``labdb.steps_db``) and ``world.db`` (a
``labkit.world.World``, perhaps with the payment API scripted to decline). Each function
here opens its own connection to ``steps.db`` and its own ``World`` on ``world.db``, hands
the student's ``run_order`` a view of that world (``seen.Seen``: the moments around each
effect named) and closes both afterwards without committing, so whatever the student's
code left uncommitted is rolled back as after a real crash. The check reads both files
itself. The faults a scene injects are in ``faults``; ``one_worker`` runs several orders
in turn on ONE connection, as a long-lived worker does; ``new_process`` runs jobs in a
new process whose str hashes differ. The checks call all of them through this module.
"""

from __future__ import annotations

import builtins
import math
import sqlite3
import threading
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager, nullcontext
from functools import partial
from pathlib import Path
from typing import Any
from unittest import mock

from labkit.errors import SimulatedCrash
from labkit.explore.boundaries import Tracer
from labkit.grading.checks import run_with_timeout
from labkit.grading.exercises.common import fresh_state, need, outcome
from labkit.grading.exercises.elsewhere import on_another_machine
from labkit.grading.exercises.ex14.faults import (
    AfterItsJobIsRead,
    KilledOnceFailed,
    LedgerDown,
    TimedOutBefore,
)
from labkit.grading.exercises.ex14.new_process import run_in_a_new_process as run_in_a_new_process
from labkit.grading.exercises.ex14.one_worker import (
    run_again_on_one_worker as run_again_on_one_worker,
)
from labkit.grading.exercises.ex14.one_worker import run_on_one_worker as run_on_one_worker
from labkit.grading.exercises.ex14.seen import Moments, Seen, job_once, open_world
from labkit.grading.exercises.killsweep import sweep
from labkit.grading.exercises.labdb import connect
from labkit.grading.exercises.replay import cells_run_again
from labkit.grading.exercises.wallclock import RETRY_S, clock_moved, to_year_end

#: Kills per sweep: every boundary of a job of four steps and its compensation.
LIMIT = 40
#: How long one job of ``run_interleaved`` waits for the other's (seconds).
INTERLEAVED_S = 5.0


def run(
    values: MutableMapping[str, Any],
    folder: str,
    order: dict[str, Any],
    version: int,
    crash_after: str | None = None,
    salted: bool = False,
    deployed: bool = False,
    declined_as: int | None = None,
    plain: bool = False,
) -> dict[str, Any]:
    """``run_order(conn, world, order, policy_version=version)`` in ``folder``.

    ``crash_after`` names an effect (``"payments.charge"``, ``"mail.send"``,
    ``"ledger.transaction()"``): a ``SimulatedCrash`` right after its first one returns
    (``"ledger.transaction()#2"``: after its second one).
    The wall clock reads ``wallclock.YEAR_END``.
    ``salted``: as a worker restarted a day and an hour later runs it (``restarted``, on
    a thread of its own): the student's module imported again then, its ``hash()``
    giving other values (its own ``PYTHONHASHSEED``), and so does the world's clock; its
    host, user and pid are another machine's (``elsewhere.on_another_machine``).
    ``deployed``: ``POLICIES`` holds one more version, as after a deploy that added it
    (the newest one's steps).
    ``declined_as``: the payment API's refusals for good carry that status (402);
    ``plain``: worded with a decline code alone (``InsufficientFunds``).
    The outcome, ``{"crashed": True}`` when it did, and ``fired``.
    """
    moments = Moments(crash_after=crash_after)
    salt = {"hash": lambda obj: builtins.hash((0x5EED, obj))} if salted else {}
    with (
        fresh_state(values),
        restarted(values, salted) as here,
        mock.patch.dict(here, salt),
        _one_more_policy(here) if deployed else nullcontext(),
    ):
        try:
            later = RETRY_S if salted else 0.0
            args = (job_once, here, Path(folder), order, version, moments, later, declined_as)
            got = _on_a_thread_of_its_own(*args) if salted else outcome(*args, plain=plain)
        except SimulatedCrash:
            got = {"crashed": True}
    return {**got, "fired": moments.crashed}


def _on_a_thread_of_its_own(fn: Any, *args: Any) -> dict[str, Any]:
    """``outcome(fn, *args)`` on a new thread, as in a restarted worker (a new process:
    another ``threading.get_ident()``, ``get_native_id()``, thread-local data); what it
    raised past ``outcome`` (a ``SimulatedCrash``, the stub) raised here. A check timed
    out meanwhile stops it (``run_with_timeout``)."""
    got: list[dict[str, Any]] = []
    _finished, failed = run_with_timeout(lambda: got.append(outcome(fn, *args)), math.inf)
    if failed is not None:
        raise failed
    return got[0]


def run_killed_once_failed(
    values: MutableMapping[str, Any], folder: str, order: dict[str, Any], version: int
) -> dict[str, Any]:
    """``run_order`` in ``folder``, killed right after the write that sets the job 'failed'.

    Whatever that write's transaction left uncommitted is rolled back (the connection is
    closed without a commit). The outcome, ``{"crashed": True}`` when it fired.
    """
    conn, world = connect(Path(folder) / "steps.db"), open_world(Path(folder) / "world.db")
    watched = KilledOnceFailed(conn)
    try:
        with fresh_state(values):
            try:
                got = outcome(
                    need(values, "run_order"),
                    watched,
                    Seen(world, Moments()),
                    dict(order),
                    policy_version=version,
                )
            except SimulatedCrash:
                got = {"crashed": True}
    finally:
        conn.close()
        world.close()
    return {**got, "fired": watched.fired}


@contextmanager
def _one_more_policy(values: MutableMapping[str, Any]) -> Iterator[None]:
    """The notebook's ``POLICIES`` with a version past the newest, then as it was."""
    policies = values.get("POLICIES")
    if not isinstance(policies, dict) or not policies:
        yield
        return
    newest = max(policies)
    with mock.patch.dict(policies, {newest + 1: policies[newest]}):
        yield


@contextmanager
def restarted(values: MutableMapping[str, Any], later: bool) -> Iterator[MutableMapping[str, Any]]:
    """The namespace the job runs in, its wall clock at ``wallclock.YEAR_END`` (the last
    day of a week, month and year); when ``later``, as in a worker restarted on another
    machine ``wallclock.RETRY_S`` later (the next day, hour, ISO week, month and year, in
    that machine's zone), whatever day it is graded on.

    The first run: the clocks the notebook bound moved (``wallclock.clock_moved``, the
    real modules left alone). A restart: the cells run again while the wall clock reads
    later (``replay.cells_run_again``), so a value the module computed at import (today's
    date, a start time, a ``uuid4()``) is computed afresh, and the clock stays moved while
    the job runs; without the cells (``check()`` in Jupyter), the notebook's own names,
    with the clocks they bound moved.
    """
    if not later:
        with clock_moved(values, to_year_end(), real_modules=False):
            yield values
        return
    with cells_run_again(values, _later_elsewhere) as again:
        if again is not None:
            yield again
            return
    with (
        on_another_machine(values),
        clock_moved(values, to_year_end(RETRY_S), real_modules=False),
    ):
        yield values


@contextmanager
def _later_elsewhere() -> Iterator[None]:
    """The wall clock ``RETRY_S`` past ``YEAR_END`` on another machine (in its zone):
    where the cells run again. Entered inside ``cells_run_again``'s scratch folder, whose
    way back must read the real working folder, not the other machine's."""
    with on_another_machine({}):
        with clock_moved({}, to_year_end(RETRY_S), datetime_module=True, steady=False):
            yield


def kills(
    values: MutableMapping[str, Any],
    folder: str,
    order: dict[str, Any],
    version: int,
    resume_version: int,
    seed: int,
) -> dict[str, Any]:
    """``run_order`` killed right after each boundary in copies of ``folder``'s two files.

    The boundaries: the student's writes and COMMITs to ``steps.db``, and the moments
    before and after each effect. After each kill the job is run again (a redelivery)
    with ``policy_version=resume_version``. See ``killsweep.sweep``.
    """

    def first(life: Path, tracer: Tracer, at: int) -> Any:
        return job_once(values, life, order, at, Moments(tracer))

    return sweep(
        folder,
        ["steps.db", "world.db"],
        partial(first, at=version),
        partial(first, at=resume_version),
        seed,
        limit=LIMIT,
    )


def run_overtaken(
    values: MutableMapping[str, Any],
    folder: str,
    order: dict[str, Any],
    version: int,
    after: str = "ledger.transaction()",
    second_crash_after: str | None = None,
) -> dict[str, Any]:
    """``run_order`` overtaken by a second copy of the same job (a slow first worker).

    Right after the first copy's first ``after`` moment (its first ledger transaction
    committed), a second copy of the job, on its own connection and world and in the
    cells run again (``replay.cells_run_again``: its own module-level names, a lock the
    first copy holds not among them), runs whole, as a worker restarted by a supervisor
    that believed the first one dead would; then
    the first copy goes on. ``second_crash_after`` names an effect right after which the
    second copy crashes instead (``run``'s ``crash_after``): it leaves checkpoints the
    first copy did not read, and a job not finished. Both outcomes, and ``fired``; the
    check reads the files.
    """
    second: dict[str, Any] = {}
    where = Path(folder).resolve()

    class _Overtaken(Moments):
        def after(self, what: str) -> None:
            super().after(what)
            if what == after and not second:
                again = Moments(crash_after=second_crash_after)
                # Another worker imports the module afresh: its own module-level names (a
                # lock, a cache), not the first copy's, whose lock this thread may hold.
                with cells_run_again(values) as fresh:
                    ns = values if fresh is None else fresh
                    try:
                        second.update(outcome(job_once, ns, where, order, version, again))
                    except SimulatedCrash:
                        second.update({"crashed": True})

        def read_alone(self, what: str) -> None:
            # A mark read in a ledger transaction of its own is one too: the second copy
            # runs right after it, before the first copy's post.
            # (``after="ledger.read"``: right after the first such read, whatever came before.)
            if after in ("ledger.transaction()", "ledger.read"):
                self.after(after)

    with fresh_state(values):
        first = outcome(job_once, values, where, order, version, _Overtaken())
    fired = bool(second) and (second_crash_after is None or "crashed" in second)
    return {"first": first, "second": second, "fired": fired}


def run_overtaken_at_its_read(
    values: MutableMapping[str, Any],
    folder: str,
    order: dict[str, Any],
    version: int,
    second_version: int,
) -> dict[str, Any]:
    """``run_order`` under ``version``, overtaken right after its first look at the
    job's row (``AfterItsJobIsRead``) by a second copy under ``second_version`` that
    runs whole: two deliveries at once, one on each side of a deploy. Both outcomes, and
    ``fired``; the check reads the files (which version the row holds)."""
    second: dict[str, Any] = {}
    where = Path(folder).resolve()

    def overtake() -> None:
        with cells_run_again(values) as fresh:
            ns = values if fresh is None else fresh
            second.update(outcome(job_once, ns, where, order, second_version, Moments()))

    def wrap(conn: sqlite3.Connection) -> Any:
        return AfterItsJobIsRead(conn, overtake)

    with fresh_state(values):
        first = outcome(job_once, values, where, order, version, Moments(), wrap=wrap)
    return {"first": first, "second": second, "fired": bool(second)}


def run_with_the_ledger_down(
    values: MutableMapping[str, Any],
    folder: str,
    order: dict[str, Any],
    version: int,
    nth: int,
    permanent: bool = False,
    again: bool = True,
) -> dict[str, Any]:
    """``run_order`` whose ``nth`` ledger transaction raises ``TransientError`` (503; with
    ``permanent``, ``PermanentError``), then, ``again``, the same job again with the ledger
    back (a redelivery). Both outcomes (the second ``{}`` without ``again``)."""
    with fresh_state(values):
        first = outcome(job_once, values, Path(folder), order, version, LedgerDown(nth, permanent))
        second = outcome(job_once, values, Path(folder), order, version, Moments()) if again else {}
    return {"first": first, "second": second}


def run_timed_out_before(
    values: MutableMapping[str, Any],
    folder: str,
    order: dict[str, Any],
    version: int,
    what: str,
    in_progress: bool = False,
) -> dict[str, Any]:
    """``run_order`` whose first call to ``what`` times out before it reaches the service
    (``TimedOutBefore``: a ``ResponseLost``, nothing done; ``in_progress``: a 409
    ``KeyInProgress`` instead), then, when it raised, the same job again (a redelivery).
    Both outcomes (the second ``{}`` when the first returned), and ``fired``."""
    moments = TimedOutBefore(what, in_progress)
    with fresh_state(values):
        first = outcome(job_once, values, Path(folder), order, version, moments)
        second = (
            outcome(job_once, values, Path(folder), order, version, Moments())
            if "raised" in first
            else {}
        )
    return {"first": first, "second": second, "fired": moments.fired}


def run_interleaved(
    values: MutableMapping[str, Any],
    folder: str,
    order: dict[str, Any],
    other: dict[str, Any],
    version: int,
    after: str,
) -> dict[str, Any]:
    """Two orders' jobs at once in ONE worker process: ``order``'s ``run_order`` and,
    right after its first ``after`` moment, ``other``'s on another thread of the same
    module (a worker with a pool of threads), each on its own connection and world.
    ``order``'s run waits for the other to end (``INTERLEAVED_S`` at most: a lock the
    student's code holds may make the other wait for it), then goes on. Both outcomes,
    and ``fired``."""
    second: dict[str, Any] = {}
    where = Path(folder).resolve()
    threads: list[threading.Thread] = []

    def other_run() -> None:
        try:
            second.update(outcome(job_once, values, where, other, version, Moments()))
        except BaseException as exc:  # noqa: BLE001 - a crash or the stub: its outcome
            second.update({"raised": [type(exc).__name__], "message": str(exc)[:200]})

    class _Meanwhile(Moments):
        def after(self, what: str) -> None:
            super().after(what)
            if what == after and not threads:
                threads.append(threading.Thread(target=other_run, daemon=True))
                threads[0].start()
                threads[0].join(INTERLEAVED_S)

    with fresh_state(values):
        first = outcome(job_once, values, where, order, version, _Meanwhile())
        for thread in threads:
            thread.join(INTERLEAVED_S)
    return {"first": first, "second": dict(second), "fired": bool(threads)}


def do_step_twice(
    values: MutableMapping[str, Any], folder: str, order: dict[str, Any], step: str
) -> list[dict[str, Any]]:
    """``do_step(world, order, step)`` twice on one world: both outcomes."""
    world = open_world(Path(folder) / "world.db")
    try:
        with fresh_state(values):
            seen = Seen(world, Moments())
            return [outcome(need(values, "do_step"), seen, dict(order), step) for _n in range(2)]
    finally:
        world.close()


def run_in_each_folder(
    values: MutableMapping[str, Any],
    folders: list[str],
    order: dict[str, Any] | list[dict[str, Any]],
    version: int | list[int],
) -> list[dict[str, Any]]:
    """``run_order`` of ``order`` once in each of ``folders``, in ONE process.

    Two shops (two job databases, two worlds) served by one worker: what a job did is
    what its own tables record, so the order is new to each. The student's module state
    lives on between the calls. ``order``: the order of every run, or one per folder
    (a folder may come twice: one worker's orders one after another in one shop).
    ``version``: the policy version of every run, or one per folder. Returns each
    outcome.
    """
    versions = version if isinstance(version, list) else [version] * len(folders)
    orders = order if isinstance(order, list) else [order] * len(folders)
    got = []
    with fresh_state(values):
        for folder, each, one in zip(folders, versions, orders, strict=True):
            got.append(outcome(job_once, values, Path(folder), one, each, Moments()))
    return got
