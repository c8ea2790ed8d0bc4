# %% [markdown]
# # Exercise 14: a multi-step job that resumes where it stopped
#
# One order, three effects in three systems: **reserve** one unit of stock in our own
# ledger, **charge** the customer at the payment API, **e-mail** the customer. No
# transaction spans them, and the worker can die between any two. Run from the top
# again and the customer may pay twice. The cure is a **checkpoint per step**: a row in
# `job_steps` written right after the step's effect, so a re-run skips what is done and
# only the step in flight at the crash runs again. That step must be safe to repeat:
# each effect carries its own **idempotency key**, built from the order and the step,
# never from a `uuid4()` or the clock.
#
# Two more rules make it a saga. When the charge is **declined for good**
# (`PermanentError`), nothing can finish the order: record that, **compensate** the
# step already done (put the stock back with a `+1` ledger entry) and never send the
# e-mail. A key the payment API says was used for another request
# (`IdempotencyKeyReused`) is no decline: the customer may have paid under it. And a job
# keeps the **policy version** it started under: version 1 e-mails after the charge;
# version 2 (deployed while jobs were in flight) also sends a receipt. A job resumed
# after the deploy still follows the steps of its first run.
#
# The tables (`labkit.grading.exercises.labdb.steps_db`, in `labdb.sql`):
#
# | table | columns |
# |---|---|
# | `step_jobs` | `order_id` (PRIMARY KEY), `policy_version`, `state` (`running`, `done`, `failed`) |
# | `job_steps` | `order_id`, `step`, `result` (text or NULL); PRIMARY KEY (`order_id`, `step`) |
#
# The connection is in autocommit mode: one statement commits by itself. The world
# (`labkit.world.World`) is the outside: `world.ledger`, `world.payments`, `world.mail`.
# The check kills your code for real right before and after each effect and after each
# write it sends, runs it again, and counts the effects in the world's own file.

# %%
import json

from labkit.errors import IdempotencyConflict, PermanentError
from labkit.grading.exercises.labdb import rows_of, steps_db
from labkit.notebook.scratch import fresh_dir
from labkit.world import World

#: The steps of each policy version, in order; "release" is the compensation.
POLICIES = {1: ("reserve", "charge", "email"), 2: ("reserve", "charge", "receipt", "email")}


# %%
def do_step(world, order, step: str) -> dict:
    """Do one step's effect for ``order``, safe to repeat; return the effect's reply.

    ``order`` is ``{"id", "customer", "email", "sku", "amount"}``. Every step's key is
    built from the order and the step (the same on every run of this order, different
    for every other order and step), never from ``uuid4()``, the time or ``hash()``.

    - ``"reserve"``: in ONE ``with world.ledger.transaction() as tx:``, unless
      ``tx.status(key) == "done"``, ``tx.post(order["sku"], -1, key=key)`` and
      ``tx.mark(key, "done")``; when it was done already, return ``{"skipped": key}``.
    - ``"release"`` (the compensation): the same with ``+1``, under its own key.
    - ``"charge"``: ``world.payments.charge(order["customer"], order["amount"],
      idempotency_key=key)``.
    - ``"receipt"``: ``world.mail.send(order["email"], f"Receipt for order {id}",
      idempotency_key=key)``; ``"email"``: ``world.mail.send(order["email"],
      f"Order {id} is on its way", idempotency_key=key)``.
    """
    ### BEGIN SOLUTION
    key = f"order:{order['id']}:{step}:v1"
    if step in ("reserve", "release"):
        with world.ledger.transaction() as tx:
            if tx.status(key) == "done":
                return {"skipped": key}
            reply = tx.post(order["sku"], -1 if step == "reserve" else 1, key=key)
            tx.mark(key, "done")
        return reply
    if step == "charge":
        return world.payments.charge(order["customer"], order["amount"], idempotency_key=key)
    subject = {"receipt": "Receipt for order {}", "email": "Order {} is on its way"}[step]
    return world.mail.send(order["email"], subject.format(order["id"]), idempotency_key=key)
    ### END SOLUTION


# %%
def run_order(conn, world, order, *, policy_version: int) -> str:
    """Run (or resume) the job of ``order`` to its end; return ``"done"`` or ``"failed"``.

    - First run: insert the job into ``step_jobs`` with ``policy_version`` (``INSERT
      ... ON CONFLICT (order_id) DO NOTHING``). From then on, and on every resume, read
      the job's row and follow ``POLICIES[<the version stored there>]``: the
      ``policy_version`` of a later call does not change a job already started.
    - Skip every step with a row in ``job_steps`` for this order. For each other step, in
      order: ``do_step(world, order, step)`` FIRST, then its checkpoint (one INSERT into
      ``job_steps``, ``result`` = the reply as JSON). A crash between the two only runs
      that step again, and its key makes the repeat harmless.
    - After the last step, set ``state = 'done'``.
    - When the charge raises ``PermanentError`` (declined for good): in ONE transaction
      (``BEGIN IMMEDIATE`` ... ``COMMIT``), a checkpoint ``('charge', 'declined')`` and
      ``state = 'failed'``; then release the stock (``do_step(..., "release")``) and
      checkpoint ``release``; no later step runs. A resumed failed job only finishes the
      release. Any other error propagates (the job is retried later), and so does
      ``IdempotencyKeyReused`` (an ``IdempotencyConflict``): the key already charged
      another request, so the customer may have paid; it is a bug to look at, not a
      decline.
    """
    ### BEGIN SOLUTION
    job = {"id": order["id"], "version": policy_version}
    conn.execute(
        "INSERT INTO step_jobs (order_id, policy_version) VALUES (:id, :version)"
        " ON CONFLICT (order_id) DO NOTHING",
        job,
    )
    version, state = conn.execute(
        "SELECT policy_version, state FROM step_jobs WHERE order_id = :id", job
    ).fetchone()
    done = {r[0] for r in conn.execute("SELECT step FROM job_steps WHERE order_id = :id", job)}

    def checkpoint(step, result):
        conn.execute(
            "INSERT INTO job_steps (order_id, step, result) VALUES (:id, :step, :result)",
            {"id": order["id"], "step": step, "result": result},
        )

    if state == "running":
        for step in POLICIES[version]:
            if step in done:
                continue
            try:
                reply = do_step(world, order, step)
            except PermanentError as exc:
                if step != "charge" or isinstance(exc, IdempotencyConflict):
                    raise
                conn.execute("BEGIN IMMEDIATE")
                try:
                    checkpoint("charge", "declined")
                    conn.execute("UPDATE step_jobs SET state = 'failed' WHERE order_id = :id", job)
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
                state = "failed"
                break
            checkpoint(step, json.dumps(reply))
        else:
            conn.execute("UPDATE step_jobs SET state = 'done' WHERE order_id = :id", job)
            return "done"
    if state == "failed":
        if "release" not in done:
            checkpoint("release", json.dumps(do_step(world, order, "release")))
        return "failed"
    return "done"
    ### END SOLUTION


# %% [markdown]
# Try it: one order that goes through, one whose card is declined (the payment API is
# told to reject the next call), and the first order run again, as a redelivery would.
# The world's effects: two reservations, one release, one charge, one e-mail.

# %%
def demo():
    folder = fresh_dir("ex14")
    conn, world = steps_db(folder / "steps.db"), World(folder / "world.db")
    ana = {"id": 1, "customer": "ana", "email": "ana@example.com", "sku": "mug", "amount": 4200}
    bia = {"id": 2, "customer": "bia", "email": "bia@example.com", "sku": "mug", "amount": 1500}
    ran = [run_order(conn, world, ana, policy_version=1)]
    world.payments.script("reject")
    ran += [run_order(conn, world, bia, policy_version=1)]
    ran += [run_order(conn, world, ana, policy_version=2)]  # a redelivery after the deploy
    effects = [(e.service, e.key) for e in world.effects()]
    return ran, effects, rows_of(conn, "all_job_steps")

# %% [markdown]
# ## Check your work
#
# Checks marked *severe* catch a mistake that loses or duplicates an effect, lets two
# holders run, shows one owner's data to another or never runs a retried job again:
# failing one caps the exercise's score at half. Here:
# `every_effect_once_after_a_kill_anywhere`, `each_effect_has_a_key_from_the_order`,
# `a_declined_charge_releases_the_stock`, `no_email_after_a_declined_charge`,
# `a_kill_during_compensation_releases_once`,
# `a_resumed_job_keeps_its_first_policy_version`, and hidden ones the grader runs. The
# grader draws its orders from a seed of its own.

# %%
from labkit.grading import check

check("ex14")
