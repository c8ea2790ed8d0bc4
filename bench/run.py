"""Benchmark labkit against its peers and the raw SQLite ceiling: ``python bench/run.py``.

W1 durable round trip, W2 two workers on one file, W3 kill -9 and restart; see
bench/README.md for what each measures and bench/RESULTS.md for the last full run.
Every number comes from separate processes (bench/child.py); ratios compare rows of the
same run; throughputs are medians over the repeats. Performance is measured here and
only here: the test suite never times anything.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from importlib import metadata
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from bench.adapters import ADAPTERS, LEASE_S  # noqa: E402

W1_ADAPTERS = [
    "labkit", "labkit_many", "labkit_batch",
    "raw_normal", "raw_full", "raw_batched", "huey", "persistqueue", "litequeue",
]
#: Rows the targets are judged on get the full repeat count at N=100,000.
W1_KEY = {"labkit", "labkit_batch", "raw_normal", "raw_batched"}
W2_ADAPTERS = ["labkit", "labkit_ledger", "raw_normal", "huey", "persistqueue", "litequeue"]
W3_ADAPTERS = ["labkit_ledger", "labkit", "raw_normal", "huey", "persistqueue", "litequeue"]
W3_MODES = ["before_effect", "after_effect", "random"]


def child(spec: dict[str, Any], timeout: float = 900) -> dict[str, Any]:
    """Run one bench/child.py process to the end and return its JSON line."""
    proc = subprocess.run(
        [sys.executable, str(HERE / "child.py"), json.dumps(spec)],
        capture_output=True, text=True, timeout=timeout, cwd=ROOT,
    )
    if proc.returncode != 0:
        what = f"{spec['adapter']} {spec['phase']}"
        raise RuntimeError(f"child {what} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def effects(adapter: str, workdir: Path, log: Path) -> Counter[int]:
    """What actually happened: lines of the O_APPEND log, or rows of the ledger table."""
    if adapter == "labkit_ledger":
        conn = sqlite3.connect(workdir / "jobs.db")
        try:
            return Counter(i for (i,) in conn.execute("SELECT i FROM effects"))
        finally:
            conn.close()
    if not log.exists():
        return Counter()
    return Counter(int(line) for line in log.read_text().split())


def judge(seen: Counter[int], n: int) -> dict[str, int]:
    lost = sum(1 for i in range(n) if seen[i] == 0)
    duplicated = sum(c - 1 for c in seen.values() if c > 1)
    return {"lost": lost, "duplicated": duplicated}


# -- W1 ----------------------------------------------------------------------------------


def w1(
    sizes: list[int], repeats: int, big_repeats: int, budget_s: float, tmp: Path,
    adapters: list[str],
) -> list[dict]:
    rows = []
    for n in sizes:
        reps = repeats
        for r in range(max(reps, big_repeats)):
            # Adapters interleave inside each repeat so a noisy neighbour hurts all of them.
            for name in adapters:
                wanted = repeats if (n < 100_000 or name in W1_KEY) else big_repeats
                if r >= wanted:
                    continue
                work = Path(tempfile.mkdtemp(dir=tmp))
                log = work / "effects.log"
                enq = child({"adapter": name, "dir": str(work), "phase": "enqueue", "n": n})
                done = child({"adapter": name, "dir": str(work), "phase": "work",
                              "log": str(log), "budget_s": budget_s})
                seen = effects(name, work, log)
                row = {
                    "workload": "W1", "adapter": name, "n": n, "repeat": r,
                    "enqueue_per_s": n / enq["elapsed"],
                    "process_per_s": done["done"] / done["elapsed"],
                    "processed": done["done"],
                    "partial": done["done"] < n,
                    # Each process's own VmHWM; the table shows the larger, never a sum.
                    "peak_rss_mb": max(enq["maxrss_kb"], done["maxrss_kb"]) / 1024,
                    "enqueue_rss_mb": enq["maxrss_kb"] / 1024,
                    "worker_rss_mb": done["maxrss_kb"] / 1024,
                    "errors": done["errors"],
                    **(judge(seen, n) if done["done"] == n else {}),
                }
                rows.append(row)
                print(f"  W1 n={n:>6} r={r} {name:<22} enq {row['enqueue_per_s']:>8.0f}/s "
                      f"proc {row['process_per_s']:>8.0f}/s"
                      + (f" (partial: {done['done']} of {n} in {budget_s:g}s budget)"
                         if row["partial"] else ""), flush=True)
                shutil.rmtree(work, ignore_errors=True)
    return rows


# -- W2 ----------------------------------------------------------------------------------


def w2(n: int, repeats: int, tmp: Path) -> list[dict]:
    rows = []
    for r in range(repeats):
        for name in W2_ADAPTERS:
            work = Path(tempfile.mkdtemp(dir=tmp))
            log = work / "effects.log"
            child({"adapter": name, "dir": str(work), "phase": "enqueue", "n": n})
            procs = [
                subprocess.Popen(
                    [sys.executable, str(HERE / "child.py"), json.dumps(
                        {"adapter": name, "dir": str(work), "phase": "work", "log": str(log),
                         "worker": f"w{k}"})],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
                for k in (1, 2)
            ]
            outs = []
            for proc in procs:
                stdout, stderr = proc.communicate(timeout=900)
                if proc.returncode != 0:
                    raise RuntimeError(f"W2 {name} worker failed:\n{stderr[-2000:]}")
                outs.append(json.loads(stdout.strip().splitlines()[-1]))
            wall = max(o["t_end"] for o in outs) - min(o["t_start"] for o in outs)
            verdict = judge(effects(name, work, log), n)
            errors = Counter()
            for o in outs:
                errors.update(o["errors"])
            row = {"workload": "W2", "adapter": name, "n": n, "repeat": r,
                   "per_s": n / wall, "split": [o["done"] for o in outs],
                   "errors": dict(errors), **verdict}
            rows.append(row)
            print(f"  W2 n={n} r={r} {name:<22} {row['per_s']:>8.0f}/s split {row['split']} "
                  f"lost {verdict['lost']} dup {verdict['duplicated']}"
                  + (f" errors {dict(errors)}" if errors else ""), flush=True)
            shutil.rmtree(work, ignore_errors=True)
    return rows


# -- W3 ----------------------------------------------------------------------------------


def w3(n: int, trials: int, kills: int, seed: int, tmp: Path) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for name in W3_ADAPTERS:
        for mode in W3_MODES:
            for t in range(trials):
                work = Path(tempfile.mkdtemp(dir=tmp))
                log = work / "effects.log"
                child({"adapter": name, "dir": str(work), "phase": "enqueue", "n": n})
                base = {"adapter": name, "dir": str(work), "phase": "work", "log": str(log),
                        "recover_wait": LEASE_S + 0.5}
                fired = 0
                for k in range(kills):
                    spec = {**base, "worker": f"w{k}"}
                    if mode != "random":
                        last = max(1, n // (2 * kills))
                        spec.update(kill_at=mode, kill_after=rng.randint(1, last))
                    proc = subprocess.Popen(
                        [sys.executable, str(HERE / "child.py"), json.dumps(spec)],
                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT)
                    if mode == "random":
                        # The child says "working" once its queue is open; the kill lands at a
                        # random moment in the first ~100 jobs, wherever in a job that is.
                        assert proc.stdout is not None
                        proc.stdout.readline()
                        time.sleep(rng.uniform(0.0, 0.04))
                        if proc.poll() is None:
                            proc.send_signal(signal.SIGKILL)
                    proc.wait(timeout=300)
                    fired += proc.returncode == -signal.SIGKILL
                final = child({**base, "worker": "final"})
                verdict = judge(effects(name, work, log), n)
                row = {"workload": "W3", "adapter": name, "mode": mode, "trial": t, "n": n,
                       "kills_planned": kills, "kills_fired": fired, **verdict,
                       "final_errors": final["errors"]}
                rows.append(row)
                print(f"  W3 {name:<16} {mode:<14} t={t} kills {fired}/{kills} "
                      f"lost {verdict['lost']} dup {verdict['duplicated']}", flush=True)
                shutil.rmtree(work, ignore_errors=True)
    return rows


# -- report ------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = {}
    for dist in ("huey", "persist-queue", "litequeue", "labkit"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = "not installed"
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=ROOT).stdout.strip()
    return {
        "cpu": cpu, "cores": os.cpu_count(), "platform": platform.platform(),
        "python": platform.python_version(), "sqlite": sqlite3.sqlite_version,
        "versions": versions, "labkit_commit": commit,
        "loadavg_start": os.getloadavg(),
    }


def summarize(results: dict[str, Any]) -> str:
    """Markdown tables: medians per row and the target ratios, all from this run."""
    out = []
    w1_rows = [r for r in results["rows"] if r["workload"] == "W1"]
    med: dict[tuple[str, int], dict[str, float]] = {}
    keys = sorted({(r["adapter"], r["n"]) for r in w1_rows},
                  key=lambda k: (k[1], W1_ADAPTERS.index(k[0])))
    for name, n in keys:
        rs = [r for r in w1_rows if r["adapter"] == name and r["n"] == n]
        med[(name, n)] = {
            "enq": statistics.median(r["enqueue_per_s"] for r in rs),
            "proc": statistics.median(r["process_per_s"] for r in rs),
            "rss": max((r["peak_rss_mb"] or 0.0) for r in rs),
            "reps": len(rs),
            "partial": any(r["partial"] for r in rs),
            "bad": sum(r.get("lost", 0) + r.get("duplicated", 0) for r in rs),
        }
    if med:
        out.append("### W1 durable round trip (medians; jobs/s)\n")
        out.append("| N | queue | repeats | enqueue/s | process/s | peak RSS MB | lost+dup |")
        out.append("|---:|---|---:|---:|---:|---:|---:|")
        for (name, n), m in med.items():
            out.append(f"| {n:,} | {ADAPTERS[name].name} | {m['reps']} | {m['enq']:,.0f} | "
                       f"{m['proc']:,.0f}{' (partial)' if m['partial'] else ''} | "
                       f"{m['rss']:.0f} | {m['bad']} |".replace("| 0 | 0 |", "| - | - |"))
        out.append("\n### Targets (ratios of medians within this run)\n")
        out.append("*best peer* is the fastest of huey, persist-queue, litequeue; *best acking "
                   "peer* leaves out huey (which deletes at dequeue and never acknowledges).\n")
        out.append("| N | labkit / raw NORMAL | labkit / best peer | labkit / best acking peer "
                   "| claim_many + complete / raw batched "
                   "| claim_many + complete_many / raw batched |")
        out.append("|---:|---:|---:|---:|---:|---:|")
        sizes = sorted({n for _, n in med})
        for n in sizes:
            def p(name: str, n: int = n) -> float:
                return med.get((name, n), {}).get("proc", float("nan"))
            peer = max(p("huey"), p("persistqueue"), p("litequeue"))
            acking = max(p("persistqueue"), p("litequeue"))
            out.append(
                f"| {n:,} | {p('labkit') / p('raw_normal'):.2f} | {p('labkit') / peer:.2f} | "
                f"{p('labkit') / acking:.2f} | {p('labkit_many') / p('raw_batched'):.2f} | "
                f"{p('labkit_batch') / p('raw_batched'):.2f} |")
        if 2_000 in sizes and 100_000 in sizes:
            for name in ("labkit", "labkit_batch"):
                if (name, 2_000) not in med or (name, 100_000) not in med:
                    continue
                a, b = med[(name, 2_000)]["proc"], med[(name, 100_000)]["proc"]
                out.append(f"\n{ADAPTERS[name].name}: process rate at N=100,000 is "
                           f"{100 * (b / a - 1):+.0f}% of N=2,000 (target within ±20%).")
    w2_rows = [r for r in results["rows"] if r["workload"] == "W2"]
    if w2_rows:
        out.append("\n### W2 two worker processes, one file\n")
        out.append("| queue | repeats | jobs/s (median) | lost (total) | duplicated (total) "
                   "| errors |")
        out.append("|---|---:|---:|---:|---:|---|")
        for name in W2_ADAPTERS:
            rs = [r for r in w2_rows if r["adapter"] == name]
            if not rs:
                continue
            errs: Counter[str] = Counter()
            for r in rs:
                errs.update(r["errors"])
            out.append(f"| {ADAPTERS[name].name} | {len(rs)} | "
                       f"{statistics.median(r['per_s'] for r in rs):,.0f} | "
                       f"{sum(r['lost'] for r in rs)} | {sum(r['duplicated'] for r in rs)} | "
                       f"{sum(errs.values())} |")
    w3_rows = [r for r in results["rows"] if r["workload"] == "W3"]
    if w3_rows:
        out.append("\n### W3 kill -9 and restart (totals over all trials)\n")
        out.append("| queue | kill point | trials | kills fired | lost | duplicated |")
        out.append("|---|---|---:|---:|---:|---:|")
        for name in W3_ADAPTERS:
            for mode in W3_MODES:
                rs = [r for r in w3_rows if r["adapter"] == name and r["mode"] == mode]
                if rs:
                    fired = sum(r["kills_fired"] for r in rs)
                    planned = sum(r["kills_planned"] for r in rs)
                    out.append(
                        f"| {ADAPTERS[name].name} | {mode} | {len(rs)} | {fired}/{planned} | "
                        f"{sum(r['lost'] for r in rs)} | {sum(r['duplicated'] for r in rs)} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a smoke run: small N, 1 repeat (~1 min)")
    ap.add_argument("--only", default="W1,W2,W3", help="comma list of workloads to run")
    ap.add_argument("--repeats", type=int, default=5, help="repeats at N=2,000 and 10,000")
    ap.add_argument("--big-repeats", type=int, default=3,
                    help="repeats at N=100,000 for rows no target is judged on")
    ap.add_argument("--budget", type=float, default=15.0,
                    help="seconds a W1 worker may run before it stops and reports a partial rate")
    ap.add_argument("--seed", type=int, default=7, help="seed for W3 kill points")
    ap.add_argument("--out", default=None, help="write raw results JSON here")
    ap.add_argument("--sizes", default=None, help="W1 sizes, e.g. 2000,10000")
    ap.add_argument("--adapters", default=None,
                    help="W1 rows to run (default: all): " + ",".join(W1_ADAPTERS))
    ap.add_argument("--summarize", default=None, metavar="RESULTS_JSON",
                    help="print the tables of an earlier run's JSON and exit")
    args = ap.parse_args(argv)
    if args.summarize:
        print(summarize(json.loads(Path(args.summarize).read_text())))
        return 0
    only = {w.strip().upper() for w in args.only.split(",")}
    if args.quick:
        sizes, repeats, big, w2n, w2r, w3n, w3t, kills = [500, 2_000], 1, 1, 1_000, 1, 200, 1, 2
    else:
        sizes, repeats, big, w2n, w2r, w3n, w3t, kills = (
            [2_000, 10_000, 100_000], args.repeats, args.big_repeats, 10_000, 5, 500, 3, 3)
    if args.sizes:
        sizes = [int(x) for x in args.sizes.split(",")]
    adapters = args.adapters.split(",") if args.adapters else W1_ADAPTERS
    info = machine()
    print(f"machine: {info['cpu']} x{info['cores']}, {info['platform']}, Python "
          f"{info['python']}, SQLite {info['sqlite']}")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in info["versions"].items())
          + f"; labkit commit {info['labkit_commit']}; load average {info['loadavg_start']}")
    given = sys.argv[1:] if argv is None else argv
    if "--seed" not in given:
        given = [*given, "--seed", str(args.seed)]
    print("replay: python bench/run.py " + " ".join(given))
    results: dict[str, Any] = {"machine": info, "args": vars(args), "rows": []}
    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="labkit-bench-"))
    try:
        if "W1" in only:
            print("W1 durable round trip")
            results["rows"] += w1(sizes, repeats, big, args.budget, tmp, adapters)
        if "W2" in only:
            print("W2 two workers")
            results["rows"] += w2(w2n, w2r, tmp)
        if "W3" in only:
            print(f"W3 kill -9 (seed {args.seed})")
            results["rows"] += w3(w3n, w3t, kills, args.seed, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    results["wall_s"] = time.perf_counter() - started
    results["machine"]["loadavg_end"] = os.getloadavg()
    if args.out:  # the raw rows first: a bug in the tables must not cost the run
        Path(args.out).write_text(json.dumps(results, indent=1))
    text = summarize(results)
    print()
    print(text)
    print(f"\nwall time {results['wall_s']:.0f}s; load average (1/5/15 min) at start "
          f"{info['loadavg_start']}, at end {info['loadavg_end']}")
    if args.out:
        Path(args.out).with_suffix(".md").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
