"""Hidden checks for exercise 7: other thresholds, and no wall clock."""

from __future__ import annotations

from labkit.grading.checks import Checks, Namespace, expect
from labkit.grading.exercises.ex07.checks import drive
from labkit.grading.exercises.helpers import because_of
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


@CHECKS.add(
    1,
    "each breaker keeps its own opening time and its own trial on self: breaker B opening "
    "later does not move breaker A's cooldown, and A's trial does not hold back B's",
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
