# %% [markdown]
# # Exercise 13: a queue per account with a cap, and a serial queue per key
#
# The ERP article's biggest customer drops ten thousand jobs at once. A claim that
# takes the oldest ready job hands every worker to that customer until the flood is
# gone, and every other account waits. Two changes fix it:
#
# - each account has its own **queue** (here the `queue` column holds the account),
#   and a claim skips an account that already has `cap` jobs **running under a live
#   lease**;
# - among the accounts left, the **least busy** goes first, so the accounts take turns.
#
# Some jobs must also run **one at a time and in order**: the updates of one order,
# the sync of one ERP record. A **serial queue** claims only the **head** of each queue,
# its oldest live job: while the head runs, or waits in `retry_wait` for its next
# attempt, the jobs behind it wait too. A dead head is out of the line: the next job
# goes on.
#
# You work on the exercise jobs table (`labkit.grading.exercises.labdb`): the columns of exercise
# 3 plus `queue`. A job is **ready** when it is `pending` or `retry_wait` with
# `run_after <= now`, or `running` with `lease_until <= now` (its worker died). A job
# **runs under a live lease** when it is `running` with `lease_until > now`. Claiming sets
# `state = 'running'`, `attempt = attempt + 1`, `lease_owner`, `lease_until = now +
# lease_s`, a fresh random `lease_token` and `updated_at = now`, exactly as in exercise
# 3, and returns `dict(row)` (or None). Several workers claim at the same time, in
# several processes: choose and take in **one statement**.

# %%
from labkit.grading.exercises.labdb import add_job, all_jobs, exercise_db
from labkit.notebook.scratch import fresh_dir

# %%
# The SET clause of exercise 3's claim, for both functions below:
# "UPDATE jobs" + CLAIM_SET + "WHERE id = (SELECT ...) RETURNING *"
CLAIM_SET = """
       SET state = 'running',
           attempt = attempt + 1,
           lease_owner = :worker,
           lease_until = :now + :lease_s,
           lease_token = lower(hex(randomblob(16))),
           updated_at = :now
"""


# %%
def claim_capped(conn, worker: str, now: float, lease_s: float, cap: int):
    """Lease one ready job whose account (``queue``) has fewer than ``cap`` live running jobs.

    - busy(account) = its jobs ``running`` with ``lease_until > now``; an account with
      ``busy >= cap`` is skipped (a lease that ended at or before ``now`` does not count:
      its worker died).
    - Order: the least busy account first, then ``run_after``, then ``id``.
    - One ``UPDATE jobs SET ... WHERE id = (SELECT ...) RETURNING *``; return
      ``dict(row)``, or None when no account under its cap has a ready job.
    """
    ### BEGIN SOLUTION
    row = conn.execute(
        "UPDATE jobs" + CLAIM_SET + """
         WHERE id = (
               SELECT c.id FROM jobs c
                WHERE ((c.state IN ('pending', 'retry_wait') AND c.run_after <= :now)
                       OR (c.state = 'running' AND c.lease_until <= :now))
                  AND (SELECT count(*) FROM jobs r
                        WHERE r.queue = c.queue AND r.state = 'running'
                          AND r.lease_until > :now) < :cap
                ORDER BY (SELECT count(*) FROM jobs r
                           WHERE r.queue = c.queue AND r.state = 'running'
                             AND r.lease_until > :now),
                         c.run_after, c.id
                LIMIT 1)
        RETURNING *
        """,
        {"worker": worker, "now": now, "lease_s": lease_s, "cap": cap},
    ).fetchone()
    return None if row is None else dict(row)
    ### END SOLUTION


# %%
def claim_serial(conn, worker: str, now: float, lease_s: float):
    """Lease the head of a serial queue when the head is ready.

    - The head of a queue is its live job (``pending``, ``retry_wait`` or ``running``)
      with the smallest ``id``; ``succeeded`` and ``dead`` jobs are out of the line.
    - Only a head may be claimed, and only when it is ready: a head that runs under a
      live lease, or waits in ``retry_wait`` with ``run_after > now``, blocks its queue.
    - Among ready heads: ``run_after``, then ``id``. One statement; ``dict(row)`` or None.
    """
    ### BEGIN SOLUTION
    row = conn.execute(
        "UPDATE jobs" + CLAIM_SET + """
         WHERE id = (
               SELECT h.id FROM jobs h
                WHERE h.id IN (SELECT min(id) FROM jobs
                                WHERE state IN ('pending', 'retry_wait', 'running')
                                GROUP BY queue)
                  AND ((h.state IN ('pending', 'retry_wait') AND h.run_after <= :now)
                       OR (h.state = 'running' AND h.lease_until <= :now))
                ORDER BY h.run_after, h.id
                LIMIT 1)
        RETURNING *
        """,
        {"worker": worker, "now": now, "lease_s": lease_s},
    ).fetchone()
    return None if row is None else dict(row)
    ### END SOLUTION


# %% [markdown]
# Try it: acme floods with five jobs, bolt has one. With `cap=2`, three claims reach
# bolt on the second one instead of after acme's flood.

# %%
def demo():
    conn = exercise_db(fresh_dir("ex13"))
    for n in range(5):
        add_job(conn, f"acme:{n}", queue="acme")
    add_job(conn, "bolt:0", queue="bolt")
    return [claim_capped(conn, f"w{i}", 100.0, 30.0, 2)["queue"] for i in range(3)]

# %% [markdown]
# ## Check your work
#
# Checks marked *severe* catch a mistake that loses or duplicates an effect, lets two
# holders run, shows one owner's data to another or never runs a retried job again:
# failing one caps the exercise's score at half. Here:
# `cap_skips_a_busy_account`, `the_cap_holds_when_two_processes_claim`,
# `serial_runs_one_at_a_time_in_order`, `a_waiting_head_blocks_its_queue`,
# `lease_lasts_the_lease_s_given`, and hidden ones the grader runs.

# %%
from labkit.grading import check

check("ex13")
