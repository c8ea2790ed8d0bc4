"""Exercise 4's checks of ``backoff``, the delay before a retry: full jitter, the cap,
a huge attempt, any base and cap, no pile at the cap, and the caller's generator."""

from __future__ import annotations

import math

from hypothesis import strategies as st

from labkit.grading.checks import Namespace, expect
from labkit.grading.exercises.ex04.policy import (
    CHECKS,
    HARNESS,
    _number,
    _results,
    draws,
)
from labkit.grading.exercises.helpers import SEED, holds_for
from labkit.lang import _


@CHECKS.add(
    2,
    "full jitter is rng.uniform(0, min(cap, base * 2**n)): anywhere from zero to "
    "the ceiling, so a crowd of clients spreads out instead of retrying in lockstep",
)
def backoff_has_full_jitter(ns: Namespace) -> None:
    # Late retries too (n=7 and n=100, both at the cap of 60): jitter never stops.
    # The first retry too (n=0): clients that failed together must not all come back at base.
    for n, base, ceiling in (
        (0, 1.0, 1.0),
        (3, 1.0, 8.0),
        (2, 3.0, 12.0),
        (7, 1.0, 60.0),
        (100, 1.0, 60.0),
        # A base under a millisecond (a local retry loop): a draw rounded to the
        # millisecond ("nobody sleeps less") is always 0, and all come back at once.
        (0, 0.0004, 0.0004),
        # Past the overflow guard (n >= 1024) too: the branch for a huge n draws over the
        # whole 0..cap like any other (not the cap's upper half, nor a share of it).
        (1024, 1.0, 60.0),
        (2000, 1.0, 60.0),
    ):
        got = draws(ns, n, SEED, base, 60.0, 200)
        outside = [d for d in got if not (_number(d) and 0 <= d <= ceiling)]
        expect(
            not outside,
            _("every delay for n={n} (base {base:g}, cap 60) within [0, {ceiling:g}]").format(
                n=n, base=base, ceiling=ceiling
            ),
            _("{count} outside, e.g. {example}").format(
                count=len(outside), example=repr(outside[0])
            )
            if outside
            else "",
        )
        expect(
            len(set(got)) > 100,
            "200 different delays (jitter)",
            _("{count} distinct value(s), e.g. {example}").format(
                count=len(set(got)), example=repr(got[0])
            ),
        )
        expect(
            min(got) < ceiling / 8 and max(got) > ceiling * 7 / 8,
            _(
                "delays spread over the whole range 0..{ceiling:g} "
                "(full jitter, not half or a sliver)"
            ).format(ceiling=ceiling),
            _("min {lowest:.2f}, max {highest:.2f}").format(lowest=min(got), highest=max(got)),
        )
        # Evenly over the range: about a quarter of the draws in each quarter of it. A
        # triangular draw or the mean of two uniforms crowds the middle and leaves the
        # ends, near zero and near the ceiling, nearly empty.
        ends = [
            sum(1 for d in got if d < ceiling / 4) / len(got),
            sum(1 for d in got if d > ceiling * 3 / 4) / len(got),
        ]
        expect(
            all(0.15 <= share <= 0.35 for share in ends),
            _(
                "about a quarter of the 200 delays for n={n} in each quarter of 0..{ceiling:g} "
                "(uniform, as rng.uniform draws)"
            ).format(n=n, ceiling=ceiling),
            _("{low:.0%} below {quarter:g} and {high:.0%} above {three_quarters:g}").format(
                low=ends[0], quarter=ceiling / 4, high=ends[1], three_quarters=ceiling * 3 / 4
            ),
            _(
                "draw once with rng.uniform(0, ceiling): every delay in the range equally "
                "likely; a triangular or averaged draw sends a crowd back at the same moment"
            ),
        )
    # From zero to the ceiling itself: of 2000 uniform draws, some fall within half a
    # percent of either end (a draw kept off zero, uniform(ceiling / 20, ceiling), or off
    # the ceiling, has none there; a uniform draw misses one end 1 time in 20000).
    got = draws(ns, 3, SEED, 1.0, 60.0, 2000)
    shares = [d / 8.0 for d in got if _number(d)]
    expect(
        len(shares) == len(got) and min(shares) < 0.005 and max(shares) > 0.995,
        _(
            "of 2000 delays for n=3 (ceiling 8), some within 0.5% of zero and some within "
            "0.5% of the ceiling (full jitter draws from 0 to the ceiling itself)"
        ),
        _("the smallest {lowest:.1%} of its ceiling, the largest {highest:.1%}").format(
            lowest=min(shares), highest=max(shares)
        ),
        _(
            "draw rng.uniform(0, ceiling): no floor under the delay (a share of the ceiling, "
            "base) and nothing taken off the top"
        ),
    )
    # And evenly over it, each quarter holding 21-29% of the 2000 (a uniform draw strays
    # past that less than once in 10**4): a bell-shaped draw cut to the range, as
    # min(ceiling, max(0, rng.gauss(ceiling / 2, ceiling / 4))), reaches both ends but
    # crowds the middle.
    quarters = [sum(1 for s in shares if q / 4 <= s < (q + 1) / 4) / len(got) for q in range(4)]
    quarters[3] += sum(1 for s in shares if s >= 1) / len(got)
    expect(
        all(0.21 <= share <= 0.29 for share in quarters),
        _(
            "of 2000 delays for n=3 (ceiling 8), 21% to 29% in each quarter of 0..8 "
            "(uniform over the whole range)"
        ),
        _("{shares} in the quarters").format(
            shares=", ".join(f"{share:.0%}" for share in quarters)
        ),
        _(
            "draw rng.uniform(0, ceiling): every delay in the range equally likely; a "
            "bell-shaped draw (rng.gauss) cut to the range still sends most clients back "
            "together in the middle"
        ),
    )


@CHECKS.add(
    2,
    "cap the ceiling before drawing: min(cap, base * 2**n); without a cap the 30th "
    "retry waits 34 years",
)
def backoff_is_capped(ns: Namespace) -> None:
    for n, cap in ((10, 60.0), (30, 60.0), (6, 5.0)):
        got = draws(ns, n, SEED, 1.0, cap, 20)
        expect(
            all(_number(d) and 0 <= d <= cap for d in got),
            _("delays within [0, {cap:g}] for n={n} (cap {cap:g})").format(cap=cap, n=n),
            f"{max(got)!r}",
        )
    # Called without base and cap, as the contract's signature allows: its defaults hold,
    # base=1.0 and cap=60.0 (another default cap makes every caller that trusts it wait
    # another time).
    for n, ceiling in ((0, 1.0), (3, 8.0), (10, 60.0)):
        got = draws(ns, n, SEED, None, None, 20)
        expect(
            all(_number(d) and 0 <= d <= ceiling for d in got) and max(got) > ceiling / 2,
            _(
                "delays within [0, {ceiling:g}], some above {half:g}, for backoff({n}, rng) "
                "called without base and cap (the defaults base=1.0 and cap=60.0)"
            ).format(ceiling=ceiling, half=ceiling / 2, n=n),
            repr(got[:6]),
            _(
                "keep the signature's defaults, backoff(n, rng, base=1.0, cap=60.0): callers "
                "that leave base and cap out rely on them"
            ),
        )


@CHECKS.add(
    1,
    "base * 2**n overflows a float for a large n (OverflowError at n=1024 and up): "
    "2.0**n is a float up to n = 1023, so look at n first, ceiling = cap if n >= 1024 "
    "else min(cap, base * 2.0**n); a cut at a smaller n (64) gives a tiny base the cap "
    "long before base * 2**n reaches it",
)
def backoff_survives_a_huge_n(ns: Namespace) -> None:
    # 1024 is the first n whose 2**n overflows a float: a guard "n > 1024" misses it.
    for n in (2000, 10_000, 1023, 1024, 1025):
        got = draws(ns, n, SEED, 1.0, 60.0, 5)
        expect(
            all(_number(d) and 0 <= d <= 60.0 for d in got),
            _("delays within [0, 60] for n={n}").format(n=n),
            f"{got!r}",
        )
    # Past the guard the ceiling is the cap this call is given, drawn over: not a cap of
    # the code's own (60), nor 0 or base handed back when 2.0**n overflows.
    for n, cap in ((1024, 5.0), (2000, 900.0), (10_000, 0.5)):
        got = draws(ns, n, SEED, 1.0, cap, 20)
        expect(
            all(_number(d) and 0 <= d <= cap for d in got) and max(got) > cap / 2,
            _(
                "delays within [0, {cap:g}], some above {half:g}, for n={n} with cap={cap:g}: "
                "past the overflow guard the ceiling is the cap given"
            ).format(cap=cap, half=cap / 2, n=n),
            repr([round(d, 6) if _number(d) else d for d in got[:6]]),
            _(
                "where 2.0**n overflows, draw rng.uniform(0, cap) with the cap of the call: "
                "not a number fixed in the code, not 0 or base"
            ),
        )
    # A tiny base: base * 2**n is still under the cap well past n = 64, so the ceiling is
    # base * 2**n there, neither the cap (a guard "n >= 64") nor base * 2**64 (n clamped).
    for n, base in ((64, 2.0**-70), (100, 2.0**-95), (1000, 2.0**-1000), (1023, 2.0**-1020)):
        ceiling = min(60.0, base * 2.0**n)
        got = draws(ns, n, SEED, base, 60.0, 20)
        expect(
            all(_number(d) and 0 <= d <= ceiling * (1 + 1e-9) for d in got)
            and max(got) > ceiling / 2,
            _(
                "delays within [0, {ceiling:g}], some above {half:g}, for n={n}, "
                "base=2**{exponent} (cap 60): base * 2**n is still the ceiling"
            ).format(ceiling=ceiling, half=ceiling / 2, n=n, exponent=round(math.log2(base))),
            repr([round(d, 6) if _number(d) else d for d in got[:6]]),
            _(
                "cut to the cap only where 2.0**n overflows (n >= 1024): below that, "
                "min(cap, base * 2.0**n) is right for any base, however small"
            ),
        )


@CHECKS.add(
    2,
    "use the base and cap you are given: the ceiling is min(cap, base * 2**n) for "
    "any base (0.1 s, 5 s) and any cap, never a number fixed in the code",
)
def backoff_bounds_hold_for_any_base_and_cap(ns: Namespace) -> None:
    def within(case: tuple[int, float, float, int]) -> None:
        n, base, cap, seed = case
        ceiling = min(cap, base * 2**n)
        got = draws(ns, n, seed, base, cap, 20)
        bad = [d for d in got if not (_number(d) and 0 <= d <= ceiling * (1 + 1e-9))]
        expect(
            not bad,
            _("delays within [0, {ceiling:g}] for n={n}, base={base:g}, cap={cap:g}").format(
                ceiling=ceiling, n=n, base=base, cap=cap
            ),
            f"{bad[0]!r}" if bad else "",
        )
        expect(
            max(got) > ceiling / 2,
            _(
                "delays reaching above half the ceiling {ceiling:g} "
                "(n={n}, base={base:g}, cap={cap:g})"
            ).format(ceiling=ceiling, n=n, base=base, cap=cap),
            _("max {highest:.4g}").format(highest=max(got)),
        )

    cases = st.tuples(
        st.integers(0, 40),
        st.sampled_from([0.1, 0.25, 0.5, 2.0, 5.0]) | st.floats(0.05, 10.0),
        st.floats(0.5, 900.0),
        st.integers(0, 2**16),
    )
    # base * 2**n just under the cap for every n: a shortcut "n > 10 means the cap" shows.
    for n in range(41):
        within((n, 60.0 / 2 ** (n + 1), 60.0, SEED + n))
    # A cap below the base: the cap still wins (a ceiling kept at least base, max(base,
    # ...), waits past the cap the caller set).
    for n, base, cap in ((0, 5.0, 2.0), (3, 10.0, 1.5)):
        within((n, base, cap, SEED + 100 + n))
    holds_for(cases, within, examples=40)


@CHECKS.add(
    1,
    "cap the ceiling, not the draw: min(cap, rng.uniform(0, base * 2**n)) puts most "
    "delays exactly at the cap, so late retries come back in lockstep; draw from "
    "rng.uniform(0, min(cap, base * 2**n))",
)
def backoff_does_not_pile_at_the_cap(ns: Namespace) -> None:
    for n, cap in ((10, 60.0), (8, 5.0)):
        got = draws(ns, n, SEED, 1.0, cap, 200)
        at_cap = [d for d in got if _number(d) and d >= cap * 0.995]
        expect(
            len(at_cap) <= 10,
            _(
                "delays for n={n} (cap {cap:g}) spread evenly over [0, {cap:g}]: "
                "about 1 in 200 within 0.5% of the cap"
            ).format(n=n, cap=cap),
            _("{count} of 200 at the cap, e.g. {example}").format(
                count=len(at_cap), example=repr(at_cap[0])
            )
            if at_cap
            else "",
        )


@CHECKS.add(
    1,
    "draw only from the rng you are given (rng.uniform), never the random module: "
    "tests and notebooks pass a seeded rng to replay a run",
)
def backoff_uses_the_given_rng(ns: Namespace) -> None:
    first = [draws(ns, n, SEED, 1.0, 60.0, 1)[0] for n in range(6)]
    again = [draws(ns, n, SEED, 1.0, 60.0, 1)[0] for n in range(6)]
    expect(
        first == again,
        "the same delays from two rngs with the same seed",
        _("{first} then {again}").format(first=first[:3], again=again[:3]),
    )
    # One process, two runs: each call draws from the rng it is given, not one kept from
    # an earlier call (a generator remembered at the first call replays nothing later).
    second = SEED + 1
    results = ns.harness(
        HARNESS + "backoff_draws", [[2, SEED, 1.0, 60.0, 3], [2, second, 1.0, 60.0, 3]]
    )
    [_first_run, later] = _results(results, "backoff(2, rng, base=1, cap=60)")
    alone = draws(ns, 2, second, 1.0, 60.0, 3)
    expect(
        later == alone,
        _(
            "after 3 draws from Random({seed}), the 3 draws from Random({second}) in the same "
            "process equal those Random({second}) gives alone: {alone}"
        ).format(seed=SEED, second=second, alone=[round(a, 4) for a in alone]),
        repr([round(g, 4) if _number(g) else g for g in later]),
        _(
            "draw from the rng of each call: a generator kept from an earlier call (a "
            "module-level rng, a default set once) ignores the one the caller passes"
        ),
    )
    # Replaying is not enough: reseeding the random module from rng (random.seed(...)) and
    # drawing from it replays too, and resets the generator every other caller shares.
    [untouched] = _results([ns.harness(HARNESS + "leaves_random_alone", 6)], "backoff")
    expect(
        untouched is True,
        "the random module's own generator left as it was after backoff(n, rng) for n = 0 to 5",
        "backoff changed the state of the random module (random.seed or a draw from it)",
        "draw from rng alone (rng.uniform): random.seed or random.uniform in backoff resets "
        "or moves the generator every other part of the program shares",
    )
