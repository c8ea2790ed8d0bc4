"""Exercise 5's checks beyond the one job of the scenes: generated invoices each charged
or posted once, a failed call that fails the attempt, and the handler called again in
new processes, as a restarted worker would be."""

from __future__ import annotations

import random
import tempfile
from itertools import zip_longest
from typing import Any

from labkit.faults import BEFORE_CALL
from labkit.grading.checks import Namespace, expect
from labkit.grading.exercises.ex05.harness import LEDGER_WRITE
from labkit.grading.exercises.ex05.runs import (
    CHECKS,
    HARNESS,
    IN_A_ROW,
    _raised,
    invoices,
    run_job,
)
from labkit.grading.exercises.killsweep import scene_seeds
from labkit.lang import _


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
    then: tuple[list[Any], ...] = (),
) -> None:
    run = run_job(ns, which, [*([point, action, nth] for nth in nths), *then])
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
    "a payment call that fails (a 503, a 429 rate limit, or a timeout that lost the reply) "
    "must fail the attempt: catching it and returning marks the job done, maybe with no "
    "charge, and nobody retries it",
    timeout=30.0,
    severe=True,
)
def a_failed_charge_is_retried(ns: Namespace) -> None:
    _failure_comes_out(ns, "charge", BEFORE_CALL, _("a 503 from the payment API"))
    # The API down for a while: a handler that retries by itself and then gives up with a
    # reply of its own marks the job done with no charge.
    _failure_comes_out(
        ns,
        "charge",
        BEFORE_CALL,
        _("{count} 503s in a row from the payment API").format(count=IN_A_ROW),
        nths=tuple(range(1, IN_A_ROW + 1)),
    )
    # A timeout whose request never got there: the reply is lost, and nothing was charged.
    # Several in a row: a handler that retries a lost reply by itself (safe under the key)
    # and then gives up with a reply of its own ("unknown") marks the job done, uncharged.
    _failure_comes_out(
        ns,
        "charge",
        BEFORE_CALL,
        _(
            "a lost reply (a timeout) from a payment API that had not charged, {count} times "
            "in a row"
        ).format(count=IN_A_ROW),
        "lose_response",
        nths=tuple(range(1, IN_A_ROW + 1)),
    )
    # A 429 (too many requests, with a Retry-After) is no answer either: the worker waits
    # and retries a TransientError; a reply of one's own ("rate limited") marks it done,
    # whether at the first 429 or after a few tries in the handler.
    _failure_comes_out(
        ns,
        "charge",
        BEFORE_CALL,
        _(
            "a 429 (rate limited, with a Retry-After) from the payment API, {count} times in a row"
        ).format(count=IN_A_ROW),
        "rate_limit",
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
    # The same failed mark, swallowed where it happens (a try/except around tx.mark): the
    # transaction commits the entry without its mark, and the crash that follows (before
    # the job is recorded done) brings the job back to a ledger that says "not posted".
    _failure_comes_out(
        ns,
        "post",
        LEDGER_WRITE,
        _(
            "a failed ledger write at the mark (the second write), then a crash after the "
            "handler returned"
        ),
        nths=(2,),
        then=(["after_effect", "crash", 1],),
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
