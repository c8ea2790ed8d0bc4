"""Exercise 4's checks of when ``next_delay`` gives up: a permanent error, a maybe-done
failure without an idempotency key (retried under one), and max_attempts."""

from __future__ import annotations

from labkit.grading.checks import Namespace, expect
from labkit.grading.exercises.ex04.policy import (
    CHECKS,
    MAYBE_DONE,
    PERMANENT,
    REFUSED,
    UNNAMED_NEVER_SENT_BY_MISTAKE,
    _number,
    delays,
    delays_for,
    draws,
    http,
)
from labkit.grading.exercises.helpers import SEED
from labkit.lang import _


@CHECKS.add(
    1,
    "a permanent error gets no retry, whatever Retry-After it carries: return None",
)
def gives_up_on_permanent(ns: Namespace) -> None:
    for name, error in (("HTTP 400", http(400)), ("ValueError", {"type": "ValueError"})):
        [got] = delays(ns, error, 1, started_at=0.0, now=0.0)
        expect(got is None, _("None for {error} on the first attempt").format(error=name), got)
    # A Retry-After does not make a bad request good: the verdict comes first.
    [got] = delays(ns, http(400, 5), 2, started_at=0.0, now=0.0)
    expect(
        got is None,
        "None for HTTP 400 with Retry-After: 5 after attempt 2 (the verdict comes first)",
        got,
    )
    # A key makes a repeat safe, not a bad request good.
    [got] = delays(ns, http(400), 1, started_at=0.0, now=0.0, idempotency_key="order:7")
    expect(
        got is None,
        _("None for HTTP 400 under idempotency_key 'order:7': a key does not make it retryable"),
        got,
        _(
            "the key matters only for a maybe-done failure; a permanent error gets None "
            "with or without one"
        ),
    )


@CHECKS.add(
    3,
    "a maybe-done failure (read timeout, reset, 500, ResponseLost) may already have "
    "charged: without an idempotency_key return None, so nobody repeats the effect "
    "before checking the destination",
    severe=True,
)
def gives_up_on_maybe_done_without_a_key(ns: Namespace) -> None:
    # Every maybe-done error after the first attempt and a later one, and 5xx answers that
    # carry a Retry-After: the server's "come back later" does not say the charge failed.
    cases = [(name, error, attempt) for attempt in (1, 3) for name, error in MAYBE_DONE.items()]
    cases += [
        (f"HTTP {status} (Retry-After: {after})", http(status, after), attempt)
        for status, after in ((500, 5), (502, 30.0))
        for attempt in (1, 2)
    ]
    # Every other 5xx but 503, not a sample: a CDN's own (520-527) is no less maybe done.
    cases += [
        (f"HTTP {status}", http(status), 1)
        for status in range(500, 600)
        if status != 503 and f"HTTP {status}" not in MAYBE_DONE
    ]
    # A TaskGroup's failures raised together, one of them a read timeout: permanent by
    # the rules, and never retried without a key whichever member a policy reads.
    group = "ExceptionGroup([TimeoutError, ConnectionRefusedError]) (an asyncio.TaskGroup's)"
    cases += [(group, PERMANENT[group], 1)]
    # No rule names a broken TLS connection or a name that did not resolve: permanent,
    # so never retried without a key (a TLS connection can break after it carried the
    # request: called never sent, the charge runs twice).
    cases += [(name, PERMANENT[name], 1) for name in UNNAMED_NEVER_SENT_BY_MISTAKE]
    # Each one right after never-sent errors, in the same process: a verdict cached by
    # id(error) hands the new error, built at the freed one's address, the old verdict;
    # one cached by the error's class hands a 500 the verdict of the 503 before it.
    # And all of them after one read timeout retried under a key, in the same process: a
    # key remembered from an earlier call (a module-level "current key") is no key here.
    keyed = {"started_at": 0.0, "now": 0.0, "idempotency_key": "billing:42:charge:v1"}
    calls = [(MAYBE_DONE["TimeoutError('read timed out')"], 1, keyed)]
    for _n, error, attempt in cases:
        calls += [(REFUSED, 1, {"started_at": 0.0, "now": 0.0})]
        calls += [(http(503), 1, {"started_at": 0.0, "now": 0.0})]
        calls += [(error, attempt, {"started_at": 0.0, "now": 0.0})]
    got = delays_for(ns, calls)[1:][2::3]
    for (name, _error, attempt), delay in zip(cases, got, strict=True):
        expect(
            delay is None,
            _("None for {error} without an idempotency_key").format(
                error=name if attempt == 1 else f"{name}, attempt {attempt}"
            ),
            delay,
            _(
                "the key is the one this call is given: None for a maybe-done failure "
                "without one, even after other calls that had a key (no key remembered "
                "between calls)"
            ),
        )
    [safe] = delays(ns, REFUSED, 1, started_at=0.0, now=0.0)
    expect(_number(safe), "a delay for ConnectionRefusedError: it never reached the server", safe)


@CHECKS.add(
    1,
    "with an idempotency_key the destination recognises the repeat, so a maybe-done "
    "failure is retried like a never-sent one",
)
def retries_maybe_done_under_a_key(ns: Namespace) -> None:
    # The same draws as without a key: a key names the operation, it is no source of
    # randomness (jitter seeded from hash(key) differs between processes and replays).
    # Any key the caller gives is a key, whatever its shape: a UUID, capitals and
    # underscores, no colon, non-ASCII (a key checked against a pattern of its own is
    # no key to the policy, and the repeat that was safe is given up).
    keys = (
        "billing:42:charge:v1",
        "Order_7",
        "6f1c2b9e-8d4a-4f0e-9b7a-2c3d4e5f6a7b",
        "paiement:José:n°7",
        "x",
    )
    # Every attempt before the last, not only the second: under a key a maybe-done failure
    # keeps the budget and the backoff of a never-sent one.
    wants = {attempt: draws(ns, attempt - 1, SEED, 1.0, 60.0, 3) for attempt in (1, 2, 3, 4)}
    for number, (name, error) in enumerate(MAYBE_DONE.items()):
        key = keys[number % len(keys)]
        attempt = 2 if number < len(keys) else 1 + number % 4
        want = wants[attempt]
        got = delays(ns, error, attempt, 3, started_at=0.0, now=0.0, idempotency_key=key)
        expect(
            got == want,
            _(
                "after attempt {attempt} of {error} (max_attempts 5), under a key ({key!r}), "
                "the delays backoff({n}, rng) draws from the same seed: {draws}"
            ).format(
                attempt=attempt,
                error=name,
                key=key,
                n=attempt - 1,
                draws=[round(w, 4) for w in want],
            ),
            f"{[round(g, 4) if _number(g) else g for g in got]}",
            _(
                "any idempotency_key given is a key, whatever its shape: give up on a "
                "maybe-done failure only when there is none (idempotency_key is None), with "
                "no pattern of your own for a key"
            ),
        )
    # labkit's store errors are no TransientError, nor a PermanentError: a busy database or
    # a dropped connection is a TimeoutError or a ConnectionError (rule 4), retried under a
    # key like any other; rule 2 names two classes, not every labkit error.
    store = {
        "labkit's StoreBusy() (a TimeoutError)": {"type": "StoreBusy"},
        "labkit's StatementTimeout() (a StoreBusy)": {"type": "StatementTimeout"},
        "labkit's ConnectionLost() (a ConnectionError)": {"type": "ConnectionLost"},
    }
    at_start = {"started_at": 0.0, "now": 0.0, "idempotency_key": "job:42"}
    got = delays_for(ns, [(spec, 2, at_start) for spec in store.values()])
    first_draw = wants[2][0]
    wrong = [
        _("{delay} for {error}").format(delay=repr(g), error=name)
        for name, g in zip(store, got, strict=True)
        if g != first_draw
    ]
    expect(
        not wrong,
        _(
            "after attempt 2 of each of labkit's store errors ({errors}), under a key "
            "('job:42'), the delay backoff(1, rng) draws from the same seed: {draw}"
        ).format(errors="; ".join(store), draw=round(first_draw, 4)),
        "; ".join(wrong),
        _(
            "rule 2 names TransientError and PermanentError only: labkit's other errors go "
            "by the rules after it, and a TimeoutError or a ConnectionError is no permanent "
            "failure"
        ),
    )


@CHECKS.add(
    2,
    "attempt counts every run, the first included: after attempt < max_attempts "
    "retry, at attempt == max_attempts stop (>=, not >)",
)
def gives_up_after_max_attempts(ns: Namespace) -> None:
    for most in (2, 3, 5, 8):
        [before] = delays(ns, REFUSED, most - 1, started_at=0.0, now=0.0, max_attempts=most)
        [last] = delays(ns, REFUSED, most, started_at=0.0, now=0.0, max_attempts=most)
        expect(
            _number(before),
            _("a delay after attempt {attempt} of {max_attempts}").format(
                attempt=most - 1, max_attempts=most
            ),
            before,
        )
        expect(
            last is None,
            _("None after attempt {attempt} of {max_attempts}").format(
                attempt=most, max_attempts=most
            ),
            last,
        )
    # An idempotency key makes a retry safe, not endless: the last attempt stays the last.
    [keyed] = delays(
        ns,
        {"type": "TimeoutError", "message": "read timed out"},
        5,
        started_at=0.0,
        now=0.0,
        max_attempts=5,
        idempotency_key="billing:42:charge:v1",
    )
    expect(
        keyed is None,
        "None after attempt 5 of 5 for a read timeout retried under an idempotency_key (a "
        "key makes a retry safe, not endless)",
        keyed,
    )
    # A Retry-After says when, never whether: the last attempt stays the last.
    [last] = delays(ns, http(429, 1), 3, started_at=0.0, now=0.0, max_attempts=3)
    expect(
        last is None,
        "None after attempt 3 of 3 for a 429 with Retry-After: 1 (Retry-After says when, "
        "not whether)",
        last,
    )
    # Left out, max_attempts is the contract's default, 5: a caller that trusts it gets a
    # retry after attempt 4 and none after attempt 5.
    before, last = delays_for(
        ns,
        [
            (REFUSED, 4, {"started_at": 0.0, "now": 0.0}),
            (REFUSED, 5, {"started_at": 0.0, "now": 0.0}),
        ],
    )
    expect(
        _number(before) and last is None,
        _(
            "without max_attempts (the default, 5), a delay after attempt 4 and None after "
            "attempt 5"
        ),
        _("{before} after attempt 4, {last} after attempt 5").format(
            before=repr(before), last=repr(last)
        ),
        _("keep the signature's default, max_attempts=5: callers that leave it out rely on it"),
    )
    # Past the budget (a caller that counts one attempt too many, or lowered max_attempts
    # between attempts): attempt > max_attempts stops too, not only attempt == max_attempts.
    [past] = delays(ns, REFUSED, 6, started_at=0.0, now=0.0, max_attempts=5)
    expect(
        past is None,
        _("None after attempt 6 of 5 (past max_attempts: attempt >= max_attempts)"),
        past,
        _("test attempt >= max_attempts: with ==, an attempt past the budget retries for ever"),
    )
    # max_attempts=0 is no budget at all, not "unlimited": a caller that turns retries off
    # with 0 must not get them until the deadline.
    [none] = delays(ns, REFUSED, 1, started_at=0.0, now=0.0, max_attempts=0)
    expect(
        none is None,
        _("None after attempt 1 with max_attempts=0 (attempt >= max_attempts: no retry)"),
        none,
    )
