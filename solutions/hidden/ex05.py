"""Hidden checks for exercise 5: the idempotency key must be the job's, not a constant, nor
one "cleaned" of its punctuation; a 409 from the API must fail the attempt; a repeat keeps
the first reply."""

from __future__ import annotations

import ast
import random
import tempfile
from pathlib import Path
from typing import Any

from labkit.clock import LAB_EPOCH, FakeClock
from labkit.faults import LOST_RESPONSE
from labkit.grading.checks import Checks, Namespace, expect
from labkit.grading.exercises.ex05.harness import LEDGER_WRITE
from labkit.grading.exercises.ex05.runs import CHARGE, HARNESS, POST, invoices, run_job
from labkit.grading.exercises.helpers import shared_ends
from labkit.grading.exercises.killsweep import scene_seeds
from labkit.grading.exercises.wallclock import RETRY_S
from labkit.lang import _
from labkit.world import World

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


#: Names that differ only in a '_', '-' or ':', a quote, an accent, a space (one, none or
#: two), a capital or a ligature (NFKC folds "ﬁ" into "fi"); the bob jobs' keys (see
#: ``lookalike_jobs``) differ only in a leading or a trailing space.
LOOKALIKES: tuple[str, ...] = ("cus_7", "cus-7", "o'neil", "oneil", "josé", "josè")
LOOKALIKES += ("ana maria", "ana_maria", "\ufb01ona", "fiona")
LOOKALIKES += ("anamaria", "ana  maria", "acct:8", "acct-8")
#: One name with each separator a header "cleaner" might swap for another (':' for '_',
#: '/' for '-', '\\' for '/', ...), none, and in capitals: any such swap, or lower(), maps
#: two of these jobs' keys onto one.
LOOKALIKES += tuple(f"acct{sep}8" for sep in "_./\\ '\"+@#,;|~=%") + ("acct8", "ACCT:8")
#: Two names with no letter in Latin-1: a key made "header-safe" with
#: encode("latin-1", "replace") (or "ignore") gives both the same key.
LOOKALIKES += ("王伟", "李娜")
#: "josé" again with its accent as a letter of its own: "e" and the combining U+0301
#: (NFD; the name above is NFC, "é" in one code point). The two print alike; a key
#: normalised to NFC (or NFD) makes both jobs' keys one.
LOOKALIKES += ("jose\u0301",)
#: "ana maria" again with its space URL-encoded by hand ("%20"), as a no-break space
#: (U+00A0, pasted from a document) and as a tab (from a spreadsheet): a key "encoded" for
#: a header (replace(" ", "%20")) or decoded (urllib.parse.unquote), its no-break spaces
#: made plain or its unprintable characters dropped (str.isprintable) makes two keys one.
LOOKALIKES += ("ana%20maria", "ana\u00a0maria", "ana\tmaria")
#: "ana\tmaria" with its tab expanded as str.expandtabs() does in these keys (five spaces
#: after "billing:ana"): a key with its tabs expanded makes the two keys one.
LOOKALIKES += ("ana     maria",)
#: "ana maria" across two lines (a name from a multi-line CSV field: "\n", "\r\n") and with
#: a zero-width space (U+200B, pasted from a web page): a key with its CR/LF stripped for a
#: header (no header injection), cut at its first line (splitlines()[0]) or stripped of
#: invisible characters makes two keys one.
LOOKALIKES += ("ana\nmaria", "ana\r\nmaria", "ana\u200bmaria")
#: "josé" again as an ASCII escape would write its accent, in the key itself: a backslash
#: escape ("\\xe9"), an HTML character reference ("&#233;") and percent-encoded UTF-8
#: ("%C3%A9"). A key made ASCII for a header with encode("ascii", "backslashreplace") or
#: ("xmlcharrefreplace"), or percent-encoded but for what is already printable
#: (quote(key, safe=string.printable)), escapes the accent but not the escape character
#: itself ('\\', '&', '%'), and makes two keys one.
LOOKALIKES += ("jos\\xe9", "jos&#233;", "jos%C3%A9")


def lookalike_jobs(kind: str) -> tuple[tuple[str, dict[str, Any], str], ...]:
    """One ``kind`` job per look-alike name, six whose keys differ in a leading or a
    trailing space, in quotes around them (strip('"')) or in a trailing newline (a key
    with its line end stripped for a header, rstrip("\\n")), two whose keys differ in the
    number before ``:v1``, and two whose keys differ in a letter of their prefix after it
    (``lana``, ``ana``)."""
    jobs = [
        (kind, {"customer": name, "amount": 1500}, f"billing:{name}:2026-05:{kind}:v1")
        for name in LOOKALIKES
    ]
    jobs += [
        (kind, {"customer": "bob", "amount": 900}, f"{lead}billing:bob:2026-05:{kind}:v1{end}")
        for lead, end in (("", ""), ("", " "), (" ", ""), ('"', '"'), ("'", "'"), ("", "\n"))
    ]
    # Keys that end in a number before ':v1': rstrip(":v1") strips characters, not the
    # suffix, and makes both "...:1:v1" and "...:11:v1" into "...:".
    jobs += [
        (kind, {"customer": "carla", "amount": 700}, f"billing:{kind}:carla:{n}:v1")
        for n in (1, 11)
    ]
    # A name that begins with letters of its key's own prefix ("lana" after "billing:" or
    # "ledger:"): lstrip("billing:") strips characters, not the prefix, and makes
    # "billing:lana:..." and "billing:ana:..." both "ana:...".
    prefix = "billing" if kind == "charge" else "ledger"
    jobs += [
        (kind, {"customer": name, "amount": 800}, f"{prefix}:{name}:2026-05:{kind}:v1")
        for name in ("lana", "ana")
    ]
    return tuple(jobs)


@CHECKS.add(
    2,
    "the Idempotency-Key and the ledger mark are the job's key as it is: stripped of its "
    "'_', '-', quotes or spaces, its accents turned into '?' (or escaped as '\\xe9', '&#233;' or "
    "'%C3%A9' but not its backslashes, ampersands or percent signs), its ligatures folded or its "
    "Unicode normalised (NFC) to make it 'safe' for a header, or its prefix taken off with "
    "lstrip('billing:') (which strips letters, not a prefix), two jobs' keys become one and "
    "the second job is never charged or posted",
    timeout=30.0,
    severe=True,
)
def keys_that_differ_only_in_punctuation_or_an_accent(ns: Namespace) -> None:
    for kind in ("charge", "post"):
        jobs = lookalike_jobs(kind)
        run = run_job(ns, kind, [["after_effect", "crash", 1]], jobs=jobs, seed=13)
        expect(bool(run.fired), "the crash at after_effect to fire", _("it never fired"))
        wrong = {key: n for key, n in run.per_key.items() if n != 1}
        expect(
            not wrong,
            _(
                "one {kind} per job for {n} keys that differ only in punctuation, an "
                "accent (or the same accent written as one code point or as two), a space, "
                "a capital, a ligature or a letter outside Latin-1, in the number before "
                "':v1', or in a name that starts with letters of the key's prefix ('lana' and "
                "'ana' after 'billing:': lstrip strips characters, not a prefix) ({keys}, ...)"
            ).format(kind=kind, n=len(jobs), keys=", ".join(repr(key) for _k, _p, key in jobs[:4])),
            "; ".join(f"{key!r}: {n}" for key, n in wrong.items())
            + f" ({run.replay})"
            + (f"; {run.errors[0]}" if run.errors else ""),
        )


#: How many charges in a row the slow other delivery answers with a 409, and the
#: Retry-After each says (short, so a handler that honours it still ends in time).
SLOW_DELIVERY = 12
SLOW_RETRY_AFTER_S = 0.05


@CHECKS.add(
    2,
    "a 409 from the payment API (KeyInProgress: another delivery of the job holds its "
    "Idempotency-Key) is not a success: let it fail the attempt, or retry until the reply "
    "comes; returning 'skipped' marks the job done though the other delivery may still fail, "
    "and re-raised as a PermanentError (or any error the worker does not retry) the job is "
    "buried and never charged",
    timeout=20.0,
    severe=True,
)
def a_409_fails_the_attempt(ns: Namespace) -> None:
    job = ("charge", {"customer": "cus_42", "amount": 4200}, "billing:42:charge:v1")
    with tempfile.TemporaryDirectory(prefix="labkit-ex05-", dir=ns.workdir) as tmp:
        got = ns.harness(HARNESS + "key_in_progress", tmp, list(job))
    keys = got["keys"]
    expect(
        len(set(keys)) <= 1,
        _("every charge, the retry after the 409 too, with the same Idempotency-Key"),
        _("the charges carried the keys {keys}").format(keys=", ".join(keys)),
        "a 409 means the other delivery is charging with this very key: a retry with another "
        "key is a second charge",
    )
    expect(
        "raised" in got or got.get("returned") == got["reply"] or got.get("found"),
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
    _409_is_retried(got, job[2])
    # The other delivery is slow: a retry loop of a few tries that then gives up must let
    # the last 409 out, not return a reply of its own (the job would be marked done).
    with tempfile.TemporaryDirectory(prefix="labkit-ex05-", dir=ns.workdir) as tmp:
        slow = ns.harness(
            HARNESS + "key_in_progress", tmp, list(job), SLOW_DELIVERY, SLOW_RETRY_AFTER_S
        )
    # A retry loop that keeps the key for a few 409s and then "starts over" with a new one
    # is a second charge while the other delivery is still charging with the first.
    expect(
        len(set(slow["keys"])) <= 1,
        _(
            "every charge with the same Idempotency-Key, with the other delivery still "
            "charging for {n} tries in a row"
        ).format(n=SLOW_DELIVERY),
        _("the charges carried the keys {keys}").format(keys=", ".join(slow["keys"])),
        "a 409 means the other delivery is charging with this very key, however long it "
        "takes: a retry with another key, even after a few tries, is a second charge",
    )
    expect(
        "raised" in slow or slow.get("returned") == slow["reply"] or slow.get("found"),
        _(
            "with the other delivery still charging for {n} tries in a row, the 409 "
            "(KeyInProgress) to come out of charge_handler, or a retry that returns the reply "
            "{reply}"
        ).format(n=SLOW_DELIVERY, reply=slow["reply"]),
        _("it returned {returned} after {calls} charge(s)").format(
            returned=slow.get("returned"), calls=slow["calls"]
        ),
        "when your retries give up, raise (re-raise the last 409): a reply of your own marks "
        "the job done though the other delivery may still fail",
    )
    _409_is_retried(slow, job[2])


def _409_is_retried(got: dict[str, Any], key: str) -> None:
    """What came out of charge_handler after a 409, if anything did, is an error the worker
    retries: buried as dead (a PermanentError, a RuntimeError), the job is never charged."""
    expect(
        "raised" not in got or got["retried"],
        _(
            "the 409 (KeyInProgress) to come out of charge_handler as an error the worker "
            "retries (a TransientError), so job {key} is charged once the other delivery ends"
        ).format(key=key),
        _("it raised {raised}, which the worker does not retry: the job is buried as dead").format(
            raised=got.get("raised")
        ),
        "a 409 is a TransientError: let it out as it is (or as another TransientError); a "
        "PermanentError or any other error buries the job, and the customer is never charged",
    )


@CHECKS.add(
    1,
    "after a 409, payments.find showing the other delivery's charge is no reply: return "
    "what a charge with the same Idempotency-Key answers (or let the 409 out), not a "
    "'skipped' or a reply of your own",
    timeout=20.0,
)
def a_409_answered_by_find_keeps_the_reply(ns: Namespace) -> None:
    job = ("charge", {"customer": "cus_43", "amount": 4300}, "billing:43:charge:v1")
    for busy_for in (1, SLOW_DELIVERY):
        with tempfile.TemporaryDirectory(prefix="labkit-ex05-", dir=ns.workdir) as tmp:
            got = ns.harness(
                HARNESS + "key_in_progress", tmp, list(job), busy_for, SLOW_RETRY_AFTER_S
            )
        if not got.get("found") or "raised" in got:
            continue
        expect(
            got.get("returned") == got["reply"],
            _(
                "after a 409 and payments.find showing the other delivery's charge, the reply "
                "{reply} (a charge with the same Idempotency-Key answers it)"
            ).format(reply=got["reply"]),
            _("it returned {returned} after {calls} charge(s)").format(
                returned=got.get("returned"), calls=got["calls"]
            ),
            "find's record says a charge was made but is not the API's reply: call charge "
            "again with the same Idempotency-Key, or let the 409 fail the attempt",
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
    # The reply lost on its way back: the retry asks the API again, not payments.find,
    # whose record says a charge was made but is no reply (no charge_id to keep).
    lost = run_job(ns, "charge", [[LOST_RESPONSE, "lose_response", 1]], seed=17)
    [(effects, result)] = lost.done.values()
    if len(effects) != 1:
        return  # charge_survives_lost_response says so
    expect(
        result == effects[0].response,
        _("the job to keep the charge's reply {reply} after its first reply was lost").format(
            reply=effects[0].response
        ),
        _("it kept {result}").format(result=result),
        "let the lost reply fail the attempt and call charge again with the same "
        "Idempotency-Key: the API answers with the first reply; a reply made up from a "
        "lookup loses the charge_id",
    )


#: How much later the wall clock reads in ``the_same_calls_a_day_later``: a day, an hour,
#: a minute and a second, so a key with the date, the hour, the minute or the second in
#: it changes whatever the time of day. The first try is made on a Sunday, the last day of
#: a month and of a year (``wallclock.YEAR_END``), so the retry also falls in another
#: week, month and year: a key with a "billing period" in it changes too, whatever day it
#: is graded on.
LATER_S = RETRY_S


@CHECKS.add(
    2,
    "a retry can come the next day, or in the next hour, month or year, to another worker's "
    "machine: the Idempotency-Key and the ledger mark must not carry the date, the hour, "
    "the week, the month or the host (a key with them is a new key after midnight, on the "
    "first of the month or on another worker, and the API charges again)",
    timeout=30.0,
    severe=True,
)
def the_same_calls_a_day_later(ns: Namespace) -> None:
    for which in ("charge", "post"):
        jobs = invoices(which, random.Random(f"ex05 later {which} {scene_seeds()[-1]}"))[:2]
        with tempfile.TemporaryDirectory(prefix="labkit-ex05-", dir=ns.workdir) as tmp:
            got = ns.harness(
                HARNESS + "sent_later", which, tmp, [list(j) for j in jobs], float(LATER_S)
            )
        for job, now, later in zip(jobs, got["now"], got["later"], strict=True):
            expect(
                now == later,
                _(
                    "the same calls for job {key} when the retry comes a day and an hour "
                    "later (wall clock), from the last day of a month to the next month, on "
                    "another worker's machine"
                ).format(key=job[2]),
                _("first {before}, a day later {after}").format(
                    before=_calls(now), after=_calls(later)
                ),
                "build the keys from the job alone (job.key): the date, the hour, the month "
                "(a billing period), the host, time.time() or ctx.clock.now() in a key make "
                "the retry a new request",
            )
        # The retry comes to a worker started the next day: a date read once at import
        # (TODAY = date.today()) is the new day there.
        with tempfile.TemporaryDirectory(prefix="labkit-ex05-", dir=ns.workdir) as tmp:
            restarted = ns.harness(
                HARNESS + "restarted_later", which, tmp, [list(j) for j in jobs], float(LATER_S)
            )
        if "how" in restarted:
            continue  # the handler cannot be run again from its cells here (check() in Jupyter)
        for job, now, later in zip(jobs, restarted["now"], restarted["later"], strict=True):
            expect(
                now == later,
                _(
                    "the same calls for job {key} from a worker started a day and an hour "
                    "later, in the next month, on another machine (a new process: what the "
                    "cells compute at import is computed again)"
                ).format(key=job[2]),
                _("first {before}, from the later worker {after}").format(
                    before=_calls(now), after=_calls(later)
                ),
                "build the keys from the job alone (job.key): a date, a month or a host name "
                "read when the module is imported is the worker's own, and a worker started "
                "the next day, or on another machine, sends a new key",
            )


def _calls(calls: list[dict[str, Any]]) -> str:
    if not calls:
        return _("nothing")
    out = []
    for call in calls:
        rest = ", ".join(f"{k}={v}" for k, v in call.items() if k not in ("call", "args"))
        out.append(f"{call['call']}({', '.join([*call['args'], *([rest] if rest else [])])})")
    return "; ".join(out)


@CHECKS.add(
    2,
    "two workers are two processes: a job delivered to both at once is charged and posted "
    "once (a threading.Lock or a module-level set guards nothing between processes; the "
    "Idempotency-Key and one ledger transaction do)",
    timeout=30.0,
    severe=True,
)
def two_worker_processes_at_once(ns: Namespace) -> None:
    for which, [job] in (("charge", CHARGE), ("post", POST)):
        service = "payments" if which == "charge" else "ledger"
        with tempfile.TemporaryDirectory(prefix="labkit-ex05-", dir=ns.workdir) as tmp:
            got = ns.harness(HARNESS + "two_workers", which, tmp, list(job))
            with World(Path(tmp) / "world.db", FakeClock(LAB_EPOCH)) as world:
                effects = world.count(job[2], service)
        expect(
            effects == 1,
            _("exactly one charge after two worker processes ran the job at once")
            if which == "charge"
            else _("exactly one ledger entry after two worker processes ran the job at once"),
            _("{effects} effect(s) (the workers ended: {ended})").format(
                effects=effects, ended="; ".join(got["deliveries"])
            ),
            "send idempotency_key=job.key to the API, and read the mark inside the ledger "
            "transaction that posts and marks: nothing in one process's memory is seen by "
            "another worker",
        )


#: Two jobs of two job stores (two queues): the same id (1), the same customer, two keys,
#: one payment API.
TWO_STORES = {
    "charge": (
        ("charge", {"customer": "cus_ana", "amount": 1200}, "billing:ana:2026-05:charge:v1"),
        ("charge", {"customer": "cus_ana", "amount": 3400}, "invoices:ana:2026-06:charge:v1"),
    ),
    "post": (
        ("post", {"customer": "cus_ana", "amount": 1200}, "ledger:ana:2026-05:post:v1"),
        ("post", {"customer": "cus_ana", "amount": 3400}, "entries:ana:2026-06:post:v1"),
    ),
}


def _keys_sent(which: str, calls: list[dict[str, Any]]) -> list[str]:
    """The keys a handler's calls name: each charge's Idempotency-Key, or what each ledger
    status and mark is looked up and written under."""
    if which == "charge":
        return [c.get("idempotency_key", "None") for c in calls if c["call"] == "charge"]
    return [c["args"][0] for c in calls if c["call"] in ("status", "mark") and c["args"]]


@CHECKS.add(
    2,
    "the job's key, not its id, is what the API and the ledger must tell apart: ids start "
    "from 1 in every job store (a second queue, a store rebuilt), and the API's keys and the "
    "ledger's marks are shared by all of them",
    timeout=30.0,
    severe=True,
)
def two_stores_two_keys(ns: Namespace) -> None:
    for which, jobs in TWO_STORES.items():
        with tempfile.TemporaryDirectory(prefix="labkit-ex05-", dir=ns.workdir) as tmp:
            sent = ns.harness(HARNESS + "sent_from_two_stores", which, tmp, [list(j) for j in jobs])
        first, second = (set(_keys_sent(which, calls)) for calls in sent)
        silent = [job[2] for job, calls in zip(jobs, sent, strict=True) if not calls]
        expect(
            not silent,
            (
                _(
                    "each of jobs {first} and {second} (both job 1 of their own job store) to "
                    "call the payment API, one after the other in one worker"
                )
                if which == "charge"
                else _(
                    "each of jobs {first} and {second} (both job 1 of their own job store) "
                    "to read and write the ledger, one after the other in one worker"
                )
            ).format(first=jobs[0][2], second=jobs[1][2]),
            _(
                "{keys} sent nothing: it was answered from what the worker kept for the other job 1"
            ).format(keys=", ".join(silent)),
            "remember nothing by job.id in the worker: ids repeat across stores, so the second "
            "job 1 gets the first one's reply and is never charged or posted; the "
            "Idempotency-Key and the ledger mark (job.key) already answer a repeat",
        )
        expect(
            not first & second,
            _(
                "different keys for jobs {first} and {second}, both job 1 of their own job store"
            ).format(first=jobs[0][2], second=jobs[1][2]),
            _("both sent {keys}").format(keys=", ".join(sorted(first & second))),
            "use job.key (a key unique across every store) as the Idempotency-Key and the "
            "ledger mark, not job.id",
        )


@CHECKS.add(
    1,
    "a 400 from the payment API (a PermanentError: the card declined, the amount refused) "
    "must come out of the handler too: the worker buries the job as dead, for a person to "
    "read and redrive once the cause is fixed; returned as a reply, the unpaid invoice is "
    "marked succeeded and nobody ever charges it",
    timeout=30.0,
    severe=True,
)
def a_refused_charge_is_not_a_success(ns: Namespace) -> None:
    run = run_job(ns, "charge", [["before_call", "raise_permanent", 1]])
    expect(
        bool(run.fired),
        _("a 400 from the payment API to fire"),
        _("it never fired: the run never got there")
        + " "
        + _("(does the handler call ctx.world.payments.charge?)"),
    )
    [(_effects, result)] = run.done.values()
    expect(
        run.outcome != "lost",
        _("the job dead after a 400 from the payment API (nothing was charged), not succeeded"),
        _("succeeded with no charge, keeping {result} ({replay})").format(
            result=result, replay=run.replay
        ),
        "let every error of the API come out of the handler (no 'except Exception: return "
        "...'): the worker retries a TransientError and buries a PermanentError as dead",
    )


@CHECKS.add(
    1,
    "a 400 from the payment API (a PermanentError) is not retried: re-raised as a "
    "TransientError, the worker charges the declined card again and again, and a later "
    "try that goes through charges a customer whose card the bank refused",
    timeout=30.0,
)
def a_refused_charge_is_not_retried(ns: Namespace) -> None:
    [(kind, payload, key)] = CHARGE
    with tempfile.TemporaryDirectory(prefix="labkit-ex05-", dir=ns.workdir) as tmp:
        got = ns.harness(HARNESS + "refused_charge", tmp, [kind, payload, key])
    if not got["raised"]:
        return  # a_refused_charge_is_not_a_success says so
    # Retried in the handler (the same key or a new one), a declined card is charged again
    # before the error comes out: a try that goes through charges a refused customer.
    expect(
        got["calls"] <= 1,
        _(
            "one charge for job {key}, refused with a 400, and no other try in charge_handler"
        ).format(key=key),
        _("it charged {calls} times before the error came out").format(calls=got["calls"]),
        "a 400 says the request itself is wrong: let it out at the first charge, and do not "
        "try again in the handler, under the same key or a new one",
    )
    expect(
        not got["transient"],
        _(
            "a 400 from the payment API (a PermanentError) to come out of charge_handler as "
            "a PermanentError, which the worker does not retry (job {key})"
        ).format(key=key),
        _("it raised {raised}, which the worker retries").format(raised=got["raised"]),
        "let a PermanentError out as it is (or as another PermanentError): only a "
        "TransientError (a 503, a 429, a lost reply) is worth another try",
    )
    # The other 400 of the API: the job's Idempotency-Key first used for another amount
    # (IdempotencyKeyReused). Re-raised as a TransientError, the worker asks again and again
    # under the same key, and the same conflict comes back until the job is buried anyway.
    with tempfile.TemporaryDirectory(prefix="labkit-ex05-", dir=ns.workdir) as tmp:
        got = ns.harness(HARNESS + "conflicting_key", tmp, [kind, payload, key], EARLIER_AMOUNT)
    expect(
        not got["retried"],
        _(
            "a 400 IdempotencyKeyReused (the key of job {key} first used for another "
            "amount) to come out of charge_handler as an error the worker does not retry"
        ).format(key=key),
        _("it raised {raised}, which the worker retries").format(raised=got.get("raised")),
        "a conflict is a PermanentError: let it out as it is, for a person to look at; "
        "every retry meets the same conflict",
    )


#: The amount the job's Idempotency-Key was first charged for in
#: ``a_conflicting_key_fails_the_job``: an earlier version of the invoice (R$ 40.00, not 42.00).
EARLIER_AMOUNT = 4000


@CHECKS.add(
    2,
    "a 400 saying the Idempotency-Key was first used with other parameters "
    "(IdempotencyKeyReused: an earlier version of the invoice, another amount) must come out "
    "of the handler: answered 'skipped' (or with payments.find's charge) the invoice is "
    "marked paid though this amount was never charged, and charged again under a new key "
    "the customer may pay twice",
    timeout=20.0,
    severe=True,
)
def a_conflicting_key_fails_the_job(ns: Namespace) -> None:
    [(kind, payload, key)] = CHARGE
    with tempfile.TemporaryDirectory(prefix="labkit-ex05-", dir=ns.workdir) as tmp:
        got = ns.harness(HARNESS + "conflicting_key", tmp, [kind, payload, key], EARLIER_AMOUNT)
    # Looked up first (payments.find) and answered from the charge found, whose amount is
    # not this job's: the same success for a charge that never happened, without asking.
    expect(
        got["conflicts"] or got["new"] or "raised" in got,
        _(
            "a charge for job {key} (its key was first used for {earlier}, this job charges "
            "{amount}), or an error out of charge_handler"
        ).format(key=key, earlier=EARLIER_AMOUNT, amount=payload["amount"]),
        _("it returned {returned} without charging").format(returned=got.get("returned")),
        "a charge payments.find shows under the job's key is not this job's reply: call "
        "charge with the job's key, and the API answers a repeat or refuses a conflict",
    )
    # The earlier charge's key met again, or no key to compare: a key that changed with
    # the amount is a new charge.
    keyed = [k for k in got["new"] if k != "None"]
    expect(
        got["conflicts"] or not keyed or got["earlier"] == "None",
        _(
            "the key of job {key}'s charge for {earlier} sent again now that its invoice "
            "says {amount}: the 400 IdempotencyKeyReused, and no new charge"
        ).format(key=key, earlier=EARLIER_AMOUNT, amount=payload["amount"]),
        _("it charged for {earlier} under {first}, then under {then}").format(
            earlier=EARLIER_AMOUNT, first=got["earlier"], then=", ".join(keyed)
        ),
        "build the Idempotency-Key from the job's key alone: a key that holds the amount "
        "(or anything else a corrected invoice changes) is a new charge to the API, and "
        "the customer pays twice",
    )
    if not got["conflicts"]:
        return  # charged without a key: every_charge_carries_its_idempotency_key says so
    expect(
        not got["new"],
        _(
            "no other charge for job {key} after the 400 IdempotencyKeyReused (its key was "
            "first used for {earlier}, this job charges {amount})"
        ).format(key=key, earlier=EARLIER_AMOUNT, amount=payload["amount"]),
        _("it charged again with the Idempotency-Key {keys}").format(keys=", ".join(got["new"])),
        "a key that conflicts says the job's key was already used for another request: a "
        "new key (or none) charges the customer a second time; let the error out for a "
        "person to look at",
    )
    expect(
        "raised" in got,
        _(
            "the 400 IdempotencyKeyReused to come out of charge_handler for job {key} (its "
            "key was first used for {earlier}, this job charges {amount})"
        ).format(key=key, earlier=EARLIER_AMOUNT, amount=payload["amount"]),
        _("it returned {returned}").format(returned=got.get("returned")),
        "do not catch the API's errors: a conflict is a PermanentError, the worker buries the "
        "job as dead and a person sees that this amount was never charged",
    )
    # The invoice's customer corrected (support fixed a typo): the same key, another
    # request. A key holding the customer is a new charge; the invoice is paid twice.
    earlier = {"customer": payload["customer"] + "_old"}
    with tempfile.TemporaryDirectory(prefix="labkit-ex05-", dir=ns.workdir) as tmp:
        got = ns.harness(HARNESS + "conflicting_key", tmp, [kind, payload, key], earlier)
    keyed = [k for k in got["new"] if k != "None"]
    expect(
        got["conflicts"] or not keyed or got["earlier"] == "None",
        _(
            "the key of job {key}'s charge to {earlier} sent again now that its invoice "
            "names {customer}: the 400 IdempotencyKeyReused, and no new charge"
        ).format(key=key, earlier=earlier["customer"], customer=payload["customer"]),
        _("it charged {earlier} under {first}, then under {then}").format(
            earlier=earlier["customer"], first=got["earlier"], then=", ".join(keyed)
        ),
        "build the Idempotency-Key from the job's key alone: a key that holds the customer "
        "(or anything else a corrected invoice changes) is a new charge to the API, and "
        "the invoice is paid twice",
    )


#: Amounts (in cents) above any the generated invoices draw: R$ 2,500, R$ 123,456.78,
#: nearly a million and just over 2**31 cents (a cap at a 32-bit integer column's
#: maximum); a handler that skips or caps big ones is never seen by the others.
LARGE_AMOUNTS = (250_000, 12_345_678, 99_999_999, 2_147_483_657)


@CHECKS.add(
    1,
    "a large invoice is charged and posted in full like any other: a cap, a limit or a "
    "'needs approval' skip of your own, returned as a reply, marks the job done and the "
    "invoice is never charged",
    timeout=30.0,
    severe=True,
)
def a_large_invoice_is_charged_in_full(ns: Namespace) -> None:
    _every_amount_in_full(ns, {"charge": LARGE_AMOUNTS, "post": LARGE_AMOUNTS}, "big")


#: Amounts (in cents) below any the generated invoices draw: one cent and 49 (under the
#: 50-cent minimum some payment APIs ask), and for the ledger a zero entry too (an
#: invoice discounted to nothing is still booked). The payment API refuses only 0.
SMALL_AMOUNTS = {"charge": (1, 49), "post": (0, 1, 49)}


@CHECKS.add(
    1,
    "a small invoice is charged and posted like any other: a minimum of your own (the "
    "50 cents some APIs ask, a zero entry skipped), returned as a reply, marks the job "
    "done and the invoice is never charged or booked",
    timeout=30.0,
    severe=True,
)
def a_small_invoice_is_charged_too(ns: Namespace) -> None:
    _every_amount_in_full(ns, SMALL_AMOUNTS, "small")


#: Invoices that owe nothing: a credit note (a negative amount) and a zero invoice. The
#: payment API refuses both with a 400; a handler that makes them "chargeable" (abs(),
#: max(amount, 1)) charges a customer money nobody asked for.
CREDIT_NOTES = (
    ("charge", {"customer": "cus_credit", "amount": -4500}, "credit:1:charge:v1"),
    ("charge", {"customer": "cus_zero", "amount": 0}, "credit:2:charge:v1"),
)


@CHECKS.add(
    1,
    "a credit note (a negative amount) or a zero invoice is never charged: abs(amount), "
    "max(amount, 1) or any other amount of your own charges the customer money the "
    "invoice never asked for; send the amount as the job gives it (the API refuses it "
    "with a 400) or refuse it yourself",
    timeout=30.0,
)
def a_credit_note_is_never_charged(ns: Namespace) -> None:
    run = run_job(ns, "charge", [], jobs=CREDIT_NOTES, seed=17)
    charged = {key: n for key, n in run.per_key.items() if n}
    expect(
        not charged,
        _("no charge for a credit note of -4500 or a zero invoice (they owe nothing)"),
        "; ".join(
            f"{key!r}: {n} charge(s) of "
            + ", ".join(repr(e.payload.get("amount")) for e in run.done[key][0])
            for key, n in charged.items()
        )
        + f" ({run.replay})",
        "charge the amount as the job gives it: abs() or a minimum of one cent turns an "
        "invoice that owes nothing into a charge",
    )


#: The Retry-After (in seconds) of the 429 the rate-limited payment API answers with (short,
#: so a handler that sleeps it out and charges again itself still ends in time).
RATE_LIMIT_RETRY_AFTER_S = 2.5
#: And a long one, met with the handler's time.sleep passing at once: a wait capped by a
#: limit of the handler's own (min(retry_after, 5)) charges again before it is over.
LONG_RETRY_AFTER_S = 45.0
#: How much longer than the Retry-After a wrapped 429's retry_after may say: a margin of
#: one's own (max(retry_after, 60), a doubling) is fine; the worker's own backoff is capped
#: at 5 minutes. A retry_after read as milliseconds (x 1000: 45 s become 12.5 hours) holds
#: the job back for hours, past any deadline it has.
RETRY_AFTER_MARGIN_S = 300.0


@CHECKS.add(
    1,
    "a 429 from the payment API (rate limited) says when to come back (Retry-After): let "
    "it out as it is, or keep its retry_after when you wrap it; a TransientError of your "
    "own without it (or with 0) makes the worker retry at its own backoff, sooner than "
    "the API asked, and the rate-limited API is hammered",
    timeout=30.0,
)
def a_rate_limited_charge_keeps_its_retry_after(ns: Namespace) -> None:
    for seconds, sleeps_pass in ((RATE_LIMIT_RETRY_AFTER_S, False), (LONG_RETRY_AFTER_S, True)):
        _after_a_429(ns, seconds, sleeps_pass)


def _after_a_429(ns: Namespace, seconds: float, sleeps_pass: bool) -> None:
    """One 429 saying Retry-After: ``seconds``; with ``sleeps_pass``, the handler's
    time.sleep passes at once (its seconds counted), so a long wait costs nothing."""
    [(kind, payload, key)] = CHARGE
    with tempfile.TemporaryDirectory(prefix="labkit-ex05-", dir=ns.workdir) as tmp:
        got = ns.harness(
            HARNESS + "rate_limited_charge", tmp, [kind, payload, key], seconds, sleeps_pass
        )
    waited = got.get("waited")
    if waited is not None:
        # The handler charged again itself: not before the Retry-After the 429 gave.
        expect(
            waited >= seconds * 0.9,
            _(
                "after a 429 saying Retry-After: {s:g}s, no other charge from charge_handler "
                "before {s:g}s have passed"
            ).format(s=seconds),
            _("it charged again {waited:.2f}s after the 429").format(waited=waited),
            _(
                "let the 429 out (the worker waits its retry_after), or sleep exc.retry_after "
                "before you charge again: a retry sooner, or a wait capped by a limit of your "
                "own (min(retry_after, 5)), hammers a rate-limited API; when its Retry-After "
                "is longer than you want to wait, let the 429 out"
            ),
        )
    if "returned" in got:
        return  # the handler waited and charged again itself: the API's reply came back
    after = got["retry_after"]
    expect(
        after is not None and after >= seconds,
        _(
            "after a 429 saying Retry-After: {s:g}s, an error out of charge_handler with "
            "retry_after {s:g} (or more), so the worker waits as the API asked"
        ).format(s=seconds),
        _("it raised {raised} with retry_after {after}").format(raised=got["raised"], after=after),
        "let the API's TransientError out as it is, or pass retry_after=exc.retry_after "
        "when you wrap it",
    )
    expect(
        after <= max(seconds * 10, seconds + RETRY_AFTER_MARGIN_S),
        _(
            "after a 429 saying Retry-After: {s:g}s, an error out of charge_handler with a "
            "retry_after in seconds, no later than {most:g}s"
        ).format(s=seconds, most=max(seconds * 10, seconds + RETRY_AFTER_MARGIN_S)),
        _("it raised {raised} with retry_after {after}").format(raised=got["raised"], after=after),
        "retry_after is in seconds, as the API's is: pass exc.retry_after as it is; made "
        "milliseconds (x 1000) it holds the job back for hours, past any deadline it has",
    )


@CHECKS.add(
    1,
    "a payment API or a ledger down for long (a 503, a lost reply, a 429, a busy database, "
    "call after call) must fail the attempt in the end: a handler that gives up with a "
    "reply of its own (after retrying by itself, however many times, or on the job's last "
    "attempt) marks the job done with no charge or entry, and nobody retries it",
    timeout=30.0,
    severe=True,
)
def a_long_outage_fails_the_attempt(ns: Namespace) -> None:
    last = _(", on the job's last attempt")
    outages = {
        ("charge", "503", False): _("a 503 from the payment API"),
        ("charge", "lost reply", False): _("a lost reply (a timeout) from the payment API"),
        ("charge", "429", False): _("a 429 (rate limited) from the payment API"),
        ("post", "503", False): _("the ledger's database stays busy"),
        # The last attempt too: a reply of one's own there marks the job done, not dead.
        ("charge", "503", True): _("a 503 from the payment API") + last,
        ("post", "503", True): _("the ledger's database stays busy") + last,
    }
    for (which, how, on_last), what in outages.items():
        [(kind, payload, key)] = CHARGE if which == "charge" else POST
        with tempfile.TemporaryDirectory(prefix="labkit-ex05-", dir=ns.workdir) as tmp:
            got = ns.harness(
                HARNESS + "never_answered", which, tmp, [kind, payload, key], how, on_last
            )
        expect(
            "returned" not in got,
            _(
                "an error out of {handler} when every call fails ({what}), so the attempt "
                "fails: the worker retries the job, or after its last attempt ends it dead, "
                "for a redrive"
            ).format(handler=f"{which}_handler", what=what),
            _("it returned {returned} after {calls} failed call(s)").format(
                returned=got.get("returned"), calls=got["calls"]
            ),
            _(
                "after your own retries, and on the job's last attempt too, raise again (or "
                "let the error out): returning reports a success the job never had, and a "
                "job that ends dead can be redriven; one marked done is never run again"
            ),
        )


def _every_amount_in_full(ns: Namespace, amounts: dict[str, tuple[int, ...]], tag: str) -> None:
    """Each handler sends each of its ``amounts`` as the job gives it (``sent_here``)."""
    for which, each in amounts.items():
        jobs = tuple(
            (which, {"customer": f"cus_{tag}_{n}", "amount": amount}, f"{tag}:{n}:{which}:v1")
            for n, amount in enumerate(each)
        )
        with tempfile.TemporaryDirectory(prefix="labkit-ex05-", dir=ns.workdir) as tmp:
            sent = ns.harness(HARNESS + "sent_here", which, tmp, [list(j) for j in jobs])
        for job, calls in zip(jobs, sent, strict=True):
            amount = repr(job[1]["amount"])
            made = [c for c in calls if c["call"] == which]
            expect(
                any(amount in c["args"] or c.get("amount") == amount for c in made),
                (
                    _("a charge of {amount} for job {key}")
                    if which == "charge"
                    else _("a ledger entry of {amount} for job {key}")
                ).format(amount=amount, key=job[2]),
                _calls(calls),
                "charge and post every amount as the job gives it: a limit of your own "
                "belongs before the job is enqueued, not in a handler that then reports "
                "success",
            )


def _arg(call: dict[str, Any], at: int, *names: str) -> str | None:
    """The repr of a recorded call's argument: positional ``at``, or named one of ``names``."""
    if len(call["args"]) > at:
        return str(call["args"][at])
    return next((call[name] for name in names if name in call), None)


#: Customers a "clean-up" of the name would change: spaces around it or doubled in it, a
#: capital, an accent written as two code points (NFD), a ligature, a tab. Each is the
#: customer the API and the ledger know; the cleaned name is another customer.
RAW_CUSTOMERS = (" cus_9", "cus_10 ", "Ana  Maria", "CUS_Ana", "jose\u0301", "\ufb01ona", "cus\t11")
#: And quotes in a customer id: an apostrophe "escaped" by hand for SQL ("''") or for HTML
#: (html.escape), and double quotes left around an id by a CSV export, stripped.
RAW_CUSTOMERS += ("o'neil", '"cus_12"')
#: And a long customer id (111 characters: an organisation's path), whole: an id cut to
#: 32 or 64 characters (a VARCHAR(64) column) is another account, or one shared by many.
RAW_CUSTOMERS += (
    "org_acme-holdings-latin-america:" + "/".join(f"unit-{n:02d}" for n in range(10)),
)
#: One amount (in cents) per customer above, each one a round trip through reais in
#: floating point changes: int(29 / 100 * 100) is 28 (0.29 * 100 is 28.999999999999996).
RAW_AMOUNTS = (1003, 29, 1606, 57, 1631, 3205, 1956, 803, 1012, 1658)
#: Jobs whose payload lacks its customer, or its amount (an invoice enqueued half
#: filled in): no charge or entry may name a customer or an amount the job never gave
#: ('unknown', one read off the job's key, a zero amount). Failing the job is right; so
#: is passing on the None that payload.get returns (the API and the ledger judge it).
HALF_FILLED = ({"amount": 4400}, {"customer": "cus_44"})


@CHECKS.add(
    1,
    "the charge and the ledger entry name the job's customer exactly as the payload "
    "gives it: stripped, lower-cased, normalised (NFC, NFKC), with its spaces collapsed, "
    "its quotes escaped or removed or cut to a column's length, it is another customer, "
    "who is charged or credited in their place; and a payload without its customer or "
    "its amount gets no made-up one ('unknown', 0)",
    timeout=30.0,
)
def the_customer_as_the_job_names_it(ns: Namespace) -> None:
    for which in ("charge", "post"):
        jobs = tuple(
            (which, {"customer": name, "amount": RAW_AMOUNTS[n]}, f"raw:{n}:{which}:v1")
            for n, name in enumerate(RAW_CUSTOMERS)
        )
        half = tuple(
            (which, payload, f"customer:half:{n}:{which}:v1")
            for n, payload in enumerate(HALF_FILLED)
        )
        with tempfile.TemporaryDirectory(prefix="labkit-ex05-", dir=ns.workdir) as tmp:
            sent = ns.harness(HARNESS + "sent_here", which, tmp, [list(j) for j in jobs + half])
        _nothing_made_up(which, half, sent[len(jobs) :])
        for job, calls in zip(jobs, sent[: len(jobs)], strict=True):
            made = [c for c in calls if c["call"] == which]
            if not made:
                continue  # nothing sent at all: the public checks say so
            name = job[1]["customer"]
            to = [_arg(c, 0, "customer", "account") for c in made]
            expect(
                all(t == repr(name) for t in to),
                (
                    _("the charge of job {key} made to the customer {customer}, as it is")
                    if which == "charge"
                    else _(
                        "the ledger entry of job {key} posted for the customer {customer}, as it is"
                    )
                ).format(key=job[2], customer=ascii(name)),
                _("it named {sent}").format(
                    sent=", ".join(ascii(_read_back(t)) if t else _("no customer") for t in to)
                ),
                "pass job.payload['customer'] on unchanged: the customer id is the API's and "
                "the ledger's key for the account, and a cleaned-up name is another account",
            )
            amount = repr(job[1]["amount"])
            sent = [_arg(c, 1, "amount") for c in made]
            expect(
                all(a == amount for a in sent),
                (
                    _("the charge of job {key} made for {amount} cents, as it is")
                    if which == "charge"
                    else _("the ledger entry of job {key} posted for {amount} cents, as it is")
                ).format(key=job[2], amount=amount),
                _("it sent {sent}").format(
                    sent=", ".join(a if a else _("no amount") for a in sent)
                ),
                "pass job.payload['amount'] on unchanged, an int in cents: a round trip "
                "through reais in floating point (int(amount / 100 * 100)) loses a cent "
                "on amounts such as 29",
            )


def _nothing_made_up(
    which: str, jobs: tuple[tuple[str, dict[str, Any], str], ...], sent: list[Any]
) -> None:
    """Each of ``jobs`` (a payload without its customer or its amount) sent no charge or
    entry that names a customer or an amount of the handler's own."""
    for job, calls in zip(jobs, sent, strict=True):
        made = [c for c in calls if c["call"] == which]
        for field, at, names in (
            ("customer", 0, ("customer", "account")),
            ("amount", 1, ("amount",)),
        ):
            if field in job[1]:
                continue
            invented = [a for c in made if (a := _arg(c, at, *names)) not in (None, "None")]
            if field == "customer":
                wanted = (
                    _("no charge to a customer of your own for job {key}, whose payload names none")
                    if which == "charge"
                    else _(
                        "no ledger entry for a customer of your own for job {key}, whose "
                        "payload names none"
                    )
                )
            else:
                wanted = (
                    _("no charge of an amount of your own for job {key}, whose payload gives none")
                    if which == "charge"
                    else _(
                        "no ledger entry of an amount of your own for job {key}, whose payload "
                        "gives none"
                    )
                )
            expect(
                not invented,
                wanted.format(key=job[2]),
                _("the payload {payload}; it sent {which} with {field} {sent}").format(
                    payload=job[1], which=which, field=field, sent=", ".join(invented)
                ),
                "read job.payload['customer'] and job.payload['amount'] as they are (a KeyError "
                "fails the job, for a person to fix the invoice): a default such as 'unknown' "
                "or 0 charges or books an account and an amount nobody asked for",
            )


def _sent_for_every_key(
    ns: Namespace, which: str, attempt: int = 1
) -> tuple[tuple[Any, ...], list[Any]]:
    """The calls the handler sends for generated invoices and the look-alike jobs (long
    keys, capitals, accents, spaces), each job once at ``attempt`` (``RecordingCtx``:
    nothing is done)."""
    jobs = invoices(which, random.Random(f"ex05 marks {which} {scene_seeds()[-1]}"))
    jobs += lookalike_jobs(which)
    with tempfile.TemporaryDirectory(prefix="labkit-ex05-", dir=ns.workdir) as tmp:
        sent = ns.harness(HARNESS + "sent_here", which, tmp, [list(j) for j in jobs], attempt)
    return jobs, sent


@CHECKS.add(
    2,
    "every charge carries the job's Idempotency-Key, whatever the key looks like and at "
    "every attempt: a charge sent without one for a long key (over 255 characters), an odd "
    "one or on a retry is charged again after a crash or by a second delivery",
    timeout=30.0,
    severe=True,
)
def every_charge_carries_its_idempotency_key(ns: Namespace) -> None:
    for attempt in (1, 3):
        _every_charge_keyed(ns, attempt)


def _every_charge_keyed(ns: Namespace, attempt: int) -> None:
    jobs, sent = _sent_for_every_key(ns, "charge", attempt)
    keys = [
        c.get("idempotency_key", "None") for calls in sent for c in calls if c["call"] == "charge"
    ]
    shared = _shared_ends([k for k in keys if k not in ("None", "''")])
    for job, calls in zip(jobs, sent, strict=True):
        bare = [
            c
            for c in calls
            if c["call"] == "charge" and c.get("idempotency_key", "None") in ("None", "''")
        ]
        expect(
            not bare,
            _(
                "every charge for job {key} ({length} characters), at attempt {attempt}, with "
                "an Idempotency-Key"
            ).format(
                key=repr(job[2][:60] + ("..." if len(job[2]) > 60 else "")),
                length=len(job[2]),
                attempt=attempt,
            ),
            _("it charged with idempotency_key={sent}").format(
                sent=bare[0].get("idempotency_key", "None") if bare else ""
            ),
            "send idempotency_key=job.key for every job: if a key is too long for the API, "
            "send a digest of it (hashlib.sha256), never no key at all",
        )
        # A digest cut short: 8 hex characters are 32 bits, and the keys of some 65,000
        # invoices meet two by two (the birthday bound): the second one is never charged.
        # A prefix every key shares ("invoice-charge:") adds no bit.
        short = [
            c["idempotency_key"]
            for c in calls
            if c["call"] == "charge"
            and c not in bare
            and _cut_short(c["idempotency_key"], job[2], shared)
        ]
        expect(
            not short,
            _(
                "for job {key}: its own key as the Idempotency-Key, or a digest of it of at "
                "least {least} characters (64 bits and more), not counting a prefix or a "
                "suffix every job's key has"
            ).format(key=repr(job[2][:60] + ("..." if len(job[2]) > 60 else "")), least=SHORTEST),
            _("it charged with idempotency_key={sent}").format(sent=short[0] if short else ""),
            "send job.key itself, or its whole digest (hashlib.sha256(...).hexdigest()): a "
            "digest cut to a few characters gives two invoices one key, and the API answers "
            "the second with the first one's charge",
        )


@CHECKS.add(
    2,
    "the Idempotency-Key is the job's key, whatever else the store says of the job: a "
    "key that holds its redrives, its queue, its id or its attempt changes when an "
    "operator redrives the job (ex06 keeps the key so the API knows the repeat), and a "
    "charge whose reply was lost is charged again",
    timeout=30.0,
    severe=True,
)
def a_redriven_job_sends_the_same_key(ns: Namespace) -> None:
    [(kind, payload, key)] = CHARGE
    with tempfile.TemporaryDirectory(prefix="labkit-ex05-", dir=ns.workdir) as tmp:
        got = ns.harness(HARNESS + "keys_of_a_redriven_job", tmp, [kind, payload, key])
    if not got["first"]:
        return  # no charge at all: the public checks say so
    expect(
        got["then"] == got["first"],
        _(
            "the Idempotency-Key {first} again for job {key} redriven (redrives 2, queue "
            "'billing-retry', another id, attempt, lease and times; the same key and payload)"
        ).format(first=", ".join(got["first"]), key=repr(key)),
        _("it charged with {then}").format(then=", ".join(got["then"]) or _("no key")),
        "send idempotency_key=job.key: the job's key names the charge across every run and "
        "every redrive; its other fields describe a run, not the charge",
    )


#: What support fixed in the invoice before the redrive in ``a_redriven_job_finds_its_mark``:
#: nothing, its amount, its customer (a typo). The job's key stays, so its mark does.
CORRECTIONS: tuple[dict[str, Any], ...] = ({}, {"amount": 4250}, {"customer": "cus_24"})


@CHECKS.add(
    2,
    "the ledger mark is the job's key, whatever else the store or the payload says of the "
    "job: a mark that holds its redrives, its queue, its id, its attempt, its customer or "
    "its amount is not found when an operator redrives the job (its invoice corrected), "
    "and its entry is posted twice",
    timeout=30.0,
    severe=True,
)
def a_redriven_job_finds_its_mark(ns: Namespace) -> None:
    [(kind, payload, key)] = POST
    for corrected in CORRECTIONS:
        with tempfile.TemporaryDirectory(prefix="labkit-ex05-", dir=ns.workdir) as tmp:
            got = ns.harness(
                HARNESS + "posts_of_a_redriven_job", tmp, [kind, payload, key], corrected
            )
        if "returned" not in got["first"] or got["entries"] == 0:
            return  # nothing posted at all: the public checks say so
        fixed = ", ".join(f"{field} {value!r}" for field, value in corrected.items())
        expect(
            got["entries"] == 1,
            (
                _(
                    "one ledger entry for job {key}, posted and then redriven (redrives 2, "
                    "queue 'billing-retry', another id, attempt, lease and times; the same "
                    "key and payload): the second run finds the mark and skips"
                ).format(key=repr(key))
                if not corrected
                else _(
                    "one ledger entry for job {key}, posted and then redriven with its "
                    "invoice corrected ({fixed}; the same key): the second run finds the "
                    "mark and skips"
                ).format(key=repr(key), fixed=fixed)
            ),
            _("the ledger holds {entries} entries; the redriven run did {then}").format(
                entries=got["entries"],
                then=got["then"].get("returned") or got["then"].get("raised"),
            ),
            "mark and look up under job.key alone: the job's key names the entry across "
            "every run, every redrive and every correction of its payload; its other fields "
            "describe a run or the invoice, not the entry",
        )


#: The fewest characters of a key sent in place of the job's own: 16 hex digits are 64
#: bits, which repeat once in some four billion invoices.
SHORTEST = 16


def _cut_short(sent: str, key: str, shared: tuple[int, int] = (0, 0)) -> bool:
    """Whether ``sent`` (a repr) is neither the job's ``key`` (or holds it) nor as long as
    ``SHORTEST`` characters besides the ``shared`` beginning and end every job's sent key
    has: a digest of the key cut short, perhaps behind a fixed prefix."""
    text = _read_back(sent)
    return key not in text and len(text) - sum(shared) < min(SHORTEST, len(key))


def _shared_ends(sent: list[str]) -> tuple[int, int]:
    """How many characters all the keys ``sent`` (reprs) begin and end with alike: a
    namespace ("invoice-charge:") or a suffix the handler adds to every key, which tells
    no two jobs apart. None when fewer than two keys differ (one key for all is caught
    where jobs are counted)."""
    return shared_ends([_read_back(s) for s in sent])


def _read_back(sent: str) -> str:
    """The text a recorded repr stands for: the string itself when it is one, else the
    repr as recorded (bytes, a number or an object the harness could only print)."""
    try:
        value = ast.literal_eval(sent)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return sent
    return value if isinstance(value, str) else sent


@CHECKS.add(
    2,
    "every ledger entry is marked, under the very key the handler looks up: a mark written "
    "under job.key.lower() (or stripped, or normalized) but read under job.key, or an entry "
    "posted without its mark on some path (a long key, a credit note), is never found, and "
    "the job run again after a crash posts its entry twice",
    timeout=30.0,
    severe=True,
)
def every_post_is_marked_under_the_key_it_looks_up(ns: Namespace) -> None:
    jobs, sent = _sent_for_every_key(ns, "post")
    if not any(c["call"] == "mark" for calls in sent for c in calls):
        return  # post_survives_every_crash says so
    marks = [_named(c) for calls in sent for c in calls if c["call"] == "mark"]
    shared = _shared_ends([mark for mark in marks if mark])
    for job, calls in zip(jobs, sent, strict=True):
        # A look-up is the mark's status, or the entries found under a key (ledger.find:
        # read inside the transaction, the write lock held, it is as sound a look-up).
        read = [_named(c) for c in calls if c["call"] in ("status", "find") and _named(c)]
        written = [_named(c) for c in calls if c["call"] == "mark" and _named(c)]
        posted = any(c["call"] == "post" for c in calls)
        expect(
            written or not posted,
            _("the entry of job {key} posted with its mark (amount {amount})").format(
                key=repr(job[2][:60] + ("..." if len(job[2]) > 60 else "")),
                amount=job[1]["amount"],
            ),
            _("it posted the entry and wrote no mark"),
            "post and mark in the same transaction on every path: an entry without its mark "
            "is posted again when the job runs again",
        )
        unread = [key for key in written if key not in read]
        expect(
            not unread,
            _("the ledger mark of job {key} looked up under the key it is written under").format(
                key=repr(job[2])
            ),
            _("it looked up {read} but wrote the mark under {written}").format(
                read=_keys_as_text(read) or _("nothing"), written=_keys_as_text(unread)
            ),
            "read and write the mark under one key, job.key as it is: after a crash the job "
            "runs again, looks for its mark, and must find it",
        )
        # The same key cut short as a digest: two jobs then share one mark.
        short = [key for key in written if _cut_short(key, job[2], shared)]
        expect(
            not short,
            _(
                "for job {key}: its own key as its ledger mark, or a digest of it of at least "
                "{least} characters (64 bits and more), not counting a prefix or a suffix "
                "every job's mark has"
            ).format(key=repr(job[2][:60] + ("..." if len(job[2]) > 60 else "")), least=SHORTEST),
            _("it wrote the mark under {written}").format(written=_keys_as_text(short)),
            "mark under job.key itself: a digest cut to a few characters gives two jobs one "
            "mark, and the second finds the first one's and never posts its entry",
        )


def _keys_as_text(keys: list[str]) -> str:
    """The recorded keys (reprs), once each; with escapes when not ASCII, so two keys
    that differ only in how an accent is encoded do not print alike."""
    return ", ".join(k if k.isascii() else ascii(_read_back(k)) for k in dict.fromkeys(keys))


@CHECKS.add(
    1,
    "the ledger mark says 'done', as post_handler's contract has it: a state of your own "
    "('posted', 'ok') read back by your handler alone keeps its entry once, but whoever "
    "else reads the ledger (tx.status(key) == 'done') takes the entry for never posted",
    timeout=30.0,
)
def every_mark_says_done(ns: Namespace) -> None:
    jobs, sent = _sent_for_every_key(ns, "post")
    for job, calls in zip(jobs, sent, strict=True):
        states = [_mark_state_of(c) for c in calls if c["call"] == "mark"]
        if not states:
            continue  # every_post_is_marked_under_the_key_it_looks_up says so
        # The last state written is what the ledger keeps ('started' first is no harm).
        expect(
            _read_back(states[-1]) == "done",
            _("the ledger mark of job {key} written as 'done'").format(
                key=repr(job[2][:60] + ("..." if len(job[2]) > 60 else ""))
            ),
            _("it wrote the mark as {states}").format(states=", ".join(states)),
            "tx.mark(job.key, 'done'), and look for 'done' with tx.status(job.key): the "
            "contract's state is what every reader of the ledger looks for",
        )


def _mark_state_of(call: dict[str, Any]) -> str:
    """The state a recorded mark call writes (a repr), by position or as state=; the
    ledger's default, 'done', when it names none."""
    return call["args"][1] if len(call["args"]) > 1 else call.get("state", "'done'")


@CHECKS.add(
    1,
    "a job run again after a crash finds its mark and ends succeeded: return "
    "{'skipped': 'already posted'}; raising there makes the worker retry the job and bury "
    "it as dead, though its entry is posted, and a person redrives it for nothing",
    timeout=30.0,
)
def a_posted_job_run_again_succeeds(ns: Namespace) -> None:
    [(_kind, _payload, key)] = POST
    run = run_job(ns, "post", [["after_effect", "crash", 1]], seed=17)
    if run.outcome != "ok" or key not in run.ends:
        return  # post_survives_every_crash says so
    state, error = run.ends[key]
    expect(
        state == "succeeded",
        _(
            "job {key} succeeded when run again after a crash at after_effect (its entry "
            "was posted before the crash)"
        ).format(key=key),
        _("it ended {state}").format(state=state) + (f" ({error})" if error else ""),
        "when the mark says done, return {'skipped': 'already posted'}: the job did its "
        "work, and the worker records it as succeeded",
    )
    # What the job keeps is what its caller reads: the contract's own answer, not None.
    [(_effects, result)] = run.done.values()
    expect(
        result == {"skipped": "already posted"},
        _(
            "job {key}, run again after a crash at after_effect, to keep "
            "{{'skipped': 'already posted'}}, as post_handler's contract says"
        ).format(key=key),
        _("it kept {result}").format(result=repr(result)),
        "when the mark says done, return {'skipped': 'already posted'} exactly: whoever "
        "reads the job's result learns from it that the entry was posted before",
    )


@CHECKS.add(
    1,
    "a ledger write that fails inside the transaction must leave the `with` block as it "
    "is: caught inside and raised again after the block, the entry commits without its "
    "mark, and the error that comes out is not the busy ledger's StoreBusy (a TransientError) "
    "but one the worker buries: the job is dead with an unmarked entry, which a redrive "
    "posts again",
    timeout=30.0,
    severe=True,
)
def a_failed_mark_rolls_back_its_entry(ns: Namespace) -> None:
    [(_kind, _payload, key)] = POST
    run = run_job(ns, "post", [[LEDGER_WRITE, "raise_transient", 2]])
    if not run.fired or run.outcome != "ok" or key not in run.ends:
        return  # a_failed_ledger_write_is_retried says so
    state, error = run.ends[key]
    expect(
        state == "succeeded",
        _(
            "job {key} retried and succeeded after a failed ledger write at the mark (the "
            "second write): the error leaves the transaction's block, which rolls the entry "
            "back, and the worker retries the busy ledger's StoreBusy"
        ).format(key=key),
        _("it ended {state} with its entry posted ({error})").format(
            state=state, error=error or _("no error")
        ),
        "do not catch a ledger error inside `with ctx.world.ledger.transaction() as tx:`: "
        "let it leave the block (the transaction rolls back and raises StoreBusy, which the "
        "worker retries); a try/except belongs outside the block, if anywhere",
    )


def _named(call: dict[str, Any]) -> str:
    """The key a recorded status, find or mark call names, by position or as key=."""
    return call["args"][0] if call["args"] else call.get("key", "")


@CHECKS.add(
    2,
    "a job can come back to the same worker while its first delivery is still at work "
    "(its lease ran out): a set or a dict of jobs 'in progress' that answers the second "
    "delivery with a reply of its own marks the job done, and when the first then fails "
    "nothing was charged or posted; let the second wait, or fail, as the API's 409 and "
    "the ledger's lock make it",
    timeout=30.0,
    severe=True,
)
def a_second_delivery_in_one_worker_is_no_success(ns: Namespace) -> None:
    for which, [job] in (("charge", CHARGE), ("post", POST)):
        with tempfile.TemporaryDirectory(prefix="labkit-ex05-", dir=ns.workdir) as tmp:
            got = ns.harness(HARNESS + "while_the_first_runs", which, tmp, list(job))
        if not got["held"]:
            continue  # no charge or entry at all: the public checks say so
        first, second = got["ends"]
        expect(
            got["effects"] > 0 or not second.startswith("returned"),
            (
                _(
                    "the second delivery of job {key}, arriving in the same worker while the "
                    "first was still charging, to fail or to wait for the charge's reply, "
                    "not to succeed without one"
                )
                if which == "charge"
                else _(
                    "the second delivery of job {key}, arriving in the same worker while the "
                    "first was still posting, to wait for the ledger (its transaction) or to "
                    "fail, not to succeed without an entry"
                )
            ).format(key=job[2]),
            _(
                "the second delivery {second}, and the first failed ({first}): nothing "
                "was charged or posted"
            ).format(second=second, first=first.removeprefix("raised: ")),
            "nothing in the worker's memory says a job is done: the second delivery must ask "
            "the API with the job's Idempotency-Key (a 409 fails it) or read the mark inside "
            "the ledger transaction (it waits for the first)",
        )


@CHECKS.add(
    1,
    "a job run twice in one worker (its lease ran out, or the record of the first run "
    "failed) keeps the charge's reply both times: a set of charged keys that answers the "
    "second run with a 'skipped' of its own loses the receipt",
    timeout=20.0,
)
def a_repeat_in_one_worker_keeps_the_reply(ns: Namespace) -> None:
    [job] = CHARGE
    with tempfile.TemporaryDirectory(prefix="labkit-ex05-", dir=ns.workdir) as tmp:
        got = ns.harness(HARNESS + "repeated_in_one_worker", tmp, list(job))
    reply = "returned: " + got["reply"]
    for n, end in enumerate(got["ends"], 1):
        expect(
            end == reply or not end.startswith("returned"),
            _(
                "job {key}, run a second time in the same worker, to return the API's reply {reply}"
            ).format(key=job[2], reply=got["reply"])
            if n > 1
            else _("job {key} to return the API's reply {reply}").format(
                key=job[2], reply=got["reply"]
            ),
            _("run {n} {end}").format(n=n, end=end),
            "call ctx.world.payments.charge with the job's key every time: the API answers a "
            "repeat with the first reply, and that reply is the job's result",
        )


@CHECKS.add(
    1,
    "what the worker remembers is no proof for another world: the same job run against a "
    "second payment API and ledger (another tenant, or a new scenario in the same kernel) "
    "must charge or post there too; a dict or set of job keys kept in the worker answers it "
    "from the first world, and the second customer is never charged",
    timeout=20.0,
    severe=True,
)
def each_world_is_asked_for_the_job(ns: Namespace) -> None:
    for which, [job] in (("charge", CHARGE), ("post", POST)):
        with tempfile.TemporaryDirectory(prefix="labkit-ex05-", dir=ns.workdir) as tmp:
            sent = ns.harness(HARNESS + "sent_in_two_worlds", which, tmp, list(job))
        if not sent[0]:
            continue  # nothing sent at all: the public checks say so
        expect(
            bool(sent[1]),
            (
                _(
                    "job {key}, run in one worker against a second world (its own payment "
                    "API), to call that world's payment API too"
                )
                if which == "charge"
                else _(
                    "job {key}, run in one worker against a second world (its own ledger), "
                    "to read and write that world's ledger too"
                )
            ).format(key=job[2]),
            _(
                "it sent nothing to the second world: it was answered from what the worker "
                "kept of the first"
            ),
            "keep nothing about a job in the worker's memory: ask ctx.world every time (the "
            "Idempotency-Key and the ledger mark already answer a repeat)",
        )
