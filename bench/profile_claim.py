"""Where a labkit claim/complete round trip spends its time: ``python bench/profile_claim.py``.

Prints (1) a cProfile of one worker processing N jobs with the store as it is, and
(2) the cost of each statement of the round trip at several queue lengths, for the
store's SQL and for bench/proposed.sql, each in its own transaction, as the worker runs it.
The numbers behind bench/PROPOSALS.md.
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

from bench.adapters import load_proposed  # noqa: E402
from labkit.clock import SystemClock  # noqa: E402
from labkit.store import SQL, JobStore  # noqa: E402


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


def statement_costs(n: int, sql: dict[str, str], rounds: int = 300) -> dict[str, float]:
    """Microseconds per transaction for bury_exhausted, claim and complete at queue length n."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "jobs.db"
        fill(path, n)
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("PRAGMA synchronous=NORMAL")
        now = SystemClock().now()
        params = {"worker": "w", "queues": json.dumps(["default"]), "lease_s": 30.0,
                  "limit": 1, "now": now}
        out: dict[str, float] = {}
        claimed = []
        for name in ("bury_exhausted", "claim"):
            t0 = time.perf_counter()
            for _ in range(rounds):
                conn.execute("BEGIN IMMEDIATE")
                rows = conn.execute(sql[name], params).fetchall()
                conn.execute("COMMIT")
                if name == "claim":
                    claimed.extend((r[0], r[13]) for r in rows)  # id, lease_token
            out[name] = (time.perf_counter() - t0) / rounds * 1e6
        cols = [d[1] for d in conn.execute("PRAGMA table_info(jobs)")]
        assert cols[13] == "lease_token", cols
        t0 = time.perf_counter()
        for job_id, token in claimed:
            conn.execute("BEGIN IMMEDIATE")
            done = conn.execute(sql["complete"], {"id": job_id, "token": token, "now": now,
                                                  "result": "null"}).fetchone()
            conn.execute("COMMIT")
            assert done is not None
        out["complete"] = (time.perf_counter() - t0) / max(1, len(claimed)) * 1e6
        conn.close()
        return out


def profile(n: int) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "jobs.db"
        fill(path, n)
        store = JobStore(path, clock=SystemClock())
        prof = cProfile.Profile()
        prof.enable()
        while (job := store.claim("w")) is not None:
            store.complete(job)
        prof.disable()
        store.close()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(8)
        return text.getvalue()


def main() -> None:
    print(f"SQLite {sqlite3.sqlite_version}, Python {sys.version.split()[0]}")
    print("\n== cProfile: one worker, 3,000 jobs, the store's SQL as it is ==")
    print(profile(3_000))
    proposed = {**SQL, **load_proposed()}
    print("== microseconds per transaction (each statement alone, WAL/NORMAL) ==")
    print(f"{'ready jobs':>10} {'SQL':>9} {'bury_exhausted':>15} {'claim':>9} {'complete':>9}")
    for n in (2_000, 10_000, 100_000):
        for label, sql in (("store", SQL), ("proposed", proposed)):
            c = statement_costs(n, sql, rounds=100 if label == "store" and n >= 100_000 else 300)
            print(f"{n:>10,} {label:>9} {c['bury_exhausted']:>15.0f} {c['claim']:>9.0f} "
                  f"{c['complete']:>9.0f}")


if __name__ == "__main__":
    main()
