"""What exercise 5's checks share: ``CHECKS``, on which ``crash_checks`` and
``every_job_checks`` register; the scenes' jobs; and a job run through the harness,
crashed at one point, then judged from the job store and the world."""

from __future__ import annotations

import random
import tempfile
from pathlib import Path
from typing import Any

from labkit.clock import LAB_EPOCH, FakeClock
from labkit.explore.matrix import Scenario, judge
from labkit.faults import LOST_RESPONSE
from labkit.grading.checks import Checks, Namespace, expect
from labkit.grading.exercises.ex05.harness import LEDGER_COMMIT
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
        ends: dict[str, tuple[str, str | None]] | None = None,
    ) -> None:
        self.fired: list[str] = got.get("fired", [])
        self.errors: list[str] = got.get("handler_errors", [])
        self.replay: str = got.get("replay", "")
        self.outcome, self.effects, self.per_key = outcome, effects, per_key
        #: Per job key: the effects the world recorded for it, and the result the job kept.
        self.done = done or {}
        #: Per job key: the state the job ended in, and its last error.
        self.ends = ends or {}


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
            ends = {
                key: (str(job.state.value), job.last_error)
                for _kind, _payload, key in jobs
                if (job := store.get_by_key(key)) is not None
            }
    return Run(got, outcome, effects, per_key, done, ends)


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


def invoices(kind: str, rng: random.Random) -> tuple[tuple[str, dict[str, Any], str], ...]:
    """Fourteen jobs from one seed: the cases one fixed invoice never shows.

    One customer billed the same amount in two months (a key built from the payload
    makes the second look like a repeat), two keys that differ only after their first
    30 characters, two long ones that differ only after their first 300 (a key
    truncated, even to 255), two longer ones that differ only in their first characters
    (a key cut to its end), two longer than 255 characters that differ only in their
    middle (a key cut to its head and its tail), a customer whose name starts another's,
    and names with ``_``, capitals and non-ASCII: two customers whose names differ only
    in case, and two only in an accent (a key lower-cased or folded to ASCII makes one
    look like a repeat of the other).
    The ledger's jobs end with a credit note: a negative amount, posted as it is.
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
    # Long enough that they differ only after their first 300 characters: a key cut to
    # 255 (the limit of some payment APIs) makes the second look like a repeat too.
    lines = "/".join(f"line-{n:02d}" for n in range(38))
    rows += [(base, amount, f"{stem}:{kind}:{lines}:part-{n}") for n in (1, 2)]
    # Two keys that differ only at their start (the region), with the same 280 characters
    # after it: a key cut to its last 255 characters (the end is where keys differ,
    # usually) makes the second look like a repeat of the first.
    deep = "/".join(f"line-{n:02d}" for n in range(32))
    rows += [(base, amount, f"{region}/{stem}:{kind}:{deep}") for region in ("eu-west", "us-east")]
    rng.shuffle(rows)
    # Two keys over 255 characters with the same first and last 150: a key shortened to
    # its head and its tail (key[:127] + "~" + key[-127:]) makes the second look like a
    # repeat of the first. Added after the shuffle: the draws above stay.
    head = f"{stem}:{kind}:" + "/".join(f"line-{n:02d}" for n in range(20))
    tail = "/".join(f"line-{n:02d}" for n in range(20, 40))
    rows += [(base, amount, f"{head}/part-{n}/{tail}") for n in (1, 2)]
    if kind == "post":
        # A credit note: the ledger takes a negative amount as it is (abs() makes the
        # customer's refund a second bill). Added after the shuffle: the draws above stay.
        rows.append((base, -amount, f"{stem}:credit-note:v1"))
    return tuple((kind, {"customer": c, "amount": a}, key) for c, a, key in rows)


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
        elif which == "charge" and effect.payload.get("currency", "BRL") != "BRL":
            # The job names no currency: the API's default (BRL) is the invoice's.
            wrong.append(
                _(
                    "{key}: charged in {currency!r}, not the API's default 'BRL' (the job "
                    "names no currency: leave currency out)"
                ).format(key=key, currency=effect.payload.get("currency"))
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
