"""Hidden checks for exercise 3: real processes, and the order of the queue."""

from __future__ import annotations

from collections import Counter

from labkit.grading.exercises.kit import lab_file
from labkit.grading.exercises.ex03.checks import HARNESS, _claim
from labkit.grading.checks import Checks, Namespace, expect
from labkit.grading.exercises.labdb import add_job, all_jobs

CHECKS = Checks("ex03", hidden=True)
RETRIED = {str(i) for i in range(0, 30, 3)}


@CHECKS.add(2, "processes, not only threads, must never share a job", timeout=30.0, severe=True)
def no_double_claim_across_processes(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        _claim(ns, path, "probe", 0.0, 1.0)  # on an empty table: a stub says "not started yet"
        for i in range(30):  # every third job is a retry that is due again
            retried = {"state": "retry_wait", "attempt": 1, "run_after": 50.0} if i % 3 == 0 else {}
            add_job(conn, f"mail:{i}:send:v1", **retried)
        run = ns.harness(HARNESS + "claim_in_processes", str(path), 3)
        expect(
            run["hung"] == 0,
            "3 processes to claim 30 jobs within 20s",
            "a process never finished (does claim loop or wait when jobs are ready?)",
            "claim runs one UPDATE ... RETURNING and returns at once",
        )
        attempts = [
            j["attempt"] - (1 if j["key"].split(":")[1] in RETRIED else 0) for j in all_jobs(conn)
        ]
    results = run["results"]
    errors = [x for _, got in results for x in got if isinstance(x, str)]
    expect(not errors, "no errors in 3 claiming processes", "; ".join(errors[:2]))
    counts = Counter(x for _, got in results for x in got)
    doubled = sorted(j for j, n in counts.items() if n > 1)
    expect(
        not doubled and len(counts) == 30 and set(attempts) == {1},
        "30 jobs, each claimed once (attempt up by one on each in the table)",
        f"{len(counts)} claimed, jobs claimed twice: {doubled[:5]}",
    )


@CHECKS.add(1, "ORDER BY run_after, id: the job due first goes first")
def oldest_due_first(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        late = add_job(conn, "a:1:v1", run_after=50.0)
        early = add_job(conn, "a:2:v1", run_after=10.0)
        got = [(_claim(ns, path, "w1", 100.0, 30.0) or {}).get("id") for _ in range(2)]
    expect(got == [early, late], f"job {early} (due at 10) then job {late} (due at 50)", got)
