"""Where a PostgreSQL claim/complete round trip spends its time: ``python bench/profile_pg.py``.

At a given number of ready jobs (default 10,000), microseconds per job for: the store's
``claim`` and ``complete`` through the API; the same two statements run bare, each in
``BEGIN`` ... ``COMMIT`` (what the API adds around them is the difference) and each alone in
autocommit (what the two extra round trips of BEGIN and COMMIT cost); the same with the
attempt-history triggers disabled (what the history costs); ``Job.from_row``; the raw
loop of bench/pg.py; and the batched path (``claim_many(10)`` + ``complete_many``) against
the raw batched loop. Each measurement uses its own schema, dropped at the end.
The numbers behind the PostgreSQL section of bench/NOTES.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.pg import DSN, RAW_ACK, RAW_CLAIM, RAW_SCHEMA  # noqa: E402
from labkit.backends.postgres.store import SQL, PostgresJobStore  # noqa: E402
from labkit.clock import SystemClock  # noqa: E402
from labkit.job import Job  # noqa: E402


def fresh_store(n: int) -> PostgresJobStore:
    store = PostgresJobStore(DSN, clock=SystemClock(), schema=f"prof_{uuid.uuid4().hex[:10]}")
    now = store.clock.now()
    store.conn.execute(
        "INSERT INTO jobs (kind, queue, key, fingerprint, payload, state, max_attempts,"
        " run_after, created_at, updated_at)"
        " SELECT 'bench', 'default', 'k' || g, 'f', '{\"i\": ' || g || '}', 'pending', 5,"
        " %(now)s, %(now)s, %(now)s FROM generate_series(1, %(n)s) AS g",
        {"n": n, "now": now - 1},
    )
    store.conn.execute("ANALYZE jobs")
    return store


def drop(store: PostgresJobStore) -> None:
    schema = store.schema
    store.close()
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


def per_job(count: int, step: Callable[[], int]) -> float:
    """Microseconds per job over ``count`` jobs; ``step`` returns how many it did."""
    done, t0 = 0, time.perf_counter()
    while done < count:
        got = step()
        if not got:
            break
        done += got
    return (time.perf_counter() - t0) / max(done, 1) * 1e6


def api(n: int, count: int) -> dict[str, float]:
    store = fresh_store(n)
    try:
        def one() -> int:
            job = store.claim("w", lease_s=60)
            if job is None:
                return 0
            store.complete(job)
            return 1

        both = per_job(count, one)
        claim_only = per_job(count, lambda: int(store.claim("w", lease_s=60) is not None))

        def batch() -> int:
            jobs = store.claim_many("w", 10, lease_s=60)
            if jobs:
                store.complete_many(jobs)
            return len(jobs)

        batched = per_job(count, batch)
        row = store.conn.execute("SELECT * FROM jobs LIMIT 1").fetchone()
        t0 = time.perf_counter()
        for _ in range(2000):
            Job.from_row(row)
        from_row = (time.perf_counter() - t0) / 2000 * 1e6
        return {"claim + complete (API)": both, "claim alone (API)": claim_only,
                "complete alone (API, by difference)": both - claim_only,
                "claim_many(10) + complete_many (API)": batched, "Job.from_row": from_row}
    finally:
        drop(store)


def bare(n: int, count: int, triggers: bool, autocommit: bool) -> dict[str, float]:
    """The claim and complete statements run bare on psycopg, as the store sends them."""
    store = fresh_store(n)
    try:
        conn = store.conn
        if not triggers:
            conn.execute("ALTER TABLE jobs DISABLE TRIGGER USER")
        now = store.clock.now
        claim_s = complete_s = 0.0
        for _ in range(count):
            params = {"worker": "w", "queues": ["default"], "lease_s": 60.0, "limit": 1,
                      "now": now()}
            t0 = time.perf_counter()
            if autocommit:
                row = conn.execute(SQL["claim"], params).fetchone()
            else:
                with conn.transaction():
                    row = conn.execute(SQL["claim"], params).fetchone()
            t1 = time.perf_counter()
            assert row is not None
            done = {"id": row["id"], "token": row["lease_token"], "now": now(), "result": "null"}
            if autocommit:
                conn.execute(SQL["complete"], done).fetchone()
            else:
                with conn.transaction():
                    conn.execute(SQL["complete"], done).fetchone()
            t2 = time.perf_counter()
            claim_s += t1 - t0
            complete_s += t2 - t1
        how = ("BEGIN/COMMIT" if not autocommit else "autocommit") + (
            "" if triggers else ", no history triggers")
        return {f"claim statement ({how})": claim_s / count * 1e6,
                f"complete statement ({how})": complete_s / count * 1e6}
    finally:
        drop(store)


def raw(n: int, count: int) -> dict[str, float]:
    schema = f"prof_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(DSN, autocommit=True, row_factory=dict_row) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        try:
            conn.execute(sql.SQL("SET search_path = {}").format(sql.Identifier(schema)))
            conn.execute(RAW_SCHEMA)
            conn.execute("INSERT INTO jobs (payload) SELECT '{\"i\": ' || g || '}'"
                         " FROM generate_series(1, %(n)s) AS g", {"n": n})
            conn.execute("ANALYZE jobs")
            out: dict[str, float] = {}
            for limit in (1, 10):
                claim_s = ack_s = 0.0
                done = 0
                while done < count:
                    now = time.time()
                    p: dict[str, Any] = {"owner": "w", "until": now + 60, "now": now,
                                         "limit": limit}
                    t0 = time.perf_counter()
                    rows = conn.execute(RAW_CLAIM, p).fetchall()
                    t1 = time.perf_counter()
                    for r in rows:
                        json.loads(r["payload"])
                    conn.execute(RAW_ACK, {"ids": [r["id"] for r in rows], "owner": "w"})
                    t2 = time.perf_counter()
                    claim_s, ack_s, done = claim_s + t1 - t0, ack_s + t2 - t1, done + len(rows)
                out[f"raw claim (LIMIT {limit}), per job"] = claim_s / done * 1e6
                out[f"raw ack ({limit} per statement), per job"] = ack_s / done * 1e6
            return out
        finally:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ready", type=int, default=10_000, help="ready jobs when timing starts")
    ap.add_argument("--count", type=int, default=1_000, help="jobs timed per measurement")
    args = ap.parse_args()
    with psycopg.connect(DSN) as conn:
        version = conn.execute("SHOW server_version").fetchone()
    print(f"PostgreSQL {version[0] if version else '?'}; {args.ready:,} ready jobs; "
          f"{args.count:,} jobs per measurement; microseconds per job")
    results: dict[str, float] = {}
    results |= api(args.ready, args.count)
    results |= bare(args.ready, args.count, triggers=True, autocommit=False)
    results |= bare(args.ready, args.count, triggers=True, autocommit=True)
    results |= bare(args.ready, args.count, triggers=False, autocommit=True)
    results |= raw(args.ready, args.count)
    width = max(len(k) for k in results)
    for what, us in results.items():
        print(f"  {what:<{width}}  {us:8.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
