"""Hidden checks for exercise 13: other caps, what counts as busy, and serial claims racing."""

from __future__ import annotations

from labkit.grading.exercises.kit import lab_file
from labkit.grading.exercises.ex13.checks import HARNESS, NOW, RACE_PAUSE_S, _id, capped, live, running
from labkit.grading.checks import Checks, Namespace, expect
from labkit.grading.exercises.labdb import add_job

CHECKS = Checks("ex13", hidden=True)


@CHECKS.add(
    1,
    "only running jobs under a live lease make an account busy: a job waiting in "
    "retry_wait does not, and the cap is whatever the caller passes",
)
def busy_means_running_now(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        for n in range(3):
            add_job(
                conn, f"acme:w{n}", queue="acme", state="retry_wait", attempt=1, run_after=NOW + 100
            )
        for n in range(3):
            add_job(conn, f"acme:r{n}", **live("acme", n))
        ready = add_job(conn, "acme:next", queue="acme")
        expect(capped(ns, path, "w1", 3) is None, "None with cap=3 (acme runs 3)", "a job")
        got = capped(ns, path, "w1", 4)
        expect(_id(got) == ready, f"job {ready} with cap=4 (3 running; retry_wait is idle)", got)


@CHECKS.add(
    2,
    "two workers in two processes claim serial heads at once: choose and take the "
    "head in one statement, or both take the same queue's jobs",
    timeout=40.0,
    severe=True,
)
def serial_heads_hold_when_two_processes_claim(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        for key in ("order:1", "order:2"):
            for n in range(3):
                add_job(conn, f"{key}:{n}", queue=key)
        got = ns.harness(
            HARNESS + "race", str(path), "claim_serial", 2, NOW, 30.0, [], RACE_PAUSE_S
        )
        raised = [v[1] for v in got["results"].values() if v[0] == "raised"]
        expect(
            not raised and got["hung"] == 0,
            "both workers to finish",
            "your code raised " + "; ".join(raised) if raised else f"{got['hung']} still running",
        )
        counts = {key: running(conn, key) for key in ("order:1", "order:2")}
        expect(counts == {"order:1": 1, "order:2": 1}, "one running job per serial key", counts)
