"""Exercise 14: a multi-step job with a checkpoint per step, a compensation and a policy version.

The student writes ``do_step`` (one effect, under a key built from the order and the
step) and ``run_order`` (the steps of the job's policy version, a checkpoint after each,
the release of the stock when the charge is declined for good). Each check makes a
folder under the student's folder with the job's database (``labdb.steps_db``) and a
``labkit.world.World`` file, perhaps with the payment API scripted to decline, and runs
the student's code through the harness (``labkit.grading.exercises.ex14.harness``). The
sweeps kill it for real (``killsweep``) right before and after each effect and right
after each write to the job's database, then run the job again; one check crashes it
right after the charge and resumes it after a deploy of the other policy version. The
check then reads the world's file itself: the effects it did (exactly one reservation,
charge and e-mail per order, a release for a declined one) and the calls it received
(after a kill, only the step in flight may be called again).
"""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from labkit.clock import LAB_EPOCH, FakeClock
from labkit.grading.checks import CheckFailed, Checks, Namespace, expect
from labkit.grading.exercises.helpers import raised_text
from labkit.grading.exercises.killsweep import after_every_kill
from labkit.grading.exercises.kit import reading
from labkit.grading.exercises.labdb import rows_of, steps_db
from labkit.lang import _
from labkit.world import World

CHECKS = Checks("ex14", "a multi-step job that resumes", needs=("do_step", "run_order"))

HARNESS = "labkit.grading.exercises.ex14.harness:"
ORDER: dict[str, Any] = {
    "id": 42,
    "customer": "cus_ana",
    "email": "ana@example.com",
    "sku": "mug",
    "amount": 4200,
}
OTHER: dict[str, Any] = {
    "id": 7,
    "customer": "cus_bia",
    "email": "bia@example.com",
    "sku": "mug",
    "amount": 1500,
}
#: The steps of policy version 1, each owed a checkpoint when the job is done.
POLICIES_V1 = ("reserve", "charge", "email")
#: How many e-mails each policy version sends for an order that goes through.
MAILS = {1: 1, 2: 2}
#: A card declined for good: the payment API declines this many calls in a row.
DECLINES = 6


def make(folder: Path, declines: int = 0) -> None:
    """The job's database and the world in ``folder``; the API declines ``declines`` calls."""
    steps_db(folder / "steps.db").close()
    with World(folder / "world.db", FakeClock(LAB_EPOCH)) as world:
        if declines:
            world.payments.script(*["reject"] * declines)


@contextmanager
def scene(ns: Namespace, declines: int = 0) -> Iterator[Path]:
    """A fresh folder under the student's folder with the files ``make`` writes."""
    with tempfile.TemporaryDirectory(prefix="labkit-ex14-", dir=ns.workdir) as tmp:
        make(Path(tmp), declines)
        yield Path(tmp)


def run(
    ns: Namespace,
    folder: Path,
    order: dict[str, Any],
    version: int = 1,
    crash_after: str | None = None,
    salted: bool = False,
    deployed: bool = False,
) -> dict[str, Any]:
    got = dict(
        ns.harness(HARNESS + "run", str(folder), order, version, crash_after, salted, deployed)
    )
    if "raised" in got:
        raise CheckFailed(
            _("run_order(conn, world, order {order_id}, policy_version={version}) to run").format(
                order_id=order["id"], version=version
            ),
            raised_text(got),
            "try it in the demo cell first",
        )
    return got


def world_of(folder: Path) -> dict[str, Any]:
    """The world's truth in ``folder``: its effects, the calls it got, the keys it holds
    (the APIs' Idempotency-Keys) and the ledger's marks."""
    with World(folder / "world.db", FakeClock(LAB_EPOCH)) as world:
        held = world.conn.execute("SELECT service, key FROM idempotency ORDER BY service, key")
        marks = world.conn.execute("SELECT key FROM marks ORDER BY key")
        return {
            "effects": [(e.service, e.key, e.payload) for e in world.effects()],
            "calls": [(c.service, c.key, c.outcome) for c in world.calls()],
            "keys": [(r["service"], r["key"]) for r in held],
            "marks": [r["key"] for r in marks],
        }


def replies_of(folder: Path) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """Per service, the first effect's payload and the reply it made (one order's world)."""
    with World(folder / "world.db", FakeClock(LAB_EPOCH)) as world:
        replies: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
        for e in world.effects():
            replies.setdefault(e.service, (e.payload, e.response))
        return replies


def state_of(folder: Path, order_id: int) -> str | None:
    with reading(folder / "steps.db") as conn:
        jobs = {r["order_id"]: r["state"] for r in rows_of(conn, "all_step_jobs")}
    return jobs.get(order_id)


def steps_of(folder: Path, order_id: int) -> list[str]:
    with reading(folder / "steps.db") as conn:
        return [r["step"] for r in rows_of(conn, "all_job_steps") if r["order_id"] == order_id]


def wanted(order: dict[str, Any], version: int, declined: bool) -> dict[str, list[Any]]:
    """The effects one order's job must leave, per service, whatever crashed on the way."""
    stock = [[order["sku"], -1]] + ([[order["sku"], 1]] if declined else [])
    charges = [] if declined else [[order["customer"], order["amount"]]]
    mails = [] if declined else [order["email"]] * MAILS[version]
    return {"ledger": stock, "payments": charges, "mail": mails}


def found(truth: dict[str, Any], order: dict[str, Any]) -> dict[str, list[Any]]:
    """The effects in the world that belong to ``order`` (by its sku, customer, e-mail)."""
    got: dict[str, list[Any]] = {"ledger": [], "payments": [], "mail": []}
    for service, _key, p in truth["effects"]:
        if service == "ledger" and p.get("account") in (order["sku"], order["customer"]):
            got["ledger"].append([p["account"], p["amount"]])
        elif service == "payments" and p.get("customer") == order["customer"]:
            got["payments"].append([p["customer"], p["amount"]])
        elif service == "mail" and p.get("to") == order["email"]:
            got["mail"].append(p["to"])
    return got


def exactly_once(
    folder: Path, order: dict[str, Any], version: int, declined: bool = False
) -> tuple[bool, str]:
    """The world holds the order's effects exactly once, and the job ended as it should."""
    want, state = wanted(order, version, declined), "failed" if declined else "done"
    got, ended = found(world_of(folder), order), state_of(folder, order["id"])
    return got == want and ended == state, _("effects {effects}, the job {state}").format(
        effects=got, state=repr(ended)
    )


def called_again(truth: dict[str, Any]) -> dict[str, int]:
    """Keys the payment and mail APIs got more than one call for, with how many."""
    calls = Counter(
        key for service, key, _outcome in truth["calls"] if service in ("payments", "mail")
    )
    return {key: n for key, n in calls.items() if n > 1}


@CHECKS.add(
    2,
    "run the steps of POLICIES[1] in order, do_step then its checkpoint in job_steps: "
    "one reservation (-1 on the sku), one charge, one e-mail, the job 'done'; run again, "
    "it changes nothing",
)
def run_order_does_every_step_once(ns: Namespace) -> None:
    with scene(ns) as folder:
        got = run(ns, folder, ORDER)
        expect(got.get("returned") == "done", "'done' from run_order", got.get("returned"))
        ok, seen = exactly_once(folder, ORDER, 1)
        expect(
            ok,
            _("the world to hold {effects}, the job 'done'").format(
                effects=wanted(ORDER, 1, False)
            ),
            seen,
        )
        expect(
            sorted(steps_of(folder, ORDER["id"])) == ["charge", "email", "reserve"],
            "one checkpoint per step in job_steps: reserve, charge, email",
            steps_of(folder, ORDER["id"]),
        )
        with reading(folder / "steps.db") as conn:
            results = {
                r["step"]: r["result"]
                for r in rows_of(conn, "all_job_steps")
                if r["order_id"] == ORDER["id"]
            }
        not_json = {step: result for step, result in results.items() if not _is_json(result)}
        expect(
            not not_json,
            "each checkpoint's result = json.dumps(the step's reply)",
            _("not JSON: {results}").format(results=not_json),
        )
        # What the world answered each step: a step whose reply is dropped ('null')
        # leaves whoever reads job_steps no charge_id and no message_id.
        replies = replies_of(folder)
        steps = {"reserve": "ledger", "charge": "payments", "email": "mail"}
        lost = {
            step: result
            for step, result in results.items()
            if step in steps
            and steps[step] in replies
            and json.loads(result) != replies[steps[step]][1]
        }
        expect(
            not lost,
            _("each checkpoint's result the reply its effect made, as JSON: {replies}").format(
                replies={step: replies[s][1] for step, s in steps.items() if s in replies}
            ),
            _("the checkpoints hold {results}").format(results=lost),
            _(
                "return the reply of the call that did the effect (tx.post, "
                "world.payments.charge, world.mail.send) from do_step, and checkpoint "
                "json.dumps of it"
            ),
        )
        # The order names no currency: the payment API's default (BRL) is the shop's.
        currency = replies.get("payments", ({}, {}))[0].get("currency", "BRL")
        expect(
            currency == "BRL",
            _("the charge in the payment API's default currency, 'BRL' (the order names none)"),
            _("charged in {currency}").format(currency=repr(currency)),
            _("call world.payments.charge(customer, amount, idempotency_key=key): no currency"),
        )
        again = run(ns, folder, ORDER)
        ok, seen = exactly_once(folder, ORDER, 1)
        expect(
            again.get("returned") == "done" and ok,
            "'done' again and the same effects when a finished job runs a second time",
            f"{again.get('returned')!r}; {seen}",
        )


def _is_json(text: Any) -> bool:
    try:
        json.loads(text)
    except (TypeError, ValueError):
        return False
    return True


def _sweep(
    ns: Namespace,
    order: dict[str, Any],
    versions: tuple[int, int],
    judge: Callable[[Path], tuple[bool, str]],
    want: str,
    hint: str,
    declines: int = 0,
) -> None:
    after_every_kill(
        ns,
        HARNESS + "kills",
        lambda folder: make(folder, declines),
        [order, *versions],
        judge,
        want,
        _("the job run again"),
        hint,
    )


@CHECKS.add(
    3,
    "do each step's effect FIRST, then write its checkpoint; the stock in one ledger "
    "transaction with its mark: a checkpoint before the effect loses the effect when the "
    "worker dies between them, and a repeat without a key does it twice",
    timeout=60.0,
    severe=True,
)
def every_effect_once_after_a_kill_anywhere(ns: Namespace) -> None:
    _sweep(
        ns,
        ORDER,
        (1, 1),
        lambda life: exactly_once(life, ORDER, 1),
        _("exactly {effects} in the world and the job 'done'").format(
            effects=wanted(ORDER, 1, False)
        ),
        _("write the checkpoint after the effect returns; make every effect safe to repeat"),
    )


@CHECKS.add(
    2,
    "after a kill, only the step in flight may be called again: checkpoint each step as "
    "soon as it is done, committed at once (not in a transaction kept open, not all at "
    "the end), and skip every checkpointed step on the re-run",
    timeout=60.0,
)
def a_resume_skips_the_finished_steps(ns: Namespace) -> None:
    def judge(life: Path) -> tuple[bool, str]:
        again = called_again(world_of(life))
        ok = len(again) <= 1 and all(n == 2 for n in again.values())
        # A job 'done' owes a checkpoint to each of its steps (no 'done' before the last).
        steps = steps_of(life, ORDER["id"])
        ok = ok and sorted(steps) == sorted(POLICIES_V1)
        return ok and state_of(life, ORDER["id"]) == "done", _(
            "keys called again: {keys}; checkpoints {steps}"
        ).format(keys=again, steps=steps)

    _sweep(
        ns,
        ORDER,
        (1, 1),
        judge,
        _(
            "at most one step called a second time, and the job 'done' with a checkpoint "
            "for each of its steps"
        ),
        _(
            "a key only makes a repeat harmless until the provider forgets it (Stripe: "
            "24 hours); read job_steps first and skip what is there"
        ),
    )


@CHECKS.add(
    1,
    "build each step's key from the order and the step (f'order:{id}:{step}'), never "
    "from uuid4(), the time or hash(): the same order run again must send the same "
    "keys, or a resumed job charges again",
    severe=True,
)
def each_effect_has_a_key_from_the_order(ns: Namespace) -> None:
    keys = []
    # The second time as another process would run it: hash() gives other values there.
    for salted in (False, True):
        with scene(ns) as folder:
            run(ns, folder, ORDER, salted=salted)
            truth = world_of(folder)
            ledger = [("ledger", k) for s, k, _payload in truth["effects"] if s == "ledger"]
            keys.append(sorted(truth["keys"]) + sorted(ledger))
            run(ns, folder, OTHER)
            other = set(world_of(folder)["keys"]) - set(truth["keys"])
    services = sorted(s for s, _key in keys[0])
    expect(
        services == ["ledger", "mail", "payments"],
        "an Idempotency-Key on the charge and on the e-mail, and a key on the ledger entry",
        _("keys {keys}").format(keys=keys[0]),
    )
    expect(
        keys[0] == keys[1],
        "the same keys when the same order runs twice, the second time as in a worker "
        "restarted after midnight (its own hash seed and thread, its clock a day and an "
        "hour later: the next week, month and year)",
        keys,
    )
    expect(
        len(other) == 2,
        _("order {order_id}'s own two keys, none of order {earlier_id}'s").format(
            order_id=OTHER["id"], earlier_id=ORDER["id"]
        ),
        _("order {order_id} added {keys}").format(order_id=OTHER["id"], keys=sorted(other)),
    )


@CHECKS.add(
    2,
    "when the charge raises PermanentError, record the job 'failed' and release the "
    "stock: a +1 ledger entry on the same sku (the compensation of 'reserve'), not a "
    "refund, no charge",
    severe=True,
)
def a_declined_charge_releases_the_stock(ns: Namespace) -> None:
    with scene(ns, DECLINES) as folder:
        got = run(ns, folder, ORDER)
        expect(got.get("returned") == "failed", "'failed' from run_order", got.get("returned"))
        truth = found(world_of(folder), ORDER)
        want = wanted(ORDER, 1, True)
        expect(
            truth["ledger"] == want["ledger"] and truth["payments"] == [],
            _("the ledger {ledger} and no charge").format(ledger=want["ledger"]),
            _("the ledger {ledger}, charges {charges}").format(
                ledger=truth["ledger"], charges=truth["payments"]
            ),
        )
        expect(
            state_of(folder, ORDER["id"]) == "failed",
            "the job 'failed' in step_jobs",
            state_of(folder, ORDER["id"]),
        )
        keys = [k for service, k, _payload in world_of(folder)["effects"] if service == "ledger"]
        expect(
            len(keys) == len(set(keys)),
            _("the reservation and its release each under a key of its own"),
            _("ledger entries under the keys {keys}").format(keys=keys),
            _(
                "key the release with its own step (f'order:{id}:release'): under the "
                "reservation's key, a ledger that keeps one entry per key takes the release "
                "for a repeat of the reservation, and the stock is never given back"
            ),
        )


@CHECKS.add(
    1,
    "a declined charge ends the job: no later step runs, and no e-mail says the order "
    "is on its way",
    severe=True,
)
def no_email_after_a_declined_charge(ns: Namespace) -> None:
    with scene(ns, DECLINES) as folder:
        run(ns, folder, ORDER)
        run(ns, folder, ORDER)  # a redelivery of the failed job
        mails = found(world_of(folder), ORDER)["mail"]
        expect(
            mails == [],
            "no e-mail for a declined order, run twice",
            _("e-mails to {addresses}").format(addresses=mails),
        )


@CHECKS.add(
    2,
    "record the decline and the 'failed' state in one transaction BEFORE releasing, and "
    "release under a key with its mark: a kill during the compensation, then a re-run, "
    "must release once and never charge",
    timeout=60.0,
    severe=True,
)
def a_kill_during_compensation_releases_once(ns: Namespace) -> None:
    _sweep(
        ns,
        ORDER,
        (1, 1),
        lambda life: exactly_once(life, ORDER, 1, declined=True),
        _("exactly {effects} in the world and the job 'failed'").format(
            effects=wanted(ORDER, 1, True)
        ),
        _("the release is an effect like the others: its own key, its own checkpoint"),
        DECLINES,
    )


@CHECKS.add(
    2,
    "store policy_version with the job on its first run and follow the stored one: a "
    "job started on version 1 and resumed after the deploy of version 2 sends no "
    "receipt it never promised, one started on 2 still sends its receipt",
    severe=True,
)
def a_resumed_job_keeps_its_first_policy_version(ns: Namespace) -> None:
    # The last case: a version 2 job killed after its receipt's checkpoint (its second
    # e-mail sent), resumed by a version 1 call, whose policy has no receipt to place
    # that checkpoint after.
    for first, then, crash_after in (
        (1, 2, "payments.charge"),
        (2, 1, "payments.charge"),
        (2, 1, "mail.send#2"),
    ):
        with scene(ns) as folder:
            crashed = run(ns, folder, ORDER, first, crash_after=crash_after)
            expect(
                crashed["fired"],
                _("a crash right after the charge (policy version {version}) to fire").format(
                    version=first
                ),
                _("it {outcome} without charging").format(
                    outcome=repr(crashed.get("returned", "raised"))
                ),
            )
            # Resumed after a deploy that also added a version 3: nothing of the job's
            # changes with the policies it does not follow.
            got = run(ns, folder, ORDER, then, deployed=True)
            ok, seen = exactly_once(folder, ORDER, first)
            expect(
                got.get("returned") == "done" and ok,
                _(
                    "version {version}'s {count} e-mail(s) after a start on version {version}, "
                    "a crash and a resume with policy_version={resumed_version}"
                ).format(version=first, count=MAILS[first], resumed_version=then),
                f"{got.get('returned')!r} (crash after {crash_after}); {seen}",
            )
