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
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from bench import pg, streams  # noqa: E402
from bench.adapters import ADAPTERS, LEASE_S  # noqa: E402
from bench.report import machine, results_md, summarize  # noqa: E402

SUBJECTS = {**ADAPTERS, **pg.PG_ADAPTERS, **streams.STREAM_ADAPTERS}
STREAMS = ["streams_labkit", "streams_raw"]
SQLITE_W1 = [
    "labkit", "labkit_many", "labkit_batch",
    "raw_normal", "raw_full", "raw_batched", "huey", "persistqueue", "litequeue",
]
PG_W1 = ["pg_labkit", "pg_labkit_batch", "pg_raw", "pg_raw_batched", "procrastinate", "pgqueuer"]
W1_ADAPTERS = SQLITE_W1 + PG_W1 + STREAMS
#: Rows the targets are judged on get the full repeat count at N=100,000; at that size
#: the PostgreSQL rows no target names are left out (their enqueue alone takes minutes).
W1_KEY = {"labkit", "labkit_batch", "raw_normal", "raw_batched", "pg_labkit", "pg_labkit_batch",
          "pg_raw", "pg_raw_batched", *STREAMS}
W1_SKIP_BIG = {"procrastinate", "pgqueuer"}
W2_ADAPTERS = ["labkit", "labkit_ledger", "raw_normal", "huey", "persistqueue", "litequeue"]
PG_W2 = ["pg_labkit", "pg_labkit_batch", "pg_labkit_ledger", "pg_raw", "pg_raw_batched",
         "procrastinate", "pgqueuer"]
W3_ADAPTERS = ["labkit_ledger", "labkit", "raw_normal", "huey", "persistqueue", "litequeue"]
PG_W3 = ["pg_labkit_ledger", "pg_labkit", "pg_raw", "procrastinate", "pgqueuer"]
W3_MODES = ["before_effect", "after_effect", "random"]
#: Worker processes in W2: two on one SQLite file, four on PostgreSQL and on Redis.
W2_WORKERS = {"sqlite": 2, "postgres": 4, "redis": 4}


def is_pg(name: str) -> bool:
    return name in pg.PG_ADAPTERS


def engine(name: str) -> str:
    return "postgres" if is_pg(name) else "redis" if name in STREAMS else "sqlite"


def cleanup(name: str, work: Path) -> None:
    """Remove one measurement's files, and its PostgreSQL schema if it had one."""
    if is_pg(name):
        pg.drop(work)
    elif name in STREAMS:
        streams.drop(work)
    shutil.rmtree(work, ignore_errors=True)


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
    if adapter == "pg_labkit_ledger":
        return Counter(pg.ledger_effects(workdir))
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
                if r >= wanted or (n >= 100_000 and name in W1_SKIP_BIG):
                    continue
                work = Path(tempfile.mkdtemp(dir=tmp))
                log = work / "effects.log"
                # PostgreSQL commits cost ~1 ms each on a shared machine: past 2,000 jobs
                # the queue is filled in batches, and only N=2,000 measures enqueue.
                phase = "fill" if is_pg(name) and n > 2_000 else "enqueue"
                enq = child({"adapter": name, "dir": str(work), "phase": phase, "n": n})
                done = child({"adapter": name, "dir": str(work), "phase": "work",
                              "log": str(log), "budget_s": budget_s})
                seen = effects(name, work, log)
                row = {
                    "workload": "W1", "adapter": name, "n": n, "repeat": r,
                    "enqueue_per_s": n / enq["elapsed"], "enqueue_phase": phase,
                    # Up to the last effect: a worker's shutdown is not throughput.
                    "process_per_s": done["done"] / (done["t_last"] - done["t_start"]),
                    "exit_s": done["t_end"] - done["t_last"],
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
                cleanup(name, work)
    return rows


# -- W2 ----------------------------------------------------------------------------------


def w2(n: int, pg_n: int, repeats: int, tmp: Path, adapters: list[str]) -> list[dict]:
    rows = []
    for r in range(repeats):
        for name in adapters:
            workers = W2_WORKERS[engine(name)]
            work = Path(tempfile.mkdtemp(dir=tmp))
            log = work / "effects.log"
            size = pg_n if is_pg(name) else n
            # Enqueue is not what W2 measures: PostgreSQL queues are filled in batches.
            child({"adapter": name, "dir": str(work),
                   "phase": "fill" if is_pg(name) else "enqueue", "n": size})
            procs = [
                subprocess.Popen(
                    [sys.executable, str(HERE / "child.py"), json.dumps(
                        {"adapter": name, "dir": str(work), "phase": "work", "log": str(log),
                         "worker": f"w{k}"})],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
                for k in range(1, workers + 1)
            ]
            outs = []
            for proc in procs:
                stdout, stderr = proc.communicate(timeout=900)
                if proc.returncode != 0:
                    raise RuntimeError(f"W2 {name} worker failed:\n{stderr[-2000:]}")
                outs.append(json.loads(stdout.strip().splitlines()[-1]))
            wall = max(o["t_last"] for o in outs) - min(o["t_start"] for o in outs)
            verdict = judge(effects(name, work, log), size)
            errors = Counter()
            for o in outs:
                errors.update(o["errors"])
            row = {"workload": "W2", "adapter": name, "n": size, "repeat": r,
                   "workers": workers, "per_s": size / wall, "split": [o["done"] for o in outs],
                   "errors": dict(errors), **verdict}
            rows.append(row)
            print(f"  W2 n={size} r={r} {name:<22} {row['per_s']:>8.0f}/s split {row['split']} "
                  f"lost {verdict['lost']} dup {verdict['duplicated']}"
                  + (f" errors {dict(errors)}" if errors else ""), flush=True)
            cleanup(name, work)
    return rows


# -- W3 ----------------------------------------------------------------------------------


def w3(
    n: int, trials: int, kills: int, seed: int, tmp: Path, adapters: list[str]
) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for name in adapters:
        for mode in W3_MODES:
            for t in range(trials):
                work = Path(tempfile.mkdtemp(dir=tmp))
                log = work / "effects.log"
                child({"adapter": name, "dir": str(work),
                       "phase": "fill" if is_pg(name) else "enqueue", "n": n})
                base = {"adapter": name, "dir": str(work), "phase": "work", "log": str(log),
                        "recover_wait": pg.RECOVER_WAIT_S.get(name, LEASE_S + 0.5)}
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
                        # The child says "first effect" at its first job; the kill lands at a
                        # random moment in the next ~40 ms, wherever in a job that is.
                        assert proc.stdout is not None
                        while (line := proc.stdout.readline()) and "first effect" not in line:
                            pass
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
                cleanup(name, work)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a smoke run: small N, 1 repeat (~1 min)")
    ap.add_argument("--only", default="W1,W2,W3", help="comma list of workloads to run")
    # Medians of 3, as the measurements; the whole run takes ~45 min on 2 cores.
    ap.add_argument("--repeats", type=int, default=3,
                    help="repeats at N=2,000 and 10,000, and at 100,000 for the rows targets name")
    ap.add_argument("--big-repeats", type=int, default=1,
                    help="repeats at N=100,000 for rows no target is judged on")
    ap.add_argument("--budget", type=float, default=15.0,
                    help="seconds a W1 worker may run before it stops and reports a partial rate")
    ap.add_argument("--seed", type=int, default=7, help="seed for W3 kill points")
    ap.add_argument("--out", default=None, help="write raw results JSON here")
    ap.add_argument("--results", default=None, metavar="RESULTS_MD",
                    help="write the run's RESULTS.md here (make bench: bench/RESULTS.md)")
    ap.add_argument("--engines", default="sqlite,postgres,redis",
                    help="which subjects run: sqlite, postgres, redis (comma list)")
    ap.add_argument("--w2-repeats", type=int, default=None, help="W2 repeats (default 3)")
    ap.add_argument("--w2-n", type=int, default=None, help="W2 jobs on SQLite (10,000)")
    ap.add_argument("--pg-w2-n", type=int, default=None, help="W2 jobs on PostgreSQL (10,000)")
    ap.add_argument("--w3-n", type=int, default=None, help="W3 jobs per trial (500)")
    ap.add_argument("--w3-trials", type=int, default=None, help="W3 trials per kill point (3)")
    ap.add_argument("--sizes", default=None, help="W1 sizes, e.g. 2000,10000")
    ap.add_argument("--adapters", default=None,
                    help="subjects to run in every workload (default: all): "
                    + ",".join(SUBJECTS))
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
            [2_000, 10_000, 100_000], args.repeats, args.big_repeats, 10_000, 3, 500, 3, 3)
    if args.sizes:
        sizes = [int(x) for x in args.sizes.split(",")]
    w2r = args.w2_repeats if args.w2_repeats is not None else w2r
    w2n = args.w2_n if args.w2_n is not None else w2n
    pg_w2n = args.pg_w2_n if args.pg_w2_n is not None else w2n
    w3n = args.w3_n if args.w3_n is not None else w3n
    w3t = args.w3_trials if args.w3_trials is not None else w3t
    engines = {e.strip() for e in args.engines.split(",")}
    unknown = engines - {"sqlite", "postgres", "redis"}
    if unknown:
        ap.error(f"--engines takes sqlite, postgres, redis, not {', '.join(sorted(unknown))}")

    def pick(names: list[str]) -> list[str]:
        return [n for n in names if engine(n) in engines]

    chosen = set(args.adapters.split(",")) if args.adapters else None
    adapters = pick([n for n in W1_ADAPTERS if chosen is None or n in chosen])

    def pick_w(names: list[str]) -> list[str]:
        return [n for n in pick(names) if chosen is None or n in chosen]

    info = machine()
    print(f"machine: {info['cpu']} x{info['cores']}, {info['platform']}, Python "
          f"{info['python']}, SQLite {info['sqlite']}, PostgreSQL {info['postgres']}")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in info["versions"].items())
          + f"; labkit commit {info['labkit_commit']}; load average {info['loadavg_start']}")
    given = sys.argv[1:] if argv is None else argv
    if "--seed" not in given:
        given = [*given, "--seed", str(args.seed)]
    command = "python bench/run.py " + " ".join(given)
    print("replay: " + command)
    results: dict[str, Any] = {"machine": info, "args": vars(args), "rows": []}
    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="labkit-bench-"))
    try:
        if "W1" in only:
            print("W1 durable round trip")
            results["rows"] += w1(sizes, repeats, big, args.budget, tmp, adapters)
        if "W2" in only:
            print("W2 several workers (2 on SQLite, 4 on PostgreSQL and on Redis)")
            results["rows"] += w2(w2n, pg_w2n, w2r, tmp, pick_w(W2_ADAPTERS + PG_W2 + STREAMS))
        if "W3" in only:
            print(f"W3 kill -9 (seed {args.seed})")
            subjects = pick_w(W3_ADAPTERS + PG_W3 + STREAMS)
            results["rows"] += w3(w3n, w3t, kills, args.seed, tmp, subjects)
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
    if args.out and not args.results:
        # With --results the tables are in RESULTS.md already (and results.md beside
        # RESULTS.md would be one file on a case-insensitive file system).
        Path(args.out).with_suffix(".md").write_text(text + "\n")
    if args.results:
        Path(args.results).write_text(results_md(results, command, text))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
