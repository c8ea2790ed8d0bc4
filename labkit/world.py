"""The outside world a job touches, with its own durable truth.

``World(path, clock=None, faults=None)`` keeps everything it did in its own SQLite file,
separate from the job store, and commits each effect *before* it replies: when a worker
dies, the world still knows what happened. That file is what the crash explorer reads
to judge ``ok`` / ``duplicate`` / ``lost``.

Services (attributes of a world):

- ``world.payments.charge(customer, amount, currency="BRL", *, key=None,
  idempotency_key=None)`` - a Stripe-like payment API. Without ``idempotency_key``
  every call charges again. With it: the same key and the same parameters return the
  stored reply and charge nothing; the same key with other parameters raises
  ``IdempotencyKeyReused`` (a ``PermanentError``: it is a bug, not a retry); a key whose
  first request is still running raises ``KeyInProgress`` (409, transient: try later).
- ``world.mail.send(to, subject, body="", *, key=None)`` - a mail provider, no dedup.
- ``world.webhook.post(url, body, *, key=None)`` - a webhook receiver, no dedup.
- ``world.ledger`` - the application's *own* database, kept in the same file so the
  judge reads one truth: ``post`` writes a ledger entry (a local effect), ``status`` /
  ``mark`` keep a per-key state (``started``, ``done``), and ``transaction()`` does
  several of these in one all-or-nothing SQLite transaction.

``key`` is the caller's operation key. Every effect is recorded with it and with its
parameters, so ``service.find(key)`` answers "did my call happen?" (reconciliation),
even for services that do not deduplicate.

Behaviours. ``service.script("lose_response", "ok", "rate_limit", ...)`` makes the next
calls to that service behave as listed, in order (stored in the file, so it also works
for a worker in another process); after the list, calls are normal:

==============  ==============================================================
ok              do the effect, reply
lose_response   do the effect, commit it, then raise ``ResponseLost`` (timeout)
fail_before     raise ``TransientError(status=503)``; nothing done
rate_limit      raise ``TransientError(status=429, retry_after=...)``; nothing done
reject          raise ``PermanentError(status=400)``; nothing done
slow            ``clock.sleep(delay)`` (holding the idempotency key), then ok
==============  ==============================================================

A ``FaultPlan`` given as ``faults`` is hit at ``before_call`` (nothing done yet:
``raise_transient`` is a 503, ``rate_limit`` a 429, ``raise_permanent`` a 400,
``delay`` a slow reply) and at ``lost_response`` (the effect is committed:
``lose_response`` raises ``ResponseLost``; ``crash``/``kill`` kill the caller there).
Both are hit with the caller's ``key``. The ledger is local: it has no response to lose
and fires no points.

In real life these are other companies' servers; to rehearse against them, people use
stripe-mock, MailHog/Mailpit or WireMock. labkit simulates them in a file because the
lesson needs their records after a crash.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labkit import queries
from labkit.clock import Clock, SystemClock
from labkit.errors import (
    IdempotencyConflict,
    PermanentError,
    ResponseLost,
    StoreError,
    TransientError,
)
from labkit.faults import BEFORE_CALL, LOST_RESPONSE, FaultPlan
from labkit.keys import canonical_json, fingerprint

SQL = queries.load("world.sql")
SCHEMA_VERSION = 1
BEHAVIOURS = ("ok", "lose_response", "fail_before", "rate_limit", "reject", "slow")
#: How long a key stays "in progress" if its request never finished (then it may be retried).
IN_PROGRESS_S = 60.0


class IdempotencyKeyReused(PermanentError, IdempotencyConflict):
    """Conflict: this Idempotency-Key was first used with other parameters (another request)."""


class KeyInProgress(TransientError):
    """409: a request with this Idempotency-Key is still running; try again in a moment."""


@dataclass(frozen=True)
class Effect:
    """One thing the world did: which service, for which key, with what."""

    id: int
    service: str
    action: str
    key: str | None
    payload: dict[str, Any]
    response: dict[str, Any]
    at: float


@dataclass(frozen=True)
class Call:
    """One call the world received and how it ended (ok, replayed, 503, ...)."""

    id: int
    service: str
    action: str
    key: str | None
    outcome: str
    status: int | None
    at: float


class World:
    """The outside world in one SQLite file: ``mail``, ``payments``, ``webhook``, ``ledger``."""

    def __init__(
        self, path: str | Path, clock: Clock | None = None, faults: FaultPlan | None = None
    ) -> None:
        self.path = Path(path)
        self.clock: Clock = clock or SystemClock()
        self.faults = faults
        self._lock = threading.RLock()
        self.conn = self._open()
        self.payments = Payments(self, "payments")
        self.mail = Mail(self, "mail")
        self.webhook = Webhook(self, "webhook")
        self.ledger = Ledger(self)

    def _open(self) -> sqlite3.Connection:
        if self.path.is_dir():
            raise StoreError(f"{self.path} is a directory; give the path of a world file")
        if not self.path.parent.exists():
            raise StoreError(f"folder {self.path.parent} does not exist; create it first")
        conn = sqlite3.connect(
            self.path, timeout=10.0, isolation_level=None, check_same_thread=False
        )
        conn.row_factory = sqlite3.Row
        try:
            tables = {
                r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
            }
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise StoreError(
                f"{self.path} is not a readable SQLite file ({exc}); it was not modified"
            ) from None
        if tables and "world_meta" not in tables:
            conn.close()
            raise StoreError(
                f"{self.path} is a SQLite database but not a labkit world (tables "
                f"{', '.join(sorted(tables)[:5])}); it was not modified. Choose another path."
            )
        conn.execute("PRAGMA journal_mode=WAL")
        # WAL + NORMAL: a committed effect survives the death of any process (the lab's
        # crashes); only a power cut could lose the last commits, which no lesson simulates.
        conn.execute("PRAGMA synchronous=NORMAL")
        with self._tx_on(conn):
            for statement in _statements(SQL["schema"]):
                conn.execute(statement)
            conn.execute(SQL["set_meta"], {"name": "schema_version", "value": str(SCHEMA_VERSION)})
        return conn

    @contextmanager
    def _tx_on(self, conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
        with self._lock:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                # A crash inside the transaction undoes it, as the OS would for a dead process.
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def _tx(self) -> Any:
        return self._tx_on(self.conn)

    def close(self) -> None:
        with self._lock:
            self.conn.close()

    def __enter__(self) -> World:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"World({str(self.path)!r})"

    # -- reading the truth -------------------------------------------------------------

    def effects(self, service: str | None = None, key: str | None = None) -> list[Effect]:
        """Every effect done, in order, optionally only one service's and/or one key's."""
        with self._lock:
            rows = self.conn.execute(SQL["effects"], {"service": service, "key": key}).fetchall()
        return [
            Effect(
                id=r["id"],
                service=r["service"],
                action=r["action"],
                key=r["key"],
                payload=json.loads(r["payload"]),
                response=json.loads(r["response"]),
                at=r["at"],
            )
            for r in rows
        ]

    def count(self, key: str, service: str | None = None) -> int:
        """How many effects were done for ``key`` (1 is right, 0 lost, 2+ duplicated)."""
        return len(self.effects(service=service, key=key))

    def calls(self, service: str | None = None) -> list[Call]:
        """Every call received, in order, with how it ended."""
        with self._lock:
            rows = self.conn.execute(SQL["calls"], {"service": service}).fetchall()
        return [Call(**dict(r)) for r in rows]

    # -- shared by the services --------------------------------------------------------

    def _log(
        self, service: str, action: str, key: str | None, outcome: str, status: int | None
    ) -> None:
        with self._tx() as conn:
            conn.execute(
                SQL["insert_call"],
                {
                    "service": service,
                    "action": action,
                    "key": key,
                    "outcome": outcome,
                    "status": status,
                    "now": self.clock.now(),
                },
            )

    def _hit(self, point: str, key: str | None) -> None:
        if self.faults is not None:
            self.faults.hit(point, key=key, clock=self.clock)


class _Service:
    """What every service shares: scripted behaviours, lookup by key."""

    def __init__(self, world: World, name: str) -> None:
        self.world = world
        self.name = name

    def script(self, *behaviours: str, retry_after: float = 30.0, delay: float = 5.0) -> None:
        """Make the next calls behave as listed, in order (see the module docstring)."""
        for behaviour in behaviours:
            if behaviour not in BEHAVIOURS:
                raise ValueError(
                    f"unknown behaviour {behaviour!r}; choose from {', '.join(BEHAVIOURS)}"
                )
        with self.world._tx() as conn:
            for behaviour in behaviours:
                conn.execute(
                    SQL["script_add"],
                    {
                        "service": self.name,
                        "behaviour": behaviour,
                        "retry_after": retry_after,
                        "delay": delay,
                    },
                )

    def find(self, key: str) -> list[Effect]:
        """The effects this service did for ``key``: the reconciliation lookup."""
        return self.world.effects(service=self.name, key=key)

    def _next(self) -> tuple[str, float, float]:
        with self.world._lock:
            # Most calls have nothing scripted: skip the write transaction then.
            if (
                self.world.conn.execute(SQL["script_next"], {"service": self.name}).fetchone()
                is None
            ):
                return "ok", 0.0, 0.0
        with self.world._tx() as conn:
            row = conn.execute(SQL["script_next"], {"service": self.name}).fetchone()
            if row is None:
                return "ok", 0.0, 0.0
            conn.execute(SQL["script_pop"], {"id": row["id"]})
        return row["behaviour"], row["retry_after"] or 0.0, row["delay"] or 0.0

    def _reply(self, effect_id: int, params: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def _call(
        self, action: str, key: str | None, params: dict[str, Any], idem: str | None = None
    ) -> dict[str, Any]:
        """Run one call: behaviours and faults before, the effect, then the reply (or not)."""
        world = self.world
        behaviour, retry_after, delay = self._next()
        try:
            world._hit(BEFORE_CALL, key)
        except (TransientError, PermanentError) as exc:
            world._log(self.name, action, key, "failed_before", exc.status)
            raise
        where = f"{self.name}.{action}" + (f" for {key}" if key else "")
        if behaviour == "fail_before":
            world._log(self.name, action, key, "failed_before", 503)
            raise TransientError(f"503 from {where}: service unavailable, nothing done", status=503)
        if behaviour == "rate_limit":
            world._log(self.name, action, key, "rate_limited", 429)
            raise TransientError(
                f"429 from {where}: rate limited, retry after {retry_after:g}s; nothing done",
                status=429,
                retry_after=retry_after,
            )
        if behaviour == "reject":
            world._log(self.name, action, key, "rejected", 400)
            raise PermanentError(f"400 from {where}: request rejected; nothing done", status=400)
        fp = fingerprint(params)
        if idem is not None:
            stored = self._reserve(action, idem, key, fp)
            if stored is not None:
                return self._deliver(action, key, stored, "replayed", behaviour)
        if behaviour == "slow":
            world.clock.sleep(delay)
        with world._tx() as conn:
            effect_id = int(
                conn.execute(
                    SQL["insert_effect"],
                    {
                        "service": self.name,
                        "action": action,
                        "key": key,
                        "payload": canonical_json(params),
                        "fingerprint": fp,
                        "now": world.clock.now(),
                    },
                ).fetchone()[0]
            )
            reply = self._reply(effect_id, params)
            conn.execute(
                SQL["set_effect_response"], {"id": effect_id, "response": canonical_json(reply)}
            )
            if idem is not None:
                conn.execute(
                    SQL["idem_finish"],
                    {"service": self.name, "key": idem, "response": canonical_json(reply)},
                )
        return self._deliver(action, key, reply, "ok", behaviour)

    def _reserve(self, action: str, idem: str, key: str | None, fp: str) -> dict[str, Any] | None:
        """Hold ``idem`` for this request; return the stored reply if it already finished."""
        world = self.world
        now = world.clock.now()
        with world._tx() as conn:
            row = conn.execute(SQL["idem_get"], {"service": self.name, "key": idem}).fetchone()
            verdict = "reserve"
            if row is not None and row["fingerprint"] != fp:
                verdict = "conflict"
            elif row is not None and row["state"] == "done":
                return dict(json.loads(row["response"]))
            elif row is not None and (row["locked_until"] or 0) > now:
                verdict = "in_progress"
            else:
                conn.execute(
                    SQL["idem_reserve"],
                    {
                        "service": self.name,
                        "key": idem,
                        "fingerprint": fp,
                        "locked_until": now + IN_PROGRESS_S,
                        "now": now,
                    },
                )
        if verdict == "conflict":
            world._log(self.name, action, key, "conflict", 400)
            raise IdempotencyKeyReused(
                f"Idempotency-Key {idem!r} was first used at {self.name} with other parameters; "
                "a key names one request. Build it from everything that makes the operation "
                "distinct, or use a new key for a deliberately different request.",
                status=400,
            )
        if verdict == "in_progress":
            world._log(self.name, action, key, "in_progress", 409)
            raise KeyInProgress(
                f"409 from {self.name}: a request with Idempotency-Key {idem!r} is still "
                "running; retry shortly and you will get its reply",
                status=409,
                retry_after=1.0,
            )
        return None

    def _deliver(
        self, action: str, key: str | None, reply: dict[str, Any], outcome: str, behaviour: str
    ) -> dict[str, Any]:
        """The effect is durable now; the reply may still be lost on its way back."""
        world = self.world
        try:
            if behaviour == "lose_response":
                raise ResponseLost(
                    f"timeout waiting for {self.name}.{action}"
                    + (f" for {key}" if key else "")
                    + ": the request was sent, the reply never came (it may have been done)"
                )
            world._hit(LOST_RESPONSE, key)
        except ResponseLost:
            world._log(self.name, action, key, f"{outcome}_response_lost", None)
            raise
        world._log(self.name, action, key, outcome, 200)
        return reply


class Payments(_Service):
    """A Stripe-like payment API; honours ``idempotency_key`` when given."""

    def charge(
        self,
        customer: str,
        amount: int,
        currency: str = "BRL",
        *,
        key: str | None = None,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        """Charge ``amount`` (in cents) to ``customer``; returns ``{"charge_id": ...}``.

        ``key`` is recorded with the charge (like Stripe metadata) for ``find``; only
        ``idempotency_key`` makes a repeated call safe. When only ``idempotency_key`` is
        given, it is also recorded as ``key``.
        """
        if not isinstance(amount, int) or amount <= 0:
            raise PermanentError(
                f"400: amount must be a positive whole number of cents, not {amount!r}", status=400
            )
        params = {"customer": customer, "amount": amount, "currency": currency}
        return self._call(
            "charge", key if key is not None else idempotency_key, params, idempotency_key
        )

    def _reply(self, effect_id: int, params: dict[str, Any]) -> dict[str, Any]:
        return {"charge_id": f"ch_{effect_id}", "amount": params["amount"], "status": "succeeded"}


class Mail(_Service):
    """A mail provider: every call sends a message, no deduplication."""

    def send(
        self, to: str, subject: str, body: str = "", *, key: str | None = None
    ) -> dict[str, Any]:
        """Send one message; returns ``{"message_id": ...}``."""
        return self._call("send", key, {"to": to, "subject": subject, "body": body})

    def _reply(self, effect_id: int, params: dict[str, Any]) -> dict[str, Any]:
        return {"message_id": f"msg_{effect_id}"}


class Webhook(_Service):
    """A webhook receiver: every post is delivered, no deduplication."""

    def post(self, url: str, body: Any, *, key: str | None = None) -> dict[str, Any]:
        """Deliver ``body`` to ``url``; returns ``{"delivery_id": ...}``."""
        return self._call("post", key, {"url": url, "body": body})

    def _reply(self, effect_id: int, params: dict[str, Any]) -> dict[str, Any]:
        return {"delivery_id": f"wh_{effect_id}", "status": 200}


class LedgerTx:
    """Ledger operations inside one open transaction (see ``Ledger.transaction``)."""

    def __init__(self, world: World, conn: sqlite3.Connection) -> None:
        self.world = world
        self.conn = conn

    def status(self, key: str) -> str | None:
        """The state marked for ``key`` (``"started"``, ``"done"``...), or None."""
        row = self.conn.execute(SQL["mark_get"], {"key": key}).fetchone()
        return None if row is None else str(row["state"])

    def mark(self, key: str, state: str = "done") -> None:
        """Set the state of ``key``."""
        self.conn.execute(
            SQL["mark_set"], {"key": key, "state": state, "now": self.world.clock.now()}
        )

    def post(self, account: str, amount: int, *, key: str) -> dict[str, Any]:
        """Write one ledger entry (a local effect) for ``key``."""
        params = {"account": account, "amount": amount}
        effect_id = int(
            self.conn.execute(
                SQL["insert_effect"],
                {
                    "service": "ledger",
                    "action": "post",
                    "key": key,
                    "payload": canonical_json(params),
                    "fingerprint": fingerprint(params),
                    "now": self.world.clock.now(),
                },
            ).fetchone()[0]
        )
        reply = {"entry_id": f"le_{effect_id}"}
        self.conn.execute(
            SQL["set_effect_response"], {"id": effect_id, "response": canonical_json(reply)}
        )
        return reply


class Ledger:
    """The application's own database: entries and per-key marks, transactional."""

    name = "ledger"

    def __init__(self, world: World) -> None:
        self.world = world

    @contextmanager
    def transaction(self) -> Iterator[LedgerTx]:
        """All the ledger work inside the block commits together, or none of it does."""
        with self.world._tx() as conn:
            yield LedgerTx(self.world, conn)

    def status(self, key: str) -> str | None:
        """The state marked for ``key``, or None."""
        with self.transaction() as tx:
            return tx.status(key)

    def mark(self, key: str, state: str = "done") -> None:
        """Set the state of ``key`` in its own transaction."""
        with self.transaction() as tx:
            tx.mark(key, state)

    def post(self, account: str, amount: int, *, key: str) -> dict[str, Any]:
        """Write one ledger entry in its own transaction."""
        with self.transaction() as tx:
            return tx.post(account, amount, key=key)

    def find(self, key: str) -> list[Effect]:
        """The ledger entries written for ``key``."""
        return self.world.effects(service="ledger", key=key)


def _statements(script: str) -> list[str]:
    statements, current = [], []
    for line in script.splitlines():
        current.append(line)
        candidate = "\n".join(current).strip()
        if candidate and sqlite3.complete_statement(candidate):
            statements.append(candidate)
            current = []
    return statements
