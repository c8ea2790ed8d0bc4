"""A job queue on Redis Streams with a consumer group: the moves a stream gives you, one by one.

A stream is an append-only log; a consumer group remembers, per entry, which consumer
got it and has not acknowledged it yet (the Pending Entries List, PEL). That is the
whole recovery story, and each step has its command:

=====================  ===========================================================
``add``                ``XADD`` (optionally ``MAXLEN``): accept a job as an entry
``ensure_group``       ``XGROUP CREATE ... MKSTREAM``: the group, from the start
``read_new``           ``XREADGROUP ... >``: entries never delivered to anyone
``read_own_pending``   ``XREADGROUP ... 0``: this consumer's unacknowledged entries,
                       what a restarted consumer must finish before taking new work
``ack``                ``XACK``: done; the entry leaves the PEL
``pending``            ``XPENDING``: who holds what, idle for how long, delivered
                       how many times
``autoclaim``          ``XAUTOCLAIM``: take entries idle past a threshold from a
                       consumer that died (their delivery count goes up)
``dead_letter``        ``XADD`` to the dead-letter stream with the reason and ``XACK``
                       of the original, in one ``MULTI``
``redrive``            back from the dead-letter stream with the same key, at most
                       ``limit`` entries, each ``XDEL`` + ``XADD`` in one script
``trim``               ``XTRIM MAXLEN | MINID``: drop old entries, pending or not
``record_lost``        ``XADD`` to ``<prefix>:lost``: ids ``XAUTOCLAIM`` reported
                       deleted, kept for reconciliation
``remember``           ``SET key NX EX ttl``: the consumer's idempotency record
``claim_key``          ``SET <prefix>:claim:<key> owner NX PX lease``: "in progress",
                       gone by itself if the owner dies
``finish_key``         ``SET <prefix>:done:<key> EX ttl``, then drop the owner's claim:
                       written only after the effect
=====================  ===========================================================

What the job contract of ``labkit.store.contract`` keeps here and what it cannot:

- kept: durable acceptance (with ``appendfsync always``; Redis's default fsyncs once a
  second, so an acknowledged ``XADD`` can vanish in a power cut), at-least-once delivery
  with recovery of a dead consumer's work, a delivery-count cap that sends a poison
  entry to a dead-letter stream with its reason, limited redrive with the same key.
- not kept: **idle times are the server's clock**, not the injected one: ``XPENDING``
  and ``XAUTOCLAIM`` measure milliseconds on Redis's own wall clock, so a ``FakeClock``
  cannot make an entry look idle; lessons print "idle >= threshold", never the number.
- not kept: **a fence on completion**: ``XACK`` does not check which consumer holds the
  entry, so a slow consumer whose entry was autoclaimed can still acknowledge it (and
  both ran the effect). ``labkit.backends.redis.store`` adds the fence with a Lua check
  of the PEL; a plain consumer must make its effect idempotent instead.
- not kept: **delayed retries** (``retry_wait`` with backoff): a stream delivers in
  order and cannot hide an entry until later; a failed entry stays pending and comes
  back after the idle threshold, which is the only backoff a stream has.
- not kept: **key uniqueness over time**: ``add`` records each key with ``SET NX``;
  the record lives as long as ``key_ttl_s`` says, and the stream itself forgets nothing
  about keys.
- not kept: **trimming only acknowledged work**: on Redis 7, ``MAXLEN`` and ``MINID``
  (in ``XADD`` or ``XTRIM``) delete entries whether or not a group still has them
  pending. The PEL keeps the id; the next ``XAUTOCLAIM`` that reaches it drops it from
  the PEL and reports it once, in the third element of its reply (Redis >= 7.0), and
  its payload is gone. Act on that one report (``record_lost``) or the job vanishes
  without a trace. Redis 8.2 added ``ACKED`` to trim only entries every group
  acknowledged; this module targets Redis 7.

In production: Redis Streams directly with redis-py (this module), or a library on top
of it such as ``rq`` (lists, not streams), Dramatiq's Redis broker, or Celery on Redis
(lists with a visibility timeout, lesson 14).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis

from labkit.backends.redis import lua
from labkit.backends.redis.malformed import quarantine
from labkit.clock import Clock, SystemClock
from labkit.errors import IdempotencyConflict, StoreError
from labkit.keys import payload_text, short
from labkit.redact import redact, sanitize

DEFAULT_GROUP = "workers"


@dataclass(frozen=True)
class Entry:
    """One stream entry as a consumer gets it."""

    id: str
    key: str
    kind: str
    payload: Any
    fields: dict[str, str]

    @classmethod
    def parse(cls, entry_id: str, fields: dict[str, str]) -> Entry:
        return cls(
            entry_id,
            fields.get("key", ""),
            fields.get("kind", ""),
            json.loads(fields.get("payload", "null")),
            dict(fields),
        )


@dataclass(frozen=True)
class Pending:
    """One row of ``XPENDING``: who holds an entry, idle since when, delivered how often.

    ``idle_ms`` is measured by the Redis server's own clock.
    """

    id: str
    consumer: str
    idle_ms: int
    deliveries: int


@dataclass(frozen=True)
class Claimed:
    """What ``XAUTOCLAIM`` gave: the entries taken, pending ids whose data was trimmed,
    and where the next call goes on (``0-0`` once the scan went round the whole PEL)."""

    entries: list[Entry]
    deleted: list[str]
    cursor: str = "0-0"


def connect(url: str) -> redis.Redis:
    """A redis-py client that decodes replies to str, with a clear error if Redis is down."""
    client = redis.Redis.from_url(url, decode_responses=True)
    try:
        client.ping()
    except redis.RedisError as exc:
        client.close()
        raise StoreError(
            f"cannot reach Redis at {redact(url)}: {redact(str(exc))}. Start it (for the lab: "
            "`docker compose up -d`) or fix the URL."
        ) from None
    return client


class StreamQueue:
    """A stream ``<prefix>:stream``, its group, and a dead-letter stream ``<prefix>:dead``.

    ``StreamQueue(url_or_client, prefix, group="workers", clock=None, key_ttl_s=None)``.
    Every Redis key this object writes starts with ``prefix``, so ``delete_all()``
    removes exactly its own keys (tests and lessons use a unique prefix each).
    """

    def __init__(
        self,
        url_or_client: str | redis.Redis,
        prefix: str,
        group: str = DEFAULT_GROUP,
        clock: Clock | None = None,
        key_ttl_s: int | None = None,
    ) -> None:
        if not prefix or any(c.isspace() for c in prefix):
            raise ValueError(f"prefix must be a non-empty name without spaces, not {prefix!r}")
        if key_ttl_s is not None and (not isinstance(key_ttl_s, int) or key_ttl_s < 1):
            raise ValueError(f"key_ttl_s must be whole seconds >= 1 or None, not {key_ttl_s!r}")
        # redis-py's stubs type every reply as bytes | str | ...; with decode_responses
        # the replies are str, so the client is used untyped here.
        self.r: Any = connect(url_or_client) if isinstance(url_or_client, str) else url_or_client
        self.prefix = prefix
        self.group = group
        self.clock: Clock = clock or SystemClock()
        self.key_ttl_s = key_ttl_s
        self.stream = f"{prefix}:stream"
        self.dead = f"{prefix}:dead"
        self._add = self.r.register_script(lua.ADD)
        self._finish = self.r.register_script(lua.FINISH_KEY)
        self._redrive = self.r.register_script(lua.REDRIVE_ENTRY)
        self.ensure_group()

    # -- setting up --------------------------------------------------------------------

    def ensure_group(self) -> None:
        """``XGROUP CREATE <stream> <group> 0 MKSTREAM``; an existing group is kept."""
        try:
            self.r.xgroup_create(self.stream, self.group, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def delete_all(self) -> int:
        """Delete every key under this queue's prefix; returns how many went."""
        keys = list(self.r.scan_iter(match=f"{self.prefix}:*", count=1000))
        return int(self.r.delete(*keys)) if keys else 0

    def close(self) -> None:
        self.r.close()

    # -- accepting ---------------------------------------------------------------------

    def add(
        self, kind: str, payload: Any, key: str, maxlen: int | None = None
    ) -> tuple[str | None, bool]:
        """Append a job; ``(entry id, True)``, or ``(None, False)`` if the key was seen.

        The key is recorded with ``SET <prefix>:key:<key> <fingerprint> NX`` (for
        ``key_ttl_s`` seconds, or for good) in the same Lua script as the ``XADD``, so a
        crash cannot leave a recorded key without its entry: the same key again adds
        nothing; the same key with another payload raises ``IdempotencyConflict``.
        ``maxlen`` trims the stream to that many entries (``MAXLEN``), even ones still
        pending.
        """
        if not kind or not key:
            raise ValueError("kind and key must be non-empty: the key names the operation")
        text, fp = payload_text(payload)
        record = f"{self.prefix}:key:{key}"
        fields = {"key": key, "kind": kind, "payload": text, "at": repr(self.clock.now())}
        args: list[Any] = [f"{kind} {fp}", self.key_ttl_s or 0, maxlen or 0]
        for pair in fields.items():
            args += pair
        entry = self._add(keys=[record, self.stream], args=args)
        if not entry:
            seen = self.r.get(record) or ""
            if seen != f"{kind} {fp}":
                raise IdempotencyConflict(
                    f"key {key!r} was accepted before with another operation "
                    f"({seen.split(' ')[0]!r}, fingerprint {short(seen.split(' ')[-1])}); "
                    f"this call sent {kind!r} with {short(fp)}. Build the key from "
                    "everything that makes the operation distinct."
                )
            return None, False
        return str(entry), True

    # -- consuming ---------------------------------------------------------------------

    def _read(self, consumer: str, start: str, count: int, block_ms: int | None) -> list[Entry]:
        reply = self.r.xreadgroup(
            self.group, consumer, {self.stream: start}, count=count, block=block_ms
        )
        entries: list[Entry] = []
        for _stream, rows in reply or []:
            # A pending entry trimmed away by MAXLEN comes back with no fields.
            for entry_id, fields in rows:
                if not fields:
                    continue
                try:
                    entries.append(Entry.parse(entry_id, fields))
                except ValueError as exc:  # its payload is not JSON: set it aside, go on
                    quarantine(
                        self.r, stream=self.stream, group=self.group, dead=self.dead,
                        entry_id=str(entry_id), fields=dict(fields),
                        reason=f"its payload is not JSON ({str(exc)[:80]})",
                        now=self.clock.now(),
                    )  # fmt: skip
        return entries

    def read_new(self, consumer: str, count: int = 1, block_ms: int | None = None) -> list[Entry]:
        """``XREADGROUP GROUP g consumer COUNT n STREAMS s >``: never-delivered entries."""
        return self._read(consumer, ">", count, block_ms)

    def read_own_pending(self, consumer: str, count: int = 10) -> list[Entry]:
        """``XREADGROUP ... STREAMS s 0``: what this consumer got and never acknowledged.

        A consumer that restarts under the same name reads these first, or they wait
        for someone's ``XAUTOCLAIM``. Each read counts as a delivery.
        """
        return self._read(consumer, "0", count, None)

    def ack(self, *entry_ids: str) -> int:
        """``XACK``: how many of these entries were pending and are now acknowledged."""
        return int(self.r.xack(self.stream, self.group, *entry_ids)) if entry_ids else 0

    def pending(self, count: int = 100, consumer: str | None = None) -> list[Pending]:
        """``XPENDING s g - + count [consumer]``: the PEL, oldest first."""
        rows = self.r.xpending_range(
            self.stream, self.group, min="-", max="+", count=count, consumername=consumer
        )
        return [
            Pending(
                str(r["message_id"]),
                str(r["consumer"]),
                int(r["time_since_delivered"]),
                int(r["times_delivered"]),
            )
            for r in rows
        ]

    def deliveries(self, entry_id: str) -> int:
        """How many times this entry was delivered (0 if it is not pending)."""
        rows = self.r.xpending_range(self.stream, self.group, entry_id, entry_id, 1)
        return int(rows[0]["times_delivered"]) if rows else 0

    def autoclaim(
        self, consumer: str, min_idle_ms: int, count: int = 10, start: str = "0-0"
    ) -> Claimed:
        """``XAUTOCLAIM s g consumer min_idle start COUNT n``: take entries idle that long.

        ``min_idle_ms`` is server time: pick it longer than any healthy job runs, or a
        slow but live consumer loses its entry to another and the job runs twice. One
        call looks at no more than ``10 * count`` pending entries (Redis's documentation
        of XAUTOCLAIM): a loop passes the ``cursor`` of each reply as the next ``start``,
        or an idle entry behind that many busy ones is never reached.
        """
        if min_idle_ms < 0:
            raise ValueError(f"min_idle_ms must be >= 0, not {min_idle_ms!r}")
        reply = self.r.xautoclaim(
            self.stream, self.group, consumer, min_idle_ms, start_id=start, count=count
        )
        rows, deleted = reply[1], (reply[2] if len(reply) > 2 else [])
        return Claimed(
            [Entry.parse(i, f) for i, f in rows if f], [str(d) for d in deleted], str(reply[0])
        )

    def trim(self, maxlen: int | None = None, minid: str | None = None) -> int:
        """``XTRIM <stream> MAXLEN = n`` or ``MINID = id``: how many entries were removed.

        On Redis 7 this deletes pending entries too: only their ids stay in the PEL,
        for ``autoclaim`` to report once in ``Claimed.deleted``.
        """
        if (maxlen is None) == (minid is None):
            raise ValueError(
                "give exactly one of maxlen (entries to keep) or minid (oldest id kept)"
            )
        if maxlen is not None:
            return int(self.r.xtrim(self.stream, maxlen=maxlen, approximate=False))
        return int(self.r.xtrim(self.stream, minid=minid, approximate=False))

    def record_lost(self, entry_ids: Sequence[str], reason: str) -> list[str]:
        """Append each id to ``<prefix>:lost`` with the reason; returns the new entry ids.

        For the ids ``XAUTOCLAIM`` reported deleted: Redis says so once and forgets
        them, so this is the only trace left. An entry id starts with the milliseconds
        of its ``XADD``, which is where reconciliation against the source begins. Kept
        apart from the dead letters: there is no payload to redrive.
        """
        pipe = self.r.pipeline(transaction=True)
        for entry_id in entry_ids:
            pipe.xadd(
                f"{self.prefix}:lost",
                {"origin": entry_id, "reason": sanitize(reason), "at": repr(self.clock.now())},
            )
        return [str(i) for i in pipe.execute()] if entry_ids else []

    def lost(self, count: int = 100) -> list[dict[str, str]]:
        """The ``<prefix>:lost`` records, oldest first (fields: origin, reason, at)."""
        return [dict(f) for _i, f in self.r.xrange(f"{self.prefix}:lost", count=count)]

    def age(self, entry_id: str, idle_ms: int) -> None:
        """Make a pending entry look idle for ``idle_ms`` (``XCLAIM ... IDLE ms JUSTID``).

        For lessons and tests, which must not wait real seconds for the server's clock:
        the entry stays with its consumer and its delivery count does not change.
        """
        rows = self.r.xpending_range(self.stream, self.group, entry_id, entry_id, 1)
        if not rows:
            raise ValueError(f"entry {entry_id} is not pending in group {self.group}")
        self.r.xclaim(
            self.stream, self.group, rows[0]["consumer"], 0, [entry_id], idle=idle_ms, justid=True
        )

    # -- dead letters ------------------------------------------------------------------

    def dead_letter(self, entry: Entry, reason: str, deliveries: int = 0) -> str:
        """Copy the entry to ``<prefix>:dead`` with its reason and ``XACK`` it, in one MULTI.

        Both happen or neither: a crash cannot leave the entry acknowledged and nowhere,
        nor in both places. Returns the dead-letter entry's id.
        """
        fields = {
            **entry.fields,
            "origin": entry.id,
            "reason": sanitize(reason),
            "deliveries": str(deliveries),
            "dead_at": repr(self.clock.now()),
        }
        pipe = self.r.pipeline(transaction=True)
        pipe.xadd(self.dead, fields)
        pipe.xack(self.stream, self.group, entry.id)
        added, _acked = pipe.execute()
        return str(added)

    def dead_letters(self, count: int = 100) -> list[Entry]:
        """The dead-letter stream, oldest first (fields: key, kind, payload, reason, ...)."""
        return [Entry.parse(i, f) for i, f in self.r.xrange(self.dead, count=count)]

    def redrive(self, limit: int, note: str = "") -> list[str]:
        """Move at most ``limit`` dead letters back to the stream with the same key.

        ``limit`` is required so nobody redrives a whole dead-letter stream by accident.
        The new entry carries the old key and ``redriven_from``; each dead letter is
        deleted and its new entry added in one script (``lua.REDRIVE_ENTRY``), which moves
        it only if it is still dead: two redrives at once (two operators, or a retried
        command) move each entry once, where a read followed by a ``MULTI`` moved it
        twice. Returns the ids of the entries this call added.
        """
        if not isinstance(limit, int) or limit < 1:
            raise ValueError("limit must be a whole number >= 1: say how many to redrive")
        moved = []
        for dead in self.dead_letters(count=limit):
            fields: dict[str, str] = {
                k: dead.fields[k] for k in ("key", "kind", "payload") if k in dead.fields
            }
            fields |= {"redriven_from": dead.id, "note": sanitize(note)}
            args: list[str] = [dead.id]
            for pair in fields.items():
                args += pair
            added = self._redrive(keys=[self.dead, self.stream], args=args)
            if added:
                moved.append(str(added))
        return moved

    # -- the consumer's idempotency record ---------------------------------------------

    def remember(self, key: str, ttl_s: int, value: str = "done") -> bool:
        """``SET <prefix>:done:<key> value NX EX ttl_s``: True the first time, False after.

        The record is only as good as its TTL: once it expires, a late redelivery of the
        same key runs the effect again. Keep it longer than anything can arrive late
        (idle threshold x max deliveries, plus redrives).
        """
        if not isinstance(ttl_s, int) or ttl_s < 1:
            raise ValueError(f"ttl_s must be whole seconds >= 1, not {ttl_s!r}")
        return bool(self.r.set(f"{self.prefix}:done:{key}", value, nx=True, ex=ttl_s))

    def claim_key(self, key: str, owner: str, lease_ms: int) -> bool:
        """``SET <prefix>:claim:<key> owner NX PX lease_ms``: True if ``owner`` now holds it.

        The claim says "in progress", not "done": if its owner dies it expires on the
        Redis server's clock (one clock for every consumer), and the next delivery may
        run the effect. So the effect itself must be idempotent at its destination; the
        claim only keeps two live consumers from running it at once.
        """
        if not isinstance(lease_ms, int) or lease_ms < 1:
            raise ValueError(f"lease_ms must be whole milliseconds >= 1, not {lease_ms!r}")
        return bool(self.r.set(f"{self.prefix}:claim:{key}", owner, nx=True, px=lease_ms))

    def is_done(self, key: str) -> bool:
        """True if a ``done`` record exists for ``key`` (from ``finish_key`` or ``remember``)."""
        return bool(self.r.exists(f"{self.prefix}:done:{key}"))

    def finish_key(self, key: str, owner: str, ttl_s: int) -> bool:
        """After the effect: ``SET <prefix>:done:<key> EX ttl_s``, then drop ``owner``'s claim.

        One Lua script; the claim is deleted only if ``owner`` still holds it (a claim
        that expired and was taken by another consumer is theirs). Returns whether the
        claim was still ``owner``'s.
        """
        if not isinstance(ttl_s, int) or ttl_s < 1:
            raise ValueError(f"ttl_s must be whole seconds >= 1, not {ttl_s!r}")
        keys = [f"{self.prefix}:done:{key}", f"{self.prefix}:claim:{key}"]
        return bool(self._finish(keys=keys, args=[ttl_s, owner]))

    def forget(self, key: str) -> None:
        """Delete a key's idempotency record (what an expired TTL does, on demand)."""
        self.r.delete(f"{self.prefix}:done:{key}")

    def length(self) -> int:
        """``XLEN`` of the job stream (trimmed entries are gone from it)."""
        return int(self.r.xlen(self.stream))

    def ids(self, entries: Sequence[Entry]) -> list[str]:
        return [e.id for e in entries]
