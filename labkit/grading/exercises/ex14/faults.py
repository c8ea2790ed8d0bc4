"""Exercise 14's faults: the moments and connections that fail the student's job on cue.

Each is a ``seen.Moments`` (an effect that fails before it starts, a copy of the job
that acts first) or a wrapped connection (a kill or a Ctrl-C right after a given
write); the scenes in ``harness`` and ``one_worker`` run the job under them.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

from labkit import queries
from labkit.errors import PermanentError, ResponseLost, SimulatedCrash, TransientError
from labkit.grading.exercises.ex14.seen import Moments
from labkit.grading.exercises.labdb import connect
from labkit.grading.exercises.tracing import WRITES, Rows, Traced, Watched, verb_of
from labkit.world.services import KeyInProgress

#: The harness's own statements (``harness.sql``).
_SQL = queries.load("grading/exercises/ex14/harness.sql")


class KilledOnceFailed(Watched):
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


class AfterItsJobIsRead(Traced):
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
        return Rows(rows, cursor.rowcount, cursor.lastrowid, description=cursor.description)


class LedgerDown(Moments):
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


class TimedOutBefore(Moments):
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


class ChargeTakenByACopy(Moments):
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


class InterruptedInATransaction(Watched):
    """``Watched`` that raises ``KeyboardInterrupt`` (a Ctrl-C, which a worker process
    survives) right after the first write sent while a transaction is open on the
    connection: one the student's code began, with BEGIN or a mode set on it."""

    #: False once the job it was meant for is over: the worker's later jobs on the same
    #: connection object run uninterrupted. ``ArmedAtTheCharge`` keeps it False until the
    #: job's charge is called.
    armed = True

    def execute(self, sql: str, params: Any = ()) -> Any:
        got = super().execute(sql, params)
        if self.armed and not self.crashed and verb_of(sql) in WRITES and self._conn.in_transaction:
            self.crashed = True
            raise KeyboardInterrupt("Ctrl-C right after a write in the job's own transaction")
        return got


class ArmedAtTheCharge(Moments):
    """Moments that arm ``interrupted`` (an ``InterruptedInATransaction``) when the job
    calls the payment API: the Ctrl-C comes in the transaction the declined charge
    opens, not in one the job may open around an earlier step's checkpoint (which would
    leave the decline the check scripted to the worker's next job)."""

    def __init__(self, interrupted: InterruptedInATransaction) -> None:
        super().__init__()
        self.interrupted = interrupted
        interrupted.armed = False

    def before(self, what: str) -> None:
        super().before(what)
        if what == "payments.charge" and not self.interrupted.crashed:
            self.interrupted.armed = True


class Down(Moments):
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
