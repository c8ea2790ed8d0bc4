"""Exercise 4's checks of the delay ``next_delay`` returns: Retry-After, the deadline,
and the backoff it draws. When it gives up is ``give_up_checks``'s."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from labkit.grading.checks import Namespace, expect
from labkit.grading.exercises.ex04.policy import (
    CHECKS,
    HARNESS,
    REFUSED,
    _number,
    _results,
    delays,
    delays_for,
    draws,
    http,
)
from labkit.grading.exercises.helpers import SEED, holds_for
from labkit.lang import _


@CHECKS.add(
    2,
    "the server said when to come back: use max(backoff, error.retry_after) "
    "(getattr(error, 'retry_after', None)), whether it is an int or a float",
)
def honours_retry_after(ns: Namespace) -> None:
    [got] = delays(ns, http(429, 120.0), 1, started_at=0.0, now=0.0, deadline=3600.0)
    expect(_number(got) and got >= 120.0, "at least 120 s for a 429 with Retry-After: 120", got)
    # A 5xx retried under a key: its Retry-After counts as much as a 429's.
    [keyed] = delays(
        ns, http(502, 120.0), 1, started_at=0.0, now=0.0, deadline=3600.0, idempotency_key="k:1"
    )
    expect(
        _number(keyed) and keyed >= 120.0,
        "at least 120 s for a 502 with Retry-After: 120, retried under an idempotency_key",
        keyed,
    )
    # Any error that carries a Retry-After, not only a list of statuses: labkit's own
    # TransientError(retry_after=...) has no status, and a 409 (the key still in progress)
    # says when to come back too.
    for name, error in (
        (
            "TransientError(retry_after=120) (no status)",
            {"type": "TransientError", "retry_after": 120.0},
        ),
        (
            "TransientError(status=409, retry_after=120) (the key still in progress)",
            {"type": "TransientError", "status": 409, "retry_after": 120.0},
        ),
    ):
        [got] = delays(ns, error, 1, started_at=0.0, now=0.0, deadline=3600.0)
        expect(
            _number(got) and got >= 120.0,
            _("at least 120 s for {error}").format(error=name),
            got,
            _(
                "read getattr(error, 'retry_after', None) on every error you retry, whatever "
                "its status (or none): the server said when to come back"
            ),
        )
    # Retry-After counts from the answer that carried it (now), not from started_at; and a
    # long one (an hour of maintenance) is seconds all the same, never milliseconds.
    for started_at, now, after, deadline in (
        (0.0, 100.0, 120.0, 3600.0),
        (0.0, 0.0, 3600, 7200.0),
        (0.0, 0.0, 86_400, 172_800.0),  # a day of maintenance: no limit of the client's own
    ):
        [got] = delays(ns, http(429, after), 1, started_at=started_at, now=now, deadline=deadline)
        expect(
            _number(got) and got >= after,
            _(
                "at least {retry_after:g} s for a 429 with Retry-After: {retry_after:g} received "
                "at now={now:g} (started_at={started_at:g}, deadline {deadline:g} s)"
            ).format(retry_after=after, now=now, started_at=started_at, deadline=deadline),
            got,
            _(
                "Retry-After is seconds from now: delay = max(backoff, retry_after), with "
                "nothing taken off it, no unit guessed and no limit of your own (the "
                "deadline decides whether it is too late)"
            ),
        )
    # An endless Retry-After (a header parsed as float('inf')) is no reason to ignore it:
    # the wait it asks for ends past every deadline, so no retry.
    [endless] = delays(ns, http(503, float("inf")), 1, started_at=0.0, now=0.0, deadline=3600.0)
    expect(
        endless is None,
        _(
            "None for a 503 with Retry-After inf: never sooner than the server said, and "
            "that is past the 3600 s deadline"
        ),
        endless,
        _(
            "raise the delay to retry_after whenever it is larger, inf too: skipping a "
            "non-finite one retries at the backoff, long before the server said"
        ),
    )
    # Retry-After under the backoff's ceiling still raises every smaller draw.
    got = delays(ns, http(503, 0.9), 1, 20, started_at=0.0, now=0.0, max_attempts=9)
    expect(
        all(_number(g) and g >= 0.9 for g in got),
        "at least 0.9 s for each of 20 retries after attempt 1 with Retry-After 0.9 (under "
        "the 1 s ceiling: compare it with the draw, not with the ceiling)",
        f"{[round(g, 4) if _number(g) else g for g in got]}",
    )
    [small] = delays(ns, http(503, 0.001), 3, started_at=0.0, now=0.0)
    expect(
        _number(small) and small <= 4.0,
        "the backoff (at most 4 s after attempt 3) when Retry-After is tiny",
        small,
    )
    # Retry-After is a floor, never the whole answer: a smaller one leaves the draws as they are.
    got = delays(ns, http(503, 0.5), 5, 5, started_at=0.0, now=0.0, max_attempts=9)
    want = [max(d, 0.5) for d in draws(ns, 4, SEED, 1.0, 60.0, 5)]
    expect(
        got == want,
        _(
            "after attempt 5 with Retry-After 0.5 s, the backoff draws {draws} (backoff(4, rng) "
            "from the same seed, raised to 0.5 s where smaller): a smaller Retry-After does "
            "not replace the backoff"
        ).format(draws=[round(w, 4) for w in want]),
        f"{[round(g, 4) if _number(g) else g for g in got]}",
    )

    def waits(case: tuple[int, float | int]) -> None:
        attempt, after = case
        [got] = delays(ns, http(503, after), attempt, started_at=0.0, now=0.0, deadline=10_000.0)
        ceiling = max(float(after), min(60.0, 2.0 ** (attempt - 1)))
        expect(
            _number(got) and after <= got <= ceiling,
            _(
                "between Retry-After {retry_after} and {ceiling:g} s "
                "(attempt {attempt}, Retry-After {retry_after})"
            ).format(retry_after=repr(after), ceiling=ceiling, attempt=attempt),
            got,
        )

    afters = st.integers(0, 900) | st.floats(0.0, 900.0).map(lambda x: round(x, 3))
    holds_for(st.tuples(st.integers(1, 2), afters), waits, examples=30)


@CHECKS.add(
    2,
    "no retry may be scheduled past started_at + deadline: if now + delay is later, "
    "return None; a retry landing exactly on the deadline is still in time",
)
def respects_deadline(ns: Namespace) -> None:
    [got] = delays(ns, REFUSED, 1, started_at=0.0, now=299.5, deadline=300.0)
    expect(
        got is None or got <= 0.5, "None (or at most 0.5 s) at 299.5 s into a 300 s deadline", got
    )
    [late] = delays(ns, http(429, 120.0), 1, started_at=0.0, now=250.0, deadline=300.0)
    expect(late is None, "None: Retry-After 120 s at 250 s ends after the 300 s deadline", late)
    [late] = delays(ns, http(429, 120), 1, started_at=1000.0, now=1250.0, deadline=300.0)
    expect(late is None, "None: the deadline counts from started_at (1000 + 300 s)", late)
    # Real epoch seconds: the deadline is a duration from started_at, not an instant.
    start = 1_764_900_000.0
    [in_time] = delays(ns, http(429, 120), 1, started_at=start, now=start + 100, deadline=300.0)
    expect(
        in_time == 120,
        _(
            "120 s: Retry-After 120 at 100 s into a 300 s deadline, started_at {start:.0f} (epoch "
            "seconds; the retry is due by started_at + deadline)"
        ).format(start=start),
        in_time,
    )
    [longer] = delays(ns, http(429, 120), 1, started_at=0.0, now=400.0, deadline=600.0)
    expect(
        longer == 120,
        "120 s: Retry-After 120 at 400 s ends within a 600 s deadline (the deadline given)",
        longer,
    )
    [keyed] = delays(
        ns, http(502, 120), 1, started_at=0.0, now=250.0, deadline=300.0, idempotency_key="k:1"
    )
    expect(
        keyed is None,
        "None: a 502 with Retry-After 120 s at 250 s, under an idempotency_key, ends after the "
        "300 s deadline (a key makes a retry safe, not late)",
        keyed,
    )
    # Nor is the deadline shorter under a key: the same 600 s as for a never-sent failure.
    [keyed] = delays(
        ns, http(502, 120), 1, started_at=0.0, now=400.0, deadline=600.0, idempotency_key="k:1"
    )
    expect(
        keyed == 120,
        _(
            "120 s: a 502 with Retry-After 120 at 400 s, under an idempotency_key, ends within "
            "the 600 s deadline (the deadline given, key or not)"
        ),
        keyed,
    )
    # now and started_at are epoch seconds: the same instants in every time zone.
    late, longer = (
        {"started_at": 0.0, "now": 250.0, "deadline": 300.0},
        {"started_at": 0.0, "now": 400.0, "deadline": 600.0},
    )
    for tz in ("America/Sao_Paulo", "Asia/Kolkata"):
        calls = [
            {"error": http(429, 120.0), "attempt": 1, "seed": SEED, "kwargs": kwargs}
            for kwargs in (late, longer)
        ]
        results = ns.harness(HARNESS + "next_delays_in_zone", calls, tz)
        got = [_results(r, "next_delay(attempt=1)")[0] for r in results]
        expect(
            got == [None, 120.0],
            _(
                "None for Retry-After 120 s at 250 s into a 300 s deadline, and 120 s at 400 s "
                "into a 600 s one, with TZ={tz}"
            ).format(tz=tz),
            repr(got),
            _(
                "compare epoch seconds (now + delay > started_at + deadline); a naive "
                "datetime from fromtimestamp() is local time and utcfromtimestamp() is UTC: "
                "mixed, they are hours apart"
            ),
        )
    # Left out, the deadline is the contract's default, 300 s from started_at.
    late, in_time = delays_for(
        ns,
        [
            (http(429, 120), 1, {"started_at": 0.0, "now": 250.0}),
            (http(429, 120), 1, {"started_at": 0.0, "now": 100.0}),
        ],
    )
    expect(
        late is None and in_time == 120,
        _(
            "without a deadline (the default, 300 s): None for Retry-After 120 s at 250 s, "
            "and 120 s for Retry-After 120 s at 100 s"
        ),
        _("{late} at 250 s, {in_time} at 100 s").format(late=repr(late), in_time=repr(in_time)),
        _("keep the signature's default, deadline=300.0: callers that leave it out rely on it"),
    )
    # deadline=0 is no time at all, not "no deadline": a caller that turns retries off with
    # 0 must not get them until max_attempts runs out.
    [none] = delays(ns, REFUSED, 1, started_at=0.0, now=0.0, deadline=0.0)
    expect(
        none is None,
        _("None after attempt 1 with deadline=0 (no time left for a retry)"),
        none,
        _("a deadline of 0 leaves no time: now + delay > started_at + 0 gives up"),
    )
    [exact] = delays(ns, http(429, 50), 1, started_at=0.0, now=250.0, deadline=300.0)
    expect(
        exact == 50,
        "50 s: Retry-After 50 at 250 s lands exactly on the 300 s deadline, still in time",
        exact,
    )
    # A start with a fraction of a second is when the job started, to the fraction: a start
    # rounded (round(started_at), 0.6 to 1) moves the deadline up to half a second later.
    [past] = delays(ns, http(429, 50.8), 1, started_at=0.6, now=250.0, deadline=300.0)
    expect(
        past is None,
        _(
            "None: Retry-After 50.8 s at 250 s ends at 300.8, past started_at 0.6 + the 300 s "
            "deadline (300.6)"
        ),
        past,
        _(
            "compare now + delay with started_at + deadline as they are: started_at rounded "
            "to whole seconds moves the deadline"
        ),
    )
    # Near the deadline each draw decides alone: one that ends past it gives up, one that
    # fits is kept as drawn. Cutting a late draw down to the time left is not giving up.
    # The draws are the student's own backoff(3, Random(SEED)) in a row, so any correct
    # way of drawing full jitter (rng.uniform(ceiling, 0), two draws a call) is judged
    # by its own numbers.
    drawn = draws(ns, 3, SEED, 1.0, 60.0, 40)
    want, got = _near_the_deadline(ns, drawn, 296.0)
    near = [
        (g is None) == (w is None) and (w is None or abs(float(g) - w) < 1e-9)
        for g, w in zip(got, want, strict=True)
    ]
    expect(
        all(near),
        _(
            "for 40 retries after attempt 4 at 296 s into a 300 s deadline, None for each draw "
            "that ends past the deadline and the draw itself for each that fits, e.g. {want}"
        ).format(want=[None if w is None else round(w, 3) for w in want[:6]]),
        repr([None if g is None else round(float(g), 3) for g in got[:6]]),
    )
    # Clocks give fractions of a second: now = 296.5 leaves 3.5 s, not 4 (a now cut to
    # int(now), or rounded, lets a retry start up to a second past the deadline).
    want, got = _near_the_deadline(ns, drawn, 296.5)
    late = [
        round(float(g), 3)
        for g, w in zip(got, want, strict=True)
        if w is None and g is not None and _number(g)
    ]
    expect(
        [g is None for g in got] == [w is None for w in want],
        _(
            "for 40 retries after attempt 4 at now = 296.5 s into a 300 s deadline, None for "
            "each draw longer than the 3.5 s left, e.g. {want}"
        ).format(want=[None if w is None else round(w, 3) for w in want[:6]]),
        repr([None if g is None else round(float(g), 3) for g in got[:6]])
        + (_("; delays past the deadline: {late}").format(late=late[:3]) if late else ""),
        _("compare now + delay with started_at + deadline as they are, fractions included"),
    )


def _near_the_deadline(
    ns: Namespace, drawn: list[float], now: float
) -> tuple[list[float | None], list[Any]]:
    """For 40 retries after attempt 4 at ``now`` into a 300 s deadline: what each of the
    student's own ``drawn`` delays should give (the draw if it ends in time, else None),
    and what ``next_delay`` gave."""
    want = [d if _number(d) and now + d <= 300.0 else None for d in drawn]
    got = delays(ns, REFUSED, 4, count=40, started_at=0.0, now=now, deadline=300.0)
    return want, got


@CHECKS.add(
    2,
    "the delay is backoff(attempt - 1, rng, base, cap): pass next_delay's own rng, "
    "base and cap through, and return the draw as it is (no rounding)",
)
def next_delay_is_the_backoff(ns: Namespace) -> None:
    def same(case: tuple[int, float, float]) -> None:
        attempt, base, cap = case
        kwargs = {"base": base, "cap": cap, "max_attempts": max(9, attempt + 1), "deadline": 1e9}
        got = delays(ns, REFUSED, attempt, 5, started_at=0.0, now=0.0, **kwargs)
        want = draws(ns, attempt - 1, SEED, base, cap, 5)
        expect(
            got == want,
            _(
                "next_delay(ConnectionRefusedError(), {attempt}, rng, base={base:g}, "
                "cap={cap:g}) to return what backoff({n}, rng, {base:g}, {cap:g}) "
                "draws from the same seed: {draws}"
            ).format(
                attempt=attempt,
                base=base,
                cap=cap,
                n=attempt - 1,
                draws=[round(w, 4) for w in want],
            ),
            f"{[round(g, 4) if _number(g) else g for g in got]}",
        )

    # A job retried for a long time under a large max_attempts: next_delay goes through
    # backoff and its guard, so attempt 1100 (2.0 ** 1099 overflows a float) is the cap.
    kwargs = {"max_attempts": 5000, "deadline": 1e12}
    got = delays(ns, REFUSED, 1100, 3, started_at=0.0, now=0.0, **kwargs)
    want = draws(ns, 1099, SEED, 1.0, 60.0, 3)
    expect(
        got == want,
        _(
            "next_delay(ConnectionRefusedError(), 1100, rng, max_attempts=5000) to return "
            "what backoff(1099, rng) draws from the same seed: {draws}"
        ).format(draws=[round(w, 4) for w in want]),
        f"{[round(g, 4) if _number(g) else g for g in got]}",
        _(
            "call backoff(attempt - 1, rng, base, cap) in next_delay: a ceiling computed "
            "again there (base * 2.0 ** (attempt - 1)) overflows for a large attempt"
        ),
    )
    # Every never-sent error without a Retry-After is retried on the backoff: a 429 the
    # server gave no time for is still "never sent" (rule 3), not a reason to give up.
    want = draws(ns, 1, SEED, 1.0, 60.0, 1)
    plain = {
        "HTTP 429 (no Retry-After)": http(429),
        "HTTP 503 (no Retry-After)": http(503),
        "HTTP 408": http(408),
        "RateLimited() (no Retry-After)": {"type": "RateLimited"},
        "TransientError()": {"type": "TransientError"},
    }
    at_start = {"started_at": 0.0, "now": 0.0}
    got = delays_for(ns, [(spec, 2, at_start) for spec in plain.values()])
    wrong = [
        _("{delay} for {error}").format(delay=repr(g), error=name)
        for name, g in zip(plain, got, strict=True)
        if g != want[0]
    ]
    expect(
        not wrong,
        _(
            "after attempt 2 of each never-sent error without a Retry-After ({errors}), "
            "the delay backoff(1, rng) draws from the same seed: {draw}"
        ).format(errors="; ".join(plain), draw=round(want[0], 4)),
        "; ".join(wrong),
        _(
            "a never-sent error is retried on the backoff whatever its status: with no "
            "Retry-After the backoff alone says when (give up only by the contract's rules)"
        ),
    )
    # A tiny base reaches the cap only after many retries: an exponent clamped in
    # next_delay (min(attempt - 1, 10)) keeps the ceiling at 1 s when backoff says 33 s.
    same((16, 0.001, 60.0))
    # A cap of the caller's above any limit of the code's own (five minutes): the ceiling
    # 2 * 2**8 = 512 s under a cap of 900 s is 512 s, not 300.
    same((9, 2.0, 900.0))
    holds_for(
        st.tuples(
            st.integers(1, 8),
            st.sampled_from([0.1, 0.5, 1.0, 3.0]) | st.floats(0.05, 10.0),
            st.sampled_from([60.0, 5.0]) | st.floats(1.0, 900.0),
        ),
        same,
        examples=20,
    )
