# %% [markdown]
# # Exercise 12: periodic jobs, one job per slot however many schedulers tick
#
# The cron article's nightly charge ran twice when two cron runs overlapped. Celery
# Beat has the same weakness: during a rolling update two Beat processes can run for
# a while, and each sends the task. A lock on one host does not help across hosts.
# The fix is in the data: give each **slot** (schedule name + the time it was due to
# fire) a key, and let the jobs table, whose `key` column is `UNIQUE`, refuse a second
# job with it. Then any number of schedulers can tick; each slot becomes one job.
#
# Two details decide whether it works:
#
# - the key comes from the **slot**, never from the moment a scheduler happened to tick
#   (two schedulers tick a few hundred milliseconds apart, and clocks drift);
# - what has already fired is read back from the **table**, not kept in memory, so a
#   restarted scheduler, or a second one, knows which slots were missed (catch-up).
#
# You work on the exercise jobs table (`labkit.grading.exercises.labdb`, also in
# `labkit/grading/exercises/labdb.sql`): `id`, `key` (UNIQUE), `kind`, `queue`, `state`,
# `run_after`, `updated_at`, and more you will not need here. The connection you get
# is in autocommit mode: each statement is its own transaction.

# %%
from datetime import UTC, datetime

from labkit.grading.exercises.labdb import all_jobs, exercise_db
from labkit.notebook.scratch import fresh_dir


# %%
def slot_key(schedule: str, fire_time: float) -> str:
    """The job key of one slot: ``schedule:<name>:<fire time in UTC>``.

    The fire time is written ``YYYY-MM-DDTHH:MM:SSZ`` in UTC, whatever the machine's
    time zone, so ``slot_key("nightly", 1767232800)`` is
    ``"schedule:nightly:2026-01-01T02:00:00Z"`` on every machine (these strings sort
    by time). Raise ``ValueError`` for an empty name or a name containing ``:`` (the
    separator).
    """
    ### BEGIN SOLUTION
    if not schedule or ":" in schedule:
        raise ValueError(f"schedule name {schedule!r} must be non-empty and without ':'")
    return f"schedule:{schedule}:{datetime.fromtimestamp(fire_time, UTC):%Y-%m-%dT%H:%M:%SZ}"
    ### END SOLUTION


# %%
def due_slots(period_s: int, last: float | None, since: float, now: float, catch_up: str) -> list:
    """The slots to enqueue now, oldest first.

    - Slots are the multiples of ``period_s`` seconds since the Unix epoch (so every
      scheduler computes the same ones): 0, period_s, 2 * period_s, ...
    - A slot is due when ``since <= slot <= now`` (a slot exactly at ``now`` is due)
      and, when ``last`` is not None, ``slot > last`` (``last`` already fired).
    - ``catch_up="all"``: every due slot; ``catch_up="latest"``: only the most recent
      due slot (missed ones collapse into one run, Celery Beat's habit).
    - Any other ``catch_up`` raises ``ValueError``; so does ``period_s <= 0``.
    """
    ### BEGIN SOLUTION
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
    return slots[::-1]
    ### END SOLUTION


# %%
def tick(conn, schedule: str, period_s: int, since: float, now: float, catch_up: str) -> list:
    """Enqueue the due slots of ``schedule``; return the keys THIS call created, oldest first.

    - Read the latest slot already in the table for this schedule (its keys start with
      ``schedule:<name>:``, and sort by time); None if there is none.
    - For each of ``due_slots(period_s, last, since, now, catch_up)``, insert a job with
      ``key = slot_key(schedule, slot)``, ``kind = schedule``, ``run_after = slot``,
      ``updated_at = now``, so that a key another scheduler already inserted is
      skipped quietly (``INSERT ... ON CONFLICT (key) DO NOTHING``), never an error.
    - Another scheduler runs this same function at the same time, in another process.
    """
    ### BEGIN SOLUTION
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
    ### END SOLUTION


# %% [markdown]
# Try it: two schedulers, 400 ms apart, tick an hourly schedule; then one of them comes
# back after three hours away. Each slot is in the table once.

# %%
HOUR = 3600
T0 = 1767225600  # 2026-01-01T00:00:00Z


def demo():
    conn = exercise_db(fresh_dir("ex12"))
    a = tick(conn, "nightly", HOUR, T0, T0 + 5, "all")
    b = tick(conn, "nightly", HOUR, T0, T0 + 5.4, "all")
    later = tick(conn, "nightly", HOUR, T0, T0 + 3 * HOUR + 10, "all")
    return a, b, later, [job["key"] for job in all_jobs(conn)]

# %% [markdown]
# ## Check your work
#
# Checks marked *severe* catch a mistake that loses or duplicates an effect, lets two
# holders run, shows one owner's data to another or never runs a retried job again:
# failing one caps the exercise's score at half. Here:
# `slot_key_is_the_same_in_every_time_zone`, `tick_reads_what_fired_from_the_table`,
# `two_schedulers_enqueue_each_slot_once`, `a_killed_scheduler_restarts_without_losing_a_slot`,
# and hidden ones the grader runs.

# %%
from labkit.grading import check

check("ex12")
