"""Hidden checks for exercise 13: other caps, what counts as busy, serial claims racing,
a worker that lost a race taking the next job, backlogs of hundreds of jobs, dead workers'
leases in the order, keys out of order, a job claimed again (its attempt counted), tokens
that do not repeat, finished jobs with old leases, claims on two databases in one process,
the row a claim returns (its own, not one read back), now to the fraction of a second, the
old holder fenced off by the claim's own statement, a claim killed midway, and another
worker's take landing between a claim's read and its write."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from random import Random
from typing import Any

from labkit.grading.checks import Checks, Namespace, expect
from labkit.grading.exercises.ex13.claims import (
    HARNESS,
    NOW,
    RACE_PAUSE_S,
    _id,
    capped,
    claim,
    expect_each_job_once,
    expected_capped,
    job,
    live,
    running,
    serial,
)
from labkit.grading.exercises.ex13.harness import OLD_TOKEN, SCALED_LIMIT
from labkit.grading.exercises.helpers import raised_text
from labkit.grading.exercises.killsweep import after_every_kill, scene_seeds
from labkit.grading.exercises.kit import lab_file, reading
from labkit.grading.exercises.labdb import add_job, all_jobs, lab_db
from labkit.grading.exercises.racesweep import after_every_schedule
from labkit.grading.exercises.tokens import TOKEN_BITS, too_few_bits
from labkit.lang import _

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
        got = capped(ns, path, "w1", 4)
        expect(
            _id(got) == ready,
            _("job {job_id} with cap=4 (3 running; retry_wait is idle)").format(job_id=ready),
            got,
        )
    # Leases outlive their runs: a job that succeeded early keeps a lease_until still to
    # come, and so may a job whose run failed (in retry_wait). Neither runs: cora is idle.
    with lab_file(ns) as (conn, path):
        add_job(conn, "cora:done", **live("cora", 1, state="succeeded", lease_until=NOW + 20))
        add_job(
            conn,
            "cora:again",
            **live("cora", 2, state="retry_wait", run_after=NOW + 100, lease_until=NOW + 20),
        )
        ready = add_job(conn, "cora:next", queue="cora")
        got = capped(ns, path, "w1", 1)
        expect(
            _id(got) == ready,
            _(
                "job {job_id} with cap=1: cora runs nothing (its succeeded job and its job "
                "in retry_wait keep leases that end at {until:g}, but neither is running)"
            ).format(job_id=ready, until=NOW + 20),
            _("nothing") if got is None else _("job {job_id}").format(job_id=_id(got)),
            _(
                "count only running jobs (state = 'running' AND lease_until > :now): a lease "
                "left on a job that no longer runs holds nothing"
            ),
        )
    # The same leftovers in the order: cora, running nothing, goes before bolt, which runs
    # one job, though bolt's ready job is older (least busy counts running jobs only).
    with lab_file(ns) as (conn, path):
        add_job(conn, "cora:done", **live("cora", 1, state="succeeded", lease_until=NOW + 20))
        add_job(conn, "cora:failed", **live("cora", 2, state="dead", lease_until=NOW + 20))
        add_job(
            conn,
            "cora:again",
            **live("cora", 3, state="retry_wait", run_after=NOW + 100, lease_until=NOW + 20),
        )
        # bolt's running job: held by w1 itself, claimed by a clock running ahead.
        ahead = {"lease_owner": "w1", "run_after": NOW + 50, "updated_at": NOW + 50}
        add_job(conn, "bolt:r", **live("bolt", 1, **ahead))
        add_job(conn, "bolt:next", queue="bolt", run_after=10.0)
        ready = add_job(conn, "cora:next", queue="cora", run_after=90.0)
        got = capped(ns, path, "w1", 5)
        expect(
            _id(got) == ready,
            _(
                "job {job_id} with cap=5: cora runs nothing (its succeeded, dead and retry_wait "
                "jobs keep leases until {until:g}), bolt runs 1 (held by w1 itself, due at "
                "{due:g} by its worker's clock), so cora is the least busy though bolt's job "
                "is older"
            ).format(job_id=ready, until=NOW + 20, due=NOW + 50),
            _("nothing")
            if got is None
            else _("job {job_id} of {queue}").format(job_id=_id(got), queue=got.get("queue")),
            _(
                "count only running jobs (state = 'running' AND lease_until > :now) in the "
                "ORDER BY as in the cap, whoever holds them and whatever their run_after: a "
                "lease left on a finished job makes no account busy"
            ),
        )
    for cap, got, under, scaled in _big_caps(ns):
        expect(
            got == [under, None],
            _(
                "claim_capped(..., cap={cap}) twice: job {job_id}, bolt's (it runs {under} "
                "jobs, acme runs {cap}: at its cap), then None (both at their cap)"
            ).format(cap=cap, job_id=under, under=cap - 1),
            _("the claims took {got}").format(got=got),
            _scaled_hint(scaled)
            or _(
                "count every live running job of the account, however many: a count cut "
                "short by a LIMIT (or a cap clamped to a bound) lets a big account past a "
                "big cap"
            ),
        )


def _big_caps(ns: Namespace) -> Iterator[tuple[int, list[Any], int, list[int] | None]]:
    """Two claims on acme, at a big cap, and bolt, one job under it: per drawn cap, the
    cap, the ids the claims took, bolt's ready job's id and the LIMITs scaled down.

    A big cap, reached: every live job counts, however many (a count that stops at a
    LIMIT of 3 or 10 sees both accounts alike, under the cap). The keys do not name the
    account: the queue does. And caps of 1050 to 1200, past every round LIMIT up to 1000
    on the count (or a cap clamped to one): a LIMIT past that runs scaled down to 1000.
    """
    caps: list[tuple[int, str, int, int]] = [
        (seed, label, low, high)
        for seed in scene_seeds()
        for label, low, high in (("big cap", 12, 40), ("huge cap", 1050, 1200))
    ]
    for seed, label, low, high in caps:
        cap = Random(f"{seed}:{label}").randint(low, high)
        scaled: list[int] | None = [] if cap > SCALED_LIMIT else None
        with lab_file(ns) as (conn, path):
            conn.execute("BEGIN")
            for n in range(cap):
                add_job(conn, f"job:a{n}", **live("acme", n))
            for n in range(cap - 1):
                add_job(conn, f"job:b{n}", **live("bolt", n))
            add_job(conn, "job:a", queue="acme")
            under = add_job(conn, "job:b", queue="bolt")
            conn.execute("COMMIT")
            got = [
                _id(claim(ns, path, "claim_capped", f"w{n}", NOW, cap, scaled=scaled))
                for n in (1, 2)
            ]
        yield cap, got, under, scaled


@CHECKS.add(
    1,
    "no account runs past its cap: every running job under a live lease counts, whatever "
    "its run_after, updated_at, attempt, kind or holder and however many there are, and "
    "a cap of 0 is a cap",
    severe=True,
)
def no_account_runs_past_its_cap(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        for n in range(3):
            add_job(conn, f"acme:r{n}", **live("acme", n))
        add_job(conn, "acme:next", queue="acme")
        got = capped(ns, path, "w1", 3)
        expect(
            got is None,
            _("None with cap=3 (acme runs 3)"),
            _("job {job_id}").format(job_id=_id(got)),
        )
        # cap=0 is a cap like any other (an operator pausing the queues), not "no cap".
        add_job(conn, "bolt:1", queue="bolt")
        got = capped(ns, path, "w2", 0)
        expect(
            got is None,
            _("None with cap=0 (bolt runs 0 jobs, and 0 is not under a cap of 0)"),
            _("job {job_id}").format(job_id=_id(got)),
            _("compare busy < :cap for every cap, 0 included; never read 0 as no cap"),
        )
    # Running jobs of every sort count: one due later by its worker's clock, a retry at
    # its 4th attempt, a report, one held by the claiming worker itself.
    with lab_file(ns) as (conn, path):
        add_job(conn, "acme:ahead", **live("acme", 1, run_after=NOW + 50, updated_at=NOW + 50))
        add_job(conn, "acme:retry", **live("acme", 2, attempt=4, max_attempts=5))
        add_job(conn, "acme:report", **live("acme", 3, kind="report", lease_owner="w1"))
        add_job(conn, "acme:next", queue="acme")
        got = capped(ns, path, "w1", 3)
        expect(
            got is None,
            _(
                "None with cap=3: acme runs 3 jobs under live leases (one due at {due:g} by "
                "its worker's clock, one at its 4th attempt, a report held by w1 itself)"
            ).format(due=NOW + 50),
            _("job {job_id}").format(job_id=_id(got)),
            _(
                "count every job with state = 'running' AND lease_until > :now of the "
                "account, whatever its run_after, attempt, kind or lease_owner"
            ),
        )
    # However many: acme at a big cap never gets one more, nor bolt past its own.
    for cap, got, under, scaled in _big_caps(ns):
        taken = [job_id for job_id in got if job_id is not None]
        expect(
            all(job_id == under for job_id in taken) and taken.count(under) <= 1,
            _(
                "claim_capped(..., cap={cap}) twice: never acme's job (acme runs {cap} jobs: "
                "at its cap), and bolt's job {job_id} at most once (it runs {under})"
            ).format(cap=cap, job_id=under, under=cap - 1),
            _("the claims took {got}").format(got=got),
            _scaled_hint(scaled)
            or _(
                "count every live running job of the account, however many: a count cut "
                "short by a LIMIT lets a big account past a big cap"
            ),
        )


@CHECKS.add(
    2,
    "two workers in two processes claim serial heads at once: choose and take the "
    "head in one statement, or both take the same queue's jobs",
    timeout=40.0,
    severe=True,
)
def serial_heads_hold_when_two_processes_claim(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        # First in line, a head whose worker died: its state stays 'running', so an UPDATE
        # guarded by the state both workers read lets both take it.
        add_job(conn, "order:3:0", **live("order:3", 0, lease_until=NOW - 1))
        add_job(conn, "order:3:1", queue="order:3")
        # Each queue's jobs are of several kinds, and their keys start with the kind: the
        # queue column alone is the serial key (not the kind, nor a prefix of the key).
        for key in ("order:1", "order:2"):
            for n, kind in enumerate(("email", "sync", "sms")):
                add_job(conn, f"{kind}:{key}:{n}", queue=key, kind=kind)
        got = ns.harness(
            HARNESS + "race", str(path), "claim_serial", 2, NOW, 30.0, [], RACE_PAUSE_S
        )
        raised = [v[1] for v in got["results"].values() if v[0] == "raised"]
        expect(
            not raised and got["hung"] == 0,
            "both workers to finish",
            _("your code raised {errors}").format(errors="; ".join(raised))
            if raised
            else _("{count} still running").format(count=got["hung"]),
        )
        keys = ("order:1", "order:2", "order:3")
        counts = {key: running(conn, key) for key in keys}
        expect(counts == dict.fromkeys(keys, 1), "one running job per serial key", counts)
        expect_each_job_once(got)

    # One queue's two jobs, two workers, one schedule at a time: a head taken in two
    # writes (its lease, then its state) is still ready between them, and the other
    # worker takes it too.
    def make(folder: Path) -> None:
        conn = lab_db(folder / "jobs.db")
        for n in range(2):
            add_job(conn, f"order:9:{n}", queue="order:9")
        conn.close()

    def judge(folder: Path, run: dict[str, Any]) -> tuple[bool, str]:
        got = [run[w]["returned"] for w in ("first", "second")]
        with reading(folder / "jobs.db") as conn:
            busy = running(conn, "order:9")
        ok = busy == 1 and sum(isinstance(row, dict) for row in got) == 1
        return ok, _("order:9 has {busy} running; the workers got {returned}").format(
            busy=busy, returned=got
        )

    after_every_schedule(
        ns,
        HARNESS + "claim_schedules",
        make,
        ["claim_serial", NOW, 30.0, []],
        judge,
        _("exactly one worker gets order:9's head, the other None (two workers, one serial queue)"),
        _(
            "take the head in one UPDATE ... WHERE id = (SELECT ...) RETURNING *: a head "
            "taken in two writes is still ready between them, and the other worker takes it too"
        ),
    )


@CHECKS.add(
    1,
    "a worker that loses a race takes the next ready job, not None: None says that nothing "
    "is ready, and the worker sleeps while work waits. A job chosen by a SELECT, then taken "
    "by an UPDATE guarded on it still being ready, is None whenever another worker took it "
    "first: choose and take in one statement",
    timeout=60.0,
)
def a_worker_that_loses_a_race_takes_the_next_job(ns: Namespace) -> None:
    # (the claim, its extra arguments, the jobs (key, queue): one for each worker)
    scenes = (
        ("claim_capped", [1], (("acme:0", "acme"), ("bolt:0", "bolt"))),
        ("claim_serial", [], (("order:1:a", "order:1"), ("order:2:a", "order:2"))),
    )
    for name, extra, jobs in scenes:

        def make(folder: Path, jobs: tuple[tuple[str, str], ...] = jobs) -> None:
            conn = lab_db(folder / "jobs.db")
            for key, queue in jobs:
                add_job(conn, key, queue=queue)
            conn.close()

        def judge(folder: Path, run: dict[str, Any]) -> tuple[bool, str]:
            got = [run[w]["returned"] for w in ("first", "second")]
            ids = [row.get("id") if isinstance(row, dict) else None for row in got]
            with reading(folder / "jobs.db") as conn:
                owners = {j["id"]: j["lease_owner"] for j in all_jobs(conn)}
            took = [owners.get(i) for i in ids]
            ok = None not in ids and ids[0] != ids[1] and took == ["w1", "w2"]
            return ok, _("the workers got jobs {ids}; the jobs' lease owners {owners}").format(
                ids=ids, owners=owners
            )

        after_every_schedule(
            ns,
            HARNESS + "claim_schedules",
            make,
            [name, NOW, 30.0, extra],
            judge,
            _(
                "{name}: two ready jobs ({keys}) and two workers claiming at once: each "
                "worker takes one (never None while a job is ready)"
            ).format(name=name, keys=", ".join(key for key, _queue in jobs)),
            _(
                "choose and take in one statement (UPDATE ... WHERE id = (SELECT ...) "
                "RETURNING *): an UPDATE of the id a SELECT chose finds it taken when "
                "another worker was first, and returns None though another job is ready"
            ),
        )


#: Account names as customers have them: capitals, an underscore, non-ASCII.
ACCOUNTS = ["acme", "Bolt_2", "çora", "Dá_Ví"]


@CHECKS.add(
    2,
    "a flood's backlog must not hide another account's job: among ALL ready jobs (no "
    "LIMIT on the candidates before the cap filter), the one of an account under its "
    "cap is taken while the flooding account is at its cap",
)
def a_backlog_does_not_hide_another_accounts_job(ns: Namespace) -> None:
    for seed in scene_seeds():
        _a_backlog_does_not_hide_another_accounts_job_in(ns, Random(seed))
    # And a backlog past every round LIMIT up to 1000 (a silent cap of 500 or 1000
    # candidates): 1100 to 1400 jobs, a few tenths of a second. A LIMIT past that (5000
    # candidates) runs scaled down to 1000, as a backlog past it would hide the job.
    for seed in scene_seeds():
        _a_backlog_does_not_hide_another_accounts_job_in(
            ns, Random(f"{seed}:backlog"), (1100, 1400)
        )


def _a_backlog_does_not_hide_another_accounts_job_in(
    ns: Namespace, rng: Random, counts: tuple[int, int] = (120, 300)
) -> None:
    flood, other = rng.sample(ACCOUNTS, 2)
    cap, count = rng.randint(1, 3), rng.randint(*counts)
    with lab_file(ns) as (conn, path):
        conn.execute("BEGIN")
        for n in range(cap):
            add_job(conn, f"{flood}:r{n}", **live(flood, n))
        for n in range(count):
            add_job(conn, f"{flood}:{n}", queue=flood, run_after=rng.randint(0, 99))
        conn.execute("COMMIT")
        waiting = add_job(conn, f"{other}:0", queue=other, run_after=NOW)
        scaled: list[int] | None = [] if counts[0] > SCALED_LIMIT else None
        got = claim(ns, path, "claim_capped", "w1", NOW, cap, scaled=scaled)
        stored = job(conn, waiting)
        expect(
            _id(got) == waiting and stored["state"] == "running",
            _(
                "{account}'s job {job_id} claimed (cap={cap}: {flood} runs {cap} and has "
                "{count} older jobs waiting)"
            ).format(account=other, job_id=waiting, cap=cap, flood=flood, count=count),
            _("{claimed} claimed; job {job_id} is {state}, {flood} runs {running}").format(
                claimed=_("nothing") if got is None else _("job {job_id}").format(job_id=_id(got)),
                job_id=waiting,
                state=stored["state"],
                flood=flood,
                running=running(conn, flood),
            ),
            _scaled_hint(scaled),
        )


def _scaled_hint(scaled: list[int] | None) -> str | None:
    """What to say of a claim whose LIMITs the backlog scene scaled down, if any."""
    if not scaled:
        return None
    return _(
        "your claim has a LIMIT of {limits} rows: the check ran it scaled down to {scaled}, "
        "below its backlog, as a backlog past {limits} would hide the job all the same. "
        "Choose among all the ready rows, with no LIMIT but the final LIMIT 1"
    ).format(limits=" / ".join(str(n) for n in sorted(set(scaled))), scaled=SCALED_LIMIT)


@CHECKS.add(
    1,
    "many serial queues whose heads run must not hide a ready head: take the heads of ALL "
    "queues (no LIMIT on the queues or heads before the ready filter), or a queue behind "
    "the first hundred waits while their heads run",
)
def many_running_heads_do_not_hide_a_ready_head(ns: Namespace) -> None:
    for seed in scene_seeds():
        _many_running_heads_do_not_hide_a_ready_head_in(ns, Random(seed))
    # And past every round LIMIT up to 1000 queues: 1100 to 1400 running heads (a LIMIT
    # past that runs scaled down to 1000).
    for seed in scene_seeds():
        _many_running_heads_do_not_hide_a_ready_head_in(ns, Random(f"{seed}:backlog"), (1100, 1400))


def _many_running_heads_do_not_hide_a_ready_head_in(
    ns: Namespace, rng: Random, counts: tuple[int, int] = (120, 300)
) -> None:
    count = rng.randint(*counts)
    with lab_file(ns) as (conn, path):
        conn.execute("BEGIN")
        for n in range(count):
            add_job(conn, f"sync:{n}:a", **live(f"sync:{n}", n))
            add_job(conn, f"sync:{n}:b", queue=f"sync:{n}", run_after=rng.randint(0, 99))
        conn.execute("COMMIT")
        ready = add_job(conn, "order:1:a", queue="order:1", run_after=NOW)
        scaled: list[int] | None = [] if counts[0] > SCALED_LIMIT else None
        got = claim(ns, path, "claim_serial", "w1", NOW, scaled=scaled)
        expect(
            _id(got) == ready,
            _(
                "claim_serial takes job {job_id}, the head of order:1, while the heads of "
                "{count} older queues run"
            ).format(job_id=ready, count=count),
            _("nothing claimed") if got is None else _("job {job_id}").format(job_id=_id(got)),
            _scaled_hint(scaled),
        )


@CHECKS.add(
    1,
    "every account at its cap waits, however many accounts are: count the full accounts "
    "(or the busy ones) with no LIMIT; a list of full accounts cut to its first 100 or 1000 "
    "rows lets every account past it run more than cap jobs",
    timeout=30.0,
    severe=True,
)
def many_accounts_at_their_cap_all_wait(ns: Namespace) -> None:
    for seed in scene_seeds():
        _many_accounts_at_their_cap_all_wait_in(ns, Random(f"{seed}:full accounts"))
    # And past every round LIMIT up to 1000: 1050 to 1200 accounts at their cap (a LIMIT
    # past that runs scaled down to 1000), and none under it: one claim, None.
    for seed in scene_seeds():
        _many_accounts_at_their_cap_all_wait_in(
            ns, Random(f"{seed}:full accounts backlog"), (1050, 1200)
        )


def _many_accounts_at_their_cap_all_wait_in(
    ns: Namespace, rng: Random, counts: tuple[int, int] = (120, 300)
) -> None:
    big = counts[0] > SCALED_LIMIT
    count, cap = rng.randint(*counts), 1 if big else rng.randint(1, 3)
    with lab_file(ns) as (conn, path):
        conn.execute("BEGIN")
        for n in range(count):
            account = f"{rng.choice(ACCOUNTS)}:{n}"
            for r in range(cap):
                add_job(conn, f"{account}:r{r}", **live(account, r))
            add_job(conn, f"{account}:0", queue=account, run_after=rng.randint(0, 99))
        # One more account runs one job fewer than the cap: its job, due last, goes first.
        want: list[int | None] = [None]
        if not big:
            for r in range(cap - 1):
                add_job(conn, f"zeta:r{r}", **live("zeta", r))
            want = [add_job(conn, "zeta:0", queue="zeta", run_after=NOW), None]
        conn.execute("COMMIT")
        scaled: list[int] | None = [] if big else None
        got = [
            _id(claim(ns, path, "claim_capped", f"w{n}", NOW, cap, scaled=scaled))
            for n in range(len(want))
        ]
        busy = Counter(
            j["queue"] for j in all_jobs(conn) if j["state"] == "running" and j["lease_until"] > NOW
        )
    over = sorted(queue for queue, n in busy.items() if n > cap)
    expect(
        got == want,
        (
            _(
                "claim_capped(..., cap={cap}): None, since all {count} accounts run {cap} "
                "job(s) each"
            )
            if big
            else _(
                "claim_capped(..., cap={cap}) twice: job {job_id} of account zeta (it runs "
                "{under}), then None: zeta and the {count} other accounts all run {cap}"
            )
        ).format(cap=cap, job_id=want[0], under=cap - 1, count=count),
        _("the claims took {got}; {over} accounts now run more than {cap} jobs ({some})").format(
            got=got, over=len(over), cap=cap, some=", ".join(over[:3]) or "-"
        ),
        _scaled_hint(scaled)
        or _(
            "count every account's live running jobs, however many accounts there are: no "
            "LIMIT on the list of full accounts or on the busy counts"
        ),
    )


@CHECKS.add(
    1,
    "least busy counts live leases only: an account whose jobs' leases ended (their "
    "workers died) is not busier for them, in the order as in the cap",
)
def least_busy_counts_only_live_leases(ns: Namespace) -> None:
    for seed in scene_seeds():
        _least_busy_counts_only_live_leases_in(ns, Random(seed))


def _least_busy_counts_only_live_leases_in(ns: Namespace, rng: Random) -> None:
    for _n in range(4):
        dead, busy = rng.sample(ACCOUNTS, 2)
        expired = rng.randint(2, 4)
        with lab_file(ns) as (conn, path):
            for n in range(expired):
                lease = rng.choice([NOW, NOW - rng.randint(1, 90)])
                add_job(conn, f"{dead}:r{n}", **live(dead, n, lease_until=lease))
            for n in range(rng.randint(1, expired - 1)):
                add_job(conn, f"{busy}:r{n}", **live(busy, n))
            add_job(conn, f"{dead}:p", queue=dead, run_after=rng.randint(0, 99))
            add_job(conn, f"{busy}:p", queue=busy, run_after=rng.randint(0, 99))
            stored = all_jobs(conn)
            want = expected_capped(stored, NOW, 10)
            got = capped(ns, path, "w1", 10)
            scene = "; ".join(
                f"{j['id']} {j['queue']} {j['state']} run_after={j['run_after']:g}"
                + (f" lease_until={j['lease_until']:g}" if j["state"] == "running" else "")
                for j in stored
            )
            expect(
                _id(got) == want,
                _(
                    "job {job_id} at now=100, cap=10 ({account} runs 0 live jobs; jobs: {jobs})"
                ).format(job_id=want, account=dead, jobs=scene),
                _("nothing")
                if got is None
                else _("job {job_id} of {queue}").format(job_id=_id(got), queue=got.get("queue")),
            )


@CHECKS.add(
    2,
    "the head of a serial queue is its live job with the smallest id, whatever its key "
    "says: keys like 'sync:9' and 'sync:10' sort the other way as text",
    severe=True,
)
def serial_head_is_the_smallest_id_whatever_the_keys(ns: Namespace) -> None:
    for seed in scene_seeds():
        _serial_head_is_the_smallest_id_whatever_the_keys_in(ns, Random(seed))


def _serial_head_is_the_smallest_id_whatever_the_keys_in(ns: Namespace, rng: Random) -> None:
    queue = rng.choice(["erp:Sync_7", "order:çà_42", "ledger:X_1"])
    start, count = rng.randint(5, 9), rng.randint(6, 12)
    with lab_file(ns) as (conn, path):
        ids = [add_job(conn, f"{queue}:{n}", queue=queue) for n in range(start, start + count)]
        order = []
        for _n in ids:
            got = _id(serial(ns, path, "w1"))
            order.append(got)
            if got is None:
                break
            conn.execute("UPDATE jobs SET state = 'succeeded' WHERE id = ?", (got,))
        keys = {j["id"]: j["key"] for j in all_jobs(conn)}
        expect(
            order == ids,
            _("{queue}'s jobs one at a time in id order: {keys}").format(
                queue=queue, keys=[keys[i] for i in ids]
            ),
            f"{[keys.get(i, i) for i in order]}",
        )
    # However far off the head's retry (more than a year: backoffs grow), it is still
    # the head; a look-ahead window on run_after (an hour, a day, a week) lets the job
    # behind it overtake.
    days = rng.uniform(400, 1000)
    with lab_file(ns) as (conn, path):
        add_job(conn, f"{queue}:a", queue=queue, state="retry_wait", attempt=2,
                run_after=NOW + days * 86_400)  # fmt: skip
        add_job(conn, f"{queue}:b", queue=queue)
        got = serial(ns, path, "w1")
        expect(
            got is None,
            _("None: {queue}'s head retries in {days:.1f} days; the job behind it waits").format(
                queue=queue, days=days
            ),
            _("job {job_id}, {key}").format(job_id=_id(got), key=got.get("key"))
            if got
            else _("nothing"),
            _(
                "find each queue's head among all its live jobs, whatever their run_after: "
                "no look-ahead window"
            ),
        )


@CHECKS.add(
    2,
    "nothing waits forever: a job in retry_wait whose run_after has come, and a running "
    "job whose lease ended (its worker died), are ready for claim_capped and claim_serial "
    "at any attempt and whoever held it (no limit of attempts written into the claim, no "
    "lease_owner test), and a dead head leaves its serial queue; otherwise that work "
    "never runs again",
    severe=True,
)
def retried_and_orphaned_jobs_run_again(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        # Its 7th attempt of 10 (max_attempts is the job's own): no limit of attempts
        # written into the claim leaves it waiting forever.
        retried = add_job(
            conn,
            "acme:1",
            queue="acme",
            state="retry_wait",
            attempt=7,
            max_attempts=10,
            run_after=NOW - 5,
        )
        # A second one waits behind it: jobs waiting to be retried are not busy, so acme
        # (cap 2) is not at its cap however many of them it has.
        add_job(conn, "acme:2", queue="acme", state="retry_wait", attempt=1, run_after=NOW - 4)
        expired = add_job(conn, "bolt:1", **live("bolt", 1, lease_until=NOW - 1))
        # Its worker died during its last attempt: claimed again all the same (the
        # attempt counted; the worker then gives up on it), never left running forever.
        last = add_job(conn, "cora:1", **live("cora", 1, lease_until=NOW - 1, attempt=3))
        want = sorted([retried, expired, last])
        got = sorted(_id(capped(ns, path, w, 2)) or 0 for w in ("w1", "w2", "w3"))
        expect(
            got == want,
            _(
                "claim_capped (cap 2) takes jobs {job_ids}: the first of acme's two jobs in "
                "retry_wait whose run_after has come (at its attempt 7 of 10), and two "
                "running under a lease that ended (their workers died; one at its last attempt)"
            ).format(job_ids=want),
            got,
        )
        # A job taken back from a dead worker counts its attempt, its last one too: one
        # stuck at max_attempts (min(attempt + 1, max_attempts)) hides the runs it had.
        attempts = [job(conn, i)["attempt"] for i in (expired, last)]
        expect(
            attempts == [2, 4],
            _(
                "claim_capped counts the attempt of a job whose worker died: jobs {job_ids} "
                "taken back at attempts 2 and 4 (they were at 1 and 3, max_attempts 3)"
            ).format(job_ids=[expired, last]),
            _("attempts {attempts}").format(attempts=attempts),
            _(
                "attempt = attempt + 1 on every claim, past max_attempts too: never clamp "
                "it; the worker gives up on a job at max_attempts"
            ),
        )
    with lab_file(ns) as (conn, path):
        add_job(conn, "order:1:a", queue="order:1", state="dead", attempt=3)
        after_dead = add_job(conn, "order:1:b", queue="order:1")
        expired = add_job(conn, "order:2:a", **live("order:2", 1, lease_until=NOW - 1))
        add_job(conn, "order:2:b", queue="order:2")
        retried = add_job(
            conn,
            "order:3:a",
            queue="order:3",
            state="retry_wait",
            attempt=7,
            max_attempts=10,
            run_after=NOW - 5,
        )
        add_job(conn, "order:3:b", queue="order:3")
        last = add_job(conn, "order:4:a", **live("order:4", 1, lease_until=NOW - 1, attempt=3))
        add_job(conn, "order:4:b", queue="order:4")
        want = sorted([after_dead, expired, retried, last])
        got = sorted(_id(serial(ns, path, w)) or 0 for w in ("w1", "w2", "w3", "w4"))
        expect(
            got == want,
            _(
                "claim_serial takes jobs {job_ids}: the job behind a dead head, two heads "
                "whose lease ended (one at its last attempt), and a head in retry_wait whose "
                "run_after has come (at its attempt 7 of 10)"
            ).format(job_ids=want),
            got,
        )
        # A head taken back from a dead worker counts its attempt too: a poison job that
        # kills every worker it runs on must reach max_attempts, or its queue is blocked
        # for good behind it.
        attempts = [job(conn, i)["attempt"] for i in (expired, last)]
        expect(
            attempts == [2, 4],
            _(
                "claim_serial counts the attempt of a head whose worker died: jobs {job_ids} "
                "taken back at attempts 2 and 4 (they were at 1 and 3)"
            ).format(job_ids=[expired, last]),
            _("attempts {attempts}").format(attempts=attempts),
            _(
                "attempt = attempt + 1 on every claim, a running job taken back included: "
                "the worker gives up on a job at max_attempts, and a job that kills its "
                "worker must get there"
            ),
        )
    # A worker restarted under the same name (names come from the host) finds its own
    # job, its lease ended: it takes it back like any other job (no lease_owner test).
    for name, extra in (("claim_capped", (2,)), ("claim_serial", ())):
        with lab_file(ns) as (conn, path):
            own = add_job(conn, "acme:1", **live("acme", 1, lease_until=NOW - 1, lease_owner="w1"))
            back = claim(ns, path, name, "w1", NOW, *extra)
        expect(
            _id(back) == own,
            _(
                "{name}: w1, restarted under the same name, takes back job {job_id}, its own "
                "job whose lease ended at {until:g}"
            ).format(name=name, job_id=own, until=NOW - 1),
            _("nothing") if back is None else _("job {job_id}").format(job_id=_id(back)),
            _(
                "a job whose lease ended is ready whoever held it: never compare lease_owner "
                "with the worker that claims (with one worker, that job never runs again)"
            ),
        )

    # Weeks overdue, after an outage (epoch seconds): a retry due 40 days ago, a job whose
    # worker died 35 days ago, a job added 30 days ago. A claim that looks back only so far
    # (run_after > now - an hour or a day, a lease that ended within the last lease_s)
    # leaves them waiting for good.
    later, day = 1_764_900_000.5, 86_400.0
    for name, extra in (("claim_capped", (2,)), ("claim_serial", ())):
        with lab_file(ns) as (conn, path):
            old = [
                add_job(conn, "acme:1", queue="acme", state="retry_wait", attempt=1,
                        run_after=later - 40 * day),
                add_job(conn, "bolt:1", **live("bolt", 1, run_after=later - 36 * day,
                                               lease_until=later - 35 * day)),
                add_job(conn, "cora:1", queue="cora", run_after=later - 30 * day),
            ]  # fmt: skip
            for queue in ("acme", "bolt", "cora"):
                add_job(conn, f"{queue}:2", queue=queue, run_after=later)
            got = sorted(_id(claim(ns, path, name, f"w{n}", later, *extra)) or 0 for n in range(3))
        expect(
            got == old,
            _(
                "{name} at now={now!r} takes jobs {job_ids}: a retry due 40 days ago, a job "
                "whose worker died 35 days ago (its lease ended then) and a job due 30 days ago"
            ).format(name=name, now=later, job_ids=old),
            _("it took {job_ids}").format(job_ids=got),
            _(
                "a job is ready once run_after <= now (or its lease ended), however long ago: "
                "no window of how far back a claim looks"
            ),
        )


@CHECKS.add(
    2,
    "a fresh lease_token for every claim (lower(hex(randomblob(16))) in the UPDATE), "
    "never one computed once: with the same token, the worker whose lease ended still "
    "passes the fence after another took the job, and both finish it",
    severe=True,
)
def every_claim_gets_a_fresh_token(ns: Namespace) -> None:
    for name in ("claim_capped", "claim_serial"):
        extra = (2,) if name == "claim_capped" else ()
        with lab_file(ns) as (conn, path):
            add_job(conn, "acme:1", queue="acme")
            add_job(conn, "bolt:1", queue="bolt")
            rows = [claim(ns, path, name, w, NOW, *extra) for w in ("w1", "w2")]
            # 60 s later both 30 s leases have ended: a third worker takes one job again.
            rows.append(claim(ns, path, name, "w3", NOW + 60, *extra))
            # And w1 once more, past every lease: a token made of the worker's name is
            # the one w1's stale copy still holds, and it passes the fence.
            rows.append(claim(ns, path, name, "w1", NOW + 120, *extra))
            # A job not taken again is retried_and_orphaned_jobs_run_again's business.
            tokens = [r.get("lease_token") for r in rows if r is not None]
            expect(
                len(tokens) >= 2 and len(set(tokens)) == len(tokens),
                _(
                    "{name}: a different lease_token for each claim (w1 and w2 took two "
                    "jobs, w3 took one again after its lease ended, then w1 once more)"
                ).format(name=name),
                tokens,
            )
    for name in ("claim_capped", "claim_serial"):
        _no_job_gets_a_token_it_had_before(ns, name)


#: Jobs (one per account) claimed round after round: past 9, where '10' < '9' as text.
FENCED_JOBS = 12
FENCED_ROUNDS = 2
#: Claims after the redrive: a counter that starts over gives the first its token again.
REDRIVEN_CLAIMS = 3


def _tokens_by_job(got: list[dict[str, Any]]) -> dict[int, list[Any]]:
    seen: dict[int, list[Any]] = {}
    for outcome in got:
        row = outcome.get("returned")
        if isinstance(row, dict) and "id" in row:
            seen.setdefault(row["id"], []).append(row.get("lease_token"))
    return seen


def _repeats(seen: dict[int, list[Any]]) -> str:
    """The jobs that got a token twice, with their tokens claim after claim."""
    repeated = [
        _("job {job_id}: {tokens}").format(job_id=job_id, tokens=tokens)
        for job_id, tokens in sorted(seen.items())
        if len(set(map(str, tokens))) < len(tokens)
    ]
    return "; ".join(repeated[:3]) + ("; ..." if len(repeated) > 3 else "")


def _no_job_gets_a_token_it_had_before(ns: Namespace, name: str) -> None:
    """Twelve jobs claimed twice, then redriven and claimed again: a job's
    token never comes back. A counter made from the largest token in the table reads it
    as text ('9' > '10', so it stops at 10 while a job holds '9'); one that restarts when
    a redrive clears the tokens hands each job its first token again."""
    extra = [FENCED_JOBS] if name == "claim_capped" else []
    with lab_file(ns) as (conn, path):
        for n in range(FENCED_JOBS):
            add_job(conn, f"acct{n}:1", queue=f"acct{n}")
        # Each round 31 s after the last, on one connection as a long-lived worker
        # claims: every 30 s lease has ended, and its job is taken again; every other
        # job of the first round runs long (a lease of 1000 s), its token still held.
        rounds = [
            ["w1", NOW + 31 * r, 1000.0 if r == 0 and n % 2 == 0 else 30.0, *extra]
            for r in range(FENCED_ROUNDS)
            for n in range(FENCED_JOBS)
        ]
        seen = _tokens_by_job(ns.harness(HARNESS + "on_one_connection", name, str(path), rounds))
        if sum(map(len, seen.values())) <= FENCED_JOBS:
            return  # a claim that does not take the jobs back: other checks name that
        expect(
            not _repeats(seen),
            _(
                "{name}: a token each job never had before, at every claim ({jobs} jobs of "
                "{jobs} accounts; every other one leased for 1000 s, the others claimed "
                "again once their 30 s leases ended)"
            ).format(name=name, jobs=FENCED_JOBS),
            _repeats(seen),
            _(
                "a token counted up from the largest one in the table compares them as "
                "text ('9' > '10'): draw it at random, lower(hex(randomblob(16)))"
            ),
        )
        # An operator's redrive (exercise 6) puts every job back at attempt 0, its lease
        # cleared; the next claims take the jobs again, from the first.
        conn.execute(
            "UPDATE jobs SET state = 'pending', attempt = 0, lease_owner = NULL,"
            " lease_until = NULL, lease_token = NULL"
        )
        later = NOW + 1100
        again = [["w1", later, 30.0, *extra] for _n in range(REDRIVEN_CLAIMS)]
        for job_id, tokens in _tokens_by_job(
            ns.harness(HARNESS + "on_one_connection", name, str(path), again)
        ).items():
            seen.setdefault(job_id, []).extend(tokens)
    expect(
        not _repeats(seen),
        _(
            "{name}: a token each job never had before when the {jobs} jobs, redriven "
            "(their tokens cleared, attempt 0), are claimed again"
        ).format(name=name, jobs=FENCED_JOBS),
        _repeats(seen),
        _(
            "a token counted up from the tokens in the table starts over once they are "
            "cleared: draw it at random, lower(hex(randomblob(16)))"
        ),
    )


#: Claims of one job in a row for the tokens' text: enough to see each position's range.
TOKEN_CLAIMS = 300


@CHECKS.add(
    1,
    "draw each lease_token from enough randomness that two never meet "
    "(lower(hex(randomblob(16)))): a short one (hex(randomblob(2)), a number below a "
    "million) repeats within a few hundred claims, and a worker whose lease ended passes "
    "the fence of the job's next run",
    severe=True,
)
def lease_tokens_hold_enough_randomness(ns: Namespace) -> None:
    for name, extra in (("claim_capped", [2]), ("claim_serial", [])):
        with lab_file(ns) as (conn, path):
            add_job(conn, "acme:1", queue="acme")
            # One job claimed again and again, each time 31 s after the last (its lease
            # of 30 s over), on one connection as a long-lived worker claims.
            calls = [["w1", NOW + 31 * n, 30.0, *extra] for n in range(TOKEN_CLAIMS)]
            got = ns.harness(HARNESS + "on_one_connection", name, str(path), calls)
        rows = [g.get("returned") for g in got]
        tokens = [r.get("lease_token") for r in rows if isinstance(r, dict)]
        if len(tokens) < TOKEN_CLAIMS // 2:
            continue  # a claim that does not take the job back: other checks name that
        bits = too_few_bits(tokens)
        expect(
            bits is None,
            _(
                "{name}: {count} lease tokens of one job drawn from at least 2**{bits} values"
            ).format(name=name, count=len(tokens), bits=TOKEN_BITS),
            _(
                "{count} tokens that can take at most about 2**{bits:.0f} values (the "
                "characters seen at each position: {sample})"
            ).format(count=len(tokens), bits=bits or 0.0, sample=", ".join(map(repr, tokens[:3]))),
            _(
                "draw the token from at least 64 random bits: lower(hex(randomblob(16))), "
                "secrets.token_hex(16) or uuid.uuid4()"
            ),
        )


#: 68 characters that two accounts (or serial queues) share before their last one.
_LONG = "northwind-trading-company-of-central-and-eastern-europe-gmbh-berlin-"


@CHECKS.add(
    1,
    "an account (a queue) is its exact name: compare with =, never LIKE or GLOB (_, % "
    "and * are wildcards there), lower() ('Acme' and 'acme' are two customers), trim() "
    "('Bolt ' is not 'Bolt'), a Unicode normalisation (two spellings of 'caf\u00e9') or "
    "a prefix (two long names alike in their first 64 characters are two accounts)",
)
def accounts_are_told_apart_by_their_exact_names(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        # "caf\u00e9" and "cafe\u0301" look alike, but are two names (unicodedata.normalize
        # makes them one).
        for n, queue in enumerate(("acmex1", "acmeyz", "Bolt", "caf\u00e9", _LONG + "a")):
            add_job(conn, f"{queue}:r", **live(queue, n))
        # "o'brien": a name with a quote, as customers have (SQL written with f-strings breaks).
        # Two long names alike in their first 68 characters (substr(queue, 1, 64) makes them one).
        waiting = {
            queue: add_job(conn, f"{queue}:1", queue=queue)
            for queue in (
                "acme_1",
                "acme%",
                "acme*",
                "bolt",
                "Bolt ",
                "o'brien",
                "cafe\u0301",
                _LONG + "b",
            )
        }
        got = sorted(_id(capped(ns, path, f"w{n}", 1)) or 0 for n in range(len(waiting)))
        expect(
            got == sorted(waiting.values()),
            _(
                "claim_capped with cap=1 takes jobs {job_ids} of accounts {names}: accounts "
                "acmex1, acmeyz, {long_name}, Bolt and 'caf\\xe9' are at their cap, not these"
            ).format(
                job_ids=sorted(waiting.values()),
                names=", ".join(map(ascii, waiting)),
                long_name=_LONG + "a",
            ),
            got,
        )
    with lab_file(ns) as (conn, path):
        for n, queue in enumerate(("syncx1", "Sync", "caf\u00e9", _LONG + "a")):
            add_job(conn, f"{queue}:a", **live(queue, n))
        heads = {
            queue: add_job(conn, f"{queue}:a", queue=queue)
            for queue in ("sync_1", "sync", "sync ", "sync*", "cafe\u0301", _LONG + "b")
        }
        got = sorted(_id(serial(ns, path, f"w{n}")) or 0 for n in range(len(heads)))
        expect(
            got == sorted(heads.values()),
            _(
                "claim_serial takes jobs {job_ids}, the heads of queues {names}: queues "
                "syncx1, {long_name}, Sync and 'caf\\xe9' are other queues, their running heads "
                "do not block these"
            ).format(
                job_ids=sorted(heads.values()),
                names=", ".join(map(ascii, heads)),
                long_name=_LONG + "a",
            ),
            got,
        )


@CHECKS.add(
    1,
    "both claims count the attempt (attempt = attempt + 1, never = 1) on a job that ran "
    "before: the retry policy gives up after max_attempts, and a job whose attempts are "
    "reset is retried forever; a claim writes the lease, never run_after or last_error",
)
def a_job_claimed_again_counts_its_attempt(ns: Namespace) -> None:
    for name in ("claim_capped", "claim_serial"):
        extra = (2,) if name == "claim_capped" else ()
        with lab_file(ns) as (conn, path):
            # Its failed run left its lease on the row, ending after the backoff: the new
            # lease is now + lease_s all the same (max() with the old one keeps the old).
            job_id = add_job(
                conn,
                "acme:1",
                queue="acme",
                state="retry_wait",
                attempt=2,
                run_after=NOW - 5,
                lease_owner="w0",
                lease_until=NOW + 100,
                lease_token="old",
                last_error="timeout after 30 s",
                # Its failed run was written by a worker whose clock runs 7 s ahead: the
                # claim writes its own now all the same (never max(updated_at, now)).
                updated_at=NOW + 7,
            )
            got = claim(ns, path, name, "w1", NOW, *extra, lease_s=45.0)
            stored = job(conn, job_id)
            # When it was due and why its last run failed stay on the row: a run_after
            # moved to now puts a job whose worker dies behind work due after it.
            fields = ("state", "attempt", "lease_owner", "lease_until", "updated_at")
            expect(
                _id(got) == job_id
                and stored["attempt"] == 3
                and stored["state"] == "running"
                and stored["lease_owner"] == "w1"
                and stored["lease_until"] == NOW + 45
                and stored["updated_at"] == NOW
                and stored["run_after"] == NOW - 5
                and stored["last_error"] == "timeout after 30 s",
                _(
                    "{name} on a job in retry_wait at attempt 2: running, attempt 3, "
                    "lease_owner w1, lease_until {lease_until:g}, updated_at {now:g}; "
                    "run_after {run_after:g} and last_error {error!r} left as they were"
                ).format(
                    name=name,
                    lease_until=NOW + 45,
                    now=NOW,
                    run_after=NOW - 5,
                    error="timeout after 30 s",
                ),
                {k: stored[k] for k in (*fields, "run_after", "last_error")},
                _(
                    "set only state, attempt, lease_owner, lease_until, lease_token and "
                    "updated_at, as exercise 3 does"
                ),
            )


@CHECKS.add(
    1,
    "a random lease_token (lower(hex(randomblob(16)))), not one made of the worker and "
    "the time: one worker claiming two jobs at the same now gives both the same token",
)
def a_token_is_random_not_the_worker_and_the_time(ns: Namespace) -> None:
    for name in ("claim_capped", "claim_serial"):
        extra = (2,) if name == "claim_capped" else ()
        with lab_file(ns) as (conn, path):
            add_job(conn, "acme:1", queue="acme")
            add_job(conn, "bolt:1", queue="bolt")
            rows = [claim(ns, path, name, "w1", NOW, *extra) for _n in range(2)]
            tokens = [r.get("lease_token") for r in rows if r is not None]
            expect(
                len(tokens) == 2 and len(set(tokens)) == 2,
                _(
                    "{name}: two different lease_tokens when w1 takes two jobs at now={now:g}"
                ).format(name=name, now=NOW),
                tokens,
            )


@CHECKS.add(
    2,
    "two worker processes forked from one parent must make different tokens: draw them "
    "from the database (lower(hex(randomblob(16)))) or secrets, not from a random.Random "
    "seeded once at import, which every child inherits in the same state, nor from the "
    "process id (every worker in a container of its own is process 1)",
    timeout=40.0,
    severe=True,
)
def tokens_differ_between_forked_workers(ns: Namespace) -> None:
    for name in ("claim_capped", "claim_serial"):
        extra = (2,) if name == "claim_capped" else ()
        with lab_file(ns) as (conn, path):
            claim(ns, path, name, "probe", NOW, *extra)  # on an empty table: a stub says so
            job_id = add_job(conn, "acme:1", queue="acme")
            tokens = []
            # w1 claims and stalls; its lease ends; w2, another child of the same parent,
            # takes the job over: the same token would let w1 pass the fence still.
            for worker, now in (("w1", NOW), ("w2", NOW + 100)):
                got = ns.harness(
                    HARNESS + "claim_in_a_forked_worker", str(path), name, worker, now, 30.0, *extra
                )
                if "raised" in got or got.get("hung"):
                    expect(
                        False,
                        _("{name}: {worker} in a process of its own claims at {now:g}").format(
                            name=name, worker=worker, now=now
                        ),
                        _("it hung") if got.get("hung") else raised_text(got),
                    )
                if (got.get("returned") or {}).get("id") == job_id:
                    tokens.append(job(conn, job_id)["lease_token"])
            # A job not taken again is retried_and_orphaned_jobs_run_again's business.
            if len(tokens) < 2:
                continue
        expect(
            tokens[0] != tokens[1],
            _(
                "{name}: a new token when w2 (another process forked from the same parent) "
                "takes over w1's expired lease, so that w1, still running, is fenced off"
            ).format(name=name),
            _("the job's token was {w1_token} under w1 and {w2_token} under w2").format(
                w1_token=repr(tokens[0]), w2_token=repr(tokens[1])
            ),
        )


@CHECKS.add(
    1,
    "a claim whose UPDATE fails lets the error out (no try/except returning None): None "
    "tells the worker the queue is empty, and it sleeps while the database is broken",
)
def a_failed_claim_comes_out(ns: Namespace) -> None:
    # An IntegrityError (RAISE(ABORT)), and an OperationalError, the class of a full
    # disk, a read-only file or a missing table: catching either returns None.
    failures = (
        "SELECT RAISE(ABORT, 'the write failed (a full disk, simulated)')",
        "INSERT INTO no_such_table VALUES (1)",
    )
    for name, failure in ((n, f) for n in ("claim_capped", "claim_serial") for f in failures):
        extra = (2,) if name == "claim_capped" else ()
        with lab_file(ns) as (conn, path):
            add_job(conn, "acme:1", queue="acme")
            conn.execute(
                f"CREATE TRIGGER refuse BEFORE UPDATE OF state ON jobs BEGIN {failure}; END"
            )
            got = ns.harness(HARNESS + "claim", str(path), name, "w1", NOW, 30.0, *extra)
        expect(
            "raised" in got,
            _("{name} to raise the error of its failed UPDATE (job acme:1 is ready)").format(
                name=name
            ),
            _("it returned {value}").format(value=repr(got.get("returned"))),
        )


@CHECKS.add(
    2,
    "a lease ends at its lease_until, whoever claims next: 60 s after w1 took acme's first "
    "job for 300 s, w2 with lease_s=30 does not take that job as well (with cap 2 it "
    "takes the next one; in the serial line, nothing); never work a lease's end out from "
    "updated_at and your own lease_s",
    severe=True,
)
def a_long_lease_holds_against_a_shorter_one(ns: Namespace) -> None:
    # (the claim, its cap, whether w2 may take the job behind w1's)
    for name, extra, next_one in (("claim_capped", (2,), True), ("claim_serial", (), False)):
        with lab_file(ns) as (conn, path):
            job_id = add_job(conn, "acme:1", queue="acme")
            behind = add_job(conn, "acme:2", queue="acme")
            first = claim(ns, path, name, "w1", NOW, *extra, lease_s=300.0)
            second = claim(ns, path, name, "w2", NOW + 60, *extra, lease_s=30.0)
            stored = job(conn, job_id)
            want = behind if next_one else None
            call = f"{name}(..., {extra[0]})" if extra else name
            expect(
                _id(first) == job_id and _id(second) == want and stored["lease_owner"] == "w1",
                _(
                    "{call}: w1 takes job {job_id} for 300 s at {now:g}; w2, with lease_s=30, "
                    "gets {want} at {later:g} (w1's lease runs until {until:g})"
                ).format(
                    call=call,
                    job_id=job_id,
                    want=_("job {job_id}").format(job_id=want) if want else "None",
                    now=NOW,
                    later=NOW + 60,
                    until=NOW + 300,
                ),
                _(
                    "w1 got job {first}, w2 got job {second}; job {job_id}'s lease_owner is {owner}"
                ).format(
                    first=_id(first),
                    second=_id(second),
                    job_id=job_id,
                    owner=repr(stored["lease_owner"]),
                ),
                _("a job is ready again only when lease_until <= now: read the lease the job has"),
            )


@CHECKS.add(
    1,
    "claim on the connection each call is given: a connection kept from an earlier call "
    "(in a module global) claims from the first database again, or fails once that "
    "connection is closed, and a worker that reconnects never runs a job again",
    severe=True,
)
def each_claim_uses_the_connection_it_is_given(ns: Namespace) -> None:
    for name, extra in (("claim_capped", [2]), ("claim_serial", [])):
        with lab_file(ns) as (first, first_path), lab_file(ns) as (second, second_path):
            ids = [add_job(first, "acme:1", queue="acme")]
            add_job(second, "filler:1", queue="filler", state="succeeded")
            ids.append(add_job(second, "bolt:1", queue="bolt"))
            got = ns.harness(
                HARNESS + "claim_in_each_database",
                [str(first_path), str(second_path)],
                name,
                "w1",
                NOW,
                30.0,
                *extra,
            )
            claimed = [
                g["returned"].get("id") if isinstance(g.get("returned"), dict) else None
                for g in got
            ]
            states = [job(conn, i)["state"] for conn, i in zip((first, second), ids, strict=True)]
            expect(
                claimed == ids and states == ["running", "running"],
                _(
                    "{name} on each of two job databases, one after the other in one process, "
                    "each call on its own connection: job {first} claimed in the first, job "
                    "{second} in the second"
                ).format(name=name, first=ids[0], second=ids[1]),
                _("the claims {calls}; the jobs' states {states}").format(
                    calls=", ".join(
                        raised_text(g)
                        if "raised" in g
                        else _("returned job {job_id}").format(job_id=c)
                        if c is not None
                        else repr(g.get("returned"))
                        for g, c in zip(got, claimed, strict=True)
                    ),
                    states=states,
                ),
            )


@CHECKS.add(
    2,
    "only pending, retry_wait and running jobs are ever claimed: a worker that finishes "
    "a job leaves its lease_until behind, so 'lease_until <= now' alone (without state = "
    "'running') also takes succeeded and dead jobs, and runs them again",
    severe=True,
)
def finished_jobs_are_never_claimed_again(ns: Namespace) -> None:
    for name, extra in (("claim_capped", [2]), ("claim_serial", [])):
        with lab_file(ns) as (conn, path):
            # Finished by their workers, leases left as they were (ended before NOW).
            for n, state in enumerate(("succeeded", "dead", "succeeded"), start=1):
                add_job(conn, f"acme:{n}", **live("acme", n, state=state, lease_until=NOW - n))
            first = claim(ns, path, name, "w1", NOW, *extra)
            ready = add_job(conn, "acme:4", queue="acme")
            second = claim(ns, path, name, "w2", NOW, *extra)
            taken = [
                f"{j['key']} ({j['state']})" for j in all_jobs(conn) if j["lease_owner"] == "w1"
            ]
            expect(
                first is None and _id(second) == ready,
                _(
                    "{name}: None while only succeeded and dead jobs (their leases ended "
                    "before now) are in the table, then job {job_id} once it is pending"
                ).format(name=name, job_id=ready),
                _("it took {taken}, then {second}").format(
                    taken=", ".join(taken) or _("nothing"), second=_id(second)
                ),
            )


#: Local time zones a worker may run in, as POSIX strings (no time zone database needed).
ZONES = ("<-03>3", "<+0530>-5:30")


@CHECKS.add(
    2,
    "now is epoch seconds, the same instant in every time zone: both claims use it as it "
    "is, never through a datetime (utcfromtimestamp(now).timestamp() reads UTC as local "
    "time and moves now by hours: jobs run early, live leases look expired)",
    timeout=30.0,
    severe=True,
)
def claims_are_the_same_in_every_time_zone(ns: Namespace) -> None:
    now, lease_s = 1_764_900_000.25, 30.0
    calls = (("claim_capped", (2,)), ("claim_serial", ()))
    for (name, extra), tz in ((call, tz) for call in calls for tz in ZONES):
        with lab_file(ns) as (conn, path):
            due = add_job(conn, "acme:1", queue="acme", run_after=now - 1800)
            add_job(conn, "bolt:1", queue="bolt", run_after=now + 1800)
            args = (str(path), name, "w1", now, lease_s, tz, *extra)
            got = [ns.harness(HARNESS + "claim_in_time_zone", *args) for _n in range(2)]
            stored = job(conn, due)
        rows = [g.get("returned") for g in got]
        expect(
            all("returned" in g for g in got)
            and _id(rows[0]) == due
            and rows[1] is None
            and stored["lease_until"] == now + lease_s
            and stored["updated_at"] == now,
            _(
                "{name} with TZ={tz}: job {job_id} (due half an hour ago) leased until "
                "{lease_until}, then None (bolt's job is due in half an hour)"
            ).format(name=name, tz=tz, job_id=due, lease_until=repr(now + lease_s)),
            _(
                "the claims {calls}; job {job_id}: lease_until={lease_until}, "
                "updated_at={updated_at}"
            ).format(
                calls=", ".join(
                    raised_text(g)
                    if "raised" in g
                    else "None"
                    if g["returned"] is None
                    else _("job {job_id}").format(job_id=_id(g["returned"]))
                    for g in got
                ),
                job_id=due,
                lease_until=repr(stored["lease_until"]),
                updated_at=repr(stored["updated_at"]),
            ),
            _(
                "use now as it is given, a number of seconds; a datetime made from it with "
                "utcfromtimestamp is read back as local time"
            ),
        )


#: A worker name as hosts and pools make them: capitals, a quote, a non-ASCII letter, '%'
#: and '_', and the newline a name read from a file (/etc/hostname) ends with.
ODD_WORKER = "Celery@d'Ávila-7 (PID 4242) 100%_Busy\n"
#: A worker named after its pod, its host's full name and its thread: past 100
#: characters, cut by a VARCHAR(64) habit (worker[:64]) into a name it never had.
LONG_WORKER = (
    "celery@orders-worker-7d9f8c6b5-x2k4q.orders-prod.svc.cluster.local "
    "(PID 31337, ThreadPoolExecutor-0_12)"
)


@CHECKS.add(
    1,
    "lease_owner is the worker's name exactly as given, in both claims: pass it as a "
    ":named parameter, never inside an f-string (a quote in the name breaks the SQL) nor "
    "trimmed, lowered or cut to a length (the worker no longer finds its own leases)",
)
def the_worker_is_stored_by_its_exact_name(ns: Namespace) -> None:
    scenes = [(n, e, w) for n, e in (("claim_capped", (2,)), ("claim_serial", ()))
              for w in (ODD_WORKER, LONG_WORKER)]  # fmt: skip
    for name, extra, worker in scenes:
        with lab_file(ns) as (conn, path):
            job_id = add_job(conn, "acme:1", queue="acme")
            got = ns.harness(HARNESS + "claim", str(path), name, worker, NOW, 30.0, *extra)
            stored = job(conn, job_id)
        expect(
            "raised" not in got and stored["lease_owner"] == worker,
            _(
                "{name}: job {job_id} leased to the worker named {worker}, its name stored as it is"
            ).format(name=name, job_id=job_id, worker=repr(worker)),
            raised_text(got)
            if "raised" in got
            else _("lease_owner={owner}").format(owner=repr(stored["lease_owner"])),
            _(
                "pass worker as a :named parameter (conn.execute(sql, {...})), never inside "
                "an f-string, and store it as it is given, whole"
            ),
        )


@CHECKS.add(
    2,
    "a job whose worker died and a job waiting for its retry keep their place: ready "
    "jobs (ready heads in the serial line) go by run_after, then id, never fresh work "
    "first (ORDER BY state, attempt, a CASE): behind new work that keeps coming they "
    "wait for good, and a serial queue with them",
    severe=True,
)
def dead_workers_and_retried_jobs_keep_their_place(ns: Namespace) -> None:
    for name, extra in (("claim_capped", (2,)), ("claim_serial", ())):
        with lab_file(ns) as (conn, path):
            # Due at 0, claimed at 20, its worker died: its lease ended at 50.
            orphan = add_job(
                conn,
                "acme:1",
                **live("acme", 1, run_after=0.0, lease_until=50.0, updated_at=20.0),
            )
            add_job(conn, "acme:2", queue="acme", updated_at=21.0)
            fresh = add_job(conn, "bolt:1", queue="bolt", run_after=30.0, updated_at=25.0)
            retry = add_job(
                conn,
                "cora:1",
                queue="cora",
                state="retry_wait",
                attempt=2,
                run_after=40.0,
                updated_at=35.0,
            )
            got = [_id(claim(ns, path, name, f"w{n}", NOW, *extra)) for n in range(3)]
        want = [orphan, fresh, retry]
        expect(
            got == want,
            _(
                "{name} at {now:g} takes jobs {job_ids} in this order: acme's, due at 0 "
                "(its worker died, the lease ended at 50), bolt's new one due at 30, "
                "cora's retry due at 40"
            ).format(name=name, now=NOW, job_ids=want),
            _("it took {job_ids}").format(job_ids=got),
            _(
                "order the ready jobs by run_after, then id, whatever their state and "
                "attempt: a job whose lease ended is due since its run_after"
            ),
        )


@CHECKS.add(
    2,
    "a claim that fails leaves no transaction open: a BEGIN of your own is rolled back "
    "when the UPDATE raises (try/except: ROLLBACK, raise), or the worker's connection "
    "keeps the write lock, every other worker waits on 'database is locked', and its own "
    "next claim fails ('cannot start a transaction within a transaction')",
    severe=True,
)
def a_failed_claim_leaves_no_transaction_open(ns: Namespace) -> None:
    # The write fails once (the claim at now=100 only), then works again: an
    # IntegrityError (RAISE(ABORT)) and an OperationalError (an integer overflow, of the
    # class of a full disk), so that a ROLLBACK for one class of error only shows.
    failures = (
        "SELECT RAISE(ABORT, 'the write failed (a full disk, simulated)')",
        "SELECT abs(-9223372036854775808)",
    )
    for name, failure in ((n, f) for n in ("claim_capped", "claim_serial") for f in failures):
        extra = [2] if name == "claim_capped" else []
        with lab_file(ns) as (conn, path):
            job_id = add_job(conn, "acme:1", queue="acme")
            conn.execute(
                "CREATE TRIGGER refuse BEFORE UPDATE OF state ON jobs"
                f" WHEN NEW.updated_at < {NOW + 0.5} BEGIN {failure}; END"
            )
            calls = [["w1", NOW, 30.0, *extra], ["w1", NOW + 1, 30.0, *extra]]
            got = ns.harness(HARNESS + "on_one_connection", name, str(path), calls)
            stored = job(conn, job_id)
        if "raised" not in got[0]:
            continue  # a claim that swallows the error: a_failed_claim_comes_out names it
        second = got[1].get("returned")
        expect(
            _id(second) == job_id and stored["state"] == "running",
            _(
                "{name} on one connection, as a long-lived worker claims: the claim at "
                "{now:g} raises (its write failed), the next one at {later:g} takes job "
                "{job_id}"
            ).format(name=name, now=NOW, later=NOW + 1, job_id=job_id),
            _("the first claim: {first}; the next one: {second}").format(
                first=raised_text(got[0]),
                second=raised_text(got[1])
                if "raised" in got[1]
                else _("returned {value}").format(value=repr(second)),
            ),
            _(
                "if you open a transaction (BEGIN IMMEDIATE), roll it back whatever the "
                "claim raises: try: ... except BaseException: conn.execute('ROLLBACK'); raise"
            ),
        )


@CHECKS.add(
    2,
    "only the head of a serial queue may be claimed, whatever its other jobs' leases say: "
    "a job behind the head whose lease ended (its worker died after the head was "
    "redriven) waits for the head; the rule unbracketed (head AND ready OR expired) "
    "takes it too, and two jobs of one serial queue run at once",
    severe=True,
)
def an_expired_job_behind_the_head_waits(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        # The head was redriven: pending again, due at 90. The job behind it ran before
        # that, and its worker died (its lease ended at 95).
        head = add_job(conn, "sync:42:a", queue="sync:42", run_after=NOW - 10)
        add_job(conn, "sync:42:b", **live("sync:42", 2, run_after=NOW - 60, lease_until=NOW - 5))
        got = [_id(serial(ns, path, w)) for w in ("w1", "w2")]
        states = sorted((j["id"], j["state"], j["lease_owner"]) for j in all_jobs(conn))
    expect(
        got == [head, None],
        _(
            "job {head} (the head, pending again), then None: the job behind it, its "
            "lease ended, waits for the head"
        ).format(head=head),
        _("the claims took {got}; the table holds {states}").format(got=got, states=states),
        _(
            "bracket the readiness rule: WHERE h.id IN (the heads) AND ((state pending or "
            "retry_wait AND due) OR (state running AND lease ended)); AND binds before OR"
        ),
    )


def _claim_text(row: dict[str, Any] | None) -> str:
    if row is None:
        return _("nothing")
    return _("job {job_id} (lease_token {token})").format(
        job_id=_id(row), token=repr(row.get("lease_token"))
    )


@CHECKS.add(
    2,
    "each claim returns the row its own UPDATE ... RETURNING * gave back: a row read again "
    "afterwards (by lease_owner, by updated_at) is another of the worker's jobs when it "
    "runs several under one name; it runs that one twice, and the job it took waits",
    severe=True,
)
def each_claim_returns_the_job_it_took(ns: Namespace) -> None:
    for seed in scene_seeds():
        rng = Random(f"{seed}:returned")
        first, second = rng.sample(ACCOUNTS, 2)
        due = float(rng.randint(0, 90))
        with lab_file(ns) as (conn, path):
            # Least busy first: first's jobs and second's take turns, so the ids claimed
            # go up and down (1, 4, 2, 5, 3), whichever way a read-back sorts them.
            for account, count in ((first, 3), (second, 2)):
                for n in range(count):
                    add_job(conn, f"{account}:{n}", queue=account, run_after=due)
            _claims_return_what_they_took(ns, conn, path, "claim_capped", 5, 3)
        with lab_file(ns) as (conn, path):
            # Three serial queues whose heads are due out of id order (the second last),
            # each with a job behind its head.
            low, mid, high = sorted(rng.sample(range(0, 90), 3))
            for n, when in enumerate((low, high, mid)):
                add_job(conn, f"order:{n}:a", queue=f"order:{n}", run_after=float(when))
            for n in range(3):
                add_job(conn, f"order:{n}:b", queue=f"order:{n}")
            _claims_return_what_they_took(ns, conn, path, "claim_serial", 3)


def _claims_return_what_they_took(
    ns: Namespace, conn: Any, path: Any, name: str, claims: int, *extra: Any
) -> None:
    """``claims`` claims in a row by w1 at NOW: each returns the job it changed in the
    table, with the lease_token the table holds, and never a job it returned before."""
    returned: list[Any] = []
    for n in range(1, claims + 1):
        before = {j["id"]: j for j in all_jobs(conn)}
        got = claim(ns, path, name, "w1", NOW, *extra)
        after = {j["id"]: j for j in all_jobs(conn)}
        changed = sorted(i for i, j in after.items() if j != before.get(i))
        if got is None:
            return  # taking nothing is the other checks' business
        stored = after.get(_id(got))
        expect(
            _id(got) in changed
            and _id(got) not in returned
            and stored is not None
            and got.get("lease_token") == stored["lease_token"],
            _(
                "{name}: w1, running jobs side by side under one name, claims {claims} "
                "times at now={now:g}; claim {n} returns the job it took, with the "
                "lease_token the table holds"
            ).format(name=name, claims=claims, now=NOW, n=n),
            _(
                "claim {n} changed job(s) {changed} in the table (lease_token {tokens}) "
                "but returned {returned}; the claims before it returned jobs {before}"
            ).format(
                n=n,
                changed=changed,
                tokens=", ".join(repr(after[i]["lease_token"]) for i in changed) or "-",
                returned=_claim_text(got),
                before=returned,
            ),
            _(
                "return dict(row) of the row your UPDATE ... RETURNING * gave back, in the "
                "same statement: a SELECT afterwards finds the worker's other jobs too"
            ),
        )
        returned.append(_id(got))


#: A lease that ends later in the same second as now (x.75 or x.625): exact in binary.
SAME_SECOND = 1 / 64


def _fraction_now(seed: int, label: str) -> float:
    rng = Random(f"{seed}:{label}")
    return rng.randint(100, 10_000) + rng.choice([0.75, 0.625])


@CHECKS.add(
    2,
    "now is a float and a lease holds to the fraction of a second: a claim at x.75 never "
    "takes a job whose lease ends at x.77 (nor the job behind that serial head); now "
    "rounded or cut to whole seconds (round, ceil, :.0f) takes it from the worker still "
    "running it",
    severe=True,
)
def a_lease_holds_to_the_fraction_of_a_second(ns: Namespace) -> None:
    for seed in scene_seeds():
        now = _fraction_now(seed, "fraction")
        until = now + SAME_SECOND
        for name, extra in (("claim_capped", (2,)), ("claim_serial", ())):
            with lab_file(ns) as (conn, path):
                held = add_job(conn, "acme:0", **live("acme", 0, lease_until=until))
                behind = add_job(conn, "acme:1", queue="acme")
                got = claim(ns, path, name, "w1", now, *extra)
                owner = job(conn, held)["lease_owner"]
            serial = name == "claim_serial"
            call = f"{name}(conn, 'w1', now={now!r}{''.join(f', {e!r}' for e in extra)})"
            expect(
                _id(got) != held and owner == "other" and not (serial and got is not None),
                _(
                    "{call}: job {held} runs under a lease until {until!r}, still live at "
                    "now, so the claim leaves it to its worker{serial}"
                ).format(
                    call=call,
                    held=held,
                    until=until,
                    serial=_(" and job {behind}, behind that head, waits").format(behind=behind)
                    if serial
                    else "",
                ),
                _("it took {claimed}; job {held}'s lease_owner is {owner}").format(
                    claimed=_claim_text(got), held=held, owner=repr(owner)
                ),
                _("compare with now as it is given, fraction and all: never round it"),
            )


@CHECKS.add(
    1,
    "due times, ended leases and the cap count to the fraction of a second: at now = x.75, "
    "a job due at x.25 is ready (one due at x.77 is not yet), a lease that ended at x.5 "
    "frees its job and its account, "
    "and a lease until x.77 still holds the account at its cap (int(now), round(now) run "
    "them a second off); below the millisecond too: a job due at now itself is taken, "
    "and updated_at and lease_until are written from now as given (round(now, 3) is not)",
)
def due_times_count_to_the_fraction_of_a_second(ns: Namespace) -> None:
    for seed in scene_seeds():
        now = _fraction_now(seed, "due")
        whole = float(int(now))
        for name, extra in (("claim_capped", (1,)), ("claim_serial", ())):
            with lab_file(ns) as (conn, path):
                ended = add_job(conn, "acme:0", **live("acme", 0, run_after=0.0,
                                                       lease_until=whole + 0.5))  # fmt: skip
                add_job(conn, "acme:1", queue="acme")
                due = add_job(conn, "bolt:0", queue="bolt", run_after=whole + 0.25)
                # Due a 64th of a second after now: not yet (no grace for clock skew).
                add_job(conn, "cora:0", queue="cora", run_after=now + SAME_SECOND)
                got = [_id(claim(ns, path, name, f"w{n}", now, *extra)) for n in (1, 2, 3)]
            expect(
                got == [ended, due, None],
                _(
                    "{name} at now={now!r}: job {ended} (its lease ended at {until!r}), then "
                    "job {due} (due at {at!r}), then None (cora's job is due at {later!r}, "
                    "after now)"
                ).format(
                    name=name,
                    now=now,
                    ended=ended,
                    until=whole + 0.5,
                    due=due,
                    at=whole + 0.25,
                    later=now + SAME_SECOND,
                ),
                _("the claims took {got}").format(got=got),
                _(
                    "compare with now as it is given, fraction and all: never cut it to an "
                    "int, and take a job only once run_after <= now (no grace)"
                ),
            )
        with lab_file(ns) as (conn, path):
            add_job(conn, "acme:0", **live("acme", 0, lease_until=now + SAME_SECOND))
            add_job(conn, "acme:1", queue="acme")
            got = capped(ns, path, "w1", 1, now)
        expect(
            got is None,
            _(
                "claim_capped(..., cap=1) at now={now!r}: None, acme runs a job under a lease "
                "until {until!r}, still at its cap"
            ).format(now=now, until=now + SAME_SECOND),
            _claim_text(got),
            _("compare with now as it is given, fraction and all: never round it"),
        )
        # A quarter of a millisecond past x.75 (2**-12, exact in binary): now rounded or
        # cut to the millisecond falls before the job's run_after, and writes another time.
        fine = now + 2**-12
        for name, extra in (("claim_capped", (1,)), ("claim_serial", ())):
            with lab_file(ns) as (conn, path):
                due = add_job(conn, "bolt:0", queue="bolt", run_after=fine)
                took = claim(ns, path, name, "w1", fine, *extra)
                stored = job(conn, due)
            written = {k: stored[k] for k in ("state", "lease_until", "updated_at")}
            want = {"state": "running", "lease_until": fine + 30.0, "updated_at": fine}
            expect(
                _id(took) == due and written == want,
                _(
                    "{name} at now={now!r} takes job {due}, due at now itself, with "
                    "lease_until {until!r} and updated_at {now!r}"
                ).format(name=name, now=fine, due=due, until=fine + 30.0),
                _("it took {claimed}; job {due} holds {written}").format(
                    claimed=_claim_text(took), due=due, written=written
                ),
                _(
                    "pass now to the SQL as it is given: never round it, not even to the "
                    "millisecond"
                ),
            )


@CHECKS.add(
    2,
    "the new lease_token is written by the same statement that takes the job: a token set "
    "by a second UPDATE leaves the old one on the job meanwhile, and the old holder (its "
    "lease ended, still running) finishes the job with it while the new one runs it too",
    severe=True,
)
def the_old_holder_is_fenced_off_by_the_claim_itself(ns: Namespace) -> None:
    for name, extra in (("claim_capped", (2,)), ("claim_serial", ())):
        with lab_file(ns) as (conn, path):
            claim(ns, path, name, "probe", NOW, *extra)  # on an empty table: a stub says so
            job_id = add_job(
                conn,
                "acme:1",
                **live("acme", 1, lease_owner="w0", lease_until=NOW - 1, lease_token=OLD_TOKEN),
            )
            got = ns.harness(
                HARNESS + "claim_while_the_old_holder_finishes",
                str(path),
                name,
                "w1",
                NOW,
                30.0,
                job_id,
                *extra,
            )
            state = job(conn, job_id)["state"]
        if "raised" in got:
            continue  # a claim that fails: the other checks name that
        expect(
            not (got.get("taken") and _id(got.get("returned")) == job_id),
            _(
                "{name}: w1 takes job {job_id} from w0 (its lease ended at {until:g}); once "
                "w1's claim wrote, w0's finish fenced on its old token {token!r} changes "
                "nothing"
            ).format(name=name, job_id=job_id, until=NOW - 1, token=OLD_TOKEN),
            _(
                "w0 finished the job with its old token after w1's first write (the job is "
                "{state}), and w1 got the job to run as well: two holders"
            ).format(state=state),
            _(
                "set lease_token = lower(hex(randomblob(16))) in the UPDATE that takes the "
                "job, not in a statement after it"
            ),
        )


@CHECKS.add(
    1,
    "a worker killed in the middle of its claim leaves the job as it was or wholly "
    "claimed (running, attempt + 1, its lease, a new token, updated_at), never half: "
    "take it in one UPDATE, not a second statement for the attempt, the lease or the token",
    timeout=40.0,
)
def a_claim_killed_midway_leaves_no_half_claim(ns: Namespace) -> None:
    old = {
        "queue": "acme",
        "state": "retry_wait",
        "attempt": 2,
        "run_after": NOW - 5,
        "lease_owner": "w0",
        "lease_until": 50.0,
        "lease_token": OLD_TOKEN,
        "updated_at": 60.0,
    }
    fields = ("state", "attempt", "lease_owner", "lease_until", "lease_token", "updated_at")
    whole = {"state": "running", "attempt": 3, "lease_owner": "w1"}

    def make(folder: Path) -> None:
        conn = lab_db(folder / "jobs.db")
        add_job(conn, "acme:1", **old)
        conn.close()

    def judge(folder: Path) -> tuple[bool, str]:
        with reading(folder / "jobs.db") as conn:
            row = all_jobs(conn)[0]
        left = {k: row[k] for k in fields}
        untouched = all(left[k] == old[k] for k in fields)
        # The lease and updated_at exactly as given are other checks' business: here, a
        # live lease and a new token, written with the rest.
        claimed = (
            all(left[k] == v for k, v in whole.items())
            and left["lease_token"] not in (None, OLD_TOKEN)
            and (left["lease_until"] or 0) > NOW
            and left["updated_at"] != old["updated_at"]
        )
        return untouched or claimed, _("job 1 holds {left}").format(left=left)

    for name, extra in (("claim_capped", [2]), ("claim_serial", [])):
        after_every_kill(
            ns,
            HARNESS + "claim_kills",
            make,
            [name, "w1", NOW, 30.0, extra],
            judge,
            _(
                "{name}: job 1 (in retry_wait at attempt 2, w0's old lease on it) as it was, "
                "or running for w1 at attempt 3 under a new lease (until {until:g}) and a "
                "new token,"
            ).format(name=name, until=NOW + 30),
            _("no restart (the worker is gone)"),
            _(
                "set state, attempt, lease_owner, lease_until, lease_token and updated_at in "
                "the one UPDATE that takes the job"
            ),
        )


@CHECKS.add(
    2,
    "a long-lived worker claims on one connection with the cap and lease_s of each call: "
    "SQL built once with the first call's cap or lease_s formatted in (a module global, a "
    "cache) applies them to every later claim, so a lease ends before its worker is done "
    "and another takes the job too",
    severe=True,
)
def each_call_uses_its_own_cap_and_lease_s(ns: Namespace) -> None:
    for seed in scene_seeds():
        rng = Random(f"{seed}:each call")
        leases = (
            rng.randint(5, 60) + 0.5,
            float(rng.randint(61, 600)) + 0.25,
            float(rng.randint(601, 7200)),
        )
        # (the claim, [(cap or None, lease_s, the job's index or None)], the jobs' queues)
        scenes = (
            (
                "claim_capped",
                [(1, leases[0], 0), (1, leases[1], None), (2, leases[1], 1), (3, leases[2], 2)],
                ["acme", "acme", "acme"],
            ),
            (
                "claim_serial",
                [(None, lease, n) for n, lease in enumerate(leases)],
                ["order:1", "order:2", "order:3"],
            ),
        )
        for name, steps, queues in scenes:
            with lab_file(ns) as (conn, path):
                ids = [add_job(conn, f"{q}:{n}", queue=q) for n, q in enumerate(queues)]
                calls = [
                    ["w1", NOW, lease, *([] if cap is None else [cap])]
                    for cap, lease, _job in steps
                ]
                got = ns.harness(HARNESS + "on_one_connection", name, str(path), calls)
                stored = {j["id"]: j for j in all_jobs(conn)}
            want = [None if n is None else ids[n] for _cap, _lease, n in steps]
            claimed = [
                g["returned"].get("id") if isinstance(g.get("returned"), dict) else None
                for g in got
            ]
            leased = {ids[n]: NOW + lease for _cap, lease, n in steps if n is not None}
            held = {i: stored[i]["lease_until"] for i in leased}
            steps_text = "; ".join(
                (f"cap={cap}, " if cap is not None else "")
                + f"lease_s={lease:g}: "
                + ("None" if n is None else _("job {job_id}").format(job_id=ids[n]))
                for cap, lease, n in steps
            )
            expect(
                claimed == want and held == leased,
                _(
                    "{name} at now={now:g}, {count} times on one connection ({steps}), each "
                    "job leased until now + the lease_s of its own call: {leased}"
                ).format(name=name, now=NOW, count=len(steps), steps=steps_text, leased=leased),
                _("the claims {calls}; lease_until in the table {held}").format(
                    calls=", ".join(
                        raised_text(g) if "raised" in g else repr(c)
                        for g, c in zip(got, claimed, strict=True)
                    ),
                    held=held,
                ),
                _(
                    "pass cap and lease_s as :named parameters on every call; never keep SQL "
                    "with the first call's values written in"
                ),
            )


@CHECKS.add(
    1,
    "ready jobs (ready heads) due at the same run_after go by id, whatever lease they "
    "still hold: a job whose worker died, or a retry whose failed run left its lease, "
    "is no later (nor sooner) for it (no lease_until in the ORDER BY)",
)
def ties_go_by_id_whatever_lease_a_job_still_holds(ns: Namespace) -> None:
    orphan = {"state": "running", "attempt": 1, "lease_owner": "w0", "lease_token": "old",
              "lease_until": 60.0, "run_after": 50.0}  # fmt: skip
    retry = {"state": "retry_wait", "attempt": 1, "lease_owner": "w0", "lease_token": "old",
             "lease_until": 70.0, "run_after": 50.0}  # fmt: skip
    fresh = {"state": "pending", "attempt": 0, "run_after": 50.0}
    for name, extra in (("claim_capped", (3,)), ("claim_serial", ())):
        for held in (orphan, retry):
            for held_first in (True, False):
                with lab_file(ns) as (conn, path):
                    order = [("acme", held), ("bolt", fresh)]
                    if not held_first:
                        order.reverse()
                    ids = [add_job(conn, f"{q}:1", queue=q, **fields) for q, fields in order]
                    got = [_id(claim(ns, path, name, f"w{n}", NOW, *extra)) for n in (1, 2)]
                scene = "; ".join(
                    f"{i} {q} {f['state']} run_after=50"
                    + (f" lease_until={f['lease_until']:g}" if "lease_until" in f else "")
                    for i, (q, f) in zip(ids, order, strict=True)
                )
                expect(
                    got == ids,
                    _(
                        "{name} at now=100 (jobs: {scene}) takes jobs {job_ids} in id order: "
                        "both are due at 50"
                    ).format(name=name, scene=scene, job_ids=ids),
                    _("the claims took {got}").format(got=got),
                    _(
                        "order by run_after, then id: the lease a job still holds from its "
                        "last run is no tie-break"
                    ),
                )


@CHECKS.add(
    1,
    "least busy is the count of an account's live running jobs, counted afresh at every "
    "claim: not a share of its jobs or of its backlog (a flood with two running is busier "
    "than an account with one), and nothing kept from the last claim (ties go by "
    "run_after, then id, never by whom the worker served last)",
)
def least_busy_is_a_live_count_at_every_claim(ns: Namespace) -> None:
    for seed in scene_seeds():
        rng = Random(f"{seed}:least busy count")
        flood_running, flood_ready = rng.randint(2, 4), rng.randint(15, 40)
        cap = flood_running + 2
        with lab_file(ns) as (conn, path):
            for n in range(flood_running):
                add_job(conn, f"acme:run:{n}", **live("acme"))
            first = add_job(conn, "acme:0", queue="acme", run_after=0.0)
            for n in range(1, flood_ready):
                add_job(conn, f"acme:{n}", queue="acme", run_after=float(n))
            add_job(conn, "bolt:run:0", **live("bolt"))
            bolts = add_job(conn, "bolt:1", queue="bolt", run_after=10.0)
            got = _id(capped(ns, path, "w1", cap))
        expect(
            got == bolts,
            _(
                "claim_capped with cap={cap}: bolt's job {bolt} (bolt runs 1 job, acme {running} "
                "with {ready} more waiting), though acme's job {acme} is older: busy is a count, "
                "not a share of the account's jobs"
            ).format(cap=cap, bolt=bolts, running=flood_running, ready=flood_ready, acme=first),
            _("job {job_id}").format(job_id=got),
            _(
                "order by the count of the account's running jobs with lease_until > now, "
                "divided by nothing"
            ),
        )
    with lab_file(ns) as (conn, path):
        add_job(conn, "acme:run", **live("acme"))
        b1 = add_job(conn, "bolt:1", queue="bolt", run_after=0.0)
        a1 = add_job(conn, "acme:1", queue="acme", run_after=5.0)
        b2 = add_job(conn, "bolt:2", queue="bolt", run_after=1.0)
        calls = [["w1", NOW, 30.0, 5] for _n in range(3)]
        got = ns.harness(HARNESS + "on_one_connection", "claim_capped", str(path), calls)
    claimed = [
        g["returned"].get("id") if isinstance(g.get("returned"), dict) else None for g in got
    ]
    expect(
        claimed == [b1, b2, a1],
        _(
            "claim_capped three times on one connection (cap=5; acme runs 1 job; bolt's jobs "
            "{b1} due at 0 and {b2} due at 1, acme's {a1} due at 5): jobs {want}, the second "
            "because bolt and acme then run 1 each and bolt's is due first"
        ).format(b1=b1, b2=b2, a1=a1, want=[b1, b2, a1]),
        _("the claims {calls}").format(
            calls=", ".join(
                raised_text(g) if "raised" in g else repr(c)
                for g, c in zip(got, claimed, strict=True)
            )
        ),
        _("keep no account served last between claims: the table alone decides the order"),
    )
    # Busy counts every live running job of the account, newer than the waiting one or
    # not: acme's retry (job 1) waits while acme runs two jobs saved after it.
    with lab_file(ns) as (conn, path):
        retry = add_job(conn, "acme:1", queue="acme", state="retry_wait", attempt=1,
                        run_after=0.0)  # fmt: skip
        for n in (2, 3):
            add_job(conn, f"acme:{n}", **live("acme", n))
        add_job(conn, "bolt:1", **live("bolt", 1))
        bolt = add_job(conn, "bolt:2", queue="bolt", run_after=50.0)
        got = _id(capped(ns, path, "w1", 5))
    expect(
        got == bolt,
        _(
            "claim_capped with cap=5: bolt's job {bolt} (bolt runs 1 job), not acme's retry "
            "{retry} (acme runs 2 jobs, saved after the retry), though the retry is older"
        ).format(bolt=bolt, retry=retry),
        _("job {job_id}").format(job_id=got),
        _(
            "count all of the account's live running jobs, whatever their ids: not only "
            "those saved before the job you take"
        ),
    )


@CHECKS.add(
    1,
    "each claim uses the now it is given, on a long-lived connection too: never the "
    "largest now seen so far (a clock kept in a module global, a class, a default "
    "argument or a dict by id(conn)), or a claim at an earlier now takes a job whose "
    "lease has not ended, or one not due yet",
    severe=True,
)
def each_claim_uses_the_now_it_is_given(ns: Namespace) -> None:
    later = NOW + 200.0
    for name, extra in (("claim_capped", [5]), ("claim_serial", [])):
        with lab_file(ns) as (conn, path):
            first = add_job(conn, "acme:1", queue="acme")
            add_job(conn, "bolt:1", queue="bolt", state="running", attempt=1,
                    lease_owner="w0", lease_token="old", lease_until=NOW + 50.0,
                    run_after=0.0)  # fmt: skip
            add_job(conn, "cora:1", queue="cora", run_after=NOW + 100.0)
            calls = [["w1", later, 30.0, *extra], ["w2", NOW, 30.0, *extra]]
            # One connection object for both calls: a clock kept per id(conn) shows too.
            got = ns.harness(HARNESS + "on_one_connection", name, str(path), calls)
            stored = {j["id"]: j for j in all_jobs(conn)}
        claimed = [
            g["returned"].get("id") if isinstance(g.get("returned"), dict) else None for g in got
        ]
        owners = {i: j["lease_owner"] for i, j in stored.items()}
        expect(
            claimed == [first, None] and "raised" not in got[1],
            _(
                "{name} on one connection at now={later:g} (job {first}), then at now={now:g}: "
                "None, since bolt's job is leased to w0 until {until:g} and cora's is due at "
                "{due:g}"
            ).format(
                name=name, later=later, first=first, now=NOW, until=NOW + 50.0, due=NOW + 100.0
            ),
            _("the claims {calls}; the lease owners in the table {owners}").format(
                calls=", ".join(
                    raised_text(g) if "raised" in g else repr(c)
                    for g, c in zip(got, claimed, strict=True)
                ),
                owners=owners,
            ),
            _("pass the now of each call as :now; keep no clock of your own between calls"),
        )


@CHECKS.add(
    1,
    "a job whose worker died is taken back by the next claim in the same process: a "
    "queue or account this process took before is not skipped (no set of taken queues "
    "kept between calls), or its line never runs again there",
    severe=True,
)
def a_job_taken_before_comes_back_in_the_same_process(ns: Namespace) -> None:
    later = NOW + 100.0
    for name, extra in (("claim_capped", [1]), ("claim_serial", [])):
        with lab_file(ns) as (conn, path):
            first = add_job(conn, "order:7:a", queue="order:7")
            add_job(conn, "order:7:b", queue="order:7")
            calls = [["w1", NOW, 30.0, *extra], ["w2", later, 30.0, *extra]]
            got = ns.harness(HARNESS + "on_one_connection", name, str(path), calls)
            owner = job(conn, first)["lease_owner"]
        claimed = [
            g["returned"].get("id") if isinstance(g.get("returned"), dict) else None for g in got
        ]
        expect(
            claimed == [first, first] and owner == "w2",
            _(
                "{name} in one process at now={now:g}, then at now={later:g}: job {first} both "
                "times, since its lease ended at {until:g} (its worker died) and it is still "
                "the first of queue order:7"
            ).format(name=name, now=NOW, later=later, first=first, until=NOW + 30.0),
            _("the claims {calls}; job {first}'s lease_owner {owner!r}").format(
                calls=", ".join(
                    raised_text(g) if "raised" in g else repr(c)
                    for g, c in zip(got, claimed, strict=True)
                ),
                first=first,
                owner=owner,
            ),
            _("keep no queue or account aside between calls: the table alone decides"),
        )


@CHECKS.add(
    1,
    "a long-lived worker serves accounts and serial queues that appear after it started: "
    "keep nothing read from the table (the accounts, the queues) between claims, or a new "
    "customer's jobs never run on that worker",
    severe=True,
)
def accounts_and_queues_that_come_later_are_served(ns: Namespace) -> None:
    for name, extra, queues in (
        ("claim_capped", [2], ("acme", "bolt")),
        ("claim_serial", [], ("order:1", "order:2")),
    ):
        steps = [
            [[{"key": f"{queue}:a", "queue": queue}], ["w1", NOW + n, 30.0, *extra]]
            for n, queue in enumerate(queues)
        ]
        with lab_file(ns) as (conn, path):
            got = ns.harness(HARNESS + "claims_as_jobs_arrive", name, str(path), steps)
            ids = {j["key"]: j["id"] for j in all_jobs(conn)}
        want = [ids.get(f"{queue}:a") for queue in queues]
        claimed = [
            g["returned"].get("id") if isinstance(g.get("returned"), dict) else None for g in got
        ]
        expect(
            claimed == want,
            _(
                "{name} on one connection: job {first} of {old} at now={now:g}; then {new} "
                "gets its first job, {second}, and the claim at now={later:g} takes it"
            ).format(
                name=name,
                first=want[0],
                old=queues[0],
                now=NOW,
                new=queues[1],
                second=want[1],
                later=NOW + 1,
            ),
            _("the claims {calls}").format(
                calls=", ".join(
                    raised_text(g) if "raised" in g else repr(c)
                    for g, c in zip(got, claimed, strict=True)
                )
            ),
            _("read the accounts and queues from the table at every claim: cache none of them"),
        )


@CHECKS.add(
    1,
    "each claim returns dict(row), a plain dict of the job it took, not the sqlite3.Row "
    "itself (a Row has no .get and is no dict to a caller that copies or serialises it), "
    "with every column of the job as the table holds it after the claim (RETURNING *): "
    "the worker reads its kind, attempt and max_attempts from it",
)
def each_claim_hands_back_a_plain_dict(ns: Namespace) -> None:
    for name, extra in (("claim_capped", [2]), ("claim_serial", [])):
        with lab_file(ns) as (conn, path):
            # Claimed before (attempt 1, its run failed): the claim makes it attempt 2.
            first = add_job(conn, "acme:1", queue="acme", kind="sync", state="retry_wait",
                            attempt=1, max_attempts=5, run_after=NOW - 10,
                            last_error="timeout", updated_at=NOW - 40)  # fmt: skip
            got = ns.harness(
                HARNESS + "claim_returned_type", str(path), name, "w1", NOW, 30.0, *extra
            )
            stored = job(conn, first)
        expect(
            got.get("is_dict") is True and _id(got.get("returned")) == first,
            _("{name} returns dict(row) for job {first}: a dict").format(name=name, first=first),
            raised_text(got)
            if "raised" in got
            else _("it returned a {kind}").format(kind=got.get("type")),
            _("return None if row is None else dict(row)"),
        )
        returned = got["returned"]
        differ = sorted(k for k in stored if k not in returned or returned[k] != stored[k])
        expect(
            not differ,
            _(
                "{name} returns job {first} with every column as the table holds it after the "
                "claim: {row}"
            ).format(name=name, first=first, row=stored),
            _("it returned {row} ({columns} missing or other than the table's)").format(
                row=returned, columns=", ".join(differ)
            ),
            _(
                "return dict(row) of the row your UPDATE ... RETURNING * gave back: every "
                "column, with the values the claim wrote (attempt + 1 included)"
            ),
        )


#: Another worker's take, run between a claim's read and its write: an operator redrove
#: a dead job and that worker claimed it at once (it runs again, under a live lease).
_REDRIVEN_AND_TAKEN = (
    "UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = 'w2',"
    " lease_until = :until, lease_token = 'w2-token', updated_at = :now,"
    " redrives = redrives + 1 WHERE id = :id AND state = 'dead'"
)


@CHECKS.add(
    2,
    "a claim that picks in one statement and takes in another must test the cap (or the "
    "head) again when it takes: another worker's take between its read and its write "
    "fills the account's cap, or makes an older job of the serial queue its running head",
    severe=True,
)
def a_take_between_the_read_and_the_write_still_counts(ns: Namespace) -> None:
    for name, extra in (("claim_capped", (2,)), ("claim_serial", ())):
        queue, limit = ("acme", 2) if name == "claim_capped" else ("order:7", 1)
        with lab_file(ns) as (conn, path):
            dead = add_job(conn, f"{queue}:0", queue=queue, state="dead", attempt=3,
                           run_after=10.0, dead_reason="timeout", updated_at=40.0)  # fmt: skip
            if name == "claim_capped":
                add_job(conn, f"{queue}:r", **live(queue, 1))
            add_job(conn, f"{queue}:1", queue=queue, run_after=50.0)
            add_job(conn, f"{queue}:2", queue=queue, run_after=60.0)
            got = ns.harness(
                HARNESS + "claim_with_a_take_after_its_read",
                str(path),
                name,
                "w1",
                NOW,
                30.0,
                _REDRIVEN_AND_TAKEN,
                {"id": dead, "now": NOW, "until": NOW + 300},
                *extra,
            )
            runs = running(conn, queue)
        if "raised" in got:
            continue  # a claim that fails: the other checks name that
        expect(
            runs <= limit,
            (
                _(
                    "claim_capped(..., cap=2): acme runs 1 job, so the claim reads a job to "
                    "take; before it takes it, worker w2 takes acme's redriven job {job_id} "
                    "(acme runs 2: its cap), so the claim takes no job of acme"
                )
                if name == "claim_capped"
                else _(
                    "claim_serial: the claim reads the head of order:7; before it takes it, "
                    "job {job_id} (older, dead) is redriven and worker w2 takes it: it is "
                    "the running head now, so the claim takes no job of order:7"
                )
            ).format(job_id=dead),
            _(
                "{queue} runs {runs} jobs under live leases after the claim, which took {took}"
            ).format(queue=queue, runs=runs, took=_claim_text(got.get("returned"))),
            _(
                "choose and take in one UPDATE ... WHERE id = (SELECT ...); a guarded UPDATE "
                "after a SELECT must test the cap (or that the job is still its queue's head) "
                "again, not only that the job is still ready"
            ),
        )


@CHECKS.add(
    1,
    "ready jobs (and ready heads) go by run_after to the fraction of a second: a job due "
    "at x.25 goes before one saved earlier but due at x.75 of the same second",
)
def jobs_due_within_one_second_go_by_their_fraction(ns: Namespace) -> None:
    whole = float(int(NOW)) + 7
    now = whole + 1.5
    for name, extra, queues in (
        ("claim_capped", (5,), ("acme", "bolt")),
        ("claim_serial", (), ("order:1", "order:2")),
    ):
        with lab_file(ns) as (conn, path):
            later = add_job(conn, f"{queues[0]}:0", queue=queues[0], run_after=whole + 0.75)
            sooner = add_job(conn, f"{queues[1]}:0", queue=queues[1], run_after=whole + 0.25)
            got = [_id(claim(ns, path, name, f"w{n}", now, *extra)) for n in (1, 2)]
        expect(
            got == [sooner, later],
            _(
                "{name} at now={now!r}: job {sooner} (due at {at!r}), then job {later} "
                "(saved before it, but due at {after!r})"
            ).format(
                name=name, now=now, sooner=sooner, at=whole + 0.25, later=later, after=whole + 0.75
            ),
            _("the claims took {got}").format(got=got),
            _(
                "order by run_after as it is stored, fraction and all (never CAST it to an "
                "integer or round it), then by id"
            ),
        )
