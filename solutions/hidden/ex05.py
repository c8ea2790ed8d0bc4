"""Hidden checks for exercise 5: the idempotency key must be the job's, not a constant, nor
one "cleaned" of its punctuation; a 409 from the API must fail the attempt; a repeat keeps
the first reply."""

from __future__ import annotations

import tempfile

from labkit.grading.checks import Checks, Namespace, expect
from labkit.grading.exercises.ex05.checks import HARNESS, run_job
from labkit.lang import _

CHECKS = Checks("ex05", hidden=True)

JOBS = (
    ("charge", {"customer": "cus_1", "amount": 1000}, "billing:1:charge:v1"),
    ("charge", {"customer": "cus_2", "amount": 2500}, "billing:2:charge:v1"),
)


@CHECKS.add(
    2,
    "each job has its own key: a constant Idempotency-Key makes the second "
    "invoice look like a repeat of the first",
    timeout=30.0,
    severe=True,
)
def two_invoices_two_charges(ns: Namespace) -> None:
    run = run_job(ns, "charge", [["after_effect", "crash", 1]], jobs=JOBS, seed=11)
    expect(bool(run.fired), "the crash at after_effect to fire", _("it never fired"))
    expect(
        run.outcome == "ok" and run.effects == 2,
        "one charge per invoice (2 in all)",
        _("{outcome}: {effects} charge(s) ({replay})").format(
            outcome=run.outcome, effects=run.effects, replay=run.replay
        ),
    )


#: Customers whose names, and so the jobs' keys, differ only in punctuation or in one
#: accented letter.
PUNCTUATED = tuple(
    ("charge", {"customer": name, "amount": 1500}, f"billing:{name}:2026-05:charge:v1")
    for name in ("cus_7", "cus-7", "o'neil", "oneil", "josé", "josè")
)


@CHECKS.add(
    2,
    "the Idempotency-Key is the job's key as it is: stripped of its '_', '-' or quotes, or "
    "its accents turned into '?' (to make it 'safe' for a header), two jobs' keys become "
    "one and the second job is never charged",
    timeout=30.0,
    severe=True,
)
def keys_that_differ_only_in_punctuation_or_an_accent(ns: Namespace) -> None:
    run = run_job(ns, "charge", [["after_effect", "crash", 1]], jobs=PUNCTUATED, seed=13)
    expect(bool(run.fired), "the crash at after_effect to fire", _("it never fired"))
    wrong = {key: n for key, n in run.per_key.items() if n != 1}
    expect(
        not wrong,
        _(
            "one charge per job for the keys {keys}, which differ only in punctuation or in "
            "an accent"
        ).format(keys=", ".join(key for _kind, _payload, key in PUNCTUATED)),
        "; ".join(f"{key}: {n}" for key, n in wrong.items())
        + f" ({run.replay})"
        + (f"; {run.errors[0]}" if run.errors else ""),
    )


@CHECKS.add(
    2,
    "a 409 from the payment API (KeyInProgress: another delivery of the job holds its "
    "Idempotency-Key) is not a success: let it fail the attempt, or retry until the reply "
    "comes; returning 'skipped' marks the job done though the other delivery may still fail",
    timeout=20.0,
    severe=True,
)
def a_409_fails_the_attempt(ns: Namespace) -> None:
    job = ("charge", {"customer": "cus_42", "amount": 4200}, "billing:42:charge:v1")
    with tempfile.TemporaryDirectory(prefix="labkit-ex05-", dir=ns.workdir) as tmp:
        got = ns.harness(HARNESS + "key_in_progress", tmp, list(job))
    expect(
        "raised" in got or got.get("returned") == got["reply"],
        _(
            "a 409 (KeyInProgress) from the first charge to come out of charge_handler, or a "
            "retry that returns the reply {reply}"
        ).format(reply=got["reply"]),
        _("it returned {returned} after {calls} charge(s)").format(
            returned=got.get("returned"), calls=got["calls"]
        ),
        "do not catch the API's errors: the worker retries the job, and the retry gets the "
        "first delivery's reply",
    )


@CHECKS.add(
    1,
    "a job run again after a crash keeps the charge's reply: the API answers the repeat "
    "with the first reply, so return what charge returns, not a 'skipped' of your own",
    timeout=30.0,
)
def a_repeat_keeps_the_first_reply(ns: Namespace) -> None:
    run = run_job(ns, "charge", [["after_effect", "crash", 1]], seed=17)
    [(effects, result)] = run.done.values()
    if len(effects) != 1:
        return  # charge_survives_crash_after_effect says so
    expect(
        result == effects[0].response,
        _("the job to keep the charge's reply {reply} after a crash at after_effect").format(
            reply=effects[0].response
        ),
        _("it kept {result}").format(result=result),
        "return ctx.world.payments.charge(...) on the repeat too: with the job's key as "
        "Idempotency-Key it answers with the first reply and charges nothing",
    )
