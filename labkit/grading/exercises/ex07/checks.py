"""Exercise 7 (extra): a circuit breaker, closed / open / half_open, on an injected clock.

The student writes the ``Breaker`` class. Every check drives it through the harness
(``labkit.grading.exercises.ex07.harness``) with a script of steps on a ``FakeClock``, so a
30-second cooldown passes in no time and the same steps give the same states. Two
breakers side by side must not share anything; the outage check counts, from a file
it reads itself, the calls the breaker let through to a dependency that was down.
"""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from labkit.grading.checks import Checks, Namespace, expect
from labkit.grading.exercises.helpers import because_of, holds_for, raised_text
from labkit.lang import _

CHECKS = Checks("ex07", "circuit breaker", needs=("Breaker",))

HARNESS = "labkit.grading.exercises.ex07.harness:"


def drive(ns: Namespace, steps: list[list[Any]], **kwargs: Any) -> list[Any]:
    """What each step returned; a student exception fails the check, named."""
    out: list[Any] = ns.harness(HARNESS + "drive", steps, **kwargs)
    last = out[-1] if out else None
    if isinstance(last, dict) and "raised" in last:
        step = steps[len(out) - 1]
        expect(
            False,
            _("step {number} ({step}) to run").format(number=len(out), step=step[0]),
            raised_text(last),
        )
    return out


def to_open(ns: Namespace, **kwargs: Any) -> list[list[Any]]:
    """The failures in a row that open breaker 0, however many it takes (up to 6).

    A breaker that opens one failure late is the business of
    ``opens_after_consecutive_failures``; the checks of what comes after opening still
    judge what comes after. One that never opens is sent to that check.
    """
    probe = drive(ns, [["fail", 0], ["state", 0]] * 6, **kwargs)
    states = probe[1::2]
    expect(
        "open" in states,
        _("state 'open' after a few failures in a row")
        + because_of("opens_after_consecutive_failures"),
        _("{state} after 6 failures in a row").format(state=repr(states[-1])),
    )
    return [["fail", 0]] * (states.index("open") + 1)


def opened(ns: Namespace, steps: list[list[Any]], **kwargs: Any) -> list[Any]:
    """Open breaker 0 (see ``to_open``), then run ``steps``; what the steps returned."""
    failures = to_open(ns, **kwargs)
    return drive(ns, [*failures, *steps], **kwargs)[len(failures) :]


#: Calls let out one after another while closed, none back yet: a closed breaker has no
#: cap on the calls in flight (that would be a bulkhead, which the docstring does not ask).
IN_FLIGHT = 1000


@CHECKS.add(1, "a new breaker is 'closed' and lets every call through")
def starts_closed(ns: Namespace) -> None:
    out = drive(ns, [["state", 0]] + [["allow", 0]] * 5)
    expect(out[0] == "closed", "state 'closed'", out[0])
    expect(all(x is True for x in out[1:]), "allow() True while closed", out[1:])
    many = drive(ns, [["allow", 0]] * IN_FLIGHT)
    refused = [n for n, x in enumerate(many, 1) if x is not True]
    expect(
        not refused,
        _(
            "allow() True for each of {count} calls while closed, none of them back yet (no "
            "result recorded): closed lets every call through"
        ).format(count=IN_FLIGHT),
        _("call {n} got {x!r}").format(n=refused[0], x=many[refused[0] - 1]) if refused else "",
        _("closed: return True, with no limit on the calls out at once"),
    )


@CHECKS.add(
    2,
    "count failures in a row: a success resets the count, and the breaker opens "
    "when the count reaches threshold (>=, the threshold-th failure opens it)",
)
def opens_after_consecutive_failures(ns: Namespace) -> None:
    steps = [["fail", 0], ["fail", 0], ["ok", 0], ["fail", 0], ["fail", 0], ["state", 0]]
    out = drive(ns, [*steps, ["fail", 0], ["state", 0]])
    expect(
        out[5] == "closed",
        "still closed: fail, fail, ok, fail, fail is never 3 failures in a row",
        out[5],
    )
    expect(out[7] == "open", "open at the 3rd failure in a row", out[7])

    def opens_at(case: tuple[int, int, float]) -> None:
        threshold, noise, gap = case
        # Failures in a row count however far apart they come: a breaker has no window.
        fail = [["advance", gap], ["allow", 0], ["fail", 0]]  # a call let through, failed
        run = fail * noise + [["ok", 0]] + fail * (threshold - 1)
        got = drive(ns, [*run, ["state", 0], *fail, ["state", 0]], threshold=threshold)
        before, after = got[len(run)], got[-1]
        expect(
            before == "closed" and after == "open",
            _(
                "with threshold={threshold}: closed after {streak} failures in a row, "
                "open at failure {threshold} (after {earlier} failures and a success; "
                "one failure every {gap:g} s)"
            ).format(threshold=threshold, streak=threshold - 1, earlier=noise, gap=gap),
            _("{before} then {after}").format(before=before, after=after),
        )

    cases = st.integers(1, 8).flatmap(
        lambda t: st.tuples(
            st.just(t), st.integers(0, t - 1), st.sampled_from([0.0, 1.0, 45.0, 3600.0])
        )
    )
    holds_for(cases, opens_at, examples=25)
    # Failures weeks apart are still in a row: a window of an hour, a day or a week forgets
    # them (one every 30 days, over a year in all).
    opens_at((3, 0, 30 * 86_400.0))
    opens_at((8, 2, 30 * 86_400.0))
    # A slow call's success recorded while open may close the breaker (or leave it open):
    # when it closes it, it resets the count like any success, and the next failures count
    # from zero.
    late = drive(
        ns, [*[["fail", 0]] * 3, ["ok", 0], ["state", 0], *[["fail", 0]] * 2, ["state", 0]]
    )
    if late[4] == "closed":
        expect(
            late[-1] == "closed",
            _(
                "3 failures (open), a success recorded while open that closed the breaker, then "
                "2 failures: still closed (the success reset the count: 2 failures in a row)"
            ),
            repr(late[-1]),
            _(
                "record_success() resets the count of failures in a row whatever the state it "
                "finds: a success that closes the breaker and keeps the old count opens it "
                "again at the next failure"
            ),
        )


@CHECKS.add(
    2,
    "while open, allow() is False until cooldown_s has passed on the clock you "
    "were given (clock.now()), never the wall clock",
)
def open_refuses_until_the_cooldown(ns: Namespace) -> None:
    out = opened(ns, [["allow", 0], ["advance", 29.9], ["allow", 0]])
    expect(out[0] is False, "allow() False right after opening", out[0])
    expect(out[2] is False, "allow() False 29.9 s into a 30 s cooldown", out[2])


@CHECKS.add(
    2,
    "after the cooldown (now >= opened_at + cooldown_s, exactly 30 s included), go "
    "half_open and let ONE trial call through; the next callers wait for its result "
    "(otherwise a crowd hits a service that is down)",
)
def half_open_allows_one_trial(ns: Namespace) -> None:
    out = opened(
        ns,
        [["advance", 30.0], ["allow", 0], ["state", 0]]
        + [["allow", 0]] * 3
        + [["advance", 90.0], ["allow", 0], ["advance", 86400.0], ["allow", 0]],
    )
    expect(out[1] is True, "allow() True once the 30 s cooldown passed (exactly 30 s)", out[1])
    expect(out[2] == "half_open", "state 'half_open' during the trial", out[2])
    expect(out[3:6] == [False] * 3, "allow() False for the callers behind the trial", out[3:6])
    # No timeout on the trial: until its result is recorded, nobody else goes (a timeout of
    # a few cooldowns, or of minutes, shows at 90 s or a day later).
    expect(
        out[7] is False,
        "allow() False 90 s into the trial still: its result is not recorded yet",
        out[7],
    )
    expect(
        out[9] is False,
        _("allow() False a day into the trial still: its result is not recorded yet"),
        out[9],
        _("no timeout on the trial: only its record_success() or record_failure() ends it"),
    )


@CHECKS.add(1, "a successful trial closes the breaker and resets the failure count")
def trial_success_closes(ns: Namespace) -> None:
    out = opened(
        ns,
        [["advance", 30.0], ["allow", 0], ["ok", 0], ["state", 0], ["fail", 0], ["fail", 0]]
        + [["state", 0]],
    )
    expect(out[3] == "closed", "state 'closed' after a successful trial", out[3])
    expect(out[6] == "closed", "closed after 2 new failures (count was reset)", out[6])


@CHECKS.add(
    2,
    "a failed trial opens the breaker again with a fresh cooldown from now "
    "(opened_at = clock.now()), not the old one",
)
def trial_failure_reopens_for_a_full_cooldown(ns: Namespace) -> None:
    out = opened(
        ns,
        [["advance", 30.0], ["allow", 0], ["fail", 0], ["state", 0], ["advance", 10.0]]
        + [["allow", 0], ["advance", 20.0], ["allow", 0]],
    )
    expect(out[3] == "open", "state 'open' after a failed trial", out[3])
    expect(out[5] is False, "allow() False 10 s after the failed trial", out[5])
    expect(out[7] is True, "allow() True 30 s after the failed trial", out[7])
    failures = to_open(ns)

    def fresh_from_the_failure(case: tuple[float, float]) -> None:
        late, took = case
        # The trial goes out `late` s after the cooldown ended and fails `took` s later,
        # another caller refused halfway: the new cooldown counts from that failure, not
        # from the trial's start, the refused call or the end of the old cooldown.
        trial = [["advance", 30.0 + late], ["allow", 0], ["advance", took / 2], ["allow", 0]]
        trial += [["advance", took / 2], ["fail", 0]]
        ends = [["advance", 29.75], ["allow", 0], ["advance", 0.25], ["allow", 0]]
        got = drive(ns, [*failures, *trial, *ends])[len(failures) + len(trial) :]
        before, at = got[1], got[3]
        expect(
            before is False and at is True,
            _(
                "a trial let through {late:g} s after the cooldown ended that fails {took:g} s "
                "later (another caller refused halfway through it): allow() False 29.75 s "
                "after its failure, True 30 s after it"
            ).format(late=late, took=took),
            _("{before}, then {at}").format(before=repr(before), at=repr(at)),
        )

    fresh_from_the_failure((5.0, 10.0))
    holds_for(st.tuples(_quarters(0, 400), _quarters(1, 400)), fresh_from_the_failure, examples=10)
    # A long outage: every failed trial in a row opens it for cooldown_s again, the last as
    # the first (no cooldown that grows after a few failed trials).
    trial = [["advance", 30.0], ["allow", 0], ["fail", 0]]
    ends = [["advance", 29.75], ["allow", 0], ["advance", 0.25], ["allow", 0]]
    got = drive(ns, [*failures, *trial * FAILED_TRIALS, *ends])
    before, at = got[-3], got[-1]
    expect(
        before is False and at is True,
        _(
            "after {count} failed trials in a row, one every 30 s: allow() False 29.75 s after "
            "the last failure, True 30 s after it (each failed trial opens it for cooldown_s, "
            "no more)"
        ).format(count=FAILED_TRIALS),
        _("{before}, then {at}").format(before=repr(before), at=repr(at)),
        _(
            "open again for cooldown_s after every failed trial: the caller chose the cooldown; "
            "a cooldown that grows is a backoff the docstring does not ask for"
        ),
    )


@CHECKS.add(
    2,
    "keep every count and time on self (the instance): a class attribute or a "
    "module-level variable is shared by every breaker, so one failing dependency "
    "opens the breaker of another",
)
def two_breakers_side_by_side(ns: Namespace) -> None:
    out = opened(
        ns,
        [["state", 0], ["state", 1], ["allow", 1], ["fail", 1], ["state", 1]]
        + [["advance", 31.0], ["allow", 0], ["allow", 1], ["state", 0], ["state", 1]],
        breakers=2,
    )
    expect(
        out[1] == "closed" and out[2] is True,
        "breaker B closed and letting calls through while breaker A opened",
        _("B is {state}, allow() {allowed}").format(state=repr(out[1]), allowed=repr(out[2])),
    )
    expect(out[4] == "closed", "breaker B closed after its own first failure", out[4])
    expect(
        out[6] is True and out[7] is True and out[8] == "half_open" and out[9] == "closed",
        "A half_open with its trial out, B still closed and letting calls through",
        f"A allow() {out[6]!r}, state {out[8]!r}; B allow() {out[7]!r}, state {out[9]!r}",
    )


@CHECKS.add(
    2,
    "the point of a breaker is to spare a dependency that is down: after threshold "
    "failures stop calling, and then only one trial per cooldown",
    timeout=20.0,
)
def outage_spares_the_dependency(ns: Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="labkit-ex07-", dir=ns.workdir) as tmp:
        ns.harness(HARNESS + "outage", tmp, 5, 150, 100.0)
        with sqlite3.connect(Path(tmp) / "calls.db") as db:
            down = db.execute("SELECT count(*) FROM calls WHERE ok = 0").fetchone()[0]
            after = db.execute("SELECT count(*) FROM calls WHERE t >= 110").fetchone()[0]
        db.close()
    # 3 failures open it; one trial every 30 s of a 100 s outage: 3 + 4 at the most.
    expect(
        down <= 7,
        "at most 7 calls to the dependency during a 100 s outage (5 callers, every second)",
        _("{count} calls reached it").format(count=down),
    )
    expect(
        after > 0,
        "calls going through again once the dependency is back",
        _("none: every call from 110 s to 150 s was refused"),
        "a refused call is not a failure and does not restart the cooldown: with callers "
        "asking every second, a breaker that counts from its last refusal never lets the "
        "trial out",
    )


#: Failed trials in a row in ``trial_failure_reopens_for_a_full_cooldown``'s long outage:
#: a backoff that starts late (after the 8th or the 20th failed trial) shows too.
FAILED_TRIALS = 40


def _quarters(low: int, high: int) -> st.SearchStrategy[float]:
    """Seconds in quarter steps: exact in binary, so opened_at + cooldown_s is exact too."""
    return st.integers(low, high).map(lambda q: q / 4)


def _at_the_end_of_the_cooldown(
    ns: Namespace, failures: list[list[Any]], cooldown: float, **more: Any
) -> tuple[Any, Any]:
    """allow() a quarter second before ``cooldown`` after ``failures`` opened it, and at it
    (``more``: the harness's other settings, a clock's ``start``)."""
    kwargs = {"cooldown_s": cooldown, **more}
    before = drive(ns, [*failures, ["advance", cooldown - 0.25], ["allow", 0]], **kwargs)[-1]
    at = drive(ns, [*failures, ["advance", cooldown], ["allow", 0]], **kwargs)[-1]
    return before, at


@CHECKS.add(
    2,
    "cooldown_s is a parameter, and a float: compare clock.now() with opened_at + "
    "cooldown_s as they are (no 30 written in the code, no int() or round() of the "
    "elapsed time)",
)
def cooldown_is_the_one_given(ns: Namespace) -> None:
    failures = to_open(ns)

    def ends_on_time(cooldown: float) -> None:
        before, at = _at_the_end_of_the_cooldown(ns, failures, cooldown)
        expect(
            before is False and at is True,
            _(
                "with cooldown_s={cooldown:g}: allow() False {just_before:g} s after opening, "
                "True at {cooldown:g} s"
            ).format(cooldown=cooldown, just_before=cooldown - 0.25),
            _("{before}, then {at}").format(before=repr(before), at=repr(at)),
        )

    for cooldown in (5.5, 0.75, 90.0):
        ends_on_time(cooldown)
    holds_for(_quarters(1, 2400), ends_on_time, examples=15)


@CHECKS.add(
    2,
    "the cooldown starts when the breaker opens (the threshold-th failure in a row: "
    "opened_at = clock.now() there), not at the first failure of the streak",
)
def cooldown_counts_from_the_opening(ns: Namespace) -> None:
    count = len(to_open(ns))

    def from_opening(case: tuple[float, float]) -> None:
        gap, cooldown = case
        failures = [["fail", 0]] + [["advance", gap], ["fail", 0]] * (count - 1)
        before, at = _at_the_end_of_the_cooldown(ns, failures, cooldown)
        expect(
            before is False and at is True,
            _(
                "{count} failures {gap:g} s apart, cooldown_s={cooldown:g}: allow() False "
                "{just_before:g} s after the last one (it opened the breaker), True at "
                "{cooldown:g} s"
            ).format(count=count, gap=gap, cooldown=cooldown, just_before=cooldown - 0.25),
            _("{before}, then {at}").format(before=repr(before), at=repr(at)),
        )

    from_opening((10.0, 30.0))
    holds_for(st.tuples(_quarters(1, 400), _quarters(1, 2400)), from_opening, examples=15)
    # A clock that starts at 0.0, failures 5 s apart: the last one at 10 s or more, a number
    # with one digit more than the others ("10.0" sorts before "5.0" as text).
    failures = [["fail", 0]] + [["advance", 5.0], ["fail", 0]] * (count - 1)
    before, at = _at_the_end_of_the_cooldown(ns, failures, 30.0, start=0.0)
    expect(
        before is False and at is True,
        _(
            "a clock that starts at 0.0, {count} failures 5 s apart (the last at {last:g} s), "
            "cooldown_s=30: allow() False 29.75 s after the last one (it opened the breaker), "
            "True at 30 s"
        ).format(count=count, last=5.0 * (count - 1)),
        _("{before}, then {at}").format(before=repr(before), at=repr(at)),
        _(
            "opened_at is the clock.now() float of the failure that opened it: times kept "
            "or compared as text sort '10.0' before '5.0', and the latest is not the last"
        ),
    )
    # Calls let through that each fail a while later (a timeout): the breaker opens at the
    # last failure, not when the call that failed went out.
    took = 20.0
    failures = [["allow", 0], ["advance", took], ["fail", 0]] * count
    before, at = _at_the_end_of_the_cooldown(ns, failures, 30.0)
    expect(
        before is False and at is True,
        _(
            "{count} calls let through (allow() True) that each fail {took:g} s later, "
            "cooldown_s=30: allow() False 29.75 s after the last failure (it opened the "
            "breaker), True at 30 s"
        ).format(count=count, took=took),
        _("{before}, then {at}").format(before=repr(before), at=repr(at)),
        _(
            "set opened_at = clock.now() in record_failure, as the breaker opens: not the "
            "time allow() let the failing call out"
        ),
    )
