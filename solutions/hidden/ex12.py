"""Hidden checks for exercise 12: other schedules' keys, 'latest' in tick, the machine's
time zone, a retried slot job, a long outage (thousands of slots, years back), and two
schedulers in every order.

Each scene is drawn twice under ``labkit grade`` (``killsweep.scene_seeds``): from the
seed the project's own tests use, and from the grading run's, which nobody has seen.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from random import Random
from typing import Any

from labkit.grading.checks import Checks, Namespace, expect
from labkit.grading.exercises.ex12.checks import (
    HARNESS,
    HOUR,
    JULY,
    SUMMER_DST,
    T0,
    ZONES,
    _keys,
    _tick,
    expected_slots,
    in_slot_order,
)
from labkit.grading.exercises.helpers import expect_left_as_given, raised_text, short_repr
from labkit.grading.exercises.killsweep import after_every_kill, scene_seeds
from labkit.grading.exercises.kit import lab_file, reading
from labkit.grading.exercises.labdb import add_job, all_jobs, lab_db
from labkit.grading.exercises.racesweep import after_every_schedule
from labkit.lang import _
from labkit.patterns.schedule import slot_iso
from labkit.patterns.schedule import slot_key as reference_key

CHECKS = Checks("ex12", hidden=True)


def _keys_between(name: str, first: float, last: float, period: int) -> list[str]:
    """The keys of ``name``'s slots from ``first`` to ``last``, both included."""
    count = int((last - first) // period) + 1
    return [reference_key(name, first + k * period) for k in range(count)]


def _held(keys: list[str], name: str, want: list[str]) -> str:
    """What the table holds of ``name``, said against what it should hold."""
    mine = [k for k in keys if k.startswith(f"schedule:{name}:")]
    missing = sorted(set(want) - set(mine))
    extra = sorted(k for k, n in (Counter(mine) - Counter(want)).items() for _n in range(n))
    said = _("the table holds {count} jobs of {name}").format(count=len(mine), name=repr(name))
    if missing:
        said += "; " + _("missing {count}: {keys}").format(
            count=len(missing), keys=short_repr(missing, 160)
        )
    if extra:
        said += "; " + _("not due or twice: {keys}").format(keys=short_repr(extra, 160))
    return said


def _expect_left_alone(conn: Any, before: list[dict[str, Any]], what: str) -> None:
    """Every job of ``before`` (the table before a tick) is still in the table as it was:
    a tick only inserts. One that marks the jobs a 'latest' catch-up collapses as dead,
    or puts a dead slot's job back to pending, loses a run or runs a slot twice."""
    now = {job["key"]: job for job in all_jobs(conn)}
    changed = []
    for job in before:
        after = now.get(job["key"])
        if after is None:
            changed.append(_("{key} deleted").format(key=job["key"]))
        elif after != job:
            diff = ", ".join(
                f"{column} {job[column]!r} -> {after[column]!r}"
                for column in job
                if after[column] != job[column]
            )
            changed.append(f"{job['key']}: {diff}")
    expect(
        not changed,
        _(
            "the jobs already in the table left as they were ({what}): a tick only inserts "
            "the due slots' jobs"
        ).format(what=what),
        short_repr(changed, 300),
        _(
            "touch no other row: a job already enqueued is the worker's to run (a 'latest' "
            "catch-up collapses the slots it has not enqueued, never the jobs it has), and "
            "a dead one is the operator's (set back to pending, its slot runs twice)"
        ),
    )


@CHECKS.add(
    2,
    "the last slot of 'report' is read from keys starting with 'schedule:report:' "
    "(colon included): 'schedule:reports:...' belongs to another schedule",
    severe=True,
)
def another_schedule_with_a_longer_name(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        # 'report' last fired 01:00 by a 'latest' catch-up: 00:00 was left out on purpose.
        add_job(conn, reference_key("reports", T0 + 5 * HOUR), kind="reports")
        # A job of kind 'report' enqueued by hand under a key of another shape: what
        # fired is read from the keys, not from the kind.
        add_job(conn, "user:42:report", kind="report")
        add_job(conn, reference_key("report", T0 + HOUR), kind="report", run_after=T0 + HOUR)
        created = _tick(ns, path, T0 + 3 * HOUR + 1, schedule="report")
        want = [reference_key("report", T0 + 2 * HOUR), reference_key("report", T0 + 3 * HOUR)]
        expect(
            in_slot_order(created) == want,
            _("'report' to catch up with {keys}").format(keys=want),
            created,
        )


@CHECKS.add(
    1,
    "after downtime, catch_up='latest' enqueues only the newest missed slot (tick passes "
    "the catch_up it is given to due_slots): every missed slot runs an effect the "
    "schedule promised to run once",
    severe=True,
)
def tick_catches_up_with_the_latest_slot(ns: Namespace) -> None:
    _tick_catches_up_with_the_latest_slot(ns)
    # A schedule of seconds since 1970, nothing fired: 'latest' is one slot, never a
    # list of every second since then with the newest kept.
    now = T0 + 7 * HOUR + 0.5
    want = [reference_key("pulse", T0 + 7 * HOUR)]
    got = ns.harness(HARNESS + "tick_latest_bounded", "pulse", 1, 0, now, BOUNDED_S)
    expect(
        not got.get("hung") and "raised" not in got and got.get("table") == want,
        _(
            "tick('pulse', period_s=1, since=0, now={now}, catch_up='latest') on a table "
            "where nothing fired to enqueue {keys} alone, at once and in little memory"
        ).format(now=now, keys=want),
        _("still running after {seconds:g} s").format(seconds=BOUNDED_S)
        if got.get("hung")
        else raised_text(got)
        if "raised" in got
        else _("the table holds {keys}").format(keys=short_repr(got.get("table"), 200)),
        _(
            "pass catch_up to due_slots as given: listing every due slot ('all') to keep "
            "the newest walks every second since 'since', billions of them"
        ),
    )


def _tick_catches_up_with_the_latest_slot(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        _tick(ns, path, T0 + 10, catch_up="latest")
        before = all_jobs(conn)
        created = _tick(ns, path, T0 + 7 * HOUR + 10, catch_up="latest")
        want = [reference_key("nightly", T0 + 7 * HOUR)]
        expect(
            in_slot_order(created) == want,
            _("{keys} after seven hours away").format(keys=want),
            created,
        )
        expect(len(_keys(conn)) == 2, "2 jobs in the table", _keys(conn))
        _expect_left_alone(
            conn,
            before,
            _("00:00's job, enqueued and still pending, through a 'latest' catch-up at 07:00:10"),
        )
    # Nothing fired yet (a new schedule, or a table restored empty) and since hours back:
    # 'latest' holds for the first tick too, or every slot since then runs.
    with lab_file(ns) as (conn, path):
        created = _tick(ns, path, T0 + 5 * HOUR + 10, catch_up="latest")
        want = [reference_key("nightly", T0 + 5 * HOUR)]
        expect(
            in_slot_order(created) == want and _keys(conn) == want,
            _(
                "only {keys} from the first tick with catch_up='latest' on a table where "
                "nothing has fired, since five hours back"
            ).format(keys=want),
            _("created {created}; the table holds {count} jobs").format(
                created=short_repr(created, 300), count=len(_keys(conn))
            ),
        )


@CHECKS.add(
    2,
    "parse the newest key's fire time back as UTC (strptime(...).replace(tzinfo=UTC)"
    ".timestamp(), or calendar.timegm): a naive .timestamp() reads it in the machine's "
    "zone, so a scheduler west of UTC skips slots and one east of it refills old ones",
    severe=True,
)
def tick_reads_what_fired_in_every_time_zone(ns: Namespace) -> None:
    for seed in scene_seeds():
        _tick_reads_what_fired_in_every_time_zone_in(ns, Random(f"{seed}:zones"))


def _tick_reads_what_fired_in_every_time_zone_in(ns: Namespace, rng: Random) -> None:
    # Sydney in its winter too: an offset read from the clock of now (time.altzone when
    # tm_isdst) is right for one season only, whatever the date of grading.
    for tz, base in [*((tz, T0) for tz in ZONES), (SUMMER_DST, JULY)]:
        # In summer time a by-hand conversion is an hour early: periods under an hour
        # show it (with an hour, the refilled slot is the one that fired, and is skipped).
        period = rng.choice([900, 1800] if tz == SUMMER_DST else [900, 1800, HOUR])
        fired = base + rng.randint(2, 6) * period
        missed = rng.randint(2, 4)
        now = fired + missed * period + rng.randint(0, period - 1)
        want = _keys_between("close", fired + period, fired + missed * period, period)
        with lab_file(ns) as (conn, path):
            add_job(conn, reference_key("close", fired), kind="close", run_after=fired)
            created = _tick(ns, path, now, schedule="close", period=period, tz=tz)
            keys, held = _keys(conn), [reference_key("close", fired), *want]
            expect(
                in_slot_order(created) == want and sorted(keys) == sorted(held),
                _(
                    "with TZ={tz}, period {period} s and {fired} fired, only the {missed} slots "
                    "after it: {keys}"
                ).format(
                    tz=tz,
                    period=period,
                    fired=slot_iso(fired),
                    missed=missed,
                    keys=short_repr(want, 200),
                ),
                _("created {created}; {table}").format(
                    created=short_repr(created, 200), table=_held(keys, "close", held)
                ),
                _(
                    "read the key's time back as UTC (strptime(...).replace(tzinfo=UTC)): never "
                    "in a zone taken from the machine, at the call or once at import"
                ),
            )


@CHECKS.add(
    2,
    "match your own keys with substr(key, 1, :n) = :prefix (or key >= :prefix AND key "
    "< :end): LIKE treats '_' as any character and ignores case, GLOB reads '*', '?' and "
    "'[' as wildcards, instr() or LIKE '%…' also find the prefix inside another job's "
    "key, and slot_key must keep the name as given, or 'Daily_Report' reads "
    "or takes the keys of 'daily-report'; bind the name as a parameter (a quote or a "
    "backslash in it breaks SQL built with an f-string, {key!r} too), spaces and all",
    severe=True,
)
def names_with_underscores_and_capitals_are_their_own_schedules(ns: Namespace) -> None:
    for seed in scene_seeds():
        _own_schedules_in(ns, Random(f"{seed}:names"))
        # GLOB's wildcards in a name ('[EU]' one of E or U, '*', '?'): 'BackupE-eu1_Daily2'
        # matches the pattern 'schedule:Backup[EU]*_Daily?:*' (and is as long: its keys parse).
        # 'BackupE*_Daily?' matches it with '*' and '?' escaped ('[*]', '[?]') and '[' not.
        _own_schedules_in(
            ns,
            Random(f"{seed}:glob"),
            "Backup[EU]*_Daily?",
            ("BackupE-eu1_Daily2", "BackupE*_Daily?"),
        )
        # LIKE's '%' in a name: with '_' escaped and case_sensitive_like on, the pattern
        # 'schedule:Sale\_50%\_EU:%' still reads 'Sale_50x_EU' (as long: its keys parse).
        _own_schedules_in(ns, Random(f"{seed}:percent"), "Sale_50%_EU", ("Sale_50x_EU",))
        # A quote in the name (SQL built with an f-string breaks on it) and a leading space
        # (a name stripped by slot_key takes the keys of the schedule without it).
        _own_schedules_in(ns, Random(f"{seed}:quote"), " Fecho_d'Ávila", ("Fecho_d'Ávila",))
        # Both quotes and a backslash: SQL that quotes the name itself, '{key}', "{key}"
        # or {key!r} (Python's quoting, not SQL's), breaks on one of them or writes
        # another key.
        _own_schedules_in(ns, Random(f"{seed}:quotes"), 'Relatório "Q1" d\'Ávila\\EU')
        # Names Unicode normalization changes: a ligature ('ﬁ', NFKC: 'fi') and an accent
        # sent as a combining mark (NFC: one code point). A slot_key that normalizes the
        # name gives both schedules one set of keys.
        _own_schedules_in(ns, Random(f"{seed}:nfkc"), "ﬁscal_close", ("fiscal_close",))
        _own_schedules_in(ns, Random(f"{seed}:nfc"), "Fe\u0301rias_RH", ("Férias_RH",))
        # Long names that differ only at their end: a name cut to some length (64, 100)
        # gives both one set of keys; a name refused past a length never fires.
        stem = "warehouse_inventory_reconciliation_for_the_southern_region_" * 2
        _own_schedules_in(ns, Random(f"{seed}:long"), stem + "eu", (stem + "us",))


def _own_schedules_in(
    ns: Namespace, rng: Random, own: str | None = None, lookalikes: tuple[str, ...] = ()
) -> None:
    if own is None:
        own = rng.choice(
            ["Daily_Report", "EU_Sync", "Nightly_Backup", "Clôture_Mois", "Ärzte_Export"]
        )
    # (A name already in lower case is no look-alike of itself.)
    others = [o for o in dict.fromkeys([own.replace("_", "-"), own.lower(), *lookalikes])
              if o != own]  # fmt: skip
    period = rng.choice([900, 1800, HOUR])
    since = T0 + rng.randint(0, 3) * period
    now = since + rng.randint(2, 4) * period + rng.randint(0, period - 1)
    want = _keys_between(own, since, now, period)
    with lab_file(ns) as (conn, path):
        # Older schedules with look-alike names, on time up to now; ``own`` is new.
        for other in others:
            for key in _keys_between(other, T0, now, period):
                add_job(conn, key, kind=other)
        # Another job's key that holds ``own``'s prefix further in (an upload of a
        # month-old slot's report), sorting after every schedule key: a prefix found
        # anywhere in the key (instr, LIKE '%…%', Python's ``in``) reads it as fired.
        add_job(conn, "upload:" + reference_key(own, now + 30 * DAY), kind="upload")
        before = _keys(conn)
        created = _tick(ns, path, now, schedule=own, period=period, since=since)
        keys = _keys(conn)
        expect(
            in_slot_order(created) == want and sorted(keys) == sorted(before + want),
            _(
                "the new schedule {name} (beside {others}) to get its own {count} slots "
                "{keys}, the others untouched"
            ).format(name=repr(own), others=others, count=len(want), keys=short_repr(want, 200)),
            _("created {created}; {table}").format(
                created=short_repr(created, 200), table=_held(keys, own, want)
            ),
        )


@CHECKS.add(
    2,
    "what fired is the newest KEY with the prefix (keys sort by time), not max(run_after), "
    "which a retry moves later, nor the row inserted last, which a re-run by hand is",
    severe=True,
)
def last_fired_is_the_newest_key(ns: Namespace) -> None:
    for seed in scene_seeds():
        _last_fired_is_the_newest_key_in(ns, Random(f"{seed}:newest"))
        _the_newest_of_a_long_history_in(ns, Random(f"{seed}:history"))


def _the_newest_of_a_long_history_in(ns: Namespace, rng: Random) -> None:
    """A schedule of minutes that has fired for a day or two (thousands of keys, in the
    order they fired), then a 'latest' catch-up after downtime: the newest key is read
    from all of them, not from a first page (fetchmany(1000), LIMIT 1000 in key or row
    order), which holds an older one and refills the slots the catch-up left on purpose."""
    period = 60
    count = rng.randint(1500, 2500)
    latest = T0 + (count - 1 + rng.randint(5, 20)) * period
    missed = rng.randint(2, 4)
    now = latest + missed * period + rng.randint(0, period - 1)
    want = _keys_between("metrics", latest + period, latest + missed * period, period)
    with lab_file(ns) as (conn, path):
        conn.execute("BEGIN")
        for slot in [*(T0 + k * period for k in range(count)), latest]:
            add_job(conn, reference_key("metrics", slot), kind="metrics", state="succeeded")
        conn.execute("COMMIT")
        created = _tick(ns, path, now, schedule="metrics", period=period, since=T0)
        keys = _keys(conn)
    expect(
        in_slot_order(created) == want and len(keys) == count + 1 + len(want),
        _(
            "after {count} slots of a minute schedule and then {latest} alone (a 'latest' "
            "catch-up), only the {missed} slots after {latest}: {keys}"
        ).format(count=count, latest=slot_iso(latest), missed=missed, keys=short_repr(want, 200)),
        _("created {created}; the table holds {jobs} jobs").format(
            created=short_repr(created, 200), jobs=len(keys)
        ),
        _(
            "read the newest key of all the schedule's keys (SELECT max(key) ... ): a first "
            "page of them (fetchmany, LIMIT) holds an older one"
        ),
    )


def _last_fired_is_the_newest_key_in(ns: Namespace, rng: Random) -> None:
    period = rng.choice([300, 600, 900])
    fired = T0 + rng.randint(4, 8) * period
    backoff = rng.randint(3, 6)
    missed = backoff + rng.randint(1, 3)
    now = fired + missed * period + rng.randint(0, period - 1)
    want = _keys_between("billing", fired + period, fired + missed * period, period)
    retry_at = fired + backoff * period
    # A 'latest' catch-up fired ``fired``; its job failed and waits for its retry, or
    # failed for good (dead: the slot still fired, its run is an operator's business);
    # then an operator re-ran an older missed slot by hand (a newer row, older slot).
    # Or its retry is still to come: a read of what fired among the jobs whose run_after
    # has come (the claim's test) misses the newest key and refills the slots before it.
    later = fired + (missed + 1) * period  # the slot after now's
    fates = [
        (
            "retry_wait",
            retry_at,
            _("its job retries at {retry_at}").format(retry_at=slot_iso(retry_at)),
        ),
        (
            "retry_wait",
            later,
            _("its job retries at {retry_at}, after this tick's now").format(
                retry_at=slot_iso(later)
            ),
        ),
        ("dead", fired, _("its job is dead, and a dead job's slot fired all the same")),
        (
            "retry_wait",
            retry_at,
            _(
                "an operator moved its job to the queue 'slow', and it keeps the kind it had "
                "before a rename ('billing_v1'): the key still says it fired"
            ),
        ),
    ]
    for n, (state, run_after, fate) in enumerate(fates):
        with lab_file(ns) as (conn, path):
            # Each row's updated_at is when it last changed: the failure of ``fired``'s
            # job, then the re-run, just now (neither says which slot fired last).
            add_job(
                conn,
                reference_key("billing", fired),
                kind="billing_v1" if n == len(fates) - 1 else "billing",
                queue="slow" if n == len(fates) - 1 else "default",
                state=state,
                attempt=2 if state == "retry_wait" else 3,
                run_after=run_after,
                updated_at=fired + 60,
            )
            rerun = fired - 3 * period
            # The re-run failed too and retries a period after ``fired``'s job would:
            # the row with the latest run_after holds an older slot than the newest key.
            add_job(
                conn,
                reference_key("billing", rerun),
                kind="billing",
                state="retry_wait",
                attempt=1,
                run_after=retry_at + period,
                updated_at=now - 30,
            )
            before = all_jobs(conn)
            created = _tick(ns, path, now, schedule="billing", period=period, since=T0)
            keys = _keys(conn)
            expect(
                in_slot_order(created) == want,
                _(
                    "the {missed} slots after {fired} (the newest key; {fate}; {rerun} was "
                    "re-run by hand): {keys}"
                ).format(
                    missed=missed,
                    fired=slot_iso(fired),
                    fate=fate,
                    rerun=slot_iso(rerun),
                    keys=short_repr(want, 200),
                ),
                _("created {created}; {table}").format(
                    created=short_repr(created, 200),
                    table=_held(
                        keys,
                        "billing",
                        [reference_key("billing", t) for t in (fired, rerun)] + want,
                    ),
                ),
            )
            _expect_left_alone(conn, before, fate)
    # The schedule ticked every third of a period before its period was made longer: the
    # newest key is off today's grid. The next due slot is the first multiple of the
    # period after it, not that key plus a period (a slot in between is lost).
    off = fired + period // 3
    with lab_file(ns) as (conn, path):
        for slot in (fired, off):
            add_job(conn, reference_key("billing", slot), kind="billing", state="succeeded")
        created = _tick(ns, path, now, schedule="billing", period=period, since=T0)
        expect(
            in_slot_order(created) == want,
            _(
                "the {missed} slots after {off} (the newest key, fired when the schedule "
                "ticked every {old} s, before its period became {period} s): {keys}"
            ).format(
                missed=missed,
                off=slot_iso(off),
                old=period // 3,
                period=period,
                keys=short_repr(want, 200),
            ),
            _("created {created}; {table}").format(
                created=short_repr(created, 200),
                table=_held(
                    _keys(conn),
                    "billing",
                    [reference_key("billing", t) for t in (fired, off)] + want,
                ),
            ),
            _(
                "pass the newest key's time to due_slots as last: the slots are the "
                "multiples of period_s after it, and last + period_s is off the grid when "
                "the key is"
            ),
        )


@CHECKS.add(
    2,
    "after a long outage catch_up='all' enqueues every missed slot in one tick, however "
    "many (thousands of minutes) and however far back (years of days): no cap on their "
    "number and no lookback window, no single statement past SQLite's limits, and "
    "committed oldest first, so that a kill mid catch-up leaves no slot missing below "
    "the newest key",
    # A right tick holding a number up to TICK_CAP_SCENE (a batch of 100_000, a timeout
    # of 60_000 ms) pays for a catch-up one slot past it: ten to twenty seconds of inserts
    # one by one on a loaded machine, on top of the other outages.
    timeout=60.0,
    severe=True,
)
def a_long_outage_enqueues_every_missed_slot(ns: Namespace) -> None:
    for seed in scene_seeds():
        rng = Random(f"{seed}:outage")
        # Many slots (a cap on their number: 100, 1000, a day of minutes) and a long span
        # (a lookback window: a day, a week, a month, a year), each in a tick of its own.
        _a_long_outage_enqueues_every_missed_slot_in(ns, rng, 60, rng.randint(1500, 2000))
        _a_long_outage_enqueues_every_missed_slot_in(ns, rng, 86400, rng.randint(400, 600))
    # More than a cap kept in tick (due_slots(...)[-5000:], 10000 slots) and farther back
    # than a lookback window (two years, three, five), on a table in memory, where twelve
    # thousand inserts take a fraction of a second.
    _a_huge_outage_enqueues_every_missed_slot(ns, 60, 12_000)
    _a_huge_outage_enqueues_every_missed_slot(ns, 86400, 2_000)
    # A weekly schedule down since the epoch's first week (its slot 0 fired): every
    # lookback window shorter than the 56 years since 1970 (ten years, twenty) shows.
    week = 7 * 86400
    _a_huge_outage_enqueues_every_missed_slot(ns, week, int((JULY + 30.5) // week))
    # A cap past twelve thousand slots (due_slots(...)[-20000:], MAX_CATCH_UP = 50_000)
    # is a number written in the code: a catch-up one slot past it, built only for code
    # that holds such a number (up to TICK_CAP_SCENE slots).
    caps = _caps_written_in(ns, "tick", 12_000)
    if caps and min(caps) <= TICK_CAP_SCENE:
        _a_huge_outage_enqueues_every_missed_slot(
            ns, 60, max(n for n in caps if n <= TICK_CAP_SCENE) + 1
        )
    # A cap past that (missed[-200_000:], min(n, 500_000), 10**6): a catch-up one slot
    # past each such number, stopped after its first inserts (TICK_HEAD_SCENE).
    big = [n for n in caps if TICK_CAP_SCENE < n <= TICK_HEAD_SCENE]
    for cap in big:
        _a_vast_outage_starts_with_its_oldest_slot(ns, 60, cap + 1, big)
    # A cap that is a whole number of hours in seconds or of minutes in milliseconds
    # ([-86_400:], a day of seconds; 30 * 24 * 60, a month of minutes; 7 * 24 * 3600;
    # 120_000) is left out above, where a whole catch-up would cost a period constant of
    # right code seconds: here it costs a stopped catch-up one slot past it.
    periods = [n for n in _written_in(ns, "tick", 12_000) if n not in caps and n <= TICK_HEAD_SCENE]
    for cap in periods:
        _a_vast_outage_starts_with_its_oldest_slot(ns, 60, cap + 1, periods)
    # And a cap written nowhere (a product of two constants at run time, a length read
    # from a setting): more than a year of minutes, stopped after its first inserts.
    _a_vast_outage_starts_with_its_oldest_slot(ns, 60, CATCH_UP_FLOOR + 1, [])


def _written_in(ns: Namespace, function: str, low: int) -> list[int]:
    """The whole numbers from ``low`` up written in ``function``'s code (and what it
    calls), constant expressions folded (``30 * 24 * 60`` is 43200)."""
    written = ns.harness(HARNESS + "ints_written_in", [function])
    return [n for n in written if n >= low]


def _caps_written_in(ns: Namespace, function: str, low: int) -> list[int]:
    """The whole numbers from ``low`` up written in ``function``'s code (and what it calls)
    that may be a cap on a catch-up: a whole number of hours in seconds (86400, 604800) or
    of minutes in milliseconds (60_000, a busy timeout) is a period, and building a
    catch-up one slot past it would only cost right code time."""
    return [n for n in _written_in(ns, function, low) if n % 3600 and n % 60_000]


#: A catch-up of more than a year of minutes (525_600) that every tick and every
#: due_slots is given, whatever numbers its code holds: a cap computed at run time
#: shows there. Stopped after its first inserts, it costs a tick that lists its keys
#: first about two seconds.
CATCH_UP_FLOOR = 600_000


#: The largest cap written in tick's code that ``a_long_outage_enqueues_every_missed_slot``
#: runs a catch-up one slot past (a hundred thousand inserts one by one on a table in
#: memory take five to ten seconds through the harness, more on a loaded machine).
TICK_CAP_SCENE = 120_000


#: The largest cap written in tick's code that ``a_long_outage_enqueues_every_missed_slot``
#: runs a catch-up one slot past, stopped after the first ``HEAD`` inserts: listing two
#: million minutes costs due_slots about a tenth of a second.
TICK_HEAD_SCENE = 2**21
HEAD = 3


def _a_vast_outage_starts_with_its_oldest_slot(
    ns: Namespace, period: int, n: int, caps: list[int]
) -> None:
    """A catch-up of ``n`` slots whose tick is stopped after its first ``HEAD`` inserts:
    a tick that inserts oldest first and starts past the oldest slot dropped it. One that
    starts with the newest (newest first), or in no order, or whose inserts a rollback
    took back, says nothing there. And what a kill at that moment leaves committed is the
    oldest slots, none missing below the newest of them: a restart resumes after it (a
    catch-up committed a batch at a time, newest batch first, loses the older ones)."""
    now = JULY + 30.5
    newest = (now // period) * period
    fired = newest - n * period
    got = ns.harness(HARNESS + "tick_head", "sync", period, fired, now, HEAD)
    keys = got.get("keys") or []
    slots = [fired + i * period for i in range(1, n + 1)]
    whole = _("all {count} slots of {period} s from {first} to {last}, each once").format(
        count=n, period=period, first=slot_iso(slots[0]), last=slot_iso(slots[-1])
    )
    # A tick that fails on the catch-up (one INSERT holding every slot passes SQLite's
    # limit on bound variables) fails the same way at every tick after it: nothing is
    # ever enqueued again.
    expect(
        "raised" not in got,
        whole,
        raised_text(got) if "raised" in got else "",
        _(
            "a catch-up of {count} slots made your tick fail, and every tick after it fails "
            "the same way: nothing is enqueued again. Insert the slots one INSERT each (or "
            "in batches of a few thousand): one statement holding every slot passes "
            "SQLite's limit on bound variables"
        ).format(count=n),
    )
    oldest, last = reference_key("sync", slots[0]), reference_key("sync", slots[-1])
    ascending = keys == sorted(keys) and len(set(keys)) == len(keys)
    dropped = bool(keys) and oldest not in keys and last != keys[0] and ascending
    expect(
        not dropped,
        whole,
        _("the first keys inserted were {keys}: the oldest slot, {oldest}, was left out").format(
            keys=", ".join(keys), oldest=oldest
        ),
        _(
            "your tick holds the number {caps}: a catch-up one slot past it lost its oldest "
            "slots. Insert every slot due_slots returns, with no cap on their number"
        ).format(caps=" / ".join(str(c) for c in caps))
        if caps
        else _(
            "a catch-up of {count} slots lost its oldest slots: insert every slot due_slots "
            "returns, with no cap on their number, however it is written or computed"
        ).format(count=n),
    )
    kept = got.get("kept") or {"count": 0}
    count = kept["count"]
    expect(
        count == 0
        or kept
        == {
            "count": count,
            "distinct": count,
            "first": oldest,
            "last": reference_key("sync", slots[min(count, n) - 1]),
        },
        whole,
        _(
            "a scheduler killed after its tick's first {inserts} INSERT statements leaves "
            "{count} jobs of the catch-up committed, from {first} to {last}: not every slot "
            "from {oldest} up to {last}"
        ).format(
            inserts=HEAD,
            count=count,
            first=kept.get("first"),
            last=kept.get("last"),
            oldest=oldest,
        ),
        _(
            "its restart resumes after the newest key in the table, so the slots missing "
            "below it are never enqueued: commit the slots oldest first (one by one, or a "
            "batch at a time starting with the oldest), or all of them in one transaction"
        ),
    )


def _a_huge_outage_enqueues_every_missed_slot(ns: Namespace, period: int, n: int) -> None:
    now = JULY + 30.5
    newest = (now // period) * period
    fired = newest - n * period
    want = {
        "count": n,
        "distinct": n,
        "first": reference_key("sync", fired + period),
        "last": reference_key("sync", newest),
    }
    got = ns.harness(HARNESS + "tick_in_memory", "sync", period, fired, now)
    table = {**want, "count": n + 1, "distinct": n + 1, "first": reference_key("sync", fired)}
    expect(
        got.get("created") == want and got.get("table") == table,
        _("all {count} slots of {period} s from {first} to {last}, each once").format(
            count=n, period=period, first=slot_iso(fired + period), last=slot_iso(newest)
        ),
        raised_text(got)
        if "raised" in got
        else _("tick closed the connection it was given (the scheduler's next tick on it fails)")
        if got.get("table") is None
        else _(
            "created {count} keys, from {first} to {last}; the table holds {held} jobs of it"
        ).format(
            count=got["created"]["count"],
            first=got["created"]["first"],
            last=got["created"]["last"],
            held=got["table"]["count"],
        )
        if "created" in got
        else short_repr(got.get("returned"), 200),
        _(
            "insert every slot due_slots returns, however many and however old: no slice "
            "([-5000:]), no counter that stops the loop, no since moved up to a year or two back"
        ),
    )


@CHECKS.add(
    2,
    "due_slots returns every due slot however many and however old: no cap kept at some "
    "number of slots (5000, 10000) and no lookback window (a year, two), which drop the "
    "oldest missed slots of a long outage without a word",
    severe=True,
)
def due_slots_has_no_cap_on_a_long_outage(ns: Namespace) -> None:
    # due_slots alone: more slots than a tick can insert in the check's time.
    now = JULY + 30.5
    calls: list[list[Any]] = [
        [60, None, now - 12_000 * 60, now, "all"],
        [86400, None, now - 2_000 * 86400, now, "all"],
        # Past a cap kept at 20000 or 50000 slots too: due_slots alone costs little.
        [60, None, now - 60_000 * 60, now, "all"],
        # Every day and every week since the epoch: a lookback window shorter than the
        # 56 years since 1970 (ten years, twenty, fifty) drops the oldest of them.
        [86400, None, 0, now, "all"],
        [7 * 86400, None, 0, now, "all"],
    ]
    for call, one in zip(calls, ns.harness(HARNESS + "many", "due_slots", calls), strict=True):
        want = expected_slots(*call)
        got = one.get("returned")
        expect(
            got == want,
            _("due_slots{args}: all {count} slots, from {first} to {last}").format(
                args=tuple(call), count=len(want), first=slot_iso(want[0]), last=slot_iso(want[-1])
            ),
            raised_text(one)
            if "raised" in one
            else _("{count} slots, from {first} to {last}").format(
                count=len(got), first=slot_iso(got[0]), last=slot_iso(got[-1])
            )
            if isinstance(got, list) and got
            else short_repr(got, 200),
        )
    # A cap past sixty thousand (slots[-100_000:], MAX_SLOTS = 500_000, a day of seconds
    # [:86400]) is a number written in the code: a catch-up of minutes one slot past it,
    # built only for code that holds such a number, its slots sent back as their count,
    # first and last. Then, whatever the code holds, one of more than a year of minutes:
    # a cap computed at run time shows there.
    caps = [n for n in _written_in(ns, "due_slots", 60_000) if n <= DUE_SLOTS_CAP_SCENE]
    if caps:
        _due_slots_lists_every_slot_of(ns, max(caps) + 1, caps)
    if not caps or max(caps) < CATCH_UP_FLOOR:
        _due_slots_lists_every_slot_of(ns, CATCH_UP_FLOOR + 1, [])


def _due_slots_lists_every_slot_of(ns: Namespace, count: int, caps: list[int]) -> None:
    """A catch-up of ``count`` minutes through ``due_slots``, sent back as its span."""
    now = JULY + 30.5
    newest = (now // 60) * 60
    call = [60, None, newest - (count - 1) * 60, now, "all"]
    [one] = ns.harness(HARNESS + "due_slots_span", [call])
    want_span = {
        "count": count,
        "distinct": count,
        "first": call[2],
        "last": newest,
        "steps": True,
    }
    span = one.get("span")
    expect(
        span == want_span,
        _("due_slots{args}: all {count} slots, from {first} to {last}").format(
            args=tuple(call), count=count, first=slot_iso(call[2]), last=slot_iso(newest)
        ),
        raised_text(one)
        if "raised" in one
        else _("{count} slots, from {first} to {last}").format(
            count=span["count"], first=slot_iso(span["first"]), last=slot_iso(span["last"])
        )
        if isinstance(span, dict) and span["count"]
        else short_repr(one.get("returned", span), 200),
        _(
            "your due_slots holds the number {caps}: a catch-up one slot past it lost its "
            "oldest slots. Return every due slot, with no cap on their number"
        ).format(caps=" / ".join(str(n) for n in caps))
        if caps
        else _(
            "a catch-up of {count} slots lost its oldest: return every due slot, with no "
            "cap on their number, however it is written or computed"
        ).format(count=count),
    )


#: The largest number written in due_slots that ``due_slots_has_no_cap_on_a_long_outage``
#: runs a catch-up one slot past (a million slots of a loop cost a few tenths of a second).
DUE_SLOTS_CAP_SCENE = 1_000_000


def _a_long_outage_enqueues_every_missed_slot_in(
    ns: Namespace, rng: Random, period: int, n: int
) -> None:
    fired = T0 + 3 * period
    now = fired + n * period + rng.randint(0, period - 1)
    want = _keys_between("sync", fired + period, fired + n * period, period)
    held = [reference_key("sync", fired), *want]
    with lab_file(ns) as (conn, path):
        add_job(conn, reference_key("sync", fired), kind="sync", run_after=fired)
        created = _tick(ns, path, now, schedule="sync", period=period)
        keys = _keys(conn)
        expect(
            in_slot_order(created) == want and sorted(keys) == sorted(held),
            _("all {count} slots of {period} s from {first} to {last}, each once").format(
                count=n,
                period=period,
                first=slot_iso(fired + period),
                last=slot_iso(fired + n * period),
            ),
            _("created {created}; {table}").format(
                created=len(created), table=_held(keys, "sync", held)
            ),
        )


@CHECKS.add(
    3,
    "whatever the order two schedulers' statements interleave in: insert with INSERT ... "
    "ON CONFLICT (key) DO NOTHING RETURNING key in autocommit, and report a key only when "
    "that RETURNING gave it back (lastrowid keeps the previous insert's id when a row is "
    "skipped; INSERT OR REPLACE deletes the other's job; BEGIN ... COMMIT around a read "
    "fails when the other commits first)",
    timeout=40.0,
    severe=True,
)
def two_schedulers_in_every_order_enqueue_each_slot_once(ns: Namespace) -> None:
    for seed in scene_seeds():
        _two_schedulers_in_every_order_enqueue_each_slot_once_in(ns, Random(f"{seed}:race"))
        _the_later_scheduler_meets_the_others_keys_in(ns, Random(f"{seed}:straddle"))


def _the_later_scheduler_meets_the_others_keys_in(ns: Namespace, rng: Random) -> None:
    # The sweep stops the earlier scheduler; here the later one (200 ms past a slot) has
    # read what fired when the earlier (400 ms before it) ticks whole: every key it meets
    # but the newest is the other's. A tick that stops at the first conflict, leaving the
    # rest to the other, never enqueues the newest slot: the other's clock is before it.
    name = rng.choice(["nightly", "Ledger_Close", "sync.eu", "Rapport_Été"])
    period = rng.choice([900, 1800, HOUR])
    slot = T0 + rng.randint(2, 4) * period
    later, earlier = slot + 0.2, slot - 0.4
    want = _keys_between(name, T0, slot, period)
    with lab_file(ns) as (conn, path):
        got = ns.harness(
            HARNESS + "tick_while_another_ticks", str(path), name, period, T0, later, earlier
        )
        said = [g["returned"] if "returned" in g else raised_text(g) for g in got]
        created = [k for one in said if isinstance(one, list) for k in one]
        keys = _keys(conn)
    expect(
        all("returned" in g for g in got)
        and sorted(keys) == want == sorted(created)
        and want[-1] in said[0],
        _(
            "a scheduler ticking 0.2 s after {slot} has read what fired when another, "
            "ticking 0.4 s before it, enqueues the slots before it: {newest} enqueued and "
            "reported by the first, every slot once"
        ).format(slot=slot_iso(slot), newest=want[-1]),
        _("the first returned {first}, the second {second}; {table}").format(
            first=short_repr(said[0], 200),
            second=short_repr(said[1], 200),
            table=_held(keys, name, want),
        ),
        _(
            "a key another scheduler inserted is skipped, never the end of the catch-up: "
            "go on with the next slot (its clock may be before the newest)"
        ),
    )


def _two_schedulers_in_every_order_enqueue_each_slot_once_in(ns: Namespace, rng: Random) -> None:
    name = rng.choice(["nightly", "Ledger_Close", "sync.eu", "Rapport_Été"])
    period = rng.choice([900, 1800, HOUR])
    slots = rng.randint(3, 5)
    first = T0 + (slots - 1) * period + rng.randint(0, 60)
    # The second ticks a moment later, or one period later (one more slot is due).
    second = first + rng.choice([0.4, 1.9, float(period)])
    want = _keys_between(name, T0, second, period)

    def make(folder: Path) -> None:
        lab_db(folder / "jobs.db").close()

    def judge(folder: Path, run: dict[str, Any]) -> tuple[bool, str]:
        ended = [run[w]["ended"] for w in ("first", "second")]
        said = [run[w]["returned"] for w in ("first", "second")]
        with reading(folder / "jobs.db") as conn:
            keys = _keys(conn)
        created = [k for got in said if isinstance(got, list) for k in got]
        ok = ended == ["returned", "returned"] and sorted(keys) == want == sorted(created)
        both = sorted(k for k, n in Counter(created).items() if n > 1)
        unreported = sorted(set(keys) - set(created))
        return ok, (
            _held(keys, name, want)
            + "; "
            + _("the schedulers {ended}").format(ended=ended)
            + (
                "; " + _("both reported creating {keys}").format(keys=short_repr(both, 150))
                if both
                else ""
            )
            + (
                "; " + _("nobody reported {keys}").format(keys=short_repr(unreported, 150))
                if unreported
                else ""
            )
        )

    after_every_schedule(
        ns,
        HARNESS + "tick_schedules",
        make,
        [name, period, T0, [first, second], "all"],
        judge,
        _(
            "the {count} slots of {name} once each, and the two schedulers' reports "
            "adding up to them"
        ).format(count=len(want), name=repr(name)),
        _(
            "insert each slot with INSERT ... ON CONFLICT (key) DO NOTHING RETURNING key, one "
            "statement per slot in autocommit, and report a key only when RETURNING gave it back"
        ),
        who=_("scheduler"),
    )


@CHECKS.add(
    2,
    "an INSERT that fails (database is locked) must stop the tick with the error, never "
    "be skipped: the next tick resumes after the newest key, so a slot skipped before "
    "newer ones are inserted is never enqueued; a BEGIN IMMEDIATE refused the same way "
    "lets its error out too, never answers []; a retry or two that then skips the slot "
    "loses it the same way (the lock outlasts them)",
    severe=True,
)
def a_failed_insert_stops_the_tick(ns: Namespace) -> None:
    now = T0 + 4 * HOUR + 5
    want = _keys_between("nightly", T0, now, HOUR)
    with lab_file(ns) as (conn, path):
        # The lock outlasts four INSERTs (the second and the three after it): a tick that
        # tries a locked INSERT again once or twice and then skips its slot loses it too.
        got = ns.harness(
            HARNESS + "tick_locked_once", str(path), "nightly", HOUR, T0, now, "all", 2, 4
        )
        keys = _keys(conn)
        expect(
            sorted(keys) == want,
            _(
                "all {count} slots once after a tick whose second INSERT met 'database is "
                "locked', four times in a row if tried again, and the next tick"
            ).format(count=len(want)),
            _held(keys, "nightly", want),
        )
    # The error itself comes out of the tick too (or the INSERT is tried again and every
    # slot enqueued): a tick that swallows it and returns the keys it has so far says that
    # nothing else was due, and with 'latest', ticking once a slot, that slot is lost.
    first = got["first"]
    expect(
        "raised" in first or in_slot_order(first.get("returned")) == want,
        _(
            "the tick whose second INSERT met 'database is locked' to raise that error, or "
            "to try it again and return the {count} slots"
        ).format(count=len(want)),
        _("it returned {value}").format(value=short_repr(first.get("returned"), 200)),
        _(
            "let the error out of tick (a try/except around the INSERT that returns, breaks "
            "or prints hides it): the caller takes the list returned for all that was due"
        ),
    )
    # The lock met by the first INSERT: a tick that sends its slots in one statement, or
    # a batch at a time, and skips a statement that fails, says nothing was due.
    with lab_file(ns) as (conn, path):
        got = ns.harness(
            HARNESS + "tick_locked_once", str(path), "nightly", HOUR, T0, now, "all", 1, 4
        )
    first = got["first"]
    expect(
        "raised" in first or in_slot_order(first.get("returned")) == want,
        _(
            "the tick whose first INSERT met 'database is locked', four times in a row if "
            "tried again, to raise that error, or to try it again and return the {count} slots"
        ).format(count=len(want)),
        _("it returned {value}").format(value=short_repr(first.get("returned"), 200)),
        _(
            "let the error out of tick: a batch of slots whose INSERT failed and was skipped "
            "is lost once a later batch goes in, and the list returned says nothing else "
            "was due"
        ),
    )
    # Another writer (a worker's claim) holds the lock past the busy timeout: the tick's
    # BEGIN IMMEDIATE fails once. Its error comes out, or it begins again and enqueues;
    # [] says nothing was due, and a scheduler that ticks once a slot with 'latest' never
    # enqueues that slot.
    with lab_file(ns) as (conn, path):
        got = ns.harness(
            HARNESS + "begin_refused_once", "tick", str(path), ["nightly", HOUR, T0, now, "all"]
        )
        keys = _keys(conn)
    expect(
        not got.get("refused") or "raised" in got or sorted(keys) == want,
        _(
            "a tick whose BEGIN IMMEDIATE fails 'database is locked' to raise that error, or "
            "to begin again and enqueue the {count} slots"
        ).format(count=len(want)),
        _("it returned {value}; {table}").format(
            value=short_repr(got.get("returned"), 200), table=_held(keys, "nightly", want)
        ),
        _(
            "let the error out (or try the BEGIN again): an empty list says nothing was due, "
            "and the lock's holder may be a worker, not another scheduler"
        ),
    )


@CHECKS.add(
    1,
    "return only the keys this call's INSERT put in the table (the key RETURNING gave "
    "back): keys judged by updated_at = now, or by the table after the insert, are "
    "reported again by a second scheduler ticking at the same now",
)
def a_tick_reports_only_the_keys_it_inserted(ns: Namespace) -> None:
    now = T0 + 2 * HOUR + 7
    want = _keys_between("nightly", T0, now, HOUR)
    with lab_file(ns) as (conn, path):
        got = ns.harness(HARNESS + "tick_at_the_same_now", str(path), "nightly", HOUR, T0, now)
        said = [g["returned"] if "returned" in g else raised_text(g) for g in got]
        created = [k for one in said if isinstance(one, list) for k in one]
        keys = _keys(conn)
    expect(
        all("returned" in g for g in got) and sorted(created) == want == sorted(keys),
        _(
            "two schedulers ticking at the same now ({now}), the second between the "
            "first's read and its inserts: {keys} in the table once, and each reported by "
            "the one scheduler whose INSERT put it there"
        ).format(now=now, keys=short_repr(want, 200)),
        _("the first returned {first}, the second {second}; {table}").format(
            first=short_repr(said[0], 200),
            second=short_repr(said[1], 200),
            table=_held(keys, "nightly", want),
        ),
    )


@CHECKS.add(
    1,
    "since bounds every tick, not only the first: a schedule resumed with a later since "
    "(its backlog dropped on purpose) enqueues no slot before it, even after what fired, "
    "and deletes no job already enqueued (a pending job is the worker's to run)",
    severe=True,
)
def since_bounds_every_tick(ns: Namespace) -> None:
    # Since on a slot, and half an hour before one (off the grid): 05:00 is due either way.
    for since in (T0 + 5 * HOUR, T0 + 4 * HOUR + HOUR // 2):
        _since_bounds_the_tick(ns, since)


def _since_bounds_the_tick(ns: Namespace, since: float) -> None:
    with lab_file(ns) as (conn, path):
        add_job(conn, reference_key("close", T0 + HOUR), kind="close", run_after=T0 + HOUR)
        created = _tick(ns, path, T0 + 6 * HOUR + 10, schedule="close", since=since)
        want = [reference_key("close", T0 + 5 * HOUR), reference_key("close", T0 + 6 * HOUR)]
        expect(
            in_slot_order(created) == want,
            _("only {keys}: 01:00 fired, since is {since}").format(
                keys=want, since=slot_iso(since)
            ),
            _("created {created}").format(created=short_repr(created, 300)),
        )
        # The backlog dropped is the slots never enqueued: 01:00's job, still pending, is
        # the worker's to run, and a tick only inserts.
        keys = _keys(conn)
        held = [reference_key("close", T0 + HOUR), *want]
        expect(
            sorted(keys) == held,
            _("01:00's pending job still in the table beside {keys}").format(keys=want),
            _held(keys, "close", held),
            _("a tick inserts the due slots' jobs and touches no other row: no DELETE"),
        )


@CHECKS.add(
    1,
    "a tick that raises (slot_key refuses the name 'daily:report', due_slots a period_s "
    "of 0 or a catch_up of 'Latest', passed on as given) leaves no transaction open on "
    "the scheduler's long-lived connection: with BEGIN ... COMMIT, ROLLBACK on error (a "
    "Ctrl-C too: except BaseException), or the next tick on it fails; and leaves the "
    "connection's settings (row_factory, text_factory, PRAGMAs) as it found them",
)
def a_failed_tick_leaves_the_connection_usable(ns: Namespace) -> None:
    calls = [
        ["daily:report", HOUR, T0, T0 + 5, "all"],
        # Refused by due_slots, after the newest key was read: a BEGIN before it must end.
        # A catch_up due_slots refuses ('Latest', read from a config file): tick passes it
        # on as given, never mapped to 'all', which runs every missed slot.
        ["nightly", HOUR, T0, T0 + 5 * HOUR + 5, "Latest"],
        ["nightly", 0, T0, T0 + 5, "all"],
        ["nightly", HOUR, T0, T0 + 5, "all"],
    ]
    with lab_file(ns) as (conn, path):
        got = ns.harness(HARNESS + "on_one_connection", "tick", str(path), calls)
        want = [reference_key("nightly", T0)]
        said = [g["returned"] if "returned" in g else raised_text(g) for g in got]
        expect(
            all("raised" in g for g in got[:-1]) and got[-1].get("returned") == want,
            _(
                "tick('daily:report', ...), tick('nightly', catch_up='Latest', ...) and "
                "tick('nightly', period_s=0, ...) to raise ValueError, then "
                "tick('nightly', ...) on the same connection to create {keys}"
            ).format(keys=want),
            "; ".join(
                _("call {n}: {said}").format(n=n, said=short_repr(one, 150))
                for n, one in enumerate(said, 1)
            ),
        )
    expect_left_as_given(
        got,
        "tick",
        _(
            "leave conn.isolation_level alone: open the transaction with BEGIN IMMEDIATE and "
            "end it with COMMIT or ROLLBACK on every path"
        ),
    )
    _an_interrupted_tick_is_rolled_back(ns)
    _a_tick_leaves_the_callers_settings(ns)


def _an_interrupted_tick_is_rolled_back(ns: Namespace) -> None:
    """A Ctrl-C (or the scheduler's SIGINT handler) right after a tick's first INSERT, in
    a process that lives on: a tick that rolls back on ``except Exception`` leaves its
    BEGIN open on the long-lived connection, holding the write lock, and its next tick
    there fails. What the first committed stays; the next tick enqueues the rest."""
    now = T0 + 3 * HOUR + 5
    call = ["nightly", HOUR, T0, now, "all"]
    want = _keys_between("nightly", T0, now, HOUR)
    with lab_file(ns) as (conn, path):
        got = ns.harness(HARNESS + "tick_interrupted_then_again", str(path), [call, call])
        keys = _keys(conn)
    if "interrupted" not in got[0]:
        return  # no write to interrupt, or a tick that catches it: others judge the tick
    second = got[1]
    expect(
        "returned" in second and sorted(keys) == want,
        _(
            "a tick interrupted (KeyboardInterrupt) right after its first INSERT, then the "
            "next tick on the same connection enqueuing the rest: {count} slots once each"
        ).format(count=len(want)),
        _("the next tick {outcome}; {table}").format(
            outcome=raised_text(second)
            if "raised" in second
            else _("returned {value}").format(value=short_repr(second.get("returned"), 150)),
            table=_held(keys, "nightly", want),
        ),
        _(
            "roll back on ANY exception, KeyboardInterrupt included (except BaseException, "
            "or try/finally): a BEGIN left open on a connection that lives on holds the "
            "write lock, and the scheduler's next tick fails"
        ),
    )


def _a_tick_leaves_the_callers_settings(ns: Namespace) -> None:
    """The scheduler's connection, rows as ``sqlite3.Row``: a tick that sets its row or
    text factory, or turns ``PRAGMA case_sensitive_like`` on for its own LIKE, changes
    what every later statement of the scheduler on that connection reads."""
    call = ["nightly", HOUR, T0, T0 + HOUR + 5, "all"]
    with lab_file(ns) as (_conn, path):
        got = ns.harness(HARNESS + "tick_on_a_bare_connection", str(path), call)
    changed = got.get("changed") or []
    expect(
        not changed,
        _(
            "a tick on the scheduler's connection (rows as sqlite3.Row) to leave its settings "
            "as it found them: row_factory, text_factory, PRAGMA case_sensitive_like"
        ),
        _("it left {changed}").format(changed=", ".join(changed)),
        _(
            "read row[0] of a sqlite3.Row as of a tuple: never set conn.row_factory or "
            "text_factory, nor a PRAGMA other code on the connection relies on; set one "
            "back before you return if you must"
        ),
    )


@CHECKS.add(
    1,
    "each job's kind is the schedule's name exactly as given (capitals, accents, spaces): "
    "the worker picks the task by kind, and 'Daily_Report' is not 'daily_report'",
)
def each_job_is_of_its_schedules_kind(ns: Namespace) -> None:
    # A space at the end of the name too: kept, as every other character.
    name = "Clôture_Mois EU "
    with lab_file(ns) as (conn, path):
        _tick(ns, path, T0 + HOUR + 5, schedule=name)
        kinds = sorted(row[0] for row in conn.execute("SELECT DISTINCT kind FROM jobs"))
        expect(
            kinds == [name],
            _("every job of the schedule {name} of kind {name}").format(name=repr(name)),
            _("the kinds in the table: {kinds}").format(kinds=kinds),
            _("kind = schedule, the name as given: no lower(), strip() or other change"),
        )


#: How long ``due_slots_works_back_from_now`` gives its calls, together: a few slots take
#: microseconds; walking every second since 1970 takes hours.
BOUNDED_S = 3.0


@CHECKS.add(
    1,
    "due_slots works back from the newest slot at or before now and stops at last or "
    "since: its time and memory follow the slots it returns, not the span since 'since' "
    "(a schedule started years ago, every second or minute, has millions of slots)",
)
def due_slots_works_back_from_now(ns: Namespace) -> None:
    now = T0 + 7 * HOUR + 0.5
    newest = T0 + 7 * HOUR
    calls: list[list[Any]] = [
        # Every second since the epoch, 3 s behind: 3 slots due, 1.8 billion before them.
        [1, newest - 3, 0, now, "all"],
        # A long outage on a schedule of minutes and of seconds, caught up with 'latest'.
        [60, None, 0, now, "latest"],
        [1, None, 0, now, "latest"],
    ]
    got = ns.harness(HARNESS + "due_slots_bounded", calls, BOUNDED_S)
    hint = _(
        "start at (now // period_s) * period_s and step back by period_s while the slot is "
        ">= since and > last (once for 'latest'): never build or walk range(since, now, "
        "period_s) and filter it"
    )
    wants = [expected_slots(*call) for call in calls]
    expect(
        not got.get("hung"),
        _("{calls} to return {wants} at once").format(
            calls="; ".join(f"due_slots{tuple(call)}" for call in calls), wants=wants
        ),
        _("still running after {seconds:g} s").format(seconds=BOUNDED_S),
        hint,
    )
    for call, want, one in zip(calls, wants, got["outcomes"], strict=True):
        expect(
            one.get("returned") == want,
            _("due_slots{args} == {want}, at once and in little memory").format(
                args=tuple(call), want=want
            ),
            raised_text(one) if "raised" in one else short_repr(one.get("returned"), 200),
            hint,
        )


@CHECKS.add(
    1,
    "every tick reads what fired from the table again, on the connection it is given: a "
    "scheduler that keeps the last slot it fired in memory (a dict, a global) fills the "
    "gap another scheduler's 'latest' catch-up left on purpose, and one that keeps its "
    "first connection fails once it reconnects; and every tick, with nothing due too, "
    "ends the transaction it began on that connection",
    severe=True,
)
def each_tick_reads_the_table_again(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        nows = [T0 + 5, T0 + 5 * HOUR + 5, T0 + 6 * HOUR + 5]
        got = ns.harness(
            HARNESS + "tick_beside_another", str(path), "ledger", HOUR, T0, nows, T0 + 4 * HOUR
        )
        said = [g["returned"] if "returned" in g else raised_text(g) for g in got[:3]]
        want = [[reference_key("ledger", T0 + k * HOUR)] for k in (0, 5, 6)]
        expect(
            [in_slot_order(s) for s in said] == want,
            _(
                "a tick at 00:00:05 to create {first}; another scheduler then fires 04:00 "
                "alone; the same scheduler, on the same connection, ticks at 05:00:05 and "
                "creates only {second}, then, on a new connection, at 06:00:05 only {third}"
            ).format(first=want[0], second=want[1], third=want[2]),
            _("created {first}, then {second}, then {third}").format(
                first=short_repr(said[0], 150),
                second=short_repr(said[1], 150),
                third=short_repr(said[2], 150),
            ),
            _(
                "read the newest key with the prefix from the table at the start of every "
                "tick, through the conn you are given: no dict, global or cache of what this "
                "scheduler fired or read, no connection kept from an earlier call"
            ),
        )
        # The same scheduler then ticks at 06:00:05 on another table, where nothing fired
        # (another tenant's, or the first restored empty): every slot since 00:00 is due
        # there, whatever this process fired elsewhere.
        fourth = got[3] if len(got) > 3 else {}
        other = _keys_between("ledger", T0, T0 + 6 * HOUR, HOUR)
        expect(
            in_slot_order(fourth.get("returned")) == other,
            _(
                "then, on another table where nothing fired, a tick at 06:00:05 to create "
                "the {count} slots from 00:00 to 06:00"
            ).format(count=len(other)),
            raised_text(fourth)
            if "raised" in fourth
            else _("created {created}").format(created=short_repr(fourth.get("returned"), 200)),
            _(
                "what fired is the table's, the one conn reaches: a memory of what this "
                "process fired, even taken as max(memory, table), is another table's"
            ),
        )
    _a_restored_table_is_read_again(ns)
    _idle_ticks_hand_the_connection_back(ns)


def _a_restored_table_is_read_again(ns: Namespace) -> None:
    """One long-lived connection ticks, then the table is restored from a backup taken
    after 01:00 fired (the later jobs gone); its next tick must catch up what the table
    no longer holds. A cache per connection (a TEMP table) or per process hides it."""
    with lab_file(ns) as (_conn, path):
        nows = [T0 + 3 * HOUR + 5, T0 + 4 * HOUR + 5]
        got = ns.harness(
            HARNESS + "tick_across_a_restore", str(path), "payroll", HOUR, T0, nows, T0 + HOUR
        )
    said = [g["returned"] if "returned" in g else raised_text(g) for g in got]
    want = _keys_between("payroll", T0 + 2 * HOUR, T0 + 4 * HOUR, HOUR)
    expect(
        in_slot_order(said[1]) == want,
        _(
            "a tick at 03:00:05 on a long-lived connection; the table then restored from a "
            "backup that ends at 01:00 (the jobs of 02:00 and 03:00 gone); the next tick, "
            "at 04:00:05 on the same connection, to create {want}"
        ).format(want=want),
        _("created {first}, then {second}").format(
            first=short_repr(said[0], 150), second=short_repr(said[1], 150)
        ),
        _(
            "read the newest key from the table at the start of every tick: what this "
            "connection or process fired before (a TEMP table, a dict) is not what the "
            "table holds after a restore"
        ),
    )


def _idle_ticks_hand_the_connection_back(ns: Namespace) -> None:
    """One scheduler's long-lived connection through the ticks that find nothing to do (a
    clock behind the one that fired, nothing new, in both catch-up modes) and then
    catch-ups: a tick that returns early inside its BEGIN leaves the transaction open,
    holding the write lock, and its next tick on that connection fails. Judged by the
    transaction alone: what each tick returns is other checks' business."""
    fired = T0 + 2 * HOUR
    ticks = [
        (fired - 0.4, "latest"),
        (fired - 0.4, "all"),
        (fired + 5, "latest"),
        (fired + 9, "all"),
        (fired + HOUR + 5, "latest"),
        (fired + 3 * HOUR + 5, "all"),
    ]
    calls = [["sweep", HOUR, T0, now, how] for now, how in ticks]
    with lab_file(ns) as (conn, path):
        # Another scheduler, its clock ahead, fired 02:00 with 'latest'.
        add_job(conn, reference_key("sweep", fired), kind="sweep", run_after=fired)
        got = ns.harness(HARNESS + "on_one_connection", "tick", str(path), calls)
    said = [
        (raised_text(one) if "raised" in one else short_repr(in_slot_order(one["returned"]), 120))
        + (
            " (" + _("a transaction still open") + ")"
            if one.get("left", {}).get("in_transaction")
            else ""
        )
        for one in got
    ]
    expect(
        not any(one.get("left", {}).get("in_transaction") for one in got),
        _(
            "on one long-lived connection, where another scheduler fired 02:00, ticks at "
            "{ticks}, each ending the transaction it began"
        ).format(ticks=", ".join(f"{slot_iso(now)} ({how})" for now, how in ticks)),
        "; ".join(
            f"{slot_iso(now)} ({how}): {one}" for (now, how), one in zip(ticks, said, strict=True)
        ),
        _(
            "end the transaction a tick began (COMMIT or ROLLBACK) on every path, the early "
            "returns too (nothing due, a newest key after now): one left open holds the "
            "write lock, and the next tick on that connection fails"
        ),
    )


@CHECKS.add(
    1,
    "insert only the columns the contract names (key, kind, run_after, updated_at) and "
    "leave the rest to the table's defaults: a job born 'running', leased, with attempts "
    "spent or on another queue is never claimed, and one with a smaller max_attempts "
    "loses the retries a failed run is owed; insert each job whole, in one INSERT: one "
    "completed by an UPDATE after it is, after a kill between the two, of another kind "
    "or due at another time",
    severe=True,
)
def the_jobs_a_tick_creates_are_ready_to_claim(ns: Namespace) -> None:
    with lab_file(ns) as (conn, path):
        created = _tick(ns, path, T0 + HOUR + 5)
        columns = ("key", "state", "attempt", "max_attempts", "queue", "lease_owner", "lease_until")
        rows = [tuple(j[c] for c in columns) for j in all_jobs(conn)]
        want = [(key, "pending", 0, 3, "default", None, None) for key in in_slot_order(created)]
        expect(
            bool(created) and rows == want,
            _(
                "each job the tick created as the table's defaults make it: pending, attempt 0 "
                "of max_attempts 3, on the queue 'default', leased to nobody ({columns})"
            ).format(columns=", ".join(columns)),
            short_repr(rows, 300),
        )
        # The claim's own test (labkit/patterns/queues.sql): run_after is the slot in epoch
        # seconds, a number. A text (an ISO time) sorts after every number and milliseconds
        # are a thousand times later: the claim never comes to the job.
        now = T0 + HOUR + 5
        ready = [
            row[0]
            for row in conn.execute(
                "SELECT key FROM jobs WHERE state IN ('pending', 'retry_wait')"
                " AND run_after <= :now ORDER BY key",
                {"now": now},
            )
        ]
        expect(
            ready == in_slot_order(created),
            _(
                "each job the tick created at {now} claimable then (a claim takes a job whose "
                "run_after <= now): run_after is the slot's time in epoch seconds, a number"
            ).format(now=slot_iso(now)),
            _("claimable: {keys}; run_after written: {values}").format(
                keys=short_repr(ready, 200),
                values=short_repr([j["run_after"] for j in all_jobs(conn)], 200),
            ),
            _(
                "insert run_after = slot as it is (seconds since the epoch): not its ISO "
                "text, nor milliseconds"
            ),
        )
    _killed_ticks_leave_whole_jobs(ns)


#: What a killed tick's jobs are judged by, against the same tick's jobs unkilled: who
#: runs a job (its kind) and whether and when a claim takes it (its run_after too: one
#: inserted far in the future and moved to its slot by an UPDATE never comes due).
_JOB_COLUMNS = (
    "kind",
    "run_after",
    "updated_at",
    "state",
    "attempt",
    "max_attempts",
    "queue",
    "lease_owner",
    "lease_until",
)


def _jobs_by_key(conn: Any) -> dict[str, tuple[Any, ...]]:
    return {j["key"]: tuple(j[c] for c in _JOB_COLUMNS) for j in all_jobs(conn)}


def _killed_ticks_leave_whole_jobs(ns: Namespace) -> None:
    """A scheduler killed right after each of its writes, then started again: each job is
    as the same tick makes it unkilled. A job inserted with its key alone (kind left to
    the table's default, 'email') and given its kind by an UPDATE after it is, after a
    kill between the two, a slot the restart takes for fired whose job runs another task.
    Whether all the slots are there is ``a_killed_scheduler_restarts_without_losing_a_slot``'s
    business, and what a whole job holds the rest of this check's."""
    name, now = "Fecho_Mês", T0 + 2 * HOUR + 5
    args = [name, HOUR, T0, now, "all"]
    with lab_file(ns) as (conn, path):
        whole = ns.harness(HARNESS + "tick", str(path), *args, None)
        made = _jobs_by_key(conn)
    if "raised" in whole or not made:
        return  # a tick that fails or makes nothing unkilled is judged by other checks

    def judge(life: Path) -> tuple[bool, str]:
        with reading(life / "jobs.db") as conn:
            jobs = _jobs_by_key(conn)
        wrong = {key: row for key, row in jobs.items() if key in made and row != made[key]}
        return not wrong, _(
            "jobs not as the same tick makes them unkilled ({columns}): {rows}; unkilled: {made}"
        ).format(
            columns=", ".join(_JOB_COLUMNS),
            rows=short_repr(wrong, 250),
            made=short_repr({key: made[key] for key in wrong}, 250),
        )

    after_every_kill(
        ns,
        HARNESS + "tick_kills",
        lambda folder: lab_db(folder / "jobs.db").close(),
        args,
        judge,
        _(
            "each slot's job as the same tick makes it unkilled: of kind {name}, pending, "
            "run_after its slot"
        ).format(name=repr(name)),
        _("the scheduler's restart"),
        _(
            "insert each job whole in one INSERT (key, kind, run_after, updated_at): a job "
            "inserted first and completed by an UPDATE after it is, after a kill between "
            "the two, a key the restart takes for fired and a job of the table's default "
            "kind, another task, or with a run_after that never comes"
        ),
    )


@CHECKS.add(
    2,
    "two schedules with the same period share the jobs table, each with its own slots: "
    "the job's id is the table's own (an id taken from the slot is the same for every "
    "schedule, and the second schedule's jobs fail or vanish), and each key is made from "
    "the name and the slot, in a scheduler that ticks both (never kept per fire time alone)",
    severe=True,
)
def schedules_with_the_same_period_each_get_their_slots(ns: Namespace) -> None:
    names = ("invoices", "reminders")
    nows = (T0 + 2 * HOUR + 5, T0 + 3 * HOUR + 5)
    want = {
        name: [_keys_between(name, T0, T0 + 2 * HOUR, HOUR), [reference_key(name, T0 + 3 * HOUR)]]
        for name in names
    }
    with lab_file(ns) as (conn, path):
        said: dict[str, list[Any]] = {name: [] for name in names}
        # Both ticked in turn by the one scheduler, as its loop over the schedules does: in
        # one process, on one connection (a key kept per fire time, whatever the name,
        # gives the second schedule the first's).
        calls = [[name, HOUR, T0, now, "all"] for now in nows for name in names]
        got = ns.harness(HARNESS + "on_one_connection", "tick", str(path), calls)
        for call, one in zip(calls, got, strict=True):
            said[call[0]].append(
                raised_text(one) if "raised" in one else in_slot_order(one["returned"])
            )
        keys = _keys(conn)
        held = sorted({k for ticks in want.values() for tick_keys in ticks for k in tick_keys})
        expect(
            said == want and sorted(keys) == held,
            _(
                "{first} and {second} (both hourly, since 00:00) ticked in turn into one table "
                "at 02:00:05 and 03:00:05: each gets its own slots 00:00 to 02:00, then 03:00 "
                "({count} jobs in all)"
            ).format(first=repr(names[0]), second=repr(names[1]), count=len(held)),
            "; ".join(
                _("{name} created {created}").format(
                    name=repr(name), created=short_repr(said[name], 200)
                )
                for name in names
            )
            + "; "
            + _("the table holds {count} jobs").format(count=len(keys)),
            _(
                "let the table number its jobs: insert key, kind, run_after and updated_at "
                "only, never an id made from the slot; and make each key from the name and "
                "the slot together (a key kept per fire time alone is another schedule's)"
            ),
        )


@CHECKS.add(
    1,
    "a scheduler whose clock runs behind another's can find a key newer than its now "
    "(the other fired the slot first): nothing is due then, so tick returns [] and "
    "creates nothing; never raise (clocks drift, and its next tick must still run)",
)
def a_scheduler_whose_clock_runs_behind_creates_nothing(ns: Namespace) -> None:
    fired = T0 + 2 * HOUR
    now = fired - 0.4  # this host's clock, 400 ms behind the one that fired 02:00
    # Under 'latest' too: a tick that skips reading what fired ("ON CONFLICT skips the
    # repeats") fires 01:00 here, a slot the 02:00 run already stood for.
    for catch_up in ("all", "latest"):
        with lab_file(ns) as (conn, path):
            # Its row says when that scheduler ticked: 300 ms after 02:00, after this now.
            add_job(
                conn,
                reference_key("nightly", fired),
                kind="nightly",
                run_after=fired,
                updated_at=fired + 0.3,
            )
            got = ns.harness(HARNESS + "tick", str(path), "nightly", HOUR, T0, now, catch_up, None)
            keys = _keys(conn)
        expect(
            got.get("returned") == [] and keys == [reference_key("nightly", fired)],
            _(
                "tick at {now} (400 ms before 02:00:00, which another scheduler already fired) "
                "to return [] and leave the table as it was, with catch_up={catch_up!r}"
            ).format(now=now, catch_up=catch_up),
            raised_text(got)
            if "raised" in got
            else _("returned {value}; {table}").format(
                value=short_repr(got.get("returned"), 200),
                table=_held(keys, "nightly", [reference_key("nightly", fired)]),
            ),
        )


#: Every quarter hour from 13:00 to 19:00 UTC on the two nights SUMMER_DST changes in
#: 2026: on 4 April, 03:00 summer time is 02:00 again at 16:00 UTC (an hour of local
#: clock times that happens twice); on 3 October, 02:00 jumps to 03:00 at 16:00 UTC.
DST_NIGHTS = tuple(start + 900 * n for start in (1_775_307_600, 1_791_032_400) for n in range(25))


@CHECKS.add(
    2,
    "make the key from the fire time itself (datetime.fromtimestamp(t, UTC)), not from "
    "the local wall clock read back (time.localtime, a naive datetime, then astimezone): "
    "on the night summer time ends one local hour happens twice, a naive time cannot say "
    "which, and a slot of that hour gets the key of the one before, is taken for fired "
    "and never runs",
    severe=True,
)
def slot_key_holds_on_the_nights_summer_time_changes(ns: Namespace) -> None:
    calls = [["hourly", t] for t in DST_NIGHTS]
    got = ns.harness(HARNESS + "keys_in_zone", calls, SUMMER_DST)
    wrong = [
        (slot_iso(t), g["returned"] if "returned" in g else raised_text(g))
        for t, g in zip(DST_NIGHTS, got, strict=True)
        if g.get("returned") != reference_key("hourly", t)
    ]
    expect(
        not wrong,
        _(
            "with TZ={tz}, the UTC key of each quarter hour of the two nights its summer time "
            "begins and ends (4 April and 3 October 2026, 13:00 to 19:00 UTC)"
        ).format(tz=SUMMER_DST),
        _("{count} wrong, the first at {at}: {key}").format(
            count=len(wrong), at=wrong[0][0] if wrong else "", key=wrong[0][1] if wrong else ""
        ),
    )


DAY = 24 * HOUR


@CHECKS.add(
    2,
    "a daily or weekly period is a multiple of period_s since the epoch like any other: "
    "00:00 UTC, whatever the scheduler's zone. A grid moved to local midnight differs from "
    "one machine to the next (two schedulers in two zones enqueue one night twice) and "
    "from one night to the next when summer time changes",
    severe=True,
)
def daily_slots_are_the_same_in_every_time_zone(ns: Namespace) -> None:
    calls: list[list[Any]] = [
        [DAY, None, T0 - 3 * DAY, T0 + 2 * HOUR, "all"],
        [DAY, T0 - DAY, T0 - 3 * DAY, T0 + 2 * DAY + 5 * HOUR, "all"],
        [7 * DAY, None, JULY - 21 * DAY, JULY + 3 * HOUR, "all"],
        [DAY, None, JULY - 2 * DAY, JULY + 13 * HOUR, "latest"],
    ]

    def due(period: int, last: float | None, since: float, now: float, how: str) -> list[float]:
        first = -(-since // period) * period
        slots: list[float] = [
            s for s in range(int(first), int(now) + 1, period) if last is None or s > last
        ]
        return slots[-1:] if how == "latest" else slots

    want = [due(*call) for call in calls]
    for tz in ZONES:
        got = ns.harness(HARNESS + "many_in_zone", "due_slots", calls, tz)
        said = [g["returned"] if "returned" in g else raised_text(g) for g in got]
        expect(
            said == want,
            _(
                "with TZ={tz}, daily and weekly slots at multiples of period_s since the "
                "epoch (00:00 UTC): {want}"
            ).format(tz=tz, want=short_repr([[slot_iso(t) for t in w] for w in want], 300)),
            short_repr([[slot_iso(t) for t in s] if isinstance(s, list) else s for s in said], 300),
        )


@CHECKS.add(
    1,
    "two schedules of one scheduler process tick side by side, in two threads: each "
    "enqueues its own due slots whatever the other is doing (a tick that returns [] "
    "while another schedule's tick holds a lock of the module delays its slots)",
)
def two_schedules_of_one_process_tick_side_by_side(ns: Namespace) -> None:
    names = ("nightly", "ledger_close")
    now = T0 + 2 * HOUR + 7
    want = [_keys_between(name, T0, now, HOUR) for name in names]
    with lab_file(ns) as (conn, path):
        got = ns.harness(
            HARNESS + "tick_another_schedule_meanwhile", str(path), names, HOUR, T0, now
        )
        said = [g["returned"] if "returned" in g else raised_text(g) for g in got]
        keys = _keys(conn)
    expect(
        said == want and sorted(keys) == sorted(want[0] + want[1]),
        _(
            "{first} ticking while {second} ticks in another thread of the same process: "
            "each tick creates and returns its own schedule's keys {keys}"
        ).format(first=repr(names[0]), second=repr(names[1]), keys=short_repr(want, 300)),
        _("{first} returned {one}, {second} {two}; {table}").format(
            first=repr(names[0]),
            second=repr(names[1]),
            one=short_repr(said[0], 200),
            two=short_repr(said[1], 200),
            table=_held(keys, names[1], want[1]),
        ),
        _(
            "a lock taken in the module, if any, is per schedule and waited for, never a "
            "reason to skip a tick: the UNIQUE key already keeps each slot to one job"
        ),
    )


@CHECKS.add(
    2,
    "a name with ':' gets no job under either catch_up, 'latest' too: tick makes every key "
    "with slot_key, which refuses it. A key 'schedule:eu:nightly:<time>' sits among the "
    "keys of the schedule 'eu', whose next tick reads it as its newest and cannot parse it",
)
def a_name_with_a_colon_gets_no_job(ns: Namespace) -> None:
    bad = "eu:nightly"
    calls = [
        [bad, HOUR, T0, T0 + 2 * HOUR + 5, "latest"],
        [bad, HOUR, T0, T0 + 2 * HOUR + 5, "all"],
        ["eu", HOUR, T0, T0 + HOUR + 5, "all"],
    ]
    want = _keys_between("eu", T0, T0 + HOUR + 5, HOUR)
    with lab_file(ns) as (conn, path):
        got = ns.harness(HARNESS + "on_one_connection", "tick", str(path), calls)
        keys = _keys(conn)
    said = [g["returned"] if "returned" in g else raised_text(g) for g in got]
    expect(
        all("raised" in g for g in got[:2])
        and got[2].get("returned") == want
        and sorted(keys) == want,
        _(
            "tick({bad!r}, ...) with catch_up 'latest', then 'all', to raise ValueError and "
            "create nothing; then tick('eu', ...) to create {keys}, the only keys in the table"
        ).format(bad=bad, keys=want),
        _("{calls}; the table holds {table}").format(
            calls="; ".join(
                _("call {n}: {said}").format(n=n, said=short_repr(one, 150))
                for n, one in enumerate(said, 1)
            ),
            table=short_repr(sorted(keys), 300),
        ),
        _(
            "build every key with slot_key(schedule, slot), in each branch of tick: it "
            "refuses a name with ':' before anything is inserted"
        ),
    )


@CHECKS.add(
    1,
    "a schedule whose name holds digits ('backup2') ticks again and again: the newest key's "
    "time is what follows the prefix, whatever characters the name shares with it",
)
def a_name_with_digits_ticks_again(ns: Namespace) -> None:
    name = "backup2"
    calls = [[name, HOUR, T0, T0 + 5, "all"], [name, HOUR, T0, T0 + 2 * HOUR + 5, "all"]]
    want = [
        [reference_key(name, T0)],
        [reference_key(name, T0 + HOUR), reference_key(name, T0 + 2 * HOUR)],
    ]
    with lab_file(ns) as (conn, path):
        got = ns.harness(HARNESS + "on_one_connection", "tick", str(path), calls)
        keys = _keys(conn)
    said = [g["returned"] if "returned" in g else raised_text(g) for g in got]
    expect(
        said == want,
        _("two ticks of {name!r}, an hour apart, to create {keys}").format(
            name=name, keys=short_repr(want, 300)
        ),
        _("they said {said}; the table holds {table}").format(
            said=short_repr(said, 300), table=short_repr(sorted(keys), 300)
        ),
        _(
            "cut the prefix off by its length (key[len(prefix):]) or with removeprefix: "
            "str.lstrip(prefix) strips any of the prefix's characters, the year's digits too"
        ),
    )
