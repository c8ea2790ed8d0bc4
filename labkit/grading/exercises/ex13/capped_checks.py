"""Exercise 13's checks of ``claim_capped``: a lease as given, a cap per account that
skips a busy one, the least busy account first, no starvation under a flood, the cap
held when two processes claim, and the rules on generated tables."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from random import Random
from typing import Any

from hypothesis import strategies as st

from labkit.grading.checks import Namespace, expect
from labkit.grading.exercises.ex13.claims import (
    CHECKS,
    HARNESS,
    NOW,
    OLD_LEASE,
    RACE_PAUSE_S,
    _due_together,
    _id,
    _retry_and_new_job_tied,
    _scene_check,
    _tied_in_id_order,
    capped,
    claim,
    expect_each_job_once,
    job,
    live,
    running,
    scenes,
)
from labkit.grading.exercises.helpers import (
    expect_left_as_given,
    holds_for,
    raised_error,
)
from labkit.grading.exercises.killsweep import scene_seeds
from labkit.grading.exercises.kit import lab_file, reading
from labkit.grading.exercises.labdb import add_job, all_jobs, lab_db
from labkit.grading.exercises.racesweep import after_every_schedule
from labkit.lang import _


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
    severe=True,
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
