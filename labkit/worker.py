"""The worker: claim a job, run its handler, record the outcome, with fault points between.

``Worker(store, handlers, *, name="w1", queues=("default",), lease_s=30.0, faults=None,
clock=None, world=None, ack="late")``. ``handlers`` maps a job kind to
``handler(job, ctx) -> result`` (the result must be JSON). ``ctx`` is a ``Context``:
``ctx.point("name")`` fires a fault point from anywhere inside a handler (this is how a
student puts a crash exactly where they want it without touching labkit),
``ctx.heartbeat()`` extends the lease during long work, and ``ctx.clock``,
``ctx.store``, ``ctx.world``, ``ctx.worker``, ``ctx.faults``, ``ctx.job`` are at hand.

Where the worker fires each point (``ack="late"``, labkit's default: at-least-once;
Celery's default is the opposite, ``task_acks_late=False``, see lesson 14)::

    claim ─ after_claim ─ before_effect ─ handler(job, ctx) ─ after_effect
          ─ before_commit ─ store.complete(...) ─ after_commit ─ after_ack

- ``after_claim``: the claim is committed; the handler has not started.
- ``before_effect``: just before the handler is called.
- ``after_effect``: the handler returned (its effects are done), nothing is recorded.
- ``before_commit``: just before the transaction that records the result.
- ``after_commit``: that transaction is committed.
- ``after_ack``: the job is acknowledged. In the SQLite store the commit *is* the ack
  (one transaction), so this sits right after ``after_commit``; with a broker (Redis
  Streams' XACK, RabbitMQ's basic_ack) the ack is a separate step and a crash between
  the two redelivers a job whose result is already committed.

With ``ack="first"`` (at-most-once, the lesson's cautionary tale) the job is marked done
before the handler runs::

    claim ─ after_claim ─ before_commit ─ store.complete(...) ─ after_commit ─ after_ack
          ─ before_effect ─ handler(job, ctx) ─ after_effect

A crash anywhere from ``after_commit`` to before the effect loses the job; an error
raised by the handler is logged and the work is lost (the job already says succeeded).

A handler that fires some of these points itself, at more precise places (say, between
its external call and its own ledger write), declares them with ``@fires(...)`` and the
worker then does not fire them a second time. Any other name passed to ``ctx.point`` is
simply an extra point.

Outcomes: the handler's return value completes the job; an ``Exception`` goes to
``store.fail`` (retry with backoff or dead, by the store's ``RetryPolicy``); an unknown
kind goes dead at once with "no handler for kind '<kind>'"; ``CircuitOpen`` snoozes the
job until ``retry_at`` without spending an attempt; ``LeaseLost`` (a zombie whose lease
expired and whose job another worker took) discards this worker's result;
``StoreBusy`` (another connection held the database too long) makes the worker log it and
back off, doubling its wait up to ``BUSY_BACKOFF_MAX_S``, then carry on. A
``BaseException`` that is not an ``Exception`` - ``SimulatedCrash``, ``KeyboardInterrupt``
- propagates out of ``run_*``: this worker object is dead (it refuses to run again) and
a new ``Worker`` with fresh connections must take over, as after a real crash.

In production, this loop is Celery's, RQ's, Dramatiq's or procrastinate's worker;
labkit writes it out so each boundary can be seen and broken. The module is longer than
most (about 470 lines) on purpose: the loop, its fault points and the handling of each
way a run ends read in order on one page, the order lesson 06 crashes them in.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from labkit import jobargs
from labkit.clock import Clock
from labkit.errors import CircuitOpen, ConnectionLost, LeaseLost, PermanentError, StoreBusy
from labkit.faults import FaultPlan
from labkit.job import Job
from labkit.logs import job_fields
from labkit.redact import describe
from labkit.store.contract import WorkerStore

log = logging.getLogger("labkit.worker")
log.addHandler(logging.NullHandler())

Handler = Callable[[Job, "Context"], Any]
#: The first wait after the database was busy; it doubles each time, up to the cap.
BUSY_BACKOFF_S = 0.05
BUSY_BACKOFF_MAX_S = 5.0
#: How long a job waits when a breaker is open and did not say when it closes.
DEFAULT_SNOOZE_S = 30.0


class NoHandler(PermanentError):
    """The worker has no handler for this job's kind."""


class WorkerCrashed(RuntimeError):
    """This worker crashed; a crashed worker stays dead. Create a new Worker to take over."""


def fires(*points: str) -> Callable[[Handler], Handler]:
    """Declare the worker points a handler fires itself with ``ctx.point(...)``.

    ``@fires("before_effect", "after_effect")`` on a handler tells the worker not to
    fire those at its default places, so each is hit once per attempt, where the
    handler put it.
    """

    def mark(handler: Handler) -> Handler:
        handler.fires_points = frozenset(points)  # type: ignore[attr-defined]
        return handler

    return mark


class Context:
    """What a handler gets besides its job: fault points, heartbeat, clock, store, world."""

    def __init__(self, job: Job, worker: Worker) -> None:
        self.job = job
        self.worker = worker

    @property
    def store(self) -> WorkerStore:
        return self.worker.store

    @property
    def clock(self) -> Clock:
        return self.worker.clock

    @property
    def faults(self) -> FaultPlan:
        return self.worker.faults

    @property
    def world(self) -> Any:
        """The ``labkit.world.World`` given to the worker (None if none was)."""
        return self.worker.world

    def point(self, name: str) -> None:
        """Fire fault point ``name`` for this job (it may raise, delay, crash or kill)."""
        self.faults.hit(name, key=self.job.key, clock=self.clock)

    def heartbeat(self, lease_s: float | None = None) -> Job:
        """Extend this job's lease; raises ``LeaseLost`` if another worker took it."""
        self.job = self.store.heartbeat(self.job, lease_s or self.worker.lease_s)
        return self.job


class RunOutcome(StrEnum):
    """How one run of a job by this worker ended (the job's new state, or what stopped it)."""

    SUCCEEDED = "succeeded"
    RETRY_WAIT = "retry_wait"
    DEAD = "dead"
    #: The handler asked to run again later, without spending an attempt.
    SNOOZED = "snoozed"
    #: The outcome could not be recorded (the database stayed busy): the lease decides.
    BUSY = "busy"
    #: The connection to the store dropped while recording: the lease decides.
    DISCONNECTED = "disconnected"
    #: The process "died" here (a ``SimulatedCrash``): nothing recorded.
    CRASHED = "crashed"
    #: Another worker took the job over; this worker's outcome was refused.
    LEASE_LOST = "lease_lost"
    #: Recorded and acknowledged, then the reply to the caller was lost.
    LOST_AFTER_ACK = "lost_after_ack"


@dataclass(frozen=True)
class Run:
    """One job run by this worker and how it ended, for tests and logs."""

    job_id: int
    key: str
    attempt: int
    outcome: RunOutcome
    error: str | None = None


class Worker:
    """Claims jobs from ``store`` and runs them with ``handlers`` (see the module docstring)."""

    def __init__(
        self,
        store: WorkerStore,
        handlers: Mapping[str, Handler],
        *,
        name: str = "w1",
        queues: Sequence[str] = ("default",),
        lease_s: float = 30.0,
        faults: FaultPlan | None = None,
        clock: Clock | None = None,
        world: Any = None,
        ack: Literal["late", "first"] = "late",
        circuit_snooze_s: float = DEFAULT_SNOOZE_S,
    ) -> None:
        if ack not in ("late", "first"):
            raise ValueError(
                f"ack must be 'late' (after the handler) or 'first' (before it), not {ack!r}"
            )
        lease_s = jobargs.seconds("lease_s", lease_s)
        circuit_snooze_s = jobargs.seconds("circuit_snooze_s", circuit_snooze_s, allow_zero=True)
        jobargs.name("name", name)
        self.store = store
        self.handlers = dict(handlers)
        self.name = name
        self.queues = jobargs.queues(queues)
        self.lease_s = float(lease_s)
        self.faults = faults if faults is not None else FaultPlan()
        self.clock: Clock = clock or store.clock
        self.world = world
        self.ack = ack
        self.circuit_snooze_s = circuit_snooze_s
        #: The last runs of this worker, newest last.
        self.runs: deque[Run] = deque(maxlen=10_000)
        self.crashed: BaseException | None = None
        self._stop = threading.Event()

    def __repr__(self) -> str:
        state = "crashed" if self.crashed else "stopping" if self._stop.is_set() else "ready"
        return f"Worker({self.name!r}, ack={self.ack!r}, {state})"

    # -- loops -------------------------------------------------------------------------

    def run_once(self) -> Job | None:
        """Claim and run one job; return it as it ended, or None if nothing was ready."""
        if self.crashed is not None:
            raise WorkerCrashed(
                f"worker {self.name} crashed ({self.crashed}); a crashed worker stays dead. "
                "Create a new Worker (with fresh store/world objects) to take over."
            )
        job = self._claim()
        if job is None:
            return None
        try:
            return self._process(job)
        except self._dropped as exc:
            # The connection went while the outcome was being recorded: it may or may not
            # have been saved; the next call reconnects.
            return self._left_to_lease(
                job,
                RunOutcome.DISCONNECTED,
                exc,
                "the connection to the job store dropped while recording it; unless the "
                "outcome was saved, it runs again when its lease expires",
            )
        except StoreBusy as exc:
            return self._left_to_lease(
                job,
                RunOutcome.BUSY,
                exc,
                "the database was busy when recording it, so nothing was saved; it runs "
                "again when its lease expires",
            )
        except Exception:
            raise
        except BaseException as exc:
            self.crashed = exc
            self.runs.append(Run(job.id, job.key, job.attempt, RunOutcome.CRASHED, str(exc)))
            log.info(
                "%s crashed on job %s (%s): %s",
                self.name,
                job.id,
                job.key,
                exc,
                extra=job_fields(job, self.name, RunOutcome.CRASHED),
            )
            raise

    def _left_to_lease(self, job: Job, outcome: RunOutcome, exc: BaseException, why: str) -> Job:
        """The job ran but its outcome could not be recorded: either it was saved after all,
        or the lease runs out and the job runs again (at-least-once), exactly as if this
        worker had died here."""
        self.runs.append(Run(job.id, job.key, job.attempt, outcome, describe(exc)))
        log.warning(
            "%s: job %s (%s) ran but %s: %s",
            self.name,
            job.id,
            job.key,
            why,
            exc,
            extra=job_fields(job, self.name, outcome),
        )
        return job

    @property
    def _dropped(self) -> tuple[type[BaseException], ...]:
        """What a store raises when its connection drops: labkit's ``ConnectionLost``, and
        the driver's own classes a store names in ``connection_errors`` (Redis's)."""
        return (ConnectionLost, *getattr(self.store, "connection_errors", ()))

    def _claim(self) -> Job | None:
        """Claim one job, backing off (by the clock) while the database is busy or gone.

        A failover or a dropped connection does not stop the worker: it waits, longer
        each time up to ``BUSY_BACKOFF_MAX_S``, and asks again (the store reconnects).
        """
        waiting: tuple[type[BaseException], ...] = (StoreBusy, *self._dropped)
        for tries in itertools.count():
            try:
                return self.store.claim(self.name, queues=self.queues, lease_s=self.lease_s)
            except waiting as exc:
                if self._stop.is_set():
                    return None
                delay = min(BUSY_BACKOFF_S * 2**tries, BUSY_BACKOFF_MAX_S)
                what = "busy" if isinstance(exc, StoreBusy) else "unreachable"
                log.warning(
                    "%s: the job database is %s (%s); backing off %.2fs and trying again",
                    self.name,
                    what,
                    exc,
                    delay,
                )
                self.clock.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    def run_until_idle(self, max_jobs: int | None = None) -> int:
        """Run jobs until none is ready now (or ``max_jobs`` ran); return how many ran."""
        count = 0
        while (max_jobs is None or count < max_jobs) and not self._stop.is_set():
            if self.run_once() is None:
                break
            count += 1
        return count

    def drain(self, max_jobs: int | None = None) -> int:
        """Run until no job of its queues is waiting, sleeping (by the clock) until the next is due.

        Jobs in ``retry_wait`` and expired leases of crashed workers count as waiting,
        so with a ``FakeClock`` this runs every retry and recovery to the end at once.
        """
        count = 0
        while (max_jobs is None or count < max_jobs) and not self._stop.is_set():
            if self.run_once() is not None:
                count += 1
                continue
            due = self.next_due()
            if due is None:
                break
            # A millisecond past due: float rounding must not leave the job a hair early.
            self.clock.sleep(max(due - self.clock.now(), 0.0) + 0.001)
        return count

    def next_due(self) -> float | None:
        """When the next job of this worker's queues becomes claimable, or None if none will."""
        return self.store.next_due(self.queues)

    def run_forever(self, poll_s: float = 1.0) -> int:
        """Run jobs, polling every ``poll_s`` when idle, until ``stop()``; return how many ran."""
        count = 0
        while not self._stop.is_set():
            if self.run_once() is None:
                self.clock.sleep(poll_s)
            else:
                count += 1
        log.info("%s stopped after %d jobs", self.name, count)
        return count

    def stop(self) -> None:
        """Ask the loop to stop after the current job (graceful: nothing is cut in half)."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    # -- one job -----------------------------------------------------------------------

    def _process(self, job: Job) -> Job:
        ctx = Context(job, self)
        handler = self.handlers.get(job.kind)
        own: frozenset[str] = getattr(handler, "fires_points", frozenset())

        def at(point: str) -> None:
            if point not in own:
                ctx.point(point)

        if self.ack == "first":
            return self._ack_first(ctx, handler, at)
        try:
            at("after_claim")
            at("before_effect")
            result = self._call(ctx, handler)
            at("after_effect")
            at("before_commit")
        except CircuitOpen as exc:
            return self._snooze(ctx, exc)
        except LeaseLost as exc:
            return self._lease_lost(ctx, exc)
        except Exception as exc:
            return self._fail(ctx, exc)
        try:
            finished = self.store.complete(ctx.job, result)
        except LeaseLost as exc:
            return self._lease_lost(ctx, exc)
        self._after_ack(ctx, at, finished)
        return finished

    def _ack_first(self, ctx: Context, handler: Handler | None, at: Callable[[str], None]) -> Job:
        try:
            at("after_claim")
            at("before_commit")
        except Exception as exc:
            return self._fail(ctx, exc)
        try:
            acked = self.store.complete(ctx.job, None)
        except LeaseLost as exc:
            return self._lease_lost(ctx, exc)
        self._after_ack(ctx, at, acked)
        try:
            at("before_effect")
            self._call(ctx, handler)
            at("after_effect")
        except Exception as exc:
            # Nothing can record this any more: the job already says succeeded.
            log.warning(
                "%s: job %s (%s) failed after it was acknowledged; the work is lost: %s",
                self.name,
                ctx.job.id,
                ctx.job.key,
                describe(exc),
                extra=job_fields(ctx.job, self.name, RunOutcome.LOST_AFTER_ACK),
            )
            self.runs[-1] = Run(
                ctx.job.id, ctx.job.key, ctx.job.attempt, RunOutcome.LOST_AFTER_ACK, describe(exc)
            )
        return acked

    def _call(self, ctx: Context, handler: Handler | None) -> Any:
        if handler is None:
            known = ", ".join(sorted(self.handlers)) or "none"
            raise NoHandler(
                f"no handler for kind '{ctx.job.kind}' in worker {self.name} (it knows: {known}); "
                "register a handler for it, or fix the job's kind and redrive it"
            )
        return handler(ctx.job, ctx)

    def _after_ack(self, ctx: Context, at: Callable[[str], None], finished: Job) -> None:
        self.runs.append(
            Run(finished.id, finished.key, ctx.job.attempt, RunOutcome(finished.state))
        )
        log.info(
            "%s: job %s (%s) attempt %s succeeded",
            self.name,
            finished.id,
            finished.key,
            ctx.job.attempt,
            extra=job_fields(ctx.job, self.name, str(finished.state)),
        )
        try:
            at("after_commit")
            at("after_ack")
        except Exception as exc:
            # The job is recorded and acknowledged; an error now cannot undo that.
            log.warning(
                "%s: error after job %s was acknowledged: %s", self.name, finished.id, describe(exc)
            )

    def _fail(self, ctx: Context, exc: Exception) -> Job:
        try:
            failed = self.store.fail(ctx.job, exc)
        except LeaseLost as lost:
            return self._lease_lost(ctx, lost)
        self.runs.append(
            Run(failed.id, failed.key, ctx.job.attempt, RunOutcome(failed.state), describe(exc))
        )
        log.info(
            "%s: job %s (%s) attempt %s -> %s: %s",
            self.name,
            failed.id,
            failed.key,
            ctx.job.attempt,
            failed.state,
            describe(exc),
            extra=job_fields(ctx.job, self.name, str(failed.state)),
        )
        return failed

    def _snooze(self, ctx: Context, exc: CircuitOpen) -> Job:
        now = self.clock.now()
        delay = self.circuit_snooze_s if exc.retry_at is None else max(exc.retry_at - now, 0.0)
        try:
            snoozed = self.store.snooze(ctx.job, delay, reason=str(exc))
        except LeaseLost as lost:
            return self._lease_lost(ctx, lost)
        self.runs.append(
            Run(snoozed.id, snoozed.key, ctx.job.attempt, RunOutcome.SNOOZED, describe(exc))
        )
        log.info(
            "%s: job %s snoozed %.1fs: %s",
            self.name,
            snoozed.id,
            delay,
            exc,
            extra=job_fields(ctx.job, self.name, RunOutcome.SNOOZED),
        )
        return snoozed

    def _lease_lost(self, ctx: Context, exc: LeaseLost) -> Job:
        self.runs.append(
            Run(ctx.job.id, ctx.job.key, ctx.job.attempt, RunOutcome.LEASE_LOST, describe(exc))
        )
        log.warning(
            "%s: %s", self.name, exc, extra=job_fields(ctx.job, self.name, RunOutcome.LEASE_LOST)
        )
        return self.store.get(ctx.job.id)
