"""Hidden checks for exercise 7: other thresholds, and no wall clock."""

from __future__ import annotations

from typing import Any

from labkit.grading.checks import Checks, Namespace, expect
from labkit.grading.exercises.ex07.checks import HARNESS, drive
from labkit.grading.exercises.helpers import because_of, raised_text
from labkit.lang import _

CHECKS = Checks("ex07", hidden=True)


@CHECKS.add(1, "threshold is a parameter: threshold=1 opens at the first failure")
def threshold_of_one(ns: Namespace) -> None:
    [_first, state] = drive(ns, [["fail", 0], ["state", 0]], threshold=1, cooldown_s=5.0)
    expect(state == "open", "open after one failure with threshold=1", state)


@CHECKS.add(1, "read time only from the clock you were given")
def ignores_the_wall_clock(ns: Namespace) -> None:
    out = drive(
        ns,
        [["fail", 0], ["state", 0], ["wall", 3600.0], ["allow", 0]],
        threshold=1,
        cooldown_s=5.0,
    )
    expect(
        out[1] == "open",
        _("open after one failure with threshold=1") + because_of("threshold_of_one"),
        out[1],
    )
    expect(out[3] is False, "allow() False: the fake clock did not move", out[3])


#: Two breakers made with settings of their own, (threshold, cooldown_s): neither the other's
#: nor the public checks' 3 and 30 s, so one breaker's settings kept for all (on the class,
#: in a module variable, first or last made) or a cooldown written in the code shows.
OWN_SETTINGS = ((1, 10.0), (4, 75.0))


@CHECKS.add(
    1,
    "each breaker keeps its own settings, opening time and trial on self: breaker B opening "
    "later does not move breaker A's cooldown, A's trial does not hold back B's, and each "
    "opens at its own threshold and waits its own cooldown_s, after a failed trial too",
)
def breakers_keep_their_own_times(ns: Namespace) -> None:
    out = drive(
        ns,
        [["fail", 0], ["advance", 20.0], ["fail", 1], ["advance", 10.0]]
        + [["allow", 0], ["allow", 1], ["advance", 20.0], ["allow", 1], ["allow", 0]],
        threshold=1,
        cooldown_s=30.0,
        breakers=2,
    )
    expect(
        out[4] is True and out[5] is False,
        _("A (opened at 0 s) lets its trial through at 30 s, and B (opened at 20 s) still refuses"),
        _("A allow() {a}, B allow() {b}").format(a=repr(out[4]), b=repr(out[5])),
        "keep opened_at on self: a class attribute is one time for every breaker",
    )
    expect(
        out[7] is True and out[8] is False,
        _("at 50 s B lets its own trial through, while A's trial is still out"),
        _("B allow() {b}, A allow() {a}").format(b=repr(out[7]), a=repr(out[8])),
        "keep the 'a trial is out' flag on self: each breaker has its own trial",
    )
    # Both trials out; B's succeeds and closes B: A's trial is still out, on its own flag.
    out = drive(
        ns,
        [["fail", 0], ["fail", 1], ["advance", 30.0], ["allow", 0], ["allow", 1], ["ok", 1]]
        + [["allow", 0]],
        threshold=1,
        cooldown_s=30.0,
        breakers=2,
    )
    expect(
        out[3:5] == [True, True] and out[6] is False,
        _(
            "A and B opened together: each lets its trial through at 30 s; once B's trial "
            "succeeded, A still refuses (its own trial is out)"
        ),
        _("A allow() {a}, B allow() {b}, then A allow() {again}").format(
            a=repr(out[3]), b=repr(out[4]), again=repr(out[6])
        ),
        "keep the 'a trial is out' flag on self: each breaker has its own trial",
    )
    breakers_keep_their_own_settings(ns)


def breakers_keep_their_own_settings(ns: Namespace) -> None:
    """A (threshold=1, cooldown_s=10) and B (threshold=4, cooldown_s=75) side by side on one
    clock, both opened at 0 s; A's trial fails at 10 s and B's at 75 s."""
    [(a_threshold, a_cooldown), (b_threshold, b_cooldown)] = OWN_SETTINGS
    steps: list[list[Any]] = []
    at: dict[str, int] = {}

    def then(*more: list[Any], name: str = "") -> None:
        steps.extend(more)
        if name:
            at[name] = len(steps) - 1

    then(["fail", 0], ["state", 0], name="a_open")
    then(*[["fail", 1]] * (b_threshold - 1), ["state", 1], name="b_before")
    then(["fail", 1], ["state", 1], name="b_open")
    then(["advance", a_cooldown - 0.25], ["allow", 0], name="a_early")
    then(["advance", 0.25], ["allow", 0], name="a_trial")
    then(["allow", 1], name="b_at_a")
    then(["fail", 0], ["advance", a_cooldown - 0.25], ["allow", 0], name="a_again_early")
    then(["advance", 0.25], ["allow", 0], name="a_again")
    then(["advance", b_cooldown - 2 * a_cooldown - 0.25], ["allow", 1], name="b_early")
    then(["advance", 0.25], ["allow", 1], name="b_trial")
    then(["fail", 1], ["advance", b_cooldown - 0.25], ["allow", 1], name="b_again_early")
    then(["advance", 0.25], ["allow", 1], name="b_again")
    got = drive(ns, steps, settings=[list(pair) for pair in OWN_SETTINGS], breakers=2)
    out = {name: got[i] for name, i in at.items()}
    made = _(
        "two breakers made with settings of their own, A (threshold={a_threshold}, "
        "cooldown_s={a_cooldown:g}) and B (threshold={b_threshold}, cooldown_s={b_cooldown:g})"
    ).format(
        a_threshold=a_threshold,
        a_cooldown=a_cooldown,
        b_threshold=b_threshold,
        b_cooldown=b_cooldown,
    )
    own = _(
        "keep threshold and cooldown_s on self (self.threshold = threshold): a class "
        "attribute or a module variable holds one breaker's settings for every breaker"
    )
    a_open, b_before, b_open = out["a_open"], out["b_before"], out["b_open"]
    expect(
        [a_open, b_before, b_open] == ["open", "closed", "open"],
        _(
            "{made}: A open after {a} failure; B closed after {streak} failures, open at "
            "failure {b}"
        ).format(made=made, a=a_threshold, streak=b_threshold - 1, b=b_threshold),
        _("A {a}; B {before} then {after}").format(
            a=repr(a_open), before=repr(b_before), after=repr(b_open)
        ),
        own,
    )
    first = [out[k] for k in ("a_early", "a_trial", "b_at_a", "b_early", "b_trial")]
    expect(
        first == [False, True, False, False, True],
        _(
            "{made}, both opened at 0 s: A refuses at {a_early:g} s and lets its trial through at "
            "{a:g} s; B refuses at {a:g} s and at {b_early:g} s, and lets its trial through "
            "at {b:g} s"
        ).format(
            made=made,
            a_early=a_cooldown - 0.25,
            a=a_cooldown,
            b_early=b_cooldown - 0.25,
            b=b_cooldown,
        ),
        _("A {a_early}, {a}; B {b_at_a}, {b_early}, {b}").format(
            a_early=repr(first[0]),
            a=repr(first[1]),
            b_at_a=repr(first[2]),
            b_early=repr(first[3]),
            b=repr(first[4]),
        ),
        own,
    )
    again = [out[k] for k in ("a_again_early", "a_again", "b_again_early", "b_again")]
    expect(
        again == [False, True, False, True],
        _(
            "{made}: A's trial fails at {a:g} s, so A refuses {a_early:g} s later and lets a trial "
            "through {a:g} s later; B's fails at {b:g} s, so B refuses {b_early:g} s later and "
            "lets a trial through {b:g} s later"
        ).format(
            made=made,
            a_early=a_cooldown - 0.25,
            a=a_cooldown,
            b_early=b_cooldown - 0.25,
            b=b_cooldown,
        ),
        _("A {a_early}, {a}; B {b_early}, {b}").format(
            a_early=repr(again[0]), a=repr(again[1]), b_early=repr(again[2]), b=repr(again[3])
        ),
        _(
            "a failed trial opens the breaker again for self.cooldown_s, the same cooldown as "
            "the first opening: not another breaker's, and no 30 written in the code"
        ),
    )


@CHECKS.add(1, "each breaker reads the clock it was given, not the first breaker's")
def each_breaker_reads_its_own_clock(ns: Namespace) -> None:
    out = drive(
        ns,
        [["fail", 0], ["fail", 1], ["tick", 1, 30.0], ["allow", 1], ["allow", 0]],
        threshold=1,
        cooldown_s=30.0,
        breakers=2,
        own_clocks=True,
    )
    expect(
        out[3] is True and out[4] is False,
        _(
            "two breakers on two clocks, both opened: only B's clock moves 30 s, so B lets a "
            "trial through and A still refuses"
        ),
        _("B allow() {b}, A allow() {a}").format(b=repr(out[3]), a=repr(out[4])),
        "keep the clock you were given on self (self.clock = clock)",
    )


#: Where the machine's local clock jumps: New York falling back an hour (2026-11-01,
#: 06:00 UTC) and Sydney springing forward an hour (2026-10-03, 16:00 UTC), as POSIX TZ
#: rules (no time zone database needed). (TZ, first clock reading, seconds later, allow()
#: wanted then, what that is.)
CLOCK_CHANGES = (
    ("EST5EDT,M3.2.0,M11.1.0", 1_793_512_790.0, 30.0, True, "New York, 10 s before 02:00 EDT"),
    ("AEST-10AEDT,M10.1.0,M4.1.0/3", 1_791_043_195.0, 10.0, False, "Sydney, 5 s before 02:00 AEST"),
)


@CHECKS.add(
    1,
    "the cooldown is a difference of clock.now() readings (seconds since the epoch): local "
    "datetimes jump an hour when the clocks change, and the breaker refuses for an hour or "
    "half-opens at once",
)
def cooldown_across_a_clock_change(ns: Namespace) -> None:
    for tz, start, later, want, where in CLOCK_CHANGES:
        out = drive(
            ns,
            [["fail", 0], ["advance", later], ["allow", 0]],
            threshold=1,
            cooldown_s=30.0,
            start=start,
            tz=tz,
        )
        expect(
            out[2] is want,
            _(
                "allow() {want} {later:g} s after opening with cooldown_s=30, opened in the "
                "machine's local time zone {where} (the local clock changes there)"
            ).format(want=want, later=later, where=where),
            repr(out[2]),
            "compare self.clock.now() with opened_at + cooldown_s as floats; "
            "datetime.fromtimestamp() gives local wall time, which jumps when the clocks change",
        )


#: How many breakers ``no_jitter_on_the_cooldown`` holds at once: live side by side, each
#: has an address (id()) of its own, so a cooldown spread by id(self), hash(self) or a
#: random draw ends early or late on most of them, whatever the addresses are this run.
SIDE_BY_SIDE = 48
#: A millisecond or so, exact in binary beside the lab's epoch: opened_at + cooldown_s is
#: exact, and so is each side of it.
HAIR_S = 2.0**-10
#: About a microsecond (a little less), exact beside the lab's epoch, and more than half a
#: microsecond: a time rounded to the microsecond (a UTC datetime) still sees it.
SPECK_S = 2.0**-20


@CHECKS.add(
    1,
    "every breaker waits exactly cooldown_s: no spread of your own (a random draw, id(self) "
    "or hash(self) in the cooldown); the caller chose the cooldown, and a spread one lets "
    "the trial out early or holds the calls back late",
)
def no_jitter_on_the_cooldown(ns: Namespace) -> None:
    each = range(SIDE_BY_SIDE)
    out = drive(
        ns,
        [["fail", i] for i in each]
        + [["advance", 30.0 - HAIR_S]]
        + [["allow", i] for i in each]
        + [["advance", HAIR_S]]
        + [["allow", i] for i in each],
        threshold=1,
        cooldown_s=30.0,
        breakers=SIDE_BY_SIDE,
    )
    before = out[SIDE_BY_SIDE + 1 : 2 * SIDE_BY_SIDE + 1]
    at = out[2 * SIDE_BY_SIDE + 2 :]
    early = [i for i, allowed in enumerate(before) if allowed is not False]
    late = [i for i, allowed in enumerate(at) if allowed is not True]
    expect(
        not early and not late,
        _(
            "{count} breakers opened at the same moment with cooldown_s=30: every one "
            "refuses a millisecond before 30 s and lets its trial through at 30 s"
        ).format(count=SIDE_BY_SIDE),
        _("{early} of them let a call through before 30 s, {late} still refused at 30 s").format(
            early=len(early), late=len(late)
        ),
        "compare clock.now() with opened_at + cooldown_s, the cooldown you were given: no "
        "jitter, random or from id(self), in a breaker (spread the callers' retries instead)",
    )
    # Opened half a millisecond into a second, asked a quarter millisecond before the end:
    # times kept in whole milliseconds (int(now * 1000)), or an opening time or elapsed
    # time rounded to the millisecond, let the trial out early.
    out = drive(
        ns,
        [["advance", HAIR_S / 2], ["fail", 0], ["advance", 30.0 - HAIR_S / 4], ["allow", 0]]
        + [["advance", HAIR_S / 4], ["allow", 0]],
        threshold=1,
        cooldown_s=30.0,
    )
    expect(
        [out[3], out[5]] == [False, True],
        _(
            "opened {opened:.2f} ms into a second with cooldown_s=30: allow() False a quarter "
            "of a millisecond before 30 s, True at 30 s"
        ).format(opened=500 * HAIR_S),
        _("{before}, then {at}").format(before=repr(out[3]), at=repr(out[5])),
        _(
            "keep clock.now() as the float it is: times in whole milliseconds (int(now * "
            "1000)) or rounded (round(now, 3)) move the end of the cooldown by up to a "
            "millisecond"
        ),
    )
    # The same for a failed trial's new cooldown: a trial that fails half a millisecond into
    # a second, its new opening time rounded, lets the next trial out early.
    out = drive(
        ns,
        [["fail", 0], ["advance", 30.0], ["allow", 0], ["advance", HAIR_S / 2], ["fail", 0]]
        + [["advance", 30.0 - HAIR_S / 4], ["allow", 0], ["advance", HAIR_S / 4], ["allow", 0]],
        threshold=1,
        cooldown_s=30.0,
    )
    expect(
        [out[6], out[8]] == [False, True],
        _(
            "a trial failed {failed:.2f} ms into a second with cooldown_s=30: allow() False a "
            "quarter of a millisecond before 30 s after the failure, True at 30 s"
        ).format(failed=500 * HAIR_S),
        _("{before}, then {at}").format(before=repr(out[6]), at=repr(out[8])),
        _(
            "keep clock.now() as the float it is when a failed trial opens the breaker again "
            "too: a rounded (round(now, 3)) or whole-millisecond time moves the end of the "
            "cooldown"
        ),
    )
    # A cooldown of 62.5 ms (exact in binary), asked a quarter of a millisecond before its
    # end: a cooldown kept in whole milliseconds (int(cooldown_s * 1000)) or rounded
    # (round(cooldown_s, 3), round(cooldown_s, 2)) in __init__ is 62 ms or less.
    short = 2.0**-4
    out = drive(
        ns,
        [["fail", 0], ["advance", short - HAIR_S / 4], ["allow", 0], ["advance", HAIR_S / 4]]
        + [["allow", 0]],
        threshold=1,
        cooldown_s=short,
    )
    expect(
        [out[2], out[4]] == [False, True],
        _(
            "cooldown_s={cooldown} (62.5 ms): allow() False a quarter of a millisecond before "
            "the cooldown ends, True when it ends"
        ).format(cooldown=short),
        _("{before}, then {at}").format(before=repr(out[2]), at=repr(out[4])),
        _(
            "keep cooldown_s as the float you were given: a cooldown kept in whole "
            "milliseconds (int(cooldown_s * 1000)) or rounded (round(cooldown_s, 3)) ends "
            "early"
        ),
    )
    # Opened on a whole second, asked about a microsecond before the end: a slack of
    # a microsecond "for float error" (now + 1e-6 >= ...) lets the trial out early; the end
    # is exact in binary here, so the plain comparison needs no slack.
    out = drive(
        ns,
        [["fail", 0], ["advance", 30.0 - SPECK_S], ["allow", 0], ["advance", SPECK_S]]
        + [["allow", 0]],
        threshold=1,
        cooldown_s=30.0,
    )
    expect(
        [out[2], out[4]] == [False, True],
        _(
            "opened on a whole second with cooldown_s=30: allow() False {speck:.2f} "
            "microseconds before 30 s, True at 30 s"
        ).format(speck=SPECK_S * 1e6),
        _("{before}, then {at}").format(before=repr(out[2]), at=repr(out[4])),
        _(
            "compare clock.now() >= opened_at + cooldown_s with no slack: an epsilon 'for "
            "float error' (now + 1e-6) lets the trial out before the cooldown is over"
        ),
    )


#: A threshold above what a small buffer or a byte holds (a deque(maxlen=10) or
#: deque(maxlen=1000) of failures, a count kept modulo 256 or capped at 1000, 2000 or
#: 10000).
HIGH_THRESHOLD = 12_000


@CHECKS.add(
    1,
    "threshold is whatever the caller gives, however high: count every failure in a row (a "
    "deque(maxlen=...) of recent failures, or a count that wraps or is capped, never "
    "reaches 12000)",
)
def no_cap_on_the_threshold(ns: Namespace) -> None:
    out = drive(
        ns,
        [["fail", 0]] * (HIGH_THRESHOLD - 1) + [["state", 0], ["fail", 0], ["state", 0]],
        threshold=HIGH_THRESHOLD,
        cooldown_s=30.0,
    )
    before, after = out[HIGH_THRESHOLD - 1], out[-1]
    expect(
        before == "closed" and after == "open",
        _(
            "with threshold={threshold}: closed after {streak} failures in a row, open at "
            "failure {threshold}"
        ).format(threshold=HIGH_THRESHOLD, streak=HIGH_THRESHOLD - 1),
        _("{before} then {after}").format(before=repr(before), after=repr(after)),
        "count the failures in a row in a plain int on self, compared with threshold: no "
        "buffer of a fixed size, no cap",
    )


#: Two hours and a quarter second: longer than any cap a breaker might put on a cooldown
#: (ten minutes, an hour).
LONG_COOLDOWN_S = 7200.25
#: Thirty days, for a cap of a day or a week ("no cooldown longer than a day").
MONTH_COOLDOWN_S = 30 * 86_400.0
#: Ten years, for a cap of a year ("no cooldown longer than a year").
DECADE_COOLDOWN_S = 3650 * 86_400.0


@CHECKS.add(
    1,
    "cooldown_s is whatever the caller gives, however long: a cap of your own (min(cooldown_s, "
    "600)) sends trials to a dependency its owner said to leave alone",
)
def no_cap_on_the_cooldown(ns: Namespace) -> None:
    for cooldown in (LONG_COOLDOWN_S, MONTH_COOLDOWN_S, DECADE_COOLDOWN_S):
        before = drive(
            ns,
            [["fail", 0], ["advance", cooldown - 0.25], ["allow", 0]],
            threshold=1,
            cooldown_s=cooldown,
        )[-1]
        at = drive(
            ns, [["fail", 0], ["advance", cooldown], ["allow", 0]], threshold=1, cooldown_s=cooldown
        )[-1]
        if cooldown == LONG_COOLDOWN_S:
            wanted = _(
                "with cooldown_s={cooldown:g}: allow() False {just_before:g} s after opening, "
                "True at {cooldown:g} s"
            ).format(cooldown=cooldown, just_before=cooldown - 0.25)
        else:
            wanted = _(
                "with cooldown_s={cooldown:.0f} ({days:g} days): allow() False a quarter second "
                "before the {days:g} days are over, True at {days:g} days"
            ).format(cooldown=cooldown, days=cooldown / 86_400)
        expect(
            before is False and at is True,
            wanted,
            _("{before}, then {at}").format(before=repr(before), at=repr(at)),
            "compare clock.now() with opened_at + cooldown_s as given: no min(), no cap",
        )
    # The same cooldown after a failed trial: a cap on the reopening alone sends a trial
    # every few minutes to a dependency its owner said to leave alone for hours.
    for cooldown in (LONG_COOLDOWN_S, MONTH_COOLDOWN_S, DECADE_COOLDOWN_S):
        trial = [["fail", 0], ["advance", cooldown], ["allow", 0], ["fail", 0]]
        before = drive(
            ns,
            [*trial, ["advance", cooldown - 0.25], ["allow", 0]],
            threshold=1,
            cooldown_s=cooldown,
        )[-1]
        at = drive(
            ns, [*trial, ["advance", cooldown], ["allow", 0]], threshold=1, cooldown_s=cooldown
        )[-1]
        expect(
            before is False and at is True,
            _(
                "with cooldown_s={cooldown}, after a failed trial: allow() False a quarter second "
                "before {cooldown} s from the trial's failure, True at {cooldown} s"
            ).format(cooldown=cooldown),
            _("{before}, then {at}").format(before=repr(before), at=repr(at)),
            _(
                "a failed trial opens it again for the full cooldown_s as given: no min(), no "
                "cap on the reopening either"
            ),
        )


@CHECKS.add(
    1,
    "cooldown_s=0 is a cooldown of zero, not a missing one: no 'cooldown_s or 30' default; "
    "the trial goes out at once, and only one",
)
def a_cooldown_of_zero(ns: Namespace) -> None:
    out = drive(
        ns,
        [["fail", 0], ["state", 0], ["allow", 0], ["allow", 0]],
        threshold=1,
        cooldown_s=0.0,
    )
    # A state read from the clock (a property saying 'half_open' once the cooldown is
    # over, as pybreaker's does) is already half_open with a cooldown of zero.
    expect(
        out[1] in ("open", "half_open"),
        _("open after one failure with threshold=1") + because_of("threshold_of_one"),
        out[1],
    )
    expect(
        out[2:] == [True, False],
        _("allow() True at once with cooldown_s=0 (the one trial), then False"),
        repr(out[2:]),
    )


@CHECKS.add(
    1,
    "a clock may read 0.0: compare clock.now() with opened_at + cooldown_s, never test "
    "opened_at for truth ('if self.opened_at'), 0.0 is a time like any other",
)
def a_clock_that_starts_at_zero(ns: Namespace) -> None:
    out = drive(
        ns,
        [["fail", 0], ["allow", 0], ["advance", 5.0], ["allow", 0], ["allow", 0]],
        threshold=1,
        cooldown_s=5.0,
        start=0.0,
    )
    expect(
        [out[1], out[3], out[4]] == [False, True, False],
        _(
            "allow() False at once, then True after 5 s, then False, opened at the clock's 0.0 "
            "with cooldown_s=5"
        ),
        repr([out[1], out[3], out[4]]),
    )


#: Worker threads of one process, each a caller of the one breaker they share.
THREADS = 4


@CHECKS.add(
    1,
    "the worker threads of a process share one breaker: failures from different threads "
    "count in the same row, every thread waits out the cooldown another thread's failure "
    "started, and one trial goes out whichever thread asks (no threading.local, nothing "
    "keyed by the thread)",
)
def callers_on_several_threads_share_the_breaker(ns: Namespace) -> None:
    fails = [["on", t, ["fail", 0]] for t in range(3)]
    # Thread 2's failure opens it: threads 3 and 0 ask at once and 29.75 s later.
    waiting = [["on", 3, ["allow", 0]], ["advance", 29.75], ["on", 0, ["allow", 0]]]
    out = drive(
        ns,
        [*fails, ["on", 3, ["state", 0]], *waiting, ["advance", 0.25]]
        + [["on", t, ["allow", 0]] for t in range(THREADS)],
        threshold=3,
        cooldown_s=30.0,
    )
    state, refused, allowed = out[3], [out[4], out[6]], out[8 : 8 + THREADS]
    expect(
        state == "open",
        _("state 'open' after 3 failures in a row, one from each of 3 threads (threshold=3)"),
        repr(state),
        "keep the count on self, shared by every thread: a threading.local count needs "
        "threshold failures on each thread",
    )
    expect(
        refused == [False, False],
        _(
            "allow() False on the other threads while the breaker thread 2 opened cools "
            "down: at once on thread 3, and 29.75 s later on thread 0 (cooldown_s=30)"
        ),
        repr(refused),
        _(
            "keep opened_at on self, shared by every thread: an opening time in a "
            "threading.local (or a dict keyed by the thread) is missing on the other "
            "threads, which send their trial at once"
        ),
    )
    expect(
        allowed == [True] + [False] * (THREADS - 1),
        _(
            "30 s later, allow() from {count} threads in turn: True for the first (the one "
            "trial), False for the others"
        ).format(count=THREADS),
        repr(allowed),
        "keep the 'a trial is out' flag on self: a flag per thread lets every thread send "
        "a trial to a dependency that may still be down",
    )


@CHECKS.add(
    2,
    "a trial's result ends the trial whichever thread records it (a callback, a pool's "
    "thread): a result dropped because another thread than the one that let the trial "
    "out records it leaves the breaker half open with its trial spent, letting no call "
    "out ever again",
    severe=True,
)
def a_trial_result_from_another_thread_ends_the_trial(ns: Namespace) -> None:
    # Opened on thread 0, whose trial fails on thread 1; 30 s later thread 2's trial works,
    # on thread 3.
    out = drive(
        ns,
        [*[["on", 0, ["fail", 0]]] * 3, ["advance", 30.0], ["on", 0, ["allow", 0]]]
        + [["on", 1, ["fail", 0]], ["on", 2, ["state", 0]], ["advance", 30.0]]
        + [["on", 2, ["allow", 0]], ["on", 3, ["ok", 0]], ["on", 0, ["state", 0]]],
        threshold=3,
        cooldown_s=30.0,
    )
    if out[4] is not True:
        return  # half_open_allows_one_trial says so
    results = [out[6], out[8], out[10]]
    expect(
        results == ["open", True, "closed"],
        _(
            "a trial's result recorded on another thread than the one that let it out: "
            "'open' after the failed trial, the next trial let out 30 s later, 'closed' after "
            "it worked"
        ),
        _("{first}, allow() {allowed}, then {last}").format(
            first=repr(results[0]), allowed=repr(results[1]), last=repr(results[2])
        ),
        _(
            "record_failure() and record_success() end the trial whichever thread calls them: "
            "a result checked against the thread that took the trial (threading.get_ident()) "
            "is dropped when a callback records it, and the breaker stays half open for good"
        ),
    )


@CHECKS.add(
    2,
    "a successful trial ends the trial: the next time the breaker opens, the end of its "
    "cooldown lets a trial out again (a 'trial out' flag left set by the success refuses "
    "every call for good once the breaker half-opens); nor do calls let out while closed "
    "whose results never come (a count of calls in flight holds the trial back for good)",
    severe=True,
)
def the_next_outage_gets_its_own_trial(ns: Namespace) -> None:
    # Calls let out while closed whose results never come (a worker killed, a call that
    # hung): they hold nothing back once the breaker opens and cools down.
    unsettled = drive(
        ns,
        [["allow", 0]] * (UNSETTLED + 3)
        + [["fail", 0]] * 3
        + [["state", 0]]
        + [["advance", 30.0], ["allow", 0], ["allow", 0]],
        threshold=3,
        cooldown_s=30.0,
    )
    if unsettled[UNSETTLED + 6] == "open":
        expect(
            unsettled[-2:] == [True, False],
            _(
                "{count} calls let out while closed whose results never come, then 3 failures "
                "(open), then 30 s: allow() True (the trial), then False"
            ).format(count=UNSETTLED + 3),
            repr(unsettled[-2:]),
            _(
                "the trial waits only for its own result: a count of calls in flight, raised "
                "by every allow() and lowered by every result, stays above zero when a call "
                "never reports, and the breaker refuses every call for good"
            ),
        )
    opens = [["fail", 0]] * 3
    out = drive(
        ns,
        [*opens, ["advance", 30.0], ["allow", 0], ["ok", 0], ["state", 0], ["advance", 600.0]]
        + [*opens, ["state", 0], ["advance", 30.0], ["allow", 0], ["allow", 0]],
        threshold=3,
        cooldown_s=30.0,
    )
    if out[4] is not True or out[6] != "closed" or out[11] != "open":
        return  # half_open_allows_one_trial and trial_success_closes say so
    expect(
        out[13:] == [True, False],
        _(
            "a trial that succeeded (closed), 3 new failures 600 s later (open), then 30 s: "
            "allow() True (the new outage's trial), then False"
        ),
        repr(out[13:]),
        _(
            "a success ends the trial: set the 'trial out' flag back to False in "
            "record_success() (or each time the breaker opens or half-opens), or the next "
            "half open state finds it still set and refuses every call"
        ),
    )


#: Outages one after the other, each ended by a trial that worked: a breaker that "locks
#: out" after a few trips (stays open for good from the 3rd, the 10th or the 20th) refuses
#: the next one's jobs for ever.
OUTAGES = 25
#: Trials that fail in a row in one long outage, one every cooldown (30 s): over eight
#: hours. A breaker that gives up after 10 (or 100) failed trials never sends another.
LONG_OUTAGE_TRIALS = 1000
#: Failed trials in a row in the longest outage (over four days), after the outage spread
#: over months: a breaker that gives up after 5000 or 10000 failed trials.
MANY_FAILED_TRIALS = 12_000
#: Failed trials spread over months, one every three days (and a quarter second): an
#: outage long in time, for a breaker that gives up after a day, a week or a month.
SPREAD_TRIALS = 60
SPREAD_TRIAL_S = 3 * 86_400.0 + 0.25
#: How long after the breaker opened its trial is asked for: a week, far past any
#: cooldown (a backoff that grows stays under it; a breaker that gave up does not).
A_WEEK_S = 7 * 86_400.0
#: How long a slow trial takes before its result comes: more than a cooldown, an hour.
SLOW_TRIAL_S = (45.0, 3600.0)
#: Callers coming back after an outage, a week later and every 30 s after.
COMING_BACK = 4


@CHECKS.add(
    2,
    "the breaker never gives up on its dependency: however many trials failed in a row, "
    "and however many times it opened before, a trial goes out once the cooldown is over "
    "(a breaker that stays open for good after N failed trials or N outages leaves the "
    "jobs behind it never to run again)",
    severe=True,
)
def the_breaker_never_gives_up(ns: Namespace) -> None:
    # Callers' calls: allow(), and the call's result recorded only when it went out. After
    # the outage, callers come back a week later and every 30 s after: one must go out.
    fails = [["call", 0, "fail"]] * 3
    back = [["advance", A_WEEK_S], ["call", 0, "ok"]]
    back += [["advance", 30.0], ["call", 0, "ok"]] * (COMING_BACK - 1) + [["state", 0]]

    def came_back(out: list[Any]) -> tuple[list[Any], Any]:
        """What the callers coming back got from allow(), and the state after them."""
        return out[1 - len(back) : -1 : 2], out[-1]

    def through(answers: list[Any], state: Any) -> bool:
        return True in answers and state == "closed"

    out = drive(ns, [*fails, *back] * OUTAGES, threshold=3, cooldown_s=30.0)
    size = len(fails) + len(back)
    got = [came_back(out[: size * (i + 1)]) for i in range(OUTAGES)]
    wrong = [i + 1 for i, (answers, state) in enumerate(got) if not through(answers, state)]
    expect(
        not wrong,
        _(
            "{count} outages one after the other (threshold=3, cooldown_s=30), each 3 failed "
            "calls in a row, then callers a week later and every 30 s after: one let through "
            "(allow() True) and, as it works, the breaker closed, every time"
        ).format(count=OUTAGES),
        _("outage {which}: allow() {answers}, state {state}").format(
            which=wrong[0], answers=repr(got[wrong[0] - 1][0]), state=repr(got[wrong[0] - 1][1])
        )
        if wrong
        else "",
        _(
            "every opening ends with a trial once cooldown_s has passed: no count of "
            "openings that keeps the breaker open for good"
        ),
    )

    def after_failed_trials(count: int) -> None:
        trials = [["advance", 30.0], ["call", 0, "fail"]] * count
        out = drive(ns, [*fails, *trials, *back], threshold=3, cooldown_s=30.0)
        answers, state = came_back(out)
        expect(
            through(answers, state),
            _(
                "a long outage (threshold=3, cooldown_s=30): 3 failed calls, then a call every "
                "30 s for {count} trials that all fail, then callers a week later and every 30 s "
                "after: one let through (allow() True) and, as it works, the breaker closed"
            ).format(count=count),
            _("allow() {answers}, state {state}").format(answers=repr(answers), state=repr(state)),
            _(
                "a failed trial opens the breaker for cooldown_s again, the last as the "
                "first: no count of failed trials after which it stays open for good"
            ),
        )

    after_failed_trials(LONG_OUTAGE_TRIALS)
    # An outage long in time rather than in trials: a trial every few days for months.
    trials = [["advance", SPREAD_TRIAL_S], ["call", 0, "fail"]] * SPREAD_TRIALS
    answers, state = came_back(drive(ns, [*fails, *trials, *back], threshold=3, cooldown_s=30.0))
    expect(
        through(answers, state),
        _(
            "an outage of {days:g} days (threshold=3, cooldown_s=30): 3 failed calls, then a "
            "call every {every:g} days for {count} trials that all fail, then callers a week "
            "later and every 30 s after: one let through (allow() True) and, as it works, "
            "the breaker closed"
        ).format(
            days=SPREAD_TRIAL_S * SPREAD_TRIALS / 86_400,
            every=SPREAD_TRIAL_S / 86_400,
            count=SPREAD_TRIALS,
        ),
        _("allow() {answers}, state {state}").format(answers=repr(answers), state=repr(state)),
        _(
            "a failed trial opens the breaker for cooldown_s again however long the outage "
            "has lasted: no time after which it stays open for good (a day, a week, a month)"
        ),
    )
    # Many more failed trials, one every 30 s (days of them): a count of failed trials
    # larger than the first scene's (5000, 10000) after which it gives up shows here.
    after_failed_trials(MANY_FAILED_TRIALS)
    # A slow trial: its result comes long after it went out, and still ends it.
    for result in ("fail", "ok"):
        for took in SLOW_TRIAL_S:
            out = drive(
                ns,
                [*fails, ["advance", 30.0], ["allow", 0], ["advance", took], [result, 0], *back],
                threshold=3,
                cooldown_s=30.0,
            )
            if out[4] is not True:
                return  # half_open_allows_one_trial says so
            answers, state = came_back(out)
            expect(
                through(answers, state),
                _(
                    "threshold=3, cooldown_s=30: a trial let out that takes {took:g} s and "
                    "then {how}, then callers a week later and every 30 s after: one let "
                    "through (allow() True) and, as it works, the breaker closed"
                ).format(took=took, how=_("fails") if result == "fail" else _("works")),
                _("allow() {answers}, state {state}").format(
                    answers=repr(answers), state=repr(state)
                ),
                _(
                    "a trial's result ends the trial however long it took: a result dropped "
                    "as too late leaves the breaker half open with its trial spent for good"
                ),
            )


@CHECKS.add(
    1,
    "every opening starts its own cooldown: after a successful trial closed the breaker, "
    "the next outage opens it with opened_at = clock.now() again (an opening time kept "
    "from the first outage lets the trial out at once)",
)
def a_second_outage_waits_a_full_cooldown(ns: Namespace) -> None:
    opens = [["fail", 0]] * 3
    out = drive(
        ns,
        [*opens, ["advance", 30.0], ["allow", 0], ["ok", 0], ["state", 0], ["advance", 600.0]]
        + [*opens, ["state", 0], ["allow", 0], ["advance", 29.75], ["allow", 0]]
        + [["advance", 0.25], ["allow", 0]],
        threshold=3,
        cooldown_s=30.0,
    )
    closed, reopened = out[6], out[11]
    got = [out[12], out[14], out[16]]
    expect(
        closed == "closed" and reopened == "open",
        _("closed after the successful trial, open again after 3 new failures 600 s later"),
        _("{closed}, then {reopened}").format(closed=repr(closed), reopened=repr(reopened)),
    )
    expect(
        got == [False, False, True],
        _(
            "opened a second time 600 s after the first outage ended: allow() False at once "
            "and 29.75 s later, True at 30 s"
        ),
        repr(got),
        "set opened_at = clock.now() each time the breaker opens, not only the first time",
    )
    # Outage after outage, each ended by a trial that works: every one waits cooldown_s,
    # the last as the first (no cooldown that grows with the count of openings).
    outage = [*opens, ["allow", 0], ["advance", 29.75], ["allow", 0], ["advance", 0.25]]
    outage += [["allow", 0], ["ok", 0], ["advance", 600.0]]
    out = drive(ns, outage * OUTAGES, threshold=3, cooldown_s=30.0)
    size = len(outage)
    got = [[out[size * i + j] for j in (3, 5, 7)] for i in range(OUTAGES)]
    wrong = [i + 1 for i, g in enumerate(got) if g != [False, False, True]]
    expect(
        not wrong,
        _(
            "{count} outages 600 s apart, each 3 failures (open) and a trial that works: "
            "allow() False at once and 29.75 s later, True at 30 s, every time"
        ).format(count=OUTAGES),
        _("outage {which}: {got}").format(which=wrong[0], got=repr(got[wrong[0] - 1]))
        if wrong
        else "",
        _(
            "every opening waits cooldown_s, the caller's: no cooldown that grows with the "
            "count of openings (a backoff the docstring does not ask for)"
        ),
    )


@CHECKS.add(
    1,
    "a call let through while closed can end after the breaker opened (it was slow): its "
    "record_success() or record_failure() is a result like any other, never an error (an "
    "exception there fails a job whose call worked, and the job runs it again)",
)
def a_late_result_while_open_is_no_error(ns: Namespace) -> None:
    for late in ("ok", "fail"):
        steps = [["fail", 0]] * 3 + [["state", 0], [late, 0]]
        out = ns.harness(HARNESS + "drive", steps, threshold=3, cooldown_s=30.0)
        if len(out) < 4 or out[3] != "open":
            return  # opens_after_consecutive_failures says so
        last = out[-1]
        expect(
            len(out) == len(steps) and not (isinstance(last, dict) and "raised" in last),
            _(
                "record_{call}() of a slow call that ends while the breaker is open to "
                "return, with no exception"
            ).format(call="success" if late == "ok" else "failure"),
            raised_text(last) if isinstance(last, dict) else repr(last),
            "record a result whatever the state: a call let through before the breaker opened "
            "may finish after it; do not raise in record_success or record_failure",
        )


@CHECKS.add(
    2,
    "a failed trial opens the breaker again whatever the count of failures in a row (a "
    "slow call's late success, recorded while open, set it back to 0): a breaker that "
    "waits for the count to reach threshold again stays half open with its trial "
    "spent, lets no call out ever again, and the jobs behind it never run",
    severe=True,
)
def a_late_result_leaves_the_next_trial_decisive(ns: Namespace) -> None:
    for late in ("ok", "fail"):
        steps = [["fail", 0]] * 3 + [[late, 0], ["state", 0], ["advance", 30.0], ["allow", 0]]
        steps += [["fail", 0], ["state", 0], ["allow", 0], ["advance", 30.0], ["allow", 0]]
        steps += [["ok", 0], ["state", 0]]
        out = ns.harness(HARNESS + "drive", steps, threshold=3, cooldown_s=30.0)
        if len(out) < len(steps) or out[4] != "open" or out[6] is not True:
            # A late success that closed the breaker (as a success may), or what
            # a_late_result_while_open_is_no_error and the public checks judge.
            continue
        got = [out[8], out[9], out[11], out[13]]
        expect(
            got == ["open", False, True, "closed"],
            _(
                "3 failures (open), a slow call's record_{call}() while open, 30 s, a trial "
                "that fails: open again ('open', allow() False), then after 30 s one more "
                "trial (True) that succeeds and closes it: ['open', False, True, 'closed']"
            ).format(call="success" if late == "ok" else "failure"),
            repr(got),
            _(
                "in record_failure, a failure while half open opens the breaker at once "
                "(if self.state == 'half_open' or self.failures >= self.threshold): the "
                "count may be below threshold after a late success"
            ),
        )


#: Calls let out while closed, beyond the three that fail, whose results never come.
UNSETTLED = 2


#: Breakers dropped and built again one at a time: a new breaker lands at the address (the
#: id()) of the one just dropped on most of them, whatever the addresses are this run.
RENEWED = 16


@CHECKS.add(
    1,
    "a new breaker starts closed with a count of zero, whatever the breaker it replaces "
    "went through: keep the counts on self, not in a registry keyed by id(self) (a new "
    "breaker often gets the id of one just dropped, and inherits its failures)",
)
def a_new_breaker_starts_afresh(ns: Namespace) -> None:
    each = range(RENEWED)
    steps = [["fail", i] for i in each] * 3 + [["renew", i] for i in each]
    for i in each:
        steps += [["state", i], ["allow", i], ["fail", i], ["fail", i], ["state", i]]
    # Up to three runs: now and then no new breaker lands at a dropped one's address (seen
    # once in four zoo runs beside other tests, never alone); a breaker that keeps its
    # state on self is right in every run, so only a wrong one pays the extra runs.
    for _run in range(3):
        out = drive(ns, steps, threshold=3, cooldown_s=30.0, breakers=RENEWED)
        after = out[4 * RENEWED :]
        got = [[after[5 * i], after[5 * i + 1], after[5 * i + 4]] for i in each]
        wrong = [g for g in got if g != ["closed", True, "closed"]]
        if wrong:
            break
    expect(
        not wrong,
        _(
            "{count} new breakers (threshold=3), each built when an open one was dropped: "
            "closed, allow() True, and still closed after 2 failures of their own"
        ).format(count=RENEWED),
        _("{wrong} of them not: {first}").format(wrong=len(wrong), first=repr(wrong[:1])),
        _(
            "keep the failures, the state and the opening time on self (self.failures = 0 in "
            "__init__): a dict keyed by id(self) outlives the breaker, and a new breaker at "
            "the same address inherits what the dead one left there"
        ),
    )


#: How long after opening the first caller comes, nobody asking before: a cooldown and a
#: half, three and a half, and a night (none a whole number of cooldowns: a breaker that
#: lets trials out only around each multiple of cooldown_s refuses them all).
QUIET_S = (45.0, 105.25, 30_007.75)
#: Callers asking behind the trial, its result not in: every one refused (no second trial
#: after so many refusals, 100, 1000 or 10000, a guard against a trial whose result never
#: comes).
BEHIND_THE_TRIAL = 12_000
#: How long the trial stays out, its result never recorded: a century (a trial given up
#: after a year or two sends a second one).
TRIAL_OUT_S = 100 * 365 * 86_400.0


@CHECKS.add(
    1,
    "the cooldown ends once, and stays ended: the first caller after it gets the trial "
    "however late it comes (no window after the cooldown, no trial only around each "
    "multiple of cooldown_s, no fresh cooldown because nobody asked), and every caller "
    "after it is refused until its result comes, however many ask",
)
def the_first_caller_after_a_quiet_spell_gets_the_trial(ns: Namespace) -> None:
    for quiet in QUIET_S:
        out = drive(
            ns,
            [["fail", 0], ["state", 0], ["advance", quiet], ["allow", 0]]
            + [["allow", 0]] * BEHIND_THE_TRIAL
            + [["advance", TRIAL_OUT_S], ["allow", 0]],
            threshold=1,
            cooldown_s=30.0,
        )
        expect(
            out[1] == "open",
            _("open after one failure with threshold=1") + because_of("threshold_of_one"),
            out[1],
        )
        behind, much_later = out[4 : 4 + BEHIND_THE_TRIAL], out[-1]
        let_out = [i + 1 for i, allowed in enumerate(behind) if allowed is not False]
        expect(
            out[3] is True and not let_out,
            _(
                "opened with cooldown_s=30 and nobody asking for {quiet:g} s: allow() True for "
                "the first caller then (the trial), False for the {count} callers after it"
            ).format(quiet=quiet, count=BEHIND_THE_TRIAL),
            _("the first {first}; callers {which} after it not refused").format(
                first=repr(out[3]), which=repr(let_out[:5])
            ),
            _(
                "once clock.now() >= opened_at + cooldown_s, the next allow() is the trial, "
                "however long after the cooldown it comes: a breaker nobody asks at night must "
                "not stay open in the morning"
            ),
        )
        expect(
            much_later is False,
            _(
                "the trial let out and its result not in: allow() False {days:g} days later still"
            ).format(days=TRIAL_OUT_S / 86_400),
            repr(much_later),
            _(
                "no timeout on the trial, however long: only its record_success() or "
                "record_failure() ends it (a trial given up after a day or a week sends a "
                "second one while the first may still be out)"
            ),
        )


@CHECKS.add(
    1,
    "one breaker is shared by every worker thread: two threads that ask at the very end "
    "of the cooldown get one trial between them (allow() reads the clock and takes the "
    "trial under one lock on self), and a thread that asks while the failed trial is "
    "recorded is refused (record_failure() opens the breaker again under the same lock)",
)
def one_trial_when_two_threads_ask_at_once(ns: Namespace) -> None:
    got = ns.harness(HARNESS + "race_at_the_cooldown", threshold=3, cooldown_s=30.0)
    for step in ("opening", "A", "B"):
        value = got.get(step)
        if isinstance(value, dict) and "raised" in value:
            expect(False, _("allow() and record_failure() to run"), raised_text(value))
    expect(
        got["opened"] == "open",
        _("state 'open' after 3 failures in a row (threshold=3)"),
        repr(got["opened"]),
    )
    expect(
        got["B_done"],
        _("the second thread's allow() to return once the first one's had returned"),
        _("still waiting 5 s later"),
        _("release the lock in every path: use 'with self._lock:' rather than acquire()"),
    )
    trials = [got.get("A"), got.get("B")]
    expect(
        trials.count(True) == 1 and trials.count(False) == 1,
        _(
            "30 s after the breaker opened (cooldown_s=30), thread A asks allow(), and thread "
            "B asks while A is between its clock reading and its answer: True for one of "
            "them (the one trial), False for the other"
        ),
        _("A: {a}, B: {b}").format(a=repr(trials[0]), b=repr(trials[1])),
        _(
            "the workers of a process share the breaker and call it at the same time: read "
            "the clock, move to half open and take the trial inside one 'with self._lock:' "
            "(a threading.Lock made in __init__; a lock made inside allow() protects "
            "nothing). With no lock, both threads see the cooldown over and both send a "
            "trial to a dependency that may still be down"
        ),
    )
    # The trial fails, and another thread asks while record_failure() reads the clock: a
    # record_failure() with no lock shows it the state halfway (open, the old opening time).
    late = ns.harness(HARNESS + "race_at_the_failed_trial", threshold=3, cooldown_s=30.0)
    for step in ("opening", "failure", "B"):
        value = late.get(step)
        if isinstance(value, dict) and "raised" in value:
            expect(False, _("allow() and record_failure() to run"), raised_text(value))
    if late.get("trial") is not True:
        return  # half_open_allows_one_trial says so
    expect(
        late["B_done"],
        _("the second thread's allow() to return once record_failure() had returned"),
        _("still waiting 5 s later"),
        _("release the lock in every path: use 'with self._lock:' rather than acquire()"),
    )
    expect(
        late.get("B") is False,
        _(
            "30 s after the breaker opened (cooldown_s=30), its trial fails: thread B asks "
            "allow() while the trial's record_failure() is between its clock reading and "
            "its return: False (the breaker is open again for a full cooldown)"
        ),
        _("B: {b}").format(b=repr(late.get("B"))),
        _(
            "record_failure() changes the state every thread reads: read the clock and open "
            "the breaker again inside the same 'with self._lock:' as allow(). With no lock "
            "there, a thread that asks halfway sees the old cooldown over and sends a second "
            "trial to a dependency that just failed"
        ),
    )
    # The same, with B let in right after each attribute write of that record_failure()
    # in turn: a breaker that reads the clock first and then writes its state with no
    # lock is halfway only between two writes (state "open", the opening time the old).
    runs = ns.harness(HARNESS + "race_at_each_write_of_the_failed_trial", threshold=3)
    for run in runs:
        if "failure" in run:
            break  # record_failure raised: the checks above say so
        expect(
            run["B_done"] and run.get("B") is False and run["state"] == "open",
            _(
                "30 s after the breaker opened (cooldown_s=30), its trial fails: thread B "
                "asks allow() right after write {n} of the trial's record_failure() (an "
                "attribute set on the breaker): False, and the breaker open"
            ).format(n=run["after"]),
            _("B: {b}; the state then {state}").format(
                b=repr(run.get("B")) if run["B_done"] else _("still waiting 5 s later"),
                state=repr(run["state"]),
            ),
            _(
                "record_failure() changes the state every thread reads: read the clock and open "
                "the breaker again inside the same 'with self._lock:' as allow(). With no lock "
                "there, a thread that asks halfway sees the old cooldown over and sends a second "
                "trial to a dependency that just failed"
            ),
        )

    # The same, with B let in after each step (a read, a write, a lock released) of that
    # record_failure(): one that opens the breaker under the lock and sets the opening
    # time under it again shows B the old cooldown over between the two.
    for run in ns.harness(HARNESS + "race_at_each_step_of_the_failed_trial", threshold=3):
        if any(isinstance(run.get(t), dict) for t in ("A", "B")):
            return  # record_failure() or allow() raised: the checks above say so
        expect(
            run["B_done"] and run.get("B") is False,
            _(
                "30 s after the breaker opened (cooldown_s=30), its trial fails: thread B "
                "asks allow() right after step {n} of the trial's record_failure() ({step}): "
                "False (the trial is out, then the breaker open again for a full cooldown)"
            ).format(n=run["after"], step=run["step"]),
            _("B: {b}").format(
                b=repr(run.get("B")) if run["B_done"] else _("still waiting 5 s later")
            ),
            _(
                "open the breaker and set its opening time inside one 'with self._lock:': "
                "between two locked blocks, another thread sees the state 'open' with the "
                "old opening time, finds that cooldown over and sends a second trial to a "
                "dependency that just failed"
            ),
        )


@CHECKS.add(
    2,
    "a result recorded while another thread is inside the breaker (holding its lock) "
    "waits for the lock and counts: a record_success() or record_failure() that gives up "
    "when the lock is busy (acquire(blocking=False)) is lost, and a lost trial result "
    "leaves the breaker half open with its trial spent, letting no call out again",
    severe=True,
)
def a_result_waits_for_a_busy_lock(ns: Namespace) -> None:
    want = {"ok": ("closed", True, True), "fail": ("open", False, True)}
    for result, (state, then, later) in want.items():
        got = ns.harness(HARNESS + "result_while_a_call_holds_the_breaker", result)
        for step in ("opening", "A", "B", "after"):
            value = got.get(step)
            if isinstance(value, dict) and "raised" in value:
                expect(
                    False,
                    _("allow() and record_{call}() to run").format(
                        call="success" if result == "ok" else "failure"
                    ),
                    raised_text(value),
                )
        if got.get("opened") != "open" or got.get("A") is not True:
            continue  # threshold_of_one and half_open_allows_one_trial say so
        seen = (got["state"], got.get("then"), got.get("later"))
        expect(
            got["done"] and seen == (state, then, later),
            _(
                "threshold=1, opened, 30 s later thread A asks allow() (the trial) and, while A "
                "is inside it, thread B calls record_{call}(): once both return, as if B came "
                "right after A, state {state!r}, allow() {then!r}, and {later!r} 30 s later"
            ).format(
                call="success" if result == "ok" else "failure",
                state=state,
                then=then,
                later=later,
            ),
            _("state {state}, allow() {then}, then {later}").format(
                state=repr(seen[0]), then=repr(seen[1]), later=repr(seen[2])
            )
            if got["done"]
            else _("still waiting 5 s later"),
            _(
                "take the lock with 'with self._lock:' in every method, waiting for it: a "
                "result skipped because another thread held the lock is lost, and a lost "
                "trial result leaves the breaker half open for good"
            ),
        )


@CHECKS.add(
    1,
    "two threads that ask allow() when the cooldown is over get one trial between them "
    "whatever step of the first one's allow() the second asks at: mark the trial taken "
    "inside the same 'with self._lock:' that checks it, not after the lock is released; "
    "and while closed, a caller that finds the lock busy waits for it and gets True",
)
def one_trial_whatever_step_the_other_asks_at(ns: Namespace) -> None:
    for run in ns.harness(HARNESS + "race_at_each_step_while_closed", threshold=3):
        if any(isinstance(run.get(t), dict) for t in ("A", "B")):
            return  # allow() raised: the checks above say so
        expect(
            run["B_done"] and [run["A"], run.get("B")] == [True, True],
            _(
                "a new breaker (closed): thread A asks allow() and thread B asks right after "
                "step {n} of A's call ({step}): True for both"
            ).format(n=run["after"], step=run["step"]),
            _both_answers(run),
            _(
                "closed lets every call through: wait for the lock ('with self._lock:'); an "
                "allow() that gives up when another thread holds it (acquire(blocking=False) "
                "or a timeout) refuses calls to a dependency that is up"
            ),
        )
    for run in ns.harness(HARNESS + "race_at_each_step_of_the_trial", threshold=3):
        if any(isinstance(run.get(t), dict) for t in ("A", "B")):
            return  # allow() raised: the checks above say so
        answers = [run["A"], run.get("B")]
        expect(
            run["B_done"] and answers.count(True) == 1,
            _(
                "30 s after the breaker opened (cooldown_s=30), thread A asks allow() and "
                "thread B asks right after step {n} of A's call ({step}): True for one of "
                "them (the one trial), False for the other"
            ).format(n=run["after"], step=run["step"]),
            _both_answers(run),
            _(
                "everything allow() reads and writes about the trial belongs inside one 'with "
                "self._lock:': a flag set after the lock is released lets another thread "
                "find the trial still free and send a second one"
            ),
        )


@CHECKS.add(
    1,
    "a trial that fails at once opens the breaker again for a full cooldown even for a "
    "thread already inside allow(): read the clock, half-open and take the trial in one "
    "'with self._lock:', not the clock under one lock and the trial under a second",
)
def a_trial_failed_meanwhile_frees_no_second_trial(ns: Namespace) -> None:
    for run in ns.harness(HARNESS + "race_at_each_step_of_a_trial_that_fails", threshold=3):
        if any(isinstance(run.get(t), dict) for t in ("A", "B", "then")):
            return  # allow() or record_failure() raised: the checks above say so
        answers = [run["A"], run.get("B")]
        expect(
            run["B_done"] and answers.count(True) == 1 and run.get("then") is False,
            _(
                "30 s after the breaker opened (cooldown_s=30), thread A asks allow() and "
                "thread B asks right after step {n} of A's call ({step}), B recording its "
                "call's failure at once when let out (the clock does not move): True for "
                "one of them (the one trial), False for the other, then False for a third "
                "caller (open again for a fresh cooldown)"
            ).format(n=run["after"], step=run["step"]),
            _("{both}, then {then}").format(both=_both_answers(run), then=repr(run.get("then"))),
            _(
                "a caller that found the cooldown over under one 'with self._lock:' and "
                "half-opens the breaker or takes the trial under a second one acts on what "
                "it read before another thread's trial failed and opened the breaker again: "
                "it sends a second trial in the fresh cooldown. Decide and take the trial "
                "in one locked step"
            ),
        )


@CHECKS.add(
    1,
    "reading state (a dashboard, a log line, another thread) frees no second trial: a state "
    "property that half-opens the breaker once the cooldown is over does it under the same "
    "lock as allow(), or a read racing allow() writes over the trial just taken",
)
def reading_the_state_frees_no_second_trial(ns: Namespace) -> None:
    for run in ns.harness(HARNESS + "race_at_each_step_of_a_state_read", threshold=3):
        if any(isinstance(run.get(t), dict) for t in ("A", "B", "then")):
            return  # state or allow() raised: the checks above say so
        got = [run.get("B"), run.get("then")]
        expect(
            run["B_done"] and got == [True, False],
            _(
                "30 s after the breaker opened (cooldown_s=30), nobody having asked yet: "
                "thread A reads state and thread B asks allow() right after step {n} of A's "
                "read ({step}), then one more caller asks: True for B (the one trial), False "
                "for the caller after it"
            ).format(n=run["after"], step=run["step"]),
            _("B: {b}, the caller after it: {then}").format(
                b=repr(run.get("B")) if run["B_done"] else _("still waiting 5 s later"),
                then=repr(run.get("then")),
            ),
            _(
                "a state property that moves the breaker to half open (and clears the 'trial "
                "out' flag) changes the state: do it inside 'with self._lock:' as allow() "
                "does, or just report it. With no lock there, a read that saw 'open' writes "
                "half open and a free trial over the trial another thread just took"
            ),
        )


def _both_answers(run: dict[str, Any]) -> str:
    """What threads A and B got from allow() in one run of a step race."""
    return _("A: {a}, B: {b}").format(
        a=repr(run["A"]),
        b=repr(run.get("B")) if run["B_done"] else _("still waiting 5 s later"),
    )


@CHECKS.add(
    1,
    "failures recorded by two threads at once both count, whatever step of one the other "
    "comes in at: count (self.failures += 1) inside the lock, never before taking it",
)
def failures_from_two_threads_both_count(ns: Namespace) -> None:
    for run in ns.harness(HARNESS + "race_at_each_step_of_a_failure", threshold=2):
        if any(isinstance(run.get(t), dict) for t in ("A", "B")):
            return  # record_failure() raised: the checks above say so
        expect(
            run["B_done"] and run["state"] == "open",
            _(
                "threshold=2, a new breaker: thread A records a failure and thread B records "
                "one right after step {n} of A's call ({step}): two failures, the breaker open"
            ).format(n=run["after"], step=run["step"]),
            _("state {state}").format(state=repr(run["state"]))
            if run["B_done"]
            else _("still waiting 5 s later"),
            _(
                "self.failures += 1 reads the count and writes it back: done outside the "
                "lock, a failure recorded by another thread in between is lost, and the "
                "breaker opens late or not at all"
            ),
        )


@CHECKS.add(
    1,
    "a success and a failure recorded by two threads at once end as the two one after the "
    "other, whatever step of one the other comes in at: reset the count and close inside "
    "the lock, and read the state in record_failure() under it too",
    timeout=20.0,
)
def a_success_and_a_failure_at_once_both_count(ns: Namespace) -> None:
    threshold = 3
    scenes = {
        False: (
            [["fail", 0]] * (threshold - 1),
            _("a breaker with {before} failures in a row").format(before=threshold - 1),
        ),
        True: (
            [["fail", 0]] * threshold + [["advance", 30.0], ["allow", 0]],
            _("a breaker opened, its trial let out 30 s later"),
        ),
    }
    for trial, (before, scene) in scenes.items():
        # What this breaker does with the two one after the other, in either order (a late
        # success while open may close the breaker or leave it open): the race must end so.
        alone = []
        for order in (["fail", "ok"], ["ok", "fail"]):
            steps = [*before, [order[0], 0], [order[1], 0]]
            out = drive(ns, [*steps, ["state", 0], ["fail", 0], ["state", 0]], threshold=threshold)
            alone.append([out[len(steps)], out[-1]])
        said = {"failure": _("a failure"), "success": _("a success")}
        for first, second in (("failure", "success"), ("success", "failure")):
            runs = ns.harness(
                HARNESS + "race_at_each_step_of_a_failure_and_a_success",
                threshold=threshold,
                first="fail" if first == "failure" else "ok",
                trial=trial,
            )
            for run in runs:
                if any(isinstance(run.get(t), dict) for t in ("A", "B", "then")):
                    return  # record_failure() or record_success() raised: the checks above say so
                expect(
                    run["B_done"] and [run["state"], run.get("then")] in alone,
                    _(
                        "threshold={threshold}, {scene}: thread A records {first} and thread B "
                        "{second} right after step {n} of A's call ({step}), then one more "
                        "failure: the states your breaker gives with the two one after the "
                        "other, {serial} or {other}"
                    ).format(
                        threshold=threshold,
                        scene=scene,
                        first=said[first],
                        second=said[second],
                        n=run["after"],
                        step=run["step"],
                        serial=repr(alone[0]),
                        other=repr(alone[1]),
                    ),
                    _("state {state}, then {then}").format(
                        state=repr(run["state"]), then=repr(run.get("then"))
                    )
                    if run["B_done"]
                    else _("still waiting 5 s later"),
                    _(
                        "record_success() resets the count and closes the breaker in one 'with "
                        "self._lock:', as record_failure() reads the state, counts and opens in "
                        "one: a reset written outside it, or a state read before it, lands "
                        "inside the other thread's call: the success is lost, or the breaker "
                        "opens after a success"
                    ),
                )


#: Slow calls whose results come in while the breaker is open, before its trial.
LATE_RESULTS = 3


@CHECKS.add(
    1,
    "a slow call's result recorded while the breaker is open is not a trial's result: it "
    "frees no extra trial (a semaphore or a count of trials out lowered by every result "
    "lets two or more trials out at the end of the cooldown)",
)
def a_late_result_frees_no_second_trial(ns: Namespace) -> None:
    for late in ("fail", "ok"):
        steps = [["fail", 0]] * 3 + [[late, 0]] * LATE_RESULTS + [["state", 0]]
        steps += [["advance", 30.0]] + [["allow", 0]] * 3
        out = drive(ns, steps, threshold=3, cooldown_s=30.0)
        if out[3 + LATE_RESULTS] != "open":
            continue  # a late success may close the breaker; the public checks judge a failure
        got = out[-3:]
        expect(
            got == [True, False, False],
            _(
                "3 failures (open), then {count} slow calls' record_{call}() while open, then "
                "30 s: allow() True for one caller (the one trial), False for the next two"
            ).format(count=LATE_RESULTS, call="success" if late == "ok" else "failure"),
            repr(got),
            _(
                "only the trial's result frees the trial: a 'trial out' flag set by allow() and "
                "cleared when the breaker opens or closes gives one trial per cooldown; a "
                "count lowered by every result goes below zero and lets several out"
            ),
        )
    # Results of calls while the dependency still worked (closed) are no trial's either: a
    # count of trials out lowered by each of them is below zero when the outage comes.
    steps = [["ok", 0]] * LATE_RESULTS + [["fail", 0]] * 3 + [["state", 0]]
    out = drive(ns, [*steps, ["advance", 30.0], *[["allow", 0]] * 3], threshold=3, cooldown_s=30.0)
    if out[3 + LATE_RESULTS] != "open":
        return  # opens_after_consecutive_failures says so
    expect(
        out[-3:] == [True, False, False],
        _(
            "{count} calls' record_success() while closed, then 3 failures (open), then 30 s: "
            "allow() True for one caller (the one trial), False for the next two"
        ).format(count=LATE_RESULTS),
        repr(out[-3:]),
        _(
            "only the trial's result frees the trial: a 'trial out' flag set by allow() and "
            "cleared when the breaker opens or closes gives one trial per cooldown; a "
            "count lowered by every result goes below zero and lets several out"
        ),
    )


#: How long an outage of failed trials one every cooldown (30 s) lasts in
#: ``a_long_outage_keeps_its_cooldown``: ten hours, past a backoff that starts after an hour.
LONG_OUTAGE_S = 36_000.0


@CHECKS.add(
    1,
    "a failed trial opens the breaker for cooldown_s however long the outage has lasted: "
    "no cooldown that grows once the outage passed an hour or a day (a backoff the "
    "docstring does not ask for)",
)
def a_long_outage_keeps_its_cooldown(ns: Namespace) -> None:
    ends = [["advance", 29.75], ["allow", 0], ["advance", 0.25], ["allow", 0]]
    scenes = (
        (30.0, int(LONG_OUTAGE_S // 30.0)),
        (SPREAD_TRIAL_S, SPREAD_TRIALS),
    )
    for every, count in scenes:
        trials = [["advance", every], ["allow", 0], ["fail", 0]] * count
        out = drive(ns, [*[["fail", 0]] * 3, *trials, *ends], threshold=3, cooldown_s=30.0)
        if out[4] is not True:
            return  # half_open_allows_one_trial says so
        before, at = out[-3], out[-1]
        expect(
            before is False and at is True,
            _(
                "an outage of {hours:g} hours (threshold=3, cooldown_s=30), a trial that fails "
                "every {every:g} s ({count} of them): allow() False 29.75 s after the last "
                "failure, True 30 s after it"
            ).format(hours=every * count / 3600, every=every, count=count),
            _("{before}, then {at}").format(before=repr(before), at=repr(at)),
            _(
                "open again for self.cooldown_s after every failed trial, the last as the "
                "first: no cooldown that grows with how long the outage has lasted"
            ),
        )


@CHECKS.add(
    1,
    "make the lock in __init__: a lock made on the first call (if self._lock is None, "
    "hasattr) races itself, two threads each make one and each holds its own, and a "
    "failure one of them counts is lost",
)
def the_lock_is_made_before_the_first_call(ns: Namespace) -> None:
    got = ns.harness(HARNESS + "race_at_the_first_failures", threshold=2)
    if not got.get("lazy"):
        return  # a lock made in __init__ (or none on self): the other races judge it
    for run in got["runs"]:
        expect(
            run["B_done"] and run["state"] == "open",
            _(
                "threshold=2, a new breaker whose lock is made on its first call: thread A "
                "records a failure, thread B records one right after step {n} of A's call "
                "({a_step}) and pauses after step {m} of its own ({b_step}) while A goes on: "
                "two failures, the breaker open"
            ).format(n=run["after"], a_step=run["A_step"], m=run["b_after"], b_step=run["B_step"]),
            _("state {state}").format(state=repr(run["state"]))
            if run["B_done"]
            else _("still waiting 5 s later"),
            _(
                "self._lock = threading.Lock() in __init__, before any thread can call the "
                "breaker: a lock made on first use (if self._lock is None: ...) is made twice "
                "when two threads call at once, and each thread holds a lock of its own"
            ),
        )


@CHECKS.add(
    1,
    "a failure reads the clock under the lock: a failure that waited for the lock does not "
    "date the opening back to before another thread's later failure",
)
def failure_time_read_once_the_lock_is_held(ns: Namespace) -> None:
    for scene in ("closed", "open", "trial"):
        got = ns.harness(
            HARNESS + "race_at_a_stale_failure_time", threshold=2, cooldown_s=30.0, scene=scene
        )
        if "opening" in got or not got.get("extends") or not got.get("inside"):
            continue  # the other checks judge a breaker that raises or keeps its first opening
        if not got.get("B_done"):
            continue  # a_result_waits_for_a_busy_lock says so
        _expect_a_refusal_after_the_later_failure(got, scene)


def _expect_a_refusal_after_the_later_failure(got: dict[str, Any], scene: str) -> None:
    scenes = {
        "closed": _("threshold=2, one failure in: thread A records the second"),
        "open": _("threshold=2, opened by two failures: thread A records a third"),
        "trial": _(
            "threshold=2, opened, 30 s on and its trial let out: the trial (thread A) fails"
        ),
    }
    expect(
        got.get("C") is False,
        scenes[scene]
        + _(
            " and, right after A reads the clock, 40 s pass and thread B records a failure; "
            "25 s later allow() is False (this breaker restarts its cooldown on a failure "
            "while open, and whichever of A and B came second came at 40 s or later)"
        ),
        _("allow() {c}").format(c=repr(got.get("C"))),
        _(
            "read self.clock.now() inside the 'with self._lock:' that changes the state: a "
            "time read before taking the lock may be written after another thread's newer "
            "one, moving the opening back and letting a trial out before the cooldown ends"
        ),
    )


@CHECKS.add(
    1,
    "Breaker(threshold, cooldown_s, clock): made with its arguments in that order, without "
    "keywords, the breaker opens at its threshold and waits its cooldown",
)
def arguments_in_the_order_given(ns: Namespace) -> None:
    got = drive(
        ns,
        [["fail", 0], ["state", 0], ["fail", 0], ["state", 0]]
        + [["advance", 7.5], ["allow", 0], ["advance", 0.25], ["allow", 0]],
        threshold=2,
        cooldown_s=7.75,
        positional=True,
    )
    if isinstance(got[0], dict) and "not_made" in got[0]:
        return  # keyword-only arguments: a caller who leaves the keywords out is told so
    expect(
        got[1] == "closed" and got[3] == "open" and got[5] is False and got[7] is True,
        _(
            "Breaker(2, 7.75, clock): closed after one failure and open after two; 7.5 s "
            "later allow() is False, at 7.75 s True"
        ),
        _("state {one} then {two}; allow() {early} at 7.5 s and {late} at 7.75 s").format(
            one=repr(got[1]), two=repr(got[3]), early=repr(got[5]), late=repr(got[7])
        ),
        _(
            "def __init__(self, threshold, cooldown_s, clock): the order the contract gives; "
            "a caller writing Breaker(5, 60.0, clock) gets a threshold of 60 or a clock of 5 "
            "from a signature in another order, and no error to say so"
        ),
    )


@CHECKS.add(
    1,
    "the lock is made once, in __init__: no call puts a new lock on self (a thread still "
    "waiting on the old one would run alongside a thread that takes the new one)",
)
def no_call_swaps_the_lock(ns: Namespace) -> None:
    got = ns.harness(HARNESS + "locks_through_every_state")
    swapped = got.get("swapped")
    if not swapped:
        return  # the other checks judge a breaker that raises
    expect(
        False,
        _(
            "threshold=2, cooldown_s=30: through closed, open, a failed trial, a successful "
            "one and late results, the lock on the breaker stays the same object"
        ),
        _("a new lock at self.{where} after call {step}, {call} while {state}").format(
            where=swapped["where"],
            step=swapped["step"],
            call={"allow": "allow()", "fail": "record_failure()"}.get(
                swapped["call"], "record_success()"
            ),
            state=swapped["state"],
        ),
        _(
            "make the lock once, in __init__, and never assign it again (nor call "
            "self.__init__() to reset: set the counts and the state back by hand): a "
            "thread blocked on the old lock goes in when it is released, while a new caller "
            "takes the new lock, and two threads change the breaker at once"
        ),
    )


@CHECKS.add(
    1,
    "making another breaker leaves the locks of the breakers already made alone: a lock "
    "on the class or in a module variable that __init__ makes again swaps the lock under "
    "the threads using an older breaker",
)
def making_a_breaker_swaps_no_lock(ns: Namespace) -> None:
    got = ns.harness(HARNESS + "locks_when_another_breaker_is_made")
    swapped = got.get("swapped")
    if not swapped:
        return  # the other checks judge a breaker that raises
    expect(
        False,
        _(
            "a breaker made and used once, then a second breaker made for another "
            "dependency: the lock the first one takes stays the same object"
        ),
        _("a new lock at {where} once the second breaker was made").format(where=swapped),
        _(
            "make each breaker's lock in __init__ on self (self._lock = threading.Lock()), "
            "or one lock on the class made once, in the class body: a lock that __init__ "
            "puts on the class or in a module variable is replaced each time a breaker is "
            "made, and a thread still inside an older breaker under the old lock runs "
            "alongside a thread that takes the new one"
        ),
    )


@CHECKS.add(
    1,
    "a slow call's success recorded while the breaker is open closes it or leaves its "
    "cooldown as it was: it does not start the cooldown again (the trial still goes out "
    "cooldown_s after the opening)",
)
def a_late_success_keeps_the_cooldown(ns: Namespace) -> None:
    steps = [["fail", 0]] * 3 + [["state", 0], ["advance", 12.5], ["ok", 0], ["state", 0]]
    steps += [["advance", 17.5], ["allow", 0]]
    out = ns.harness(HARNESS + "drive", steps, threshold=3, cooldown_s=30.0)
    if len(out) < len(steps) or out[3] != "open":
        return  # a_late_result_while_open_is_no_error and the public checks say so
    after, allowed = out[6], out[-1]
    expect(
        allowed is True,
        _(
            "threshold=3, cooldown_s=30: 3 failures (open), 12.5 s later a slow call's "
            "record_success(), 17.5 s later (30 s after the opening) allow() True: closed, "
            "or the trial"
        ),
        _("state {after} after the success, allow() {allowed} 30 s after the opening").format(
            after=repr(after), allowed=repr(allowed)
        ),
        _(
            "a success recorded while open may close the breaker (the call worked) or leave "
            "it open, but leave opened_at alone: a cooldown started again by each late "
            "success holds every call back longer than cooldown_s, and a stream of slow "
            "calls that succeed keeps the breaker from ever sending its trial"
        ),
    )

