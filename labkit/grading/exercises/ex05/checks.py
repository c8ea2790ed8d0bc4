"""Exercise 5: a handler that survives a crash after its effect.

The student writes ``choose_ack``, ``charge_handler`` (a payment through the world's
payment API, which honours an Idempotency-Key) and ``post_handler`` (an entry in the
application's own ledger). Each check runs the job through the harness
(``labkit.grading.exercises.ex05.harness``: a real worker,
``labkit.explore.run_scenario``) in a
folder under the student's folder, crashing the worker once at one point (a fixed
seed, a fresh worker after the crash), asserts that the crash really fired, then
opens the job store and the world's database itself: exactly one effect is ``ok``.
The ledger handler is crashed after each of its commits in turn, so work split over
several transactions is caught wherever the split is.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from labkit.clock import LAB_EPOCH, FakeClock
from labkit.explore.matrix import Scenario, judge
from labkit.faults import LOST_RESPONSE, POINTS
from labkit.grading.checks import Checks, Namespace, expect
from labkit.grading.exercises.ex05.harness import LEDGER_COMMIT
from labkit.grading.exercises.helpers import because_of
from labkit.store import JobStore
from labkit.world import World

CHECKS = Checks(
    "ex05",
    "a handler safe against a crash after the effect",
    needs=("choose_ack", "charge_handler", "post_handler"),
)

HARNESS = "labkit.grading.exercises.ex05.harness:"
SEED = 5
CHARGE = (("charge", {"customer": "cus_42", "amount": 4200}, "billing:42:charge:v1"),)
POST = (("post", {"customer": "cus_42", "amount": 4200}, "ledger:42:post:v1"),)
#: The ledger handler is crashed after its 1st, 2nd and 3rd commit, one run each.
LEDGER_COMMITS = 3


class Run:
    """What one run did: the faults that fired, the handler's errors, and the verdict
    the check read from the job store and the world itself."""

    def __init__(self, got: dict[str, Any], outcome: str, effects: int) -> None:
        self.fired: list[str] = got.get("fired", [])
        self.errors: list[str] = got.get("handler_errors", [])
        self.replay: str = got.get("replay", "")
        self.outcome, self.effects = outcome, effects


def run_job(
    ns: Namespace,
    which: str,
    faults: list[list[Any]],
    jobs: tuple[tuple[str, dict[str, Any], str], ...] | None = None,
    seed: int = SEED,
) -> Run:
    """Run the job(s) through the student's handler in the harness and judge the world."""
    jobs = jobs or (CHARGE if which == "charge" else POST)
    with tempfile.TemporaryDirectory(prefix="labkit-ex05-", dir=ns.workdir) as tmp:
        got = ns.harness(HARNESS + "run", which, tmp, faults, seed, [list(j) for j in jobs])
        expect(
            got["ack"] in ("late", "first"),
            "choose_ack() to return 'late' or 'first'",
            got["ack"],
        )
        service = "payments" if which == "charge" else "ledger"
        scenario = Scenario("judge", {}, service=service, jobs=jobs)
        clock = FakeClock(LAB_EPOCH)
        with (
            JobStore(Path(tmp) / "jobs.db", clock) as store,
            World(Path(tmp) / "world.db", clock) as world,
        ):
            outcome, effects = judge(world, store, scenario)
    return Run(got, outcome, effects)


def _raised(run: Run, which: str) -> str:
    return run.errors[0] if run.errors else ""


def _judge(ns: Namespace, which: str, points: tuple[str, ...], action: str = "crash") -> None:
    for point in points:
        if point == LEDGER_COMMIT:
            _judge_every_commit(ns)
            continue
        run = run_job(ns, which, [[point, action, 1]])
        what = "a lost reply" if action == "lose_response" else "a crash"
        where = {LOST_RESPONSE: "right after the payment API charged"}.get(point, f"at {point}")
        expect(
            bool(run.fired),
            f"{what} {where} to fire",
            _raised(run, which)
            or "it never fired: the run never got there "
            + {LOST_RESPONSE: "(does the handler call ctx.world.payments.charge?)"}.get(point, ""),
        )
        noun = "charge" if which == "charge" else "ledger entry"
        expect(
            run.outcome == "ok",
            f"exactly one {noun} after {what} {where}" + _unless_broken_anyway(ns, which, run),
            f"{run.outcome}: {run.effects} effect(s) ({run.replay})"
            + (f"; {_raised(run, which)}" if run.errors else ""),
        )


def _unless_broken_anyway(ns: Namespace, which: str, run: Run) -> str:
    """Point at the no-fault check when the job goes wrong even without a crash."""
    if run.outcome == "ok" or run_job(ns, which, []).outcome == "ok":
        return ""
    return because_of(f"{which}_runs_once_without_faults")


def _judge_every_commit(ns: Namespace) -> None:
    """Crash right after the handler's 1st, 2nd, 3rd ledger commit (one run each).

    The first must fire (the handler writes to the ledger); later ones fire only for a
    handler that commits more than once, and that is where split work breaks.
    """
    for nth in range(1, LEDGER_COMMITS + 1):
        run = run_job(ns, "post", [[LEDGER_COMMIT, "crash", nth]])
        if nth == 1:
            expect(
                bool(run.fired),
                "a crash right after the first ledger commit to fire",
                _raised(run, "post")
                or "it never fired: the run never got there (does the handler write "
                "through ctx.world.ledger?)",
            )
        elif not run.fired:
            return
        expect(
            run.outcome == "ok",
            "exactly one ledger entry after a crash right after the "
            + (
                "first ledger commit"
                if nth == 1
                else f"ledger commit number {nth} (work split over several transactions: "
                "a crash between them repeats the first part)"
            )
            + _unless_broken_anyway(ns, "post", run),
            f"{run.outcome}: {run.effects} entries ({run.replay})",
        )


@CHECKS.add(1, "the job runs once and succeeds when nothing goes wrong", timeout=30.0)
def charge_runs_once_without_faults(ns: Namespace) -> None:
    run = run_job(ns, "charge", [])
    expect(
        run.outcome == "ok" and run.effects == 1,
        "one charge, job succeeded",
        f"{run.outcome} with {run.effects} charge(s)"
        + (f"; {_raised(run, 'charge')}" if run.errors else ""),
    )


@CHECKS.add(
    1, "the entry is posted once and the job succeeds when nothing goes wrong", timeout=30.0
)
def post_runs_once_without_faults(ns: Namespace) -> None:
    run = run_job(ns, "post", [])
    expect(
        run.outcome == "ok" and run.effects == 1,
        "one ledger entry, job succeeded",
        f"{run.outcome} with {run.effects} entries"
        + (f"; {_raised(run, 'post')}" if run.errors else ""),
    )


@CHECKS.add(
    1, "a crash before the effect is easy: the job is redelivered and runs", timeout=30.0,
    severe=True,
)
def charge_survives_crash_before_effect(ns: Namespace) -> None:
    _judge(ns, "charge", ("after_claim", "before_effect"))


@CHECKS.add(
    3,
    "after the charge, before the job is recorded, the worker dies and the job runs "
    "again: send idempotency_key=job.key so the payment API answers the second "
    "call with the first reply instead of charging twice (a ledger check in "
    "another transaction does not help: the crash falls between the two)",
    timeout=30.0,
    severe=True,
)
def charge_survives_crash_after_effect(ns: Namespace) -> None:
    _judge(ns, "charge", (LOST_RESPONSE, "after_effect", "before_commit"))


@CHECKS.add(
    2,
    "acknowledge after the handler (ack 'late'): acknowledging first marks the job "
    "done before the charge, and a crash in between loses it",
    timeout=30.0,
    severe=True,
)
def charge_survives_crash_after_commit(ns: Namespace) -> None:
    _judge(ns, "charge", ("after_commit", "after_ack"))


@CHECKS.add(
    2,
    "the API charged and the reply was lost (a timeout): the retry must carry the "
    "same Idempotency-Key, the job's key, never a new one per attempt",
    timeout=30.0,
    severe=True,
)
def charge_survives_lost_response(ns: Namespace) -> None:
    _judge(ns, "charge", (LOST_RESPONSE,), action="lose_response")


@CHECKS.add(
    3,
    "the ledger is our own database: check, post and mark 'done' inside one "
    "`with ctx.world.ledger.transaction() as tx:` so they commit together",
    timeout=30.0,
    severe=True,
)
def post_survives_every_crash(ns: Namespace) -> None:
    _judge(ns, "post", (LEDGER_COMMIT, *POINTS))


@CHECKS.add(
    2,
    "a job can be delivered twice at the same moment (a lease ran out while the first "
    "worker was still busy): read the mark inside the same "
    "`with ctx.world.ledger.transaction() as tx:` that posts and marks, so the second "
    "delivery waits for the first and then sees 'done'",
    timeout=20.0,
    severe=True,
)
def post_survives_two_deliveries_at_once(ns: Namespace) -> None:
    [job] = POST
    with tempfile.TemporaryDirectory(prefix="labkit-ex05-", dir=ns.workdir) as tmp:
        got = ns.harness(HARNESS + "two_deliveries", "post", tmp, list(job))
        with World(Path(tmp) / "world.db", FakeClock(LAB_EPOCH)) as world:
            entries = world.count(job[2], "ledger")
    errors = got["handler_errors"]
    expect(
        entries == 1,
        "exactly one ledger entry after two deliveries of the job at the same moment",
        f"{entries} entries (the deliveries ended: {'; '.join(got['deliveries'])})"
        + (f"; {errors[0]}" if errors else ""),
    )
