"""Where a labkit claim/complete round trip spends its time: ``python bench/profile_claim.py``.

Prints (1) a cProfile of one worker processing 3,000 jobs through ``JobStore.claim`` and
``JobStore.complete``, and (2) the cost of each piece of the round trip, in microseconds
per job at several queue lengths, each statement in its own ``BEGIN IMMEDIATE`` ...
``COMMIT`` as the worker runs it: the store's claim and complete, the same with the
attempt-history triggers dropped (what the history costs), the ``bury_exhausted`` sweep,
``Job.from_row``, the raw loop of bench/adapters.py for comparison, and (3) the same per job
through the public API, one at a time and in batches of 100. The numbers behind
bench/RESULTS.md.
"""

from __future__ import annotations

import cProfile
import io
import json
import pstats
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.adapters import RAW_ACK, RAW_CLAIM, RAW_SCHEMA  # noqa: E402
from labkit.clock import SystemClock  # noqa: E402
from labkit.job import Job  # noqa: E402
from labkit.store.sqlite import SQL, JobStore  # noqa: E402


def fill(path: Path, n: int) -> None:
    with JobStore(path, clock=SystemClock()) as store:
        conn = store.conn
        conn.execute("BEGIN IMMEDIATE")  # fast fill: one transaction, same rows as enqueue
        for i in range(n):
            store._insert(conn, {  # noqa: SLF001 - bench-only shortcut around per-job commits
                "kind": "bench", "queue": "default", "key": f"k{i}", "fingerprint": "f",
                "payload": json.dumps({"i": i}), "max_attempts": 5, "now": 0.0, "run_after": 0.0,
            })
        conn.execute("COMMIT")


def _timed(conn: sqlite3.Connection, sql: str, params: list[dict]) -> tuple[float, list]:
    """Microseconds per transaction, one transaction per params dict; the rows returned."""
    rows = []
    t0 = time.perf_counter()
    for p in params:
        conn.execute("BEGIN IMMEDIATE")
        rows.extend(conn.execute(sql, p).fetchall())
        conn.execute("COMMIT")
    return (time.perf_counter() - t0) / len(params) * 1e6, rows


def _raw_connection(path: Path, triggers: bool) -> sqlite3.Connection:
    """A plain connection to a filled store file, optionally without the history triggers."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA synchronous=NORMAL")
    if not triggers:
        conn.execute("DROP TRIGGER attempt_opens")
        conn.execute("DROP TRIGGER attempt_expires")
        conn.execute("DROP TRIGGER attempt_closes")
    return conn


def statement_costs(n: int, rounds: int = 1_000, triggers: bool = True) -> dict[str, float]:
    """Microseconds per transaction for each piece of the round trip at queue length n."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "jobs.db"
        fill(path, n)
        conn = _raw_connection(path, triggers)
        now = SystemClock().now()
        base = {"worker": "w", "queues": json.dumps(["default"]), "queue": "default",
                "lease_s": 30.0, "limit": 1, "now": now}
        out: dict[str, float] = {}
        out["empty tx"], _ = _timed(conn, "SELECT 1", [base] * rounds)
        out["bury_exhausted"], _ = _timed(conn, SQL["bury_exhausted"], [base] * rounds)
        out["claim (queues list)"], a = _timed(conn, SQL["claim"], [base] * rounds)
        out["claim_one_queue"], b = _timed(conn, SQL["claim_one_queue"], [base] * rounds)
        claimed = a + b
        t0 = time.perf_counter()
        for r in claimed:
            Job.from_row(r)
        out["Job.from_row"] = (time.perf_counter() - t0) / len(claimed) * 1e6
        out["complete"], done = _timed(conn, SQL["complete"], [
            {"id": r["id"], "token": r["lease_token"], "now": now, "result": "null"}
            for r in claimed])
        assert len(done) == len(claimed)
        conn.close()
        return out


def api_costs(n: int, batch: int, rounds: int = 2_000) -> dict[str, float]:
    """Microseconds per job through the public API: claim/complete, or claim_many/complete_many."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "jobs.db"
        fill(path, n)
        store = JobStore(path, clock=SystemClock())
        pc = time.perf_counter
        t_claim = t_done = 0.0
        jobs_done = 0
        while jobs_done < rounds:
            t0 = pc()
            if batch == 1:
                job = store.claim("w", lease_s=30.0)
                t1 = pc()
                store.complete(job)  # type: ignore[arg-type]
                got = 1
            else:
                jobs = store.claim_many("w", batch, lease_s=30.0)
                t1 = pc()
                store.complete_many(jobs)
                got = len(jobs)
            t_claim += t1 - t0
            t_done += pc() - t1
            jobs_done += got
        store.close()
        return {"claim": t_claim / jobs_done * 1e6, "complete": t_done / jobs_done * 1e6}


def batch_sql_costs(n: int, triggers: bool, batches: int = 30) -> dict[str, float]:
    """Microseconds per job of the batched SQL alone: a claim of 100, then the one
    ``complete_batch`` statement that finishes the 100."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "jobs.db"
        fill(path, n)
        conn = _raw_connection(path, triggers)
        now = SystemClock().now()
        params = {"worker": "w", "queue": "default", "lease_s": 30.0, "limit": 100, "now": now}
        pc = time.perf_counter
        t_claim = t_done = 0.0
        count = 0
        for _ in range(batches):
            t0 = pc()
            conn.execute("BEGIN IMMEDIATE")
            rows = conn.execute(SQL["claim_one_queue"], params).fetchall()
            conn.execute("COMMIT")
            t1 = pc()
            conn.execute("BEGIN IMMEDIATE")
            batch = json.dumps([[r["id"], r["lease_token"], "null"] for r in rows])
            conn.execute(SQL["complete_batch"], {"rows": batch, "now": now}).fetchall()
            conn.execute("COMMIT")
            t_claim += t1 - t0
            t_done += pc() - t1
            count += len(rows)
        conn.close()
        return {"claim": t_claim / count * 1e6, "complete": t_done / count * 1e6}


def raw_costs(n: int, rounds: int = 1_000) -> dict[str, float]:
    """The raw loop's claim and ack, same transactions, same queue length."""
    with tempfile.TemporaryDirectory() as tmp:
        conn = sqlite3.connect(Path(tmp) / "raw.db", isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.executescript(RAW_SCHEMA)
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO jobs (payload) VALUES (?)",
                         [(json.dumps({"i": i}),) for i in range(n)])
        conn.execute("COMMIT")
        p = {"owner": "w", "until": 1e12, "limit": 1}
        out: dict[str, float] = {}
        out["raw claim"], rows = _timed(conn, RAW_CLAIM, [p] * rounds)
        out["raw ack"], _ = _timed(conn, RAW_ACK, [{"id": r[0], "owner": "w"} for r in rows])
        t0 = time.perf_counter()
        count = 0
        for _ in range(rounds // 100):
            conn.execute("BEGIN IMMEDIATE")
            got = conn.execute(RAW_CLAIM, {**p, "limit": 100}).fetchall()
            conn.execute("COMMIT")
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(RAW_ACK, [{"id": r[0], "owner": "w"} for r in got])
            conn.execute("COMMIT")
            count += len(got)
        out["raw batched(100) claim+ack"] = (time.perf_counter() - t0) / count * 1e6
        conn.close()
        return out


def profile(n: int) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "jobs.db"
        fill(path, n)
        store = JobStore(path, clock=SystemClock())
        prof = cProfile.Profile()
        t0 = time.perf_counter()
        prof.enable()
        while (job := store.claim("w")) is not None:
            store.complete(job)
        prof.disable()
        took = time.perf_counter() - t0
        store.close()
        text = io.StringIO()
        print(f"{n / took:,.0f} jobs/s under the profiler", file=text)
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(12)
        return text.getvalue()


def main() -> None:
    print(f"SQLite {sqlite3.sqlite_version}, Python {sys.version.split()[0]}")
    print("\n== cProfile: one worker, 3,000 jobs, claim + complete ==")
    print(profile(3_000))
    print("== microseconds per transaction (each statement alone, WAL/NORMAL) ==")
    for n in (2_000, 10_000, 100_000):
        with_t = statement_costs(n)
        without = statement_costs(n, triggers=False)
        raw = raw_costs(n)
        print(f"\nready jobs: {n:,}")
        print(f"  {'piece':<22} {'store':>8} {'no history triggers':>20}")
        for k, v in with_t.items():
            print(f"  {k:<22} {v:>8.1f} {without[k]:>20.1f}")
        for k, v in raw.items():
            print(f"  {k:<22} {v:>8.1f}")
        one, many = api_costs(n, 1), api_costs(n, 100)
        sql_t, sql_nt = batch_sql_costs(n, True), batch_sql_costs(n, False)
        print("  per job through the API (claim + complete; claim_many(100) + complete_many):")
        print(f"    claim/complete           {one['claim']:>6.1f} + {one['complete']:>6.1f} = "
              f"{one['claim'] + one['complete']:>6.1f}")
        print(f"    claim_many/complete_many {many['claim']:>6.1f} + {many['complete']:>6.1f} = "
              f"{many['claim'] + many['complete']:>6.1f}")
        print(f"    the same batch, SQL only {sql_t['claim']:>6.1f} + {sql_t['complete']:>6.1f}"
              f" = {sql_t['claim'] + sql_t['complete']:>6.1f} (no history triggers: "
              f"{sql_nt['claim'] + sql_nt['complete']:.1f})")


if __name__ == "__main__":
    main()
