"""What exercise 13's checks share: ``CHECKS``, on which ``capped_checks`` and
``serial_checks`` register; the two claims called through the harness; the rules a
claim must follow (``expected_capped``, ``expected_serial``) and the scenes generated
from them; ties, and jobs each claimed once."""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from labkit.grading.checks import CheckFailed, Checks, Namespace, expect
from labkit.grading.exercises.helpers import (
    raised_text,
)
from labkit.grading.exercises.kit import lab_file
from labkit.grading.exercises.labdb import add_job, all_jobs
from labkit.lang import _

CHECKS = Checks(
    "ex13", "a queue per account, and serial queues", needs=("claim_capped", "claim_serial")
)

HARNESS = "labkit.grading.exercises.ex13.harness:"
#: How long a plain read pauses in the race checks: long enough for the other worker.
RACE_PAUSE_S = 0.05
NOW = 100.0


def claim(
    ns: Namespace,
    path: Path,
    name: str,
    worker: str,
    now: float = NOW,
    *extra: Any,
    lease_s: float = 30.0,
    scaled: list[int] | None = None,
) -> dict[str, Any] | None:
    """The student's claim through the harness; the row as a dict, or None.

    Given ``scaled``, every LIMIT above ``harness.SCALED_LIMIT`` rows runs scaled down to
    it (``harness.claim_limits_scaled``), and the LIMIT values so changed join ``scaled``.
    """
    how = "claim" if scaled is None else "claim_limits_scaled"
    got = ns.harness(HARNESS + how, str(path), name, worker, now, lease_s, *extra)
    if scaled is not None:
        scaled.extend(int(n) for n in got.get("scaled", []))
    call = f"{name}({worker!r}, now={now:g}{''.join(f', {e!r}' for e in extra)})"
    if "raised" in got:
        raise CheckFailed(
            _("{call} to return a job or None").format(call=call),
            raised_text(got),
            _("try {name} on exercise_db(...) in the notebook and read the error").format(
                name=name
            ),
        )
    row = got["returned"]
    if row is not None and not (isinstance(row, dict) and "id" in row):
        raise CheckFailed(
            _("{call} to return dict(row) or None").format(call=call), repr(row), "return dict(row)"
        )
    return row


def capped(ns: Namespace, path: Path, worker: str, cap: int, now: float = NOW) -> Any:
    return claim(ns, path, "claim_capped", worker, now, cap)


def serial(ns: Namespace, path: Path, worker: str, now: float = NOW) -> Any:
    return claim(ns, path, "claim_serial", worker, now)


def job(conn: sqlite3.Connection, job_id: int) -> dict[str, Any]:
    return next(j for j in all_jobs(conn) if j["id"] == job_id)


def running(conn: sqlite3.Connection, queue: str, now: float = NOW) -> int:
    return sum(
        1
        for j in all_jobs(conn)
        if j["queue"] == queue and j["state"] == "running" and j["lease_until"] > now
    )


def live(queue: str, n: int = 1, **fields: Any) -> dict[str, Any]:
    """A job of ``queue`` running under a lease that ends long after NOW."""
    return {
        "queue": queue,
        "state": "running",
        "attempt": 1,
        "lease_owner": "other",
        "lease_until": NOW + 500,
        "lease_token": f"t{queue}{n}",
        **fields,
    }


def _id(row: dict[str, Any] | None) -> Any:
    return None if row is None else row["id"]


def _ready(job: dict[str, Any], now: float) -> bool:
    if job["state"] in ("pending", "retry_wait"):
        return bool(job["run_after"] <= now)
    return bool(job["state"] == "running" and job["lease_until"] <= now)


def expected_capped(jobs: list[dict[str, Any]], now: float, cap: int) -> int | None:
    """The check's own model of ``claim_capped``: the id it must take, or None."""
    busy = Counter(j["queue"] for j in jobs if j["state"] == "running" and j["lease_until"] > now)
    ready = [j for j in jobs if _ready(j, now) and busy[j["queue"]] < cap]
    ready.sort(key=lambda j: (busy[j["queue"]], j["run_after"], j["id"]))
    return ready[0]["id"] if ready else None


def expected_serial(jobs: list[dict[str, Any]], now: float) -> int | None:
    """The check's own model of ``claim_serial``: the id it must take, or None."""
    heads: dict[str, dict[str, Any]] = {}
    for j in sorted(jobs, key=lambda j: j["id"]):
        if j["state"] in ("pending", "retry_wait", "running"):
            heads.setdefault(j["queue"], j)
    ready = sorted(
        (j for j in heads.values() if _ready(j, now)), key=lambda j: (j["run_after"], j["id"])
    )
    return ready[0]["id"] if ready else None


@st.composite
def scenes(draw: Any) -> list[dict[str, Any]]:
    """Up to 9 jobs over three queues, in every state, with times around NOW (100)."""
    jobs = []
    for n in range(draw(st.integers(1, 9))):
        state = draw(st.sampled_from(["pending", "retry_wait", "running", "succeeded", "dead"]))
        job: dict[str, Any] = {
            "key": f"job:{n}",
            "queue": draw(st.sampled_from(["acme", "bolt", "cora"])),
            "state": state,
            "attempt": 0 if state == "pending" else 1,
            "run_after": draw(st.sampled_from([0.0, 50.0, NOW, 150.0])),
        }
        if state == "running":
            job.update(
                lease_owner="other",
                lease_token=f"t{n}",
                lease_until=draw(st.sampled_from([50.0, NOW, 130.0])),
            )
        jobs.append(job)
    return jobs


#: The lease a failed run leaves on a job in retry_wait: it ended long before now.
OLD_LEASE = {"lease_owner": "w0", "lease_until": 50.0, "lease_token": "old"}


def _retry_and_new_job_tied(retry_first: bool = True) -> list[dict[str, Any]]:
    """acme's job in retry_wait (its run failed at 95) and bolt's new job, both due at 50:
    the retry saved first, or (``retry_first=False``) the new job."""
    retry = {"key": "job:0", "queue": "acme", "state": "retry_wait", "attempt": 1}
    jobs = [{**retry, "run_after": 50.0, "updated_at": 95.0}, *_due_together(("job:1", "bolt"))]
    return jobs if retry_first else jobs[::-1]


def _due_together(*jobs: tuple[str, str]) -> list[dict[str, Any]]:
    """Pending jobs (key, queue) all due at 50, saved in the order given."""
    return [
        {"key": key, "queue": queue, "state": "pending", "attempt": 0, "run_after": 50.0}
        for key, queue in jobs
    ]


def _scene_check(ns: Namespace, jobs: list[dict[str, Any]], name: str, *extra: Any) -> None:
    with lab_file(ns) as (conn, path):
        for entry in jobs:
            add_job(conn, entry["key"], **{k: v for k, v in entry.items() if k != "key"})
        stored = all_jobs(conn)
        want = (
            expected_capped(stored, NOW, *extra)
            if name == "claim_capped"
            else expected_serial(stored, NOW)
        )
        got = _id(claim(ns, path, name, "w9", NOW, *extra))
        scene = "; ".join(
            f"{j['id']} {j['queue']} {j['state']} run_after={j['run_after']:g}"
            + (f" lease_until={j['lease_until']:g}" if j["lease_until"] is not None else "")
            + (f" updated_at={j['updated_at']:g}" if j["updated_at"] else "")
            for j in stored
        )
        what = f"cap={extra[0]}, " if extra else ""
        expect(
            got == want,
            (
                _("{name} at now=100 ({cap}jobs: {scene}) to take nothing")
                if want is None
                else _("{name} at now=100 ({cap}jobs: {scene}) to take job {job_id}")
            ).format(name=name, cap=what, scene=scene, job_id=want),
            _("nothing") if got is None else _("job {job_id}").format(job_id=got),
        )
        if want is not None:
            # The whole claim, whatever the job held before (a dead worker's lease, a
            # failed run's): w9's now, its attempt counted, a new lease and token.
            before, row = job_before(stored, want), job(conn, want)
            expect(
                row["state"] == "running"
                and row["lease_owner"] == "w9"
                and row["attempt"] == before["attempt"] + 1
                and row["lease_until"] == NOW + 30
                and row["updated_at"] == NOW
                and row["lease_token"] not in (None, before["lease_token"]),
                _(
                    "job {job_id} running for w9 in the table: attempt {attempt}, "
                    "lease_until 130, updated_at 100, a new lease_token"
                ).format(job_id=want, attempt=before["attempt"] + 1),
                ", ".join(
                    f"{k}={row[k]!r}"
                    for k in (
                        "state",
                        "lease_owner",
                        "attempt",
                        "lease_until",
                        "updated_at",
                        "lease_token",
                    )
                ),
                _(
                    "set state, attempt + 1, lease_owner, lease_until, a new lease_token and "
                    "updated_at on every claim, a job taken back from a dead worker included"
                ),
            )


def job_before(jobs: list[dict[str, Any]], job_id: int) -> dict[str, Any]:
    return next(j for j in jobs if j["id"] == job_id)


#: Idle accounts (or serial queues), each with one job due at 50, saved in this order.
#: Eleven of them, so that ids 10 and 11 sort before 2 as text.
TIED = ["mira", "Acme", "zeta_9", "bolt", "Çora", "delta%", "acme", "Yuki", "ñu", "Omega_1", "beta"]


def _tied_in_id_order(ns: Namespace, name: str, *extra: Any) -> None:
    """Jobs of eleven idle accounts (serial queues) due together, claimed one after
    another: by id, whatever the names (a Python set or dict of accounts breaks the tie in
    an order that changes with PYTHONHASHSEED) and numerically (ids 10 and 11 last)."""
    with lab_file(ns) as (conn, path):
        ids = [add_job(conn, f"{queue}:0", queue=queue, run_after=50.0) for queue in TIED]
        got = [_id(claim(ns, path, name, f"w{n}", NOW, *extra)) for n in range(len(ids))]
        expect(
            got == ids,
            _(
                "{name} at now=100, {count} times: jobs {job_ids} in id order (one job "
                "each of the idle accounts {names}, all due at 50)"
            ).format(name=name, count=len(ids), job_ids=ids, names=", ".join(TIED)),
            _("the claims took {got}").format(got=got),
            _(
                "break ties by id in the ORDER BY (run_after, id), never by the order of a "
                "Python set or dict of accounts"
            ),
        )


def expect_each_job_once(got: dict[str, Any]) -> None:
    """No job was handed to both racing workers (a SELECT, then an UPDATE by id)."""
    claimed = {
        index: list(value) for index, (kind, value) in got["results"].items() if kind != "raised"
    }
    ids = [job_id for value in claimed.values() for job_id in value]
    twice = sorted({job_id for job_id in ids if ids.count(job_id) > 1})
    expect(
        not twice,
        _("each job claimed by one worker only (choose and take in one statement)"),
        _("both workers got job(s) {ids}: two holders (the workers claimed {claimed})").format(
            ids=twice, claimed=claimed
        ),
    )
