"""What a bench run prints and writes: the machine, the tables, the target verdicts.

``results_md`` is bench/RESULTS.md as ``make bench`` writes it: every number in it comes
from the run's own rows (medians, ratios of medians within the run); the prose that
explains them lives in bench/NOTES.md, which no run overwrites.
"""

from __future__ import annotations

import os
import platform
import sqlite3
import statistics
import subprocess
from collections import Counter
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PEERS = ("huey", "persist-queue", "litequeue", "procrastinate", "pgqueuer", "psycopg", "redis",
         "labkit")

#: How each subject claims and acknowledges: (jobs per claim, commits per job).
SHAPE: dict[str, tuple[str, str]] = {
    "labkit": ("1", "2"),
    "labkit_many": ("100", "1.01"),
    "labkit_batch": ("100", "0.02"),
    "labkit_ledger": ("1", "2 (effect in the 2nd)"),
    "raw_normal": ("1", "2"),
    "raw_full": ("1", "2"),
    "raw_batched": ("100", "0.02"),
    "huey": ("1", "1 (deletes at dequeue)"),
    "persistqueue": ("1", "2"),
    "litequeue": ("1", "2"),
    "pg_labkit": ("1", "2"),
    "pg_labkit_batch": ("10", "0.2"),
    "pg_labkit_ledger": ("1", "2 (effect in the 2nd)"),
    "pg_raw": ("1", "2"),
    "pg_raw_batched": ("10", "0.2"),
    "procrastinate": ("1", "2"),
    "pgqueuer": ("10", "~0.2 + heartbeats (acks buffered)"),
    "streams_labkit": ("1", "2 writes (XADD via Lua, XACK), fsync per server config"),
    "streams_raw": ("1", "2 writes (XADD, XACK), fsync per server config"),
}


def machine() -> dict[str, Any]:
    """Where and with what the run happens, printed first and kept in the JSON."""
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = {}
    for dist in PEERS:
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = "not installed"
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=ROOT).stdout.strip()
    # The run's own outputs (bench/results.*, bench/RESULTS.md) do not make the code dirty.
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
                            ":!bench/results.*", ":!bench/RESULTS.md"],
                           capture_output=True, text=True, cwd=ROOT).stdout.strip()
    return {
        "cpu": cpu, "cores": os.cpu_count(), "platform": platform.platform(),
        "python": platform.python_version(), "sqlite": sqlite3.sqlite_version,
        "postgres": _postgres_version(), "versions": versions,
        "labkit_commit": commit + (" (with uncommitted changes)" if dirty else ""),
        "loadavg_start": os.getloadavg(),
    }


def _postgres_version() -> str:
    try:
        import psycopg

        from bench.pg import DSN

        with psycopg.connect(DSN, connect_timeout=3) as conn:
            row = conn.execute("SHOW server_version").fetchone()
            sync = conn.execute("SHOW synchronous_commit").fetchone()
        return f"{row[0] if row else '?'} (synchronous_commit {sync[0] if sync else '?'})"
    except Exception as exc:  # the SQLite rows still run without a server
        return f"unreachable ({type(exc).__name__})"


def _name(key: str) -> str:
    from bench.adapters import ADAPTERS
    from bench.pg import PG_ADAPTERS
    from bench.streams import STREAM_ADAPTERS

    return {**ADAPTERS, **PG_ADAPTERS, **STREAM_ADAPTERS}[key].name


def _medians(rows: list[dict]) -> dict[tuple[str, int], dict[str, Any]]:
    med: dict[tuple[str, int], dict[str, Any]] = {}
    order = list(SHAPE)
    keys = {(r["adapter"], r["n"]) for r in rows}
    for name, n in sorted(keys, key=lambda k: (k[1], order.index(k[0]) if k[0] in order else 99)):
        rs = [r for r in rows if r["adapter"] == name and r["n"] == n]
        med[(name, n)] = {
            "enq": statistics.median(r["enqueue_per_s"] for r in rs),
            "filled": any(r.get("enqueue_phase") == "fill" for r in rs),
            "proc": statistics.median(r["process_per_s"] for r in rs),
            "rss": max((r["peak_rss_mb"] or 0.0) for r in rs),
            "reps": len(rs),
            "partial": any(r["partial"] for r in rs),
            "bad": sum(r.get("lost", 0) + r.get("duplicated", 0) for r in rs),
        }
    return med


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if a == a and b == b and b else "-"  # NaN-safe


def summarize(results: dict[str, Any]) -> str:
    """Markdown tables: medians per row, ratios and verdicts, all from this run."""
    out: list[str] = []
    verdicts: list[tuple[str, str, bool | None]] = []
    med = _medians([r for r in results["rows"] if r["workload"] == "W1"])
    sizes = sorted({n for _, n in med})

    def p(name: str, n: int) -> float:
        return float(med.get((name, n), {}).get("proc", float("nan")))

    def e(name: str, n: int) -> float:
        return float(med.get((name, n), {}).get("enq", float("nan")))

    if med:
        out.append("### W1 durable round trip, one worker (medians; jobs/s)\n")
        out.append("| N | queue | jobs per claim | commits per job | repeats | enqueue/s "
                   "| process/s | peak RSS MB | lost+dup |")
        out.append("|---:|---|---:|---|---:|---:|---:|---:|---:|")
        for (name, n), m in med.items():
            per_claim, commits = SHAPE.get(name, ("?", "?"))
            out.append(f"| {n:,} | {_name(name)} | {per_claim} | {commits} | {m['reps']} | "
                       + ("filled in batches" if m["filled"] else f"{m['enq']:,.0f}")
                       + f" | {m['proc']:,.0f}{' (partial)' if m['partial'] else ''}"
                       f" | {m['rss']:.0f} | {m['bad']} |")
        if any(k[0] in ("labkit", "raw_normal", "labkit_batch", "raw_batched") for k in med):
            out.append("\n### SQLite ratios (medians of this run)\n")
            out.append("| N | labkit / raw NORMAL | labkit / best acking peer "
                       "| claim_many + complete_many / raw batched(100) "
                       "| enqueue_many / raw executemany (100 per commit) |")
            out.append("|---:|---:|---:|---:|---:|")
            for n in sizes:
                acking = max(p("persistqueue", n), p("litequeue", n))
                out.append(f"| {n:,} | {_ratio(p('labkit', n), p('raw_normal', n))} | "
                           f"{_ratio(p('labkit', n), acking)} | "
                           f"{_ratio(p('labkit_batch', n), p('raw_batched', n))} | "
                           f"{_ratio(e('labkit_batch', n), e('raw_batched', n))} |")
            for n in sizes:
                if n >= 10_000:
                    r = p("labkit_batch", n) / p("raw_batched", n)
                    verdicts.append((f"SQLite claim_many(100) + complete_many ≥ 0.3× raw "
                                     f"batched at N={n:,}", f"{r:.2f}",
                                     r >= 0.3 if r == r else None))
                    r = e("labkit_batch", n) / e("raw_batched", n)
                    verdicts.append((f"SQLite enqueue_many ≥ 0.3× raw batched inserts at "
                                     f"N={n:,}", f"{r:.2f}", r >= 0.3 if r == r else None))
                r = p("labkit", n) / p("raw_normal", n)
                verdicts.append((f"SQLite labkit ≥ 0.6× raw WAL/NORMAL at N={n:,}", f"{r:.2f}",
                                 r >= 0.6 if r == r else None))
        if any(k[0] in ("pg_labkit", "pg_raw") for k in med):
            out.append("\n### PostgreSQL ratios (medians of this run)\n")
            out.append("| N | labkit / raw | labkit / procrastinate | labkit claim_many(10) + "
                       "complete_many / raw batched(10) | same / pgqueuer (10 per claim) |")
            out.append("|---:|---:|---:|---:|---:|")
            for n in sizes:
                out.append(f"| {n:,} | {_ratio(p('pg_labkit', n), p('pg_raw', n))} | "
                           f"{_ratio(p('pg_labkit', n), p('procrastinate', n))} | "
                           f"{_ratio(p('pg_labkit_batch', n), p('pg_raw_batched', n))} | "
                           f"{_ratio(p('pg_labkit_batch', n), p('pgqueuer', n))} |")
            for n in sizes:
                r = p("pg_labkit", n) / p("pg_raw", n)
                verdicts.append((f"PostgreSQL labkit ≥ 0.5× raw loop at N={n:,}", f"{r:.2f}",
                                 r >= 0.5 if r == r else None))
                r = p("pg_labkit", n) / p("procrastinate", n)
                if r == r:
                    verdicts.append((f"PostgreSQL labkit ahead of procrastinate at N={n:,}",
                                     f"{r:.2f}×", r > 1))
        if any(k[0] == "streams_labkit" for k in med):
            out.append("\n### Redis Streams ratios (medians of this run)\n")
            out.append("| N | labkit StreamQueue / raw XREADGROUP/XACK |")
            out.append("|---:|---:|")
            for n in sizes:
                out.append(f"| {n:,} | {_ratio(p('streams_labkit', n), p('streams_raw', n))} |")
        flat = [s for s in sizes if s >= 2_000]
        if len(flat) >= 2:
            lo, hi = flat[0], flat[-1]
            for name in ("labkit", "labkit_batch", "pg_labkit", "pg_labkit_batch"):
                if (name, lo) in med and (name, hi) in med:
                    change = p(name, hi) / p(name, lo) - 1
                    verdicts.append((f"{_name(name)} flat (±20 %) from N={lo:,} to {hi:,}",
                                     f"{100 * change:+.0f} %", abs(change) <= 0.2))
    out += _w2(results, verdicts)
    out += _w3(results, verdicts)
    if verdicts:
        out.append("\n### Targets, judged from the rows above\n")
        out.append("| target | measured | verdict |")
        out.append("|---|---|---|")
        for what, measured, ok in verdicts:
            word = "not measured" if ok is None else ("met" if ok else "**missed**")
            out.append(f"| {what} | {measured} | {word} |")
    return "\n".join(out)


def _w2(results: dict[str, Any], verdicts: list[tuple[str, str, bool | None]]) -> list[str]:
    rows = [r for r in results["rows"] if r["workload"] == "W2"]
    if not rows:
        return []
    out = ["\n### W2 several worker processes, one queue\n",
           "| queue | workers | jobs per claim | commits per job | repeats | jobs/s (median) "
           "| lost (total) | duplicated (total) | errors |",
           "|---|---:|---:|---|---:|---:|---:|---:|---:|"]
    med: dict[str, float] = {}
    for name in dict.fromkeys(r["adapter"] for r in rows):
        rs = [r for r in rows if r["adapter"] == name]
        errs: Counter[str] = Counter()
        for r in rs:
            errs.update(r["errors"])
        med[name] = statistics.median(r["per_s"] for r in rs)
        per_claim, commits = SHAPE.get(name, ("?", "?"))
        lost, dup = sum(r["lost"] for r in rs), sum(r["duplicated"] for r in rs)
        out.append(f"| {_name(name)} | {rs[0].get('workers', 2)} | {per_claim} | {commits} | "
                   f"{len(rs)} | {med[name]:,.0f} | {lost} | {dup} | {sum(errs.values())} |")
        if name.endswith("ledger"):
            verdicts.append((f"W2 {_name(name)}: zero lost, zero duplicated",
                             f"{lost} / {dup}", lost == 0 and dup == 0))
    if "pg_labkit_batch" in med and "pgqueuer" in med:
        r = med["pg_labkit_batch"] / med["pgqueuer"]
        verdicts.append(("W2 PostgreSQL labkit claim_many(10) + complete_many ahead of "
                         "pgqueuer (10 per claim)", f"{r:.2f}×", r > 1))
    return out


def _w3(results: dict[str, Any], verdicts: list[tuple[str, str, bool | None]]) -> list[str]:
    rows = [r for r in results["rows"] if r["workload"] == "W3"]
    if not rows:
        return []
    out = ["\n### W3 kill -9 and restart (totals over all trials)\n",
           "| queue | kill point | trials | kills fired | lost | duplicated |",
           "|---|---|---:|---:|---:|---:|"]
    for name in dict.fromkeys(r["adapter"] for r in rows):
        lost_all = dup_all = 0
        for mode in dict.fromkeys(r["mode"] for r in rows):
            rs = [r for r in rows if r["adapter"] == name and r["mode"] == mode]
            if not rs:
                continue
            fired = sum(r["kills_fired"] for r in rs)
            planned = sum(r["kills_planned"] for r in rs)
            lost, dup = sum(r["lost"] for r in rs), sum(r["duplicated"] for r in rs)
            lost_all, dup_all = lost_all + lost, dup_all + dup
            out.append(f"| {_name(name)} | {mode} | {len(rs)} | {fired}/{planned} | "
                       f"{lost} | {dup} |")
        if name.endswith("ledger"):
            verdicts.append((f"W3 {_name(name)}: zero lost, zero duplicated",
                             f"{lost_all} / {dup_all}", lost_all == 0 and dup_all == 0))
    return out


def results_md(results: dict[str, Any], command: str, tables: str) -> str:
    """bench/RESULTS.md: how the run was made, then its tables. Written by the run only."""
    m = results["machine"]
    start, end = m["loadavg_start"], m.get("loadavg_end", ("?", "?", "?"))
    fmt: Callable[[Any], str] = lambda la: " / ".join(  # noqa: E731
        f"{x:.2f}" if isinstance(x, float) else str(x) for x in la)
    busy = max(start[0], *(end[:1] if isinstance(end[0], float) else ())) > (m["cores"] or 1)
    lines = [
        "# Benchmark results",
        "",
        "Written by the run itself (`make bench`, i.e. `bench/run.py --results "
        "bench/RESULTS.md`); do not edit by hand. What each row does: bench/README.md. "
        "Why the numbers are what they are, with per-statement profiles: bench/NOTES.md.",
        "",
        f"- Command: `{command}`",
        f"- Machine: {m['cpu']}, {m['cores']} cores, {m['platform']}",
        f"- Python {m['python']}, SQLite {m['sqlite']}, PostgreSQL {m.get('postgres', '?')}",
        "- Versions: " + ", ".join(f"{k} {v}" for k, v in m["versions"].items()),
        f"- labkit commit: {m['labkit_commit']}",
        f"- Load average (1 / 5 / 15 min): {fmt(start)} at the start, {fmt(end)} at the end"
        + (f" — **the machine was busy** (more runnable processes than its {m['cores']} "
           "cores: other people's work ran beside the bench). Absolute rates are low and "
           "noisy; compare the ratios, which come from the same run with subjects "
           "interleaved inside each repeat." if busy else "."),
        f"- Wall time: {results.get('wall_s', 0):.0f} s",
        "",
        tables,
        "",
    ]
    return "\n".join(lines)
