# %% [markdown]
# # Exercise 3: claim a job atomically, with a lease
#
# Several workers poll the same table. Each must take a **different** job, and a job
# whose worker died must come back by itself. The classic bug reads a ready job with a
# SELECT and takes it with an UPDATE: between the two, another worker reads the same
# row, and the job runs twice. The cure is to choose and take in **one statement**, or
# in one transaction that holds the write lock from its first statement.
#
# The table (`labkit.grading.exercises.labdb`, also in `labkit/grading/exercises/labdb.sql`):
#
# | column | meaning |
# |---|---|
# | `id`, `key`, `kind` | the job |
# | `state` | `pending`, `running`, `retry_wait`, `succeeded` or `dead` |
# | `attempt`, `max_attempts` | runs so far, and the budget |
# | `run_after` | not before this time (epoch seconds) |
# | `lease_owner`, `lease_until`, `lease_token` | who holds a running job, until when, with which token |
# | `updated_at` | when the row last changed |
#
# Write `claim` below with a single `UPDATE ... RETURNING`. The check runs four workers
# at once, each on its own connection, and pauses every plain SELECT to make a race
# impossible to miss.

# %%
from labkit.grading.exercises.labdb import add_job, all_jobs, exercise_db
from labkit.notebook.scratch import fresh_dir


# %%
def claim(conn, worker: str, now: float, lease_s: float):
    """Lease the next ready job to ``worker``; return it as a dict, or None if none is ready.

    - Ready: ``state`` is ``pending`` or ``retry_wait`` with ``run_after <= now``, or
      ``state`` is ``running`` with ``lease_until <= now`` (its worker died).
    - The job due first goes first: ``ORDER BY run_after, id``.
    - Taking it sets ``state = 'running'``, ``attempt = attempt + 1``,
      ``lease_owner = worker``, ``lease_until = now + lease_s``, a fresh random
      ``lease_token`` (for example ``lower(hex(randomblob(16)))``) and ``updated_at = now``.
    - All of it in ONE statement, ``UPDATE jobs SET ... WHERE id = (SELECT ...)
      RETURNING *``, with ``:named`` parameters; ``conn`` is in autocommit mode, so the
      statement is its own transaction. Return ``dict(row)``. (A SELECT then an UPDATE
      is safe only inside ``BEGIN IMMEDIATE`` ... ``COMMIT``, rolled back if a statement
      fails: the write lock is taken before the read.)
    """
    ### BEGIN SOLUTION
    row = conn.execute(
        """
        UPDATE jobs
           SET state = 'running',
               attempt = attempt + 1,
               lease_owner = :worker,
               lease_until = :now + :lease_s,
               lease_token = lower(hex(randomblob(16))),
               updated_at = :now
         WHERE id = (
               SELECT id FROM jobs
                WHERE (state IN ('pending', 'retry_wait') AND run_after <= :now)
                   OR (state = 'running' AND lease_until <= :now)
                ORDER BY run_after, id
                LIMIT 1)
        RETURNING *
        """,
        {"worker": worker, "now": now, "lease_s": lease_s},
    ).fetchone()
    return None if row is None else dict(row)
    ### END SOLUTION


# %% [markdown]
# A table to try your claim on, with two ready jobs. Once `claim` is written,
# `claim(conn, "w1", 100.0, 30.0)` leases one to w1, a second call with "w2" the other,
# and a third returns None; `all_jobs(conn)` shows the rows.

# %%
conn = exercise_db(fresh_dir("ex03"))
for n in (1, 2):
    add_job(conn, f"mail:{n}:send:v1")

# %% [markdown]
# ## Check your work
#
# Checks marked *severe* catch a mistake that loses or duplicates an effect, lets two
# holders run, shows one owner's data to another or never runs a retried job again:
# failing one caps the exercise's score at half. Here: `token_is_fresh`,
# `expired_lease_is_reclaimable`, `respects_run_after_and_state`,
# `no_double_claim_under_a_race`, `retried_jobs_run_again`, and hidden ones the grader
# runs.

# %%
from labkit.grading import check

check("ex03")
