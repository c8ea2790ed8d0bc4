"""Where a labkit claim/complete round trip spends its time: ``python bench/profile_claim.py``.

Prints (1) a cProfile of one worker processing 3,000 jobs through ``JobStore.claim`` and
``JobStore.complete``, and (2) the cost of each piece of the round trip, in microseconds
per job at several queue lengths, each statement in its own ``BEGIN IMMEDIATE`` ...
``COMMIT`` as the worker runs it: the store's claim and complete, the same with the
attempt-history triggers dropped (what the history costs), the ``bury_exhausted`` sweep,
``Job.from_row``, and the raw loop of bench/adapters.py for comparison. The numbers behind
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


def _timed(conn: sqlite3.Connection, sql: str, params: list[dict]) -> tuple[float, list]:
    """Microseconds per transaction, one transaction per params dict; the rows returned."""
    rows = []
    t0 = time.perf_counter()
    for p in params:
        conn.execute("BEGIN IMMEDIATE")
        rows.extend(conn.execute(sql, p).fetchall())
        conn.execute("COMMIT")
    return (time.perf_counter() - t0) / len(params) * 1e6, rows


def statement_costs(n: int, rounds: int = 1_000, triggers: bool = True) -> dict[str, float]:
    """Microseconds per transaction for each piece of the round trip at queue length n."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "jobs.db"
        fill(path, n)
        conn = sqlite3.connect(path, isolation_level=None)
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA synchronous=NORMAL")
        if not triggers:
            conn.execute("DROP TRIGGER attempt_opens")
            conn.execute("DROP TRIGGER attempt_closes")
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


if __name__ == "__main__":
    main()
