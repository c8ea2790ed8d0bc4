"""Harness for exercise 5: the student's handler run by a real worker, crashed on purpose.

``run`` builds the scenario (the student's ``choose_ack`` and handler, one job), runs it
with ``labkit.explore.matrix.run_scenario`` in a folder the check names, crashing once where
the check says, and returns what fired and what the handler raised. The verdict is
not returned: the check opens the job store and the world's database in that folder
and judges them itself.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import select
import signal
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from labkit import redact
from labkit.clock import LAB_EPOCH, FakeClock
from labkit.dbfile import explain
from labkit.errors import TransientError
from labkit.explore.matrix import Scenario, run_scenario
from labkit.faults import FaultPlan
from labkit.grading.checks import StudentRaised
from labkit.grading.exercises.common import fresh_state, need
from labkit.grading.exercises.elsewhere import on_another_machine
from labkit.grading.exercises.ex05.recorder import RecordingCtx, SceneCtx, calls_in
from labkit.grading.exercises.ex05.throttled import _sleeps_passed
from labkit.grading.exercises.ex05.throttled import key_in_progress as key_in_progress
from labkit.grading.exercises.ex05.throttled import rate_limited_charge as rate_limited_charge
from labkit.grading.exercises.replay import CannotShip, call_in_fresh_process, cells_run_again
from labkit.grading.exercises.wallclock import clock_moved, to_year_end
from labkit.grading.stub import is_stub, is_stub_text
from labkit.store import JobStore
from labkit.world import World

#: Fired by the check each time the student's ledger work commits (see ``_Ledger``).
LEDGER_COMMIT = "ledger_commit"
#: Fired right before each ledger write the student's handler makes: where a check
#: makes the ledger fail (a locked database) to see the failure come out of the handler.
LEDGER_WRITE = "ledger_write"


def _before_write(ctx: Any, own: bool = False) -> None:
    """Fire ``ledger_write``; a failure injected there comes out as a busy ledger's does.

    Inside ``transaction()`` SQLite's own ``OperationalError: database is locked``, which
    the ledger's transaction turns into ``StoreBusy`` on its way out of the block; a write
    in its own transaction (``ledger.post``/``ledger.mark``) raises ``StoreBusy`` itself.
    So a handler that catches the one error a real busy ledger raises (``StoreBusy``,
    ``TimeoutError``, ``sqlite3.OperationalError``) swallows this one too.
    """
    try:
        ctx.point(LEDGER_WRITE)
    except TransientError as exc:
        locked = sqlite3.OperationalError(f"database is locked ({exc})")
        if own:
            raise explain(Path("world.db"), locked) from exc
        raise locked from exc


class _Ledger:
    """The world's ledger, firing ``ledger_commit`` after each commit it makes.

    The worker's own points sit around the whole handler; a crash *between* two ledger
    writes of one handler needs a point there, and this is it.
    """

    def __init__(self, ledger: Any, ctx: Any, pause: float = 0.0) -> None:
        self._ledger, self._ctx, self._pause = ledger, ctx, pause
        self._transactions = 0

    def status(self, *args: Any, **kwargs: Any) -> Any:
        # A read in its own transaction: another delivery can act before the next step.
        reply = self._ledger.status(*args, **kwargs)
        if self._pause:
            threading.Event().wait(self._pause)
        return reply

    def find(self, *args: Any, **kwargs: Any) -> Any:
        # A lookup of the entries, as a read of the mark in its own transaction: another
        # delivery can post before the handler's own transaction starts.
        found = self._ledger.find(*args, **kwargs)
        if self._pause:
            threading.Event().wait(self._pause)
        return found

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        # A second transaction in one handler call pauses before it starts, as a read in
        # its own transaction does: another delivery can act between the two (a mark
        # "started" in one transaction, the entry in the next, both delivered).
        self._transactions += 1
        if self._pause and self._transactions > 1:
            threading.Event().wait(self._pause)
        with self._ledger.transaction() as tx:
            yield _Tx(tx, self._ctx)
        self._ctx.point(LEDGER_COMMIT)

    def post(self, *args: Any, **kwargs: Any) -> Any:
        _before_write(self._ctx, own=True)
        reply = self._ledger.post(*args, **kwargs)
        self._ctx.point(LEDGER_COMMIT)
        return reply

    def mark(self, *args: Any, **kwargs: Any) -> Any:
        _before_write(self._ctx, own=True)
        reply = self._ledger.mark(*args, **kwargs)
        self._ctx.point(LEDGER_COMMIT)
        return reply

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ledger, name)


class _Tx:
    """A ledger transaction firing ``ledger_write`` before each write in it."""

    def __init__(self, tx: Any, ctx: Any) -> None:
        self._tx, self._ctx = tx, ctx

    def post(self, *args: Any, **kwargs: Any) -> Any:
        _before_write(self._ctx)
        return self._tx.post(*args, **kwargs)

    def mark(self, *args: Any, **kwargs: Any) -> Any:
        _before_write(self._ctx)
        return self._tx.mark(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tx, name)


class _Payments:
    """The payment API; a lookup (``find``) pauses after it reads, as a ledger read does,
    so two deliveries that look first and charge after both find nothing."""

    def __init__(self, payments: Any, pause: float = 0.0) -> None:
        self._payments, self._pause = payments, pause

    def find(self, *args: Any, **kwargs: Any) -> Any:
        found = self._payments.find(*args, **kwargs)
        if self._pause:
            threading.Event().wait(self._pause)
        return found

    def __getattr__(self, name: str) -> Any:
        return getattr(self._payments, name)


class _World:
    def __init__(self, ctx: Any, pause: float = 0.0) -> None:
        self._world, self.ledger = ctx.world, _Ledger(ctx.world.ledger, ctx, pause)
        self.payments = _Payments(ctx.world.payments, pause)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._world, name)


class _Ctx:
    def __init__(self, ctx: Any, pause: float = 0.0) -> None:
        self._ctx, self.world = ctx, _World(ctx, pause)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctx, name)


def _observed(
    handler: Callable[[Any, Any], Any], errors: list[str], pause: float = 0.0
) -> Callable[[Any, Any], Any]:
    """The student's handler seeing ``_Ctx``; what it raises is noted, then re-raised.

    The worker treats a handler's exception as a failed attempt and retries, so without
    the note an AttributeError in the handler would only show up as "the crash never
    fired". Simulated crashes (BaseException) pass unnoted.
    """

    def run(job: Any, ctx: Any) -> Any:
        try:
            return handler(job, _Ctx(ctx, pause))
        except Exception as exc:
            # labkit's own classes are the world answering (a lost reply, a 409): not bugs.
            if not type(exc).__module__.startswith("labkit."):
                errors.append(StudentRaised.from_exception(exc).describe())
            raise

    return run


def _each_life(
    values: MutableMapping[str, Any], name: str, errors: list[str]
) -> Callable[[Any, Any], Any]:
    """The student's handler ``name`` as each worker life has it (``_observed``).

    A life after a crash is a new worker process: it imports the cells afresh
    (``replay.cells_run_again``), with module-level names of its own: a lock, a cache, a
    connection kept from the world the crash closed, a ``threading.local``. The first
    life (told by its ``World``) has the notebook's own; each later one a namespace
    built again, as in ``ex14.run_overtaken``. Without the cells (``check()`` in
    Jupyter), the notebook's own.
    """
    lives: list[Any] = []  # the world of the current life, held so its id stays its own
    handler = [need(values, name)]

    def run(job: Any, ctx: Any) -> Any:
        world = getattr(ctx, "world", None)
        if lives and lives[0] is not world:
            with cells_run_again(values) as again:
                if again is not None and callable(again.get(name)):
                    handler[0] = again[name]
        lives[:] = [world]
        return _observed(handler[0], errors)(job, ctx)

    return run


def run(
    values: MutableMapping[str, Any],
    which: str,
    folder: str,
    faults: list[list[Any]],
    seed: int,
    jobs: list[list[Any]],
) -> dict[str, Any]:
    """Run ``jobs`` through the student's ``which`` handler ("charge" or "post") in ``folder``.

    ``faults`` are ``[point, action, nth]`` rules. Returns ``{"ack", "fired", "replay",
    "handler_errors"}``; the job store is ``folder/jobs.db``, the world ``folder/world.db``.
    """
    errors: list[str] = []
    with fresh_state(values):
        ack = need(values, "choose_ack")()
        if ack not in ("late", "first"):
            return {"ack": repr(ack)}
        name = "charge_handler" if which == "charge" else "post_handler"
        need(values, name)
        scenario = Scenario(
            f"your {which}_handler",
            {which: _each_life(values, name, errors)},
            ack=ack,
            service="payments" if which == "charge" else "ledger",
            jobs=tuple((kind, payload, key) for kind, payload, key in jobs),
        )
        plan = FaultPlan(seed)
        for point, action, nth in faults:
            plan = plan.at(point, action, nth=nth)
        row = run_scenario(scenario, plan, point=faults[0][0] if faults else "-", workdir=folder)
    return {
        "ack": ack,
        "fired": list(row.fired),
        "replay": row.replay,
        "handler_errors": errors[:3],
    }


#: How long a ledger read made in its own transaction pauses in ``two_deliveries``.
DELIVERY_PAUSE_S = 0.3


def two_deliveries(
    values: MutableMapping[str, Any], which: str, folder: str, job: list[Any]
) -> dict[str, Any]:
    """Deliver one job to two workers at the same moment (a redelivery racing the first).

    Each delivery has its own connection to the world's file (``folder/world.db``) and
    starts at a barrier; a ledger read made in its own transaction pauses, so a
    check-then-act across transactions is caught every time. Returns what each
    delivery's handler raised (the world answering, a 409, is fine); the check counts
    the effects in the world file itself.
    """
    clock = FakeClock(LAB_EPOCH)
    [the_job] = _enqueued(folder, [job], clock)
    World(Path(folder) / "world.db", clock).close()
    handler = need(values, "charge_handler" if which == "charge" else "post_handler")
    start = threading.Barrier(2)
    said: list[str] = ["", ""]
    errors: list[str] = []
    stub: list[NotImplementedError] = []

    def deliver(i: int) -> None:
        world = World(Path(folder) / "world.db", clock)
        try:
            ctx = SceneCtx(world, the_job, clock)
            start.wait()
            _observed(handler, errors, DELIVERY_PAUSE_S)(the_job, ctx)
            said[i] = "ok"
        except NotImplementedError as exc:
            said[i] = f"NotImplementedError: {exc}"
            if is_stub(exc):
                stub.append(exc)
        except Exception as exc:  # noqa: BLE001 - each delivery's end is the evidence
            said[i] = f"{type(exc).__name__}: {str(exc)[:120]}"
        finally:
            world.close()

    with fresh_state(values):
        threads = [threading.Thread(target=deliver, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if stub:
        raise stub[0]  # the exercise stub: the check reads "not started yet"
    return {"deliveries": said, "handler_errors": errors[:3]}


#: The hash seeds of the new processes ``sent_in_processes`` calls the handler in.
HASH_SEEDS = (1, 2)


def sent_in_processes(
    values: MutableMapping[str, Any], which: str, folder: str, jobs: list[list[Any]]
) -> dict[str, Any]:
    """What the student's handler sends for each of ``jobs``, here and in new processes.

    A restarted worker is a new process: it imports the handler's module again and
    hashes with another salt. The handler is called with a ``RecordingCtx`` (nothing is
    charged or posted) here and in one new process per hash seed (the namespace is built
    again from the cells there, see ``replay``). ``{"here": [...], "seeds": {seed:
    [...]}, "how": ...}``: the calls each sent, in order, per job.
    """
    the_jobs = _enqueued(folder, jobs, FakeClock(LAB_EPOCH))
    name = "charge_handler" if which == "charge" else "post_handler"

    def recorded(label: str, call: Callable[[list[Any]], None]) -> list[list[dict[str, Any]]]:
        paths = [str(Path(folder) / f"{label}-{i}.jsonl") for i in range(len(the_jobs))]
        call(paths)
        return [calls_in(path) for path in paths]

    def here(paths: list[str]) -> None:
        # Each job its own ctx, as in the new processes; all kept to the end, so none has
        # the id() of one gone (a cache keyed by id(ctx.world) finds no stale world).
        ctxs = [RecordingCtx(path) for path in paths]
        with fresh_state(values):
            for job, ctx in zip(the_jobs, ctxs, strict=True):
                with contextlib.suppress(Exception):  # a failed call sent what it sent
                    need(values, name)(job, ctx)

    def fresh(seed: int) -> Callable[[list[str]], None]:
        def call(paths: list[str]) -> None:
            pairs = zip(the_jobs, paths, strict=True)
            calls: list[tuple[list[Any], dict[str, Any]]] = [
                ([job, RecordingCtx(path)], {}) for job, path in pairs
            ]
            for how, text in call_in_fresh_process(values, name, calls, seed, rerun_cells=True):
                if how == "raised" and text.startswith("NotImplementedError"):
                    raise NotImplementedError(text.partition(": ")[2])

        return call

    got: dict[str, Any] = {"here": recorded("here", here), "seeds": {}, "how": "processes"}
    try:
        for seed in HASH_SEEDS:
            got["seeds"][str(seed)] = recorded(f"seed-{seed}", fresh(seed))
    except CannotShip as exc:  # check() in Jupyter, a closure: a second call here instead
        got["how"] = f"a second call in this process ({exc})"
        got["seeds"] = {"again": recorded("again", here)}
    return got


def warm_up() -> None:
    """Once in the graded student process, before the checks fork (``student_side.preload``):
    the store scrubs every error it keeps, and its scrubber imports detect-secrets on first
    use, which each check's fork would otherwise do again."""
    redact.warm_up()


#: What the worker's clock (``ctx.clock``) reads in ``sent_later`` before the retry: half an
#: hour before the lab's epoch, the last day of a month and a year in UTC, so a key made
#: from ``ctx.clock.now()`` (its day, month or year) is a new key at the retry.
SCENE_YEAR_END = LAB_EPOCH - 1800.0


def sent_later(
    values: MutableMapping[str, Any], which: str, folder: str, jobs: list[list[Any]], seconds: float
) -> dict[str, Any]:
    """What the student's handler sends for each of ``jobs`` with the wall clock at
    ``wallclock.YEAR_END``, and on another machine (``elsewhere.on_another_machine``: its
    host, user and time zone) ``seconds`` later (a retry the next day, in the next hour, month and
    year: ``wallclock.clock_moved``).

    ``{"now": [...], "later": [...]}``: the calls each sent, in order, per job (see
    ``RecordingCtx``; nothing is charged or posted).
    """
    the_jobs = _enqueued(folder, jobs, FakeClock(LAB_EPOCH))
    got: dict[str, Any] = {}
    for label, later in (("now", 0.0), ("later", seconds)):
        # The retry on another worker's machine (its host, user, time zone): YEAR_END is
        # read in the zone the handler runs in, so the retry is in the next month there.
        with on_another_machine(values) if later else contextlib.nullcontext():
            with clock_moved(values, to_year_end(later)):
                # The worker's clock (ctx.clock) moves too: the retry's worker reads it later.
                got[label] = _sends(
                    values, which, folder, label, the_jobs, clock_at=SCENE_YEAR_END + later
                )
    return got


def two_workers(
    values: MutableMapping[str, Any], which: str, folder: str, job: list[Any]
) -> dict[str, Any]:
    """``two_deliveries`` with each delivery in a forked process of its own, as two workers.

    A ``threading.Lock`` or a module-level set is one per process, so it guards nothing
    here; a read made in its own transaction (a ledger status, ``payments.find``) pauses
    as in ``two_deliveries``. Returns how each delivery ended; the check counts the
    effects in ``folder/world.db`` itself.
    """
    clock = FakeClock(LAB_EPOCH)
    [the_job] = _enqueued(folder, [job], clock)
    World(Path(folder) / "world.db", clock).close()
    handler = need(values, "charge_handler" if which == "charge" else "post_handler")
    children = []
    for _n in range(2):
        out_r, out_w = os.pipe()
        go_r, go_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the worker process: never returns into the harness
            os.close(out_r)
            os.close(go_w)
            said = ""
            try:
                world = World(Path(folder) / "world.db", clock)
                ctx = SceneCtx(world, the_job, clock)
                errors: list[str] = []
                os.read(go_r, 1)
                try:
                    _observed(handler, errors, DELIVERY_PAUSE_S)(the_job, ctx)
                    said = "ok"
                except Exception as exc:  # noqa: BLE001 - each delivery's end is the evidence
                    said = f"{type(exc).__name__}: {str(exc)[:120]}"
                finally:
                    world.close()
            except BaseException as exc:  # noqa: BLE001 - reported to the parent as data
                said = f"{type(exc).__name__}: {str(exc)[:120]}"
            finally:
                os.write(out_w, said.encode("utf-8", "replace")[:400])
                os._exit(0)
        os.close(out_w)
        os.close(go_r)
        children.append((pid, out_r, go_w))
    for _pid, _out, go in children:
        os.write(go, b"g")  # both start at the same moment
        os.close(go)
    deliveries = []
    deadline = time.monotonic() + TWO_WORKERS_TIMEOUT_S
    for pid, out, _go in children:
        chunks = []
        while select.select([out], [], [], max(0.0, deadline - time.monotonic()))[0]:
            chunk = os.read(out, 4096)
            if not chunk:
                break
            chunks.append(chunk)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)  # a hung delivery
        os.waitpid(pid, 0)
        os.close(out)
        deliveries.append(b"".join(chunks).decode("utf-8", "replace") or "hung")
    raised = "NotImplementedError: "
    for said in deliveries:
        if said.startswith(raised) and is_stub_text(said[len(raised) :]):
            raise NotImplementedError(said[len(raised) :])  # the stub: "not started yet"
    return {"deliveries": deliveries}


#: How long ``two_workers`` waits for its two deliveries.
TWO_WORKERS_TIMEOUT_S = 20.0


def sent_from_two_stores(
    values: MutableMapping[str, Any], which: str, folder: str, jobs: list[list[Any]]
) -> list[list[dict[str, Any]]]:
    """What the student's handler sends for each of ``jobs``, each job from a job store of
    its own (``folder/store-N.db``): two queues, or a store rebuilt, numbering their jobs
    from 1, that share one payment API and one ledger. The jobs' ids are all the same;
    their keys are not. The calls each sent, in order, per job (see ``RecordingCtx``).
    """
    clock = FakeClock(LAB_EPOCH)
    the_jobs = [_enqueued(folder, [job], clock, f"store-{n}.db")[0] for n, job in enumerate(jobs)]
    return _sends(values, which, folder, "sent", the_jobs)


#: Run first in ``restarted_later``'s new process, before the cells run again there: the
#: wall clock reads ``LABKIT_LATER_S`` seconds later (``wallclock.clock_moved``, the
#: ``datetime`` module's class included), as it would for a worker restarted the next
#: day. The lab's own modules are imported before, on the real clock; the cells import
#: ``datetime`` after, and get the later one. Entered for the life of that process.
_LATER_CLOCK = r"""
import os as _os
import labkit.grading.isolation.student_side, labkit.grading.exercises.ex05.recorder
from labkit.grading.exercises.elsewhere import on_another_machine as _on_another_machine
from labkit.grading.exercises.wallclock import clock_moved as _clock_moved, to_year_end as _to
_shift = float(_os.environ["LABKIT_LATER_S"])
# Kept in _there and _later: a context no longer referred to is closed, and undone.
_there = _on_another_machine({}) if _shift else None
if _there is not None:
    _there.__enter__()
_later = _clock_moved({}, _to(_shift), datetime_module=True)  # read in the zone it runs in
_later.__enter__()
"""


def restarted_later(
    values: MutableMapping[str, Any], which: str, folder: str, jobs: list[list[Any]], seconds: float
) -> dict[str, Any]:
    """What the student's handler sends for each of ``jobs`` from a worker started at
    ``YEAR_END``, and from one started on another machine ``seconds`` later (the next day,
    month and year): two new processes, one hash seed, the cells run again in each
    (``replay``), each with the wall clock moved (and the machine changed) before the
    cells run. A value computed at import from the date or the host differs between the
    two.

    ``{"now": [...], "later": [...]}`` (the calls each sent, per job), or ``{"how": why}``
    when the handler cannot be run again from its cells (``check()`` in Jupyter).
    """
    from labkit.grading.checks import CELLS
    from labkit.grading.exercises.replay import CannotShip, call_in_fresh_process

    if not values.get(CELLS, ()):
        return {"how": "the handler's cells are not known here"}
    the_jobs = _enqueued(folder, jobs, FakeClock(LAB_EPOCH))
    name = "charge_handler" if which == "charge" else "post_handler"
    got: dict[str, Any] = {}
    # Each worker starts at wallclock.YEAR_END in its own zone, or (on another machine) a
    # day and an hour after it: the prelude reads the clock where the worker runs.
    for label, shift in (("now", 0.0), ("later", seconds)):
        paths = [str(Path(folder) / f"restart-{label}-{i}.jsonl") for i in range(len(the_jobs))]
        calls: list[tuple[list[Any], dict[str, Any]]] = [
            ([job, RecordingCtx(path)], {}) for job, path in zip(the_jobs, paths, strict=True)
        ]
        try:
            answers = call_in_fresh_process(
                values,
                name,
                calls,
                hash_seed=0,
                rerun_cells=True,
                prelude=_LATER_CLOCK,
                env={"LABKIT_LATER_S": repr(shift)},
            )
        except CannotShip as exc:
            return {"how": f"the restarted worker: {exc}"}
        for how, text in answers:
            if how == "raised" and text.startswith("NotImplementedError"):
                said = text.partition(": ")[2]
                if is_stub_text(said):
                    raise NotImplementedError(said)
        got[label] = [calls_in(path) for path in paths]
    return got


def sent_here(
    values: MutableMapping[str, Any],
    which: str,
    folder: str,
    jobs: list[list[Any]],
    attempt: int | None = None,
) -> list[list[dict[str, Any]]]:
    """What the student's handler sends for each of ``jobs`` (one job store, one process,
    one call each; see ``RecordingCtx``: nothing is charged or posted), each job at its
    ``attempt`` when given (a retry: ``job.attempt`` 3)."""
    found = _enqueued(folder, jobs, FakeClock(LAB_EPOCH))
    the_jobs = [job for job in found if job is not None]  # each was just enqueued
    if attempt is not None:
        the_jobs = [dataclasses.replace(job, attempt=attempt) for job in the_jobs]
    return _sends(values, which, folder, "here", the_jobs)


def sent_in_two_worlds(
    values: MutableMapping[str, Any], which: str, folder: str, job: list[Any]
) -> list[list[dict[str, Any]]]:
    """What the student's handler sends for the same ``job`` run in one worker against two
    worlds in turn (a payment API and a ledger each: a second tenant, or a notebook that
    ran a new scenario): each world must be asked; nothing the worker kept from the first
    world says the second one was charged or posted."""
    [the_job] = _enqueued(folder, [job], FakeClock(LAB_EPOCH))
    return _sends(values, which, folder, "world", [the_job, the_job], new_world=True)


def _enqueued(folder: str, jobs: list[Any], clock: FakeClock, db: str = "jobs.db") -> list[Any]:
    """``jobs`` (``[kind, payload, key]`` each) enqueued in ``folder/db``, read back by key."""
    with JobStore(Path(folder) / db, clock) as store:
        for kind, payload, key in jobs:
            store.enqueue(kind, payload, key=key)
        return [store.get_by_key(key) for _kind, _payload, key in jobs]


def _sends(
    values: MutableMapping[str, Any],
    which: str,
    folder: str,
    stem: str,
    jobs: list[Any],
    new_world: bool = False,
    clock_at: float | None = None,
) -> list[list[dict[str, Any]]]:
    """What the student's ``which`` handler sends for each of ``jobs`` (recorded in
    ``folder/STEM-N.jsonl`` by ``RecordingCtx``; a failed call sent what it sent), in one
    world, or in a ``new_world`` for each job; ``ctx.clock`` reads ``clock_at`` if given."""
    name = "charge_handler" if which == "charge" else "post_handler"
    paths = [str(Path(folder) / f"{stem}-{n}.jsonl") for n in range(len(jobs))]
    ctx: RecordingCtx | None = None
    with fresh_state(values):
        for job, path in zip(jobs, paths, strict=True):
            # One worker: one world for its jobs in turn (``RecordingCtx.record_to``).
            ctx = ctx.record_to(path) if ctx and not new_world else RecordingCtx(path)
            if clock_at is not None:
                ctx.__dict__["_clock"] = FakeClock(clock_at)  # RecordingCtx.clock's own
            try:
                need(values, name)(job, ctx)
            except NotImplementedError as exc:
                if is_stub(exc):
                    raise
            except Exception:  # noqa: BLE001, S110 - a failed call sent what it sent
                pass
    return [calls_in(path) for path in paths]


def refused_charge(values: MutableMapping[str, Any], folder: str, job: list[Any]) -> dict[str, Any]:
    """The student's ``charge_handler`` against an API that refuses every charge with a
    400 (see ``ex05.refused``): what came out, and whether the worker would retry it."""
    from labkit.grading.exercises.ex05.refused import refused_charge as call

    return call(values, folder, job)


def never_answered(
    values: MutableMapping[str, Any],
    which: str,
    folder: str,
    job: list[Any],
    how: str = "503",
    last: bool = False,
) -> dict[str, Any]:
    """``which`` handler called once while its service fails every call (a charge as
    ``how`` says), on the job's first or ``last`` attempt, its sleeps passing at once (see
    ``ex05.refused``): whether it gave up with a reply of its own."""
    from labkit.grading.exercises.ex05.refused import Outage
    from labkit.grading.exercises.ex05.refused import never_answered as call

    outage = Outage(how)
    with _sleeps_passed(values, outage):
        return call(values, which, folder, job, outage, last)


def keys_of_a_redriven_job(
    values: MutableMapping[str, Any], folder: str, job: list[Any]
) -> dict[str, Any]:
    """The Idempotency-Keys of ``job`` charged as enqueued, then redriven (``ex05.refused``)."""
    from labkit.grading.exercises.ex05.refused import keys_of_a_redriven_job as call

    return call(values, folder, job)


def posts_of_a_redriven_job(
    values: MutableMapping[str, Any],
    folder: str,
    job: list[Any],
    corrected: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The ledger entries of ``job`` posted as enqueued, then redriven, its payload
    ``corrected`` when given (``ex05.refused``)."""
    from labkit.grading.exercises.ex05.refused import posts_of_a_redriven_job as call

    return call(values, folder, job, corrected)


def conflicting_key(
    values: MutableMapping[str, Any], folder: str, job: list[Any], earlier: int | dict[str, Any]
) -> dict[str, Any]:
    """The student's ``charge_handler`` meeting a 400 ``IdempotencyKeyReused``: the job's
    Idempotency-Key was first used for ``earlier``, an amount or other payload fields
    (see ``ex05.refused``)."""
    from labkit.grading.exercises.ex05.refused import conflicting_key as call

    return call(values, folder, job, earlier)


def while_the_first_runs(
    values: MutableMapping[str, Any], which: str, folder: str, job: list[Any]
) -> dict[str, Any]:
    """Two deliveries of ``job`` in one process, the first held in its charge (or its
    ledger transaction) and then failed (see ``ex05.inflight``)."""
    from labkit.grading.exercises.ex05.inflight import while_the_first_runs as call

    return call(values, which, folder, job)


def repeated_in_one_worker(
    values: MutableMapping[str, Any], folder: str, job: list[Any]
) -> dict[str, Any]:
    """``charge_handler`` called twice in a row for ``job`` in one process (see
    ``ex05.inflight``)."""
    from labkit.grading.exercises.ex05.inflight import repeated_in_one_worker as call

    return call(values, folder, job)
