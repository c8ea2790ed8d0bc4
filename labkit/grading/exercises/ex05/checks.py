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

Beyond the one job of the scenes: invoices generated from the grading seed (one customer
billed the same amount twice, names that are prefixes of one another, ``_`` and
non-ASCII, names that differ only in case or in an accent, long keys that differ only at
the end), each effect of the amount and for the customer the job names, with the reply
kept as the job's result, a call to the API or the ledger that fails (it must fail the
attempt, so the job is retried, not swallowed), a job delivered twice at once, and the
handler called again in new processes, as a restarted worker would be: a key built with
``hash()`` or from a value computed at import changes there, and the restart charges
again.
"""

from __future__ import annotations

import random
import tempfile
from itertools import zip_longest
from pathlib import Path
from typing import Any

from labkit.clock import LAB_EPOCH, FakeClock
from labkit.explore.matrix import Scenario, judge
from labkit.faults import BEFORE_CALL, LOST_RESPONSE, POINTS
from labkit.grading.checks import Checks, Namespace, expect
from labkit.grading.exercises.ex05.harness import LEDGER_COMMIT, LEDGER_WRITE
from labkit.grading.exercises.helpers import because_of
from labkit.grading.exercises.killsweep import scene_seeds
from labkit.lang import _
from labkit.store import JobStore
from labkit.world import World
from labkit.world.records import Effect

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
#: How many failures in a row the payment API or the ledger gives in the retry checks:
#: more than a handler that retries by itself tries before it gives up.
IN_A_ROW = 5


class Run:
    """What one run did: the faults that fired, the handler's errors, and the verdict
    the check read from the job store and the world itself."""

    def __init__(
        self,
        got: dict[str, Any],
        outcome: str,
        effects: int,
        per_key: dict[str, int],
        done: dict[str, tuple[list[Effect], Any]] | None = None,
    ) -> None:
        self.fired: list[str] = got.get("fired", [])
        self.errors: list[str] = got.get("handler_errors", [])
        self.replay: str = got.get("replay", "")
        self.outcome, self.effects, self.per_key = outcome, effects, per_key
        #: Per job key: the effects the world recorded for it, and the result the job kept.
        self.done = done or {}


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
            per_key = {key: world.count(key, service) for _kind, _payload, key in jobs}
            done = {
                key: (
                    world.effects(service=service, key=key),
                    job.result if (job := store.get_by_key(key)) is not None else None,
                )
                for _kind, _payload, key in jobs
            }
    return Run(got, outcome, effects, per_key, done)


def _raised(run: Run, which: str) -> str:
    return run.errors[0] if run.errors else ""


def _judge(ns: Namespace, which: str, points: tuple[str, ...], action: str = "crash") -> None:
    for point in points:
        if point == LEDGER_COMMIT:
            _judge_every_commit(ns)
            continue
        run = run_job(ns, which, [[point, action, 1]])
        what = _("a lost reply") if action == "lose_response" else _("a crash")
        where = {LOST_RESPONSE: _("right after the payment API charged")}.get(
            point, _("at {point}").format(point=point)
        )
        expect(
            bool(run.fired),
            _("{what} {where} to fire").format(what=what, where=where),
            _raised(run, which)
            or _("it never fired: the run never got there")
            + " "
            + {LOST_RESPONSE: _("(does the handler call ctx.world.payments.charge?)")}.get(
                point, ""
            ),
        )
        exactly_one = (
            _("exactly one charge after {what} {where}")
            if which == "charge"
            else _("exactly one ledger entry after {what} {where}")
        )
        expect(
            run.outcome == "ok",
            exactly_one.format(what=what, where=where) + _unless_broken_anyway(ns, which, run),
            _("{outcome}: {effects} effect(s) ({replay})").format(
                outcome=run.outcome, effects=run.effects, replay=run.replay
            )
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
                or _(
                    "it never fired: the run never got there (does the handler write "
                    "through ctx.world.ledger?)"
                ),
            )
        elif not run.fired:
            return
        expect(
            run.outcome == "ok",
            (
                _("exactly one ledger entry after a crash right after the first ledger commit")
                if nth == 1
                else _(
                    "exactly one ledger entry after a crash right after the ledger commit "
                    "number {nth} (work split over several transactions: a crash between "
                    "them repeats the first part)"
                ).format(nth=nth)
            )
            + _unless_broken_anyway(ns, "post", run),
            _("{outcome}: {effects} entries ({replay})").format(
                outcome=run.outcome, effects=run.effects, replay=run.replay
            ),
        )


@CHECKS.add(
    1,
    "the job runs once and succeeds when nothing goes wrong: it charges job.payload's "
    "amount (already in cents) to its customer, as they are, and returns the API's reply",
    timeout=30.0,
)
def charge_runs_once_without_faults(ns: Namespace) -> None:
    run = run_job(ns, "charge", [])
    expect(
        run.outcome == "ok" and run.effects == 1,
        "one charge, job succeeded",
        _("{outcome} with {effects} charge(s)").format(outcome=run.outcome, effects=run.effects)
        + (f"; {_raised(run, 'charge')}" if run.errors else ""),
    )
    _what_each_job_did(ns, "charge")


@CHECKS.add(
    1,
    "the entry is posted once and the job succeeds when nothing goes wrong: it posts "
    "job.payload's amount for its customer, as they are, and returns tx.post's reply",
    timeout=30.0,
)
def post_runs_once_without_faults(ns: Namespace) -> None:
    run = run_job(ns, "post", [])
    expect(
        run.outcome == "ok" and run.effects == 1,
        "one ledger entry, job succeeded",
        _("{outcome} with {effects} entries").format(outcome=run.outcome, effects=run.effects)
        + (f"; {_raised(run, 'post')}" if run.errors else ""),
    )
    _what_each_job_did(ns, "post")


@CHECKS.add(
    1,
    "a crash before the effect is easy: the job is redelivered and runs",
    timeout=30.0,
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
    _two_deliveries(ns, "charge")


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
    _two_deliveries(ns, "post")


def _two_deliveries(ns: Namespace, which: str) -> None:
    """The job delivered to two workers at the same moment: one effect in the world."""
    [job] = CHARGE if which == "charge" else POST
    service = "payments" if which == "charge" else "ledger"
    with tempfile.TemporaryDirectory(prefix="labkit-ex05-", dir=ns.workdir) as tmp:
        got = ns.harness(HARNESS + "two_deliveries", which, tmp, list(job))
        with World(Path(tmp) / "world.db", FakeClock(LAB_EPOCH)) as world:
            entries = world.count(job[2], service)
    errors = got["handler_errors"]
    expect(
        entries == 1,
        _("exactly one charge after two deliveries of the job at the same moment")
        if which == "charge"
        else _("exactly one ledger entry after two deliveries of the job at the same moment"),
        (
            _("{entries} charge(s) (the deliveries ended: {deliveries})")
            if which == "charge"
            else _("{entries} entries (the deliveries ended: {deliveries})")
        ).format(entries=entries, deliveries="; ".join(got["deliveries"]))
        + (f"; {errors[0]}" if errors else ""),
        _(
            "two deliveries that both look first (payments.find, a ledger read) both find "
            "nothing and both charge: send idempotency_key=job.key, and the API itself "
            "answers the second with the first reply"
        )
        if which == "charge"
        else None,
    )


def invoices(kind: str, rng: random.Random) -> tuple[tuple[str, dict[str, Any], str], ...]:
    """Twelve jobs from one seed: the cases one fixed invoice never shows.

    One customer billed the same amount in two months (a key built from the payload
    makes the second look like a repeat), two keys that differ only after their first
    30 characters, two long ones that differ only after their first 100 (a truncated
    key), two longer ones that differ only in their first characters (a key cut to its
    end), a customer whose name starts another's, and names with ``_``, capitals and
    non-ASCII: two customers whose names differ only in case, and two only in an accent
    (a key lower-cased or folded to ASCII makes one look like a repeat of the other).
    """
    base = rng.choice(["cus_Ana", "cus_ana_1", "Cus_42", "cus_joão", "cus_Zoë"])
    other = base + rng.choice(["0", "_2", "ç"])
    amount = rng.choice([990, 4200, 12_345])
    month = rng.randrange(1, 12)
    stem = f"{'billing' if kind == 'charge' else 'ledger'}:{base}:2026-{month:02d}"
    rows = [
        (base, amount, f"{stem}:{kind}:v1"),
        (base, amount, f"{stem[:-2]}{month + 1:02d}:{kind}:v1"),  # the next month, same bill
        (base, amount + rng.randrange(1, 90), f"{stem}:{kind}:v2"),  # differs only at the end
        (other, amount, f"{stem.replace(base, other)}:{kind}:v1"),
        (rng.choice(["cliente_Ção", "CUS_Ñ"]), rng.randrange(100, 9_999), f"{kind}:{rng.random()}"),
    ]
    shout = base.upper() if base != base.upper() else base.lower()
    rows.append((shout, amount, f"{stem.replace(base, shout)}:{kind}:v1"))
    accented, plain = rng.choice([("cus_joão", "cus_joao"), ("cus_Zoë", "cus_Zoe")])
    rows += [(name, amount, f"{stem.replace(base, name)}:{kind}:v3") for name in (accented, plain)]
    lines = "/".join(f"line-{n:02d}" for n in range(10))
    rows += [(base, amount, f"{stem}:{kind}:{lines}:part-{n}") for n in (1, 2)]
    # Two keys that differ only at their start (the region), with the same 280 characters
    # after it: a key cut to its last 255 characters (the end is where keys differ,
    # usually) makes the second look like a repeat of the first.
    deep = "/".join(f"line-{n:02d}" for n in range(32))
    rows += [(base, amount, f"{region}/{stem}:{kind}:{deep}") for region in ("eu-west", "us-east")]
    rng.shuffle(rows)
    return tuple((kind, {"customer": c, "amount": a}, key) for c, a, key in rows)


def _each_once(ns: Namespace, which: str) -> None:
    for seed in scene_seeds():
        _each_once_in(ns, which, seed)


def _each_once_in(ns: Namespace, which: str, seed: int) -> None:
    jobs = invoices(which, random.Random(f"ex05 {which} {seed}"))
    run = run_job(ns, which, [["after_effect", "crash", 1]], jobs=jobs)
    fired = _raised(run, which) or _("it never fired")
    expect(bool(run.fired), "the crash at after_effect to fire", fired)
    each_once = (
        _("one charge per invoice for {count} jobs ({keys}), a crash at after_effect on the first")
        if which == "charge"
        else _(
            "one ledger entry per job for {count} jobs ({keys}), a crash at after_effect on "
            "the first"
        )
    )
    wrong = {key: n for key, n in run.per_key.items() if n != 1}
    expect(
        not wrong,
        each_once.format(count=len(jobs), keys=", ".join(sorted(run.per_key))),
        "; ".join(f"{key}: {n}" for key, n in wrong.items())
        + " "
        + _("({replay}, sweep seed {seed})").format(replay=run.replay, seed=seed)
        + (f"; {_raised(run, which)}" if run.errors else ""),
    )


@CHECKS.add(
    2,
    "each job is its own charge: the Idempotency-Key is the job's key, whole and as it is "
    "(not cut, lower-cased or folded to ASCII: two jobs' keys can differ only there), not "
    "the customer or the amount (one customer can be billed the same amount twice)",
    timeout=30.0,
    severe=True,
)
def every_invoice_is_charged_once(ns: Namespace) -> None:
    _each_once(ns, "charge")


@CHECKS.add(
    2,
    "each job is its own ledger entry: mark and look up the job's key, whole and as it is "
    "(not cut, lower-cased or folded to ASCII), not the customer or the amount",
    timeout=30.0,
    severe=True,
)
def every_entry_is_posted_once(ns: Namespace) -> None:
    _each_once(ns, "post")


def _failure_comes_out(
    ns: Namespace,
    which: str,
    point: str,
    what: str,
    action: str = "raise_transient",
    nths: tuple[int, ...] = (1,),
) -> None:
    run = run_job(ns, which, [[point, action, nth] for nth in nths])
    expect(
        bool(run.fired),
        _("{what} to fire").format(what=what),
        _raised(run, which) or _("it never fired"),
    )
    if which == "charge":
        wanted = _(
            "exactly one charge after {what}: the error must fail the attempt so the worker "
            "retries the job"
        )
        found = _("{outcome}: {effects} charge(s) ({replay})")
    else:
        wanted = _(
            "exactly one ledger entry after {what}: the error must fail the attempt so the "
            "worker retries the job"
        )
        found = _("{outcome}: {effects} ledger entry(s) ({replay})")
    expect(
        run.outcome == "ok",
        wanted.format(what=what),
        found.format(outcome=run.outcome, effects=run.effects, replay=run.replay),
    )


@CHECKS.add(
    1,
    "a payment call that fails (a 503, or a timeout that lost the reply) must fail the "
    "attempt: catching it and returning marks the job done, maybe with no charge, and "
    "nobody retries it",
    timeout=30.0,
    severe=True,
)
def a_failed_charge_is_retried(ns: Namespace) -> None:
    _failure_comes_out(ns, "charge", BEFORE_CALL, _("a 503 from the payment API"))
    # A timeout whose request never got there: the reply is lost, and nothing was charged.
    _failure_comes_out(
        ns,
        "charge",
        BEFORE_CALL,
        _("a lost reply (a timeout) from a payment API that had not charged"),
        "lose_response",
    )
    # The API down for a while: a handler that retries by itself and then gives up with a
    # reply of its own marks the job done with no charge.
    _failure_comes_out(
        ns,
        "charge",
        BEFORE_CALL,
        _("{count} 503s in a row from the payment API").format(count=IN_A_ROW),
        nths=tuple(range(1, IN_A_ROW + 1)),
    )


@CHECKS.add(
    1,
    "a ledger write that fails (the database was busy) must fail the attempt: catching it "
    "and returning marks the job done with no entry, and nobody retries it",
    timeout=30.0,
    severe=True,
)
def a_failed_ledger_write_is_retried(ns: Namespace) -> None:
    _failure_comes_out(ns, "post", LEDGER_WRITE, _("a failed ledger write"))
    # The mark (the second write) fails: the transaction rolls back the entry with it, so
    # nothing may remember the entry as posted (a set filled before the commit).
    _failure_comes_out(
        ns,
        "post",
        LEDGER_WRITE,
        _("a failed ledger write at the mark (the second write)"),
        nths=(2,),
    )
    _failure_comes_out(
        ns,
        "post",
        LEDGER_WRITE,
        _("{count} failed ledger writes in a row").format(count=IN_A_ROW),
        nths=tuple(range(1, IN_A_ROW + 1)),
    )


def _same_after_a_restart(ns: Namespace, which: str) -> None:
    # Two invoices of each scene, all in one restart: new processes are what cost here.
    # Two scenes can draw the same key (same names, same month): the first one stays.
    by_key: dict[str, tuple[str, dict[str, Any], str]] = {}
    for seed in scene_seeds():
        for job in invoices(which, random.Random(f"ex05 restart {which} {seed}"))[:2]:
            by_key.setdefault(job[2], job)
    jobs = tuple(by_key.values())
    with tempfile.TemporaryDirectory(prefix="labkit-ex05-", dir=ns.workdir) as tmp:
        got = ns.harness(HARNESS + "sent_in_processes", which, tmp, [list(j) for j in jobs])
    here = got["here"]
    to_call = (
        _("your {handler} to call the payment API")
        if which == "charge"
        else _("your {handler} to call the ledger")
    )
    expect(
        all(here),
        to_call.format(handler=f"{which}_handler"),
        _("it sent nothing for {keys}").format(
            keys=", ".join(job[2] for job, sent in zip(jobs, here, strict=True) if not sent)
        ),
    )
    for seed, there in got["seeds"].items():
        for job, mine, theirs in zip(jobs, here, there, strict=True):
            if mine != theirs:
                nothing: dict[str, Any] = {}
                pairs = zip_longest(mine, theirs, fillvalue=nothing)
                first = next((a, b) for a, b in pairs if a != b)
                how = _("hash seed {seed}").format(seed=seed) if seed.isdigit() else got["how"]
                expect(
                    False,
                    _(
                        "the same calls for job {key} in a restarted worker (a new process, {how})"
                    ).format(key=job[2], how=how),
                    _("first {before}, after the restart {after}").format(
                        before=_call(first[0]), after=_call(first[1])
                    ),
                    "build every key from the job (job.key): hash() is salted per process, "
                    "and a value computed when the module is imported is new in each worker",
                )


def _call(call: dict[str, Any]) -> str:
    if not call:
        return _("nothing")
    rest = ", ".join(f"{k}={v}" for k, v in call.items() if k not in ("call", "args"))
    return f"{call['call']}({', '.join([*call['args'], *([rest] if rest else [])])})"


@CHECKS.add(
    2,
    "a restarted worker is a new process: it must send the same charge with the same "
    "Idempotency-Key, or the API charges again",
    timeout=60.0,
    severe=True,
)
def charge_is_the_same_after_a_restart(ns: Namespace) -> None:
    _same_after_a_restart(ns, "charge")


@CHECKS.add(
    2,
    "a restarted worker is a new process: it must look up and mark the same keys, or it "
    "posts the entry again",
    timeout=60.0,
    severe=True,
)
def post_is_the_same_after_a_restart(ns: Namespace) -> None:
    _same_after_a_restart(ns, "post")


def _what_each_job_did(ns: Namespace, which: str) -> None:
    """One run of the invoices without a fault: each job's effect says what the job says,
    and the job keeps the reply its effect made."""
    jobs = invoices(which, random.Random(f"ex05 content {which} {scene_seeds()[-1]}"))
    run = run_job(ns, which, [], jobs=jobs)
    wrong, kept = [], []
    for _kind, payload, key in jobs:
        effects, result = run.done[key]
        if len(effects) != 1:
            continue  # every_invoice_is_charged_once / every_entry_is_posted_once say so
        [effect] = effects
        to = effect.payload.get("customer" if which == "charge" else "account")
        amount = effect.payload.get("amount")
        if (to, amount) != (payload["customer"], payload["amount"]):
            wrong.append(
                _("{key}: {amount!r} to {to!r} for a job of {want_amount!r} to {want_to!r}").format(
                    key=key,
                    amount=amount,
                    to=to,
                    want_amount=payload["amount"],
                    want_to=payload["customer"],
                )
            )
        elif result != effect.response:
            kept.append(
                _("{key}: the job kept {result!r}, the reply was {reply!r}").format(
                    key=key, result=result, reply=effect.response
                )
            )
    expect(
        not wrong,
        _("each charge of the job's amount (in cents, as it is) to the job's customer")
        if which == "charge"
        else _("each ledger entry of the job's amount (as it is) for the job's customer"),
        "; ".join(wrong[:3]),
        "pass job.payload's customer and amount on unchanged: the amount is already in "
        "cents, and the account is the customer",
    )
    expect(
        not kept,
        _("{handler} to return the reply of the call that did the work").format(
            handler=f"{which}_handler"
        ),
        "; ".join(kept[:3]),
        "return what ctx.world.payments.charge or tx.post returned: the worker keeps it as "
        "the job's result, the receipt an operator looks up",
    )
