"""Exercise 5: the student's ``charge_handler`` meeting a 400 from the payment API.

The worker buries a ``PermanentError`` as dead and retries a ``TransientError``; what the
handler lets out decides which. A fake API (nothing is charged) refuses every charge, and
the check reads what came out, without a worker: a few milliseconds instead of a run.
``handled_once`` is that one call against any fake API (``throttled.key_in_progress``'s too).
"""

from __future__ import annotations

import dataclasses
import sqlite3
import types
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from labkit.clock import LAB_EPOCH, FakeClock
from labkit.errors import PermanentError, ResponseLost, StoreBusy, TransientError
from labkit.grading.exercises.common import fresh_state, need
from labkit.grading.exercises.ex05.recorder import SceneCtx
from labkit.grading.stub import is_stub
from labkit.store import JobStore
from labkit.world import World


class _RefusingPayments:
    """A payment API that answers every charge with a 400 (the card declined)."""

    def __init__(self) -> None:
        self.calls = 0

    def charge(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        self.calls += 1
        raise PermanentError("400 from payments.charge: card declined; nothing done", status=400)

    def find(self, *args: Any, **kwargs: Any) -> list[Any]:
        return []


def refused_charge(values: MutableMapping[str, Any], folder: str, job: list[Any]) -> dict[str, Any]:
    """Call the student's ``charge_handler`` once for ``job`` against ``_RefusingPayments``.

    ``{"calls": charges made, "raised": "ErrorClass: message" or "", "transient": whether
    what came out is a TransientError (the worker would retry it), "returned": repr}``.
    """
    payments = _RefusingPayments()
    got, error = handled_once(values, folder, job, payments)
    got.setdefault("raised", "")
    got["transient"] = isinstance(error, TransientError)
    got["calls"] = payments.calls
    return got


def handled_once(
    values: MutableMapping[str, Any],
    folder: str,
    job: list[Any],
    payments: Any,
    later: dict[str, Any] | None = None,
    ledger: Any = None,
    handler: str = "charge_handler",
    clock: Any = None,
) -> tuple[dict[str, Any], Exception | None]:
    """The student's ``charge_handler`` (or ``handler``) called once for ``job`` (enqueued
    in a new store in ``folder``, then with the fields ``later`` gives, as the store hands
    it on a later run) with ``payments`` as the world's payment API and ``ledger`` as its
    ledger: ``{"returned": repr}`` or ``{"raised": "ErrorClass: message"}``, and the error
    itself (None when it returned).

    ``ctx.clock`` and ``ctx.world.clock`` are ``clock`` (a ``FakeClock`` when none is
    given), as a worker's context and world have one: a handler that waits on the injected
    clock (``ctx.clock.sleep(exc.retry_after)``) finds it here too."""
    kind, payload, key = job
    with JobStore(Path(folder) / "jobs.db", FakeClock(LAB_EPOCH)) as store:
        store.enqueue(kind, payload, key=key)
        the_job = store.get_by_key(key)
    if the_job is not None and later:
        the_job = dataclasses.replace(the_job, **later)
    clock = FakeClock(LAB_EPOCH) if clock is None else clock
    world = types.SimpleNamespace(payments=payments, ledger=ledger, clock=clock)
    ctx = SceneCtx(world, the_job, clock)
    with fresh_state(values):
        try:
            return {"returned": repr(need(values, handler)(the_job, ctx))}, None
        except NotImplementedError as exc:
            if is_stub(exc):
                raise
            return {"raised": f"NotImplementedError: {str(exc)[:160]}"}, exc
        except Exception as exc:  # noqa: BLE001 - what came out is the evidence
            return {"raised": f"{type(exc).__name__}: {str(exc)[:160]}"}, exc


class _ConflictingPayments:
    """The payment API when the job's Idempotency-Key was first used with other parameters
    (an earlier version of the invoice, for another amount): a charge under that key gets
    the 400 ``IdempotencyKeyReused``; a charge under another key, or none, is a new charge
    (counted, nothing is charged). ``find`` shows the earlier charge, for the other amount.
    """

    def __init__(self, customer: str, earlier_amount: int, used: str | None = None) -> None:
        self.customer, self.earlier_amount = customer, earlier_amount
        #: The Idempotency-Key the conflict is about: the one the earlier charge carried,
        #: or, when that is not known, the first one a charge carries here.
        self.used = used
        self.conflicts = 0
        #: The repr of the Idempotency-Key of each charge made after the conflict.
        self.new: list[str] = []

    def charge(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        from labkit.world.services import IdempotencyKeyReused

        idem = kwargs.get("idempotency_key")
        if idem is not None and self.used in (None, idem):
            self.used = idem
            self.conflicts += 1
            raise IdempotencyKeyReused(
                f"Idempotency-Key {idem!r} was first used at payments with other parameters; "
                "a key names one request.",
                status=400,
            )
        self.new.append(repr(idem))
        amount = kwargs.get("amount", args[1] if len(args) > 1 else None)
        return {"charge_id": f"ch_{len(self.new) + 1}", "amount": amount, "status": "succeeded"}

    def find(self, key: str, *args: Any, **kwargs: Any) -> list[Any]:
        from labkit.world.records import Effect

        params = {"customer": self.customer, "amount": self.earlier_amount, "currency": "BRL"}
        reply = {"charge_id": "ch_1", "amount": self.earlier_amount, "status": "succeeded"}
        return [Effect(1, "payments", "charge", key, params, reply, LAB_EPOCH)]


class _FirstCharge:
    """The payment API the earlier version of the invoice met: every charge succeeds, and
    the Idempotency-Key each carried is kept (``keys``); ``find`` finds nothing."""

    def __init__(self) -> None:
        self.keys: list[str | None] = []

    def charge(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        self.keys.append(kwargs.get("idempotency_key"))
        amount = kwargs.get("amount", args[1] if len(args) > 1 else None)
        return {"charge_id": "ch_1", "amount": amount, "status": "succeeded"}

    def find(self, *args: Any, **kwargs: Any) -> list[Any]:
        return []


#: The same job as the store hands it after a dead end and an operator's redrive, moved
#: to another queue: every field but its kind, key and payload changed.
REDRIVEN = {
    "id": 41,
    "queue": "billing-retry",
    "attempt": 1,
    "redrives": 2,
    "lease_owner": "worker-b",
    "lease_until": LAB_EPOCH + 86_430.0,
    "lease_token": "tok-after-the-redrive",
    "created_at": LAB_EPOCH - 86_400.0,
    "updated_at": LAB_EPOCH + 86_400.0,
    "run_after": LAB_EPOCH + 86_400.0,
}


def keys_of_a_redriven_job(
    values: MutableMapping[str, Any], folder: str, job: list[Any]
) -> dict[str, Any]:
    """The Idempotency-Keys the student's ``charge_handler`` sends for ``job`` as first
    enqueued, then for the same job redriven (``REDRIVEN``): ``{"first": [...], "then":
    [...]}``, each key's repr, and what each call did."""
    runs: dict[str, Any] = {}
    for name, later in (("first", None), ("then", REDRIVEN)):
        payments = _FirstCharge()
        (Path(folder) / name).mkdir()
        got, _error = handled_once(values, str(Path(folder) / name), job, payments, later)
        runs[name] = [repr(k) for k in payments.keys]
        runs[f"{name}_did"] = got
    return runs


def posts_of_a_redriven_job(
    values: MutableMapping[str, Any],
    folder: str,
    job: list[Any],
    corrected: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The student's ``post_handler`` run for ``job`` as first enqueued, then for the same
    job redriven (``REDRIVEN``; its payload with the fields ``corrected`` gives, when
    given: support fixed the invoice before the redrive), both against one real ledger (a
    world file in ``folder``): ``{"first": ..., "then": ...}`` (what each call did) and
    ``"entries"``, the ledger entries posted in all."""
    kind, payload, key = job
    redriven = [kind, {**payload, **(corrected or {})}, key]
    with World(Path(folder) / "world.db", FakeClock(LAB_EPOCH)) as world:
        runs: dict[str, Any] = {}
        for name, this, later in (("first", job, None), ("then", redriven, REDRIVEN)):
            (Path(folder) / name).mkdir()
            runs[name], _error = handled_once(
                values, str(Path(folder) / name), this, None, later, world.ledger, "post_handler"
            )
        runs["entries"] = len(world.effects(service="ledger"))
    return runs


def conflicting_key(
    values: MutableMapping[str, Any], folder: str, job: list[Any], earlier: int | dict[str, Any]
) -> dict[str, Any]:
    """Call the student's ``charge_handler`` for ``job`` as it was first enqueued (for
    the amount ``earlier``, or with the payload fields ``earlier`` gives), then once as
    corrected, against ``_ConflictingPayments``: the
    key the first charge carried was used for ``earlier_amount``.

    ``{"conflicts": charges answered with the conflict, "new": the repr of each later
    charge's Idempotency-Key, "earlier": the repr of the first charge's key, "raised":
    "ErrorClass: message"}`` or ``"returned": repr``, and ``"retried"``: whether the
    worker would retry what came out (``throttled._retried``).
    """
    from labkit.grading.exercises.ex05.throttled import _retried

    kind, payload, key = job
    first = _FirstCharge()
    before = {**payload, **({"amount": earlier} if isinstance(earlier, int) else earlier)}
    folder_before = Path(folder) / "earlier"
    folder_before.mkdir()
    handled_once(values, str(folder_before), [kind, before, key], first)
    used = next((k for k in first.keys if isinstance(k, str)), None)
    payments = _ConflictingPayments(before["customer"], before["amount"], used)
    got, error = handled_once(values, folder, job, payments)
    got["retried"] = error is not None and _retried(error, key)
    got["conflicts"] = payments.conflicts
    got["new"] = payments.new
    got["earlier"] = repr(used)
    return got


#: Failed calls into a service that never answers, after which a handler still trying is
#: taken as one that keeps trying (stopped with ``_KeptTrying``), not one that gives up.
OUTAGE_CALLS = 200


class _KeptTrying(BaseException):
    """Raised into a handler past ``OUTAGE_CALLS`` failed calls, to end its loop."""


#: How a payment API that never answers fails each charge (``Outage``'s ``how``).
OUTAGES: dict[str, Callable[[], Exception]] = {
    "503": lambda: TransientError("503 from payments.charge: unavailable", status=503),
    "lost reply": lambda: ResponseLost("timeout waiting for payments.charge: no reply"),
    "429": lambda: TransientError(
        "429 from payments.charge: rate limited, retry after 1s", status=429, retry_after=1.0
    ),
}


class Outage:
    """A payment API and a ledger that never answer: each charge fails as ``how`` says
    (``OUTAGES``), each ledger write finds a busy database (SQLite's ``database is
    locked`` inside a transaction, ``StoreBusy`` out of it), each lookup nothing;
    ``slept`` counts the seconds the handler waited."""

    def __init__(self, how: str = "503") -> None:
        self.calls, self.slept, self.how = 0, 0.0, how

    def _fail(self, exc: Exception) -> Any:
        self.calls += 1
        if self.calls > OUTAGE_CALLS:
            raise _KeptTrying
        raise exc

    def charge(self, *args: Any, **kwargs: Any) -> Any:
        return self._fail(OUTAGES[self.how]())

    def find(self, *args: Any, **kwargs: Any) -> list[Any]:
        return []

    def status(self, *args: Any, **kwargs: Any) -> None:
        return None

    def post(self, *args: Any, **kwargs: Any) -> Any:
        return self._fail(StoreBusy("world.db: database is locked"))

    mark = post

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        tx = types.SimpleNamespace(
            status=self.status,
            post=lambda *a, **k: self._fail(sqlite3.OperationalError("database is locked")),
        )
        tx.mark = tx.post
        try:
            yield tx
        except sqlite3.OperationalError as exc:
            raise StoreBusy(f"world.db: {exc}") from exc


#: The job as the store hands it on its last attempt (the store's default ``max_attempts``).
LAST_ATTEMPT = {"attempt": 5, "max_attempts": 5}


def never_answered(
    values: MutableMapping[str, Any],
    which: str,
    folder: str,
    job: list[Any],
    outage: Outage,
    last: bool = False,
) -> dict[str, Any]:
    """The student's ``charge_handler`` (or ``post_handler``) called once while the payment
    API (or the ledger) fails every call, for the job as enqueued or, with ``last``, on its
    last attempt: ``{"returned"}``, ``{"raised"}`` or ``{"kept_trying": True}``, and the
    failed ``calls``."""
    later = LAST_ATTEMPT if last else None
    try:
        if which == "charge":
            got, _error = handled_once(values, folder, job, outage, later)
        else:
            got, _error = handled_once(
                values, folder, job, None, later, ledger=outage, handler="post_handler"
            )
    except _KeptTrying:
        got = {"kept_trying": True}
    got["calls"] = outage.calls
    return got
