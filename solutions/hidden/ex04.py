"""Hidden checks for exercise 4: the backoff grows, next_delay starts from n = 0, and a
lost answer stays maybe-done whatever status it carries."""

from __future__ import annotations

from labkit.grading.exercises.ex04.checks import delays, draws, verdicts
from labkit.grading.checks import Checks, Namespace, expect
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
    got = delays(ns, {"type": "ConnectionRefusedError"}, 1, count=50, started_at=0.0, now=0.0, base=2.0)
    expect(
        all(d is not None and 0 <= d <= 2.0 for d in got),
        "delays within [0, 2] after the first attempt with base 2",
        max(got, key=lambda d: d or 0),
    )


@CHECKS.add(
    1,
    "the ambiguous flag wins: a lost answer carrying a 503 or a 429 is still maybe_done "
    "(the request reached the server before the answer was lost)",
)
def ambiguous_wins_over_the_status(ns: Namespace) -> None:
    specs = [{"type": "ResponseLost", "status": s} for s in (503, 429, 400)]
    got = verdicts(ns, specs)
    expect(
        got == ["maybe_done"] * 3,
        "'maybe_done' for ResponseLost with status 503, 429 and 400",
        got,
    )
