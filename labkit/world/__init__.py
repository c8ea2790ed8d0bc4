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
- ``world.mail.send(to, subject, body="", *, key=None, idempotency_key=None)`` - a mail
  provider: every call sends, unless an ``idempotency_key`` it saw before replays the
  first reply (the same rules as payments).
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
The package: ``core`` (``World``: the file, its transactions, the records),
``records`` (``Effect``, ``Call`` and how an effect is written), ``services`` (the
scripted behaviours, Idempotency-Key, payments, mail, webhook) and ``ledger``.
"""

from labkit.world.core import World
from labkit.world.ledger import Ledger, LedgerTx
from labkit.world.records import SCHEMA_VERSION, Call, Effect
from labkit.world.services import (
    BEHAVIOURS,
    IN_PROGRESS_S,
    IdempotencyKeyReused,
    KeyInProgress,
    Mail,
    Payments,
    Webhook,
)

__all__ = [
    "BEHAVIOURS",
    "IN_PROGRESS_S",
    "SCHEMA_VERSION",
    "Call",
    "Effect",
    "IdempotencyKeyReused",
    "KeyInProgress",
    "Ledger",
    "LedgerTx",
    "Mail",
    "Payments",
    "Webhook",
    "World",
]
