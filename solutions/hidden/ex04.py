"""Hidden checks for exercise 4: the backoff grows, next_delay starts from n = 0, a
lost answer stays maybe-done whatever status it carries (and a false ambiguous flag says
nothing), the rules go in their order, each job's deadline counts from its own start,
and an error is classified by itself, not by the one it was raised from; a Retry-After
given as text, keys of any shape, every attempt and every cap alike, bare OSErrors, and two
threads calling at once (each schedule of one preemption, in order)."""

from __future__ import annotations

import math
from typing import Any

from labkit.grading.checks import Checks, Namespace, expect
from labkit.grading.exercises.ex04.policy import (
    HARNESS,
    REFUSED,
    _number,
    _results,
    delays,
    delays_for,
    draws,
    http,
    verdicts,
)
from labkit.grading.exercises.helpers import SEED as DELAY_SEED
from labkit.grading.exercises.helpers import raised_text
from labkit.lang import _

CHECKS = Checks("ex04", hidden=True)
SEED = 7


@CHECKS.add(1, "the ceiling doubles with each retry: base * 2**n")
def backoff_grows(ns: Namespace) -> None:
    means = [sum(draws(ns, n, SEED, 1.0, 1000.0, 300)) / 300 for n in (1, 4)]
    expect(
        means[1] > 4 * means[0],
        "the average delay for n=4 about 8 times that for n=1",
        _("averages {n1_mean:.2f} and {n4_mean:.2f}").format(n1_mean=means[0], n4_mean=means[1]),
    )


@CHECKS.add(1, "after attempt 1 the first retry uses n = attempt - 1 = 0: at most base")
def first_retry_uses_n_zero(ns: Namespace) -> None:
    got = delays(
        ns, {"type": "ConnectionRefusedError"}, 1, count=50, started_at=0.0, now=0.0, base=2.0
    )
    expect(
        all(d is not None and 0 <= d <= 2.0 for d in got),
        "delays within [0, 2] after the first attempt with base 2",
        max(got, key=lambda d: d or 0),
    )


@CHECKS.add(
    1,
    "the ambiguous flag decides when it is true, and then it wins: a lost answer carrying "
    "a 503 or a 429 is still maybe_done; a false flag (ambiguous = False or None, a "
    "library's default) says nothing, so the rules after it decide: a 500 or a read "
    "timeout carrying one is maybe_done, and next_delay gives up on it without an "
    "idempotency_key",
    severe=True,
)
def ambiguous_wins_over_the_status(ns: Namespace) -> None:
    specs = [{"type": "ResponseLost", "status": s} for s in (503, 429, 400)]
    got = verdicts(ns, specs)
    expect(
        got == ["maybe_done"] * 3,
        "'maybe_done' for ResponseLost with status 503, 429 and 400",
        got,
    )
    # A client library whose errors all carry the flag, False unless the answer was lost
    # (as labkit's TransientError does): False is no "nothing was sent", rule 1 just does
    # not apply. Taken for never sent, the 500 and the read timeout are retried without a
    # key, and a charge that went through runs twice.
    cases: dict[str, tuple[dict[str, Any], str]] = {
        _("HTTP 500 with ambiguous = False"): ({**http(500), "ambiguous": False}, "maybe_done"),
        _("HTTP 502 with ambiguous = None"): ({**http(502), "ambiguous": None}, "maybe_done"),
        _("TimeoutError('read timed out') with ambiguous = False"): (
            {"type": "TimeoutError", "message": "read timed out", "ambiguous": False},
            "maybe_done",
        ),
        _("ConnectionResetError() with ambiguous = 0"): (
            {"type": "ConnectionResetError", "ambiguous": 0},
            "maybe_done",
        ),
        _("HTTP 400 with ambiguous = False"): ({**http(400), "ambiguous": False}, "permanent"),
        _("HTTP 503 with ambiguous = False"): ({**http(503), "ambiguous": False}, "never_sent"),
        # The same class both ways, one after the other: the flag of each error decides,
        # never a verdict remembered for its class.
        _("TransientError() with ambiguous = False"): (
            {"type": "TransientError", "ambiguous": False},
            "never_sent",
        ),
        _("TransientError() with ambiguous = True (its answer lost)"): (
            {"type": "TransientError", "ambiguous": True},
            "maybe_done",
        ),
    }
    _judged_without_a_key(
        ns,
        cases,
        _("{cases}; and None from next_delay for each maybe-done one without an idempotency_key"),
        _(
            "rule 1 applies when the flag is true (if getattr(error, 'ambiguous', False)); a "
            "false one says nothing about the request: go on to rules 2 to 5"
        ),
        retried_when={"maybe_done"},
    )


@CHECKS.add(
    1,
    "the rules go in their order: the status (rule 3) comes before the connection error's "
    "or the timeout's class (rule 4), so a ConnectionError or TimeoutError subclass "
    "carrying a 429 is never_sent and one carrying a 400 is permanent",
)
def status_comes_before_the_connection_class(ns: Namespace) -> None:
    specs = [{"type": "ProxyError", "status": s} for s in (429, 503, 400, 502)]
    got = verdicts(ns, specs)
    want = ["never_sent", "never_sent", "permanent", "maybe_done"]
    expect(
        got == want,
        _("{verdicts} for a ConnectionError subclass carrying status 429, 503, 400 and 502").format(
            verdicts=", ".join(map(repr, want))
        ),
        got,
    )
    # A client library's timeout carrying the status it got (a gateway's 408 or 503): the
    # TimeoutError test placed before the status calls them all maybe_done.
    specs = [{"type": "DeadlineExceeded", "status": s} for s in (408, 429, 503, 400, 502)]
    got = verdicts(ns, specs)
    want = ["never_sent", "never_sent", "never_sent", "permanent", "maybe_done"]
    expect(
        got == want,
        _(
            "{verdicts} for a TimeoutError subclass carrying status 408, 429, 503, 400 and 502"
        ).format(verdicts=", ".join(map(repr, want))),
        got,
    )
    # Rule 5 names ValueError as "everything else", after rules 1 to 4: a client library's
    # ValueError that carries the server's status is judged by the status first.
    specs = [{"type": "BadResponse", "status": s} for s in (503, 429, 502)]
    specs += [{"type": "BadResponse", "ambiguous": True}, {"type": "BadResponse"}]
    got = verdicts(ns, specs)
    want = ["never_sent", "never_sent", "maybe_done", "maybe_done", "permanent"]
    expect(
        got == want,
        _(
            "{verdicts} for a ValueError subclass carrying status 503, 429 and 502, one with "
            "ambiguous = True and one with neither (rule 5 comes last)"
        ).format(verdicts=", ".join(map(repr, want))),
        got,
        _(
            "test ValueError, KeyError and the other 'everything else' classes last, if at "
            "all: the flag, labkit's classes and the status come first"
        ),
    )
    # Rule 3 reads any int status, not only the statuses HTTP defines: a status of 0 (a
    # library's "no answer") or 600 on a refusal or a timeout is "any other status", so
    # permanent; a guard such as `if status:` or `100 <= status <= 599` lets it fall through
    # to the class of the error.
    specs = [
        {"type": "ProxyRefused", "status": 0},
        {"type": "ProxyRefused", "status": 600},
        {"type": "DeadlineExceeded", "status": 0},
        {"type": "ProxyError", "status": 0},
    ]
    got = verdicts(ns, specs)
    expect(
        got == ["permanent"] * 4,
        _(
            "'permanent' for a ConnectionRefusedError subclass carrying status 0 and one "
            "carrying status 600, a TimeoutError subclass carrying status 0 and a "
            "ConnectionError subclass carrying status 0 (any other int status is permanent)"
        ),
        got,
        _(
            "rule 3 applies to every int status, 0 and 600 included: test "
            "isinstance(status, int) alone (not bool), never its truth or an HTTP range"
        ),
    )


@CHECKS.add(
    2,
    "the deadline is a duration from started_at (started_at + deadline), and now and "
    "started_at are epoch seconds: read as an instant, a deadline of 300 is long past and "
    "no job is ever retried; and a delay is a number of seconds, never NaN nor infinite: a "
    "Retry-After of NaN is not larger than the draw, and one of inf ends past the deadline "
    "(None), or the retry at now + nan (or now + inf) never comes",
    severe=True,
)
def retries_happen_at_real_times(ns: Namespace) -> None:
    start = 1_764_900_000.0  # 2025-12-05, as time.time() gives it
    cases = [
        (
            {"type": "ConnectionRefusedError"},
            attempt,
            {"started_at": start, "now": start + 5.0 * attempt},
        )
        for attempt in (1, 2, 3)
    ]
    got = delays_for(ns, cases)
    # A delay is how long to wait, not when: now + delay handed back is a wait of decades.
    expect(
        all(isinstance(d, (int, float)) and not isinstance(d, bool) and 0 <= d <= 60 for d in got),
        _(
            "a delay for each of attempts 1, 2 and 3 of a refused connection, 5 to 15 s into "
            "a 300 s deadline that started at {start:.0f} (epoch seconds): seconds to wait, "
            "within the 60 s cap"
        ).format(start=start),
        repr(got),
    )
    # One worker, job after job in the same process: each call's deadline counts from the
    # started_at it is given. A start (or deadline) kept from the first call, an hour-old
    # job's, ends the retries of every job after it. (What the old job gets is not judged
    # here: respects_deadline holds the deadline itself.)
    jobs = [
        (start - 3600.0, start),  # an hour-old job, long past its 300 s deadline
        (start, start + 5.0),  # a job started 5 s ago
        (start + 1000.0, start + 1005.0),  # a later job, 5 s in
    ]
    got = delays_for(
        ns, [(REFUSED, 1, {"started_at": started_at, "now": now}) for started_at, now in jobs]
    )
    expect(
        all(_number(d) and 0 <= d <= 1 for d in got[1:]),
        _(
            "in one process, after a call for a job started an hour earlier: a delay within "
            "[0, 1] after attempt 1 of a refused connection for a job started 5 s ago, and "
            "for one started 1000 s later (each job's deadline counts from its own started_at)"
        ),
        repr(got[1:]),
        _(
            "compute started_at + deadline from the arguments of each call: nothing kept "
            "between calls (a start remembered from the first job ends every later job's "
            "retries)"
        ),
    )
    # A long-lived worker: a hundred jobs one after another in one process, each failing
    # attempts 1 to 4 on a refused connection, then one operation whose read timed out on
    # its first attempt, run six times under its key (re-enqueued an hour after each run,
    # each run with its own started_at), then 300 jobs refused at the same instant (a
    # dependency down for everyone at once). Each call is judged by its own arguments: a
    # budget kept between calls (a count of retries in the process, per key, or per minute)
    # or a start kept per key never retries the later jobs again.
    key = "billing:42:charge:v1"
    timeout = {"type": "TimeoutError", "message": "read timed out"}
    steps = [("job", job, attempt) for job in range(100) for attempt in (1, 2, 3, 4)]
    steps += [("run", run, 1) for run in range(6)]
    steps += [("burst", job, 1) for job in range(300)]

    def call(kind: str, job: int, attempt: int) -> tuple[dict[str, Any], int, dict[str, Any]]:
        if kind == "job":
            at = start + 10.0 * job
            return REFUSED, attempt, {"started_at": at, "now": at}
        if kind == "run":
            at = start + 2000.0 + 3600.0 * job
            return timeout, attempt, {"started_at": at, "now": at, "idempotency_key": key}
        return REFUSED, attempt, {"started_at": start + 30_000.0, "now": start + 30_000.0}

    got = delays_for(ns, [call(*step) for step in steps])
    names = {
        "job": _("job {number}"),
        "run": _("run {number} under the key"),
        "burst": _("job {number} of the 300 refused at once"),
    }
    stopped = [
        _("{delay!r} for attempt {attempt} of {what}").format(
            delay=d, attempt=attempt, what=names[kind].format(number=job + 1)
        )
        for (kind, job, attempt), d in zip(steps, got, strict=True)
        if not (_number(d) and 0 <= d <= 60)
    ]
    expect(
        not stopped,
        _(
            "in one process, a delay after each of attempts 1 to 4 of 100 jobs failing on a "
            "refused connection, after attempt 1 of a read timeout under the key {key!r} "
            "in each of six runs (re-enqueued an hour after each, each run started anew), and "
            "after attempt 1 of each of 300 jobs refused at the same instant"
        ).format(key=key),
        _("{count} without one, e.g. {examples}").format(
            count=len(stopped), examples="; ".join(stopped[:3])
        ),
        _(
            "decide from this call's arguments alone: a count of retries kept between calls "
            "(a budget for the process, per key or per minute) or a start kept per key stops "
            "retrying every job after it"
        ),
    )
    # A Retry-After parsed with float() from a header saying "nan": max(nan, delay) is nan,
    # and a job due at now + nan is never due again (nan compares false with every time).
    [got_nan] = delays_for(
        ns, [(http(503, float("nan")), 2, {"started_at": start, "now": start + 5.0})]
    )
    [draw] = draws(ns, 1, DELAY_SEED, 1.0, 60.0, 1)
    expect(
        got_nan == draw,
        _(
            "the backoff draw {draw:.4f} after attempt 2 of a 503 with Retry-After nan: nan is "
            "never larger than the draw, so the draw stands, a number of seconds"
        ).format(draw=draw),
        repr(got_nan),
        _(
            "raise the delay only when retry_after > delay; max(retry_after, delay) gives nan "
            "back, and a retry at now + nan never comes"
        ),
    )
    # An endless Retry-After (a header parsed as float("inf")) asks for a wait that ends past
    # every deadline: None. A delay of inf handed back (the deadline tested before Retry-After
    # raised the delay, or only on a finite one) schedules the retry at now + inf: never.
    [got_inf] = delays_for(
        ns, [(http(503, float("inf")), 2, {"started_at": start, "now": start + 5.0})]
    )
    # (Whether inf is honoured is honours_retry_after's to judge; a delay of inf is this one's.)
    expect(
        got_inf is None or (_number(got_inf) and math.isfinite(got_inf)),
        _(
            "no delay of inf after attempt 2 of a 503 with Retry-After inf, 5 s into a 300 s "
            "deadline: None, as the wait it asks for ends past the deadline"
        ),
        repr(got_inf),
        _(
            "test the deadline on the delay you return, Retry-After included: a delay of inf "
            "is a retry at now + inf, which never comes"
        ),
    )


@CHECKS.add(
    2,
    "classify the error you are given, not the one it was raised from: a lost answer "
    "(ambiguous) or a 502 raised from a ConnectionRefusedError is still maybe_done, a "
    "PermanentError raised from a timeout still permanent (no walk down __cause__ or "
    "__context__)",
    severe=True,
)
def classify_judges_the_error_itself(ns: Namespace) -> None:
    refused = {"type": "ConnectionRefusedError"}
    cases: dict[str, tuple[dict[str, Any], str]] = {
        _("a ResponseLost raised from a ConnectionRefusedError"): (
            {"type": "ResponseLost", "cause": refused},
            "maybe_done",
        ),
        _("a 502 raised from a ConnectionRefusedError"): (
            {"type": "HTTPError", "status": 502, "cause": refused},
            "maybe_done",
        ),
        _("a ResponseLost raised inside `except ConnectionRefusedError`"): (
            {"type": "ResponseLost", "context": refused},
            "maybe_done",
        ),
        _("a read timeout raised inside `except ConnectionRefusedError`"): (
            {"type": "TimeoutError", "context": refused},
            "maybe_done",
        ),
        _("a PermanentError raised from a TimeoutError"): (
            {"type": "PermanentError", "cause": {"type": "TimeoutError"}},
            "permanent",
        ),
        _("a TransientError raised from a ValueError"): (
            {"type": "TransientError", "cause": {"type": "ValueError"}},
            "never_sent",
        ),
        # Nor the status of the error it was raised from: a read timeout has no status of
        # its own, and a 503 met before it says nothing about this request.
        _("a read timeout raised from an HTTP 503"): (
            {"type": "TimeoutError", "message": "read timed out", "cause": http(503)},
            "maybe_done",
        ),
        _("a read timeout raised inside `except` of an HTTP 429"): (
            {"type": "TimeoutError", "message": "read timed out", "context": http(429)},
            "maybe_done",
        ),
    }
    got = verdicts(ns, [spec for spec, _want in cases.values()])
    wrong = [
        _("{verdict} for {error}").format(verdict=repr(g), error=name)
        for (name, (_spec, want)), g in zip(cases.items(), got, strict=True)
        if g != want
    ]
    expect(
        not wrong,
        _("each error classified by itself: {cases}").format(
            cases="; ".join(
                _("{verdict} for {error}").format(verdict=repr(want), error=name)
                for name, (_spec, want) in cases.items()
            )
        ),
        "; ".join(wrong),
    )


@CHECKS.add(
    2,
    "next_delay judges the error it is given, as classify does: a lost answer or a 502 "
    "raised from (or inside the handler of) a ConnectionRefusedError may still have "
    "charged, so without an idempotency_key it gets None; a TransientError raised from a "
    "ValueError is still retried (no walk down __cause__ or __context__ in next_delay); and "
    "a number in a read timeout's or a reset's message is no status: still maybe_done",
    severe=True,
)
def next_delay_judges_the_error_itself(ns: Namespace) -> None:
    refused = {"type": "ConnectionRefusedError"}
    at_start = {"started_at": 0.0, "now": 0.0}
    cases: dict[str, tuple[dict[str, Any], bool]] = {
        _("a ResponseLost raised from a ConnectionRefusedError"): (
            {"type": "ResponseLost", "cause": refused},
            False,
        ),
        _("a 502 raised from a ConnectionRefusedError"): (
            {"type": "HTTPError", "status": 502, "cause": refused},
            False,
        ),
        _("a ResponseLost raised inside `except ConnectionRefusedError`"): (
            {"type": "ResponseLost", "context": refused},
            False,
        ),
        _("a read timeout raised inside `except ConnectionRefusedError`"): (
            {"type": "TimeoutError", "context": refused},
            False,
        ),
        _("a read timeout whose message says 'after 429 ms'"): (
            {"type": "TimeoutError", "message": "read timed out after 429 ms"},
            False,
        ),
        _("a connection reset whose message names a 503 proxy"): (
            {"type": "ConnectionResetError", "message": "reset by the 503 proxy"},
            False,
        ),
        _("a TransientError raised from a ValueError"): (
            {"type": "TransientError", "cause": {"type": "ValueError"}},
            True,
        ),
        _("a TransientError raised inside `except KeyError`"): (
            {"type": "TransientError", "context": {"type": "KeyError"}},
            True,
        ),
    }
    got = delays_for(ns, [(spec, 1, at_start) for spec, _retried in cases.values()])
    wrong = [
        _("{delay} for {error}").format(delay=repr(g), error=name)
        for (name, (_spec, retried)), g in zip(cases.items(), got, strict=True)
        if (g is not None) != retried
    ]
    expect(
        not wrong,
        _(
            "without an idempotency_key, after attempt 1, None for each maybe-done error "
            "whatever it was raised from ({gives_up}), and a delay for each never-sent one "
            "({retried})"
        ).format(
            gives_up="; ".join(name for name, (_s, retried) in cases.items() if not retried),
            retried="; ".join(name for name, (_s, retried) in cases.items() if retried),
        ),
        "; ".join(wrong),
        _(
            "call classify(error) on the error next_delay is given: the error it was raised "
            "from says nothing about whether this request reached the server"
        ),
    )


@CHECKS.add(
    2,
    "the refused connection's rule (rule 4) comes after the ambiguous flag (rule 1) and the "
    "status (rule 3): a ConnectionRefusedError subclass carrying a true ambiguous flag or a "
    "502 is maybe_done, and next_delay gives up on it without an idempotency_key",
    severe=True,
)
def refusal_is_judged_after_the_flag_and_the_status(ns: Namespace) -> None:
    cases: dict[str, tuple[dict[str, Any], str]] = {
        _("a ConnectionRefusedError subclass with ambiguous = True"): (
            {"type": "ProxyRefused", "ambiguous": True},
            "maybe_done",
        ),
        _("a ConnectionRefusedError subclass carrying status 502"): (
            {"type": "ProxyRefused", "status": 502},
            "maybe_done",
        ),
        _("a ConnectionRefusedError subclass carrying status 500"): (
            {"type": "ProxyRefused", "status": 500},
            "maybe_done",
        ),
        _("a ConnectionRefusedError subclass carrying status 400"): (
            {"type": "ProxyRefused", "status": 400},
            "permanent",
        ),
    }
    _judged_without_a_key(
        ns,
        cases,
        _("{cases}; and None from next_delay for each of them without an idempotency_key"),
        _(
            "test the rules in their order: the ambiguous flag, labkit's classes and the "
            "status come before the class of a connection error, ConnectionRefusedError "
            "included"
        ),
    )


@CHECKS.add(
    1,
    "Retry-After is a number of seconds from now whatever its size: a negative or zero "
    "one is never larger than the draw (the backoff stands, jitter and all), and a huge "
    "one (two days, a million seconds, a number as large as an epoch timestamp) is "
    "seconds too, with no limit of the code's own: the deadline decides",
)
def retry_after_is_seconds_whatever_its_size(ns: Namespace) -> None:
    # The seed next_delay's rng is built from in the harness (``delays``).
    want = draws(ns, 2, DELAY_SEED, 1.0, 60.0, 5)
    for after in (-30, -0.5, 0):
        got = delays(ns, http(503, after), 3, 5, started_at=0.0, now=0.0, deadline=3600.0)
        expect(
            got == want,
            _(
                "after attempt 3 with Retry-After {retry_after!r}, the backoff draws {draws} "
                "(backoff(2, rng) from the same seed, as drawn): a Retry-After that is not "
                "larger than the draw changes nothing"
            ).format(retry_after=after, draws=[round(w, 4) for w in want]),
            f"{[round(g, 4) if _number(g) else g for g in got]}",
            _(
                "delay = max(backoff, retry_after): a Retry-After of zero or below (a date "
                "already past) is no reason to come back at once, nor to give up"
            ),
        )
    start = 1_764_900_000.0  # 2025-12-05, as time.time() gives it
    two_days, million, epochish = delays_for(
        ns,
        [
            (http(429, 172_800), 1, {"started_at": 0.0, "now": 0.0, "deadline": 259_200.0}),
            (http(429, 1_000_000), 1, {"started_at": 0.0, "now": 0.0, "deadline": 3600.0}),
            (
                http(429, start + 120),
                1,
                {"started_at": start, "now": start + 10.0, "deadline": 300.0},
            ),
        ],
    )
    expect(
        _number(two_days) and two_days >= 172_800,
        _(
            "at least 172800 s for a 429 with Retry-After: 172800 (two days) within a "
            "259200 s deadline"
        ),
        repr(two_days),
        _(
            "no limit of your own on Retry-After (a day, an hour): the deadline decides "
            "whether it is too late"
        ),
    )
    expect(
        million is None,
        _(
            "None for a 429 with Retry-After: 1000000 within a 3600 s deadline (a million "
            "seconds, never milliseconds: the wait ends past the deadline)"
        ),
        repr(million),
        _("Retry-After is seconds whatever its size: no unit guessed from how large it is"),
    )
    expect(
        epochish is None,
        _(
            "None for a 429 with Retry-After: {retry_after:.0f} at now={now:.0f}, 300 s "
            "deadline (that many seconds from now, never an instant to wait until: the wait "
            "ends past the deadline)"
        ).format(retry_after=start + 120, now=start + 10.0),
        repr(epochish),
        _(
            "Retry-After is a number of seconds from now: no value is taken for an epoch "
            "timestamp, however large"
        ),
    )
    # The deadline too is seconds from started_at whatever its size: on a clock that
    # counts from boot (time.monotonic()), started_at can be smaller than the deadline,
    # and started_at + deadline is still when the retries end.
    [monotonic] = delays_for(
        ns, [(http(429, 30), 1, {"started_at": 100.0, "now": 350.0, "deadline": 300.0})]
    )
    expect(
        monotonic == 30,
        _(
            "30 s for a 429 with Retry-After: 30 at now=350, started_at=100 (a monotonic "
            "clock's seconds), 300 s deadline: the retry at 380 is before 100 + 300"
        ),
        repr(monotonic),
        _(
            "the deadline is a duration from started_at whatever its size, never an instant "
            "when it is larger than started_at"
        ),
    )


#: A clock far ahead of any machine's (2100-01-01 UTC): a date read against the wall clock
#: instead of ``now`` is decades away.
FAR_NOW = 4_102_444_800.0


#: The same instant in a zone west of UTC, with no daylight saving (POSIX, no database
#: needed): a date read as local time there is three hours late.
WEST = "<-03>3"


@CHECKS.add(
    1,
    "a Retry-After given as text, as the header's raw value ('120', '7200', an HTTP-date "
    "ahead or already past, 'soon', an empty one), neither raises nor decides alone: "
    "next_delay returns the backoff draw, or the wait the header gives counted from now, "
    "in seconds, in any time zone; an unreadable one or a date already past leaves the "
    "draw as it is",
)
def text_retry_after_is_read_or_left(ns: Namespace) -> None:
    import email.utils

    now = FAR_NOW + 43_210.0  # not midnight: no date that reads as a time of day
    # What each header gives: the wait it asks for (the draw also stands, for code that
    # reads no text), or None, the draw itself and nothing else.
    texts: dict[str, tuple[str, float | None]] = {
        "'120'": ("120", 120.0),
        "'7200'": ("7200", 7200.0),
        _("an HTTP-date 120 s after now"): (
            email.utils.formatdate(now + 120, usegmt=True),
            120.0,
        ),
        _("an HTTP-date 1800 s before now"): (
            email.utils.formatdate(now - 1800, usegmt=True),
            None,
        ),
        "'soon'": ("soon", None),
        "''": ("", None),
    }
    kwargs = {"started_at": now - 10.0, "now": now, "deadline": 86_400.0}
    calls = [
        {"error": http(503, text), "attempt": 2, "seed": DELAY_SEED, "kwargs": kwargs}
        for text, _wait in texts.values()
    ]
    [draw] = draws(ns, 1, DELAY_SEED, 1.0, 60.0, 1)
    wrong: list[str] = []
    for zone in ("UTC0", WEST):
        # Read here, not through delays_for: an exception is this check's finding, named.
        results = [result for [result] in ns.harness(HARNESS + "next_delays_in_zone", calls, zone)]
        for name, (_text, wait), r in zip(texts, texts.values(), results, strict=True):
            got = r.get("returned")
            fine = (
                "raised" not in r
                and _number(got)
                and (abs(got - draw) < 1e-9 or (wait is not None and abs(got - wait) < 1e-6))
            )
            if not fine:
                said = raised_text(r) if "raised" in r else repr(got)
                wrong.append(
                    _("{said} for Retry-After {text} (TZ={zone})").format(
                        said=said, text=name, zone=zone
                    )
                )
    expect(
        not wrong,
        _(
            "after attempt 2 of a 503 whose Retry-After is text ({texts}), 10 s into a "
            "86400 s deadline: the backoff draw {draw:.4f} for each, or the wait the header "
            "asks for counted from now (120 s, 7200 s, 120 s); the draw for 'soon', '' and the "
            "date already past; never None, text or an exception, in UTC as in UTC-3"
        ).format(texts=", ".join(texts), draw=draw),
        "; ".join(wrong[:4]),
        _(
            "compare retry_after with the draw only when it is a number (isinstance(..., "
            "(int, float))); if you read text, a number of seconds, or an HTTP-date minus now "
            "(email.utils.parsedate_to_datetime(text).timestamp() - now: a date is UTC, never "
            "local time as time.mktime or a naive datetime reads it), and anything unreadable "
            "or past leaves the draw as it is"
        ),
    )


@CHECKS.add(
    1,
    "any idempotency_key is a key, whatever its shape: a long one (200 characters), one "
    "with a space, one of digits only, a blank or non-ASCII one; under it a maybe-done "
    "failure is retried",
)
def any_key_is_a_key(ns: Namespace) -> None:
    keys = {
        _("a key of 200 characters"): "tenant-42:" + "order-7:" * 23 + "charge:v1"[:6],
        "'order 7'": "order 7",
        "'12345'": "12345",
        "'ORDER-7'": "ORDER-7",
        # Nor is a key judged by its letters: blank after strip(), or not ASCII.
        _("' ' (a single space)"): " ",
        _("'заказ-7' (not ASCII)"): "заказ-7",
    }
    timeout = {"type": "TimeoutError", "message": "read timed out"}
    got = delays_for(
        ns,
        [
            (timeout, 2, {"started_at": 0.0, "now": 0.0, "idempotency_key": k})
            for k in keys.values()
        ],
    )
    [want] = draws(ns, 1, DELAY_SEED, 1.0, 60.0, 1)
    wrong = [
        _("{delay!r} under {key}").format(delay=d, key=name)
        for name, d in zip(keys, got, strict=True)
        if d != want
    ]
    expect(
        not wrong,
        _(
            "after attempt 2 of a read timeout, the backoff draw {draw:.4f} under each key: {keys}"
        ).format(draw=want, keys=", ".join(keys)),
        "; ".join(wrong),
        _(
            "give up on a maybe-done failure only when there is no key (idempotency_key is "
            "None): no length, character or pattern of your own decides what a key is"
        ),
    )


@CHECKS.add(
    1,
    "the ceiling is min(cap, base * 2**n) at every scale: a cap of an hour is reached "
    "(no limit of the code's own), and past n = 1023 it is the cap, whatever the base",
)
def backoff_reaches_any_cap(ns: Namespace) -> None:
    for n, base, cap, words in (
        (12, 1.0, 3600.0, _("n=12, base=1, cap=3600")),
        (16, 0.5, 7200.0, _("n=16, base=0.5, cap=7200")),
        (2000, 2.0**-1020, 60.0, _("n=2000, base=2**-1020, cap=60")),
        (1500, 2.0**-1000, 60.0, _("n=1500, base=2**-1000, cap=60")),
    ):
        got = draws(ns, n, SEED, base, cap, 40)
        expect(
            all(_number(d) and 0 <= d <= cap for d in got) and max(got) > cap / 2,
            _(
                "40 delays within [0, {cap:g}], some above {half:g}, for {case}: the ceiling "
                "is the cap given"
            ).format(cap=cap, half=cap / 2, case=words),
            repr([round(d, 6) if _number(d) else d for d in got[:6]]),
            _(
                "ceiling = cap if n >= 1024 else min(cap, base * 2.0**n): no limit of your "
                "own beside the cap, and no exponent clamped (min(n, 1023) keeps a tiny base "
                "far under the cap)"
            ),
        )
    # A base with a fraction (1.5 s): the ceiling is 1.5 * 2**3 = 12, not int(base) * 8.
    got = draws(ns, 3, SEED, 1.5, 60.0, 40)
    expect(
        all(_number(d) and 0 <= d <= 12.0 for d in got) and max(got) > 8.0,
        _("40 delays within [0, 12], some above 8, for n=3, base=1.5, cap=60"),
        repr([round(d, 6) if _number(d) else d for d in got[:6]]),
        _("the base is a float: use it as given (1.5 * 2**3 = 12), never int(base)"),
    )


@CHECKS.add(
    1,
    "every retry is judged alike, the last ones too: Retry-After honoured at every attempt "
    "before the last, the backoff of attempt - 1 under a key at every attempt of a larger "
    "budget, and with a tiny base at attempts 40 and 1100",
)
def every_attempt_is_judged_alike(ns: Namespace) -> None:
    wide = {"started_at": 0.0, "now": 0.0, "deadline": 1e9}
    cases = [
        (http(503, 30), attempt, {"started_at": 0.0, "now": 0.0, "deadline": 3600.0})
        for attempt in (1, 2, 3, 4)
    ]
    got = delays_for(ns, cases)
    expect(
        got == [30, 30, 30, 30],
        _(
            "30 s after each of attempts 1 to 4 of 5 for a 503 with Retry-After: 30 (the last "
            "retry honours it too)"
        ),
        repr(got),
        _(
            "raise the delay to retry_after whenever it is larger, at every attempt: the "
            "server's word holds for the last retry as for the first"
        ),
    )
    timeout = {"type": "TimeoutError", "message": "read timed out"}
    keyed = {**wide, "max_attempts": 9, "idempotency_key": "billing:42:charge:v1"}
    attempts = (5, 6, 7, 8)
    got = delays_for(ns, [(timeout, attempt, keyed) for attempt in attempts])
    want = [draws(ns, attempt - 1, DELAY_SEED, 1.0, 60.0, 1)[0] for attempt in attempts]
    expect(
        got == want,
        _(
            "after attempts 5 to 8 of 9 of a read timeout under a key, what backoff(attempt - "
            "1, rng) draws from the same seed: {draws}"
        ).format(draws=[round(w, 4) for w in want]),
        repr([round(g, 4) if _number(g) else g for g in got]),
        _(
            "under a key a maybe-done failure keeps the backoff of a never-sent one at every "
            "attempt: backoff(attempt - 1, rng, base, cap), with no rule of its own for late ones"
        ),
    )
    # Attempt 1100: an exponent clamped at 62, 64 or 100 in next_delay (for fear of an
    # overflow that backoff already avoids) leaves a tiny base far under the cap.
    for attempt, exponent, ceiling in ((40, 35, "16 s"), (1100, 1000, _("the cap, 60 s"))):
        base = 2.0**-exponent
        settings = {**wide, "max_attempts": attempt + 10, "base": base}
        [late] = delays_for(ns, [(REFUSED, attempt, settings)])
        [want_late] = draws(ns, attempt - 1, DELAY_SEED, base, 60.0, 1)
        expect(
            late == want_late,
            _(
                "after attempt {attempt} of {budget} of a refused connection with "
                "base=2**-{exponent}, what backoff({n}, rng, 2**-{exponent}, 60) draws "
                "(ceiling {ceiling}): {draw:.4f}"
            ).format(
                attempt=attempt,
                budget=attempt + 10,
                exponent=exponent,
                n=attempt - 1,
                ceiling=ceiling,
                draw=want_late,
            ),
            repr(late),
            _(
                "call backoff(attempt - 1, rng, base, cap) at every attempt: no exponent "
                "clamped in next_delay (backoff already keeps a huge n from overflowing), no "
                "other rule for the late ones"
            ),
        )


def _interleaved(ns: Namespace, first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    return ns.harness("labkit.grading.exercises.ex04.harness:interleaved", first, second)


def _stopped_where(run: dict[str, Any]) -> str:
    if not run["stopped"]:
        return _("the first ran whole, then the second")
    if run["blocked"]:
        return _(
            "the first stopped after its line {n} (holding a lock the second waited on)"
        ).format(n=run["after"])
    return _("the first stopped after its line {n} while the second ran whole").format(
        n=run["after"]
    )


def _said_by_a_call(result: dict[str, Any]) -> str:
    if result.get("hung"):
        return _("no answer (hung)")
    if "returned" in result:
        return repr(result["returned"])
    return _("raised {error}").format(error=", ".join(result.get("raised", [])[:1]))


@CHECKS.add(
    2,
    "two threads calling next_delay at once: a maybe-done failure without an "
    "idempotency_key gets None whatever the other thread does meanwhile (no verdict or "
    "key kept in a module-level name between two lines, nor a status kept by classify)",
    severe=True,
)
def next_delay_keeps_nothing_between_threads(ns: Namespace) -> None:
    timeout = {"type": "TimeoutError", "message": "read timed out"}
    first = {
        "fn": "next_delay",
        "error": timeout,
        "attempt": 1,
        "seed": DELAY_SEED,
        "kwargs": {"started_at": 0.0, "now": 0.0},
    }
    others = {
        _("a refused connection"): {**first, "error": REFUSED, "seed": DELAY_SEED + 1},
        # A status kept in a module-level name by classify: the 503's, read back by the
        # timeout's call, makes the timeout never sent.
        _("a 503 (Service Unavailable)"): {**first, "error": http(503), "seed": DELAY_SEED + 1},
        _("a read timeout under a key"): {
            **first,
            "seed": DELAY_SEED + 1,
            "kwargs": {"started_at": 0.0, "now": 0.0, "idempotency_key": "billing:42:charge:v1"},
        },
    }
    for name, second in others.items():
        got = _interleaved(ns, first, second)
        bad = [run for run in got["schedules"] if run["first"] != {"returned": None}]
        expect(
            not bad,
            _(
                "None for a read timeout without an idempotency_key (attempt 1) in one thread, "
                "in every schedule while another thread's next_delay handles {other}"
            ).format(other=name),
            _("{said} when {schedule}").format(
                said=_said_by_a_call(bad[0]["first"]), schedule=_stopped_where(bad[0])
            )
            if bad
            else "",
            _(
                "keep the verdict, the key, the status and the delay in local variables: a "
                "module-level name written by one call is overwritten by the other thread's "
                "between two of your lines, and a charge that may have gone through is retried"
            ),
        )


@CHECKS.add(
    1,
    "two threads calling backoff or next_delay at once each get what their call gets "
    "alone: each draws from its own rng, decides from its own arguments",
)
def calls_in_two_threads_do_not_mix(ns: Namespace) -> None:
    at_start = {"started_at": 0.0, "now": 0.0}
    pairs = {
        _("backoff(3, rng) beside backoff(3, another rng)"): (
            {"fn": "backoff", "n": 3, "seed": DELAY_SEED},
            {"fn": "backoff", "n": 3, "seed": DELAY_SEED + 1},
        ),
        _("next_delay for a refused connection (attempt 2) beside a 503 with Retry-After: 30"): (
            {
                "fn": "next_delay",
                "error": REFUSED,
                "attempt": 2,
                "seed": DELAY_SEED,
                "kwargs": at_start,
            },
            {
                "fn": "next_delay",
                "error": http(503, 30),
                "attempt": 3,
                "seed": DELAY_SEED + 1,
                "kwargs": {**at_start, "deadline": 3600.0},
            },
        ),
        # Retry-After 120 s at 250 s: in time for a 3600 s deadline, not for a 300 s one. A
        # deadline kept in a module-level name between computing and testing it takes the
        # other thread's.
        _(
            "next_delay for a 429 with Retry-After: 120 at 250 s into a 300 s deadline beside "
            "the same into a 3600 s deadline"
        ): (
            {
                "fn": "next_delay",
                "error": http(429, 120),
                "attempt": 1,
                "seed": DELAY_SEED,
                "kwargs": {"started_at": 0.0, "now": 250.0, "deadline": 300.0},
            },
            {
                "fn": "next_delay",
                "error": http(429, 120),
                "attempt": 1,
                "seed": DELAY_SEED + 1,
                "kwargs": {"started_at": 0.0, "now": 250.0, "deadline": 3600.0},
            },
        ),
        _("next_delay for a refused connection beside a read timeout without a key"): (
            {
                "fn": "next_delay",
                "error": REFUSED,
                "attempt": 1,
                "seed": DELAY_SEED,
                "kwargs": at_start,
            },
            {
                "fn": "next_delay",
                "error": {"type": "TimeoutError"},
                "attempt": 1,
                "seed": DELAY_SEED + 1,
                "kwargs": at_start,
            },
        ),
    }
    for name, (first, second) in pairs.items():
        got = _interleaved(ns, first, second)
        alone = got["alone"]
        bad = [
            run for run in got["schedules"] if run["first"] != alone[0] or run["second"] != alone[1]
        ]
        expect(
            not bad,
            _(
                "in two threads, {pair}: in every schedule each call returns what it returns "
                "alone ({first} and {second})"
            ).format(pair=name, first=_said_by_a_call(alone[0]), second=_said_by_a_call(alone[1])),
            _("{first} and {second} when {schedule}").format(
                first=_said_by_a_call(bad[0]["first"]),
                second=_said_by_a_call(bad[0]["second"]),
                schedule=_stopped_where(bad[0]),
            )
            if bad
            else "",
            _(
                "draw from the rng each call is given and keep what a call works on in local "
                "variables: a module-level name is shared by every thread"
            ),
        )


@CHECKS.add(
    1,
    "an OSError no rule names (no route to host, network unreachable, host down) is "
    "'everything else': permanent, whatever its errno says about sending",
)
def classify_unnamed_os_errors(ns: Namespace) -> None:
    cases = {
        "OSError(EHOSTUNREACH, 'No route to host')": ("EHOSTUNREACH", "No route to host"),
        "OSError(ENETUNREACH, 'Network is unreachable')": (
            "ENETUNREACH",
            "Network is unreachable",
        ),
        "OSError(EHOSTDOWN, 'Host is down')": ("EHOSTDOWN", "Host is down"),
        # A call interrupted by a signal, a socket that would block: OSErrors of their own
        # (InterruptedError, BlockingIOError), no ConnectionError nor TimeoutError.
        "InterruptedError(EINTR, 'Interrupted system call')": (
            "EINTR",
            "Interrupted system call",
        ),
        "BlockingIOError(EAGAIN, 'Resource temporarily unavailable')": (
            "EAGAIN",
            "Resource temporarily unavailable",
        ),
    }
    specs: list[dict[str, Any]] = [
        {"type": "OSError", "errno": code, "strerror": words} for code, words in cases.values()
    ]
    # urllib's URLError is an OSError no rule names, whatever error it carries in .reason:
    # unwrapped, its refusal is retried as never sent.
    wrapped = {
        "urllib.error.URLError(ConnectionRefusedError()) (the refusal in .reason)": {
            "type": "URLError",
            "reason": {"type": "ConnectionRefusedError"},
        },
        "urllib.error.URLError(TimeoutError('timed out')) (the timeout in .reason)": {
            "type": "URLError",
            "reason": {"type": "TimeoutError", "message": "timed out"},
        },
    }
    cases = {**cases, **{name: ("", "") for name in wrapped}}
    specs += list(wrapped.values())
    got = verdicts(ns, specs)
    wrong = [
        _("{verdict} for {error}").format(verdict=repr(g), error=name)
        for name, g in zip(cases, got, strict=True)
        if g != "permanent"
    ]
    expect(
        not wrong,
        _("'permanent' for {errors}").format(errors=", ".join(cases)),
        "; ".join(wrong),
        _(
            "rule 4 names ConnectionRefusedError, TimeoutError and ConnectionError only: any "
            "other OSError is everything else (rule 5), whatever its errno or the error it "
            "carries (a URLError's .reason)"
        ),
    )


@CHECKS.add(
    1,
    "each call uses its own settings, in one process: backoff's ceiling is min(cap, base * "
    "2**n) for the base and cap of this call (zero included: a cap or a base of 0 is no "
    "wait), and next_delay's max_attempts, deadline, base and cap are the ones it is given "
    "(no policy built once from the first call, no ceiling kept per n)",
)
def each_call_uses_its_own_settings(ns: Namespace) -> None:
    # backoff(5, ...) with five settings in a row, in one process: a ceiling memoised by n
    # alone, or a policy object made at the first call, keeps the first one's.
    settings = [(1.0, 60.0), (1.0, 4.0), (0.01, 60.0), (10.0, 300.0), (1.0, 0.0), (0.0, 60.0)]
    results = ns.harness(
        HARNESS + "backoff_draws", [[5, SEED, base, cap, 40] for base, cap in settings]
    )
    wrong: list[str] = []
    for (base, cap), result in zip(settings, results, strict=True):
        ceiling = min(cap, base * 2.0**5)
        words = _("backoff(5, rng, base={base:g}, cap={cap:g})").format(base=base, cap=cap)
        if "raised" in result:
            wrong.append(_("{call} {said}").format(call=words, said=raised_text(result)))
            continue
        got = result["returned"]
        fine = all(_number(d) and 0 <= d <= ceiling * (1 + 1e-9) for d in got) and (
            max(got) > ceiling / 2 if ceiling > 0 else all(d == 0 for d in got)
        )
        if not fine:
            wrong.append(
                _("{call} drew up to {highest!r} (ceiling {ceiling:g})").format(
                    call=words,
                    highest=max(got, key=lambda d: d if _number(d) else 0),
                    ceiling=ceiling,
                )
            )
    expect(
        not wrong,
        _(
            "in one process, backoff(5, rng) with base and cap (1, 60), (1, 4), (0.01, 60), "
            "(10, 300), (1, 0) and (0, 60) in a row: delays within [0, ceiling] reaching "
            "above half of it, ceilings 32, 4, 0.32, 300, then 0 and 0 (no wait)"
        ),
        "; ".join(wrong[:3]),
        _(
            "compute the ceiling from this call's base and cap, every call: nothing kept per n "
            "between calls, and a cap or base of 0 is 0 (cap or 60.0 turns it into the default)"
        ),
    )
    # next_delay with other settings call after call, in one process.
    wide = {"started_at": 0.0, "now": 0.0, "deadline": 1e9}
    late = {"started_at": 0.0, "now": 250.0}
    cases: list[tuple[str, tuple[dict[str, Any], int, dict[str, Any]], Any]] = [
        (
            _("attempt 2 of 2 of a refused connection"),
            (REFUSED, 2, {**wide, "max_attempts": 2}),
            None,
        ),
        (
            _("attempt 2 of 9"),
            (REFUSED, 2, {**wide, "max_attempts": 9}),
            draws(ns, 1, DELAY_SEED, 1.0, 60.0, 1)[0],
        ),
        (_("attempt 4 of 3"), (REFUSED, 4, {**wide, "max_attempts": 3}), None),
        (
            _("a 429 with Retry-After 120 at 250 s into a 600 s deadline"),
            (http(429, 120), 1, {**late, "deadline": 600.0}),
            120,
        ),
        (
            _("a 429 with Retry-After 120 at 250 s into a 300 s deadline"),
            (http(429, 120), 1, {**late, "deadline": 300.0}),
            None,
        ),
        (
            _("attempt 3 with base=0.5, cap=1"),
            (REFUSED, 3, {**wide, "base": 0.5, "cap": 1.0}),
            draws(ns, 2, DELAY_SEED, 0.5, 1.0, 1)[0],
        ),
        (_("attempt 3 with base=0"), (REFUSED, 3, {**wide, "base": 0.0}), 0.0),
        (_("attempt 3 with cap=0"), (REFUSED, 3, {**wide, "cap": 0.0}), 0.0),
        (
            _("attempt 3 with base=3, cap=900"),
            (REFUSED, 3, {**wide, "base": 3.0, "cap": 900.0}),
            draws(ns, 2, DELAY_SEED, 3.0, 900.0, 1)[0],
        ),
    ]
    got = delays_for(ns, [case for _name, case, _want in cases])
    wrong = [
        _("{got!r} for {case} (want {want!r})").format(got=g, case=name, want=want)
        for (name, _case, want), g in zip(cases, got, strict=True)
        if not (g is None and want is None or _number(g) and want is not None and g == want)
    ]
    expect(
        not wrong,
        _("in one process, call after call, what each call's own settings give: {cases}").format(
            cases="; ".join(
                _("{want} for {case}").format(
                    want="None" if want is None else f"{want:.4g}", case=name
                )
                for name, _case, want in cases
            )
        ),
        "; ".join(wrong[:3]),
        _(
            "read max_attempts, deadline, base and cap from each call's arguments: a policy "
            "object built at the first call (or cached) keeps that call's settings for every "
            "later one"
        ),
    )


#: 2025-11-02 06:00 UTC: clocks in New York go back from 02:00 EDT to 01:00 EST, and 01:00
#: to 02:00 local time happens twice.
FALL_BACK = 1_762_063_200.0
#: New York's zone as a POSIX string (no time zone database needed).
NEW_YORK = "EST5EDT,M3.2.0,M11.1.0"


@CHECKS.add(
    1,
    "the deadline holds across a daylight-saving change: now, started_at and the delay "
    "are seconds, so compare now + delay with started_at + deadline as numbers, never as "
    "naive local datetimes (an hour repeats when the clocks go back)",
)
def deadline_holds_across_a_clock_change(ns: Namespace) -> None:
    cases = {
        _(
            "Retry-After 120 at 01:55 EDT, 25 min into a 30 min deadline started at 01:30 "
            "EDT: 120 (the retry at 01:57 EDT, before the deadline at 01:00 EST)"
        ): (
            {"started_at": FALL_BACK - 1800, "now": FALL_BACK - 300, "deadline": 1800.0},
            120,
            120.0,
        ),
        _(
            "Retry-After 600 at 01:25 EST, 55 min into a 60 min deadline started at 01:30 "
            "EDT: None (the retry at 01:35 EST, past the deadline at 01:30 EST)"
        ): (
            {"started_at": FALL_BACK - 1800, "now": FALL_BACK + 1500, "deadline": 3600.0},
            600,
            None,
        ),
    }
    calls = [
        {"error": http(429, after), "attempt": 1, "seed": DELAY_SEED, "kwargs": kwargs}
        for kwargs, after, _want in cases.values()
    ]
    results = ns.harness(HARNESS + "next_delays_in_zone", calls, NEW_YORK)
    got = [_results(r, "next_delay(attempt=1)")[0] for r in results]
    wrong = [
        _("{got!r} for {case}").format(got=g, case=name.split(":")[0])
        for (name, (_kwargs, _after, want)), g in zip(cases.items(), got, strict=True)
        if g != want
    ]
    expect(
        not wrong,
        _("with TZ=America/New_York on 2025-11-02, when the clocks go back: {cases}").format(
            cases="; ".join(cases)
        ),
        "; ".join(wrong),
        _(
            "compare epoch seconds, now + delay > started_at + deadline: datetime.fromtimestamp "
            "gives naive local times, and an hour of them comes twice when the clocks go back"
        ),
    )


@CHECKS.add(
    1,
    "the status is the error's status attribute, never a number read out of its message: "
    "ValueError('bad amount: 503'), KeyError('customer 429'), RuntimeError('worker 502 "
    "stopped') and KeyError(503) are permanent, and next_delay gives them no retry",
)
def classify_reads_the_status_attribute_only(ns: Namespace) -> None:
    cases: dict[str, tuple[dict[str, Any], str]] = {
        "ValueError('bad amount: 503')": (
            {"type": "ValueError", "message": "bad amount: 503"},
            "permanent",
        ),
        "KeyError('customer 429')": ({"type": "KeyError", "message": "customer 429"}, "permanent"),
        "RuntimeError('worker 502 stopped')": (
            {"type": "RuntimeError", "message": "worker 502 stopped"},
            "permanent",
        ),
        # Nor its first argument: a dict without the key 503 raises KeyError(503), and a
        # check of an amount ValueError(502, 'too large').
        "KeyError(503) (a dict without the key 503)": (
            {"type": "KeyError", "args": [503]},
            "permanent",
        ),
        "ValueError(502, 'too large')": (
            {"type": "ValueError", "args": [502, "too large"]},
            "permanent",
        ),
        # Nor another attribute: a payment library's decline code, not the server's status.
        "ValueError('card declined') with code = 429 (no status attribute)": (
            {"type": "ValueError", "message": "card declined", "attrs": {"code": 429}},
            "permanent",
        ),
        # A requests-style status_code is no status attribute either (rule 3 names status).
        "ValueError('bad amount') with status_code = 503 (no status attribute)": (
            {"type": "ValueError", "message": "bad amount", "attrs": {"status_code": 503}},
            "permanent",
        ),
        "ValueError('card declined') with code = 502 (no status attribute)": (
            {"type": "ValueError", "message": "card declined", "attrs": {"code": 502}},
            "permanent",
        ),
        # Nor the status of an answer the error keeps (error.response.status, as client
        # libraries attach it): that is the response's attribute, not the error's.
        "ValueError('bad amount') with response.status = 503 (no status attribute)": (
            {"type": "ValueError", "message": "bad amount", "response": {"status": 503}},
            "permanent",
        ),
        # Nor another library's spelling of it (http_status, response.status_code).
        "ValueError('bad amount') with http_status = 503 (no status attribute)": (
            {"type": "ValueError", "message": "bad amount", "attrs": {"http_status": 503}},
            "permanent",
        ),
        "ValueError('bad amount') with response.status_code = 503 (no status attribute)": (
            {"type": "ValueError", "message": "bad amount", "response": {"status_code": 503}},
            "permanent",
        ),
    }
    _judged_without_a_key(
        ns,
        cases,
        _("{cases}; and None from next_delay for each of them without an idempotency_key"),
        _(
            "rule 3 reads getattr(error, 'status', None) when it is an int: a number in the "
            "message, in error.args or in another attribute (error.code, error.status_code, "
            "error.http_status, error.response.status or .status_code) is an amount, a "
            "customer, a key, never the server's answer"
        ),
    )


def _judged_without_a_key(
    ns: Namespace,
    cases: dict[str, tuple[dict[str, Any], str]],
    expected: str,
    hint: str,
    retried_when: frozenset[str] | set[str] = frozenset({"maybe_done", "never_sent", "permanent"}),
) -> None:
    """Each case's error (its description, ``(spec, verdict)``) classified as its verdict,
    and no delay from next_delay without an idempotency_key for the cases whose verdict is
    in ``retried_when``; ``expected`` is formatted with the cases' list."""
    specs = [spec for spec, _want in cases.values()]
    got = verdicts(ns, specs)
    retried = delays_for(ns, [(spec, 1, {"started_at": 0.0, "now": 0.0}) for spec in specs])
    wrong = [
        _("{verdict} for {error}").format(verdict=repr(g), error=name)
        for (name, (_spec, want)), g in zip(cases.items(), got, strict=True)
        if g != want
    ]
    wrong += [
        _("a delay of {delay!r} s for {error} without an idempotency_key").format(
            delay=d, error=name
        )
        for (name, (_spec, want)), d in zip(cases.items(), retried, strict=True)
        if want in retried_when and d is not None
    ]
    expect(
        not wrong,
        expected.format(
            cases="; ".join(
                _("{verdict} for {error}").format(verdict=repr(want), error=name)
                for name, (_spec, want) in cases.items()
            )
        ),
        "; ".join(wrong),
        hint,
    )
