"""The outside services of a world: scripted behaviours, Idempotency-Key, the three APIs.

``_Service`` is what they share: a call runs the scripted behaviour and the fault plan
first (nothing done yet), then the effect in one transaction, then the reply, which a
``lose_response`` behaviour or a ``lost_response`` fault loses on its way back. With an
Idempotency-Key, the key is held while the request runs and keeps the reply once it is
done, like Stripe's. See ``labkit.world`` for the table of behaviours.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from labkit.errors import IdempotencyConflict, PermanentError, ResponseLost, TransientError
from labkit.faults import BEFORE_CALL, LOST_RESPONSE
from labkit.keys import canonical_json, fingerprint
from labkit.world.records import SQL, Effect, record_effect

if TYPE_CHECKING:
    from labkit.world.core import World

BEHAVIOURS = ("ok", "lose_response", "fail_before", "rate_limit", "reject", "slow")
#: How long a key stays "in progress" if its request never finished (then it may be retried).
IN_PROGRESS_S = 60.0


class IdempotencyKeyReused(PermanentError, IdempotencyConflict):
    """Conflict: this Idempotency-Key was first used with other parameters (another request)."""


class KeyInProgress(TransientError):
    """409: a request with this Idempotency-Key is still running; try again in a moment."""


class _Service:
    """What every service shares: scripted behaviours, lookup by key."""

    def __init__(self, world: World, name: str) -> None:
        self.world = world
        self.name = name

    def script(self, *behaviours: str, retry_after: float = 30.0, delay: float = 5.0) -> None:
        """Make the next calls behave as listed, in order (see ``labkit.world``)."""
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

    def expire_idempotency_keys(self, older_than_s: float) -> int:
        """Forget the Idempotency-Keys first used ``older_than_s`` ago or more; how many went.

        Real providers do this: Stripe removes a key once it is at least 24 hours old.
        Afterwards a request with that key is a new request, and a charge happens again.
        """
        if older_than_s < 0:
            raise ValueError(f"older_than_s must be >= 0 seconds, not {older_than_s!r}")
        cutoff = self.world.clock.now() - older_than_s
        with self.world._tx() as conn:
            gone: int = conn.execute(
                SQL["idem_expire"], {"service": self.name, "cutoff": cutoff}
            ).rowcount
        return gone

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
            reply = record_effect(
                conn,
                service=self.name,
                action=action,
                key=key,
                params=params,
                now=world.clock.now(),
                reply=lambda effect_id: self._reply(effect_id, params),
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
    """A mail provider: every call sends a message, unless it carries an Idempotency-Key."""

    def send(
        self,
        to: str,
        subject: str,
        body: str = "",
        *,
        key: str | None = None,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        """Send one message; returns ``{"message_id": ...}``.

        Without ``idempotency_key`` every call sends. With it, a repeat gets the first
        reply and sends nothing, as mail APIs such as Resend's do with an
        ``Idempotency-Key`` header.
        """
        params = {"to": to, "subject": subject, "body": body}
        return self._call(
            "send", key if key is not None else idempotency_key, params, idempotency_key
        )

    def _reply(self, effect_id: int, params: dict[str, Any]) -> dict[str, Any]:
        return {"message_id": f"msg_{effect_id}"}


class Webhook(_Service):
    """A webhook receiver: every post is delivered, no deduplication."""

    def post(self, url: str, body: Any, *, key: str | None = None) -> dict[str, Any]:
        """Deliver ``body`` to ``url``; returns ``{"delivery_id": ...}``."""
        return self._call("post", key, {"url": url, "body": body})

    def _reply(self, effect_id: int, params: dict[str, Any]) -> dict[str, Any]:
        return {"delivery_id": f"wh_{effect_id}", "status": 200}
