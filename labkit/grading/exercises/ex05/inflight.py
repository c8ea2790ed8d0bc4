"""Exercise 5: the student's handler met twice in one worker process.

A worker runs several jobs at once (threads), and a job whose lease ran out comes back
while the first delivery is still at work, often to the same process. ``while_the_first_runs``
holds the first delivery inside its charge (or its ledger transaction) until the second
one has finished or is waiting, then makes the first fail: what the second did in the
meantime is the evidence. ``repeated_in_one_worker`` calls ``charge_handler`` twice in a
row in one process, as a worker whose record of the first run failed. Fakes stand for
the payment API and the ledger: nothing is charged, and no run takes a worker.
"""

from __future__ import annotations

import sqlite3
import threading
import types
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from labkit.clock import LAB_EPOCH, FakeClock
from labkit.dbfile import explain
from labkit.errors import TransientError
from labkit.grading.exercises.common import fresh_state, need
from labkit.grading.exercises.ex05.recorder import SceneCtx
from labkit.grading.stub import is_stub
from labkit.store import JobStore
from labkit.world.records import Effect
from labkit.world.services import KeyInProgress

#: The longest the first delivery is held when the second neither ends nor is seen
#: waiting (it waits on a lock of the student's own): a bound, never what decides.
HOLD_S = 3.0
#: The longest a delivery may take before it counts as hung.
JOIN_S = 8.0


class _Held:
    """What the two deliveries share: the first one's arrival in the call that is held,
    and the second one's end (or its wait on the ledger's write lock)."""

    def __init__(self) -> None:
        self.first_in = threading.Event()
        self.second_out = threading.Event()
        self.lock = threading.Lock()
        self.calls = 0


class _HeldPayments:
    """The payment API: the first charge is held until the second delivery is out, then
    fails with a 503 (nothing charged); a charge while it is held gets the 409
    ``KeyInProgress``; a later one charges, and a repeat gets the same reply."""

    def __init__(self, held: _Held, reply: dict[str, Any], params: dict[str, Any]) -> None:
        self.held, self.reply, self.params = held, reply, params
        self.in_flight = False
        self.charged = 0

    def charge(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        held = self.held
        with held.lock:
            held.calls += 1
            first = held.calls == 1
            if first:
                self.in_flight = True
            elif self.in_flight:
                raise KeyInProgress(
                    f"409 from payments: a request with Idempotency-Key "
                    f"{kwargs.get('idempotency_key')!r} is still running; retry shortly and "
                    "you will get its reply",
                    status=409,
                    retry_after=0.01,
                )
            elif self.charged:
                return dict(self.reply)
        if first:
            held.first_in.set()
            held.second_out.wait(HOLD_S)
            with held.lock:
                self.in_flight = False
            raise TransientError("503 from payments.charge: service unavailable, nothing done")
        with held.lock:
            self.charged += 1
        return dict(self.reply)

    def find(self, key: str, *args: Any, **kwargs: Any) -> list[Any]:
        if not self.charged:
            return []
        return [Effect(1, "payments", "charge", key, dict(self.params), self.reply, LAB_EPOCH)]


class _HeldLedger:
    """The ledger, one writer at a time as SQLite's ``BEGIN IMMEDIATE``: the first
    delivery's first entry is held (the write lock kept) until the second delivery is
    out or waits for that lock, then fails as a locked database does, and its
    transaction rolls back. ``entries`` and ``marks`` are what was committed."""

    def __init__(self, held: _Held) -> None:
        self.held = held
        self.write = threading.Lock()
        self.entries: list[tuple[Any, ...]] = []
        self.marks: dict[Any, Any] = {}

    @contextmanager
    def transaction(self) -> Iterator[_HeldTx]:
        if not self.write.acquire(blocking=False):
            self.held.second_out.set()  # waits for the first delivery's transaction
            self.write.acquire()
        try:
            tx = _HeldTx(self)
            yield tx
            self.entries += tx.entries
            self.marks |= tx.marks
        finally:
            self.write.release()

    def status(self, key: Any) -> Any:
        with self.transaction() as tx:
            return tx.status(key)

    def mark(self, key: Any, state: Any = "done") -> None:
        with self.transaction() as tx:
            tx.mark(key, state)

    def post(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        with self.transaction() as tx:
            return tx.post(*args, **kwargs)

    def find(self, key: Any) -> list[Any]:
        return [entry for entry in self.entries if entry[-1] == key]


class _HeldTx:
    def __init__(self, ledger: _HeldLedger) -> None:
        self.ledger = ledger
        self.entries: list[tuple[Any, ...]] = []
        self.marks: dict[Any, Any] = {}

    def status(self, key: Any) -> Any:
        return self.marks.get(key, self.ledger.marks.get(key))

    def mark(self, key: Any, state: Any = "done") -> None:
        self.marks[key] = state

    def post(self, account: Any, amount: Any, *, key: Any = None) -> dict[str, Any]:
        held = self.ledger.held
        with held.lock:
            held.calls += 1
            first = held.calls == 1
        if first:
            held.first_in.set()
            held.second_out.wait(HOLD_S)
            raise explain(Path("world.db"), sqlite3.OperationalError("database is locked"))
        self.entries.append((account, amount, key))
        return {"entry_id": f"le_{len(self.ledger.entries) + len(self.entries)}"}


def while_the_first_runs(
    values: MutableMapping[str, Any], which: str, folder: str, job: list[Any]
) -> dict[str, Any]:
    """Two deliveries of ``job`` in one process: the second starts once the first is
    inside its charge (or its first ledger entry), which fails once the second is out.

    ``{"ends": [what each delivery did: "returned: repr" or "raised: ErrorClass: ..."],
    "held": whether the first got to the held call, "effects": charges made or entries
    committed, "reply": the reply a charge gets}``.
    """
    kind, payload, key = job
    with JobStore(Path(folder) / "jobs.db", FakeClock(LAB_EPOCH)) as store:
        store.enqueue(kind, payload, key=key)
        the_job = store.get_by_key(key)
    held = _Held()
    reply = {"charge_id": "ch_1", "amount": payload["amount"], "status": "succeeded"}
    params = {"customer": payload["customer"], "amount": payload["amount"], "currency": "BRL"}
    payments = _HeldPayments(held, reply, params)
    ledger = _HeldLedger(held)
    handler = need(values, "charge_handler" if which == "charge" else "post_handler")
    ends = ["hung", "hung"]
    stub: list[NotImplementedError] = []

    def deliver(i: int) -> None:
        world = types.SimpleNamespace(payments=payments, ledger=ledger)
        ctx = SceneCtx(world)
        try:
            if i == 1:
                held.first_in.wait(JOIN_S)
            ends[i] = f"returned: {handler(the_job, ctx)!r}"
        except NotImplementedError as exc:
            ends[i] = f"raised: NotImplementedError: {str(exc)[:160]}"
            if is_stub(exc):
                stub.append(exc)
        except Exception as exc:  # noqa: BLE001 - each delivery's end is the evidence
            ends[i] = f"raised: {type(exc).__name__}: {str(exc)[:160]}"
        finally:
            (held.second_out if i == 1 else held.first_in).set()

    with fresh_state(values):
        threads = [threading.Thread(target=deliver, args=(i,), daemon=True) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(JOIN_S)
    if stub:
        raise stub[0]  # the exercise stub: the check reads "not started yet"
    effects = payments.charged if which == "charge" else len(ledger.entries)
    return {"ends": ends, "held": held.calls > 0, "effects": effects, "reply": repr(reply)}


class _Replaying:
    """The payment API: every charge under one Idempotency-Key gets the first reply."""

    def __init__(self, reply: dict[str, Any]) -> None:
        self.reply = reply
        self.calls = 0

    def charge(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        self.calls += 1
        return dict(self.reply)

    def find(self, key: str, *args: Any, **kwargs: Any) -> list[Any]:
        if not self.calls:
            return []
        params = {"customer": "?", "amount": self.reply["amount"], "currency": "BRL"}
        return [Effect(1, "payments", "charge", key, params, self.reply, LAB_EPOCH)]


def repeated_in_one_worker(
    values: MutableMapping[str, Any], folder: str, job: list[Any]
) -> dict[str, Any]:
    """``charge_handler`` called for ``job`` twice in a row in one process (module-level
    names kept between the calls), against an API that replays the first reply:
    ``{"ends": [what each call did], "reply": repr of the API's reply}``."""
    kind, payload, key = job
    with JobStore(Path(folder) / "jobs.db", FakeClock(LAB_EPOCH)) as store:
        store.enqueue(kind, payload, key=key)
        the_job = store.get_by_key(key)
    reply = {"charge_id": "ch_1", "amount": payload["amount"], "status": "succeeded"}
    payments = _Replaying(reply)
    ctx = SceneCtx(types.SimpleNamespace(payments=payments, ledger=None), the_job)
    ends = []
    with fresh_state(values):
        for _time in range(2):
            try:
                ends.append(f"returned: {need(values, 'charge_handler')(the_job, ctx)!r}")
            except NotImplementedError as exc:
                if is_stub(exc):
                    raise
                ends.append(f"raised: NotImplementedError: {str(exc)[:160]}")
            except Exception as exc:  # noqa: BLE001 - what came out is the evidence
                ends.append(f"raised: {type(exc).__name__}: {str(exc)[:160]}")
    return {"ends": ends, "reply": repr(reply)}
