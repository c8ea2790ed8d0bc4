"""Where ``JobStore.enqueue_many`` spends its time: ``python bench/profile_enqueue.py``.

Microseconds per job, batches of 100 jobs per commit as in bench/RESULTS.md, split into
the Python that checks and prepares each row (``jobrules.enqueue_batch_rows``, and the
payload check alone, ``keys.payload_text``) and the one ``insert_jobs`` statement with its
commit, on the store's schema and on the same schema without each index the insert
writes; then the whole public call and the raw ``executemany`` loop it is compared with.
The numbers behind the enqueue reading of bench/NOTES.md.
"""

from __future__ import annotations

import json
import re
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.adapters import RawBatched  # noqa: E402
from labkit.clock import SystemClock  # noqa: E402
from labkit.keys import payload_text  # noqa: E402
from labkit.store.rules import enqueue_batch_rows  # noqa: E402
from labkit.store.sqlite import SQL, JobStore  # noqa: E402

N = 20_000
BATCH = 100


def _payloads(lo: int) -> list[dict[str, int]]:
    return [{"i": i} for i in range(lo, lo + BATCH)]  # the bench's payload


def python_costs() -> dict[str, float]:
    pc = time.perf_counter
    t0 = pc()
    for lo in range(0, N, BATCH):
        enqueue_batch_rows("bench", _payloads(lo), [None] * BATCH, "default", None, 5, 1.0)
    rows = (pc() - t0) / N * 1e6
    t0 = pc()
    for lo in range(0, N, BATCH):
        for p in _payloads(lo):
            payload_text(p)
    return {"rows (all checks)": rows, "  of which payload_text": (pc() - t0) / N * 1e6}


def _without_index(name: str) -> Callable[[str], str]:
    return lambda schema: re.sub(rf"CREATE INDEX IF NOT EXISTS {name} ON[^;]*;", "", schema)


def _without_key_index(schema: str) -> str:
    return schema.replace("key          TEXT NOT NULL UNIQUE", "key          TEXT NOT NULL")


def sql_cost(edit: Callable[[str], str] = lambda s: s, conflict: bool = True) -> float:
    """The insert statement and its commit, per job, on a (possibly edited) schema."""
    sql = SQL["insert_jobs"] if conflict else SQL["insert_jobs"].replace(
        "ON CONFLICT (key) DO NOTHING", "")
    with tempfile.TemporaryDirectory() as tmp:
        conn = sqlite3.connect(Path(tmp) / "jobs.db", isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.executescript(edit(SQL["schema"]))
        batches = [
            json.dumps(enqueue_batch_rows("bench", _payloads(lo), [None] * BATCH, "default",
                                          None, 5, 1.0))
            for lo in range(0, N, BATCH)
        ]
        t0 = time.perf_counter()
        for rows in batches:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(sql, {"now": 1.0, "rows": rows}).fetchall()
            conn.execute("COMMIT")
        took = time.perf_counter() - t0
        conn.close()
    return took / N * 1e6


def whole_costs() -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        store = JobStore(Path(tmp) / "jobs.db", clock=SystemClock())
        t0 = time.perf_counter()
        for lo in range(0, N, BATCH):
            store.enqueue_many("bench", _payloads(lo))
        labkit = (time.perf_counter() - t0) / N * 1e6
        store.close()
    with tempfile.TemporaryDirectory() as tmp:
        raw = RawBatched(Path(tmp))
        t0 = time.perf_counter()
        raw.enqueue(N)
        ceiling = (time.perf_counter() - t0) / N * 1e6
        raw.close()
    return {"enqueue_many, whole call": labkit, "raw executemany, whole loop": ceiling}


def main() -> None:
    print(f"SQLite {sqlite3.sqlite_version}, Python {sys.version.split()[0]}; "
          f"{N:,} jobs in batches of {BATCH}, microseconds per job")
    for name, us in python_costs().items():
        print(f"  python: {name:<36} {us:6.1f}")
    print(f"  sql:    {'insert_jobs + commit, as stored':<36} {sql_cost():6.1f}")
    print(f"  sql:    {'  without the jobs_ready index':<36} "
          f"{sql_cost(_without_index('jobs_ready')):6.1f}")
    print(f"  sql:    {'  without the unique key index':<36} "
          f"{sql_cost(_without_key_index, conflict=False):6.1f}")
    both = lambda s: _without_index("jobs_ready")(_without_key_index(s))  # noqa: E731
    print(f"  sql:    {'  without either (the row alone)':<36} "
          f"{sql_cost(both, conflict=False):6.1f}")
    whole = whole_costs()
    for name, us in whole.items():
        print(f"  {name:<44} {us:6.1f}")
    ratio = whole["raw executemany, whole loop"] / whole["enqueue_many, whole call"]
    print(f"  enqueue_many / raw: {ratio:.2f}x")


if __name__ == "__main__":
    main()
