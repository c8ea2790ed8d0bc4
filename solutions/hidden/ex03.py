"""Hidden checks for exercise 3: real processes, and the order of the queue."""

from __future__ import annotations

import multiprocessing
import queue
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from labkit.grading.core import CheckFailed, Checks, Namespace, expect
from labkit.grading.labdb import add_job, connect, lab_db

CHECKS = Checks("ex03", hidden=True)


def _worker(claim: Any, path: str, name: str, out: Any) -> None:
    conn = connect(path)
    got = []
    try:
        for _ in range(100):
            row = claim(conn, name, 100.0, 30.0)
            if row is None:
                break
            got.append(dict(row)["id"])
    except Exception as exc:  # noqa: BLE001 - reported to the parent
        got.append(f"error: {type(exc).__name__}: {exc}")
    out.put((name, got))


@CHECKS.add(2, "processes, not only threads, must never share a job", timeout=30.0)
def no_double_claim_across_processes(ns: Namespace) -> None:
    claim = ns.claim
    ctx = multiprocessing.get_context("fork")
    with tempfile.TemporaryDirectory(prefix="labkit-ex03h-") as tmp:
        path = str(Path(tmp) / "jobs.db")
        conn = lab_db(path)
        claim(conn, "probe", 0.0, 1.0)  # on an empty table: a stub says "not started yet"
        for i in range(30):
            add_job(conn, f"mail:{i}:send:v1")
        conn.close()
        out = ctx.Queue()
        procs = [ctx.Process(target=_worker, args=(claim, path, f"p{i}", out)) for i in range(3)]
        for p in procs:
            p.start()
        try:
            results = [out.get(timeout=20) for _ in procs]
        except queue.Empty:
            raise CheckFailed(
                "3 processes to claim 30 jobs within 20s",
                "a process never finished (does claim loop or wait when jobs are ready?)",
                "claim runs one UPDATE ... RETURNING and returns at once",
            ) from None
        finally:
            # A student's loop must not outlive the check: grading exits with os._exit,
            # which would leave spinning children behind.
            for p in procs:
                p.join(1)
                if p.is_alive():
                    p.kill()
                    p.join(5)
    errors = [x for _, got in results for x in got if isinstance(x, str)]
    expect(not errors, "no errors in 3 claiming processes", "; ".join(errors[:2]))
    counts = Counter(x for _, got in results for x in got)
    doubled = sorted(j for j, n in counts.items() if n > 1)
    expect(
        not doubled and len(counts) == 30,
        "30 jobs, each claimed once",
        f"{len(counts)} claimed, jobs claimed twice: {doubled[:5]}",
    )


@CHECKS.add(1, "ORDER BY run_after, id: the job due first goes first")
def oldest_due_first(ns: Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="labkit-ex03h-") as tmp:
        conn = lab_db(Path(tmp) / "jobs.db")
        late = add_job(conn, "a:1:v1", run_after=50.0)
        early = add_job(conn, "a:2:v1", run_after=10.0)
        got = [dict(ns.claim(conn, "w1", 100.0, 30.0) or {}).get("id") for _ in range(2)]
        conn.close()
    expect(got == [early, late], f"job {early} (due at 10) then job {late} (due at 50)", got)
