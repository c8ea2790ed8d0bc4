"""Exercise 12: periodic slot keys, so any number of schedulers enqueue each slot once.

The student writes ``slot_key``, ``due_slots`` and ``tick``. Keys are compared with
``labkit.patterns.schedule.slot_key`` on generated names and times, and again while the
student's process runs in other time zones (a key in local time differs there).
``due_slots`` is compared with the check's own model on generated periods, times and
last slots, and at the exact boundaries. ``tick`` runs through the harness
(``labkit.grading.exercises.ex12.harness``) on a database file the check makes; two schedulers
tick in two real processes at moments 1.7 s apart, with every plain read paused to
widen the race, and the check reads the table itself: every slot once, nothing else.
"""

from __future__ import annotations

import math
import random
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from labkit.grading.checks import CheckFailed, Checks, Namespace, expect
from labkit.grading.exercises.helpers import holds_for, raised_text, short_repr
from labkit.grading.exercises.killsweep import after_every_kill, scene_seeds
from labkit.grading.exercises.kit import lab_file, raised_a, reading
from labkit.grading.exercises.labdb import add_job, all_jobs, lab_db
from labkit.lang import _
from labkit.patterns.schedule import slot_iso
from labkit.patterns.schedule import slot_key as reference_key

CHECKS = Checks("ex12", "periodic jobs keyed by slot", needs=("slot_key", "due_slots", "tick"))

HARNESS = "labkit.grading.exercises.ex12.harness:"
HOUR = 3600
T0 = 1767225600  # 2026-01-01T00:00:00Z
#: West and east of UTC (UTC-3, UTC+5:30), and Sydney in January (summer: UTC+11, daylight
#: saving time in force, so a conversion by time.timezone is an hour off). POSIX strings
#: need no tz database in the grading sandbox.
SUMMER_DST = "AEST-10AEDT,M10.1.0,M4.1.0/3"
ZONES = ("BRT3", "IST-5:30", SUMMER_DST)
#: 2026-07-01T00:00:00Z: winter in Sydney (UTC+10, no daylight saving time). With T0, in
#: its summer, whatever the date of grading one of them is on the other side of the
#: change: an offset read from the clock of now (time.altzone when tm_isdst) is an hour
#: off for one.
JULY = 1782864000
#: How long a plain read pauses in the race: long enough for the other scheduler to read.
RACE_PAUSE_S = 0.05

#: Schedule names as people write them: capitals, '_', non-ASCII letters, long ones too.
NAMES = st.from_regex(r"[a-z][a-z0-9_.-]{0,15}", fullmatch=True) | st.from_regex(
    r"[A-Za-zÉéøß日][A-Za-z0-9_.\-Ééøß日]{0,59}", fullmatch=True
)
TIMES = st.integers(min_value=0, max_value=4_102_444_800)  # up to 2100


def expected_slots(
    period: int, last: float | None, since: float, now: float, catch_up: str
) -> list[float]:
    """The check's own model of ``due_slots``."""
    slot = math.floor(now / period) * period
    slots: list[float] = []
    while slot >= since and (last is None or slot > last):
        slots.append(slot)
        if catch_up == "latest":
            break
        slot -= period
    return slots[::-1]


def _one(ns: Namespace, name: str, call: list[Any]) -> dict[str, Any]:
    [got] = ns.harness(HARNESS + "many", name, [call])
    return dict(got)


def _returned(got: dict[str, Any], what: str, hint: str) -> Any:
    if "raised" in got:
        raise CheckFailed(what, raised_text(got), hint)
    return got["returned"]


def in_slot_order(created: Any) -> Any:
    """The keys a tick returned, oldest first: the checks of what a tick creates judge the
    set of keys, and ``tick_enqueues_each_slot`` alone the order the docstring asks for."""
    if isinstance(created, (list, tuple)) and all(isinstance(k, str) for k in created):
        return sorted(created)
    return created


def _tick(
    ns: Namespace,
    path: Path,
    now: float,
    catch_up: str = "all",
    schedule: str = "nightly",
    since: float = T0,
    period: int = HOUR,
    tz: str | None = None,
) -> list[Any]:
    got = ns.harness(HARNESS + "tick", str(path), schedule, period, since, now, catch_up, tz)
    what = (
        _("tick({schedule}, now={now:g}) with TZ={tz} to return the keys it created")
        if tz
        else _("tick({schedule}, now={now:g}) to return the keys it created")
    )
    created = _returned(
        got,
        what.format(schedule=repr(schedule), now=now, tz=tz),
        _("try {name} on exercise_db(...) in the notebook and read the error").format(name="tick"),
    )
    expect(isinstance(created, list), "a list of the keys this call created", created)
    return list(created)


def _keys(conn: sqlite3.Connection) -> list[str]:
    return [job["key"] for job in all_jobs(conn)]


@CHECKS.add(
    2,
    'f"schedule:{name}:{fire time as %Y-%m-%dT%H:%M:%SZ in UTC}", e.g. '
    "datetime.fromtimestamp(fire_time, UTC).strftime(...)",
)
def slot_key_names_the_slot(ns: Namespace) -> None:
    def prop(example: tuple[str, int]) -> None:
        name, fire = example
        got = _returned(
            _one(ns, "slot_key", [name, fire]),
            _("slot_key({name}, {fire_time}) to return a key").format(
                name=repr(name), fire_time=fire
            ),
            _("a valid name and a whole number of seconds must give a key"),
        )
        want = reference_key(name, fire)
        expect(got == want, f"slot_key({name!r}, {fire}) == {want!r}", got)

    holds_for(st.tuples(NAMES, TIMES), prop)
    # Only '' and ':' are refused: a '/', a space (even alone), a '%' or a quote is a valid name.
    # '%d' in a name is text too: a name put into the strftime format turns it into the day;
    # braces are text for str.format, and a full-width '：' is not the separator ':'.
    for name in (
        "eu/west",
        "night ly",
        "50%_off",
        "100%daily",
        "o'brien",
        " ",
        "{region}_daily",
        "eu：west",
        # A long name (a job described in its name): no cap such as a VARCHAR(255)'s.
        "_".join(["warehouse_inventory_reconciliation_for_region"] * 8),
    ):
        prop((name, T0 + 2 * HOUR))


@CHECKS.add(
    2,
    "write the fire time in UTC (datetime.fromtimestamp(t, UTC)); without the tz the "
    "key follows the machine's time zone, and two schedulers in two zones disagree",
    severe=True,
)
def slot_key_is_the_same_in_every_time_zone(ns: Namespace) -> None:
    pairs = [
        ("nightly", T0 + 2 * HOUR),
        ("report", 1_700_000_000),
        ("sync", 86_399),
        ("ledger", JULY + 2 * HOUR),
    ]
    calls = [list(pair) for pair in pairs]
    want = [reference_key(name, t) for name, t in pairs]
    # POSIX zone strings (UTC-3 and UTC+5:30) need no tz database in the grading sandbox.
    for tz in ZONES:
        got = ns.harness(HARNESS + "keys_in_zone", calls, tz)
        keys = [g["returned"] if "returned" in g else raised_text(g) for g in got]
        expect(
            keys == want,
            _("the same UTC keys with TZ={tz}: {keys}").format(tz=tz, keys=want),
            keys,
            _(
                "datetime.fromtimestamp(fire_time, UTC): a zone taken from the machine, at the "
                "call or once at import (datetime.now().astimezone().tzinfo), is that "
                "machine's, and a scheduler started elsewhere writes other keys"
            ),
        )


@CHECKS.add(1, "raise ValueError when the name is empty or contains ':' (the separator)")
def slot_key_refuses_bad_names(ns: Namespace) -> None:
    for name in ("", "daily:report", ":"):
        got = _one(ns, "slot_key", [name, T0])
        expect(
            raised_a(got, "ValueError"),
            _("ValueError for the schedule name {name}").format(name=repr(name)),
            raised_text(got)
            if "raised" in got
            else _("returned {value}").format(value=repr(got["returned"])),
        )


@CHECKS.add(
    2,
    "due means since <= slot <= now and slot > last: a slot exactly at now is due, "
    "the slot equal to last is not, and slots are multiples of period_s since the epoch",
)
def due_slots_boundaries(ns: Namespace) -> None:
    cases: list[tuple[list[Any], list[float], str]] = [
        (
            [HOUR, None, T0, T0 + 2 * HOUR, "all"],
            [T0, T0 + HOUR, T0 + 2 * HOUR],
            _("now on a slot"),
        ),
        (
            [HOUR, T0, T0, T0 + 2 * HOUR, "latest"],
            [T0 + 2 * HOUR],
            _("'latest' with now on a slot"),
        ),
        ([HOUR, T0 + HOUR, T0, T0 + 2 * HOUR, "all"], [T0 + 2 * HOUR], _("last on a slot")),
        ([HOUR, T0 + 2 * HOUR, T0, T0 + 2 * HOUR, "all"], [], _("last equal to now")),
        ([HOUR, None, T0 + 1, T0 + 2 * HOUR - 1, "all"], [T0 + HOUR], _("since after a slot")),
        (
            [HOUR, None, T0 + 0.5, T0 + HOUR + 5, "all"],
            [T0 + HOUR],
            _("since half a second after a slot"),
        ),
        ([HOUR, None, T0 + 30, T0 + 40, "all"], [], _("no slot in [since, now]")),
        (
            [HOUR, None, T0 + 30, T0 + 40, "latest"],
            [],
            _("'latest' with no slot in [since, now]"),
        ),
        ([300, None, 1000, 1900, "all"], [1200, 1500, 1800], _("slots aligned to the epoch")),
        (
            [HOUR, T0 + 2 * HOUR, T0, T0 + 2 * HOUR + 100, "latest"],
            [],
            _("'latest' when last is the newest slot"),
        ),
        # Nothing is due, and nothing is wrong: never a ValueError.
        (
            [HOUR, None, T0 + 5 * HOUR, T0 + 2 * HOUR + 10, "all"],
            [],
            _("since after now: a schedule that starts later"),
        ),
        (
            [HOUR, T0 + 3 * HOUR, T0, T0 + 2 * HOUR + 10, "all"],
            [],
            _("last after now: another scheduler's clock runs ahead"),
        ),
    ]
    for call, want, what in cases:
        got = _returned(
            _one(ns, "due_slots", call),
            _("due_slots{args} to return a list").format(args=tuple(call)),
            _("due_slots raises only for a bad period or catch_up"),
        )
        expect(list(got) == want, f"due_slots{tuple(call)} == {want} ({what})", got)


@CHECKS.add(
    2,
    "walk back from the latest multiple of period_s at or before now, down to since "
    "and above last, however many that is; 'latest' keeps only the newest of them",
)
def due_slots_on_generated_schedules(ns: Namespace) -> None:
    @st.composite
    def schedules(draw: Any) -> list[Any]:
        period = draw(st.sampled_from([1, 7, 60, 300, 3600, 86400]) | st.integers(1, 100_000))
        now = draw(st.integers(0, 2_000_000_000)) + draw(st.sampled_from([0, 0.25, 0.5]))
        # Slots are multiples since the epoch: never before it. A long outage too (up to
        # 400 slots back), so a catch-up capped at some number of slots shows itself.
        back = draw(st.integers(0, 12) | st.integers(100, 400))
        since = max(0, now - back * period - draw(st.integers(0, period)))
        slot_now = math.floor(now / period) * period
        last = draw(
            st.none()
            | st.integers(0, 14).map(lambda k: slot_now - k * period)
            | st.integers(int(since) - 2 * period, int(now) + 1).map(float)
            # What fired need not sit on a whole second: a slot just after it is due.
            | st.integers(0, 14).map(lambda k: slot_now - k * period - 0.5)
        )
        return [period, last, since, now, draw(st.sampled_from(["all", "latest"]))]

    def prop(call: list[Any]) -> None:
        want = expected_slots(*call)
        got = _returned(
            _one(ns, "due_slots", call),
            _("due_slots{args} to return a list").format(args=tuple(call)),
            _("due_slots raises only for a bad period or catch_up"),
        )
        expect(list(got) == want, f"due_slots{tuple(call)} == {want}", got)

    # One long outage every time (the generated ones depend on what Hypothesis draws):
    # 100 to 400 slots missed, nothing fired yet, catch-up "all".
    for seed in scene_seeds():
        rng = random.Random(f"ex12 outage {seed}")
        period = rng.choice([60, 300, 3600])
        now = float(rng.randrange(1_000_000_000, 2_000_000_000))
        prop([period, None, now - rng.randrange(100, 401) * period, now, "all"])
    # A slot half a second after what fired is due (slot > last, not slot >= last + 1).
    prop([300, 1199.5, 0, 1300, "all"])
    holds_for(schedules(), prop, examples=40)


@CHECKS.add(1, "raise ValueError for period_s <= 0 and for a catch_up other than all/latest")
def due_slots_refuses_bad_arguments(ns: Namespace) -> None:
    # Nothing due too (now before since): the arguments are checked first, not only
    # when a slot is due.
    # 'Latest' is not 'latest' either, nor 'latest ' (a value read from a config file):
    # the contract names two values, nothing close to them.
    bad = (
        [0, None, 0, 100, "all"],
        [-60, None, 0, 100, "all"],
        [60, None, 0, 100, "most"],
        [60, None, 0, 100, "Latest"],
        [60, None, 0, 100, "latest "],
        [60, None, 0, 100, ""],
        [60, None, 0, 100, "lat"],
    )
    # Nothing due because the last slot fired (last at or past now, or within a period of
    # it): a due_slots that returns [] early, before it looks at catch_up, takes a
    # config's typo until the next slot is due.
    nothing_due = ([60, 60, 0, 100, "most"], [60, 100, 0, 100, "Latest"], [60, 160, 0, 100, ""])
    for call in (*bad, [60, None, 200, 100, "most"], [0, None, 200, 100, "all"], *nothing_due):
        got = _one(ns, "due_slots", call)
        expect(
            raised_a(got, "ValueError"),
            _("ValueError for due_slots{args}").format(args=tuple(call)),
            raised_text(got)
            if "raised" in got
            else _("returned {value}").format(value=repr(got["returned"])),
        )


@CHECKS.add(
    1,
    "insert one job per due slot with key=slot_key(schedule, slot), run_after=slot, "
    "and return the keys this call inserted, oldest first (INSERT ... ON CONFLICT (key) "
    "DO NOTHING RETURNING key, slot by slot)",
)
def tick_enqueues_each_slot(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        # A now with a fraction of a second: updated_at is that now, not int(now).
        first = _tick(ns, path, T0 + HOUR + 5.25)
        want = [reference_key("nightly", T0), reference_key("nightly", T0 + HOUR)]
        expect(first == want, _("the first tick to create {keys}").format(keys=want), first)
        expect(_keys(conn) == want, _("the table to hold {keys}").format(keys=want), _keys(conn))
        missed, job = all_jobs(conn)
        expect(
            job["run_after"] == T0 + HOUR and job["kind"] == "nightly",
            _("run_after={run_after} (the slot) and kind='nightly'").format(run_after=T0 + HOUR),
            f"run_after={job['run_after']}, kind={job['kind']!r}",
        )
        # 00:00 was missed (the tick came at 01:00:05): its job is still dated by its slot.
        expect(
            missed["run_after"] == T0,
            _(
                "run_after={run_after} for the missed slot 00:00 too: every job's run_after is "
                "its slot, never the moment of the tick that caught it up"
            ).format(run_after=T0),
            f"run_after={missed['run_after']}",
        )
        expect(
            job["updated_at"] == T0 + HOUR + 5.25,
            _("updated_at={now} (the now tick was given, not the machine's clock)").format(
                now=T0 + HOUR + 5.25
            ),
            f"updated_at={job['updated_at']}",
        )
        again = _tick(ns, path, T0 + HOUR + 9)
        expect(again == [], "[] from a tick in the same hour (nothing new is due)", again)
        expect(len(_keys(conn)) == 2, "still 2 jobs", _keys(conn))
        # A longer catch-up, oldest first too: keys gathered in a set come back in the
        # order of their hashes, which changes from one process to the next.
        later = _tick(ns, path, T0 + 13 * HOUR + 5)
        want = [reference_key("nightly", T0 + k * HOUR) for k in range(2, 14)]
        expect(
            later == want,
            _(
                "the next tick to create the 12 keys from 02:00 to 13:00 (at 13:00:05), "
                "oldest first"
            ),
            short_repr(later, 300),
            _(
                "append each key RETURNING gave back to a list, in the order of due_slots: a "
                "set returns its keys in the order of their hashes"
            ),
        )
        # A 'latest' catch-up after hours away: its one job is dated by its slot too.
        latest = _tick(ns, path, T0 + 16 * HOUR + 5, catch_up="latest")
        newest = reference_key("nightly", T0 + 16 * HOUR)
        dated: dict[str, Any] | None = next((j for j in all_jobs(conn) if j["key"] == newest), None)
        expect(
            latest == [newest] and dated is not None and dated["run_after"] == T0 + 16 * HOUR,
            _(
                "a 'latest' tick at 16:00:05 to create {key} alone, with run_after={run_after} "
                "(its slot, as every job's)"
            ).format(key=newest, run_after=T0 + 16 * HOUR),
            _("created {created}, run_after={run_after}").format(
                created=short_repr(latest, 200),
                run_after=None if dated is None else dated["run_after"],
            ),
        )
        expect(
            dated is not None and dated["updated_at"] == T0 + 16 * HOUR + 5,
            _("updated_at={now} for the 'latest' job too (the now of its tick)").format(
                now=T0 + 16 * HOUR + 5
            ),
            f"updated_at={None if dated is None else dated['updated_at']}",
        )


@CHECKS.add(
    2,
    "read what already fired from the table (the newest key with the prefix "
    "'schedule:<name>:'), never from memory: a scheduler that just started, or "
    "another one, must not fill a gap that a 'latest' catch-up left on purpose",
    timeout=20.0,
    severe=True,
)
def tick_reads_what_fired_from_the_table(ns: Namespace) -> None:
    # A name outside ASCII too: its prefix is as many characters as it shows, not bytes.
    # And one with LIKE's '_' and '%' and a backslash (its usual ESCAPE) in it: a LIKE that
    # escapes some of them and not the others never finds the schedule's own keys.
    for name in ("close", "clôture", "Fecho_50%\\Mês"):
        _reads_what_fired_in(ns, name)
    # Every 15 s, and what fired at 02:00:45: the key's time is read back to the second (a
    # time cut to the minute, [:16], refills 02:00:15 and 02:00:30, a gap left on purpose).
    _reads_what_fired_in(ns, "pulse", period=15, fired=T0 + 2 * HOUR + 45)


#: Other jobs in the table of ``tick_reads_what_fired_from_the_table``: more than a window
#: of the newest rows or keys holds.
OTHER_JOBS = 300


def _reads_what_fired_in(
    ns: Namespace, name: str, period: int = HOUR, fired: float = T0 + 2 * HOUR
) -> None:
    with lab_file(ns) as (conn, path):
        # Another scheduler fired 02:00 only (it caught up with 'latest' after downtime).
        # A schedule no other check ticks: this process has never seen it. Its job ran
        # and succeeded: a slot fired whatever became of its job since.
        add_job(conn, reference_key(name, fired), kind=name, state="succeeded", run_after=fired)
        # Hundreds of other jobs since, inserted after it and sorting after its key: the
        # newest key of the schedule is read from the whole table, not from a window of
        # the newest rows (ORDER BY id DESC LIMIT 100) or keys (ORDER BY key DESC LIMIT 50).
        conn.execute("BEGIN")
        for n in range(OTHER_JOBS):
            add_job(conn, f"user:{n:03d}:export", kind="export", run_after=fired + period)
        conn.execute("COMMIT")
        now = fired + 2 * period + min(30, period // 2)
        created = _tick(ns, path, now, schedule=name, period=period)
        want = [reference_key(name, fired + period), reference_key(name, fired + 2 * period)]
        expect(
            in_slot_order(created) == want and len(_keys(conn)) == 3 + OTHER_JOBS,
            (
                _(
                    "only the slots after 02:00: {keys}, 3 jobs of {name} in all (beside "
                    "{others} jobs of other keys, inserted after 02:00's)"
                )
                if period == HOUR
                else _(
                    "only the slots after {fired}, every {period} s: {keys}, 3 jobs of {name} "
                    "in all (beside {others} jobs of other keys, inserted after it): the key's "
                    "time read back to the second"
                )
            ).format(
                fired=slot_iso(fired), period=period, keys=want, name=repr(name), others=OTHER_JOBS
            ),
            _("created {created}; the table holds {count} jobs").format(
                created=short_repr(created, 300), count=len(_keys(conn))
            ),
        )


@CHECKS.add(
    3,
    "two schedulers tick the same schedule at the same moments in two processes: "
    "the key must come from the slot (never from now) and a key already inserted "
    "must be skipped by the INSERT itself (ON CONFLICT DO NOTHING), not by a SELECT "
    "before it",
    timeout=40.0,
    severe=True,
)
def two_schedulers_enqueue_each_slot_once(ns: Namespace) -> None:
    hours = 6
    # Scheduler a ticks 0.2 s after each hour, scheduler b 1.9 s after: clocks never agree.
    nows = [[T0 + k * HOUR + skew for k in range(hours)] for skew in (0.2, 1.9)]
    with lab_file(ns) as (conn, path):
        got = ns.harness(
            HARNESS + "tick_race", str(path), "nightly", HOUR, T0, nows, "all", RACE_PAUSE_S
        )
        expect(
            got["hung"] == 0,
            "both schedulers to finish",
            _("{count} still running").format(count=got["hung"]),
        )
        raised = [v[1] for v in got["results"].values() if v[0] == "raised"]
        expect(
            not raised,
            "no scheduler to fail",
            _("your code raised {errors}").format(errors="; ".join(raised)),
        )
        keys = _keys(conn)
        want = [reference_key("nightly", T0 + k * HOUR) for k in range(hours)]
        twice = sorted(k for k, n in Counter(keys).items() if n > 1)
        expect(
            sorted(keys) == want,
            _("the {count} slot keys, each once").format(count=hours),
            _("{count} jobs: {keys} ({twice_count} twice)").format(
                count=len(keys), keys=short_repr(sorted(keys), 300), twice_count=len(twice)
            )
            if twice
            else _("{count} jobs: {keys}").format(
                count=len(keys), keys=short_repr(sorted(keys), 300)
            ),
        )
        created = [k for v in got["results"].values() for k in v[1]["created"]]
        expect(
            sorted(created) == want,
            "the two schedulers' returned keys to add up to the table, each slot once",
            short_repr(sorted(created), 300),
        )


@CHECKS.add(
    2,
    "a scheduler killed between any two of its inserts and started again must leave "
    "every due slot once: it resumes after the newest key in the table, so insert the "
    "slots oldest first (or all in one transaction)",
    severe=True,
)
def a_killed_scheduler_restarts_without_losing_a_slot(ns: Namespace) -> None:
    hours = 5
    want = [reference_key("nightly", T0 + k * HOUR) for k in range(hours)]

    def judge(life: Path) -> tuple[bool, str]:
        with reading(life / "jobs.db") as conn:
            keys = _keys(conn)
        return sorted(keys) == want, _("{count} jobs: {keys}").format(
            count=len(keys), keys=short_repr(sorted(keys), 300)
        )

    after_every_kill(
        ns,
        HARNESS + "tick_kills",
        lambda folder: lab_db(folder / "jobs.db").close(),
        ["nightly", HOUR, T0, T0 + (hours - 1) * HOUR + 5, "all"],
        judge,
        _("the {count} slot keys, each once,").format(count=hours),
        _("the scheduler's restart"),
        _(
            "the restart resumes after the newest key in the table: insert the slots oldest "
            "first, or all of them in one transaction"
        ),
    )
