"""Harness for exercise 14: the student's multi-step job on the check's files, crashed on purpose.

A check makes a folder with ``steps.db`` (``labdb.steps_db``) and ``world.db`` (a
``labkit.world.World``, perhaps with the payment API scripted to decline). Each function
here opens its own connection to ``steps.db`` and its own ``World`` on ``world.db``, hands
the student's ``run_order`` a view of that world (``_Seen``) and closes both afterwards
without committing, so whatever the student's code left uncommitted is rolled back as
after a real crash. The check reads both files itself. ``run_on_one_worker`` instead runs
several orders in turn on ONE connection, as a long-lived worker does, the first one made
to fail while the student's code may hold a transaction open.

``_Seen`` passes every call to the real world and names the moments around each effect:
right before it (the job got there) and right after it returned or committed (the
effect is done, its checkpoint not yet written). In a kill sweep those are boundaries of
their own beside the student's writes; in ``run`` it can raise ``SimulatedCrash`` right
after a named effect. The world's own SQL statements are not boundaries: a kill inside
one of the world's transactions would test SQLite, not the job.
"""

from __future__ import annotations

import ast
import builtins
import json
import math
import sqlite3
import threading
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import contextmanager, nullcontext, suppress
from functools import partial
from pathlib import Path
from types import FunctionType
from typing import Any, cast
from unittest import mock

from labkit import queries
from labkit.clock import LAB_EPOCH, FakeClock
from labkit.errors import (
    IdempotencyConflict,
    PermanentError,
    ResponseLost,
    SimulatedCrash,
    TransientError,
)
from labkit.explore.boundaries import Tracer
from labkit.grading.checks import run_with_timeout
from labkit.grading.exercises.common import fresh_state, need, outcome
from labkit.grading.exercises.elsewhere import on_another_machine
from labkit.grading.exercises.killsweep import sweep
from labkit.grading.exercises.labdb import connect, rows_of
from labkit.grading.exercises.replay import CannotShip, call_in_fresh_process, cells_run_again
from labkit.grading.exercises.tracing import (
    WRITES,
    Rows,
    Traced,
    Watched,
    verb_of,
    with_what_it_left,
)
from labkit.grading.exercises.wallclock import RETRY_S, clock_moved, to_year_end
from labkit.grading.stub import is_stub_text
from labkit.world import World
from labkit.world.services import IdempotencyKeyReused, KeyInProgress

#: The real ``sqlite3.connect``, taken when this module is imported (before a sweep's
#: child wraps it to watch every connection): the world's file is opened with it.
_CONNECT = sqlite3.connect
#: Kills per sweep: every boundary of a job of four steps and its compensation.
LIMIT = 40
#: How long one job of ``run_interleaved`` waits for the other's (seconds).
INTERLEAVED_S = 5.0
#: The harness's own statements (``harness.sql``).
_SQL = queries.load("grading/exercises/ex14/harness.sql")


class _Moments:
    """Where ``_Seen`` reports a moment: a sweep's tracer, a crash after one effect, both."""

    def __init__(self, tracer: Tracer | None = None, crash_after: str | None = None) -> None:
        # "ledger.transaction()#2": right after the second one (the release's, after the
        # reserve's); without "#n", after the first.
        what, _sep, nth = (crash_after or "").partition("#")
        self.tracer, self.crash_after = tracer, what or None
        self.nth, self.seen = int(nth or 1), 0
        self.crashed = False

    def before(self, what: str) -> None:
        if self.tracer is not None:
            self.tracer.mark(f"{what} (before it ran)")

    def after(self, what: str) -> None:
        if self.tracer is not None:
            self.tracer.mark(f"{what} (after it returned)")
        if what == self.crash_after and not self.crashed:
            self.seen += 1
            if self.seen < self.nth:
                return
            self.crashed = True
            raise SimulatedCrash(f"crashed right after {what}, before its checkpoint")

    def read_alone(self, what: str) -> None:
        """A ledger read in a transaction of its own (``ledger.status``, ``ledger.find``)
        returned: no kill here, a moment only for a copy that overtakes (``run_overtaken``)."""


class _Service:
    def __init__(self, service: Any, moments: _Moments, name: str, action: str) -> None:
        self._service, self._moments = service, moments
        self._what = f"{name}.{action}"
        setattr(self, action, self._call)

    def _call(self, *args: Any, **kwargs: Any) -> Any:
        self._moments.before(self._what)
        reply = getattr(self._service, self._what.partition(".")[2])(*args, **kwargs)
        self._moments.after(self._what)
        return reply

    def __getattr__(self, name: str) -> Any:
        return getattr(self._service, name)


class _Ledger:
    def __init__(self, ledger: Any, moments: _Moments) -> None:
        self._ledger, self._moments = ledger, moments

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        self._moments.before("ledger.transaction()")
        with self._ledger.transaction() as tx:
            yield tx
        self._moments.after("ledger.transaction()")

    def post(self, *args: Any, **kwargs: Any) -> Any:
        self._moments.before("ledger.post")
        reply = self._ledger.post(*args, **kwargs)
        self._moments.after("ledger.post")
        return reply

    def mark(self, *args: Any, **kwargs: Any) -> Any:
        self._moments.before("ledger.mark")
        reply = self._ledger.mark(*args, **kwargs)
        self._moments.after("ledger.mark")
        return reply

    def status(self, *args: Any, **kwargs: Any) -> Any:
        reply = self._ledger.status(*args, **kwargs)
        self._moments.read_alone("ledger.status")
        return reply

    def find(self, *args: Any, **kwargs: Any) -> Any:
        reply = self._ledger.find(*args, **kwargs)
        self._moments.read_alone("ledger.find")
        return reply

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ledger, name)


class CardDeclined(PermanentError):
    """A card declined, as a payment library raises it: a subclass of ``PermanentError``
    (Stripe's ``CardError``), no ``IdempotencyConflict``."""


class InsufficientFunds(PermanentError):
    """A card declined in a payment library's own words: a ``PermanentError`` whose class
    and message say ``insufficient_funds`` (a decline code), never 'declined' or
    'rejected'."""


class RequestMismatch(IdempotencyKeyReused):
    """A key conflict as a payment library words it: an ``IdempotencyKeyReused`` (so an
    ``IdempotencyConflict``) whose message names neither idempotency nor parameters."""


class _Restated:
    """The payment API whose refusals for good (``PermanentError``) come with another
    status, text and class: a card declined (402, ``CardDeclined``), as Stripe says it,
    not the world's 400, its message naming the request's Idempotency-Key; a key
    conflict (``RequestMismatch``) in words of its own. Only the class tells them apart.
    ``plain``: the decline is an ``InsufficientFunds`` whose message is its decline code
    alone (no 'declined', no 'rejected', no key)."""

    def __init__(self, payments: Any, status: int, plain: bool = False) -> None:
        self._payments, self._status, self._plain = payments, status, plain

    def charge(self, *args: Any, **kwargs: Any) -> Any:
        key = kwargs.get("idempotency_key", kwargs.get("key"))
        try:
            return self._payments.charge(*args, **kwargs)
        except IdempotencyConflict:
            raise RequestMismatch(
                f"400 from payments: this request does not match the first one sent under "
                f"{key!r}; nothing charged",
                status=400,
            ) from None
        except PermanentError as exc:
            if type(exc) is not PermanentError:
                raise
            if self._plain:
                raise InsufficientFunds(
                    f"{self._status}: insufficient_funds", status=self._status
                ) from None
            raise CardDeclined(
                f"{self._status} from payments: card_declined (insufficient funds) for the "
                f"request with Idempotency-Key {key!r}; nothing charged",
                status=self._status,
            ) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._payments, name)


class _Seen:
    """The world as the student's job sees it: the real services, each moment named.

    ``declined_as``: the payment API's refusals for good carry that status (``_Restated``;
    ``plain``: worded with a decline code alone).
    """

    def __init__(
        self,
        world: World,
        moments: _Moments,
        declined_as: int | None = None,
        plain: bool = False,
    ) -> None:
        self._world = world
        self.payments: Any = _Service(world.payments, moments, "payments", "charge")
        if declined_as is not None:
            self.payments = _Restated(self.payments, declined_as, plain)
        self.mail = _Service(world.mail, moments, "mail", "send")
        self.ledger = _Ledger(world.ledger, moments)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._world, name)


def open_world(path: Path, later_s: float = 0.0) -> World:
    """The world on ``path``, its own statements unwatched (see ``_CONNECT``); its clock
    ``later_s`` past the lab's epoch."""
    watching, sqlite3.connect = sqlite3.connect, _CONNECT
    try:
        return World(path, FakeClock(LAB_EPOCH + later_s))
    finally:
        sqlite3.connect = watching


def _job(
    values: MutableMapping[str, Any],
    folder: Path,
    order: dict[str, Any],
    version: int,
    moments: _Moments,
    later_s: float = 0.0,
    declined_as: int | None = None,
    wrap: Callable[[sqlite3.Connection], Any] | None = None,
    plain: bool = False,
) -> Any:
    """The student's ``run_order`` once, on its own connection (``wrap(conn)`` when
    given) and world (its clock ``later_s`` on), both closed after."""
    conn, world = connect(folder / "steps.db"), open_world(folder / "world.db", later_s)
    try:
        return need(values, "run_order")(
            conn if wrap is None else wrap(conn),
            _Seen(world, moments, declined_as, plain),
            dict(order),
            policy_version=version,
        )
    finally:
        conn.close()
        world.close()


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
    moments = _Moments(crash_after=crash_after)
    salt = {"hash": lambda obj: builtins.hash((0x5EED, obj))} if salted else {}
    with (
        fresh_state(values),
        restarted(values, salted) as here,
        mock.patch.dict(here, salt),
        _one_more_policy(here) if deployed else nullcontext(),
    ):
        try:
            later = RETRY_S if salted else 0.0
            args = (_job, here, Path(folder), order, version, moments, later, declined_as)
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


class _KilledOnceFailed(Watched):
    """``Watched`` that kills the job right after its first write that sets ``'failed'``
    (in its SQL or its parameters): the moment between the job's 'failed' and whatever
    the student writes next, when those are two statements of their own."""

    fired = False

    def execute(self, sql: str, params: Any = ()) -> Any:
        if self.fired:
            raise SimulatedCrash("the process was killed: this statement never ran")
        got = super().execute(sql, params)
        values = params.values() if isinstance(params, dict) else params
        said = [sql, *values] if isinstance(values, list | tuple) else [sql]
        if verb_of(sql) in ("UPDATE", "INSERT", "REPLACE") and any(
            isinstance(v, str) and "failed" in v.lower() for v in said
        ):
            self.fired = True
            raise SimulatedCrash("killed right after the job was set 'failed'")
        return got


def run_killed_once_failed(
    values: MutableMapping[str, Any], folder: str, order: dict[str, Any], version: int
) -> dict[str, Any]:
    """``run_order`` in ``folder``, killed right after the write that sets the job 'failed'.

    Whatever that write's transaction left uncommitted is rolled back (the connection is
    closed without a commit). The outcome, ``{"crashed": True}`` when it fired.
    """
    conn, world = connect(Path(folder) / "steps.db"), open_world(Path(folder) / "world.db")
    watched = _KilledOnceFailed(conn)
    try:
        with fresh_state(values):
            try:
                got = outcome(
                    need(values, "run_order"),
                    watched,
                    _Seen(world, _Moments()),
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
        return _job(values, life, order, at, _Moments(tracer))

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

    class _Overtaken(_Moments):
        def after(self, what: str) -> None:
            super().after(what)
            if what == after and not second:
                again = _Moments(crash_after=second_crash_after)
                # Another worker imports the module afresh: its own module-level names (a
                # lock, a cache), not the first copy's, whose lock this thread may hold.
                with cells_run_again(values) as fresh:
                    ns = values if fresh is None else fresh
                    try:
                        second.update(outcome(_job, ns, where, order, version, again))
                    except SimulatedCrash:
                        second.update({"crashed": True})

        def read_alone(self, what: str) -> None:
            # A mark read in a ledger transaction of its own is one too: the second copy
            # runs right after it, before the first copy's post.
            # (``after="ledger.read"``: right after the first such read, whatever came before.)
            if after in ("ledger.transaction()", "ledger.read"):
                self.after(after)

    with fresh_state(values):
        first = outcome(_job, values, where, order, version, _Overtaken())
    fired = bool(second) and (second_crash_after is None or "crashed" in second)
    return {"first": first, "second": second, "fired": fired}


class _AfterItsJobIsRead(Traced):
    """A connection that runs ``then`` once, right after the first read of ``step_jobs``
    made outside a transaction: between a look at the job's row and a write of it."""

    def __init__(self, conn: sqlite3.Connection, then: Callable[[], None]) -> None:
        super().__init__(conn)
        self.then: Callable[[], None] | None = then

    def execute(self, sql: str, params: Any = ()) -> Any:
        alone = not self._conn.in_transaction
        cursor = super().execute(sql, params)
        reads = verb_of(sql) in ("SELECT", "WITH") and "step_jobs" in sql.lower()
        if self.then is None or not (alone and reads):
            return cursor
        rows = cursor.fetchall()
        then, self.then = self.then, None
        then()
        return Rows(rows, cursor.rowcount, cursor.lastrowid)


def run_overtaken_at_its_read(
    values: MutableMapping[str, Any],
    folder: str,
    order: dict[str, Any],
    version: int,
    second_version: int,
) -> dict[str, Any]:
    """``run_order`` under ``version``, overtaken right after its first look at the
    job's row (``_AfterItsJobIsRead``) by a second copy under ``second_version`` that
    runs whole: two deliveries at once, one on each side of a deploy. Both outcomes, and
    ``fired``; the check reads the files (which version the row holds)."""
    second: dict[str, Any] = {}
    where = Path(folder).resolve()

    def overtake() -> None:
        with cells_run_again(values) as fresh:
            ns = values if fresh is None else fresh
            second.update(outcome(_job, ns, where, order, second_version, _Moments()))

    def wrap(conn: sqlite3.Connection) -> Any:
        return _AfterItsJobIsRead(conn, overtake)

    with fresh_state(values):
        first = outcome(_job, values, where, order, version, _Moments(), wrap=wrap)
    return {"first": first, "second": second, "fired": bool(second)}


class _LedgerDown(_Moments):
    """Moments whose ``nth`` ledger transaction fails before it starts: the ledger is down
    (a ``TransientError``), or, ``permanent``, it refuses the entry for good (a
    ``PermanentError``: the sku is unknown to it)."""

    def __init__(self, nth: int, permanent: bool = False) -> None:
        super().__init__()
        self.nth_transaction, self.transactions = nth, 0
        self.permanent = permanent

    def before(self, what: str) -> None:
        super().before(what)
        if what == "ledger.transaction()":
            self.transactions += 1
            if self.transactions == self.nth_transaction:
                if self.permanent:
                    raise PermanentError("422 from the ledger: sku refused, nothing done")
                raise TransientError("503 from the ledger: unavailable, nothing done", status=503)


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
        first = outcome(_job, values, Path(folder), order, version, _LedgerDown(nth, permanent))
        second = outcome(_job, values, Path(folder), order, version, _Moments()) if again else {}
    return {"first": first, "second": second}


class _TimedOutBefore(_Moments):
    """Moments whose first call to ``what`` (``"payments.charge"``, ``"mail.send"``) times
    out before the request reaches the service: a ``ResponseLost`` ("it may have been
    done") when nothing was done. ``in_progress``: instead, the service answers 409 (a
    ``KeyInProgress``, a ``TransientError``): a request under the same key, sent by a copy
    of the job, is still running there."""

    def __init__(self, what: str, in_progress: bool = False) -> None:
        super().__init__()
        self.what, self.fired, self.in_progress = what, False, in_progress

    def before(self, what: str) -> None:
        super().before(what)
        if what == self.what and not self.fired:
            self.fired = True
            if self.in_progress:
                raise KeyInProgress(
                    f"409 from {what}: a request with this Idempotency-Key is still running; "
                    "retry shortly and you will get its reply",
                    status=409,
                    retry_after=0.05,
                )
            raise ResponseLost(
                f"timeout waiting for {what}: the request was sent, the reply never came "
                "(it may have been done)"
            )


def run_timed_out_before(
    values: MutableMapping[str, Any],
    folder: str,
    order: dict[str, Any],
    version: int,
    what: str,
    in_progress: bool = False,
) -> dict[str, Any]:
    """``run_order`` whose first call to ``what`` times out before it reaches the service
    (``_TimedOutBefore``: a ``ResponseLost``, nothing done; ``in_progress``: a 409
    ``KeyInProgress`` instead), then, when it raised, the same job again (a redelivery).
    Both outcomes (the second ``{}`` when the first returned), and ``fired``."""
    moments = _TimedOutBefore(what, in_progress)
    with fresh_state(values):
        first = outcome(_job, values, Path(folder), order, version, moments)
        second = (
            outcome(_job, values, Path(folder), order, version, _Moments())
            if "raised" in first
            else {}
        )
    return {"first": first, "second": second, "fired": moments.fired}


class _ChargeTakenByACopy(_Moments):
    """Moments where, right before the job's charge, a second copy of the job (a worker
    restarted while this one still ran) checkpoints that charge on its own connection:
    when this copy's charge is then declined, its 'declined' checkpoint fails
    (IntegrityError) inside the transaction it opened for it."""

    def __init__(self, path: Path, order_id: int) -> None:
        super().__init__()
        self.path, self.order_id, self.fired = path, order_id, False

    def before(self, what: str) -> None:
        super().before(what)
        if what != "payments.charge" or self.fired:
            return
        other = connect(self.path, timeout=0.2)
        # A transaction the job holds open here keeps the write lock: nothing taken then.
        try:
            with suppress(sqlite3.OperationalError):
                other.execute(
                    _SQL["copy_checkpoints_the_charge"],
                    {"id": self.order_id, "result": json.dumps({"charge_id": "ch_copy"})},
                )
                self.fired = True
        finally:
            other.close()


class _InterruptedInATransaction(Watched):
    """``Watched`` that raises ``KeyboardInterrupt`` (a Ctrl-C, which a worker process
    survives) right after the first write sent while a transaction is open on the
    connection: one the student's code began, with BEGIN or a mode set on it."""

    def execute(self, sql: str, params: Any = ()) -> Any:
        got = super().execute(sql, params)
        if not self.crashed and verb_of(sql) in WRITES and self._conn.in_transaction:
            self.crashed = True
            raise KeyboardInterrupt("Ctrl-C right after a write in the job's own transaction")
        return got


def run_on_one_worker(
    values: MutableMapping[str, Any], folder: str, orders: list[dict[str, Any]], fault: str
) -> dict[str, Any]:
    """``run_order`` of each of ``orders`` (policy version 1) in turn on ONE connection
    and one world, as a long-lived worker runs its jobs, the first one made to fail:

    - ``"taken"``: its charge declined (the check's scene scripts the payment API) after a
      second copy of its job checkpointed that charge (``_ChargeTakenByACopy``);
    - ``"release_down"``: its charge declined, and the ledger down (a ``TransientError``,
      503) when its stock is released, the second ledger transaction;
    - ``"interrupted"``: a Ctrl-C right after the first write it sends inside a
      transaction (``_InterruptedInATransaction``);
    - ``"redelivered"``: every order already run to its end (the first one declined, its
      stock released), each on a connection of its own, before the worker gets them all
      again: a redelivery of a failed job, then of a done one.

    Each outcome (``{"interrupted": True}`` for the Ctrl-C) says under ``left`` what the
    call changed of the connection (``tracing.left_as_given``). Then, the worker still
    alive, another connection reads the last order's job and checkpoints and tries to
    take the write lock (``seen``); the worker's connection is closed (rolled back)
    only after. ``fired``: the fault happened.
    """
    path = Path(folder) / "steps.db"
    conn, world = connect(path), open_world(Path(folder) / "world.db")
    first = _InterruptedInATransaction(conn) if fault == "interrupted" else Watched(conn)
    moments: _Moments = _Moments()
    if fault == "taken":
        moments = _ChargeTakenByACopy(path, orders[0]["id"])
    elif fault == "release_down":
        moments = _LedgerDown(2)
    runs, ended = [], []
    try:
        with fresh_state(values):
            if fault == "redelivered":
                ended = [
                    outcome(_job, values, Path(folder), order, 1, _Moments()) for order in orders
                ]
            for n, order in enumerate(orders):
                watched, seen = (first, moments) if n == 0 else (Watched(conn), _Moments())
                try:
                    got = outcome(
                        need(values, "run_order"),
                        watched,
                        _Seen(world, seen),
                        dict(order),
                        policy_version=1,
                    )
                except KeyboardInterrupt:
                    if watched is not first or not first.crashed:
                        raise  # a real Ctrl-C of the grader
                    got = {"interrupted": True}
                runs.append(with_what_it_left(got, conn))
        seen_by_another = _seen_by_another(path, orders[-1]["id"])
    finally:
        conn.close()
        world.close()
    fired = {
        "taken": getattr(moments, "fired", False),
        "release_down": getattr(moments, "transactions", 0) >= 2,
        "interrupted": first.crashed,
        "redelivered": bool(ended) and all("returned" in e for e in ended),
    }[fault]
    return {"runs": runs, "seen": seen_by_another, "fired": fired}


def _seen_by_another(path: Path, order_id: int) -> dict[str, Any]:
    """What another worker sees of ``order_id``'s job while this one lives on: its state,
    its checkpoints, and ``write``: ``"ok"``, or why it could not take the write lock."""
    other = connect(path, timeout=0.2)
    try:
        jobs = {r["order_id"]: r["state"] for r in rows_of(other, "all_step_jobs")}
        steps = [r["step"] for r in rows_of(other, "all_job_steps") if r["order_id"] == order_id]
        seen: dict[str, Any] = {"state": jobs.get(order_id), "steps": steps, "write": "ok"}
        try:
            other.execute("BEGIN IMMEDIATE")
            other.execute("ROLLBACK")
        except sqlite3.OperationalError as exc:
            seen["write"] = str(exc)
        return seen
    except sqlite3.OperationalError as exc:
        return {"state": None, "steps": [], "write": str(exc)}
    finally:
        other.close()


class _Down(_Moments):
    """Moments where every call to ``what`` (``"mail.send"``) fails before it reaches the
    service: a 503 (``TransientError``), nothing done; the outage outlasts any retry."""

    def __init__(self, what: str) -> None:
        super().__init__()
        self.what, self.fired = what, False

    def before(self, what: str) -> None:
        super().before(what)
        if what == self.what:
            self.fired = True
            raise TransientError(f"503 from {what}: service unavailable, nothing done", status=503)


def run_again_on_one_worker(
    values: MutableMapping[str, Any],
    folder: str,
    order: dict[str, Any],
    version: int,
    times: int,
    down: str | None = None,
    then: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``run_order`` of ONE order ``times`` times in turn on ONE connection and one world,
    as a long-lived worker runs a job its queue delivers again (a retry, a redelivery):
    the same connection object every time. ``down``: during the first run, every call to
    that effect fails with a 503 (``_Down``), so the first run raises and the next one
    resumes. ``then``: another order the worker runs next, on the same connection. Each
    outcome (``then``'s last), and ``fired``."""
    path = Path(folder) / "steps.db"
    conn, world = connect(path), open_world(Path(folder) / "world.db")
    first = _Down(down) if down else _Moments()
    runs = []
    try:
        with fresh_state(values):
            for n, each in enumerate([order] * times + ([then] if then else [])):
                runs.append(
                    outcome(
                        need(values, "run_order"),
                        conn,
                        _Seen(world, first if n == 0 else _Moments()),
                        dict(each),
                        policy_version=version,
                    )
                )
    finally:
        conn.close()
        world.close()
    return {"runs": runs, "fired": getattr(first, "fired", True)}


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
            second.update(outcome(_job, values, where, other, version, _Moments()))
        except BaseException as exc:  # noqa: BLE001 - a crash or the stub: its outcome
            second.update({"raised": [type(exc).__name__], "message": str(exc)[:200]})

    class _Meanwhile(_Moments):
        def after(self, what: str) -> None:
            super().after(what)
            if what == after and not threads:
                threads.append(threading.Thread(target=other_run, daemon=True))
                threads[0].start()
                threads[0].join(INTERLEAVED_S)

    with fresh_state(values):
        first = outcome(_job, values, where, order, version, _Meanwhile())
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
            seen = _Seen(world, _Moments())
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
            got.append(outcome(_job, values, Path(folder), one, each, _Moments()))
    return got


#: The ``PYTHONHASHSEED`` of the new process ``run_in_a_new_process`` runs the jobs in:
#: there (CPython 3.11's SipHash) "reserve", "charge", "receipt" and "email" fall in four
#: different slots of a small set, in the order charge, receipt, email, reserve, so any
#: set built of a policy's steps lists them out of the policy's order, however it was
#: built (a set's order is its slots' when no two collide).
SCRAMBLING_SEED = 2


def _drive(schema: str, runs: list[Any]) -> dict[str, Any]:
    """In the new process: each ``(order, version)`` of ``runs`` through the student's
    ``run_order``, on one job database in memory made with ``schema`` and a world kept in
    memory (importing ``labkit.world`` there would cost more than the runs); what each
    run returned and the effects, in order, as ``(service, params)``."""
    import contextlib as _contextlib
    import sqlite3 as _sqlite3

    effects: list[Any] = []
    marks: dict[str, str] = {}

    class _Tx:
        def status(self, key: str) -> str | None:
            return marks.get(key)

        def mark(self, key: str, state: str = "done") -> None:
            marks[key] = state

        def post(self, account: str, amount: int, *, key: str) -> dict[str, Any]:
            effects.append(("ledger", {"account": account, "amount": amount}))
            return {"entry_id": f"le_{len(effects)}"}

    class _Ledger(_Tx):
        @_contextlib.contextmanager
        def transaction(self) -> Any:
            yield _Tx()

    class _Payments:
        def charge(self, customer: str, amount: int, currency: str = "BRL", **_keys: Any) -> Any:
            effects.append(("payments", {"customer": customer, "amount": amount}))
            return {"charge_id": f"ch_{len(effects)}", "amount": amount, "status": "succeeded"}

    class _Mail:
        def send(self, to: str, subject: str, body: str = "", **_keys: Any) -> Any:
            effects.append(("mail", {"to": to, "subject": subject}))
            return {"message_id": f"msg_{len(effects)}"}

    class _World:
        ledger, payments, mail = _Ledger(), _Payments(), _Mail()

    conn = _sqlite3.connect(":memory:", isolation_level=None)
    conn.executescript(schema)
    conn.row_factory = _sqlite3.Row
    ended = []
    for order, version in runs:
        try:
            ended.append(repr(run_order(conn, _World(), dict(order), policy_version=version)))  # type: ignore[name-defined]  # noqa: F821
        except Exception as exc:  # noqa: BLE001 - the student's error is the evidence
            ended.append(f"raised {type(exc).__name__}: {str(exc)[:120]}")
    return {"ended": ended, "effects": effects}


def run_in_a_new_process(values: MutableMapping[str, Any], runs: list[Any]) -> dict[str, Any]:
    """Each ``(order, version)`` of ``runs`` through ``run_order`` on a fresh job
    database (``labdb.steps_db``'s tables), in a new Python process whose str hashes
    differ (``SCRAMBLING_SEED``), as in a restarted worker, with a world in memory there
    (``_drive``).

    A set of steps iterates in hash order, which this process's seed may happen to make
    the policy's; there it is not. ``{"ended": [...], "effects": [(service, params)],
    "how": "process"}``; ``how`` says why not when the functions cannot be shipped
    (``check()`` in Jupyter, a closure) or the run failed there: then ``effects`` is None.
    """
    name = "_labkit_ex14_drive"
    # The student's namespace is a dict (the cells ran in it), as a function's globals must be.
    drive = FunctionType(_drive.__code__, cast(dict[str, Any], values), name)
    with fresh_state(values), mock.patch.dict(values, {name: drive}):
        try:
            [(said, text)] = call_in_fresh_process(
                values,
                name,
                [([queries.load("grading/exercises/labdb.sql")["steps_schema"], runs], {})],
                SCRAMBLING_SEED,
            )
        except CannotShip as exc:
            return {"ended": [], "effects": None, "how": str(exc)}
    if said != "returned":
        return {"ended": [text], "effects": None, "how": text}
    try:
        got: dict[str, Any] = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return {"ended": [text[:200]], "effects": None, "how": "an answer not understood"}
    for ended in got["ended"]:
        said, _sep, message = str(ended).partition(": ")
        if said == "raised NotImplementedError" and is_stub_text(message):
            raise NotImplementedError(message)  # the exercise stub: "not started yet"
    return {**got, "how": "process"}
