# %% [markdown]
# # Exercise 5: survive a crash after the effect
#
# The hardest moment in a job's life: the payment API has charged the customer, and
# the worker dies before it records that. The job comes back (that is the point of a
# lease) and runs again. Unless something stops it, the customer pays twice.
#
# Two cures, one per kind of effect:
#
# - **a remote effect** (the payment API): send the job's key as `Idempotency-Key`; the
#   API remembers it and answers a repeat with the first reply, charging nothing;
# - **a local effect** (our own ledger): do the check, the entry and the "done" mark in
#   **one transaction**, so a crash leaves all of it or none of it.
#
# The check crashes a worker at every point of the job's life (and loses the API's
# reply once), with a fixed seed, restarts, and counts the effects in the world: its
# row of the crash table must read `ok` everywhere.
#
# In `charge_handler`, `job.payload` is `{"customer": ..., "amount": ...}`, `job.key`
# is the job's stable key, and `ctx.world.payments.charge(customer, amount, *, key=None,
# idempotency_key=None)` is the payment API (`key` tags the effect for the judge).

# %%
from labkit.explore import Scenario, run_scenario
from labkit.faults import FaultPlan


# %%
def choose_ack() -> str:
    """When the worker acknowledges the job: ``"late"`` (after the handler returns) or
    ``"first"`` (before it starts). Return the one under which no charge is ever lost."""
    ### BEGIN SOLUTION
    return "late"
    ### END SOLUTION


# %%
def charge_handler(job, ctx):
    """Charge ``job.payload["amount"]`` to ``job.payload["customer"]``, exactly once.

    Call ``ctx.world.payments.charge(customer, amount, key=job.key, idempotency_key=...)``
    so that however many times this job runs (after a crash, after a lost reply) the
    customer is charged once. Return the API's reply.
    """
    ### BEGIN SOLUTION
    customer, amount = job.payload["customer"], job.payload["amount"]
    return ctx.world.payments.charge(customer, amount, key=job.key, idempotency_key=job.key)
    ### END SOLUTION


# %%
def post_handler(job, ctx):
    """Post one ledger entry of ``job.payload["amount"]`` for ``job.payload["customer"]``.

    The ledger is local: inside ``with ctx.world.ledger.transaction() as tx:`` use
    ``tx.status(job.key)`` (``"done"`` once posted), ``tx.post(customer, amount,
    key=job.key)`` and ``tx.mark(job.key, "done")``; they commit together or not at all.
    The same job may be delivered twice at the same moment: read the mark inside that
    transaction too.
    Return the reply of ``tx.post`` (or ``{"skipped": "already posted"}``).
    """
    ### BEGIN SOLUTION
    customer, amount = job.payload["customer"], job.payload["amount"]
    with ctx.world.ledger.transaction() as tx:
        if tx.status(job.key) == "done":
            return {"skipped": "already posted"}
        reply = tx.post(customer, amount, key=job.key)
        tx.mark(job.key, "done")
    return reply
    ### END SOLUTION


# %% [markdown]
# Try one cell of the crash table yourself: crash after the effect, restart, judge.
# A fixed seed, so the same run every time; `replay` is the one-line recipe.

# %%
def try_crash(point: str):
    scenario = Scenario("mine", {"charge": charge_handler}, ack=choose_ack(), service="payments")
    row = run_scenario(scenario, FaultPlan(seed=5).at(point, "crash"), point=point)
    print(f"{point}: {row.outcome} ({row.effects} charge(s)); replay: {row.replay}")

# %% [markdown]
# ## Check your work
#
# Checks marked *severe* catch a mistake that loses or duplicates an effect, lets two
# holders run, shows one owner's data to another or never runs a retried job again:
# failing one caps the exercise's score at half. Here:
# `charge_survives_crash_before_effect`, `charge_survives_crash_after_effect`,
# `charge_survives_crash_after_commit`, `charge_survives_lost_response`,
# `post_survives_every_crash`, `post_survives_two_deliveries_at_once`,
# `every_invoice_is_charged_once`, `every_entry_is_posted_once`,
# `a_failed_charge_is_retried`, `a_failed_ledger_write_is_retried`,
# `charge_is_the_same_after_a_restart`, `post_is_the_same_after_a_restart`, and hidden
# ones the grader runs. The grader draws its invoices from a seed of its own and calls
# your handlers again in new processes, as a restarted worker would.

# %%
from labkit.grading import check

check("ex05")
