"""Exercise 13: a queue per account with a concurrency cap, and a serial queue per key.

The student writes ``claim_capped`` and ``claim_serial`` on the exercise jobs table
(``queue`` holds the account or the serial key). Each check builds the table in a file
under the student's folder, runs the claims through the harness
(``labkit.grading.exercises.ex13.harness``, one new connection per claim, as a worker opens it)
and reads the table back itself. The flood check plays three workers against a
flooding account on a simulated clock, completing jobs itself, and measures from the
table how long the other accounts waited. The race checks run two real processes
whose plain reads pause, so a claim that counts and takes in two statements passes
the cap, or runs two jobs of one serial key, every time instead of once in a while.
One check makes several claims on one connection, as a long-lived worker does, so a
transaction a claim leaves open shows. The module is long (about 520 lines) because
exercise 13 is two policies, each checked alone, in a flood and in a race.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path
from random import Random
from typing import Any

from hypothesis import strategies as st

from labkit.grading.checks import CheckFailed, Checks, Namespace, expect
from labkit.grading.exercises.helpers import (
    expect_left_as_given,
    holds_for,
    raised_error,
    raised_text,
)
from labkit.grading.exercises.killsweep import scene_seeds
from labkit.grading.exercises.kit import lab_file, reading
from labkit.grading.exercises.labdb import add_job, all_jobs, lab_db
from labkit.grading.exercises.racesweep import after_every_schedule
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


@CHECKS.add(
    1,
    "claim like exercise 3: state='running', attempt + 1, lease_owner, lease_until = "
    "now + lease_s, a fresh lease_token, updated_at = now; return dict(row), or None",
)
def capped_claim_leases_a_job(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        job_id = add_job(conn, "acme:1", queue="acme")
        got = capped(ns, path, "w1", 2)
        expect(_id(got) == job_id, _("job {job_id}, the only ready one").format(job_id=job_id), got)
        stored = job(conn, job_id)
        expect(
            stored["state"] == "running"
            and stored["lease_owner"] == "w1"
            and stored["lease_until"] == NOW + 30
            and stored["attempt"] == 1
            and bool(stored["lease_token"])
            and stored["updated_at"] == NOW,
            "running, lease_owner w1, lease_until 130, attempt 1, a token, updated_at 100",
            {
                k: stored[k]
                for k in (
                    "state",
                    "lease_owner",
                    "lease_until",
                    "attempt",
                    "lease_token",
                    "updated_at",
                )
            },
        )
        expect(capped(ns, path, "w2", 2) is None, "None: nothing else is ready", _("a job"))


@CHECKS.add(
    2,
    "lease_until = now + lease_s with the lease_s the caller passes, in both claims (no "
    "30 written in the code, no ceiling of an hour): a lease shorter than the worker asked "
    "for ends while it still runs the job, and another worker takes it too",
    severe=True,
)
def lease_lasts_the_lease_s_given(ns: Namespace) -> None:
    for seed in scene_seeds():
        _lease_as_given(ns, Random(seed))


def _lease_as_given(ns: Namespace, rng: Random) -> None:
    # A short lease with a fraction of a second in it, a long whole one, and one of weeks
    # (a quarterly export): a ceiling of the claim's own (min(lease_s, 3600), a day, a
    # week) cuts it short.
    leases = (
        rng.randint(1, 99) + rng.choice([0.25, 0.5, 0.75]),
        float(rng.randint(31, 3600)),
        float(rng.randint(8, 90) * 86_400 + rng.randint(0, 86_399)),
    )
    for (name, extra), lease_s in (
        (call, lease) for call in (("claim_capped", (2,)), ("claim_serial", ())) for lease in leases
    ):
        now = NOW + rng.randint(0, 400) / 4
        with lab_file(ns) as (conn, path):
            job_id = add_job(conn, "acme:1", queue="acme")
            got = claim(ns, path, name, "w1", now, *extra, lease_s=lease_s)
            expect(
                _id(got) == job_id,
                _("{name} to take job {job_id}, the only ready one").format(
                    name=name, job_id=job_id
                ),
                got,
            )
            stored = job(conn, job_id)
            # updated_at is capped_claim_leases_a_job's: a stale one misleads, loses nothing.
            expect(
                stored["lease_until"] == now + lease_s,
                _("{call}: lease_until {lease_until:g} in the table").format(
                    call=f"{name}(conn, 'w1', now={now:g}, lease_s={lease_s:g})",
                    lease_until=now + lease_s,
                ),
                f"lease_until={stored['lease_until']}",
                _(
                    "lease_until = :now + :lease_s with lease_s as the caller gives it, "
                    "however short or long: no floor or ceiling of your own"
                ),
            )


@CHECKS.add(
    2,
    "a worker claims again and again on ONE connection: every path through a claim, "
    "None included, leaves no transaction open (one UPDATE ... RETURNING in autocommit "
    "needs no BEGIN; with one, COMMIT or ROLLBACK before each return)",
)
def a_worker_claims_again_on_its_own_connection(ns: Namespace) -> None:
    for name, extra in (("claim_capped", [2]), ("claim_serial", [])):
        with lab_file(ns) as (conn, path):
            first = add_job(conn, "acme:1", queue="acme")
            later = add_job(
                conn, "bolt:1", queue="bolt", state="retry_wait", attempt=1, run_after=NOW + 10
            )
            calls = [["w1", now, 30.0, *extra] for now in (NOW, NOW, NOW + 10)]
            got = ns.harness(HARNESS + "on_one_connection", name, str(path), calls)
            said = "; ".join(
                _("raised {error}").format(error=raised_error(g))
                if "raised" in g
                else (
                    _("got None")
                    if g["returned"] is None
                    else _("got job {job_id}").format(job_id=_id(g["returned"]))
                )
                for g in got
            )
            states = {j["id"]: (j["state"], j["lease_owner"]) for j in all_jobs(conn)}
            expect(
                states == {first: ("running", "w1"), later: ("running", "w1")},
                _(
                    "{name} on one connection at now=100, 100 and 110: job {first}, None, then "
                    "job {later} (due at 110), both running for w1 in the table"
                ).format(name=name, first=first, later=later),
                _("the table holds {states} (the claims: {claims})").format(
                    states=states, claims=said
                ),
            )
            expect_left_as_given(
                got,
                name,
                _(
                    "leave conn.isolation_level alone, and end a BEGIN IMMEDIATE you send "
                    "with COMMIT or ROLLBACK before each return, None included"
                ),
            )


@CHECKS.add(
    2,
    "skip an account whose live running jobs (state='running' AND lease_until > now) "
    "already number cap; below the cap it may still run one more",
)
def cap_skips_a_busy_account(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        # The cap is the account's, whatever the kinds of its jobs (a sync, a report, an email).
        add_job(conn, "acme:r1", **live("acme", 1, kind="sync"))
        add_job(conn, "acme:r2", **live("acme", 2, kind="report"))
        waiting = add_job(conn, "acme:3", queue="acme")
        got = capped(ns, path, "w1", 2)
        expect(
            got is None,
            "None: acme already runs 2 jobs (a sync and a report) and the cap is 2",
            got,
            _("count all of the account's live running jobs, whatever their kind"),
        )
        got = capped(ns, path, "w1", 3)
        expect(
            _id(got) == waiting,
            _("job {job_id} with cap=3 (acme runs 2 < 3)").format(job_id=waiting),
            got,
        )
        expect(running(conn, "acme") == 3, "3 acme jobs running now", running(conn, "acme"))
    # The account's ready jobs need not be newer than the jobs it runs: a retry due
    # again and a job whose worker died (older ids) wait behind the cap as a new job
    # does (a count over the rows before each job, a window ORDER BY id, passes them).
    with lab_file(ns) as (conn, path):
        add_job(conn, "acme:1", queue="acme", state="retry_wait", attempt=1, run_after=NOW - 5)
        add_job(conn, "acme:2", **live("acme", 2, lease_until=NOW - 1))
        add_job(conn, "acme:r3", **live("acme", 3))
        add_job(conn, "acme:r4", **live("acme", 4))
        got = capped(ns, path, "w1", 2)
        expect(
            got is None,
            "None with cap=2: acme runs 2 jobs under live leases, so its retry due again "
            "and its job whose worker died (lease ended) wait too, whatever their ids",
            _("job {job_id} ({key}); acme now runs {running}").format(
                job_id=_id(got), key=(got or {}).get("key"), running=running(conn, "acme")
            ),
            _(
                "count every live running job of the account, older or newer than the job "
                "you take, and apply the cap to every ready job, dead workers' jobs included"
            ),
        )


@CHECKS.add(
    1,
    "a lease that ended at or before now does not count toward the cap (its worker "
    "died): count only lease_until > now",
)
def a_dead_workers_job_does_not_hold_the_cap(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        add_job(conn, "acme:r1", **live("acme", 1, lease_until=NOW))
        waiting = add_job(conn, "acme:2", queue="acme", run_after=-5.0)
        got = capped(ns, path, "w1", 1)
        expect(
            _id(got) == waiting,
            _("job {job_id}: acme's only running job has a lease that ended at now").format(
                job_id=waiting
            ),
            got,
        )


@CHECKS.add(
    2,
    "order by how busy the account is first (fewest live running jobs), then "
    "run_after, then id: an older job of a busier account waits",
)
def least_busy_account_first(ns: Namespace) -> None:
    _bolt_goes_first(
        ns,
        [None],
        [],
        _("bolt's job {job_id} (bolt runs 0 jobs, acme 1), though acme's is older"),
    )
    # Busier still is busier: 2 live jobs wait behind 1, not only behind 0.
    _bolt_goes_first(
        ns,
        [None, None],
        [None],
        _("bolt's job {job_id} (bolt runs 1 job, acme 2), though acme's is older"),
    )
    # Busy is the account's, whatever the kinds: acme runs a sync and a report, and its
    # waiting email is no less busy for them than bolt's, whose account runs one email.
    _bolt_goes_first(
        ns,
        ["sync", "report"],
        [None],
        _(
            "bolt's job {job_id} (bolt runs 1 job, acme 2: a sync and a report), though "
            "acme's email is older"
        ),
        _("count all of the account's live running jobs in the order, whatever their kind"),
    )


def _bolt_goes_first(
    ns: Namespace,
    acme: list[str | None],
    bolt: list[str | None],
    expected: str,
    *hint: str,
) -> None:
    """acme and bolt running live jobs of the kinds in ``acme`` and ``bolt`` (None: the
    default kind), then acme's job due at 0 and bolt's at 50: bolt is the less busy, so
    claim_capped takes bolt's job though acme's is older (``expected`` names it as
    ``{job_id}``)."""
    with lab_file(ns) as (conn, path):
        for queue, kinds in (("acme", acme), ("bolt", bolt)):
            for n, kind in enumerate(kinds, start=1):
                more = {} if kind is None else {"kind": kind}
                add_job(conn, f"{queue}:r{n}", **live(queue, n, **more))
        add_job(conn, f"acme:{len(acme) + 1}", queue="acme", run_after=0.0)
        bolt_id = add_job(conn, f"bolt:{len(bolt) + 1}", queue="bolt", run_after=50.0)
        got = capped(ns, path, "w1", 5)
        expect(_id(got) == bolt_id, expected.format(job_id=bolt_id), got, *hint)


def _flood(ns: Namespace, cap: int) -> dict[str, list[float]]:
    """Three workers, jobs of 1 s: acme floods with 30, then bolt and cora add 3 each.

    The check moves the clock and completes jobs itself; each job's wait is read from
    the table (the claim's updated_at minus when the job was added).
    """
    with lab_file(ns) as (conn, path):
        for account, count in (("acme", 30), ("bolt", 3), ("cora", 3)):
            for n in range(count):
                add_job(conn, f"{account}:{n}", queue=account)
        now, busy = 0.0, list[int]()
        waits: dict[str, list[float]] = {"acme": [], "bolt": [], "cora": []}
        for _n in range(60):
            for worker in range(3 - len(busy)):
                got = capped(ns, path, f"w{worker}", cap, now)
                if got is None:
                    break
                row = job(conn, got["id"])
                expect(
                    row["state"] == "running" and row["updated_at"] == now,
                    _("job {job_id} running since {now:g} in the table").format(
                        job_id=got["id"], now=now
                    ),
                    f"state={row['state']}, updated_at={row['updated_at']}",
                )
                waits[row["queue"]].append(now)
                busy.append(got["id"])
            if not busy:
                break
            now += 1.0
            conn.executemany(
                "UPDATE jobs SET state = 'succeeded', updated_at = ? WHERE id = ?",
                [(now, i) for i in busy],
            )
            busy.clear()
        done = Counter(j["queue"] for j in all_jobs(conn) if j["state"] == "succeeded")
        expect(
            done == {"acme": 30, "bolt": 3, "cora": 3},
            "every job to run (30 acme, 3 bolt, 3 cora)",
            dict(done),
        )
        return waits


@CHECKS.add(
    2,
    "with cap=2 and three workers, acme's flood holds two workers at most and the "
    "third takes turns between bolt and cora; skipping capped accounts is not enough "
    "without least-busy-first",
    timeout=40.0,
)
def a_flood_does_not_starve_the_others(ns: Namespace) -> None:
    waits = _flood(ns, 2)
    worst = max(waits["bolt"] + waits["cora"])
    expect(
        worst <= 2.0,
        "bolt's and cora's jobs all started within 2 s (each gets a worker in turn)",
        _("the last of them started after {worst:g} s; bolt at {bolt}, cora at {cora}").format(
            worst=worst, bolt=waits["bolt"], cora=waits["cora"]
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


@CHECKS.add(
    3,
    "two workers in two processes claim at once: count and take in ONE statement "
    "(UPDATE ... WHERE id = (SELECT ... count(*) ... < :cap ...)), or both read the "
    "same count and the account passes its cap",
    timeout=40.0,
    severe=True,
)
def the_cap_holds_when_two_processes_claim(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        # First in line, a job whose worker died: its state stays 'running', so an UPDATE
        # guarded by the state both workers read lets both take it.
        add_job(conn, "dora:0", **live("dora", 0, lease_until=NOW - 1))
        for account in ("acme", "bolt", "cora"):
            for n in range(4):
                add_job(conn, f"{account}:{n}", queue=account)
        got = ns.harness(
            HARNESS + "race", str(path), "claim_capped", 2, NOW, 30.0, [1], RACE_PAUSE_S
        )
        expect(
            got["hung"] == 0,
            "both workers to finish",
            _("{count} still running").format(count=got["hung"]),
        )
        raised = [v[1] for v in got["results"].values() if v[0] == "raised"]
        expect(
            not raised,
            "no worker to fail",
            _("your code raised {errors}").format(errors="; ".join(raised)),
        )
        counts = {a: running(conn, a) for a in ("acme", "bolt", "cora", "dora")}
        expect(
            counts == {"acme": 1, "bolt": 1, "cora": 1, "dora": 1},
            "one running job per account (cap=1) once both workers stop",
            counts,
        )
        expect_each_job_once(got)
    # The dead worker's job alone, with room under the cap (2): one worker takes it, the
    # other gets None, though the job's state is 'running' before and after the claim.
    with lab_file(ns) as (conn, path):
        orphan = add_job(conn, "dora:0", **live("dora", 0, lease_until=NOW - 1))
        got = ns.harness(
            HARNESS + "race", str(path), "claim_capped", 2, NOW, 30.0, [2], RACE_PAUSE_S
        )
        attempt = job(conn, orphan)["attempt"]
    expect_each_job_once(got)
    expect(
        attempt == 2,
        _("job {job_id} (its worker died at attempt 1) claimed once: attempt 2").format(
            job_id=orphan
        ),
        _("attempt {attempt}").format(attempt=attempt),
    )

    def make(folder: Path) -> None:
        conn = lab_db(folder / "jobs.db")
        for n in range(2):
            add_job(conn, f"acme:{n}", queue="acme")
        conn.close()

    def judge(folder: Path, run: dict[str, Any]) -> tuple[bool, str]:
        got = [run[w]["returned"] for w in ("first", "second")]
        with reading(folder / "jobs.db") as conn:
            busy = running(conn, "acme")
        ended = [run[w]["ended"] for w in ("first", "second")]
        ok = busy == 1 and sum(isinstance(row, dict) for row in got) == 1
        return ok, _("acme has {busy} running; the workers got {returned} ({ended})").format(
            busy=busy, returned=got, ended=ended
        )

    after_every_schedule(
        ns,
        HARNESS + "claim_schedules",
        make,
        ["claim_capped", NOW, 30.0, [1]],
        judge,
        _("exactly one of acme's two jobs claimed by two workers (cap=1)"),
        _(
            "count and take in one statement: a count read in one statement and a claim "
            "made in the next let the other worker pass the same count"
        ),
    )


@CHECKS.add(
    2,
    "on any table: skip accounts at their cap (live leases only), then least busy, "
    "run_after, id; a job whose lease ended at or before now is ready again",
    timeout=30.0,
)
def capped_claim_follows_the_rules_on_generated_tables(ns: Namespace) -> None:
    # Jobs not due yet, whatever their state: a pending job waits for its run_after too.
    not_due = [
        {"key": "job:0", "queue": "acme", "state": "pending", "attempt": 0, "run_after": 150.0},
        {"key": "job:1", "queue": "bolt", "state": "retry_wait", "attempt": 1, "run_after": 150.0},
    ]
    _scene_check(ns, not_due, "claim_capped", 1)
    # Two jobs due together whose keys sort the other way as text: the tie goes by id.
    _scene_check(ns, _due_together(("acme:9", "acme"), ("acme:10", "acme")), "claim_capped", 1)
    holds_for(
        st.tuples(scenes(), st.integers(1, 3)),
        lambda example: _scene_check(ns, example[0], "claim_capped", example[1]),
        examples=25,
    )
    # A retry due at 150 waits for its run_after, though the lease its failed run left
    # ended at 50: only a running job comes back when its lease ends.
    retry = {"key": "job:0", "queue": "bolt", "state": "retry_wait", "attempt": 1}
    _scene_check(ns, [{**retry, "run_after": 150.0, **OLD_LEASE}], "claim_capped", 1)
    # Two idle accounts' jobs due together: the smaller id, whatever the accounts' names,
    # backlogs or when each was last served (cora ran a job at 90, acme waits with two).
    served = {"state": "succeeded", "attempt": 1, "updated_at": 90.0}
    later = {"key": "acme:3", "queue": "acme", "state": "pending", "attempt": 0, "run_after": 150.0}
    tie = [{"key": "cora:0", "queue": "cora", "run_after": 0.0, **served}]
    tie += [*_due_together(("cora:1", "cora"), ("acme:2", "acme")), later]
    _scene_check(ns, tie, "claim_capped", 2)
    # A retry (its run failed at 95) and a new job due together, saved in either order: the
    # smaller id, whatever the attempt or when each was last touched (no tie-break of
    # attempt or updated_at: retries first or last).
    for retry_first in (True, False):
        _scene_check(ns, _retry_and_new_job_tied(retry_first), "claim_capped", 2)
    _tied_in_id_order(ns, "claim_capped", 2)


@CHECKS.add(
    2,
    "claim only each queue's head, its live job with the smallest id: while the head "
    "runs, the jobs behind it wait, then they go in order",
    severe=True,
)
def serial_runs_one_at_a_time_in_order(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        first, second, third = (add_job(conn, f"order:42:{n}", queue="order:42") for n in "abc")
        other = add_job(conn, "order:7:a", queue="order:7")
        got = [_id(serial(ns, path, w)) for w in ("w1", "w2", "w3")]
        expect(
            got == [first, other, None],
            _("[{first}, {other}, None]: each queue's head, then nothing (both heads run)").format(
                first=first, other=other
            ),
            got,
        )
        for done in (first, second):
            conn.execute("UPDATE jobs SET state = 'succeeded' WHERE id = ?", (done,))
            nxt = _id(serial(ns, path, "w1"))
            want = second if done == first else third
            expect(
                nxt == want,
                _("job {job_id} once job {done_id} succeeded").format(job_id=want, done_id=done),
                nxt,
            )


@CHECKS.add(
    2,
    "a head waiting in retry_wait, or pending but not due yet (run_after > now), is still "
    "the head: the jobs behind it wait, or they overtake it and run out of order",
    severe=True,
)
def a_waiting_head_blocks_its_queue(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        add_job(
            conn, "order:42:a", queue="order:42", state="retry_wait", attempt=1, run_after=NOW + 60
        )
        behind = add_job(conn, "order:42:b", queue="order:42")
        got = serial(ns, path, "w1")
        expect(got is None, "None: order:42's head retries at 160", got)
        got = serial(ns, path, "w1", NOW + 60)
        if got is None:
            # A head due at exactly 160 taken only after it (run_after < now) is one
            # claim late, not out of order: serial_claim_follows_the_rules_on_generated_tables
            # says so. This check asks that the head goes first once it is taken.
            got = serial(ns, path, "w1", NOW + 61)
        expect(
            _id(got) != behind and got is not None,
            "the head itself once it is due (160), not the job behind it",
            got,
        )
    # A head pending, due later (scheduled for 150), and a job behind it due now: the
    # head is the smallest live id whatever its run_after, so the job behind waits.
    with lab_file(ns) as (conn, path):
        head = add_job(conn, "order:43:a", queue="order:43", run_after=NOW + 50)
        add_job(conn, "order:43:b", queue="order:43")
        # (Taken a second past its run_after: run_after < now, one claim late, is
        # serial_claim_follows_the_rules_on_generated_tables' business.)
        got = [_id(serial(ns, path, "w1")), _id(serial(ns, path, "w2", NOW + 51))]
        expect(
            got == [None, head],
            _(
                "None at {now:g}: order:43's head, pending, is due at {due:g} (the job "
                "behind it, due now, waits); then job {job_id}, the head, at {later:g}"
            ).format(now=NOW, due=NOW + 50, job_id=head, later=NOW + 51),
            _("the claims took {got}").format(got=got),
        )
    # However far off the head is (a retry a day away): a look-ahead window that leaves
    # such a head out lets the job behind it overtake.
    with lab_file(ns) as (conn, path):
        add_job(conn, "order:44:a", queue="order:44", state="retry_wait", attempt=2,
                run_after=NOW + 86_400)  # fmt: skip
        add_job(conn, "order:44:b", queue="order:44")
        got = serial(ns, path, "w1")
        expect(
            got is None,
            _("None: order:44's head retries a day later, at {due:g}").format(due=NOW + 86_400),
            got,
        )


@CHECKS.add(
    2,
    "on any table: the head is each queue's live job (pending, retry_wait, running) "
    "with the smallest id; take the ready head with the smallest run_after, then id",
    timeout=30.0,
)
def serial_claim_follows_the_rules_on_generated_tables(ns: Namespace) -> None:
    # Heads due at exactly now, whatever their state: run_after <= now is due.
    due_now = [
        {"key": "job:0", "queue": "acme", "state": "retry_wait", "attempt": 1, "run_after": NOW},
        {"key": "job:1", "queue": "acme", "state": "pending", "attempt": 0, "run_after": NOW},
    ]
    _scene_check(ns, due_now, "claim_serial")
    # A head in retry_wait due at 150 waits, though the lease its failed run left ended
    # at 50 (only a running job comes back when its lease ends), and so does its queue.
    waiting = {"key": "job:0", "queue": "acme", "state": "retry_wait", "attempt": 1}
    behind = {"key": "job:1", "queue": "acme", "state": "pending", "attempt": 0, "run_after": 0.0}
    _scene_check(ns, [{**waiting, "run_after": 150.0, **OLD_LEASE}, behind], "claim_serial")
    # Two heads due together whose keys (and queues) sort the other way as text: by id.
    heads = _due_together(("sync:9:a", "sync:9"), ("sync:10:a", "sync:10"))
    _scene_check(ns, heads, "claim_serial")
    # A retry's head and a new job's head due together, saved in either order: the smaller
    # id, whatever the attempt or the updated_at (the retry's run failed at 95).
    for retry_first in (True, False):
        _scene_check(ns, _retry_and_new_job_tied(retry_first), "claim_serial")
    holds_for(scenes(), lambda jobs: _scene_check(ns, jobs, "claim_serial"), examples=25)
    _tied_in_id_order(ns, "claim_serial")


@CHECKS.add(
    1,
    "succeeded and dead jobs are out of the line: a dead head stops blocking; a head "
    "whose lease ended (its worker died) is claimed again before the jobs behind it",
)
def dead_and_expired_heads(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        add_job(conn, "order:1:a", queue="order:1", state="dead", attempt=3)
        after_dead = add_job(conn, "order:1:b", queue="order:1")
        expired = add_job(conn, "order:2:a", **live("order:2", 1, lease_until=NOW))
        add_job(conn, "order:2:b", queue="order:2")
        got = sorted(_id(serial(ns, path, w)) or 0 for w in ("w1", "w2"))
        expect(
            got == sorted([after_dead, expired]),
            _("jobs {job_ids}: the job after the dead head, and the expired head again").format(
                job_ids=sorted([after_dead, expired])
            ),
            got,
        )
        # Taken back, the head is the new worker's, under a new lease, like any claim.
        row = job(conn, expired)
        taken = {k: row[k] for k in ("lease_owner", "lease_until", "attempt", "updated_at")}
        expect(
            row["lease_owner"] in ("w1", "w2")
            and row["lease_until"] == NOW + 30
            and row["attempt"] == 2
            and row["updated_at"] == NOW,
            _(
                "job {job_id}, taken back from the dead worker 'other': lease_owner w1 or w2 "
                "(the claim's worker), lease_until {until:g}, attempt 2, updated_at {now:g}"
            ).format(job_id=expired, until=NOW + 30, now=NOW),
            taken,
            _(
                "a claim sets lease_owner = :worker, lease_until = :now + :lease_s and "
                "updated_at = :now whatever the job held before, a job whose lease ended "
                "included"
            ),
        )
