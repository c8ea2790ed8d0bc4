"""Hidden checks for exercise 14: generated orders sharing one database and one world, a
kill anywhere in a job of policy version 2, a finished job delivered again after a
deploy, errors that are no decline (a 503 from the payment API, a mail rejected), two
orders of one customer, a job killed before its first checkpoint and resumed after a
deploy, a kill right after the release, a job resumed after the customer changed the
e-mail address, a job resumed among hundreds of other jobs' checkpoints, a worker's
long-lived connection after a run that failed on it, the same job run again on that
connection, and two orders' jobs at once on two threads of one worker."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from random import Random
from typing import Any

from hypothesis import strategies as st

from labkit.clock import LAB_EPOCH, FakeClock
from labkit.grading.checks import Checks, Namespace, expect
from labkit.grading.exercises.ex14.checks import (
    DECLINES,
    HARNESS,
    MAILS,
    ORDER,
    POLICIES_V1,
    exactly_once,
    found,
    make,
    run,
    scene,
    state_of,
    steps_of,
    wanted,
    world_of,
)
from labkit.grading.exercises.helpers import holds_for, raised_text, shared_ends
from labkit.grading.exercises.killsweep import after_every_kill, scene_seeds
from labkit.grading.exercises.kit import reading
from labkit.grading.exercises.labdb import rows_of
from labkit.lang import _
from labkit.world import World

CHECKS = Checks("ex14", hidden=True)

#: The steps of policy version 2, in order.
POLICIES_V2 = ("reserve", "charge", "receipt", "email")
#: An outage that lasts: this many 503s in a row from the payment API...
OUTAGE = 30
#: ...and the most calls a step may make to it before its error goes out.
RETRIES = 10

NAMES = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=10)
#: What may pad a name at its two ends, as it came from outside (a form, a CSV): a sku
#: or a customer id is passed on as it is, never stripped into another one.
PADS = st.sampled_from([("", ""), (" ", " "), ("", "\u00a0")])


@st.composite
def order_runs(draw: Any) -> list[tuple[dict[str, Any], int, bool, int]]:
    """Orders (several on one sku), each with its policy version, declined or not, and
    how many times it is delivered."""
    ids = draw(st.lists(st.integers(1, 2**31), min_size=1, max_size=4, unique=True))
    skus = [
        head + name + tail
        for name, (head, tail) in draw(
            st.lists(st.tuples(NAMES, PADS), min_size=1, max_size=2, unique_by=lambda t: t[0])
        )
    ]
    runs = []
    for n, i in enumerate(ids):
        head, tail = draw(PADS)
        order = {
            "id": i,
            "customer": f"{head}cus_{n}_" + draw(NAMES) + tail,
            "email": f"c{n}@example.com",
            "sku": draw(st.sampled_from(skus)),
            "amount": draw(st.integers(1, 10**7)),
        }
        runs.append(
            (order, draw(st.sampled_from([1, 2])), draw(st.booleans()), draw(st.integers(1, 2)))
        )
    return runs


@CHECKS.add(
    2,
    "for any orders on one database and one world (several on one sku, some declined, "
    "some delivered twice, policy versions 1 and 2; skus and customers with capitals, "
    "accents or spaces at their ends, passed on as they are): each order's effects exactly once, "
    "its checkpoints its own (job_steps keyed by order AND step)",
    timeout=60.0,
    severe=True,
)
def generated_orders_each_done_once(ns: Namespace) -> None:
    def prop(runs: list[tuple[dict[str, Any], int, bool, int]]) -> None:
        with scene(ns) as folder:
            for order, version, declined, times in runs:
                if declined:
                    with_declines(folder)
                for _n in range(times):
                    run(ns, folder, order, version)
            truth = world_of(folder)
            for order, version, declined, times in runs:
                want, got = wanted(order, version, declined), found(truth, order)
                state = state_of(folder, order["id"])
                expect(
                    [got["payments"], got["mail"], state]
                    == [want["payments"], want["mail"], "failed" if declined else "done"],
                    _(
                        "order {order_id} (policy version {version}, {outcome}, run {times}x) "
                        "to leave the charges {charges} and e-mails {mails}, among {count} orders"
                    ).format(
                        order_id=order["id"],
                        version=version,
                        outcome=_("declined") if declined else _("paid"),
                        times=times,
                        charges=want["payments"],
                        mails=want["mail"],
                        count=len(runs),
                    ),
                    _("charges {charges}, e-mails {mails}, the job {state}").format(
                        charges=got["payments"], mails=got["mail"], state=repr(state)
                    ),
                )
            for sku in {order["sku"] for order, *_rest in runs}:
                want_stock = sorted(
                    a
                    for o, v, d, _times in runs
                    if o["sku"] == sku
                    for _sku, a in wanted(o, v, d)["ledger"]
                )
                got_stock = sorted(
                    p["amount"]
                    for s, _key, p in truth["effects"]
                    if s == "ledger" and p.get("account") == sku
                )
                expect(
                    got_stock == want_stock,
                    _("the ledger entries of sku {sku} to be {entries}").format(
                        sku=repr(sku), entries=want_stock
                    ),
                    got_stock,
                )

    holds_for(order_runs(), prop, examples=12)


def with_declines(
    folder: Path, service: str = "payments", behaviour: str = "reject", **script: float
) -> None:
    """The ``service`` API behaves so on its next call (by default: this order's card is
    declined); ``script``: its ``retry_after`` or ``delay``."""
    with World(folder / "world.db", FakeClock(LAB_EPOCH)) as world:
        getattr(world, service).script(behaviour, **script)


@CHECKS.add(
    2,
    "compensate only when the CHARGE raises PermanentError: any other error (a 503 from "
    "the payment API, a TransientError; a PermanentError from another step) propagates "
    "from run_order, the job stays 'running' with its stock reserved, and the next run "
    "finishes it (a 503 retried inside the step under its own key may finish it at once)",
    timeout=30.0,
    severe=True,
)
def only_a_declined_charge_fails_the_job(ns: Namespace) -> None:
    for service, behaviour, what, version in (
        ("payments", "fail_before", _("a 503 from the payment API (TransientError)"), 1),
        # A 4xx that is no decline: read the error's class, not its status code.
        ("payments", "rate_limit", _("a 429 from the payment API (TransientError)"), 1),
        ("mail", "reject", _("the e-mail rejected (PermanentError from the 'email' step)"), 1),
        (
            "mail",
            "fail_before",
            _("a 503 from the mail API (TransientError from the 'email' step)"),
            1,
        ),
        # Policy version 2: the mail API's next call is the receipt's, a step like the
        # others (not an extra that may be dropped when the mail API is down).
        (
            "mail",
            "fail_before",
            _("a 503 from the mail API on the receipt (policy version 2's 'receipt' step)"),
            2,
        ),
        # The receipt goes out after the charge: the customer has paid, and a rejected
        # receipt is no decline to release the stock of.
        (
            "mail",
            "reject",
            _("the receipt rejected (PermanentError from policy version 2's 'receipt' step)"),
            2,
        ),
    ):
        with scene(ns) as folder:
            # A short Retry-After: a step that sleeps it out (for real) stays in time.
            with_declines(folder, service, behaviour, retry_after=1.0)
            got = dict(ns.harness(HARNESS + "run", str(folder), ORDER, version, None, False))
            if behaviour != "reject" and got.get("returned") == "done":
                # The 503 (429) retried inside the step, under its key: nothing lost, nothing twice.
                ok, seen = exactly_once(folder, ORDER, version)
                expect(
                    ok,
                    _("after {what} retried inside the step: {effects}, the job 'done'").format(
                        what=what, effects=wanted(ORDER, version, False)
                    ),
                    seen,
                )
                continue
            state, ledger = state_of(folder, ORDER["id"]), found(world_of(folder), ORDER)["ledger"]
            expect(
                "raised" in got and state == "running" and ledger == [[ORDER["sku"], -1]],
                _(
                    "after {what}: the error raised by run_order, the job 'running' (to be "
                    "retried) and the stock still reserved {ledger}"
                ).format(what=what, ledger=[[ORDER["sku"], -1]]),
                _("run_order {outcome}; the job {state}; the ledger {ledger}").format(
                    outcome=_("raised") if "raised" in got else repr(got.get("returned")),
                    state=repr(state),
                    ledger=ledger,
                ),
            )
            # Its class is what the worker's retry policy reads: a TransientError is
            # retried later, a PermanentError goes to a person. Wrapped in another class
            # (a RuntimeError, or a TypeError of a retry that slept None), it is neither.
            kind = "PermanentError" if behaviour == "reject" else "TransientError"
            expect(
                kind in got.get("raised", []),
                _(
                    "after {what}: run_order raising that {kind} as it came (its class or a "
                    "subclass), not wrapped in another error"
                ).format(what=what, kind=kind),
                raised_text(got),
                _(
                    "let an error that is no decline out as it is (a bare raise), never as "
                    "raise OtherError(...) from exc: whoever retries the job reads its class "
                    "to tell a retry from a bug"
                ),
            )
            again = run(ns, folder, ORDER, version)
            ok, seen = exactly_once(folder, ORDER, version)
            expect(
                again.get("returned") == "done" and ok,
                _("the retry after {what} to finish the order: {effects}, the job 'done'").format(
                    what=what, effects=wanted(ORDER, version, False)
                ),
                f"{again.get('returned')!r}; {seen}",
            )
    # An outage that lasts (every call a 503, far more than a few): a retry inside the
    # step gives up after a few tries and the error goes out; one without a cap keeps
    # the worker on this job for as long as the payment API is down.
    with scene(ns) as folder:
        for _n in range(OUTAGE):
            with_declines(folder, "payments", "fail_before", retry_after=0.01)
        got = dict(ns.harness(HARNESS + "run", str(folder), ORDER, 1, None, False))
        tries = [c for c in world_of(folder)["calls"] if c[0] == "payments"]
        expect(
            "raised" in got and len(tries) <= RETRIES,
            _(
                "after {count} 503s in a row from the payment API (an outage that lasts): "
                "the error raised by run_order after {cap} calls to the payment API at most"
            ).format(count=OUTAGE, cap=RETRIES),
            _("run_order {outcome} after {calls} calls to the payment API").format(
                outcome=_("raised") if "raised" in got else repr(got.get("returned")),
                calls=len(tries),
            ),
            _(
                "retry a TransientError a few times at most, then let it propagate: the job "
                "stays 'running' and is retried later, and the worker goes on to other jobs"
            ),
        )
    # A 409 from the payment API (KeyInProgress, a TransientError): a request under the
    # charge's key, sent by another copy of the job, is still running. It may yet go
    # through: no decline, no release; raised as it came (or retried under the key).
    # The same from the mail API on the e-mail: the request in flight may fail (its
    # worker died with it), so a 409 taken for a sent e-mail may lose it for good.
    for where, said in (
        ("payments.charge", _("the payment API on the charge")),
        ("mail.send", _("the mail API on the e-mail")),
    ):
        _a_409_is_no_decline_nor_done(ns, where, said)
    # The reserve refused for good (a PermanentError from the ledger, not from the
    # charge): nothing was reserved, so nothing is released; the error goes out.
    with scene(ns) as folder:
        got = ns.harness(HARNESS + "run_with_the_ledger_down", str(folder), ORDER, 1, 1, True)
        first, second = got["first"], got["second"]
        ok, seen = exactly_once(folder, ORDER, 1)
        expect(
            "raised" in first and second.get("returned") == "done" and ok,
            _(
                "after the ledger refused the reservation for good (PermanentError from the "
                "'reserve' step): the error raised by run_order, nothing released, and the "
                "next run finishing the order: {effects}, the job 'done'"
            ).format(effects=wanted(ORDER, 1, False)),
            _("run_order {outcome}, then {again}; {seen}").format(
                outcome=_("raised") if "raised" in first else repr(first.get("returned")),
                again=repr(second.get("returned")) if "returned" in second else _("raised"),
                seen=seen,
            ),
            _(
                "compensate only when the step that raised PermanentError is the charge: "
                "a reservation that never happened has nothing to release, and a +1 there "
                "adds stock nobody took"
            ),
        )


def _a_409_is_no_decline_nor_done(ns: Namespace, where: str, said: str) -> None:
    """``where``'s first call answered 409 (``KeyInProgress``) before it reached the
    service, nothing done: raised as it came (or retried under its key), no release, and
    the next run finishing the order with each effect once."""
    with scene(ns) as folder:
        got = ns.harness(HARNESS + "run_timed_out_before", str(folder), ORDER, 1, where, True)
        first, second = got["first"], got["second"]
        steps, ok = steps_of(folder, ORDER["id"]), True
        if "raised" in first:
            ok = "KeyInProgress" in first["raised"] and "release" not in steps
        ended = second if "raised" in first else first
        done, seen = exactly_once(folder, ORDER, 1)
        expect(
            ok and ended.get("returned") == "done" and done,
            _(
                "after a 409 from {where} (KeyInProgress, a TransientError: a request under "
                "its key still running, which may yet fail): run_order raising it as it came "
                "(or retrying it under the same key), no release, and the next run finishing "
                "the order: {effects}, the job 'done'"
            ).format(where=said, effects=wanted(ORDER, 1, False)),
            _("run_order {outcome}, then {again}; {seen}").format(
                outcome=_ex14h_ended(first),
                again=_ex14h_ended(second) if second else _("not run again"),
                seen=seen,
            ),
            _(
                "a 409 says the call is under way, not that it was declined nor that it was "
                "done: only a PermanentError (no IdempotencyConflict) from the charge is a "
                "decline, and only the service's reply says an effect was done; let a "
                "TransientError out as it is"
            ),
        )


@CHECKS.add(
    1,
    "a PermanentError from the charge is the decline, whatever its status code, its "
    "text or its subclass (a card declined is a 402 at Stripe, not only a 400, raised as "
    "a CardError): read the error's class with isinstance, "
    "or the job stays 'running', retried for ever, and its stock is never released",
    severe=True,
)
def a_decline_of_any_status_releases_the_stock(ns: Namespace) -> None:
    # Then the decline in a library's own words: a decline code alone, no word of it.
    for plain in (False, True):
        _a_decline_releases_the_stock_in(ns, plain)


def _a_decline_releases_the_stock_in(ns: Namespace, plain: bool) -> None:
    with scene(ns, DECLINES) as folder:
        got = dict(
            ns.harness(HARNESS + "run", str(folder), ORDER, 1, None, False, False, 402, plain)
        )
        ok, seen = exactly_once(folder, ORDER, 1, declined=True)
        raised = (
            "InsufficientFunds('402: insufficient_funds', status=402)"
            if plain
            else "CardDeclined('402 from payments: card_declined ...', status=402)"
        )
        expect(
            got.get("returned") == "failed" and ok,
            _(
                "after the charge raised {raised}, a subclass of PermanentError: 'failed' "
                "from run_order and {effects}, the job 'failed'"
            ).format(raised=raised, effects=wanted(ORDER, 1, True)),
            _("{outcome}; {seen}").format(
                outcome=raised_text(got)
                if "raised" in got
                else _("run_order returned {value}").format(value=repr(got.get("returned"))),
                seen=seen,
            ),
            _(
                "compensate on `except PermanentError` from the charge (an "
                "IdempotencyConflict excepted, by isinstance), never on one status code, "
                "on words in the message or on type(exc) is PermanentError: each payment "
                "API words and subclasses its declines its own way"
            ),
        )


@CHECKS.add(
    2,
    "a customer's second order is an order of its own: build each step's key from the "
    "ORDER id (and the step), never from the customer, the e-mail or the sku, or the "
    "second order's charge is skipped as a repeat (or refused as a key reused)",
    severe=True,
)
def a_customers_second_order_is_charged_too(ns: Namespace) -> None:
    second = {**ORDER, "id": ORDER["id"] + 1, "sku": "pen", "amount": 1990}
    # The same mug at the same price again: only the order id tells it from the first.
    third = {**ORDER, "id": ORDER["id"] + 2}
    with scene(ns) as folder:
        ran = [run(ns, folder, order).get("returned") for order in (ORDER, second, third)]
        truth = world_of(folder)
        charges = sorted(found(truth, ORDER)["payments"])
        mails = found(truth, ORDER)["mail"]
        stock = found(truth, ORDER)["ledger"]  # the mugs: orders 42 and 44
        want = sorted(
            [[ORDER["customer"], amount] for amount in (ORDER["amount"], 1990, ORDER["amount"])]
        )
        expect(
            ran == ["done"] * 3
            and charges == want
            and len(mails) == 3
            and stock == [[ORDER["sku"], -1]] * 2,
            _(
                "three orders of {customer} (ids {ids}; the third the same sku and amount as "
                "the first) all 'done': the charges {charges}, two mugs reserved and three "
                "e-mails"
            ).format(
                customer=ORDER["customer"],
                ids=[ORDER["id"], second["id"], third["id"]],
                charges=want,
            ),
            _("{ran}; the charges {charges}; the reservations {stock}; {count} e-mail(s)").format(
                ran=ran, charges=charges, stock=stock, count=len(mails)
            ),
        )


@CHECKS.add(
    2,
    "the release is a step of its order too: a customer's second declined order of the "
    "same sku puts its own unit back; a release keyed by the customer, the e-mail or the "
    "sku finds the first order's release 'done', and the second unit is never returned",
    severe=True,
)
def a_customers_two_declined_orders_release_twice(ns: Namespace) -> None:
    # The same mug at the same price, declined twice: only the order id tells them apart.
    second = {**ORDER, "id": ORDER["id"] + 2}
    with scene(ns, DECLINES) as folder:
        ran = [run(ns, folder, order).get("returned") for order in (ORDER, second)]
        stock = found(world_of(folder), ORDER)["ledger"]
        want = [[ORDER["sku"], -1], [ORDER["sku"], 1]] * 2
        expect(
            ran == ["failed"] * 2 and sorted(stock) == sorted(want),
            _(
                "two orders of {customer} (ids {ids}, the same sku and amount), both declined "
                "and 'failed': the ledger {ledger}, each mug reserved and released"
            ).format(customer=ORDER["customer"], ids=[ORDER["id"], second["id"]], ledger=want),
            _("{ran}; the ledger {stock}").format(ran=ran, stock=stock),
            _(
                "build the release's key from the order id (and the step), like every other "
                "step's: keyed by the customer or the sku, the second order's release is "
                "skipped as done and its unit stays taken for ever"
            ),
        )


@CHECKS.add(
    2,
    "a job of policy version 2 (four steps: reserve, charge, receipt, e-mail) killed "
    "anywhere and run again: every effect exactly once, the two e-mails under keys of "
    "their own",
    timeout=60.0,
    severe=True,
)
def every_effect_once_after_a_kill_under_policy_v2(ns: Namespace) -> None:
    for seed in scene_seeds():
        _every_effect_once_after_a_kill_under_policy_v2_in(ns, Random(seed))


def _every_effect_once_after_a_kill_under_policy_v2_in(ns: Namespace, rng: Random) -> None:
    order = {
        "id": rng.randint(1, 10**9),
        "customer": f"cus_{rng.randint(1, 999)}_Zé",
        "email": f"z{rng.randint(1, 999)}@example.com",
        "sku": rng.choice(["mug", "caneca_azul", "T-shirt M"]),
        "amount": rng.randint(1, 10**6),
    }
    after_every_kill(
        ns,
        HARNESS + "kills",
        make,
        [order, 2, 2],
        lambda life: exactly_once(life, order, 2),
        _("exactly {effects} in the world and the job 'done'").format(
            effects=wanted(order, 2, False)
        ),
        _("the job run again"),
        _("every step's effect first, then its checkpoint; every key its step's own"),
    )


@CHECKS.add(
    1,
    "a job already done (or failed), delivered again after a deploy of the other policy "
    "version, calls nothing and returns how it ended ('done' or 'failed'): every step "
    "has its checkpoint, and the job's version is its own",
)
def a_finished_job_calls_nothing_again(ns: Namespace) -> None:
    order: dict[str, Any] = {
        "id": 314,
        "customer": "cus_eva",
        "email": "eva@example.com",
        "sku": "pen",
        "amount": 99,
    }
    with scene(ns) as folder:
        run(ns, folder, order, 1)
        before = world_of(folder)["calls"]
        got = run(ns, folder, order, 2)
        after = world_of(folder)["calls"]
        expect(
            got.get("returned") == "done" and after == before,
            _("'done' and no call to any service (policy version 1: {count} e-mail)").format(
                count=MAILS[1]
            ),
            _("{returned}; new calls {calls}; effects {effects}").format(
                returned=repr(got.get("returned")),
                calls=after[len(before) :],
                effects=found(world_of(folder), order),
            ),
        )
    with scene(ns, DECLINES) as folder:
        run(ns, folder, order, 1)
        steps = sorted(steps_of(folder, order["id"]))
        expect(
            steps == ["charge", "release", "reserve"],
            _(
                "the checkpoints of a declined job: reserve, charge (declined) and release, "
                "so that a redelivery releases nothing again"
            ),
            steps,
        )
        before, held = world_of(folder)["calls"], _ex14h_checkpoints(folder, order["id"])
        got = run(ns, folder, order, 2)
        after = world_of(folder)["calls"]
        expect(
            got.get("returned") == "failed" and after == before,
            _("'failed' again and no call to any service for a job whose charge was declined"),
            _("{returned}; new calls {calls}").format(
                returned=repr(got.get("returned")), calls=after[len(before) :]
            ),
        )
        # Nor a write: the release's checkpoint keeps the reply of the entry that put the
        # stock back, not a {'skipped': key} of a release done again.
        expect(
            _ex14h_checkpoints(folder, order["id"]) == held,
            _(
                "a redelivery of a declined job to leave its checkpoints as they were: {rows}"
            ).format(rows=held),
            _ex14h_checkpoints(folder, order["id"]),
            _(
                "a failed job whose release has its checkpoint is over: return 'failed' "
                "without releasing again or writing its checkpoints anew"
            ),
        )
    # Killed right after the release, before its checkpoint: the resume finds the
    # release done in the ledger ({'skipped': key}) and must still checkpoint it, or
    # every later delivery of the failed job goes back to the ledger.
    with scene(ns, DECLINES) as folder:
        run(ns, folder, order, 1, crash_after="ledger.transaction()#2")
        got = run(ns, folder, order, 1)
        steps = sorted(steps_of(folder, order["id"]))
        expect(
            got.get("returned") == "failed" and steps == ["charge", "release", "reserve"],
            _(
                "'failed' and the checkpoints reserve, charge (declined) and release, after "
                "a kill right after the release and a resume that found it done"
            ),
            _("{returned}; checkpoints {steps}").format(
                returned=repr(got.get("returned")), steps=steps
            ),
            _(
                "checkpoint the release with whatever do_step returns, the reply of a release "
                "found done too: a step found done is done"
            ),
        )


def _ex14h_checkpoints(folder: Path, order_id: int) -> list[tuple[str, Any]]:
    """``order_id``'s checkpoints, ``(step, result)`` in the order they were written."""
    with reading(folder / "steps.db") as conn:
        rows = rows_of(conn, "all_job_steps")
        return [(r["step"], r["result"]) for r in rows if r["order_id"] == order_id]


#: Jobs already in the database before the one a check resumes: more rows than any
#: cap a read of job_steps might carry (LIMIT 100, fetchmany(), the first page).
BUSY = 300


def _ex14h_busy(folder: Path, ids: range) -> None:
    """Jobs ``ids``, all done, with their checkpoints, written straight into ``folder``."""
    with closing(sqlite3.connect(folder / "steps.db")) as db, db:
        db.executemany(
            "INSERT INTO step_jobs (order_id, policy_version, state) VALUES (?, 1, 'done')",
            [(i,) for i in ids],
        )
        db.executemany(
            "INSERT INTO job_steps (order_id, step, result) VALUES (?, ?, '{}')",
            [(i, step) for i in ids for step in POLICIES_V1],
        )


@CHECKS.add(
    1,
    "read ALL of the job's own checkpoints (WHERE order_id = ...), however many other "
    "jobs the database holds: a read capped at some rows (LIMIT, fetchmany()) or filtered "
    "in Python from the first rows misses them, and a resume calls every step again",
)
def a_resume_among_hundreds_of_jobs_skips_its_steps(ns: Namespace) -> None:
    order: dict[str, Any] = {
        "id": 9001,
        "customer": "cus_ivo",
        "email": "ivo@example.com",
        "sku": "bowl",
        "amount": 1234,
    }
    with scene(ns) as folder:
        # Earlier orders, all done, written straight into the job's database; then, once
        # the job was killed, as many more by other workers before its resume: its rows
        # are neither the first nor the newest (ORDER BY rowid DESC LIMIT ... misses them).
        _ex14h_busy(folder, range(1, BUSY + 1))
        run(ns, folder, order, 1, crash_after="mail.send")
        _ex14h_busy(folder, range(BUSY + 1, 2 * BUSY + 1))
        got = dict(ns.harness(HARNESS + "run", str(folder), order, 1, None, False, False))
        charges = [c for c in world_of(folder)["calls"] if c[0] == "payments"]
        ok, seen = exactly_once(folder, order, 1)
        expect(
            got.get("returned") == "done" and ok and len(charges) == 1,
            _(
                "order {order_id}, killed right after its e-mail in a database holding "
                "{count} other jobs' checkpoints, resumed: the charge called once (its "
                "checkpoint read), 'done' and {effects}"
            ).format(
                order_id=order["id"],
                count=2 * BUSY * len(POLICIES_V1),
                effects=wanted(order, 1, False),
            ),
            _("run_order {returned}; the payment API called {calls} time(s); {seen}").format(
                returned=_ex14h_ended(got), calls=len(charges), seen=seen
            ),
            _(
                "select the order's own checkpoints with WHERE order_id = :id and read every "
                "row the query returns"
            ),
        )


@CHECKS.add(
    2,
    "a job killed before its first checkpoint has started: follow the policy_version "
    "stored by its first run from the first step on, never the call's while job_steps "
    "is still empty",
    severe=True,
)
def a_job_killed_before_its_first_checkpoint_keeps_its_version(ns: Namespace) -> None:
    for first, then in ((1, 2), (2, 1)):
        with scene(ns) as folder:
            crashed = run(ns, folder, ORDER, first, crash_after="ledger.transaction()")
            expect(
                crashed["fired"],
                _("a crash right after the reservation (policy version {version}) to fire").format(
                    version=first
                ),
                _("it {outcome} without a ledger transaction").format(
                    outcome=repr(crashed.get("returned", "raised"))
                ),
            )
            got = run(ns, folder, ORDER, then)
            ok, seen = exactly_once(folder, ORDER, first)
            expect(
                got.get("returned") == "done" and ok,
                _(
                    "version {version}'s {count} e-mail(s) after a start on version {version}, "
                    "a crash right after the reservation (no checkpoint yet) and a resume "
                    "with policy_version={resumed_version}"
                ).format(version=first, count=MAILS[first], resumed_version=then),
                f"{got.get('returned')!r}; {seen}",
            )


@CHECKS.add(
    1,
    "record the decline and 'failed' BEFORE the release: a worker killed right after the "
    "release and run again must not call the payment API again for a charge it knows "
    "was declined",
    severe=True,
)
def a_kill_right_after_the_release_does_not_charge_again(ns: Namespace) -> None:
    with scene(ns, DECLINES) as folder:
        # The second ledger transaction of the run is the release (the first: the reserve).
        crashed = run(ns, folder, ORDER, 1, crash_after="ledger.transaction()#2")
        expect(
            crashed["fired"],
            "a crash right after the release's ledger transaction to fire",
            _("it {outcome}").format(outcome=repr(crashed.get("returned", "raised"))),
        )
        got = run(ns, folder, ORDER)
        truth = world_of(folder)
        charges = [c for c in truth["calls"] if c[0] == "payments"]
        ok, seen = exactly_once(folder, ORDER, 1, declined=True)
        expect(
            got.get("returned") == "failed" and ok and len(charges) == 1,
            _(
                "after a kill right after the release and a re-run: 'failed', {effects}, and "
                "the declined charge called once"
            ).format(effects=wanted(ORDER, 1, True)),
            _("{returned}; {seen}; {count} call(s) to the payment API").format(
                returned=repr(got.get("returned")), seen=seen, count=len(charges)
            ),
        )


@CHECKS.add(
    2,
    "the release's key comes from the order too, never from the time or a uuid4(): a "
    "worker killed right after the release and restarted later (the next day, month or "
    "year, another machine) must find it done, not put the stock back twice",
    severe=True,
)
def a_release_resumed_by_a_restarted_worker_releases_once(ns: Namespace) -> None:
    with scene(ns, DECLINES) as folder:
        # The second ledger transaction of the run is the release (the first: the reserve).
        crashed = run(ns, folder, ORDER, 1, crash_after="ledger.transaction()#2")
        expect(
            crashed["fired"],
            "a crash right after the release's ledger transaction to fire",
            _("it {outcome}").format(outcome=repr(crashed.get("returned", "raised"))),
        )
        got = run(ns, folder, ORDER, salted=True)
        ok, seen = exactly_once(folder, ORDER, 1, declined=True)
        expect(
            got.get("returned") == "failed" and ok,
            _(
                "after a kill right after the release and a re-run by a worker restarted a "
                "day and an hour later (the next month and year): 'failed', {effects}"
            ).format(effects=wanted(ORDER, 1, True)),
            _("{returned}; {seen}").format(returned=repr(got.get("returned")), seen=seen),
        )


@CHECKS.add(
    1,
    "each e-mail says what it is, to the order's address as it is (capitals too): the "
    "receipt f'Receipt for order {id}', then the e-mail f'Order {id} is on its way' "
    "(policy version 2 sends both)",
)
def the_receipt_and_the_email_say_what_they_are(ns: Namespace) -> None:
    # The address as the shop holds it: the part before the @ may tell two mailboxes
    # apart by its capitals alone, so it goes out as it is, never lower-cased.
    order = {**ORDER, "email": "Ana.Souza@Example.com"}
    # Then another order in the same worker: its e-mails name its own id, not a subject
    # the worker made (and kept) for the first one. Its id has seven digits: the subject
    # names it as it is, no thousands separator ('1,234,567'), no padding, no cut.
    then = {"id": 1234567, "customer": "cus_bia", "email": "bia@example.com", "sku": "pen"}
    then["amount"] = 1500
    with scene(ns) as folder:
        ns.harness(HARNESS + "run_in_each_folder", [str(folder)] * 2, [order, then], 2)
        sent = [
            (p.get("to"), p.get("subject"))
            for service, _key, p in world_of(folder)["effects"]
            if service == "mail"
        ]
        later = [subject for to, subject in sent if to == then["email"]]
        sent = [(to, subject) for to, subject in sent if to != then["email"]]
        addresses = [to for to, _subject in sent]
        expect(
            addresses == [order["email"]] * 2,
            _("the receipt and the e-mail of order {order_id} sent to {address}").format(
                order_id=order["id"], address=repr(order["email"])
            ),
            _("e-mails to {addresses}").format(addresses=addresses),
            _(
                "pass order['email'] to world.mail.send as it is: an address lower-cased is "
                "another mailbox's"
            ),
        )
        subjects = [subject for to, subject in sent if to == order["email"]]
        want = [f"Receipt for order {order['id']}", f"Order {order['id']} is on its way"]
        expect(
            subjects == want,
            _("the subjects {subjects} for order {order_id} on policy version 2").format(
                subjects=want, order_id=ORDER["id"]
            ),
            subjects,
        )
        want = [f"Receipt for order {then['id']}", f"Order {then['id']} is on its way"]
        expect(
            later == want,
            _(
                "the subjects {subjects} for order {order_id}, run by the same worker right "
                "after order {earlier_id}"
            ).format(subjects=want, order_id=then["id"], earlier_id=order["id"]),
            later,
            _(
                "format each subject with the order in hand, every call: a subject kept "
                "from an earlier order tells one customer another's order"
            ),
        )


@CHECKS.add(
    2,
    "two orders never share a key: join the key's parts with a separator, the order id "
    "as its own part (f'order:{id}:{step}'); glued together, customer 'cus_7' with "
    "order 12 and customer 'cus_71' with order 2 both give 'cus_712'",
    severe=True,
)
def keys_of_two_orders_never_run_together(ns: Namespace) -> None:
    first = {**ORDER, "id": 12, "customer": "cus_7", "email": "sete@example.com"}
    second = {**ORDER, "id": 2, "customer": "cus_71", "email": "setenta@example.com", "sku": "pen"}
    with scene(ns) as folder:
        ran = [run(ns, folder, order).get("returned") for order in (first, second)]
        truth = world_of(folder)
        got = [found(truth, order) for order in (first, second)]
        want = [wanted(order, 1, False) for order in (first, second)]
        expect(
            ran == ["done", "done"] and got == want,
            _(
                "orders 12 of cus_7 and 2 of cus_71 both 'done', each with its own effects: "
                "{effects}"
            ).format(effects=want),
            _("{ran}; {effects}").format(ran=ran, effects=got),
        )


@CHECKS.add(
    2,
    "each key holds the WHOLE order id: never cut it (str(id)[:8], its last digits, id % "
    "10**6, the key capped at a column's width), and never look an order's steps up by "
    "a prefix of its id; orders with long ids that share a beginning or an end are "
    "still orders of their own",
    severe=True,
)
def keys_of_orders_with_long_ids_never_collide(ns: Namespace) -> None:
    # The second id is the first's next; the third is the first's beginning and its end
    # (the same first and last twelve digits). The first order is declined, so its
    # reserve and release keys meet too.
    ids = [123456123456123456, 123456123456123457, 123456123456]
    orders = [
        {
            "id": i,
            "customer": f"cus_{n}",
            "email": f"c{n}@example.com",
            "sku": f"sku-{n}",
            "amount": 100 * (n + 1),
        }
        for n, i in enumerate(ids)
    ]
    with scene(ns, 1) as folder:
        ran = []
        for order in orders:
            # A key one order shares with another may be refused as reused: say so.
            got = dict(ns.harness(HARNESS + "run", str(folder), order, 1, None, False, False))
            ran.append(raised_text(got) if "raised" in got else got.get("returned"))
        truth = world_of(folder)
        got_effects = [found(truth, order) for order in orders]
        want = [wanted(order, 1, n == 0) for n, order in enumerate(orders)]
        expect(
            ran == ["failed", "done", "done"] and got_effects == want,
            _("orders {ids} (the first declined) each with its own effects: {effects}").format(
                ids=ids, effects=want
            ),
            _("{ran}; {effects}").format(ran=ran, effects=got_effects),
        )


#: The fewest characters a key must have that differ from order to order, when it does
#: not hold the order id: 16 hex digits are 64 bits, which repeat once in some four
#: billion orders; 8 (32 bits) repeat among some 65,000.
SHORTEST = 16


def _ex14h_holds_the_id(order_id: int, key: str) -> bool:
    """``key`` holds ``order_id`` whole, in decimal or in hex (f'{id:x}', f'{id:X}'): two
    orders' keys then differ however short they are."""
    return any(f"{order_id:{way}}" in key for way in ("d", "x", "X"))


@CHECKS.add(
    2,
    "each key holds the order id, or a digest of the order and the step of at least 16 "
    "characters (64 bits): a sha256 cut to 8 hex characters, or a crc32, is 32 bits, and "
    "among some 65,000 orders two share a key; the payment API answers the second with "
    "the first one's charge, and the ledger finds its reservation done",
    severe=True,
)
def keys_are_no_short_digest_of_the_order(ns: Namespace) -> None:
    # Ids of every length; the first order is declined, so its release's key counts too.
    ids = [45487, 64999, 2718281828, 31415926535897]
    orders: list[dict[str, Any]] = [
        {
            "id": i,
            "customer": f"cus_{n}",
            "email": f"d{n}@example.com",
            "sku": f"sku-{n}",
            "amount": 100 * (n + 1),
        }
        for n, i in enumerate(ids)
    ]
    held: dict[int, set[tuple[str, str]]] = {}
    seen: set[tuple[str, str]] = set()
    with scene(ns, 1) as folder:
        for order in orders:
            ns.harness(HARNESS + "run", str(folder), order, 1, None, False, False)
            truth = world_of(folder)
            now = set(truth["keys"]) | {("ledger", key) for key in truth["marks"]}
            held[order["id"]], seen = now - seen, now
    short = []
    for service in ("payments", "mail", "ledger"):
        keys = [(i, k) for i, ks in held.items() for s, k in sorted(ks) if s == service]
        head, tail = shared_ends([k for _i, k in keys])
        short += [
            _(
                "order {order_id}'s {service} key {key} ({count} characters differ from order "
                "to order)"
            ).format(order_id=i, service=service, key=repr(k), count=len(k) - head - tail)
            for i, k in keys
            if not _ex14h_holds_the_id(i, k) and len(k) - head - tail < SHORTEST
        ]
    expect(
        not short,
        _(
            "each key of orders {ids} (the ledger's marks, the payment and mail APIs' "
            "Idempotency-Keys) holding its order id, or at least {least} characters that "
            "differ from order to order"
        ).format(ids=ids, least=SHORTEST),
        "; ".join(short[:3]),
        _(
            "build each key from the order id and the step (f'order:{id}:{step}'), or use "
            "a whole digest of them (hashlib.sha256(...).hexdigest()): a digest cut to a "
            "few characters gives two orders one key"
        ),
    )


@CHECKS.add(
    2,
    "a second copy of the job (a worker restarted while the first still runs, slowly) "
    "must not reserve twice: read the reserve's mark and post in ONE ledger "
    "transaction; a mark read in one transaction and a post in the next let both "
    "copies see 'not done'",
    severe=True,
)
def a_second_copy_of_the_job_reserves_once(ns: Namespace) -> None:
    with scene(ns) as folder:
        ns.harness(HARNESS + "run_overtaken", str(folder), ORDER, 1)
        ok, seen = exactly_once(folder, ORDER, 1)
        expect(
            ok,
            _(
                "one reservation, one charge, one e-mail for order {order_id} when a second "
                "copy of its job ran whole right after the first copy's first ledger "
                "transaction"
            ).format(order_id=ORDER["id"]),
            seen,
        )


@CHECKS.add(
    2,
    "follow the policy version the job's row holds once you have written it, never the "
    "one you were called with: two deliveries on each side of a deploy, where the other "
    "copy creates the row between your look at it and your INSERT, leave a job of one "
    "version that ran the steps of the other (a receipt a version 1 job never promised)",
    severe=True,
)
def both_sides_of_a_deploy_follow_the_row(ns: Namespace) -> None:
    for first, second in ((2, 1), (1, 2)):
        with scene(ns) as folder:
            got = ns.harness(
                HARNESS + "run_overtaken_at_its_read", str(folder), ORDER, first, second
            )
            if not got["fired"]:
                continue  # no look at the job's row outside a transaction: no gap
            with reading(folder / "steps.db") as conn:
                rows = [r for r in rows_of(conn, "all_step_jobs") if r["order_id"] == ORDER["id"]]
            stored = rows[0]["policy_version"] if rows else None
            if stored not in MAILS:
                continue  # no job row, or no version in it: other checks say so
            truth = found(world_of(folder), ORDER)
            expect(
                truth == wanted(ORDER, stored, False),
                _(
                    "order {order_id}'s effects those of version {stored}, the version its "
                    "job's row holds, when a copy called with version {first} read the row, "
                    "then a copy called with version {second} ran whole before it went on"
                ).format(order_id=ORDER["id"], stored=stored, first=first, second=second),
                _("effects {effects}").format(effects=truth),
                _(
                    "INSERT the job's row (ON CONFLICT DO NOTHING), then read it back and "
                    "follow the policy_version it holds: a row another copy wrote first "
                    "wins, whatever version this call was given"
                ),
            )


@CHECKS.add(
    2,
    "'done' is a promise that every step ran: a checkpoint you cannot write (another "
    "copy of the job wrote it first) is an error to let propagate, or a step to treat "
    "as done and go on from; answering 'done' there ends a job whose later steps never "
    "ran, and nothing retries it",
    severe=True,
)
def done_is_answered_only_when_every_step_ran(ns: Namespace) -> None:
    with scene(ns) as folder:
        # A second copy runs right after the first copy's reserve, checkpoints the reserve
        # and dies right after the charge: the first copy's reserve checkpoint conflicts.
        got = ns.harness(
            HARNESS + "run_overtaken", str(folder), ORDER, 1, "ledger.transaction()",
            "payments.charge",
        )  # fmt: skip
        expect(
            got["fired"],
            "a second copy of the job crashed right after its charge",
            got["second"],
        )
        answered, ended = got["first"].get("returned"), state_of(folder, ORDER["id"])
        truth = found(world_of(folder), ORDER)
        expect(
            answered != "done" or (ended == "done" and truth == wanted(ORDER, 1, False)),
            _(
                "the first copy of order {order_id}'s job to finish it (the job 'done', its "
                "e-mail sent) or to raise, when its reserve checkpoint was written by a "
                "second copy that then died right after the charge"
            ).format(order_id=ORDER["id"]),
            _("it answered 'done'; the job {state}, effects {effects}").format(
                state=repr(ended), effects=truth
            ),
        )
        if answered != "done":  # the job is delivered again and must finish
            run(ns, folder, ORDER)
        ok, seen = exactly_once(folder, ORDER, 1)
        expect(
            ok,
            _("one reservation, one charge, one e-mail for order {order_id} in the end").format(
                order_id=ORDER["id"]
            ),
            seen,
        )


@CHECKS.add(
    2,
    "the compensation is no best effort: when the release fails (the ledger is down), "
    "run_order raises, so the job is retried and releases later; returning 'failed' "
    "tells the caller the job ended, and the stock is never put back",
    severe=True,
)
def a_failed_release_is_retried_not_swallowed(ns: Namespace) -> None:
    with scene(ns, DECLINES) as folder:
        # The reserve's ledger transaction is the first; the release's the second.
        # Only the first run: its answer must match the world as it left it.
        got = ns.harness(
            HARNESS + "run_with_the_ledger_down", str(folder), ORDER, 1, 2, False, False
        )
        first = got["first"]
        if first.get("returned") == "failed":
            # The release retried inside the step, under its key: 'failed' once the stock is back.
            ok, seen = exactly_once(folder, ORDER, 1, declined=True)
            expect(
                ok,
                _(
                    "run_order to raise when the ledger fails during the release of a declined "
                    "order, or to return 'failed' only once a retry inside the step put the "
                    "stock back: {effects}, the job 'failed'"
                ).format(effects=wanted(ORDER, 1, True)),
                _("it returned 'failed'; {seen}").format(seen=seen),
            )
            return
        expect(
            "raised" in first,
            _(
                "run_order to raise when the ledger fails during the release of a declined "
                "order, never return 'failed'"
            ),
            _("it returned {value}").format(value=repr(first.get("returned"))),
        )
        run(ns, folder, ORDER)  # delivered again, the ledger back
        ok, seen = exactly_once(folder, ORDER, 1, declined=True)
        expect(
            ok,
            _("the stock reserved and released once after the job ran again with the ledger back"),
            seen,
        )


@CHECKS.add(
    1,
    "a reserve or a release already done returns {'skipped': key} (its mark read in the "
    "ledger transaction), as the contract says: the checkpoint then records that the "
    "step was found done",
)
def a_step_found_done_says_skipped(ns: Namespace) -> None:
    for step in ("reserve", "release"):
        with scene(ns) as folder:
            got = ns.harness(HARNESS + "do_step_twice", str(folder), ORDER, step)
            second = got[1].get("returned")
            marked = world_of(folder)["marks"]  # the key the first call marked done
            expect(
                isinstance(second, dict)
                and list(second) == ["skipped"]
                and (not marked or second["skipped"] in marked),
                _(
                    "do_step(world, order, {step!r}) a second time to return {{'skipped': key}}, "
                    "the key its mark was written under: {keys}"
                ).format(step=step, keys=marked),
                repr(second) if "returned" in got[1] else raised_text(got[1]),
            )


@CHECKS.add(
    2,
    "key each step by the order's id and the step, not by the order's content (a hash of "
    "the whole order dict, its amount, its sku, its customer): a job resumed after the "
    "customer changed the e-mail address, the amount, the item or the account sends other "
    "keys, and reserves, charges or e-mails again",
    severe=True,
)
def a_resumed_order_with_a_new_address_is_charged_once(ns: Namespace) -> None:
    moved = {**ORDER, "email": "ana.souza@example.com"}  # read again from the shop's database
    # Another order whose price and item changed before its resume (a coupon, a swap):
    # its first charge went through, so a charge under a new key pays a second time.
    other = {"id": 9, "customer": "cus_rui", "email": "rui@example.com", "sku": "cup"}
    repriced = {**other, "amount": 1650, "sku": "pen"}
    other["amount"] = 1500
    # A third one killed right after its e-mail went out, its address changed since.
    mailed = {"id": 11, "customer": "cus_lia", "email": "lia@example.com", "sku": "bowl"}
    mailed["amount"] = 990
    remailed = {**mailed, "email": "lia.melo@example.com"}
    with scene(ns) as folder:
        run(ns, folder, ORDER, crash_after="payments.charge")
        run(ns, folder, other, crash_after="payments.charge")
        run(ns, folder, moved)
        # The reply may be a conflict of the key (IdempotencyKeyReused): raised or not,
        # what counts here is the payment API's own record.
        ns.harness(HARNESS + "run", str(folder), repriced, 1, None, False)
        run(ns, folder, mailed, crash_after="mail.send")
        ns.harness(HARNESS + "run", str(folder), remailed, 1, None, False)
        got = found(world_of(folder), ORDER)
        mails = found(world_of(folder), moved)["mail"] + got["mail"]
        expect(
            got["ledger"] == [[ORDER["sku"], -1]]
            and got["payments"] == [[ORDER["customer"], ORDER["amount"]]]
            and len(mails) == 1,
            _(
                "order {order_id} reserved once, charged once and e-mailed once after a crash "
                "right after the charge and a resume whose order has a new e-mail address"
            ).format(order_id=ORDER["id"]),
            _("the ledger {ledger}, charges {charges}, e-mails {mails}").format(
                ledger=got["ledger"], charges=got["payments"], mails=mails
            ),
        )
        charged = found(world_of(folder), other)["payments"]
        expect(
            charged == [[other["customer"], other["amount"]]],
            _(
                "order {order_id} charged once, {amount} as first asked, after a crash right "
                "after the charge and a resume whose order has a new amount ({new_amount}) "
                "and sku"
            ).format(order_id=other["id"], amount=other["amount"], new_amount=repriced["amount"]),
            _("charges {charges}").format(charges=charged),
            _(
                "a key names one operation, whatever its details: build it from the order id "
                "and the step only, and a changed amount meets the payment API's stored "
                "request instead of a second charge"
            ),
        )
        truth = world_of(folder)
        sent = found(truth, mailed)["mail"] + found(truth, remailed)["mail"]
        expect(
            len(sent) == 1,
            _(
                "order {order_id} e-mailed once after a crash right after its e-mail and a "
                "resume whose order has a new e-mail address"
            ).format(order_id=mailed["id"]),
            _("e-mails to {addresses}").format(addresses=sent),
        )
        # A guest's order whose charge went through before the guest signed up: resumed,
        # the order names the new account. A key holding the customer charges again.
        guest = {"id": 13, "customer": "guest_8f3a", "email": "bia@example.com", "sku": "mug"}
        guest["amount"] = 2100
        signed = {**guest, "customer": "cus_bia"}
        run(ns, folder, guest, crash_after="payments.charge")
        ns.harness(HARNESS + "run", str(folder), signed, 1, None, False)
        truth = world_of(folder)
        paid = found(truth, guest)["payments"] + found(truth, signed)["payments"]
        expect(
            paid == [[guest["customer"], guest["amount"]]],
            _(
                "order {order_id} charged once, to {first} as first asked, after a crash "
                "right after the charge and a resume whose order names another customer "
                "({then}: the guest signed up)"
            ).format(order_id=guest["id"], first=guest["customer"], then=signed["customer"]),
            _("charges {charges}").format(charges=paid),
            _(
                "a key names one operation, whatever its details: build it from the order id "
                "and the step only; the customer is a detail the order may correct"
            ),
        )


@CHECKS.add(
    1,
    "a key the payment API says was used for another request (IdempotencyKeyReused, an "
    "IdempotencyConflict) is no decline: let it propagate, and leave the job running, "
    "its stock reserved; the customer may have paid under that key",
    severe=True,
)
def a_key_conflict_on_resume_is_not_a_decline(ns: Namespace) -> None:
    # Killed right after its charge went through, then resumed after a coupon changed
    # the amount: under the same key, the payment API answers IdempotencyKeyReused.
    paid = {"id": 21, "customer": "cus_davi", "email": "davi@example.com", "sku": "mug"}
    paid["amount"] = 2400
    # Then the conflict as a payment library words it (RequestMismatch, a subclass of
    # IdempotencyKeyReused): its message names no idempotency and no parameters, so
    # only its class tells it from a decline.
    for worded in (None, 402):
        _a_key_conflict_on_resume_in(ns, paid, worded)


def _a_key_conflict_on_resume_in(ns: Namespace, paid: dict[str, Any], worded: int | None) -> None:
    with scene(ns) as folder:
        run(ns, folder, paid, crash_after="payments.charge")
        resumed = {**paid, "amount": 2100}
        ns.harness(HARNESS + "run", str(folder), resumed, 1, None, False, False, worded)
        truth = world_of(folder)
        conflicts = [c for c in truth["calls"] if c[0] == "payments" and c[2] != "ok"]
        state, steps = state_of(folder, paid["id"]), steps_of(folder, paid["id"])
        stock = found(truth, paid)["ledger"]
        expect(
            not conflicts
            or (state != "failed" and "release" not in steps and stock == [[paid["sku"], -1]]),
            _(
                "order {order_id}, charged {amount} before a crash and resumed with "
                "{new_amount}: the payment API's key conflict propagates, the job stays "
                "'running' and its stock reserved"
            ).format(order_id=paid["id"], amount=paid["amount"], new_amount=2100),
            _("the job {state}, its steps {steps}, the ledger {ledger}").format(
                state=repr(state), steps=steps, ledger=stock
            ),
            _(
                "a PermanentError that is an IdempotencyConflict is a bug, not a decline: "
                "re-raise it (isinstance(exc, IdempotencyConflict)) before recording "
                "'declined' and releasing the stock"
            ),
        )


@CHECKS.add(
    2,
    "set 'failed' or 'done' WHERE order_id = this job's order, nothing wider: another "
    "order's job still 'running' (its worker killed right after the charge, it waits for "
    "its retry) must not end with it, or its resume skips the e-mail",
    severe=True,
)
def one_orders_end_leaves_other_jobs_running(ns: Namespace) -> None:
    declined = {
        "id": 7,
        "customer": "cus_bia",
        "email": "bia@example.com",
        "sku": "pen",
        "amount": 1500,
    }
    paid = {
        "id": 8,
        "customer": "cus_caio",
        "email": "caio@example.com",
        "sku": "cup",
        "amount": 700,
    }
    with scene(ns) as folder:
        # Killed right after its charge (a 503 would do, but a step may retry one itself).
        ns.harness(HARNESS + "run", str(folder), ORDER, 1, "payments.charge", False)
        with_declines(folder, "payments", "reject")
        ends = [run(ns, folder, order).get("returned") for order in (declined, paid)]
        state = state_of(folder, ORDER["id"])
        expect(
            state == "running",
            _(
                "order {order_id}'s job still 'running' (killed right after its charge) after "
                "order {declined} was declined and order {paid} was done"
            ).format(order_id=ORDER["id"], declined=declined["id"], paid=paid["id"]),
            _("the job {state} (the two other orders returned {ends})").format(
                state=repr(state), ends=ends
            ),
        )
        again = run(ns, folder, ORDER)
        ok, seen = exactly_once(folder, ORDER, 1)
        expect(
            again.get("returned") == "done" and ok,
            _("the retry of order {order_id} to finish it: {effects}, the job 'done'").format(
                order_id=ORDER["id"], effects=wanted(ORDER, 1, False)
            ),
            f"{again.get('returned')!r}; {seen}",
        )


@CHECKS.add(
    1,
    "the decline's checkpoint is the row ('charge', 'declined'): result = the text "
    "'declined', not the reply or a JSON object, so whoever reads job_steps tells a "
    "declined charge from a paid one",
)
def the_decline_is_checkpointed_as_declined(ns: Namespace) -> None:
    # Run whole, then killed right after the release (the second ledger transaction) and
    # run again: the decline's row was written before the release, so it is there too.
    # Then killed right after the write that set the job 'failed' and run again: written
    # in one transaction with it, the decline's row is there too (or neither, and the
    # re-run declines again).
    for crash_after in (None, "ledger.transaction()#2", "failed"):
        with scene(ns, DECLINES) as folder:
            if crash_after == "failed":
                ns.harness(HARNESS + "run_killed_once_failed", str(folder), ORDER, 1)
            else:
                run(ns, folder, ORDER, crash_after=crash_after)
            if crash_after is not None:
                run(ns, folder, ORDER)
            with reading(folder / "steps.db") as conn:
                results = {
                    r["step"]: r["result"]
                    for r in rows_of(conn, "all_job_steps")
                    if r["order_id"] == ORDER["id"]
                }
            expect(
                results.get("charge") == "declined",
                _("the checkpoint ('charge', 'declined') for the declined order {order_id}").format(
                    order_id=ORDER["id"]
                )
                if crash_after is None
                else _(
                    "the checkpoint ('charge', 'declined') for the declined order {order_id}, "
                    "after a kill right after the release and a re-run"
                ).format(order_id=ORDER["id"])
                if crash_after != "failed"
                else _(
                    "the checkpoint ('charge', 'declined') for the declined order {order_id}, "
                    "after a kill right after the job was set 'failed' and a re-run"
                ).format(order_id=ORDER["id"]),
                _("the charge's checkpoint holds {result}").format(
                    result=repr(results.get("charge"))
                ),
                None
                if crash_after is None
                else _(
                    "write ('charge', 'declined') with state = 'failed' in one transaction "
                    "BEFORE the release: a run killed after the release never gets back to "
                    "a checkpoint it left for later"
                )
                if crash_after != "failed"
                else _(
                    "write ('charge', 'declined') and state = 'failed' in ONE transaction "
                    "(BEGIN IMMEDIATE ... COMMIT): killed between two statements, the job "
                    "stays 'failed' and its re-run only releases, so the decline is never "
                    "recorded"
                ),
            )


@CHECKS.add(
    2,
    "one worker process serves two shops, each with its own job database and world: "
    "order 42 of each is a job of its own, all its steps run there; what a run learns "
    "lives in the job's tables, never in the process's memory",
    severe=True,
)
def one_worker_runs_the_jobs_of_two_databases(ns: Namespace) -> None:
    with scene(ns) as first, scene(ns) as second:
        # The second shop's job started under policy version 2: its own, not the first's.
        got = ns.harness(HARNESS + "run_in_each_folder", [str(first), str(second)], ORDER, [1, 2])
        ran = [g["returned"] if "returned" in g else raised_text(g) for g in got]
        ok = [exactly_once(folder, ORDER, v) for folder, v in ((first, 1), (second, 2))]
        expect(
            ran == ["done", "done"] and all(fine for fine, _seen in ok),
            _(
                "in each of the two databases, order {order_id} 'done' with its own effects "
                "in its own world (policy version 1 in the first, 2 in the second): {first} "
                "and {second}"
            ).format(
                order_id=ORDER["id"],
                first=wanted(ORDER, 1, False),
                second=wanted(ORDER, 2, False),
            ),
            _("returned {ran}; the first world: {first}; the second: {second}").format(
                ran=ran, first=ok[0][1], second=ok[1][1]
            ),
            _(
                "keep nothing about a job in a module-level dict or set: read step_jobs and "
                "job_steps on the connection you are given, every run"
            ),
        )


@CHECKS.add(
    2,
    "a charge whose reply is lost (a timeout after the payment went through) is charged "
    "once: let the error out, or retry it under the SAME key; a retry under a new key "
    "(key + attempt) pays a second time",
    severe=True,
)
def a_charge_whose_reply_was_lost_is_charged_once(ns: Namespace) -> None:
    with scene(ns) as folder:
        with_declines(folder, "payments", "lose_response")
        first = dict(ns.harness(HARNESS + "run", str(folder), ORDER, 1, None, False))
        again = run(ns, folder, ORDER) if "raised" in first else first
        ok, seen = exactly_once(folder, ORDER, 1)
        expect(
            again.get("returned") == "done" and ok,
            _(
                "order {order_id}, its first charge's reply lost on the way back, run (and run "
                "again if it raised) to the end: {effects}, the job 'done'"
            ).format(order_id=ORDER["id"], effects=wanted(ORDER, 1, False)),
            f"{again.get('returned')!r}; {seen}",
            _(
                "a lost reply may hide a payment that went through: only the same "
                "idempotency key makes the payment API answer it instead of charging again"
            ),
        )
    # The e-mail's reply lost too: a retry under a new key sends it a second time.
    with scene(ns) as folder:
        with_declines(folder, "mail", "lose_response")
        first = dict(ns.harness(HARNESS + "run", str(folder), ORDER, 1, None, False))
        again = run(ns, folder, ORDER) if "raised" in first else first
        ok, seen = exactly_once(folder, ORDER, 1)
        expect(
            again.get("returned") == "done" and ok,
            _(
                "order {order_id}, its e-mail's reply lost on the way back, run (and run "
                "again if it raised) to the end: {effects}, the job 'done'"
            ).format(order_id=ORDER["id"], effects=wanted(ORDER, 1, False)),
            f"{again.get('returned')!r}; {seen}",
        )



class _Ex14hCutOff(Exception):
    """The first worker's charge, stopped while the payment API still runs it."""


class _Ex14hStalled(FakeClock):
    def sleep(self, seconds: float) -> None:
        raise _Ex14hCutOff


def _ex14h_call(folder: Path, service: str, key: str, params: dict[str, Any], at: float) -> None:
    """``service``'s call under ``key`` at ``at``; before ``LAB_EPOCH`` + 1: one the API
    has taken (its key held) but not finished, as a first worker's slow request."""
    stalled = at < LAB_EPOCH + 1
    with World(folder / "world.db", _Ex14hStalled(at) if stalled else FakeClock(at)) as world:
        api = getattr(world, service)
        if stalled:
            api.script("slow")
        try:
            (api.charge if service == "payments" else api.send)(**params, idempotency_key=key)
        except _Ex14hCutOff:
            pass


@CHECKS.add(
    2,
    "a 409 from the payment or mail API (KeyInProgress: a request under the same key is "
    "still running, from a first worker) is no reason for a new key: retry under the same "
    "key (or let the error out); a call under another key charges or mails a second time "
    "when the first request finishes",
    severe=True,
)
def a_call_still_in_progress_is_not_made_again(ns: Namespace) -> None:
    with scene(ns) as folder:
        run(ns, folder, ORDER)
        truth = world_of(folder)
    held = set(truth["keys"])
    for service, what in (("payments", _("charge")), ("mail", _("e-mail"))):
        calls = [(k, p) for s, k, p in truth["effects"] if s == service and (s, k) in held]
        if not calls:
            continue  # no call under an idempotency key: other checks say so
        key, params = calls[0]
        with scene(ns) as folder:
            _ex14h_call(folder, service, key, params, LAB_EPOCH)
            first = dict(ns.harness(HARNESS + "run", str(folder), ORDER, 1, None, False))
            _ex14h_call(folder, service, key, params, LAB_EPOCH + 3600)  # the first one ends
            again = dict(ns.harness(HARNESS + "run", str(folder), ORDER, 1, None, False))
            got = found(world_of(folder), ORDER)[service]
            expect(
                len(got) == 1,
                _(
                    "one {what} for order {order_id} when its {what} got a 409 (a request "
                    "under its key still running), that request then finished and the job "
                    "ran again"
                ).format(what=what, order_id=ORDER["id"]),
                _("{what}: {calls}; the first run {first}, the second {again}").format(
                    what=what,
                    calls=got,
                    first=_ex14h_ended(first),
                    again=_ex14h_ended(again),
                ),
                _(
                    "KeyInProgress is a TransientError: let it propagate (the job is retried "
                    "later) or retry under the SAME key; the request in flight may still "
                    "finish"
                ),
            )

def _steps_done(effects: list[Any], order: dict[str, Any]) -> list[str]:
    """The steps ``effects`` (``(service, params)``, in order) did for ``order``."""
    steps = []
    for service, p in effects:
        if service == "ledger" and p.get("account") == order["sku"]:
            steps.append("reserve" if p.get("amount", 0) < 0 else "release")
        elif service == "payments" and p.get("customer") == order["customer"]:
            steps.append("charge")
        elif service == "mail" and p.get("to") == order["email"]:
            steps.append("receipt" if str(p.get("subject", "")).startswith("Receipt") else "email")
    return steps


@CHECKS.add(
    2,
    "run the steps in the order of POLICIES[version], a tuple, never in the order of a set "
    "(set(steps) - done): a set of strings iterates in hash order, which differs in every "
    "worker process, so the e-mail may go out before the charge and a decline may release "
    "stock never reserved",
    timeout=30.0,
    severe=True,
)
def the_steps_run_in_their_policys_order_in_any_process(ns: Namespace) -> None:
    orders = [
        (ORDER, 1),
        (
            {
                "id": 7,
                "customer": "cus_bia",
                "email": "bia@example.com",
                "sku": "pen",
                "amount": 1500,
            },
            2,
        ),
    ]
    got = ns.harness(HARNESS + "run_in_a_new_process", orders)
    effects, where = got["effects"], _("run by a worker process with another hash seed")
    if effects is None or any(str(e).startswith("raised ") for e in got["ended"]):
        # Not shipped to a new process (check() in Jupyter), or a call the world kept in
        # memory there does not know: the real world, in this process, its hash seed.
        with scene(ns) as folder:
            got["ended"] = [
                run(ns, folder, order, version).get("returned") for order, version in orders
            ]
            effects = [(service, p) for service, _key, p in world_of(folder)["effects"]]
        where = _("run in this process")
    for order, version in orders:
        want = list(POLICIES_V2 if version == 2 else POLICIES_V1)
        steps = _steps_done(effects, order)
        expect(
            steps == want,
            _(
                "the effects of order {order_id} (policy version {version}) in the order "
                "{steps}, {where}"
            ).format(order_id=order["id"], version=version, steps=want, where=where),
            _("the effects in the order {steps}; run_order ended {ended}").format(
                steps=steps, ended=got["ended"]
            ),
        )


@CHECKS.add(
    2,
    "a worker runs its orders one after another on ONE long-lived connection: whatever "
    "path run_order leaves by (an error, a Ctrl-C, a return), it hands the connection "
    "back with no transaction open; a BEGIN IMMEDIATE left open takes the next order's "
    "writes into it, locks every other worker out, and a crash loses them",
    timeout=30.0,
    severe=True,
)
def a_failed_run_leaves_the_workers_connection_usable(ns: Namespace) -> None:
    first = {
        "id": 7,
        "customer": "cus_bia",
        "email": "bia@example.com",
        "sku": "pen",
        "amount": 1500,
    }
    then = {
        "id": 8,
        "customer": "cus_caio",
        "email": "caio@example.com",
        "sku": "cup",
        "amount": 700,
    }
    for fault, how in (
        (
            "taken",
            _(
                "declined after a second copy of its job checkpointed the charge (its "
                "'declined' checkpoint fails: IntegrityError)"
            ),
        ),
        ("release_down", _("declined, the ledger down (a 503) when its stock is released")),
        (
            "interrupted",
            _("declined and interrupted (KeyboardInterrupt) right after a write in a transaction"),
        ),
        (
            "redelivered",
            _(
                "delivered again after its job had failed and released its stock (and order 8 "
                "delivered again after its job was done)"
            ),
        ),
    ):
        with scene(ns, 1) as folder:  # the payment API declines the first order's charge
            got = ns.harness(HARNESS + "run_on_one_worker", str(folder), [first, then], fault)
        runs, seen = got["runs"], got["seen"]
        left = runs[0].get("left", {}) or runs[1].get("left", {})
        expect(
            not left
            and runs[1].get("returned") == "done"
            and seen["state"] == "done"
            and sorted(seen["steps"]) == sorted(POLICIES_V1)
            and seen["write"] == "ok",
            _(
                "order {first_id} {how}, then order {then_id} on the same long-lived "
                "connection: the connection back in autocommit mode with no transaction "
                "open after each run, and another worker's connection seeing order "
                "{then_id}'s job 'done' with its checkpoints {steps}, and free to write"
            ).format(first_id=first["id"], how=how, then_id=then["id"], steps=list(POLICIES_V1)),
            _(
                "order {first_id}: {outcome}, leaving {left}; order {then_id}: {then_outcome}, "
                "leaving {then_left}; another worker saw its job {state} with the checkpoints "
                "{steps}, and its write said {write}"
            ).format(
                first_id=first["id"],
                outcome=_ran(runs[0]),
                left=_left_text(runs[0].get("left", {})),
                then_id=then["id"],
                then_outcome=_ran(runs[1]),
                then_left=_left_text(runs[1].get("left", {})),
                state=repr(seen["state"]),
                steps=seen["steps"],
                write=repr(seen["write"]),
            ),
            _(
                "after BEGIN IMMEDIATE, end the transaction on every path: try: ... "
                "COMMIT, except BaseException (a KeyboardInterrupt is no Exception): "
                "ROLLBACK if conn.in_transaction, then raise; and no return between BEGIN "
                "and COMMIT"
            ),
        )


def _ran(result: dict[str, Any]) -> str:
    """How one run of ``run_on_one_worker`` ended, said to the student."""
    if result.get("interrupted"):
        return _("was interrupted")
    if "raised" in result:
        return raised_text(result)
    return _("returned {value}").format(value=repr(result.get("returned")))


def _left_text(left: dict[str, Any]) -> str:
    """What a run changed of its connection (``tracing.left_as_given``), said to the student."""
    if not left:
        return _("the connection as it was given")
    return ", ".join(
        _("a transaction still open") if name == "in_transaction" else f"conn.{name} = {value!r}"
        for name, value in left.items()
    )


@CHECKS.add(
    2,
    "a timeout (ResponseLost) says the call MAY have been done, not that it was: let it "
    "propagate (or retry it under the same key); a charge or an e-mail taken for done "
    "because its reply never came is lost when the request never arrived",
    severe=True,
)
def a_timeout_before_the_call_is_not_taken_for_done(ns: Namespace) -> None:
    for what, step in (("payments.charge", _("charge")), ("mail.send", _("e-mail"))):
        with scene(ns) as folder:
            got = ns.harness(HARNESS + "run_timed_out_before", str(folder), ORDER, 1, what)
            first, second = got["first"], got["second"]
            ended = second if "raised" in first else first
            ok, seen = exactly_once(folder, ORDER, 1)
            expect(
                ended.get("returned") == "done" and ok,
                _(
                    "order {order_id}, its {step} timed out before the request reached the "
                    "service (ResponseLost, nothing done), run (and run again if it raised) "
                    "to the end: {effects}, the job 'done'"
                ).format(order_id=ORDER["id"], step=step, effects=wanted(ORDER, 1, False)),
                _("run_order {outcome}, then {again}; {seen}").format(
                    outcome=_ex14h_ended(first),
                    again=_ex14h_ended(second) if second else _("not run again"),
                    seen=seen,
                ),
                _(
                    "never catch ResponseLost (a TransientError) as a success: only the "
                    "service's reply says the effect was done; re-raise it, and the retry's "
                    "same key returns the first reply if it was"
                ),
            )


def _ex14h_ended(result: dict[str, Any]) -> str:
    """How one harness run of ``run_order`` ended, said to the student."""
    if "raised" in result:
        return raised_text(result)
    return _("returned {value}").format(value=repr(result.get("returned")))


@CHECKS.add(
    1,
    "a key conflict of the charge (IdempotencyKeyReused) propagates from run_order: not a "
    "decline, and not a payment either; swallowed as 'already paid', the job ends 'done' "
    "and e-mails an order whose amount the payment API never took",
)
def a_key_conflict_is_raised_not_swallowed(ns: Namespace) -> None:
    paid = {"id": 23, "customer": "cus_gil", "email": "gil@example.com", "sku": "cup"}
    paid["amount"] = 3100
    # Then the conflict in a payment library's words (RequestMismatch): no 'idempot' in it.
    for worded in (None, 402):
        _a_key_conflict_is_raised_in(ns, paid, worded)


def _a_key_conflict_is_raised_in(ns: Namespace, paid: dict[str, Any], worded: int | None) -> None:
    with scene(ns) as folder:
        run(ns, folder, paid, crash_after="payments.charge")
        resumed = {**paid, "amount": 2700}
        got = dict(ns.harness(HARNESS + "run", str(folder), resumed, 1, None, False, False, worded))
        # Delivered again: the conflict is still there, and no checkpoint of the first
        # one lets the job skip its charge and e-mail an order nobody paid at that amount.
        again = dict(
            ns.harness(HARNESS + "run", str(folder), resumed, 1, None, False, False, worded)
        )
        truth = world_of(folder)
        conflicts = [c for c in truth["calls"] if c[0] == "payments" and c[2] != "ok"]
        state, mails = state_of(folder, paid["id"]), found(truth, paid)["mail"]
        expect(
            not conflicts
            or (
                "IdempotencyConflict" in got.get("raised", [])
                and "IdempotencyConflict" in again.get("raised", [])
                and state == "running"
                and mails == []
            ),
            _(
                "order {order_id}, charged {amount} before a crash and resumed with "
                "{new_amount}, then delivered once more: each run raises the payment API's "
                "key conflict (an IdempotencyConflict, as it came), the job stays 'running' "
                "and no e-mail goes out"
            ).format(order_id=paid["id"], amount=paid["amount"], new_amount=2700),
            _("run_order {outcome}, then {again}; the job {state}; e-mails to {mails}").format(
                outcome=_ex14h_ended(got), again=_ex14h_ended(again), state=repr(state), mails=mails
            ),
            _(
                "catch PermanentError for the decline only when it is no IdempotencyConflict, "
                "and never turn IdempotencyKeyReused into a reply or another error: re-raise "
                "it as it is, so whoever retries the job tells a key conflict from a decline"
            ),
        )


def _ex14h_job_rows(folder: Path) -> list[tuple[Any, Any]]:
    """``ORDER``'s rows of ``step_jobs`` as (policy_version, state)."""
    with reading(folder / "steps.db") as conn:
        rows = [r for r in rows_of(conn, "all_step_jobs") if r["order_id"] == ORDER["id"]]
    return [(r["policy_version"], r["state"]) for r in rows]


@CHECKS.add(
    1,
    "the job's row keeps the policy_version of its first run to its end: a job resumed "
    "after the deploy and finished must not record the version of the call that finished "
    "it, or step_jobs says it followed steps it never ran",
)
def the_jobs_row_keeps_its_first_policy_version(ns: Namespace) -> None:
    for first, then in ((1, 2), (2, 1)):
        with scene(ns) as folder:
            run(ns, folder, ORDER, first, crash_after="payments.charge")
            run(ns, folder, ORDER, then)
            stored = _ex14h_job_rows(folder)
            expect(
                stored == [(first, "done")],
                _(
                    "order {order_id}'s job row holding policy_version {version} and 'done', "
                    "after a start on version {version}, a crash right after the charge and a "
                    "resume with policy_version={resumed_version}"
                ).format(order_id=ORDER["id"], version=first, resumed_version=then),
                _("its row holds (policy_version, state) {rows}").format(rows=stored),
                _("set only state = 'done' at the end; the row's policy_version never changes"),
            )
            # The finished job delivered once more after the deploy: its INSERT finds the
            # row, and an upsert that moves a finished job to the call's version lies.
            run(ns, folder, ORDER, then)
            stored = _ex14h_job_rows(folder)
            expect(
                stored == [(first, "done")],
                _(
                    "order {order_id}'s finished job row still holding policy_version "
                    "{version} and 'done' after one more delivery with "
                    "policy_version={resumed_version}"
                ).format(order_id=ORDER["id"], version=first, resumed_version=then),
                _("its row holds (policy_version, state) {rows}").format(rows=stored),
                _(
                    "insert the job with ON CONFLICT (order_id) DO NOTHING: no later call, "
                    "finished job or not, may change the row's policy_version"
                ),
            )
        # Declined on its resume: the 'failed' it ends with is the only change to its row.
        with scene(ns) as folder:
            run(ns, folder, ORDER, first, crash_after="ledger.transaction()")
            with_declines(folder)
            run(ns, folder, ORDER, then)
            stored = _ex14h_job_rows(folder)
            expect(
                stored == [(first, "failed")],
                _(
                    "order {order_id}'s job row holding policy_version {version} and 'failed', "
                    "after a start on version {version}, a crash right after the reservation "
                    "and a resume with policy_version={resumed_version} whose charge was "
                    "declined"
                ).format(order_id=ORDER["id"], version=first, resumed_version=then),
                _("its row holds (policy_version, state) {rows}").format(rows=stored),
                _(
                    "set only state = 'failed' with the decline; the row's policy_version "
                    "never changes"
                ),
            )


@CHECKS.add(
    1,
    "every step's checkpoint holds the reply its effect made, the receipt's and the "
    "release's too: do_step returns the reply of tx.post or world.mail.send for every step, "
    "so whoever reads job_steps finds the message_id or the entry_id",
)
def each_checkpoint_holds_its_steps_reply(ns: Namespace) -> None:
    for declines, version, step in ((0, 2, "receipt"), (DECLINES, 1, "release")):
        with scene(ns, declines) as folder:
            run(ns, folder, ORDER, version)
            with World(folder / "world.db", FakeClock(LAB_EPOCH)) as world:
                replies = [
                    e.response
                    for e in world.effects()
                    if (step == "receipt" and e.service == "mail"
                        and str(e.payload.get("subject", "")).startswith("Receipt"))
                    or (step == "release" and e.service == "ledger"
                        and e.payload.get("amount") == 1)
                ]  # fmt: skip
            with reading(folder / "steps.db") as conn:
                results = [
                    r["result"]
                    for r in rows_of(conn, "all_job_steps")
                    if r["order_id"] == ORDER["id"] and r["step"] == step
                ]
            held = [_ex14h_json(r) for r in results]
            expect(
                len(replies) == 1 and held == replies,
                _(
                    "the {step!r} checkpoint of order {order_id} (policy version {version}) "
                    "holding its effect's reply as JSON: {replies}"
                ).format(step=step, order_id=ORDER["id"], version=version, replies=replies),
                _("it holds {results}").format(results=results),
                _(
                    "return the reply of the call that did the effect from do_step for every "
                    "step, and checkpoint json.dumps of it"
                ),
            )


def _ex14h_json(text: Any) -> Any:
    """``text`` read as JSON, or as it is when it is none."""
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text


@CHECKS.add(
    2,
    "a worker that gets the same job again on its long-lived connection (a retry after a "
    "503, a redelivery of a declined job) reads the job's row and checkpoints afresh on "
    "every run: what a run learnt, kept per connection or per order in the module, is "
    "stale on the next, which then repeats steps, fails on their checkpoints or e-mails "
    "a declined order",
    timeout=30.0,
    severe=True,
)
def a_job_run_again_on_one_connection_reads_it_afresh(ns: Namespace) -> None:
    then = {"id": 8, "customer": "cus_caio", "email": "caio@example.com", "sku": "cup"}
    then["amount"] = 700
    with scene(ns) as folder:
        got = ns.harness(
            HARNESS + "run_again_on_one_worker", str(folder), ORDER, 1, 2, "mail.send", then
        )
        runs = got["runs"]
        ok, seen = exactly_once(folder, ORDER, 1)
        fine, then_seen = exactly_once(folder, then, 1)
        expect(
            got["fired"]
            and [r.get("returned") for r in runs[1:]] == ["done", "done"]
            and ok
            and fine,
            _(
                "order {order_id} run on one worker's connection, the mail API down (503s) "
                "the first time, then run again on the same connection object: 'done' and "
                "{effects}; then order {then_id} on it: 'done' and {then_effects}"
            ).format(
                order_id=ORDER["id"],
                effects=wanted(ORDER, 1, False),
                then_id=then["id"],
                then_effects=wanted(then, 1, False),
            ),
            _(
                "run_order {first}, then {again}; {seen}; order {then_id}: {last}, {then_seen}"
            ).format(
                first=_ex14h_ended(runs[0]),
                again=_ex14h_ended(runs[1]),
                seen=seen,
                then_id=then["id"],
                last=_ex14h_ended(runs[2]),
                then_seen=then_seen,
            ),
            _(
                "read step_jobs and job_steps on every call: never keep a job's state or "
                "its done steps in a module-level dict keyed by the connection or the order, "
                "and never change POLICIES"
            ),
        )
    with scene(ns, DECLINES) as folder:
        got = ns.harness(HARNESS + "run_again_on_one_worker", str(folder), ORDER, 1, 3)
        ended = [r.get("returned") if "returned" in r else raised_text(r) for r in got["runs"]]
        ok, seen = exactly_once(folder, ORDER, 1, declined=True)
        expect(
            ended == ["failed"] * 3 and ok,
            _(
                "order {order_id}, its charge declined, run three times on one worker's "
                "connection: 'failed' each time and {effects}"
            ).format(order_id=ORDER["id"], effects=wanted(ORDER, 1, True)),
            _("{ended}; {seen}").format(ended=ended, seen=seen),
        )


@CHECKS.add(
    2,
    "two orders' jobs run at once in one worker process (a pool of threads): each run "
    "keeps its order in its own local variables; a 'current order' kept in a module-level "
    "name is the other order's by the time the first run writes its checkpoints",
    timeout=30.0,
    severe=True,
)
def two_orders_at_once_in_one_worker_keep_their_own(ns: Namespace) -> None:
    other: dict[str, Any] = {"id": 77, "customer": "cus_rui", "email": "rui@example.com"}
    other["sku"] = "cup"
    other["amount"] = 880
    for after in ("ledger.transaction()", "payments.charge"):
        with scene(ns) as folder:
            got = ns.harness(HARNESS + "run_interleaved", str(folder), ORDER, other, 1, after)
            ended = [
                r.get("returned") if "returned" in r else raised_text(r)
                for r in (got["first"], got["second"])
            ]
            results = [exactly_once(folder, order, 1) for order in (ORDER, other)]
            steps = [sorted(steps_of(folder, order["id"])) for order in (ORDER, other)]
            expect(
                got["fired"]
                and ended == ["done", "done"]
                and all(fine for fine, _seen in results)
                and steps == [sorted(POLICIES_V1)] * 2,
                _(
                    "order {order_id} run, and order {other_id} run whole on another thread "
                    "of the same worker right after order {order_id}'s {moment}: both 'done', "
                    "each with its own effects and its own checkpoints {steps}"
                ).format(
                    order_id=ORDER["id"],
                    other_id=other["id"],
                    moment=_("reservation") if after.startswith("ledger") else _("charge"),
                    steps=sorted(POLICIES_V1),
                ),
                _(
                    "returned {ended}; order {order_id}: {first}, checkpoints {steps}; "
                    "order {other_id}: {second}, checkpoints {other_steps}"
                ).format(
                    ended=ended,
                    order_id=ORDER["id"],
                    first=results[0][1],
                    steps=steps[0],
                    other_id=other["id"],
                    second=results[1][1],
                    other_steps=steps[1],
                ),
                _(
                    "pass the order (and the connection) as arguments, or close over them in "
                    "a nested function: nothing about the order in hand lives at module level"
                ),
            )


@CHECKS.add(
    2,
    "a job declined on its resume after a deploy must end 'failed' for good: its next "
    "delivery sends no e-mail and charges nothing (set 'failed' WHERE order_id = the "
    "order, whatever version the call was given)",
    severe=True,
)
def a_job_declined_after_a_deploy_stays_failed(ns: Namespace) -> None:
    with scene(ns) as folder:
        run(ns, folder, ORDER, 1, crash_after="ledger.transaction()")
        with_declines(folder)
        run(ns, folder, ORDER, 2)  # resumed after the deploy: declined
        got = run(ns, folder, ORDER, 2)  # delivered once more
        ok, seen = exactly_once(folder, ORDER, 1, declined=True)
        expect(
            ok and got.get("returned") == "failed",
            _(
                "order {order_id}, started on version 1, killed after its reservation, "
                "declined on its resume with policy_version=2 and delivered again: 'failed', "
                "{effects}, the job 'failed'"
            ).format(order_id=ORDER["id"], effects=wanted(ORDER, 1, True)),
            _("{returned}; {seen}").format(returned=repr(got.get("returned")), seen=seen),
            _("the decline's UPDATE must match the job's row by its order id alone"),
        )


@CHECKS.add(
    2,
    "commit the decline and 'failed' BEFORE the release: a kill right after the release "
    "must not undo them, or the job's next run charges the card again (this time it may "
    "go through) for an order whose stock is already back",
    severe=True,
)
def a_decline_kept_through_a_kill_in_the_release(ns: Namespace) -> None:
    with scene(ns, 1) as folder:  # declined once: a second call of the charge succeeds
        run(ns, folder, ORDER, 1, crash_after="ledger.transaction()#2")
        got = run(ns, folder, ORDER)
        ok, seen = exactly_once(folder, ORDER, 1, declined=True)
        expect(
            ok and got.get("returned") == "failed",
            _(
                "order {order_id}, its charge declined once, killed right after the release "
                "and run again: 'failed', {effects}, the job 'failed'"
            ).format(order_id=ORDER["id"], effects=wanted(ORDER, 1, True)),
            _("{returned}; {seen}").format(returned=repr(got.get("returned")), seen=seen),
            _(
                "COMMIT the decline's checkpoint and state = 'failed' in their transaction "
                "before do_step(..., 'release'): a resume then only finishes the release"
            ),
        )


@CHECKS.add(
    2,
    "a second copy of a declined job must not release the stock twice: read the "
    "release's mark and post it in ONE ledger transaction, never a world.ledger.status "
    "or find of its own before it",
    severe=True,
)
def a_second_copy_of_a_declined_job_releases_once(ns: Namespace) -> None:
    with scene(ns, DECLINES) as folder:
        got = ns.harness(HARNESS + "run_overtaken", str(folder), ORDER, 1, "ledger.read")
        if not got["fired"]:
            return  # no ledger read in a transaction of its own: no gap to run into
        ok, seen = exactly_once(folder, ORDER, 1, declined=True)
        expect(
            ok,
            _(
                "order {order_id}, declined: {effects}, the job 'failed', when a second copy "
                "of its job ran whole right after the first copy's ledger read made outside "
                "its post's transaction"
            ).format(order_id=ORDER["id"], effects=wanted(ORDER, 1, True)),
            seen,
            _("read tx.status(key) inside the transaction that posts and marks"),
        )


@CHECKS.add(
    2,
    "follow POLICIES[<the version stored with the job>], whatever version that is: a job "
    "started on a version deployed later (3, with version 2's steps) sends its receipt too; "
    "steps written out for versions 1 and 2 alone leave it without one",
    severe=True,
)
def a_job_started_on_the_newest_version_follows_its_steps(ns: Namespace) -> None:
    newest = 3
    for crash_after, then in ((None, newest), ("payments.charge", 1)):
        with scene(ns) as folder:
            # As a worker runs it: an error (a version its code does not know) is no crash.
            got = dict(
                ns.harness(HARNESS + "run", str(folder), ORDER, newest, crash_after, False, True)
            )
            if crash_after is not None and "raised" not in got:
                got = dict(ns.harness(HARNESS + "run", str(folder), ORDER, then, None, False, True))
            ok, seen = exactly_once(folder, ORDER, 2)
            steps = steps_of(folder, ORDER["id"])
            ended = raised_text(got) if "raised" in got else repr(got.get("returned"))
            expect(
                got.get("returned") == "done" and ok and steps == list(POLICIES_V2),
                _(
                    "order {order_id} started with policy_version={version} (deployed after "
                    "version 2, its steps {steps}){crash}: {effects}, the job 'done', its "
                    "checkpoints {steps}"
                ).format(
                    order_id=ORDER["id"],
                    version=newest,
                    steps=list(POLICIES_V2),
                    crash=""
                    if crash_after is None
                    else _(
                        ", killed right after its charge and resumed with policy_version={then}"
                    ).format(then=then),
                    effects=wanted(ORDER, 2, False),
                ),
                _("run_order: {outcome}; {seen}; its checkpoints {steps}").format(
                    outcome=ended, seen=seen, steps=steps
                ),
                _(
                    "read the job's policy_version from its row and take its steps from "
                    "POLICIES[version] when the job runs, never from steps written out for the "
                    "versions you know nor from a copy of POLICIES made at import"
                ),
            )


@CHECKS.add(
    2,
    "a job whose stored version is missing from this worker's POLICIES (a job started by a "
    "worker deployed since) runs no step and raises, so a worker that knows its version "
    "runs it later; run as version 1 instead, it never sends its receipt",
    severe=True,
)
def a_job_of_a_version_not_deployed_here_runs_no_step(ns: Namespace) -> None:
    unknown = 3
    with scene(ns) as folder:
        # On a worker not yet deployed: POLICIES has versions 1 and 2 alone.
        early = dict(ns.harness(HARNESS + "run", str(folder), ORDER, unknown, None, False, False))
        effects, steps = found(world_of(folder), ORDER), steps_of(folder, ORDER["id"])
        state = state_of(folder, ORDER["id"])
        # Then on a worker deployed since, its POLICIES[3] the steps of version 2.
        later = dict(ns.harness(HARNESS + "run", str(folder), ORDER, unknown, None, False, True))
        ok, seen = exactly_once(folder, ORDER, 2)
        ended = raised_text(early) if "raised" in early else repr(early.get("returned"))
        expect(
            "raised" in early
            and not any(effects.values())
            and not steps
            and state in (None, "running")
            and later.get("returned") == "done"
            and ok,
            _(
                "order {order_id} with policy_version={version}, run first by a worker whose "
                "POLICIES lacks that version: an error raised, no effect, no checkpoint, the "
                "job not ended; then run by a worker that has it: {effects}, the job 'done'"
            ).format(order_id=ORDER["id"], version=unknown, effects=wanted(ORDER, 2, False)),
            _(
                "first run_order: {outcome}, effects {effects}, checkpoints {steps}, the job "
                "{state}; after the deploy: {later}, {seen}"
            ).format(
                outcome=ended,
                effects=effects,
                steps=steps,
                state=repr(state),
                later=raised_text(later) if "raised" in later else repr(later.get("returned")),
                seen=seen,
            ),
            _(
                "take the steps from POLICIES[version] and let a KeyError (or an error of "
                "your own) propagate; never fall back to another version's steps, nor end "
                "the job as failed, for a version this worker does not know"
            ),
        )


@CHECKS.add(
    1,
    "a step that raises leaves the checkpoints of the steps before it in job_steps: a "
    "503 from the mail API after the charge, and the next run only sends the e-mail, "
    "never calls the payment API again",
)
def a_failed_step_keeps_the_checkpoints_before_it(ns: Namespace) -> None:
    with scene(ns) as folder:
        with_declines(folder, "mail", "fail_before")
        first = dict(ns.harness(HARNESS + "run", str(folder), ORDER, 1, None, False))
        kept = steps_of(folder, ORDER["id"])
        before = world_of(folder)["calls"]
        later = dict(ns.harness(HARNESS + "run", str(folder), ORDER, 1, None, False))
        again = [c for c in world_of(folder)["calls"][len(before) :] if c[0] == "payments"]
        ok, seen = exactly_once(folder, ORDER, 1)
        expect(
            "raised" not in first
            or (
                kept == ["reserve", "charge"]
                and not again
                and later.get("returned") == "done"
                and ok
            ),
            _(
                "order {order_id} of policy version 1, its e-mail refused with a 503: run_order "
                "raises with the checkpoints 'reserve' and 'charge' kept; the next run makes "
                "no new call to the payment API and leaves {effects}, the job 'done'"
            ).format(order_id=ORDER["id"], effects=wanted(ORDER, 1, False)),
            _(
                "after the 503 the checkpoints {kept}; the next run {later}, new calls to the "
                "payment API {again}; {seen}"
            ).format(kept=kept, later=_ex14h_ended(later), again=again, seen=seen),
            _(
                "when a step raises, let the error out and leave job_steps as it is: the "
                "checkpoints of the steps already done are what make the retry skip them; "
                "never delete them (nor roll them back) to start the job over"
            ),
        )
