# %% [markdown]
# # Exercise 6: the dead letter, and a redrive that keeps the key
#
# A job that cannot succeed (a permanent error, or its attempts used up) goes to the
# **dead letter**: it stops running, and keeps why, and what went wrong, for a person to
# read, without any secret the error message happened to carry. Once the cause is
# fixed, a **redrive** sends dead jobs back to `pending`: the *same* rows with the
# *same* keys (so the destination still recognises a repeat), a fresh attempt budget,
# never more than asked for, and with a dry run to look first.
#
# The table is the one from exercise 3 (`labkit.grading.exercises.labdb`). Use `:named`
# parameters; `conn` is in autocommit mode, so open a transaction (`BEGIN IMMEDIATE`)
# where two statements must see the same rows.

# %%
import json

from labkit.grading.exercises.labdb import add_job, all_jobs, exercise_db
from labkit.redact import describe
from labkit.notebook.scratch import fresh_dir


# %%
def dead_letter(conn, job_id: int, token, reason: str, error: BaseException, now: float) -> bool:
    """Bury a running job: state ``dead``, with the reason and a sanitized error.

    Only the holder of the current lease may do it: change the row only when it is
    ``running`` with ``lease_token = token``; return True if it changed, else False
    (and change nothing). Set ``dead_reason = reason``, ``last_error =
    labkit.redact.describe(error)`` ("ErrorClass: message" with passwords and tokens
    replaced by ***), clear ``lease_owner``, ``lease_until`` and ``lease_token``, and
    set ``updated_at = now``. The key never changes.
    """
    ### BEGIN SOLUTION
    row = conn.execute(
        """
        UPDATE jobs
           SET state = 'dead', dead_reason = :reason, last_error = :error,
               lease_owner = NULL, lease_until = NULL, lease_token = NULL, updated_at = :now
         WHERE id = :id AND state = 'running' AND lease_token = :token
        RETURNING id
        """,
        {"id": job_id, "token": token, "reason": reason, "error": describe(error), "now": now},
    ).fetchone()
    return row is not None
    ### END SOLUTION


# %%
def redrive(conn, *, limit, now: float, kind: str | None = None, dry_run: bool = False) -> list:
    """Send up to ``limit`` dead jobs back to ``pending``; return their ids, oldest first.

    - ``limit`` is required: raise ``ValueError`` when it is None or below 1, before
      changing anything, with a message that names the limit and what to pass.
    - Only ``dead`` jobs, and only of ``kind`` when it is given; oldest first
      (``ORDER BY updated_at, id``), at most ``limit``.
    - Each one is the same row with the same key (an UPDATE, never an INSERT), with
      ``state = 'pending'``, ``attempt = 0``, ``run_after = now``, ``dead_reason =
      NULL``, ``redrives = redrives + 1``, ``updated_at = now``.
    - ``dry_run=True`` returns the ids that would be redriven and changes nothing.
    - Two operators may redrive at the same moment: choose and change the jobs in one
      write transaction (``conn.execute("BEGIN IMMEDIATE")``, the SELECT, the UPDATE,
      ``COMMIT``), so each dead job is redriven once and you return only jobs you changed.
    """
    ### BEGIN SOLUTION
    if limit is None or limit < 1:
        raise ValueError("limit is required (1 or more): say how many dead jobs to redrive")
    params = {"limit": limit, "kind": kind, "now": now}
    # One write transaction: the jobs we pick are the jobs we change, even with
    # another operator redriving at the same moment.
    conn.execute("BEGIN IMMEDIATE")
    try:
        ids = [
            row["id"]
            for row in conn.execute(
                """
                SELECT id FROM jobs
                 WHERE state = 'dead' AND (:kind IS NULL OR kind = :kind)
                 ORDER BY updated_at, id
                 LIMIT :limit
                """,
                params,
            )
        ]
        if not dry_run:
            conn.execute(
                """
                UPDATE jobs
                   SET state = 'pending', attempt = 0, run_after = :now, dead_reason = NULL,
                       redrives = redrives + 1, updated_at = :now
                 WHERE state = 'dead' AND id IN (SELECT value FROM json_each(:ids))
                """,
                {"now": now, "ids": json.dumps(ids)},
            )
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return ids
    ### END SOLUTION


# %% [markdown]
# A table to try your code on: three dead jobs of two kinds, and one still pending.

# %%
conn = exercise_db(fresh_dir("ex06"))
for n, kind in enumerate(["email", "payment", "email"], start=1):
    add_job(conn, f"{kind}:{n}:send:v1", kind=kind, state="dead", attempt=3,
            dead_reason="attempts exhausted (3 of 3)", updated_at=10.0 * n)
add_job(conn, "email:9:send:v1")
print([(job["id"], job["kind"], job["state"]) for job in all_jobs(conn)])

# %% [markdown]
# ## Check your work
#
# Checks marked *severe* catch a mistake that loses or duplicates an effect, lets two
# holders run, shows one owner's data to another or never runs a retried job again:
# failing one caps the exercise's score at half. Here: `dead_letter_hides_secrets`,
# `dead_letter_is_fenced`, `redrive_keeps_the_key`, `redrive_only_dead_jobs`,
# `two_redrives_at_once_share_nothing`, `redrive_racing_a_worker`, and hidden ones the
# grader runs.

# %%
from labkit.grading import check

check("ex06")
