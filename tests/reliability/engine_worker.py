"""A worker process on PostgreSQL or Redis Streams: ``python engine_worker.py '<json spec>'``.

It runs jobs until none is left and prints one JSON line (``done``, ``lease_lost``,
``errors``). The effect of each job is one row appended to an effects log that lives
in the same engine and is written in the same atomic step as the acknowledgement:

- ``postgres``: an ``effects`` table in the store's schema; the insert and the fenced
  ``store.complete(job, conn=...)`` share one transaction (the ledger pattern);
- ``redis``: a Lua script checks the key's idempotency record, appends the key to the
  effects list and ``XACK``s the entry, all at once; a consumer whose entry was taken
  over finds the record set and only acknowledges.

Spec keys: ``engine``, ``url``, ``schema`` or ``prefix``, ``name``; ``lease_s`` (PG, clock
seconds) or ``idle_ms`` (Redis, server time); ``pace_s``: pretend work per job, so a kill
usually lands with a job in hand; ``mutant``: ``"no_ledger"`` commits the effect apart
from the completion (PG) or runs it without the record and acknowledges in a second step
(Redis), with the pretend work between the two, so a test can show the suite notices.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from labkit.clock import SystemClock
from labkit.errors import LeaseLost

EFFECT_ONCE = """
if redis.call('SET', KEYS[2], '1', 'NX') then redis.call('RPUSH', KEYS[3], ARGV[2]) end
return redis.call('XACK', KEYS[1], ARGV[1], ARGV[3])
"""
#: The mutant: the effect with no record, and the ack as a separate step after it.
EFFECT_BLIND = """
redis.call('RPUSH', KEYS[3], ARGV[2])
return 1
"""
ACK = """
return redis.call('XACK', KEYS[1], ARGV[1], ARGV[3])
"""


def run_postgres(spec: dict[str, Any], report: dict[str, Any]) -> None:
    from labkit.backends.postgres.store import PostgresJobStore

    clock = SystemClock()
    store = PostgresJobStore(spec["url"], clock=clock, schema=spec["schema"])
    conn = store.connect(autocommit=False)
    lease_s = float(spec.get("lease_s", 0.5))
    while True:
        job = store.claim(spec["name"], lease_s=lease_s)
        if job is None:
            waiting = store.counts()
            if waiting["running"] == 0 and waiting["pending"] == 0:
                break
            clock.sleep(0.05)  # a killed worker's lease has not expired yet
            continue
        mutant = spec.get("mutant") == "no_ledger"
        # The mutant spends its pretend work between the effect and the ack, so a kill
        # lands in that window nearly every time and the test cannot pass by luck.
        clock.sleep(0.0 if mutant else float(spec.get("pace_s", 0.0)))
        try:
            conn.execute("INSERT INTO effects (job_id) VALUES (%s)", [job.id])
            if mutant:
                conn.commit()
                clock.sleep(float(spec.get("pace_s", 0.0)))
            store.complete(job, conn=conn)
            conn.commit()
            report["done"] += 1
        except LeaseLost:
            conn.rollback()
            report["lease_lost"] += 1


def run_redis(spec: dict[str, Any], report: dict[str, Any]) -> None:
    from labkit.backends.redis.streams import StreamQueue

    q = StreamQueue(spec["url"], spec["prefix"])
    name, idle_ms = spec["name"], int(spec.get("idle_ms", 500))
    script = q.r.register_script(EFFECT_BLIND if spec.get("mutant") else EFFECT_ONCE)
    ack = q.r.register_script(ACK) if spec.get("mutant") else None
    clock = SystemClock()
    cursor = "0-0"  # where the next XAUTOCLAIM goes on: one looks at 100 entries here
    while True:
        # What this consumer held before a restart, then a dead consumer's, then new work.
        entries = q.read_own_pending(name, 10)
        if not entries:
            claimed = q.autoclaim(name, idle_ms, 10, start=cursor)
            entries, cursor = claimed.entries, claimed.cursor
        entries = entries or q.read_new(name, 10, block_ms=50)
        if not entries:
            if not q.pending(count=1):
                break
            clock.sleep(0.05)  # a killed consumer's entries are not idle long enough yet
            continue
        for entry in entries:
            keys = [q.stream, f"{q.prefix}:done:{entry.key}", f"{q.prefix}:effects"]
            if ack is None:
                clock.sleep(float(spec.get("pace_s", 0.0)))
                acked = script(keys=keys, args=[q.group, entry.key, entry.id])
            else:  # the mutant: effect, pretend work, then the ack (a kill lands between)
                script(keys=keys, args=[q.group, entry.key, entry.id])
                clock.sleep(float(spec.get("pace_s", 0.0)))
                acked = ack(keys=keys, args=[q.group, entry.key, entry.id])
            report["done" if acked else "lease_lost"] += 1


def main() -> int:
    spec = json.loads(sys.argv[1])
    report: dict[str, Any] = {"name": spec["name"], "done": 0, "lease_lost": 0, "errors": []}
    try:
        (run_postgres if spec["engine"] == "postgres" else run_redis)(spec, report)
    except Exception as exc:  # reported, and the test asserts there are none
        report["errors"].append(f"{type(exc).__name__}: {exc}")
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
