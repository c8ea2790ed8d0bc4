"""Exercise 12's red-team zoo: wrong schedulers the first zoo's scenes let through.

Exercise 12 enqueues one job per slot however many schedulers tick. Each entry overrides
one function of the reference solution with a mistake a student could make (the first
ones are in ``test_zoo_ex11_13.py``); the check named after its mistake must catch it,
in process for every entry and, for a sample, through ``labkit grade`` in the sandbox
(``zoograding``), saying what ``SAYS`` gives. Each of these mistakes but the ``MINOR``
ones loses or duplicates a slot's job, so its check is severe and its score at most half.
"""

from __future__ import annotations

import pytest
from gradingkit import assert_severe
from zoograding import in_process_test, right_test

ZOO: list[tuple[str, str, str, str]] = [
    # (exercise, name, the check that must fail, source replacing the reference)
    (
        # Correct under UTC, the only zone the first checks ticked in.
        "ex12",
        "the newest key's fire time parsed back with a naive .timestamp()",
        "tick_reads_what_fired_in_every_time_zone",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                last = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ").timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # 'report' vs 'reports' passes: LIKE goes wrong only on '_' and capitals.
        "ex12",
        "the schedule's keys matched with LIKE 'schedule:<name>:%'",
        "names_with_underscores_and_capitals_are_their_own_schedules",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE key LIKE :pattern", {"pattern": prefix + "%"}
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # Every key the first checks held began with its schedule's prefix when it held
        # the prefix at all: finding it anywhere in the key looked the same.
        "ex12",
        "the schedule's keys found with instr(key, prefix), anywhere in the key",
        "names_with_underscores_and_capitals_are_their_own_schedules",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE instr(key, :prefix) > 0", {"prefix": prefix}
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][-20:], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "ex12",
        "the keys read into Python and kept when the prefix is in them",
        "names_with_underscores_and_capitals_are_their_own_schedules",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            mine = [k for (k,) in conn.execute("SELECT key FROM jobs") if prefix in k]
            last = None
            if mine:
                fired = datetime.strptime(max(mine)[-20:], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # The generated names had no capitals: two schedules differing by case share keys.
        "ex12",
        "slot_key normalises the name to lower case",
        "names_with_underscores_and_capitals_are_their_own_schedules",
        """
        def slot_key(schedule, fire_time):
            if not schedule or ":" in schedule:
                raise ValueError(f"bad schedule name {schedule!r}")
            stamp = datetime.fromtimestamp(fire_time, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            return f"schedule:{schedule.strip().lower()}:{stamp}"
        """,
    ),
    (
        # Every scene's jobs had run_after equal to their slot; a retry moves it later.
        "ex12",
        "what fired read as max(run_after) instead of the newest key",
        "last_fired_is_the_newest_key",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            last = conn.execute(
                "SELECT max(run_after) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()[0]
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # labkit.patterns.schedule's max_catch_up=100, copied into tick: the oldest are lost.
        "ex12",
        "tick keeps only the newest 100 due slots of a catch-up",
        "a_long_outage_enqueues_every_missed_slot",
        """
        MAX_CATCH_UP = 100
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up)[-MAX_CATCH_UP:]:
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # The scripted race lets one scheduler win every slot, so its rival's lastrowid
        # stays 0; stopped after its first insert, a scheduler reports the other's slots.
        "ex12",
        "a key reported as created when cursor.lastrowid is set (INSERT OR IGNORE)",
        "two_schedulers_in_every_order_enqueue_each_slot_once",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                cursor = conn.execute(
                    "INSERT OR IGNORE INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now)",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                )
                if cursor.lastrowid:
                    created.append(key)
            return created
        """,
    ),
    (
        # Every row of the first scenes had updated_at 0: the first one inserted won the tie.
        "ex12",
        "what fired read as the key of the job updated last (ORDER BY updated_at DESC)",
        "last_fired_is_the_newest_key",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT key FROM jobs WHERE substr(key, 1, :n) = :prefix"
                " ORDER BY updated_at DESC LIMIT 1",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # A dead job's slot fired: skipping it walks back to an older key and refills the
        # slots a 'latest' catch-up left out on purpose.
        "ex12",
        "what fired read among the jobs that did not fail (state != 'dead')",
        "last_fired_is_the_newest_key",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix"
                " AND state != 'dead'",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # 'report' had no gap before its newest key: walking from since refilled nothing.
        "ex12",
        "the newest key read with key >= 'schedule:<name>:' and no end, another's ignored",
        "another_schedule_with_a_longer_name",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE key >= :prefix", {"prefix": prefix}
            ).fetchone()
            last = None
            if row[0] is not None and row[0].startswith(prefix):
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # No generated name held '[', '*' or '?': GLOB matched them as LIKE never would.
        "ex12",
        "the schedule's keys matched with GLOB 'schedule:<name>:*'",
        "names_with_underscores_and_capitals_are_their_own_schedules",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE key GLOB :pattern", {"pattern": prefix + "*"}
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # Every missed slot of a 'latest' schedule runs: the effect it promised once, again.
        "ex12",
        "tick catches up 'all' whatever catch_up it is given",
        "tick_catches_up_with_the_latest_slot",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, "all"):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "ex12",
        "slot_key turns local time into UTC with time.timezone (an hour off in summer time)",
        "slot_key_is_the_same_in_every_time_zone",
        """
        import time as _time


        def slot_key(schedule, fire_time):
            if not schedule or ":" in schedule:
                raise ValueError(f"bad schedule name {schedule!r}")
            moment = datetime.fromtimestamp(fire_time + _time.timezone)
            return f"schedule:{schedule}:{moment:%Y-%m-%dT%H:%M:%SZ}"
        """,
    ),
    (
        "ex12",
        "the newest key's fire time parsed with time.mktime(...) - time.timezone",
        "tick_reads_what_fired_in_every_time_zone",
        """
        import time as _time


        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, ?) = ?", (len(prefix), prefix)
            ).fetchone()
            last = None
            if row[0] is not None:
                parsed = _time.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = _time.mktime(parsed) - _time.timezone
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at) VALUES (?, ?, ?, ?)"
                    " ON CONFLICT (key) DO NOTHING RETURNING key",
                    (key, schedule, slot, now),
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "ex12",
        "what fired read as max(key) of the jobs whose kind is the schedule",
        "another_schedule_with_a_longer_name",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            row = conn.execute("SELECT max(key) FROM jobs WHERE kind = ?", (schedule,)).fetchone()
            last = None
            prefix = f"schedule:{schedule}:"
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at) VALUES (?, ?, ?, ?)"
                    " ON CONFLICT (key) DO NOTHING RETURNING key",
                    (key, schedule, slot, now),
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "ex12",
        "tick skips a slot whose INSERT met 'database is locked' and goes on",
        "a_failed_insert_stops_the_tick",
        """
        import sqlite3


        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, ?) = ?", (len(prefix), prefix)
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                try:
                    got = conn.execute(
                        "INSERT INTO jobs (key, kind, run_after, updated_at) VALUES (?, ?, ?, ?)"
                        " ON CONFLICT (key) DO NOTHING RETURNING key",
                        (key, schedule, slot, now),
                    ).fetchone()
                except sqlite3.OperationalError:
                    continue
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "ex12",
        "what fired read as the key of the row inserted last (ORDER BY id DESC)",
        "last_fired_is_the_newest_key",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT key FROM jobs WHERE substr(key, 1, :n) = :prefix ORDER BY id DESC LIMIT 1",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                inserted = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if inserted is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "ex12",
        "INSERT OR REPLACE, created when a SELECT before it found no key",
        "two_schedulers_enqueue_each_slot_once",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                existed = conn.execute("SELECT 1 FROM jobs WHERE key = ?", (key,)).fetchone()
                conn.execute(
                    "INSERT OR REPLACE INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (?, ?, ?, ?)",
                    (key, schedule, slot, now),
                )
                if existed is None:
                    created.append(key)
            return created
        """,
    ),
    (
        "ex12",
        "ON CONFLICT (key) DO UPDATE SET updated_at ... RETURNING: a conflict reported as created",
        "two_schedulers_enqueue_each_slot_once",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                inserted = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now)"
                    " ON CONFLICT (key) DO UPDATE SET updated_at = excluded.updated_at"
                    " RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if inserted is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "ex12",
        "a SELECT for the key, then INSERT OR IGNORE reported as created",
        "two_schedulers_in_every_order_enqueue_each_slot_once",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                if conn.execute("SELECT 1 FROM jobs WHERE key = ?", (key,)).fetchone():
                    continue
                conn.execute(
                    "INSERT OR IGNORE INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (?, ?, ?, ?)",
                    (key, schedule, slot, now),
                )
                created.append(key)
            return created
        """,
    ),
    (
        "ex12",
        "catch_up='latest' drops only the oldest missed slot",
        "tick_catches_up_with_the_latest_slot",
        """
        def due_slots(period_s, last, since, now, catch_up):
            if period_s <= 0:
                raise ValueError(f"period_s must be positive, not {period_s!r}")
            if catch_up not in ("all", "latest"):
                raise ValueError(f"catch_up must be 'all' or 'latest', not {catch_up!r}")
            slot = (now // period_s) * period_s
            slots = []
            while slot >= since and (last is None or slot > last):
                slots.append(slot)
                slot -= period_s
            slots.reverse()
            if catch_up == "latest" and len(slots) > 1:
                return slots[1:]   # missed ones collapse: skip the oldest
            return slots
        """,
    ),
    (
        "ex12",
        "the newest key read with SQL built by an f-string (a quote in the name breaks it)",
        "names_with_underscores_and_capitals_are_their_own_schedules",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                f"SELECT max(key) FROM jobs WHERE substr(key, 1, {len(prefix)}) = '{prefix}'"
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                inserted = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if inserted is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "ex12",
        "slot_key strips the spaces around the schedule's name",
        "names_with_underscores_and_capitals_are_their_own_schedules",
        """
        def slot_key(schedule, fire_time):
            if not schedule.strip() or ":" in schedule:
                raise ValueError(f"schedule name {schedule!r} must be non-empty and without ':'")
            name = schedule.strip()
            return f"schedule:{name}:{datetime.fromtimestamp(fire_time, UTC):%Y-%m-%dT%H:%M:%SZ}"
        """,
    ),
    (
        "ex12",
        "due_slots counts forward from last + period_s (off the grid when last is)",
        "due_slots_on_generated_schedules",
        """
        def due_slots(period_s, last, since, now, catch_up):
            if period_s <= 0:
                raise ValueError(f"period_s must be positive, not {period_s!r}")
            if catch_up not in ("all", "latest"):
                raise ValueError(f"catch_up must be 'all' or 'latest', not {catch_up!r}")
            if last is None:
                slot = -(-since // period_s) * period_s   # the first multiple at or after since
            else:
                slot = max(last + period_s, -(-since // period_s) * period_s)
            slots = []
            while slot <= now:
                slots.append(slot)
                slot += period_s
            return slots[-1:] if catch_up == "latest" else slots
        """,
    ),
    (
        "ex12",
        "due_slots takes catch_up in any case ('Latest')",
        "due_slots_refuses_bad_arguments",
        """
        _reference_due = due_slots
        def due_slots(period_s, last, since, now, catch_up):
            return _reference_due(period_s, last, since, now, str(catch_up).strip().lower())
        """,
    ),
    (
        "ex12",
        "the slot at exactly since is not due (slot > since)",
        "due_slots_boundaries",
        """
        _reference_due = due_slots
        def due_slots(period_s, last, since, now, catch_up):
            return [s for s in _reference_due(period_s, last, since, now, catch_up) if s > since]
        """,
    ),
    (
        "ex12",
        "run_after = max(slot, now): a missed slot's job dated by the tick, not the slot",
        "tick_enqueues_each_slot",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                inserted = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :run_after, :now)"
                    " ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "run_after": max(slot, now), "now": now},
                ).fetchone()
                if inserted is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "ex12",
        "tick returns the keys it created newest first",
        "tick_enqueues_each_slot",
        """
        _reference_tick = tick
        def tick(conn, schedule, period_s, since, now, catch_up):
            return sorted(_reference_tick(conn, schedule, period_s, since, now, catch_up),
                          reverse=True)
        """,
    ),
    (
        # "The scheduler starts it": a job born running is never claimed by a worker.
        "ex12",
        "tick inserts each slot's job as state 'running' (as if already started)",
        "the_jobs_a_tick_creates_are_ready_to_claim",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, state, run_after, updated_at)"
                    " VALUES (:key, :kind, 'running', :slot, :now)"
                    " ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "ex12",
        "due_slots tests `not last`: last = 0 (the epoch's slot) taken for None",
        "due_slots_on_generated_schedules",
        """
        def due_slots(period_s, last, since, now, catch_up):
            if period_s <= 0:
                raise ValueError(f"period_s must be positive, not {period_s!r}")
            if catch_up not in ("all", "latest"):
                raise ValueError(f"catch_up must be 'all' or 'latest', not {catch_up!r}")
            slot = (now // period_s) * period_s
            slots = []
            while slot >= since and (not last or slot > last):
                slots.append(slot)
                if catch_up == "latest":
                    break
                slot -= period_s
            return slots[::-1]
        """,
    ),
    (
        "ex12",
        "catch_up='latest' as [slots[-1]]: IndexError when nothing is due",
        "due_slots_boundaries",
        """
        def due_slots(period_s, last, since, now, catch_up):
            if period_s <= 0:
                raise ValueError(f"period_s must be positive, not {period_s!r}")
            if catch_up not in ("all", "latest"):
                raise ValueError(f"catch_up must be 'all' or 'latest', not {catch_up!r}")
            slot = (now // period_s) * period_s
            slots = []
            while slot >= since and (last is None or slot > last):
                slots.append(slot)
                slot -= period_s
            slots.reverse()
            return [slots[-1]] if catch_up == "latest" else slots
        """,
    ),
    (
        "ex12",
        "due_slots walks range(since, now + 1, period_s) (off the grid when since is)",
        "due_slots_boundaries",
        """
        def due_slots(period_s, last, since, now, catch_up):
            if period_s <= 0:
                raise ValueError(f"period_s must be positive, not {period_s!r}")
            if catch_up not in ("all", "latest"):
                raise ValueError(f"catch_up must be 'all' or 'latest', not {catch_up!r}")
            start = since if last is None else max(since, last + period_s)
            slots = list(range(int(start), int(now) + 1, period_s))
            return slots[-1:] if catch_up == "latest" else slots
        """,
    ),
    (
        "ex12",
        "the schedule's keys matched without the ':' after the name ('night' reads 'nightly')",
        "another_schedule_with_a_longer_name",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][-20:], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                inserted = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if inserted is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "ex12",
        "slot_key also refuses '/' in a name (and a blank one)",
        "slot_key_names_the_slot",
        """
        def slot_key(schedule, fire_time):
            if not schedule.strip() or ":" in schedule or "/" in schedule:
                raise ValueError(f"schedule name {schedule!r} must be non-empty and without ':'")
            stamp = datetime.fromtimestamp(fire_time, UTC)
            return f"schedule:{schedule}:{stamp:%Y-%m-%dT%H:%M:%SZ}"
        """,
    ),
    (
        "ex12",
        "tick inserts with executemany and reports what it created by total_changes",
        "two_schedulers_in_every_order_enqueue_each_slot_once",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            slots = due_slots(period_s, last, since, now, catch_up)
            rows = [
                {"key": slot_key(schedule, s), "kind": schedule, "slot": s, "now": now}
                for s in slots
            ]
            before = conn.total_changes
            conn.executemany(
                "INSERT INTO jobs (key, kind, run_after, updated_at)"
                " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING", rows)
            if conn.total_changes - before == len(rows):
                created = [r["key"] for r in rows]
            else:
                made = conn.total_changes - before
                created = [r["key"] for r in rows][made - len(rows):] if made else []
            return created
        """,
    ),
    (
        "ex12",
        "tick stores kind = 'schedule:<name>:' (the key's prefix)",
        "tick_enqueues_each_slot",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                inserted = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": prefix, "slot": slot, "now": now},
                ).fetchone()
                if inserted is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "ex12",
        "tick writes updated_at = the slot, not now",
        "tick_enqueues_each_slot",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                inserted = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": slot},
                ).fetchone()
                if inserted is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "ex12",
        "tick builds each key itself, in local time, instead of calling slot_key",
        "tick_reads_what_fired_in_every_time_zone",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = f"schedule:{schedule}:{datetime.fromtimestamp(slot):%Y-%m-%dT%H:%M:%SZ}"
                inserted = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if inserted is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "ex12",
        "catch_up='latest' takes the newest slot at or before now, whatever since says",
        "due_slots_boundaries",
        """
        def due_slots(period_s, last, since, now, catch_up):
            if period_s <= 0:
                raise ValueError(f"period_s must be positive, not {period_s!r}")
            if catch_up not in ("all", "latest"):
                raise ValueError(f"catch_up must be 'all' or 'latest', not {catch_up!r}")
            newest = (now // period_s) * period_s
            if catch_up == "latest":
                return [newest] if last is None or newest > last else []
            slots = []
            slot = newest
            while slot >= since and (last is None or slot > last):
                slots.append(slot)
                slot -= period_s
            return slots[::-1]
        """,
    ),
    (
        # A read lock upgraded to a write lock fails at once when another process writes.
        "ex12",
        "tick wrapped in a deferred BEGIN: the read, then the INSERTs (locked when two tick)",
        "two_schedulers_enqueue_each_slot_once",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            conn.execute("BEGIN")
            try:
                return _tick(conn, schedule, period_s, since, now, catch_up)
            finally:
                if conn.in_transaction:
                    conn.execute("COMMIT")


        def _tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                inserted = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if inserted is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # 'schedule::...' is the key of no schedule.
        "ex12",
        "slot_key accepts an empty schedule name",
        "slot_key_refuses_bad_names",
        """
        def slot_key(schedule, fire_time):
            if ":" in schedule:
                raise ValueError(f"schedule name {schedule!r} must be non-empty and without ':'")
            fired = datetime.fromtimestamp(fire_time, UTC)
            return f"schedule:{schedule}:{fired:%Y-%m-%dT%H:%M:%SZ}"
        """,
    ),
    (
        # Once the slot's job succeeded, the gap a 'latest' catch-up left is filled.
        "ex12",
        "what fired read only from the jobs still pending, running or in retry_wait",
        "tick_reads_what_fired_from_the_table",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix "
                " AND state IN ('pending', 'running', 'retry_wait')",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                inserted = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if inserted is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # ASCII names pass: a name with an accent is longer in bytes, so its keys are
        # never found and a 'latest' gap is filled.
        "ex12",
        "the newest key looked up with substr(key, 1, <the prefix's length in bytes>)",
        "tick_reads_what_fired_from_the_table",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix.encode()), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                inserted = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if inserted is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "ex12",
        "tick writes updated_at = int(now)",
        "tick_enqueues_each_slot",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                inserted = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": int(now)},
                ).fetchone()
                if inserted is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "ex12",
        "slot_key refuses a name of spaces only (not schedule.strip())",
        "slot_key_names_the_slot",
        """
        def slot_key(schedule, fire_time):
            if not schedule.strip() or ":" in schedule:
                raise ValueError(f"schedule name {schedule!r} must be non-empty and without ':'")
            fired = datetime.fromtimestamp(fire_time, UTC)
            return f"schedule:{schedule}:{fired:%Y-%m-%dT%H:%M:%SZ}"
        """,
    ),
    (
        # Every earlier check ticked 'nightly', whose kind lower() leaves alone.
        "ex12",
        "tick stores kind = schedule.lower() (the worker looks for task 'clôture_mois eu')",
        "each_job_is_of_its_schedules_kind",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                inserted = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule.lower(), "slot": slot, "now": now},
                ).fetchone()
                if inserted is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # The one failed tick the checks sent was refused by slot_key, inside the try.
        "ex12",
        "tick's BEGIN IMMEDIATE left open when due_slots refuses period_s (called before try)",
        "a_failed_tick_leaves_the_connection_usable",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            conn.execute("BEGIN IMMEDIATE")
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            slots = due_slots(period_s, last, since, now, catch_up)
            created = []
            try:
                for slot in slots:
                    key = slot_key(schedule, slot)
                    inserted = conn.execute(
                        "INSERT INTO jobs (key, kind, run_after, updated_at) VALUES"
                        " (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                        {"key": key, "kind": schedule, "slot": slot, "now": now},
                    ).fetchone()
                    if inserted is not None:
                        created.append(key)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return created
        """,
    ),
    (
        "ex12",
        "due_slots builds list(range(...)) of every slot since 'since', then filters it",
        "due_slots_works_back_from_now",
        """
        import math
        def due_slots(period_s, last, since, now, catch_up):
            if period_s <= 0:
                raise ValueError("period_s")
            if catch_up not in ("all", "latest"):
                raise ValueError("catch_up")
            first = math.ceil(since / period_s) * period_s
            every = list(range(int(first), int(now) + 1, period_s))
            slots = [s for s in every if last is None or s > last]
            return slots[-1:] if catch_up == "latest" else slots
        """,
    ),
    (
        "ex12",
        "due_slots walks forward from since to now, keeping the slots after last",
        "due_slots_works_back_from_now",
        """
        import math
        def due_slots(period_s, last, since, now, catch_up):
            if period_s <= 0:
                raise ValueError("period_s")
            if catch_up not in ("all", "latest"):
                raise ValueError("catch_up")
            slot = math.ceil(since / period_s) * period_s
            slots = []
            while slot <= now:
                if last is None or slot > last:
                    slots.append(slot)
                slot += period_s
            return slots[-1:] if catch_up == "latest" else slots
        """,
    ),
    (
        "ex12",
        "tick keeps the last slot it fired in a module dict (reads the table only once)",
        "each_tick_reads_the_table_again",
        """
        from datetime import UTC, datetime
        _FIRED = {}
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            last = _FIRED.get(schedule)
            if last is None:
                row = conn.execute(
                    "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                    {"n": len(prefix), "prefix": prefix},
                ).fetchone()
                if row[0] is not None:
                    fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                    last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                inserted = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at) VALUES"
                    " (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                _FIRED[schedule] = slot
                if inserted is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "ex12",
        "tick keeps the first connection it was given in a global (fails after a reconnect)",
        "each_tick_reads_the_table_again",
        """
        _ref_tick = tick
        _CONN = None
        def tick(conn, schedule, period_s, since, now, catch_up):
            global _CONN
            if _CONN is None:
                _CONN = conn
            return _ref_tick(_CONN, schedule, period_s, since, now, catch_up)
        """,
    ),
    (
        # The second tick of the old scene ran on a new connection: a cache per connection
        # read the table afresh there.
        "ex12",
        "tick caches what fired per connection (functools.cache on (conn, schedule))",
        "each_tick_reads_the_table_again",
        """
        import functools
        from datetime import UTC, datetime
        @functools.cache
        def _last_fired(conn, schedule):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            if row[0] is None:
                return None
            fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
            return fired.replace(tzinfo=UTC).timestamp()
        def tick(conn, schedule, period_s, since, now, catch_up):
            created = []
            for slot in due_slots(period_s, _last_fired(conn, schedule), since, now, catch_up):
                key = slot_key(schedule, slot)
                inserted = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at) VALUES"
                    " (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if inserted is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # "50%_off" stays as it is in glibc's strftime ('%_o' is no directive); '%d' is one.
        "ex12",
        "slot_key puts the name into the strftime format ('%d' in a name becomes the day)",
        "slot_key_names_the_slot",
        """
        from datetime import UTC, datetime
        def slot_key(schedule, fire_time):
            if not schedule or ":" in schedule:
                raise ValueError(f"bad schedule name {schedule!r}")
            return datetime.fromtimestamp(fire_time, UTC).strftime(
                f"schedule:{schedule}:%Y-%m-%dT%H:%M:%SZ"
            )
        """,
    ),
    (
        "ex12",
        "slot_key shifts local time by the offset in force now (time.altzone when tm_isdst)",
        "slot_key_is_the_same_in_every_time_zone",
        """
        import time as _time


        def slot_key(schedule, fire_time):
            if not schedule or ":" in schedule:
                raise ValueError(f"bad schedule name {schedule!r}")
            offset = _time.altzone if _time.localtime().tm_isdst > 0 else _time.timezone
            moment = datetime.fromtimestamp(fire_time + offset)
            return f"schedule:{schedule}:{moment:%Y-%m-%dT%H:%M:%SZ}"
        """,
    ),
    (
        "ex12",
        "the newest key's fire time parsed with time.mktime(...) minus the offset in force now",
        "tick_reads_what_fired_in_every_time_zone",
        """
        import time as _time


        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, ?) = ?", (len(prefix), prefix)
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = _time.strptime(row[0][len(prefix) :], "%Y-%m-%dT%H:%M:%SZ")
                offset = _time.altzone if _time.localtime().tm_isdst > 0 else _time.timezone
                last = _time.mktime(fired) - offset
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at) VALUES (?, ?, ?, ?)"
                    " ON CONFLICT (key) DO NOTHING RETURNING key",
                    (key, schedule, slot, now),
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "ex12",
        "what fired read as the key of the row with the latest run_after",
        "last_fired_is_the_newest_key",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT key FROM jobs WHERE substr(key, 1, ?) = ? ORDER BY run_after DESC LIMIT 1",
                (len(prefix), prefix),
            ).fetchone()
            last = None
            if row is not None:
                fired = datetime.strptime(row[0][len(prefix) :], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at) VALUES (?, ?, ?, ?)"
                    " ON CONFLICT (key) DO NOTHING RETURNING key",
                    (key, schedule, slot, now),
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "ex12",
        "due_slots takes catch_up with spaces around it ('latest ')",
        "due_slots_refuses_bad_arguments",
        """
        def due_slots(period_s, last, since, now, catch_up):
            if period_s <= 0:
                raise ValueError(f"period_s must be positive, not {period_s!r}")
            catch_up = catch_up.strip()
            if catch_up not in ("all", "latest"):
                raise ValueError(f"catch_up must be 'all' or 'latest', not {catch_up!r}")
            slot = (now // period_s) * period_s
            slots = []
            while slot >= since and (last is None or slot > last):
                slots.append(slot)
                if catch_up == "latest":
                    break
                slot -= period_s
            return slots[::-1]
        """,
    ),
    (
        "ex12",
        "tick inserts its jobs with max_attempts = 1 (a periodic job gets no retry)",
        "the_jobs_a_tick_creates_are_ready_to_claim",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, ?) = ?", (len(prefix), prefix)
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix) :], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at, max_attempts)"
                    " VALUES (?, ?, ?, ?, 1)"
                    " ON CONFLICT (key) DO NOTHING RETURNING key",
                    (key, schedule, slot, now),
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "ex12",
        "tick puts its jobs on a queue of their own ('scheduled'), which no worker serves",
        "the_jobs_a_tick_creates_are_ready_to_claim",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, ?) = ?", (len(prefix), prefix)
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix) :], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at, queue)"
                    " VALUES (?, ?, ?, ?, 'scheduled')"
                    " ON CONFLICT (key) DO NOTHING RETURNING key",
                    (key, schedule, slot, now),
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "ex12",
        "tick stores kind = schedule.strip()",
        "each_job_is_of_its_schedules_kind",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, ?) = ?", (len(prefix), prefix)
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix) :], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at) VALUES (?, ?, ?, ?)"
                    " ON CONFLICT (key) DO NOTHING RETURNING key",
                    (key, schedule.strip(), slot, now),
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "ex12",
        "due_slots compares slots with int(since) (a slot just before a fractional since is due)",
        "due_slots_boundaries",
        """
        def due_slots(period_s, last, since, now, catch_up):
            if period_s <= 0:
                raise ValueError(f"period_s must be positive, not {period_s!r}")
            if catch_up not in ("all", "latest"):
                raise ValueError(f"catch_up must be 'all' or 'latest', not {catch_up!r}")
            slot = (now // period_s) * period_s
            slots = []
            while slot >= int(since) and (last is None or slot > last):
                slots.append(slot)
                if catch_up == "latest":
                    break
                slot -= period_s
            return slots[::-1]
        """,
    ),
    (
        "ex12",
        "tick ignores catch_up='latest' while nothing has fired (a new schedule runs every slot)",
        "tick_catches_up_with_the_latest_slot",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, ?) = ?", (len(prefix), prefix)
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix) :], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            mode = catch_up if last is not None else "all"
            for slot in due_slots(period_s, last, since, now, mode):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at) VALUES (?, ?, ?, ?)"
                    " ON CONFLICT (key) DO NOTHING RETURNING key",
                    (key, schedule, slot, now),
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # Right while the two schedulers' nows differ; clocks that agree to the second
        # make the second report every slot the first created.
        "ex12",
        "a key reported as created when its row's updated_at is this tick's now",
        "a_tick_reports_only_the_keys_it_inserted",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                conn.execute(
                    "INSERT OR IGNORE INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now)",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                )
                mine = conn.execute(
                    "SELECT 1 FROM jobs WHERE key = :key AND updated_at = :now",
                    {"key": key, "now": now},
                ).fetchone()
                if mine:
                    created.append(key)
            return created
        """,
    ),
    (
        # The long outage of a tick stops at 2000 slots: a cap above it passed.
        "ex12",
        "due_slots keeps the newest 5000 slots of a catch-up",
        "due_slots_has_no_cap_on_a_long_outage",
        """
        _all_due = due_slots
        def due_slots(period_s, last, since, now, catch_up):
            return _all_due(period_s, last, since, now, catch_up)[-5000:]
        """,
    ),
    (
        # The long outage of a tick reaches 600 days back: a window of two years passed.
        "ex12",
        "due_slots looks back two years at most",
        "due_slots_has_no_cap_on_a_long_outage",
        """
        _all_due = due_slots
        def due_slots(period_s, last, since, now, catch_up):
            return _all_due(period_s, last, max(since, now - 2 * 365 * 86400), now, catch_up)
        """,
    ),
    (
        # The file-backed outage stops at 2000 minutes: a cap kept in tick above it passed.
        "ex12",
        "tick keeps only the newest 5000 due slots of a catch-up (due_slots(...)[-5000:])",
        "a_long_outage_enqueues_every_missed_slot",
        """
        MAX_CATCH_UP = 5000
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up)[-MAX_CATCH_UP:]:
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # The file-backed outage reaches 600 days back: a window of two years in tick passed.
        "ex12",
        "tick looks back two years at most (since moved up to now minus two years)",
        "a_long_outage_enqueues_every_missed_slot",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, max(since, now - 2 * 365 * 86400), now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # due_slots alone was asked for 12000 slots at most: a cap above it passed.
        "ex12",
        "due_slots keeps the newest 20000 slots of a catch-up",
        "due_slots_has_no_cap_on_a_long_outage",
        """
        _all_due = due_slots
        def due_slots(period_s, last, since, now, catch_up):
            return _all_due(period_s, last, since, now, catch_up)[-20000:]
        """,
    ),
    (
        # The zones were set around each call, after the module was imported in UTC.
        "ex12",
        "slot_key in the local zone read once at import (datetime.now().astimezone().tzinfo)",
        "slot_key_is_the_same_in_every_time_zone",
        """
        LOCAL = datetime.now().astimezone().tzinfo
        def slot_key(schedule, fire_time):
            if not schedule or ":" in schedule:
                raise ValueError(f"schedule name {schedule!r} must be non-empty and without ':'")
            fired = datetime.fromtimestamp(fire_time, LOCAL)
            return f"schedule:{schedule}:{fired:%Y-%m-%dT%H:%M:%SZ}"
        """,
    ),
    (
        # The same, when the newest key's time is read back: in UTC wherever it was imported.
        "ex12",
        "the newest key's fire time read in the local zone taken at import (tzinfo=LOCAL)",
        "tick_reads_what_fired_in_every_time_zone",
        """
        LOCAL = datetime.now().astimezone().tzinfo
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=LOCAL).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # Only the current slot's run_after was read: a missed one dated by the tick passed.
        "ex12",
        "a missed slot's job dated by the tick (run_after = now, not its slot)",
        "tick_enqueues_each_slot",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                run_after = slot if slot + period_s > now else now  # a missed slot: now
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": run_after, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # The long outages reached 5.5 years back at most: a window of ten years passed.
        "ex12",
        "due_slots looks back ten years at most (since moved up to now minus ten years)",
        "due_slots_has_no_cap_on_a_long_outage",
        """
        _all_due = due_slots
        def due_slots(period_s, last, since, now, catch_up):
            return _all_due(period_s, last, max(since, now - 10 * 365 * 86400), now, catch_up)
        """,
    ),
    (
        # due_slots alone was asked for 60000 slots at most: a cap of 100000 passed.
        "ex12",
        "due_slots keeps the newest 100000 slots of a catch-up (slots[-100_000:])",
        "due_slots_has_no_cap_on_a_long_outage",
        """
        _all_due = due_slots
        def due_slots(period_s, last, since, now, catch_up):
            return _all_due(period_s, last, since, now, catch_up)[-100_000:]
        """,
    ),
    (
        # A walk back that stops at a module constant past every slot count the checks asked.
        "ex12",
        "due_slots stops its walk back at MAX_SLOTS = 500_000, a module constant",
        "due_slots_has_no_cap_on_a_long_outage",
        """
        MAX_SLOTS = 500_000
        def due_slots(period_s, last, since, now, catch_up):
            if period_s <= 0:
                raise ValueError(f"period_s must be positive, not {period_s!r}")
            if catch_up not in ("all", "latest"):
                raise ValueError(f"catch_up must be 'all' or 'latest', not {catch_up!r}")
            slot = (now // period_s) * period_s
            slots = []
            while slot >= since and (last is None or slot > last) and len(slots) < MAX_SLOTS:
                slots.append(slot)
                if catch_up == "latest":
                    break
                slot -= period_s
            return slots[::-1]
        """,
    ),
    (
        # A window reckoned in days, past the 2000 days of the longest outage ticked.
        "ex12",
        "due_slots looks back 7300 days at most (a twenty-year window)",
        "due_slots_has_no_cap_on_a_long_outage",
        """
        LOOKBACK_DAYS = 7300
        _all_due = due_slots
        def due_slots(period_s, last, since, now, catch_up):
            oldest = now - LOOKBACK_DAYS * 86400
            return [s for s in _all_due(period_s, last, since, now, catch_up) if s >= oldest]
        """,
    ),
    (
        # The file-backed and in-memory outages reached 5.5 years back: ten years in tick passed.
        "ex12",
        "tick looks back ten years at most (since moved up to now minus ten years)",
        "a_long_outage_enqueues_every_missed_slot",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            since = max(since, now - 10 * 365 * 86400)  # ten years at most
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # The in-memory outage stopped at 12000 slots: a cap kept in tick above it passed.
        "ex12",
        "tick keeps only the newest 20000 due slots of a catch-up (due_slots(...)[-20000:])",
        "a_long_outage_enqueues_every_missed_slot",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up)[-20000:]:
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # A cap as a parameter's default, past the 12000 slots of the in-memory outage.
        "ex12",
        "tick inserts at most max_slots=50_000 slots a tick (a parameter's default)",
        "a_long_outage_enqueues_every_missed_slot",
        """
        def tick(conn, schedule, period_s, since, now, catch_up, max_slots=50_000):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up)[-max_slots:]:
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # A cap in a module constant, sliced with islice of the newest first.
        "ex12",
        "tick takes the newest MAX_CATCH_UP = 30_000 slots through islice(reversed(...))",
        "a_long_outage_enqueues_every_missed_slot",
        """
        from itertools import islice
        MAX_CATCH_UP = 30_000
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            due = reversed(due_slots(period_s, last, since, now, catch_up))
            for slot in sorted(islice(due, MAX_CATCH_UP)):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # The cap scene stopped at 120000 slots: a cap of 200000 kept in tick passed.
        "ex12",
        "tick keeps only the newest 200000 due slots of a catch-up (missed[-200_000:])",
        "a_long_outage_enqueues_every_missed_slot",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            missed = due_slots(period_s, last, since, now, catch_up)
            for slot in missed[-200_000:]:
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "ex12",
        "tick keeps the newest min(n, 500_000) due slots of a catch-up",
        "a_long_outage_enqueues_every_missed_slot",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            missed = due_slots(period_s, last, since, now, catch_up)
            keep = min(len(missed), 500_000)
            for slot in missed[len(missed) - keep:]:
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "ex12",
        "tick keeps only the newest 10**6 due slots of a catch-up",
        "a_long_outage_enqueues_every_missed_slot",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up)[-10**6:]:
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "ex12",
        "tick takes the newest 2**20 slots through islice(reversed(...))",
        "a_long_outage_enqueues_every_missed_slot",
        """
        from itertools import islice
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            newest = islice(reversed(due_slots(period_s, last, since, now, catch_up)), 2**20)
            for slot in sorted(newest):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "ex12",
        "tick keeps the newest MAX_CATCH_UP = 250_000 slots (a module constant)",
        "a_long_outage_enqueues_every_missed_slot",
        """
        MAX_CATCH_UP = 250_000
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            missed = due_slots(period_s, last, since, now, catch_up)
            if len(missed) > MAX_CATCH_UP:
                missed = missed[len(missed) - MAX_CATCH_UP:]
            for slot in missed:
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # The boundaries never had since or last after now: a ValueError for them passed.
        "ex12",
        "due_slots raises ValueError when since is after now (a schedule that starts later)",
        "due_slots_boundaries",
        """
        _ok_due = due_slots
        def due_slots(period_s, last, since, now, catch_up):
            if since > now:
                raise ValueError(f"since {since!r} is after now {now!r}")
            return _ok_due(period_s, last, since, now, catch_up)
        """,
    ),
    (
        "ex12",
        "due_slots raises ValueError when last is after now (another scheduler's clock ahead)",
        "due_slots_boundaries",
        """
        _ok_due = due_slots
        def due_slots(period_s, last, since, now, catch_up):
            if last is not None and last > now:
                raise ValueError(f"last {last!r} is in the future (now {now!r}): clock skew")
            return _ok_due(period_s, last, since, now, catch_up)
        """,
    ),
    (
        # No scheduler ticked before a slot another had fired: a clock behind passed.
        "ex12",
        "tick raises when the newest key is after now (a clock behind taken for an error)",
        "a_scheduler_whose_clock_runs_behind_creates_nothing",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
                if last > now:
                    raise RuntimeError(f"{row[0]} fired after now ({now}): is this clock behind?")
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "ex12",
        # "ON CONFLICT skips the repeats": a clock behind another's fires a folded slot.
        "under catch_up='latest', tick never reads what fired and leans on ON CONFLICT",
        "a_scheduler_whose_clock_runs_behind_creates_nothing",
        """
        _ref_tick = tick
        def tick(conn, schedule, period_s, since, now, catch_up):
            if catch_up != "latest":
                return _ref_tick(conn, schedule, period_s, since, now, catch_up)
            created = []
            for slot in due_slots(period_s, None, since, now, "latest"):
                key = slot_key(schedule, slot)
                row = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT (key) DO NOTHING RETURNING key",
                    (key, schedule, slot, now),
                ).fetchone()
                if row:
                    created.append(key)
            return created
    """,
    ),
    (
        "ex12",
        # The slots still go in, committed together; the scheduler's long-lived connection
        # is left opening a transaction before each later write, which nobody commits.
        "tick batches its inserts under isolation_level 'DEFERRED', the mode left set",
        "a_failed_tick_leaves_the_connection_usable",
        """
        _tick = tick
        def tick(conn, schedule, period_s, since, now, catch_up):
            conn.isolation_level = "DEFERRED"
            try:
                created = _tick(conn, schedule, period_s, since, now, catch_up)
                conn.commit()
            except BaseException:
                conn.rollback()
                raise
            return created
    """,
    ),
    (
        "ex12",
        # Right at every instant but the hour summer time repeats: its slots get the key
        # of the hour before, are taken for fired, and never run.
        "the slot key made from the local wall clock read back (time.localtime, then astimezone)",
        "slot_key_holds_on_the_nights_summer_time_changes",
        """
        import time
        from datetime import UTC, datetime


        def slot_key(schedule: str, fire_time: float) -> str:
            if not schedule or ":" in schedule:
                raise ValueError(f"schedule name {schedule!r} must be non-empty and without ':'")
            # the scheduler's wall clock, then converted to UTC (astimezone knows the zone's rules)
            local = datetime(*time.localtime(fire_time)[:6])
            return f"schedule:{schedule}:{local.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}"
    """,
    ),
    (
        "ex12",
        # Two schedulers in two zones enqueue each night twice, and one in a summer-time
        # zone runs a night twice when the clocks change.
        "daily slots aligned to the scheduler's local midnight",
        "daily_slots_are_the_same_in_every_time_zone",
        """
        from datetime import UTC, datetime

        DAY = 86400


        def due_slots(period_s, last, since, now, catch_up):
            if period_s <= 0:
                raise ValueError(f"period_s must be positive, not {period_s!r}")
            if catch_up not in ("all", "latest"):
                raise ValueError(f"catch_up must be 'all' or 'latest', not {catch_up!r}")
            # A daily (or weekly) schedule fires at midnight where the scheduler runs, not at
            # 00:00 UTC: shift the grid by the local offset.
            offset = 0
            if period_s % DAY == 0:
                offset = datetime.fromtimestamp(now).astimezone().utcoffset().total_seconds()
            slot = ((now + offset) // period_s) * period_s - offset
            slots = []
            while slot >= since and (last is None or slot > last):
                slots.append(slot)
                if catch_up == "latest":
                    break
                slot -= period_s
            return slots[::-1]
    """,
    ),
    (
        # One schedule alone passes: a second with the same period has the same ids.
        "ex12",
        "the slot used as the job's id (INSERT ... (id, key, ...) VALUES (int(slot), ...))",
        "schedules_with_the_same_period_each_get_their_slots",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (id, key, kind, run_after, updated_at)"
                    " VALUES (:id, :key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING"
                    " RETURNING key",
                    {"id": int(slot), "key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # The same ids, the clash on jobs.id skipped as quietly as one on the key.
        "ex12",
        "the slot used as the job's id, with a bare ON CONFLICT DO NOTHING",
        "schedules_with_the_same_period_each_get_their_slots",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (id, key, kind, run_after, updated_at)"
                    " VALUES (:id, :key, :kind, :slot, :now) ON CONFLICT DO NOTHING"
                    " RETURNING key",
                    {"id": int(slot), "key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # The claim's run_after <= :now never holds for a text: the jobs are never claimed.
        "ex12",
        "run_after written as the slot's ISO time (TEXT)",
        "the_jobs_a_tick_creates_are_ready_to_claim",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                run_after = datetime.fromtimestamp(slot, UTC).isoformat()
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING"
                    " RETURNING key",
                    {"key": key, "kind": schedule, "slot": run_after, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # Due a thousand times later than the slot: never claimed in this lifetime.
        "ex12",
        "run_after written in milliseconds (slot * 1000)",
        "the_jobs_a_tick_creates_are_ready_to_claim",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                run_after = int(slot * 1000)  # milliseconds, as the JavaScript side writes them
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING"
                    " RETURNING key",
                    {"key": key, "kind": schedule, "slot": run_after, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # A newest key whose retry is still to come is missed: the slots before it run again.
        "ex12",
        "what fired read only among jobs whose run_after has come (AND run_after <= :now)",
        "last_fired_is_the_newest_key",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix"
                " AND run_after <= :now",
                {"n": len(prefix), "prefix": prefix, "now": now},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING"
                    " RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # The sweep stopped only the earlier scheduler: the later one never met the other's
        # keys before its own newest slot, which the other's clock is before.
        "ex12",
        "tick stops at the first conflict, assuming the other scheduler enqueues the rest",
        "two_schedulers_in_every_order_enqueue_each_slot_once",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING"
                    " RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is None:
                    break  # another scheduler got here first: it enqueues the rest
                created.append(key)
            return created
        """,
    ),
    (
        # The lock's holder may be a worker's claim, not a scheduler of this schedule.
        "ex12",
        "tick in BEGIN IMMEDIATE returns [] when the BEGIN meets 'database is locked'",
        "a_failed_insert_stops_the_tick",
        """
        import sqlite3

        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError:
                return []  # another scheduler is enqueuing these slots
            try:
                row = conn.execute(
                    "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                    {"n": len(prefix), "prefix": prefix},
                ).fetchone()
                last = None
                if row[0] is not None:
                    fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                    last = fired.replace(tzinfo=UTC).timestamp()
                created = []
                for slot in due_slots(period_s, last, since, now, catch_up):
                    key = slot_key(schedule, slot)
                    got = conn.execute(
                        "INSERT INTO jobs (key, kind, run_after, updated_at)"
                        " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING"
                        " RETURNING key",
                        {"key": key, "kind": schedule, "slot": slot, "now": now},
                    ).fetchone()
                    if got is not None:
                        created.append(key)
                conn.execute("COMMIT")
                return created
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        """,
    ),
    (
        "ex12",
        "the schedule name normalized to NFKC in slot_key (one form for look-alike names)",
        "names_with_underscores_and_capitals_are_their_own_schedules",
        """
        import unicodedata

        def slot_key(schedule, fire_time):
            if not schedule or ":" in schedule:
                raise ValueError(f"schedule name {schedule!r} must be non-empty and without ':'")
            schedule = unicodedata.normalize("NFKC", schedule)
            when = datetime.fromtimestamp(fire_time, UTC)
            return f"schedule:{schedule}:{when:%Y-%m-%dT%H:%M:%SZ}"
        """,
    ),
    (
        "ex12",
        "the schedule name cut to 64 characters in slot_key (a column's width)",
        "names_with_underscores_and_capitals_are_their_own_schedules",
        """
        def slot_key(schedule, fire_time):
            if not schedule or ":" in schedule:
                raise ValueError(f"schedule name {schedule!r} must be non-empty and without ':'")
            schedule = schedule[:64]
            when = datetime.fromtimestamp(fire_time, UTC)
            return f"schedule:{schedule}:{when:%Y-%m-%dT%H:%M:%SZ}"
        """,
    ),
    (
        "ex12",
        "slot_key refuses a name longer than 64 characters",
        "names_with_underscores_and_capitals_are_their_own_schedules",
        """
        def slot_key(schedule, fire_time):
            if not schedule or ":" in schedule:
                raise ValueError(f"schedule name {schedule!r} must be non-empty and without ':'")
            if len(schedule) > 64:
                raise ValueError(f"schedule name {schedule!r} is longer than 64 characters")
            when = datetime.fromtimestamp(fire_time, UTC)
            return f"schedule:{schedule}:{when:%Y-%m-%dT%H:%M:%SZ}"
        """,
    ),
    (
        "ex12",
        "what fired read among the schedule's own kind only (AND kind = :kind)",
        "last_fired_is_the_newest_key",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix AND kind = :kind",
                {"n": len(prefix), "prefix": prefix, "kind": schedule},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                inserted = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if inserted is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "ex12",
        "what fired read in the default queue only (AND queue = 'default')",
        "last_fired_is_the_newest_key",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs"
                " WHERE substr(key, 1, :n) = :prefix AND queue = 'default'",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                inserted = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if inserted is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # Judged by the keys alone, a kill between the INSERT and its UPDATE left a slot
        # the restart takes for fired, whose job is of the table's default kind ('email').
        "ex12",
        "each job inserted with its key, its kind set by an UPDATE after it",
        "the_jobs_a_tick_creates_are_ready_to_claim",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                inserted = conn.execute(
                    "INSERT INTO jobs (key, run_after, updated_at) VALUES (?, ?, ?)"
                    " ON CONFLICT (key) DO NOTHING RETURNING key",
                    (key, slot, now),
                ).fetchone()
                if inserted is not None:
                    conn.execute("UPDATE jobs SET kind = ? WHERE key = ?", (schedule, key))
                    created.append(key)
            return created
        """,
    ),
    (
        # The public race ticks 'all' on hours that each bring a slot: never an idle
        # 'latest' tick on the connection it keeps.
        "ex12",
        "tick in BEGIN IMMEDIATE returns [] without COMMIT when 'latest' finds nothing new",
        "each_tick_reads_the_table_again",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            conn.execute("BEGIN IMMEDIATE")
            prefix = f"schedule:{schedule}:"
            try:
                row = conn.execute(
                    "SELECT max(key) FROM jobs WHERE substr(key, 1, ?) = ?", (len(prefix), prefix)
                ).fetchone()
                last = None
                if row[0] is not None:
                    fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                    last = fired.replace(tzinfo=UTC).timestamp()
                slots = due_slots(period_s, last, since, now, catch_up)
                if catch_up == "latest" and not slots:
                    return []
                created = []
                for slot in slots:
                    key = slot_key(schedule, slot)
                    got = conn.execute(
                        "INSERT INTO jobs (key, kind, run_after, updated_at)"
                        " VALUES (?, ?, ?, ?) ON CONFLICT (key) DO NOTHING RETURNING key",
                        (key, schedule, slot, now),
                    ).fetchone()
                    if got is not None:
                        created.append(key)
                conn.execute("COMMIT")
                return created
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        """,
    ),
    (
        # Caught by the public race only when its two processes happen to meet.
        "ex12",
        "tick reads what fired, then commits its BEGIN IMMEDIATE only when it created a key",
        "two_schedulers_in_every_order_enqueue_each_slot_once",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, ?) = ?", (len(prefix), prefix)
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            slots = due_slots(period_s, last, since, now, catch_up)
            if not slots:
                return []
            conn.execute("BEGIN IMMEDIATE")
            created = []
            try:
                for slot in slots:
                    key = slot_key(schedule, slot)
                    got = conn.execute(
                        "INSERT INTO jobs (key, kind, run_after, updated_at)"
                        " VALUES (?, ?, ?, ?) ON CONFLICT (key) DO NOTHING RETURNING key",
                        (key, schedule, slot, now),
                    ).fetchone()
                    if got is not None:
                        created.append(key)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            if created:
                conn.execute("COMMIT")
            return created
        """,
    ),
    (
        # A quote alone passes: repr() switches to double quotes, which SQLite reads as a
        # string where no column has that name.
        "ex12",
        "the jobs inserted with SQL built by an f-string quoting with {key!r}",
        "names_with_underscores_and_capitals_are_their_own_schedules",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                inserted = conn.execute(
                    f"INSERT INTO jobs (key, kind, run_after, updated_at) VALUES ({key!r},"
                    f" {schedule!r}, {slot}, {now}) ON CONFLICT (key) DO NOTHING RETURNING key"
                ).fetchone()
                if inserted is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "ex12",
        'the jobs inserted with SQL built by an f-string quoting with "{key}"',
        "names_with_underscores_and_capitals_are_their_own_schedules",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                inserted = conn.execute(
                    f'INSERT INTO jobs (key, kind, run_after, updated_at) VALUES ("{key}",'
                    f' "{schedule}", {slot}, {now}) ON CONFLICT (key) DO NOTHING RETURNING key'
                ).fetchone()
                if inserted is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # The newest key is off today's grid after the schedule's period was made longer:
        # since = last + period_s skips the first multiple of the period after it.
        "ex12",
        "tick moves since up to the newest key plus period_s (a slot lost after a period change)",
        "last_fired_is_the_newest_key",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                since = max(since, fired.replace(tzinfo=UTC).timestamp() + period_s)
            created = []
            for slot in due_slots(period_s, None, since, now, catch_up):
                key = slot_key(schedule, slot)
                inserted = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if inserted is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "ex12",
        "slot_key puts the name into a str.format template ('{region}' in a name is a field)",
        "slot_key_names_the_slot",
        """
        def slot_key(schedule, fire_time):
            if not schedule or ":" in schedule:
                raise ValueError(f"schedule name {schedule!r} must be non-empty and without ':'")
            template = "schedule:" + schedule + ":{:%Y-%m-%dT%H:%M:%SZ}"
            return template.format(datetime.fromtimestamp(fire_time, UTC))
        """,
    ),
    (
        "ex12",
        "slot_key refuses a name whose NFKC form holds ':' (a full-width '：' in it)",
        "slot_key_names_the_slot",
        """
        import unicodedata

        def slot_key(schedule, fire_time):
            if not schedule or ":" in unicodedata.normalize("NFKC", schedule):
                raise ValueError(f"schedule name {schedule!r} must be non-empty and without ':'")
            fired = datetime.fromtimestamp(fire_time, UTC)
            return f"schedule:{schedule}:{fired:%Y-%m-%dT%H:%M:%SZ}"
        """,
    ),
    (
        # Every name the checks held with '_' was tried against a LIKE, never one with '%'.
        "ex12",
        "the keys matched with LIKE, '_' escaped and case_sensitive_like on ('%' left a wildcard)",
        "names_with_underscores_and_capitals_are_their_own_schedules",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            conn.execute("PRAGMA case_sensitive_like = ON")
            pattern = prefix.replace("_", "\\\\_") + "%"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE key LIKE :pattern ESCAPE '\\\\'",
                {"pattern": pattern},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # The GLOB name's look-alike had '*' and '?' where the name had them as text.
        "ex12",
        "the keys matched with GLOB, '*' and '?' escaped as [*] and [?] but '[' left a class",
        "names_with_underscores_and_capitals_are_their_own_schedules",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            pattern = prefix.replace("*", "[*]").replace("?", "[?]") + "*"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE key GLOB :pattern", {"pattern": pattern}
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # The table after the next tick held every slot: the check never looked at what the
        # tick that met the lock returned.
        "ex12",
        "tick catches 'database is locked' around an INSERT and returns the keys it has",
        "a_failed_insert_stops_the_tick",
        """
        import sqlite3

        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                try:
                    got = conn.execute(
                        "INSERT INTO jobs (key, kind, run_after, updated_at) VALUES (:key, :kind,"
                        " :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                        {"key": key, "kind": schedule, "slot": slot, "now": now},
                    ).fetchone()
                except sqlite3.OperationalError as error:
                    print(f"tick {schedule}: {error}; the next tick goes on")
                    return created
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # The tables the checks ticked held a few rows: the newest 100 held them all.
        "ex12",
        "what fired read among the newest 100 rows (ORDER BY id DESC LIMIT 100)",
        "tick_reads_what_fired_from_the_table",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            recent = conn.execute("SELECT key FROM jobs ORDER BY id DESC LIMIT 100").fetchall()
            mine = [r[0] for r in recent if r[0].startswith(prefix)]
            last = None
            if mine:
                fired = datetime.strptime(max(mine)[len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "ex12",
        "what fired read among the newest 50 keys of the table (ORDER BY key DESC LIMIT 50)",
        "tick_reads_what_fired_from_the_table",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            newest = conn.execute("SELECT key FROM jobs ORDER BY key DESC LIMIT 50").fetchall()
            mine = [r[0] for r in newest if r[0].startswith(prefix)]
            last = None
            if mine:
                fired = datetime.strptime(mine[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # Two keys in a set come back in order for about half the hash seeds.
        "ex12",
        "tick gathers the keys it created in a set (returned in the order of their hashes)",
        "tick_enqueues_each_slot",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = set()
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.add(key)
            return list(created)
        """,
    ),
    (
        # The check judged what the tick created, never what it left of the table.
        "ex12",
        "tick deletes the schedule's pending jobs before since (the backlog 'dropped')",
        "since_bounds_every_tick",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            conn.execute(
                "DELETE FROM jobs WHERE substr(key, 1, :n) = :prefix AND state = 'pending'"
                " AND run_after < :since",
                {"n": len(prefix), "prefix": prefix, "since": since},
            )
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # Every tick the checks ran had since on a slot.
        "ex12",
        "tick moves an off-grid since up one slot too far (the first slot after it lost)",
        "since_bounds_every_tick",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            if since % period_s:
                since = (since // period_s + 2) * period_s  # the first whole slot after since
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # The names read back from the table were plain: a LIKE that escapes '_' and '%'
        # but not its ESCAPE character found their keys.
        "ex12",
        "the keys matched with LIKE, '_' and '%' escaped but not the backslash itself",
        "tick_reads_what_fired_from_the_table",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            conn.execute("PRAGMA case_sensitive_like = ON")
            pattern = prefix.replace("_", "\\\\_").replace("%", "\\\\%") + "%"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE key LIKE :pattern ESCAPE '\\\\'",
                {"pattern": pattern},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # The check was worth a point and not severe: the dropped backlog ran all the same.
        "ex12",
        "tick bounds its first catch-up by since only (since = 0 once something fired)",
        "since_bounds_every_tick",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
                since = 0  # what fired bounds the catch-up from now on
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # Every tick the checks ran had a period of a minute or more, and its keys' seconds
        # were 00: a time cut to the minute read back the same.
        "ex12",
        "the newest key's fire time parsed to the minute ([:16], '%Y-%m-%dT%H:%M')",
        "tick_reads_what_fired_from_the_table",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                stamp = row[0][len(prefix):][:16]
                last = datetime.strptime(stamp, "%Y-%m-%dT%H:%M").replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # due_slots refuses 'Latest'; no check handed tick a catch_up of its own.
        "ex12",
        "tick maps a catch_up other than all/latest to 'all' (a config typo runs every slot)",
        "a_failed_tick_leaves_the_connection_usable",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            if catch_up not in ("all", "latest"):
                catch_up = "all"  # be lenient with the config
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # A cap of a whole number of hours in seconds was taken for a period, never run past.
        "ex12",
        "tick keeps the newest 30 * 24 * 60 due slots of a catch-up (a month of minutes)",
        "a_long_outage_enqueues_every_missed_slot",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up)[-30 * 24 * 60:]:
                key = slot_key(schedule, slot)
                inserted = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if inserted is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "ex12",
        "tick keeps only the newest 86_400 due slots of a catch-up (a day of seconds)",
        "a_long_outage_enqueues_every_missed_slot",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up)[-86_400:]:
                key = slot_key(schedule, slot)
                inserted = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if inserted is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "ex12",
        "tick keeps the newest MAX_CATCH_UP = 7 * 24 * 3600 slots (a week of seconds)",
        "a_long_outage_enqueues_every_missed_slot",
        """
        MAX_CATCH_UP = 7 * 24 * 3600

        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up)[-MAX_CATCH_UP:]:
                key = slot_key(schedule, slot)
                inserted = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if inserted is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # A cap written nowhere as one number: only the written ones were run past.
        "ex12",
        "tick keeps the newest LOOKBACK_DAYS * MIN_PER_DAY slots (a product at run time)",
        "a_long_outage_enqueues_every_missed_slot",
        """
        LOOKBACK_DAYS = 90
        MIN_PER_DAY = 1440

        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            cap = LOOKBACK_DAYS * MIN_PER_DAY
            for slot in due_slots(period_s, last, since, now, catch_up)[-cap:]:
                key = slot_key(schedule, slot)
                inserted = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if inserted is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "ex12",
        "tick's cap read from a setting (int(os.environ.get(..., '250000')))",
        "a_long_outage_enqueues_every_missed_slot",
        """
        import os

        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            cap = int(os.environ.get('SCHED_MAX_CATCH_UP', '250000'))
            for slot in due_slots(period_s, last, since, now, catch_up)[-cap:]:
                key = slot_key(schedule, slot)
                inserted = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if inserted is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # 86400 in due_slots was taken for a day's period, never run past.
        "ex12",
        "due_slots keeps the newest 86400 slots of a catch-up (a day of seconds)",
        "due_slots_has_no_cap_on_a_long_outage",
        """
        def due_slots(period_s, last, since, now, catch_up):
            if period_s <= 0:
                raise ValueError(f"period_s must be positive, not {period_s!r}")
            if catch_up not in ("all", "latest"):
                raise ValueError(f"catch_up must be 'all' or 'latest', not {catch_up!r}")
            slot = (now // period_s) * period_s
            slots = []
            while slot >= since and (last is None or slot > last):
                slots.append(slot)
                if catch_up == "latest":
                    break
                slot -= period_s
            return slots[:86400][::-1]
        """,
    ),
    (
        "ex12",
        "due_slots keeps the newest DAYS * PER_DAY slots (a product at run time)",
        "due_slots_has_no_cap_on_a_long_outage",
        """
        DAYS = 300
        PER_DAY = 1440

        def due_slots(period_s, last, since, now, catch_up):
            if period_s <= 0:
                raise ValueError(f"period_s must be positive, not {period_s!r}")
            if catch_up not in ("all", "latest"):
                raise ValueError(f"catch_up must be 'all' or 'latest', not {catch_up!r}")
            slot = (now // period_s) * period_s
            slots = []
            while slot >= since and (last is None or slot > last):
                slots.append(slot)
                if catch_up == "latest":
                    break
                slot -= period_s
            return slots[:DAYS * PER_DAY][::-1]
        """,
    ),
    (
        # The kill scene compared kind and state only: a job inserted due in the far future
        # and moved to its slot by an UPDATE after it came out the same when not killed.
        "ex12",
        "each job inserted due at 1e18, its run_after set to the slot by an UPDATE after it",
        "the_jobs_a_tick_creates_are_ready_to_claim",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, 1e18, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
                    conn.execute("UPDATE jobs SET run_after = ? WHERE key = ?", (slot, key))
            return created
        """,
    ),
    (
        # The scene's lock failed one INSERT only: a second try always went through.
        "ex12",
        "tick tries a locked INSERT once more, then skips its slot",
        "a_failed_insert_stops_the_tick",
        """
        import sqlite3

        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = None
                for _attempt in range(2):
                    try:
                        got = conn.execute(
                            "INSERT INTO jobs (key, kind, run_after, updated_at) VALUES"
                            " (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING"
                            " RETURNING key",
                            {"key": key, "kind": schedule, "slot": slot, "now": now},
                        ).fetchone()
                        break
                    except sqlite3.OperationalError:
                        continue
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "ex12",
        "tick takes what fired as max(its memory of the name, the table's newest key)",
        "each_tick_reads_the_table_again",
        """
        _FIRED = {}

        from datetime import UTC, datetime
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            mem = _FIRED.get(schedule)
            if mem is not None and (last is None or mem > last):
                last = mem
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                inserted = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                _FIRED[schedule] = slot
                if inserted is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "ex12",
        "slot_key refuses a name longer than 255 characters (a VARCHAR(255)'s width)",
        "slot_key_names_the_slot",
        """
        from datetime import UTC, datetime
        def slot_key(schedule, fire_time):
            if not schedule or ":" in schedule or len(schedule) > 255:
                raise ValueError(f"schedule name {schedule!r} must be non-empty and without ':'")
            fired = datetime.fromtimestamp(fire_time, UTC)
            return f"schedule:{schedule}:{fired:%Y-%m-%dT%H:%M:%SZ}"
        """,
    ),
    (
        "ex12",
        "what fired read among the jobs whose updated_at <= now (another scheduler's clock ahead)",
        "a_scheduler_whose_clock_runs_behind_creates_nothing",
        """
        from datetime import UTC, datetime
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs"
                " WHERE substr(key, 1, :n) = :prefix AND updated_at <= :now",
                {"n": len(prefix), "prefix": prefix, "now": now},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                inserted = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if inserted is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "ex12",
        "the newest key read among the first 1000 of the schedule's keys (fetchmany(1000))",
        "last_fired_is_the_newest_key",
        """
        from datetime import UTC, datetime
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT key FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchmany(1000)
            row = (max((r[0] for r in row), default=None),)
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                inserted = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if inserted is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # Per-connection state: a TEMP table is gone on a new connection, so the reconnect
        # and the other table of each_tick_reads_the_table_again saw nothing wrong.
        "ex12",
        "tick keeps what it fired in a TEMP table of its connection, taken as max(it, the table)",
        "each_tick_reads_the_table_again",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            conn.execute(
                "CREATE TEMP TABLE IF NOT EXISTS fired (name TEXT PRIMARY KEY, last REAL)"
            )
            mine = conn.execute("SELECT last FROM fired WHERE name = ?", (schedule,)).fetchone()
            if mine is not None and (last is None or mine[0] > last):
                last = mine[0]
            created = []
            newest = None
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                inserted = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                newest = slot
                if inserted is not None:
                    created.append(key)
            if newest is not None:
                conn.execute("INSERT OR REPLACE INTO fired VALUES (?, ?)", (schedule, newest))
            return created
        """,
    ),
    (
        "ex12",
        "catch_up='latest' takes ceil(now / period_s) * period_s - period_s (misses a slot at now)",
        "due_slots_boundaries",
        """
        import math


        def due_slots(period_s, last, since, now, catch_up):
            if period_s <= 0:
                raise ValueError(f"period_s must be positive, not {period_s!r}")
            if catch_up not in ("all", "latest"):
                raise ValueError(f"catch_up must be 'all' or 'latest', not {catch_up!r}")
            if catch_up == "latest":
                slot = math.ceil(now / period_s) * period_s - period_s
                return [slot] if slot >= since and (last is None or slot > last) else []
            slot = (now // period_s) * period_s
            slots = []
            while slot >= since and (last is None or slot > last):
                slots.append(slot)
                slot -= period_s
            return slots[::-1]
        """,
    ),
    (
        # Right for every catch-up the first checks built (12_000 slots, 48_000 variables):
        # past 62_500 slots the statement holds more than SQLite's 250_000 variables, and
        # the tick, and every tick after it, fails with nothing enqueued.
        "ex12",
        "tick inserts every due slot in one multi-row INSERT ... RETURNING key",
        "a_long_outage_enqueues_every_missed_slot",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            slots = due_slots(period_s, last, since, now, catch_up)
            if not slots:
                return []
            params = []
            for slot in slots:
                params += [slot_key(schedule, slot), schedule, slot, now]
            rows = conn.execute(
                "INSERT INTO jobs (key, kind, run_after, updated_at) VALUES "
                + ", ".join(["(?, ?, ?, ?)"] * len(slots))
                + " ON CONFLICT (key) DO NOTHING RETURNING key",
                params,
            ).fetchall()
            return sorted(r[0] for r in rows)
        """,
    ),
    (
        # Every catch-up the first checks killed fits in one batch: committed whole.
        # Past it, a kill after the newest batch leaves the older ones, which the restart,
        # resuming after the newest key, never enqueues.
        "ex12",
        "tick commits its catch-up in batches of 1000 slots, the newest batch first",
        "a_long_outage_enqueues_every_missed_slot",
        """
        BATCH = 1000


        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            slots = due_slots(period_s, last, since, now, catch_up)
            created = []
            # the most recent slots matter most after an outage: enqueue them first
            batches = [slots[i:i + BATCH] for i in range(0, len(slots), BATCH)]
            for batch in reversed(batches):
                params = [v for s in batch for v in (slot_key(schedule, s), schedule, s, now)]
                rows = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at) VALUES "
                    + ", ".join(["(?, ?, ?, ?)"] * len(batch))
                    + " ON CONFLICT (key) DO NOTHING RETURNING key",
                    params,
                ).fetchall()
                created += [r[0] for r in rows]
            return sorted(created)
        """,
    ),
    (
        # Every check of slot_key ran in a process of its own: one schedule per process.
        # A scheduler's loop over its schedules gives the second the first's keys, taken
        # for fired: its jobs never run.
        "ex12",
        "slot_key memoised in a module dict keyed by the fire time alone",
        "schedules_with_the_same_period_each_get_their_slots",
        """
        _KEYS = {}


        def slot_key(schedule, fire_time):
            if not schedule or ":" in schedule:
                raise ValueError(f"schedule name {schedule!r} must be non-empty and without ':'")
            if fire_time not in _KEYS:  # strftime is slow: once per fire time
                when = datetime.fromtimestamp(fire_time, UTC)
                _KEYS[fire_time] = f"schedule:{schedule}:{when:%Y-%m-%dT%H:%M:%SZ}"
            return _KEYS[fire_time]
        """,
    ),
    (
        # The lock the first checks held met a catch-up's second INSERT: one batch never
        # sends two. A batch skipped loses its slots once a later one goes in.
        "ex12",
        "tick sends its slots in batches of 500 and logs and skips a batch that fails",
        "a_failed_insert_stops_the_tick",
        """
        import logging
        import sqlite3


        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            slots = due_slots(period_s, last, since, now, catch_up)
            created = []
            for start in range(0, len(slots), 500):
                batch = slots[start:start + 500]
                params = [v for s in batch for v in (slot_key(schedule, s), schedule, s, now)]
                try:
                    rows = conn.execute(
                        "INSERT INTO jobs (key, kind, run_after, updated_at) VALUES "
                        + ", ".join(["(?, ?, ?, ?)"] * len(batch))
                        + " ON CONFLICT (key) DO NOTHING RETURNING key",
                        params,
                    ).fetchall()
                except sqlite3.OperationalError:
                    logging.exception("batch of %s slots failed, skipped", len(batch))
                    continue
                created += [r[0] for r in rows]
            return sorted(created)
        """,
    ),
    (
        # Every failed tick the checks made raised an Exception: a Ctrl-C is none.
        "ex12",
        "tick rolls back on except Exception only (a Ctrl-C leaves its BEGIN IMMEDIATE open)",
        "a_failed_tick_leaves_the_connection_usable",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            conn.execute("BEGIN IMMEDIATE")
            try:
                prefix = f"schedule:{schedule}:"
                row = conn.execute(
                    "SELECT max(key) FROM jobs WHERE substr(key, 1, ?) = ?", (len(prefix), prefix)
                ).fetchone()
                last = None
                if row[0] is not None:
                    fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                    last = fired.replace(tzinfo=UTC).timestamp()
                created = []
                for slot in due_slots(period_s, last, since, now, catch_up):
                    key = slot_key(schedule, slot)
                    got = conn.execute(
                        "INSERT INTO jobs (key, kind, run_after, updated_at)"
                        " VALUES (?, ?, ?, ?) ON CONFLICT (key) DO NOTHING RETURNING key",
                        (key, schedule, slot, now),
                    ).fetchone()
                    if got is not None:
                        created.append(key)
                conn.execute("COMMIT")
            except Exception:
                conn.execute("ROLLBACK")
                raise
            return created
        """,
    ),
    (
        # The checks' connections were wrapped: a factory set on the wrapper never
        # reached the connection the scheduler's own code goes on reading with.
        "ex12",
        "tick sets conn.row_factory = None on the scheduler's connection and leaves it so",
        "a_failed_tick_leaves_the_connection_usable",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            conn.row_factory = None  # plain tuples: row[0]
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # Its LIKE escapes '_', '%' and '\' and is case sensitive: right keys, but every
        # LIKE the scheduler runs on that connection afterwards tells case apart too.
        "ex12",
        "tick turns PRAGMA case_sensitive_like on for its LIKE and leaves it on",
        "a_failed_tick_leaves_the_connection_usable",
        r"""
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            conn.execute("PRAGMA case_sensitive_like = ON")
            escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE key LIKE ? ESCAPE '\\'", (escaped + "%",)
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (?, ?, ?, ?) ON CONFLICT (key) DO NOTHING RETURNING key",
                    (key, schedule, slot, now),
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # The 'latest' checks counted the keys in the table, never the states of the
        # jobs already there: a job enqueued before the outage, still pending, was lost.
        "ex12",
        "catch_up='latest' marks the schedule's pending jobs dead, superseded by the newest",
        "tick_catches_up_with_the_latest_slot",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            if catch_up == "latest":
                # missed runs collapse into one: the backlog still waiting is superseded
                conn.execute(
                    "UPDATE jobs SET state = 'dead', dead_reason = 'superseded', updated_at = :now"
                    " WHERE substr(key, 1, :n) = :prefix AND state = 'pending'",
                    {"n": len(prefix), "prefix": prefix, "now": now},
                )
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # The dead fate of the newest key was judged by the slots the tick created only.
        "ex12",
        "tick puts the newest fired slot's dead job back to pending (its slot runs twice)",
        "last_fired_is_the_newest_key",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
                # the last run died: give it another go with this tick
                conn.execute(
                    "UPDATE jobs SET state = 'pending', attempt = 0"
                    " WHERE key = ? AND state = 'dead'",
                    (row[0],),
                )
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # 'latest' was ticked over hours of an hourly schedule only: the list of every
        # due slot cost nothing there.
        "ex12",
        "tick lists every due slot ('all') and keeps the newest for 'latest'",
        "tick_catches_up_with_the_latest_slot",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            if catch_up not in ("all", "latest"):
                raise ValueError(f"catch_up must be 'all' or 'latest', not {catch_up!r}")
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            slots = due_slots(period_s, last, since, now, "all")
            if catch_up == "latest":
                slots = slots[-1:]  # missed runs collapse into one
            created = []
            for slot in slots:
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # run_after was read after 'all' ticks only: the one run of a 'latest' catch-up
        # went unread.
        "ex12",
        "the job a 'latest' catch-up enqueues dated by the tick (run_after = now)",
        "tick_enqueues_each_slot",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                # the missed runs collapse into one that runs now
                due = now if catch_up == "latest" else slot
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :due, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "due": due, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # Harmless between two processes; two schedules ticked by threads of one process
        # share the lock, and the second's slots wait for its next tick (or, with
        # 'latest', collapse into a later one).
        "ex12",
        "tick returns [] when a module lock is held (a tick of another schedule skips this one)",
        "two_schedules_of_one_process_tick_side_by_side",
        """
        import threading

        _ticking = threading.Lock()
        _tick = tick


        def tick(conn, schedule, period_s, since, now, catch_up):
            if not _ticking.acquire(blocking=False):
                return []  # another tick is under way: it enqueues what is due
            try:
                return _tick(conn, schedule, period_s, since, now, catch_up)
            finally:
                _ticking.release()
        """,
    ),
    (
        # The neighbour of run_after = now for 'latest': its updated_at dated by the slot.
        "ex12",
        "the job a 'latest' catch-up enqueues written with updated_at = its slot",
        "tick_enqueues_each_slot",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                at = slot if catch_up == "latest" else now
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :at) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "at": at},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # The skip the side-by-side scene caught, put off by a timeout: a tick of another
        # schedule that holds the module lock longer (a long catch-up) skips this one.
        "ex12",
        "tick waits 1 s for a module lock, then returns [] (another schedule's tick holds it)",
        "two_schedules_of_one_process_tick_side_by_side",
        """
        import threading

        _ticking = threading.Lock()
        _tick = tick


        def tick(conn, schedule, period_s, since, now, catch_up):
            if not _ticking.acquire(timeout=1):
                return []  # another tick is under way: the next tick catches up
            try:
                return _tick(conn, schedule, period_s, since, now, catch_up)
            finally:
                _ticking.release()
        """,
    ),
    (
        # Loud instead of quiet, the same skip: the tick of the other schedule fails.
        "ex12",
        "tick raises TimeoutError after waiting 2 s for a module lock another schedule holds",
        "two_schedules_of_one_process_tick_side_by_side",
        """
        import threading

        _ticking = threading.RLock()
        _tick = tick


        def tick(conn, schedule, period_s, since, now, catch_up):
            if not _ticking.acquire(timeout=2):
                raise TimeoutError(f"another tick is running; {schedule} skipped")
            try:
                return _tick(conn, schedule, period_s, since, now, catch_up)
            finally:
                _ticking.release()
        """,
    ),
    (
        # "Nothing due, nothing to check": a config's typo passes until a slot is due.
        "ex12",
        "due_slots returns [] before it checks catch_up when the last slot is at or past now",
        "due_slots_refuses_bad_arguments",
        """
        def due_slots(period_s, last, since, now, catch_up):
            if period_s <= 0:
                raise ValueError(f"period_s must be positive, not {period_s!r}")
            if last is not None and last >= now:
                return []  # nothing can be due yet
            if catch_up not in ("all", "latest"):
                raise ValueError(f"catch_up must be 'all' or 'latest', not {catch_up!r}")
            slot = (now // period_s) * period_s
            slots = []
            while slot >= since and (last is None or slot > last):
                slots.append(slot)
                if catch_up == "latest":
                    break
                slot -= period_s
            return slots[::-1]
        """,
    ),
    (
        # tick builds its keys inline: 'eu:nightly' gets jobs, and schedule 'eu' reads
        # 'schedule:eu:nightly:...' as its newest key and never ticks again.
        "ex12",
        "tick builds each key inline in UTC, never through slot_key (a name with ':' gets jobs)",
        "a_name_with_a_colon_gets_no_job",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = prefix + f"{datetime.fromtimestamp(slot, UTC):%Y-%m-%dT%H:%M:%SZ}"
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # Only 'latest' skips slot_key: the same key for 'eu:nightly', under 'eu'.
        "ex12",
        "tick's fast path for catch_up='latest' builds its one key inline, never via slot_key",
        "a_name_with_a_colon_gets_no_job",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            insert = (
                "INSERT INTO jobs (key, kind, run_after, updated_at)"
                " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key"
            )
            if catch_up == "latest":
                slot = (now // period_s) * period_s
                if slot < since or (last is not None and slot <= last):
                    return []
                key = prefix + f"{datetime.fromtimestamp(slot, UTC):%Y-%m-%dT%H:%M:%SZ}"
                got = conn.execute(
                    insert, {"key": key, "kind": schedule, "slot": slot, "now": now}
                ).fetchone()
                return [] if got is None else [key]
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    insert, {"key": key, "kind": schedule, "slot": slot, "now": now}
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # lstrip takes a set of characters: 'backup2' strips the year's '2', and
        # '026-01-01T...' never parses: the schedule fails every tick after its first.
        "ex12",
        "the newest key's time cut off with key.lstrip(prefix) (a name with a '2' in it)",
        "a_name_with_digits_ticks_again",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0].lstrip(prefix), "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
]


#: What the named check must say it expected, for each mistake (see test_zoo.py).
SAYS: dict[str, str] = {
    "tick returns [] when a module lock is held (a tick of another schedule skips this one)": (
        "ticks in another thread of the same process"
    ),
    "the job a 'latest' catch-up enqueues written with updated_at = its slot": (
        "for the 'latest' job too"
    ),
    "tick keeps what it fired in a TEMP table of its connection, taken as max(it, the table)": (
        "restored from a backup"
    ),
    "catch_up='latest' takes ceil(now / period_s) * period_s - period_s (misses a slot at now)": (
        "'latest' with now on a slot"
    ),
    "tick takes what fired as max(its memory of the name, the table's newest key)": (
        "on another table where nothing fired"
    ),
    "slot_key refuses a name longer than 255 characters (a VARCHAR(255)'s width)": (
        "slot_key('warehouse_inventory"
    ),
    "what fired read among the jobs whose updated_at <= now (another scheduler's clock ahead)": (
        "400 ms before 02:00:00"
    ),
    "the newest key read among the first 1000 of the schedule's keys (fetchmany(1000))": (
        "slots of a minute schedule and then"
    ),
    "each job inserted due at 1e18, its run_after set to the slot by an UPDATE after it": (
        "run_after its slot"
    ),
    "tick tries a locked INSERT once more, then skips its slot": "four times in a row",
    "tick moves since up to the newest key plus period_s (a slot lost after a period change)": (
        "before its period became"
    ),
    "slot_key puts the name into a str.format template ('{region}' in a name is a field)": (
        "slot_key('{region}_daily', 1767232800) to return a key"
    ),
    "slot_key refuses a name whose NFKC form holds ':' (a full-width '：' in it)": (
        "slot_key('eu：west', 1767232800) to return a key"
    ),
    "the schedule name normalized to NFKC in slot_key (one form for look-alike names)": (
        "the new schedule 'ﬁscal_close' (beside"
    ),
    "the schedule name cut to 64 characters in slot_key (a column's width)": ("to get its own"),
    "slot_key refuses a name longer than 64 characters": "to return the keys it created",
    "what fired read among the schedule's own kind only (AND kind = :kind)": (
        "an operator moved its job to the queue 'slow'"
    ),
    "what fired read in the default queue only (AND queue = 'default')": (
        "an operator moved its job to the queue 'slow'"
    ),
    "tick stops at the first conflict, assuming the other scheduler enqueues the rest": (
        "enqueued and reported by the first"
    ),
    "tick in BEGIN IMMEDIATE returns [] when the BEGIN meets 'database is locked'": (
        "whose BEGIN IMMEDIATE fails 'database is locked'"
    ),
    "the slot key made from the local wall clock read back (time.localtime, then astimezone)": (
        "the UTC key of each quarter hour"
    ),
    "daily slots aligned to the scheduler's local midnight": "daily and weekly slots",
    "tick batches its inserts under isolation_level 'DEFERRED', the mode left set": (
        "to hand the connection back as it was given"
    ),
    "under catch_up='latest', tick never reads what fired and leans on ON CONFLICT": (
        "with catch_up='latest'"
    ),
    "tick keeps only the newest 200000 due slots of a catch-up (missed[-200_000:])": (
        "all 200001 slots"
    ),
    "tick keeps the newest min(n, 500_000) due slots of a catch-up": "all 500001 slots",
    "tick keeps only the newest 10**6 due slots of a catch-up": "all 1000001 slots",
    "tick takes the newest 2**20 slots through islice(reversed(...))": "all 1048577 slots",
    "tick keeps the newest MAX_CATCH_UP = 250_000 slots (a module constant)": "all 250001 slots",
    "tick raises when the newest key is after now (a clock behind taken for an error)": (
        "400 ms before 02:00:00"
    ),
    "due_slots raises ValueError when since is after now (a schedule that starts later)": (
        "due_slots(3600, None, 1767243600, 1767232810, 'all') to return a list"
    ),
    "due_slots raises ValueError when last is after now (another scheduler's clock ahead)": (
        "due_slots(3600, 1767236400, 1767225600, 1767232810, 'all') to return a list"
    ),
    "due_slots looks back ten years at most (since moved up to now minus ten years)": (
        "all 20636 slots"
    ),
    "due_slots keeps the newest 100000 slots of a catch-up (slots[-100_000:])": (
        "all 100001 slots"
    ),
    "due_slots stops its walk back at MAX_SLOTS = 500_000, a module constant": "all 500001 slots",
    "due_slots looks back 7300 days at most (a twenty-year window)": "all 20636 slots",
    "tick looks back ten years at most (since moved up to now minus ten years)": (
        "all 2947 slots of 604800 s"
    ),
    "tick keeps only the newest 20000 due slots of a catch-up (due_slots(...)[-20000:])": (
        "all 20001 slots"
    ),
    "tick inserts at most max_slots=50_000 slots a tick (a parameter's default)": (
        "all 50001 slots"
    ),
    "tick takes the newest MAX_CATCH_UP = 30_000 slots through islice(reversed(...))": (
        "all 30001 slots"
    ),
    "a key reported as created when its row's updated_at is this tick's now": (
        "two schedulers ticking at the same now"
    ),
    "due_slots keeps the newest 5000 slots of a catch-up": "all 12000 slots",
    "due_slots looks back two years at most": "all 2000 slots",
    "tick keeps only the newest 5000 due slots of a catch-up (due_slots(...)[-5000:])": (
        "all 12000 slots"
    ),
    "tick looks back two years at most (since moved up to now minus two years)": "all 2000 slots",
    "due_slots keeps the newest 20000 slots of a catch-up": "all 60000 slots",
    "slot_key in the local zone read once at import (datetime.now().astimezone().tzinfo)": (
        "the same UTC keys with TZ="
    ),
    "the newest key's fire time read in the local zone taken at import (tzinfo=LOCAL)": (
        "fired, only the"
    ),
    "a missed slot's job dated by the tick (run_after = now, not its slot)": (
        "for the missed slot 00:00 too"
    ),
    "tick ignores catch_up='latest' while nothing has fired (a new schedule runs every slot)": (
        "from the first tick with catch_up='latest'"
    ),
    "tick inserts its jobs with max_attempts = 1 (a periodic job gets no retry)": (
        "attempt 0 of max_attempts 3"
    ),
    "tick puts its jobs on a queue of their own ('scheduled'), which no worker serves": (
        "on the queue 'default'"
    ),
    "tick stores kind = schedule.strip()": "of kind 'Clôture_Mois EU '",
    "due_slots compares slots with int(since) (a slot just before a fractional since is due)": (
        "since half a second after a slot"
    ),
    "slot_key shifts local time by the offset in force now (time.altzone when tm_isdst)": (
        "schedule:ledger:2026-07-01T02:00:00Z"
    ),
    "the newest key's fire time parsed with time.mktime(...) minus the offset in force now": (
        "fired, only the"
    ),
    "what fired read as the key of the row with the latest run_after": "was re-run by hand",
    "due_slots takes catch_up with spaces around it ('latest ')": "'latest '",
    "slot_key turns local time into UTC with time.timezone (an hour off in summer time)": (
        "the same UTC keys with TZ=AEST-10AEDT"
    ),
    "the newest key's fire time parsed with time.mktime(...) - time.timezone": "fired, only the",
    "what fired read as max(key) of the jobs whose kind is the schedule": (
        "to return the keys it created"
    ),
    "tick skips a slot whose INSERT met 'database is locked' and goes on": (
        "met 'database is locked'"
    ),
    "the newest key's fire time parsed back with a naive .timestamp()": "fired, only the",
    "the schedule's keys matched with LIKE 'schedule:<name>:%'": "to get its own",
    "the schedule's keys found with instr(key, prefix), anywhere in the key": "to get its own",
    "the keys read into Python and kept when the prefix is in them": "to get its own",
    "slot_key normalises the name to lower case": "to get its own",
    "what fired read as max(run_after) instead of the newest key": "its job retries at",
    "tick keeps only the newest 100 due slots of a catch-up": "each once",
    "a key reported as created when cursor.lastrowid is set (INSERT OR IGNORE)": (
        "reports adding up to them"
    ),
    "what fired read as the key of the job updated last (ORDER BY updated_at DESC)": (
        "its job retries at"
    ),
    "what fired read among the jobs that did not fail (state != 'dead')": "its job is dead",
    "the newest key read with key >= 'schedule:<name>:' and no end, another's ignored": (
        "'report' to catch up with"
    ),
    "the schedule's keys matched with GLOB 'schedule:<name>:*'": "to get its own",
    "tick catches up 'all' whatever catch_up it is given": "after seven hours away",
    "what fired read as the key of the row inserted last (ORDER BY id DESC)": "re-run by hand",
    "INSERT OR REPLACE, created when a SELECT before it found no key": "add up to the table",
    "ON CONFLICT (key) DO UPDATE SET updated_at ... RETURNING: a conflict reported as created": (
        "add up to the table"
    ),
    "a SELECT for the key, then INSERT OR IGNORE reported as created": "reports adding up to them",
    "catch_up='latest' drops only the oldest missed slot": "after seven hours away",
    "the newest key read with SQL built by an f-string (a quote in the name breaks it)": (
        "Fecho_d'Ávila"
    ),
    "slot_key strips the spaces around the schedule's name": "to get its own",
    "due_slots counts forward from last + period_s (off the grid when last is)": "due_slots(",
    "due_slots takes catch_up in any case ('Latest')": "'Latest'",
    "the slot at exactly since is not due (slot > since)": "(now on a slot)",
    "run_after = max(slot, now): a missed slot's job dated by the tick, not the slot": "(the slot)",
    "tick returns the keys it created newest first": "the first tick to create",
    "tick inserts each slot's job as state 'running' (as if already started)": "leased to nobody",
    "due_slots tests `not last`: last = 0 (the epoch's slot) taken for None": (
        "due_slots(1, 0, 0, 0, 'all') == []"
    ),
    "catch_up='latest' as [slots[-1]]: IndexError when nothing is due": "to return a list",
    "due_slots walks range(since, now + 1, period_s) (off the grid when since is)": (
        "(since after a slot)"
    ),
    "the schedule's keys matched without the ':' after the name ('night' reads 'nightly')": (
        "'report' to catch up with"
    ),
    "slot_key also refuses '/' in a name (and a blank one)": (
        "slot_key('eu/west', 1767232800) to return a key"
    ),
    "tick inserts with executemany and reports what it created by total_changes": (
        "reports adding up to them"
    ),
    "tick stores kind = 'schedule:<name>:' (the key's prefix)": "kind='nightly'",
    "tick writes updated_at = the slot, not now": "the now tick was given",
    "tick builds each key itself, in local time, instead of calling slot_key": "fired, only the",
    "catch_up='latest' takes the newest slot at or before now, whatever since says": (
        "'latest' with no slot in [since, now]"
    ),
    "tick wrapped in a deferred BEGIN: the read, then the INSERTs (locked when two tick)": (
        "no scheduler to fail"
    ),
    "slot_key accepts an empty schedule name": "ValueError for the schedule name ''",
    "what fired read only from the jobs still pending, running or in retry_wait": (
        "only the slots after 02:00"
    ),
    "the newest key looked up with substr(key, 1, <the prefix's length in bytes>)": (
        "schedule:clôture:2026-01-01T03:00:00Z"
    ),
    "tick writes updated_at = int(now)": "updated_at=1767229205.25",
    "tick stores kind = schedule.lower() (the worker looks for task 'clôture_mois eu')": (
        "of kind 'Clôture_Mois EU '"
    ),
    "tick's BEGIN IMMEDIATE left open when due_slots refuses period_s (called before try)": (
        "period_s=0, ...) to raise"
    ),
    "slot_key refuses a name of spaces only (not schedule.strip())": (
        "slot_key(' ', 1767232800) to return a key"
    ),
    "due_slots builds list(range(...)) of every slot since 'since', then filters it": ("at once"),
    "due_slots walks forward from since to now, keeping the slots after last": "at once",
    "tick keeps the last slot it fired in a module dict (reads the table only once)": (
        "another scheduler then fires 04:00 alone"
    ),
    "tick keeps the first connection it was given in a global (fails after a reconnect)": (
        "on a new connection"
    ),
    "tick caches what fired per connection (functools.cache on (conn, schedule))": (
        "on the same connection, ticks at 05:00:05"
    ),
    "slot_key puts the name into the strftime format ('%d' in a name becomes the day)": (
        "100%daily"
    ),
    "the slot used as the job's id (INSERT ... (id, key, ...) VALUES (int(slot), ...))": (
        "each gets its own slots"
    ),
    "the slot used as the job's id, with a bare ON CONFLICT DO NOTHING": "each gets its own slots",
    "run_after written as the slot's ISO time (TEXT)": "claimable then",
    "run_after written in milliseconds (slot * 1000)": "claimable then",
    "what fired read only among jobs whose run_after has come (AND run_after <= :now)": (
        "after this tick's now"
    ),
    "each job inserted with its key, its kind set by an UPDATE after it": (
        "each slot's job as the same tick makes it unkilled"
    ),
    "tick in BEGIN IMMEDIATE returns [] without COMMIT when 'latest' finds nothing new": (
        "each ending the transaction it began"
    ),
    "tick reads what fired, then commits its BEGIN IMMEDIATE only when it created a key": (
        "adding up to them"
    ),
    "the jobs inserted with SQL built by an f-string quoting with {key!r}": ('Relatório "Q1"'),
    'the jobs inserted with SQL built by an f-string quoting with "{key}"': ('Relatório "Q1"'),
    "the keys matched with LIKE, '_' escaped and case_sensitive_like on ('%' left a wildcard)": (
        "the new schedule 'Sale_50%_EU'"
    ),
    "the keys matched with GLOB, '*' and '?' escaped as [*] and [?] but '[' left a class": (
        # Its look-alike is shorter ('[EU]' stands for one letter): its key parses wrong.
        "tick('Backup[EU]*_Daily?', now="
    ),
    "tick catches 'database is locked' around an INSERT and returns the keys it has": (
        "to raise that error, or to try it again"
    ),
    "what fired read among the newest 100 rows (ORDER BY id DESC LIMIT 100)": (
        "jobs of other keys, inserted after"
    ),
    "what fired read among the newest 50 keys of the table (ORDER BY key DESC LIMIT 50)": (
        "jobs of other keys, inserted after"
    ),
    "tick gathers the keys it created in a set (returned in the order of their hashes)": (
        "tick to create"
    ),
    "tick deletes the schedule's pending jobs before since (the backlog 'dropped')": (
        "01:00's pending job still in the table"
    ),
    "tick moves an off-grid since up one slot too far (the first slot after it lost)": (
        "since is 2026-01-01T04:30:00Z"
    ),
    "the keys matched with LIKE, '_' and '%' escaped but not the backslash itself": (
        "3 jobs of 'Fecho_50%\\\\Mês' in all"
    ),
    "tick bounds its first catch-up by since only (since = 0 once something fired)": (
        "01:00 fired, since is 2026-01-01T05:00:00Z"
    ),
    "the newest key's fire time parsed to the minute ([:16], '%Y-%m-%dT%H:%M')": ("every 15 s"),
    "tick maps a catch_up other than all/latest to 'all' (a config typo runs every slot)": (
        "catch_up='Latest', ...) and"
    ),
    "tick keeps the newest 30 * 24 * 60 due slots of a catch-up (a month of minutes)": (
        "all 43201 slots"
    ),
    "tick keeps only the newest 86_400 due slots of a catch-up (a day of seconds)": (
        "all 86401 slots"
    ),
    "tick keeps the newest MAX_CATCH_UP = 7 * 24 * 3600 slots (a week of seconds)": (
        "all 604801 slots"
    ),
    "tick keeps the newest LOOKBACK_DAYS * MIN_PER_DAY slots (a product at run time)": (
        "all 600001 slots"
    ),
    "tick's cap read from a setting (int(os.environ.get(..., '250000')))": "all 600001 slots",
    "due_slots keeps the newest 86400 slots of a catch-up (a day of seconds)": ("all 86401 slots"),
    "due_slots keeps the newest DAYS * PER_DAY slots (a product at run time)": ("all 600001 slots"),
    "tick inserts every due slot in one multi-row INSERT ... RETURNING key": "all 600001 slots",
    "tick commits its catch-up in batches of 1000 slots, the newest batch first": (
        "all 600001 slots"
    ),
    "slot_key memoised in a module dict keyed by the fire time alone": (
        "ticked in turn into one table"
    ),
    "tick sends its slots in batches of 500 and logs and skips a batch that fails": (
        "first INSERT met 'database is locked'"
    ),
    "tick rolls back on except Exception only (a Ctrl-C leaves its BEGIN IMMEDIATE open)": (
        "a tick interrupted (KeyboardInterrupt)"
    ),
    "tick sets conn.row_factory = None on the scheduler's connection and leaves it so": (
        "to leave its settings as it found them"
    ),
    "tick turns PRAGMA case_sensitive_like on for its LIKE and leaves it on": (
        "to leave its settings as it found them"
    ),
    "catch_up='latest' marks the schedule's pending jobs dead, superseded by the newest": (
        "00:00's job, enqueued and still pending"
    ),
    "tick puts the newest fired slot's dead job back to pending (its slot runs twice)": (
        "the jobs already in the table left as they were"
    ),
    "tick lists every due slot ('all') and keeps the newest for 'latest'": (
        "at once and in little memory"
    ),
    "the job a 'latest' catch-up enqueues dated by the tick (run_after = now)": (
        "a 'latest' tick at 16:00:05"
    ),
    "tick waits 1 s for a module lock, then returns [] (another schedule's tick holds it)": (
        "ticks in another thread of the same process"
    ),
    "tick raises TimeoutError after waiting 2 s for a module lock another schedule holds": (
        "ticks in another thread of the same process"
    ),
    "due_slots returns [] before it checks catch_up when the last slot is at or past now": (
        "ValueError for due_slots(60, 100, 0, 100, 'Latest')"
    ),
    "tick builds each key inline in UTC, never through slot_key (a name with ':' gets jobs)": (
        "with catch_up 'latest', then 'all', to raise ValueError"
    ),
    "tick's fast path for catch_up='latest' builds its one key inline, never via slot_key": (
        "with catch_up 'latest', then 'all', to raise ValueError"
    ),
    "the newest key's time cut off with key.lstrip(prefix) (a name with a '2' in it)": (
        "two ticks of 'backup2', an hour apart"
    ),
}

#: What the feedback must name in its "got" line, where the expectation alone would not.
GOT = {
    "tick in BEGIN IMMEDIATE returns [] without COMMIT when 'latest' finds nothing new": (
        "[] (a transaction still open)"
    ),
    "tick reads what fired, then commits its BEGIN IMMEDIATE only when it created a key": (
        "with a transaction still open"
    ),
    "each job inserted with its key, its kind set by an UPDATE after it": "'email'",
    "the jobs inserted with SQL built by an f-string quoting with {key!r}": "syntax error",
    'the jobs inserted with SQL built by an f-string quoting with "{key}"': "syntax error",
    "the newest key's fire time parsed back with a naive .timestamp()": "missing",
    "tick keeps only the newest 100 due slots of a catch-up": "created 100;",
    "tick keeps only the newest 5000 due slots of a catch-up (due_slots(...)[-5000:])": (
        "created 5000 keys"
    ),
    "due_slots walks forward from since to now, keeping the slots after last": "still running",
    "tick keeps the first connection it was given in a global (fails after a reconnect)": (
        "closed database"
    ),
    "a key reported as created when cursor.lastrowid is set (INSERT OR IGNORE)": (
        "both reported creating"
    ),
    "tick inserts every due slot in one multi-row INSERT ... RETURNING key": (
        "too many SQL variables"
    ),
    "tick commits its catch-up in batches of 1000 slots, the newest batch first": (
        "not every slot from"
    ),
    "slot_key memoised in a module dict keyed by the fire time alone": (
        "'reminders' created [[], []]"
    ),
    "tick sets conn.row_factory = None on the scheduler's connection and leaves it so": (
        "conn.row_factory = None"
    ),
    "tick turns PRAGMA case_sensitive_like on for its LIKE and leaves it on": (
        "PRAGMA case_sensitive_like = ON"
    ),
    "catch_up='latest' marks the schedule's pending jobs dead, superseded by the newest": (
        "state 'pending' -> 'dead'"
    ),
    "tick puts the newest fired slot's dead job back to pending (its slot runs twice)": (
        "state 'dead' -> 'pending'"
    ),
}


test_wrong_solution_fails_the_check_that_names_its_mistake = in_process_test(ZOO, SAYS, GOT)


#: Mistakes that lose or duplicate nothing the scheduler enqueues with the grid it is
#: given (a function's contract bent at its edges): their checks are not severe.
MINOR = [
    # 'eu:nightly' gets jobs, and 'eu' fails every tick on them: loud, waits for a fix.
    "tick builds each key inline in UTC, never through slot_key (a name with ':' gets jobs)",
    "tick's fast path for catch_up='latest' builds its one key inline, never via slot_key",
    # A name with a '2' fails every tick after its first: loud, that schedule waits for a fix.
    "the newest key's time cut off with key.lstrip(prefix) (a name with a '2' in it)",
    # A schedule with a name past 255 characters never fires: loud (a ValueError), caught
    # by a check of keys, not severe.
    "slot_key refuses a name longer than 255 characters (a VARCHAR(255)'s width)",
    # The clock-behind scene fires slots before the other's; its check is not severe.
    "what fired read among the jobs whose updated_at <= now (another scheduler's clock ahead)",
    # Every slot once; the keys come back in another order, from one process to the next.
    "tick gathers the keys it created in a set (returned in the order of their hashes)",
    # A name with braces raises: loud, and that schedule's slots wait for a fix.
    "slot_key puts the name into a str.format template ('{region}' in a name is a field)",
    # A name with a full-width colon is refused: loud, nothing lost or twice.
    "slot_key refuses a name whose NFKC form holds ':' (a full-width '：' in it)",
    # The slots go in once each; the scheduler's later writes on that connection (its
    # own bookkeeping) would wait on a commit: the check of a long-lived connection.
    "tick batches its inserts under isolation_level 'DEFERRED', the mode left set",
    # A slot the later run already stood for runs once more, out of order; the check,
    # written for a clock behind raising, costs its point.
    "under catch_up='latest', tick never reads what fired and leans on ON CONFLICT",
    # Nothing was due: the slot was fired by a scheduler whose clock runs ahead.
    "tick raises when the newest key is after now (a clock behind taken for an error)",
    # Nothing was due either way: the tick raises instead of returning [] (a scheduler
    # that starts later, or one whose clock runs behind another's).
    "due_slots raises ValueError when since is after now (a schedule that starts later)",
    "due_slots raises ValueError when last is after now (another scheduler's clock ahead)",
    "tick stores kind = schedule.strip()",
    "due_slots compares slots with int(since) (a slot just before a fractional since is due)",
    "due_slots counts forward from last + period_s (off the grid when last is)",
    "due_slots takes catch_up in any case ('Latest')",
    "due_slots takes catch_up with spaces around it ('latest ')",
    "the slot at exactly since is not due (slot > since)",
    "run_after = max(slot, now): a missed slot's job dated by the tick, not the slot",
    "tick returns the keys it created newest first",  # every slot once, in another order
    "due_slots tests `not last`: last = 0 (the epoch's slot) taken for None",
    "catch_up='latest' as [slots[-1]]: IndexError when nothing is due",
    "due_slots walks range(since, now + 1, period_s) (off the grid when since is)",
    "slot_key also refuses '/' in a name (and a blank one)",
    "tick stores kind = 'schedule:<name>:' (the key's prefix)",
    "tick writes updated_at = the slot, not now",
    "catch_up='latest' takes the newest slot at or before now, whatever since says",
    "slot_key accepts an empty schedule name",
    "tick writes updated_at = int(now)",
    "slot_key refuses a name of spaces only (not schedule.strip())",
    "tick stores kind = schedule.lower() (the worker looks for task 'clôture_mois eu')",
    "tick's BEGIN IMMEDIATE left open when due_slots refuses period_s (called before try)",
    # Slow or out of memory only where a schedule's since is far back and its period short.
    "due_slots builds list(range(...)) of every slot since 'since', then filters it",
    "due_slots walks forward from since to now, keeping the slots after last",
    # A wrong key for a name with '%' in it, the same on every scheduler: nothing twice.
    "slot_key puts the name into the strftime format ('%d' in a name becomes the day)",
    # Every slot once in the table; the second scheduler says it made them too.
    "a key reported as created when its row's updated_at is this tick's now",
    # A missed slot's job is due at once either way: dated by the tick, not by its slot.
    "a missed slot's job dated by the tick (run_after = now, not its slot)",
    # Loud configs are the contract; the check that catches it is the one of failed ticks.
    "tick maps a catch_up other than all/latest to 'all' (a config typo runs every slot)",
    # A slot exactly at now waits for the next tick, a few seconds later: nothing lost.
    "catch_up='latest' takes ceil(now / period_s) * period_s - period_s (misses a slot at now)",
    # Loud: the tick after a Ctrl-C fails on the transaction left open (and rolls it back),
    # the one after it enqueues every slot.
    "tick rolls back on except Exception only (a Ctrl-C leaves its BEGIN IMMEDIATE open)",
    # Every slot once; what changes is how the scheduler's own later statements read.
    "tick sets conn.row_factory = None on the scheduler's connection and leaves it so",
    "tick turns PRAGMA case_sensitive_like on for its LIKE and leaves it on",
    # Due at once either way: the one run of a 'latest' catch-up dated by the tick.
    "the job a 'latest' catch-up enqueues dated by the tick (run_after = now)",
    # Every slot once, a tick late: the skipped schedule's next tick catches it up.
    "tick returns [] when a module lock is held (a tick of another schedule skips this one)",
    # Every slot once, due at its slot; only the job's bookkeeping date is off.
    "the job a 'latest' catch-up enqueues written with updated_at = its slot",
    # A slot delayed to the next tick, never lost: the next tick catches up.
    "tick waits 1 s for a module lock, then returns [] (another schedule's tick holds it)",
    "tick raises TimeoutError after waiting 2 s for a module lock another schedule holds",
    # A typo in catch_up found later, when a slot is due: loud then, nothing lost.
    "due_slots returns [] before it checks catch_up when the last slot is at or past now",
]


@pytest.mark.parametrize(
    ("exercise", "mistake", "check"), [e[:3] for e in ZOO if e[1] not in MINOR]
)
def test_each_mistake_is_severe(exercise: str, mistake: str, check: str) -> None:
    assert_severe(exercise, mistake, check)  # each loses or duplicates a slot's job


def test_the_zoo_lists_what_each_check_says() -> None:
    assert sorted(SAYS) == sorted(m for _, m, _, _ in ZOO)


#: Right solutions written otherwise: each keeps the check that once took its points (or
#: the one most likely to).
RIGHT: list[tuple[str, str, str]] = [
    (
        "a module threading.Lock around a tick in BEGIN IMMEDIATE ... COMMIT (the second "
        "scheduler is another process)",
        "a_tick_reports_only_the_keys_it_inserted",
        """
        import logging
        import threading

        log = logging.getLogger("scheduler")
        _lock = threading.Lock()  # one tick at a time in this process


        def _last_fired(conn, schedule: str) -> float | None:
            prefix = f"schedule:{schedule}:"
            with_prefix = [
                r[0]
                for r in conn.execute(
                    "SELECT key FROM jobs WHERE instr(key, ?) = 1", (prefix,)
                ).fetchall()
            ]
            if not with_prefix:
                return None
            stamp = max(with_prefix)[len(prefix):]
            return datetime.strptime(stamp + "+0000", "%Y-%m-%dT%H:%M:%SZ%z").timestamp()


        def tick(
            conn, schedule: str, period_s: int, since: float, now: float, catch_up: str
        ) -> list[str]:
            with _lock:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    last = _last_fired(conn, schedule)
                    created: list[str] = []
                    for slot in due_slots(period_s, last, since, now, catch_up):
                        key = slot_key(schedule, slot)
                        row = conn.execute(
                            "INSERT INTO jobs (key, kind, run_after, updated_at)"
                            " VALUES (?, ?, ?, ?) ON CONFLICT (key) DO NOTHING RETURNING key",
                            (key, schedule, slot, now),
                        ).fetchone()
                        if row is not None:
                            created.append(key)
                            log.info("enqueued %s", key)
                        else:
                            log.debug("%s already enqueued by another scheduler", key)
                    conn.execute("COMMIT")
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                print(f"tick {schedule}: {len(created)} new")
                return created
        """,
    ),
    (
        "a busy timeout of BUSY_TIMEOUT_MS = 60_000 set in tick (a minute in milliseconds, "
        "not a cap)",
        "a_long_outage_enqueues_every_missed_slot",
        """
        MS_PER_S = 1000
        BUSY_TIMEOUT_MS = 60_000


        def tick(conn, schedule, period_s, since, now, catch_up):
            # wait up to a minute for another scheduler's write lock instead of failing at once
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "INSERT OR IGNORE judged by rowcount, the key read back with "
        "calendar.timegm(time.strptime(...))",
        "tick_reads_what_fired_in_every_time_zone",
        """
        import calendar
        import time

        FMT = "%Y-%m-%dT%H:%M:%SZ"


        def slot_key(schedule, fire_time):
            if not isinstance(schedule, str) or len(schedule) == 0 or ":" in schedule:
                raise ValueError(f"invalid schedule {schedule!r}")
            return "schedule:" + schedule + ":" + time.strftime(FMT, time.gmtime(fire_time))


        def due_slots(period_s, last, since, now, catch_up):
            if period_s <= 0 or catch_up not in {"all", "latest"}:
                raise ValueError("bad arguments")
            hi = int(now // period_s)
            lo = int(-(-since // period_s))
            if last is not None:
                lo = max(lo, int(last // period_s) + 1)
            if lo > hi:
                return []
            if catch_up == "latest":
                lo = hi
            return [k * period_s for k in range(lo, hi + 1)]


        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = "schedule:%s:" % schedule
            cur = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, ?) = ?", (len(prefix), prefix)
            )
            newest = cur.fetchone()[0]
            last = None
            if newest is not None:
                last = calendar.timegm(time.strptime(newest[len(prefix):], FMT))
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                cur = conn.execute(
                    "INSERT OR IGNORE INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (?, ?, ?, ?)",
                    (key, schedule, slot, now),
                )
                if cur.rowcount == 1:
                    created.append(key)
            return created
        """,
    ),
    (
        "a tick that logs its time in microseconds (* 1_000_000) and sets PRAGMA cache_size "
        "= -200000 (big numbers, not caps)",
        "a_long_outage_enqueues_every_missed_slot",
        """
        import logging
        import time

        log = logging.getLogger("scheduler")
        US_PER_S = 1_000_000


        def tick(conn, schedule, period_s, since, now, catch_up):
            started = time.perf_counter()
            conn.execute("PRAGMA cache_size = -200000")  # 200 MB of page cache
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING RETURNING key",
                    {"key": key, "kind": schedule, "slot": slot, "now": now},
                ).fetchone()
                if got is not None:
                    created.append(key)
            spent = int((time.perf_counter() - started) * US_PER_S)
            log.debug("tick %s: %d new in %d us", schedule, len(created), spent)
            return created
        """,
    ),
    (
        "BEGIN IMMEDIATE with a busy timeout of BUSY_MS = 250_000 ms (the second "
        "scheduler of a_tick_reports_only_the_keys_it_inserted waited it out)",
        "a_tick_reports_only_the_keys_it_inserted",
        """
        BUSY_MS = 250_000  # a long catch-up of another scheduler may hold the lock minutes


        def tick(conn, schedule, period_s, since, now, catch_up):
            conn.execute(f"PRAGMA busy_timeout = {BUSY_MS}")
            conn.execute("BEGIN IMMEDIATE")
            try:
                prefix = f"schedule:{schedule}:"
                row = conn.execute(
                    "SELECT max(key) FROM jobs WHERE substr(key, 1, ?) = ?", (len(prefix), prefix)
                ).fetchone()
                last = None
                if row[0] is not None:
                    fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                    last = fired.replace(tzinfo=UTC).timestamp()
                created = []
                for slot in due_slots(period_s, last, since, now, catch_up):
                    key = slot_key(schedule, slot)
                    got = conn.execute(
                        "INSERT INTO jobs (key, kind, run_after, updated_at)"
                        " VALUES (?, ?, ?, ?) ON CONFLICT (key) DO NOTHING RETURNING key",
                        (key, schedule, slot, now),
                    ).fetchone()
                    if got is not None:
                        created.append(key)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            return created
        """,
    ),
    (
        "executemany in chunks of CHUNK = 2**20 rows in BEGIN IMMEDIATE, the new keys "
        "those not in the table before",
        "a_long_outage_enqueues_every_missed_slot",
        """
        from itertools import islice

        CHUNK = 2**20


        def tick(conn, schedule, period_s, since, now, catch_up):
            conn.execute("BEGIN IMMEDIATE")
            try:
                prefix = f"schedule:{schedule}:"
                row = conn.execute(
                    "SELECT max(key) FROM jobs WHERE substr(key, 1, ?) = ?", (len(prefix), prefix)
                ).fetchone()
                last = None
                if row[0] is not None:
                    fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                    last = fired.replace(tzinfo=UTC).timestamp()
                slots = due_slots(period_s, last, since, now, catch_up)
                keys = [slot_key(schedule, slot) for slot in slots]
                before = {
                    r[0]
                    for r in conn.execute(
                        "SELECT key FROM jobs WHERE substr(key, 1, ?) = ? AND key >= ?",
                        (len(prefix), prefix, keys[0] if keys else prefix),
                    ).fetchall()
                }
                rows = iter(zip(keys, slots))
                while chunk := list(islice(rows, CHUNK)):
                    conn.executemany(
                        "INSERT OR IGNORE INTO jobs (key, kind, run_after, updated_at)"
                        " VALUES (?, ?, ?, ?)",
                        ((key, schedule, slot, now) for key, slot in chunk),
                    )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            return [key for key in keys if key not in before]
        """,
    ),
    (
        "BEGIN IMMEDIATE tried again on 'database is locked' (three tries, then the error), "
        "each conflict skipped with continue",
        "a_failed_insert_stops_the_tick",
        """
        import sqlite3
        import time


        def _begin(conn, tries=3):
            for left in range(tries - 1, -1, -1):
                try:
                    conn.execute("BEGIN IMMEDIATE")
                    return
                except sqlite3.OperationalError as error:
                    if "locked" not in str(error) or not left:
                        raise
                    time.sleep(0.01)


        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            _begin(conn)
            try:
                row = conn.execute(
                    "SELECT max(key) FROM jobs WHERE substr(key, 1, ?) = ?", (len(prefix), prefix)
                ).fetchone()
                last = None
                if row[0] is not None:
                    fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                    last = fired.replace(tzinfo=UTC).timestamp()
                created = []
                for slot in due_slots(period_s, last, since, now, catch_up):
                    key = slot_key(schedule, slot)
                    got = conn.execute(
                        "INSERT INTO jobs (key, kind, run_after, updated_at)"
                        " VALUES (?, ?, ?, ?) ON CONFLICT (key) DO NOTHING RETURNING key",
                        (key, schedule, slot, now),
                    ).fetchone()
                    if got is None:
                        continue  # another scheduler's: the next slot may still be ours
                    created.append(key)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            return created
        """,
    ),
    (
        "a day and a week in seconds held in tick and due_slots (86_400, 7 * 24 * 3600) for a "
        "log line, the keys read with key > prefix AND key < prefix || 'Z'",
        "a_long_outage_enqueues_every_missed_slot",
        """
        import logging

        log = logging.getLogger("scheduler")
        DAY_S = 86_400
        WEEK_S = 7 * 24 * 3600


        def due_slots(period_s, last, since, now, catch_up):
            if period_s <= 0:
                raise ValueError(f"period_s must be positive, not {period_s!r}")
            if catch_up not in ("all", "latest"):
                raise ValueError(f"catch_up must be 'all' or 'latest', not {catch_up!r}")
            if period_s >= DAY_S:
                log.debug("a slow schedule: every %.1f days", period_s / DAY_S)
            slot = (now // period_s) * period_s
            slots = []
            while slot >= since and (last is None or slot > last):
                slots.append(slot)
                if catch_up == "latest":
                    break
                slot -= period_s
            return slots[::-1]


        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE key > :prefix AND key < :prefix || 'Z'",
                {"prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
                if now - last > WEEK_S:
                    log.warning("%s: nothing fired for %.1f days", schedule, (now - last) / DAY_S)
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (?, ?, ?, ?) ON CONFLICT (key) DO NOTHING RETURNING key",
                    (key, schedule, slot, now),
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "a plain INSERT whose IntegrityError (the key already there) is skipped, nothing else",
        "two_schedulers_in_every_order_enqueue_each_slot_once",
        """
        import sqlite3

        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, ?) = ?", (len(prefix), prefix)
            ).fetchone()
            last = None
            if row[0] is not None:
                last = datetime.fromisoformat(row[0][-20:]).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                try:
                    conn.execute(
                        "INSERT INTO jobs (key, kind, run_after, updated_at) VALUES (?, ?, ?, ?)",
                        (key, schedule, slot, now),
                    )
                except sqlite3.IntegrityError:
                    continue  # another scheduler enqueued this slot
                created.append(key)
            return created
        """,
    ),
    (
        "a locked INSERT tried again up to eight times, then its error raised",
        "a_failed_insert_stops_the_tick",
        """
        import sqlite3

        def _insert(conn, params):
            for attempt in range(8):
                try:
                    return conn.execute(
                        "INSERT INTO jobs (key, kind, run_after, updated_at)"
                        " VALUES (:key, :kind, :slot, :now) ON CONFLICT (key) DO NOTHING"
                        " RETURNING key",
                        params,
                    ).fetchone()
                except sqlite3.OperationalError as exc:
                    if "locked" not in str(exc) or attempt == 7:
                        raise

        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                params = {"key": key, "kind": schedule, "slot": slot, "now": now}
                if _insert(conn, params) is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "the slots inserted in multi-row INSERTs of 500 rows each, in one BEGIN IMMEDIATE",
        "a_long_outage_enqueues_every_missed_slot",
        """
        BATCH = 500


        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute(
                    "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                    {"n": len(prefix), "prefix": prefix},
                ).fetchone()
                last = None
                if row[0] is not None:
                    fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                    last = fired.replace(tzinfo=UTC).timestamp()
                slots = due_slots(period_s, last, since, now, catch_up)
                created = []
                for start in range(0, len(slots), BATCH):
                    batch = slots[start:start + BATCH]
                    params = [
                        v for slot in batch for v in (slot_key(schedule, slot), schedule, slot, now)
                    ]
                    rows = conn.execute(
                        "INSERT INTO jobs (key, kind, run_after, updated_at) VALUES "
                        + ", ".join(["(?, ?, ?, ?)"] * len(batch))
                        + " ON CONFLICT (key) DO NOTHING RETURNING key",
                        params,
                    ).fetchall()
                    created += sorted(r[0] for r in rows)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            return created
        """,
    ),
    (
        "every due slot inserted by one INSERT ... SELECT over a recursive CTE of the slots, "
        "keyed by SQLite's strftime",
        "a_long_outage_enqueues_every_missed_slot",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            slots = due_slots(period_s, last, since, now, catch_up)
            if not slots:
                return []
            slot_key(schedule, slots[0])  # refuses a bad name
            rows = conn.execute(
                "WITH RECURSIVE s(t) AS (SELECT :first UNION ALL"
                " SELECT t + :p FROM s WHERE t + :p <= :newest)"
                " INSERT INTO jobs (key, kind, run_after, updated_at)"
                " SELECT :prefix || strftime('%Y-%m-%dT%H:%M:%SZ', t, 'unixepoch'), :kind, t, :now"
                " FROM s WHERE true ON CONFLICT (key) DO NOTHING RETURNING key",
                {
                    "first": slots[0],
                    "p": period_s,
                    "newest": slots[-1],
                    "prefix": prefix,
                    "kind": schedule,
                    "now": now,
                },
            ).fetchall()
            return sorted(r[0] for r in rows)
        """,
    ),
    (
        "slot_key through datetime.fromtimestamp(t).astimezone(UTC) (fold set, so exact)",
        "slot_key_holds_on_the_nights_summer_time_changes",
        """
        def slot_key(schedule, fire_time):
            if not schedule or ":" in schedule:
                raise ValueError(f"bad schedule name {schedule!r}")
            fired = datetime.fromtimestamp(fire_time).astimezone(UTC)
            return f"schedule:{schedule}:{fired:%Y-%m-%dT%H:%M:%SZ}"
        """,
    ),
    (
        "slot_key through time.strftime(..., time.gmtime(fire_time))",
        "slot_key_is_the_same_in_every_time_zone",
        """
        import time


        def slot_key(schedule, fire_time):
            if not schedule or ":" in schedule:
                raise ValueError(f"bad schedule name {schedule!r}")
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(fire_time))
            return "schedule:" + schedule + ":" + stamp
        """,
    ),
    (
        "due_slots by arithmetic: multiples from ceil(since / p), past last, to floor(now / p)",
        "due_slots_on_generated_schedules",
        """
        import math


        def due_slots(period_s, last, since, now, catch_up):
            if period_s <= 0:
                raise ValueError(f"period_s must be positive, not {period_s!r}")
            if catch_up not in ("all", "latest"):
                raise ValueError(f"catch_up must be 'all' or 'latest', not {catch_up!r}")
            first = math.ceil(since / period_s)
            if last is not None:
                first = max(first, math.floor(last / period_s) + 1)
            newest = math.floor(now / period_s)
            if newest < first:
                return []
            if catch_up == "latest":
                return [newest * period_s]
            return [k * period_s for k in range(first, newest + 1)]
        """,
    ),
    (
        "tick finds its keys in Python with re.match(re.escape(prefix), key)",
        "names_with_underscores_and_capitals_are_their_own_schedules",
        """
        import re


        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            mine = re.compile(re.escape(prefix))
            keys = [r[0] for r in conn.execute("SELECT key FROM jobs") if mine.match(r[0])]
            last = None
            if keys:
                last = datetime.fromisoformat(max(keys)[len(prefix):]).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (?, ?, ?, ?) ON CONFLICT (key) DO NOTHING RETURNING key",
                    (key, schedule, slot, now),
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "tick's LIKE under case_sensitive_like, '\\', '%' and '_' escaped, set back off after",
        "a_failed_tick_leaves_the_connection_usable",
        r"""
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            conn.execute("PRAGMA case_sensitive_like = ON")
            try:
                row = conn.execute(
                    "SELECT max(key) FROM jobs WHERE key LIKE ? ESCAPE '\\'", (escaped + "%",)
                ).fetchone()
            finally:
                conn.execute("PRAGMA case_sensitive_like = OFF")
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (?, ?, ?, ?) ON CONFLICT (key) DO NOTHING RETURNING key",
                    (key, schedule, slot, now),
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "tick in BEGIN IMMEDIATE whose finally rolls back a transaction still open (Ctrl-C too)",
        "a_failed_tick_leaves_the_connection_usable",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            conn.execute("BEGIN IMMEDIATE")
            try:
                prefix = f"schedule:{schedule}:"
                row = conn.execute(
                    "SELECT max(key) FROM jobs WHERE substr(key, 1, ?) = ?", (len(prefix), prefix)
                ).fetchone()
                last = None
                if row[0] is not None:
                    fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                    last = fired.replace(tzinfo=UTC).timestamp()
                created = []
                for slot in due_slots(period_s, last, since, now, catch_up):
                    key = slot_key(schedule, slot)
                    got = conn.execute(
                        "INSERT INTO jobs (key, kind, run_after, updated_at)"
                        " VALUES (?, ?, ?, ?) ON CONFLICT (key) DO NOTHING RETURNING key",
                        (key, schedule, slot, now),
                    ).fetchone()
                    if got is not None:
                        created.append(key)
                conn.execute("COMMIT")
                return created
            finally:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
        """,
    ),
    (
        "tick passes since=max(since, last) and last=None (the fired slot meets ON CONFLICT)",
        "last_fired_is_the_newest_key",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, ?) = ?", (len(prefix), prefix)
            ).fetchone()
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                since = max(since, fired.replace(tzinfo=UTC).timestamp())
            last = None  # the slot that fired is due again, and skipped by ON CONFLICT
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (?, ?, ?, ?) ON CONFLICT (key) DO NOTHING RETURNING key",
                    (key, schedule, slot, now),
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "a lock per schedule, a tick of the same schedule under way skipped (the other "
        "enqueues its slots)",
        "two_schedules_of_one_process_tick_side_by_side",
        """
        import threading

        _locks: dict = {}
        _tick = tick


        def tick(conn, schedule, period_s, since, now, catch_up):
            lock = _locks.setdefault(schedule, threading.Lock())
            if not lock.acquire(blocking=False):
                return []  # the same schedule is ticking in another thread
            try:
                return _tick(conn, schedule, period_s, since, now, catch_up)
            finally:
                lock.release()
        """,
    ),
    (
        "one module threading.Lock waited for around every tick (schedules tick in turn)",
        "two_schedules_of_one_process_tick_side_by_side",
        """
        import threading

        _ticking = threading.Lock()
        _tick = tick


        def tick(conn, schedule, period_s, since, now, catch_up):
            with _ticking:
                return _tick(conn, schedule, period_s, since, now, catch_up)
        """,
    ),
    (
        "what fired read as strftime('%s', the newest key's time) in SQL",
        "last_fired_is_the_newest_key",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT strftime('%s', substr(max(key), :n + 1, 19)) FROM jobs"
                " WHERE substr(key, 1, :n) = :prefix",
                {"n": len(prefix), "prefix": prefix},
            ).fetchone()
            last = None if row[0] is None else int(row[0])
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (?, ?, ?, ?) ON CONFLICT (key) DO NOTHING RETURNING key",
                    (key, schedule, slot, now),
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "the schedule's keys read with key BETWEEN '<prefix>0' AND '<prefix>9999'",
        "another_schedule_with_a_longer_name",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE key BETWEEN ? AND ?",
                (prefix + "0", prefix + "9999"),
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (?, ?, ?, ?) ON CONFLICT (key) DO NOTHING RETURNING key",
                    (key, schedule, slot, now),
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        # Waited for, never skipped: the side-by-side scene holds the other's lock 3 s.
        "a lock per schedule (a module dict of locks, made under a guard lock) around a tick",
        "two_schedules_of_one_process_tick_side_by_side",
        """
        import threading

        _guard = threading.Lock()
        _locks: dict[str, threading.Lock] = {}
        _tick = tick


        def tick(conn, schedule, period_s, since, now, catch_up):
            with _guard:
                lock = _locks.setdefault(schedule, threading.Lock())
            with lock:  # one tick per schedule in this process; others go on
                return _tick(conn, schedule, period_s, since, now, catch_up)
        """,
    ),
    (
        "the newest key by a key range (prefix < key < prefix with ';' for ':'), INSERT OR "
        "IGNORE told by rowcount, the fire time parsed with calendar.timegm",
        "another_schedule_with_a_longer_name",
        """
        import calendar
        import time


        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT key FROM jobs WHERE key > ? AND key < ? ORDER BY key DESC LIMIT 1",
                (prefix, prefix[:-1] + ";"),  # ';' sorts right after ':'
            ).fetchone()
            last = None
            if row is not None:
                fired = time.strptime(row[0][len(prefix):], "%Y-%m-%dT%H:%M:%SZ")
                last = calendar.timegm(fired)
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                cursor = conn.execute(
                    "INSERT OR IGNORE INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (?, ?, ?, ?)",
                    (key, schedule, slot, now),
                )
                if cursor.rowcount == 1:
                    created.append(key)
            return created
        """,
    ),
    (
        # A wait of its own on a locked BEGIN IMMEDIATE, then the error: the scene that runs
        # the second scheduler inside the first's tick ticks it again once the first is done.
        "a tick in BEGIN IMMEDIATE that retries a locked BEGIN four times, then re-raises",
        "a_tick_reports_only_the_keys_it_inserted",
        """
        import sqlite3
        import time

        _tick = tick


        def tick(conn, schedule, period_s, since, now, catch_up):
            for attempt in range(5):
                try:
                    conn.execute("BEGIN IMMEDIATE")
                    break
                except sqlite3.OperationalError as error:
                    if "locked" not in str(error) or attempt == 4:
                        raise
                    time.sleep(0.1 * (attempt + 1))
            try:
                created = _tick(conn, schedule, period_s, since, now, catch_up)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return created
        """,
    ),
    (
        "the newest key by a range up to the prefix with '~' after it, the time taken with "
        "key.split(':', 2)[2]",
        "last_fired_is_the_newest_key",
        """
        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = f"schedule:{schedule}:"
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE key > ? AND key < ?", (prefix, prefix + "~")
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0].split(":", 2)[2], "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (?, ?, ?, ?) ON CONFLICT (key) DO NOTHING RETURNING key",
                    (key, schedule, slot, now),
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
    (
        "the prefix cut from slot_key(schedule, 0) (the name checked before any SELECT), the "
        "time taken with key.replace(prefix, '')",
        "a_name_with_a_colon_gets_no_job",
        """
        EPOCH_STAMP = "1970-01-01T00:00:00Z"


        def tick(conn, schedule, period_s, since, now, catch_up):
            prefix = slot_key(schedule, 0).removesuffix(EPOCH_STAMP)
            row = conn.execute(
                "SELECT max(key) FROM jobs WHERE substr(key, 1, ?) = ?", (len(prefix), prefix)
            ).fetchone()
            last = None
            if row[0] is not None:
                fired = datetime.strptime(row[0].replace(prefix, ""), "%Y-%m-%dT%H:%M:%SZ")
                last = fired.replace(tzinfo=UTC).timestamp()
            created = []
            for slot in due_slots(period_s, last, since, now, catch_up):
                key = slot_key(schedule, slot)
                got = conn.execute(
                    "INSERT INTO jobs (key, kind, run_after, updated_at)"
                    " VALUES (?, ?, ?, ?) ON CONFLICT (key) DO NOTHING RETURNING key",
                    (key, schedule, slot, now),
                ).fetchone()
                if got is not None:
                    created.append(key)
            return created
        """,
    ),
]

test_a_right_solution_written_otherwise_keeps_the_points = right_test("ex12", RIGHT)
