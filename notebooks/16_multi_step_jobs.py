# %% [markdown]
# # 16 · Multi-step jobs
#
# *A job of three effects that crashes in the middle resumes after its last finished
# step instead of starting again; a step that fails for good undoes the steps before it;
# and a job resumed after a deploy finishes under the policy it started with.*
#
# > **Resumo.** Um pedido, três efeitos: reservar estoque, cobrar e mandar e-mail. Você
# > vai ver o job ingênuo que recomeça do zero e cobra duas vezes; o checkpoint por
# > etapa, que retoma o job de onde parou; o crash entre efeito e checkpoint, que repete
# > a etapa (daí uma chave de idempotência por etapa); a compensação quando a cobrança é
# > recusada de vez; e qual versão da política vale para um job retomado após um deploy.
#
# Run time: about 2 seconds.
#
# The async-jobs lesson says it in one line: a task that has already done part of its
# effects needs compensation or checkpoints, instead of restarting the whole flow. And
# it asks the question most designs skip: if the job depends on a policy, does a resumed
# job use the original version or the new one? Changing silently can give an
# inconsistent result. This lesson takes an order job of three effects and shows:
#
# 1. the naive job: crash between steps, re-run from the top, **charged twice**;
# 2. a checkpoint per step (`labkit.patterns.steps`): resume after the last finished step;
# 3. a crash between an effect and its checkpoint runs that step again; each step's
#    idempotency key makes the repeat harmless;
# 4. compensation: the charge is declined for good, the stock reservation is released;
# 5. the policy version: a job started under v1 finishes under v1 after v2 is deployed.

# %% [markdown]
# ## Setup
#
# A `FakeClock`, a seed for the fault plans, a fresh folder. The outside world
# (`labkit.world.World`) is the judge: its ledger holds the stock, its payment provider
# the charges, its mail provider the e-mails. The job database holds labkit's job table
# and, beside it, the checkpoints (`steps.install` adds `step_jobs` and `job_steps`).

# %%
import random

from labkit.clock import FakeClock, isoformat
from labkit.errors import IdempotencyConflict, PermanentError, SimulatedCrash
from labkit.faults import FaultPlan
from labkit.patterns import steps
from labkit.tables import jobs_table, show
from labkit.notebook.scratch import fresh_dir
from labkit.store import JobStore
from labkit.worker import Worker
from labkit.world import World

SEED = 16
clock = FakeClock()
folder = fresh_dir("16")
world = World(folder / "world.db", clock=clock)
store = JobStore(folder / "jobs.db", clock=clock, rng=random.Random(SEED))
jobs = steps.connect(folder / "jobs.db")  # the same file as the job table
steps.install(jobs)
print(f"seed={SEED}  clock={clock}  folder={folder}")

# %% [markdown]
# The three effects of order *n*, each with the key it is recorded under in the world.
# `keyed=True` also makes each one idempotent at its destination: the payment and mail
# providers honour `idempotency_key=` (lesson 05), and the stock reservation, a write to
# our own ledger, is guarded by a mark under its key in the same transaction (lesson 06).
# `effects(n)` reads the truth back from the world.

# %% tags=["no-output"]
SKU = "sku-7"


def post_once(account, amount, key):
    """A ledger entry and the mark that says it was written, in one transaction."""
    with world.ledger.transaction() as tx:
        entry = tx.status(key)
        if entry is None:
            entry = tx.post(account, amount, key=key)["entry_id"]
            tx.mark(key, entry)
    return {"entry_id": entry}


def reserve(n, keyed):
    key = f"order:{n}:reserve"
    if keyed:
        return post_once(f"stock:{SKU}", -1, key)
    return world.ledger.post(f"stock:{SKU}", -1, key=key)


def release(n):
    return post_once(f"stock:{SKU}", +1, f"order:{n}:release")


def charge(n, keyed, amount=4200):
    key = f"order:{n}:charge"
    return world.payments.charge(f"cus_{n}", amount, key=key,
                                 idempotency_key=key if keyed else None)


def email(n, keyed):
    key = f"order:{n}:email"
    return world.mail.send(f"customer{n}@example.com", f"order {n} confirmed", key=key,
                           idempotency_key=key if keyed else None)


def effects(n):
    """How many reserves, charges and e-mails the world did for order n."""
    stock = [e.payload["amount"] for e in world.ledger.find(f"order:{n}:reserve")]
    return {"reserves": stock.count(-1),
            "releases": len(world.ledger.find(f"order:{n}:release")),
            "charges": world.count(f"order:{n}:charge", "payments"),
            "e-mails": world.count(f"order:{n}:email", "mail")}

# %% [markdown]
# ## 1. The naive job: one block, re-run from the top
#
# The job everyone writes first: reserve, charge, e-mail, in order, no memory of what it
# did. A fault plan crashes the process after the charge, before the e-mail (the point
# `after_charge`). The supervisor does the right thing for a job that did not finish:
# it runs it again.

# %%
def naive_order(n, faults=None):
    reserve(n, keyed=False)
    charge(n, keyed=False)
    if faults is not None:
        faults.hit("after_charge", key=f"order:{n}", clock=clock)
    email(n, keyed=False)


plan = FaultPlan(seed=SEED).at("after_charge", "crash", nth=1)
print(f"replay: {plan}")
try:
    naive_order(1, plan)
except SimulatedCrash as crash:
    print(f"the job died: {crash}")
assert plan.fired_at("after_charge", "crash")
naive_order(1)  # the re-run, from the top
show([{"order": 1, **effects(1)}])
assert effects(1) == {"reserves": 2, "releases": 0, "charges": 2, "e-mails": 1}

# %% [markdown]
# The customer's card is charged twice and two units of stock are held for one order.
# The re-run had no way to know that the first two steps were done: that knowledge died
# with the process.
#
# ## 2. A checkpoint per step
#
# `steps.StepRun(conn, job_key, clock)` is one run of a job. `run.step(name, fn)` looks
# for the step's checkpoint first: if it is there, it returns the stored result and does
# not call `fn`; if not, it calls `fn()` and then writes the checkpoint (the step, its
# result as JSON, the time) in its own transaction. The effects below still carry **no**
# idempotency key, so only the checkpoints protect them.
#
# The job's steps come from its policy: the names of its steps in order and the price it
# charges, per version. v1 is "reserve, charge 42.00, then e-mail".

# %% tags=["no-output"]
POLICIES = {"v1": {"steps": ("reserve", "charge", "email"), "amount": 4200}}


def order_job(n, faults=None, keyed=False, deployed="v1"):
    run = steps.StepRun(jobs, f"order:{n}", clock, faults=faults, policy_version=deployed)
    policy = POLICIES[run.policy_version]
    actions = {"reserve": lambda: reserve(n, keyed),
               "charge": lambda: charge(n, keyed, policy["amount"]),
               "email": lambda: email(n, keyed)}
    for name in policy["steps"]:
        run.step(name, actions[name],
                 undo=(lambda _result: release(n)) if name == "reserve" else None)
    return run


def checkpoints(n):
    """The job_steps rows of order n, times as UTC."""
    return [{**r, "finished_at": isoformat(r["finished_at"]),
             "compensated_at": r["compensated_at"] and isoformat(r["compensated_at"])}
            for r in steps.rows(jobs, f"order:{n}")]


STEP_COLUMNS = ("job_key", "seq", "step", "state", "result", "policy_version", "finished_at")

# %% [markdown]
# `StepRun` fires a fault point after each checkpoint commits, `after_step.<step>`: the
# boundary between two steps. Order 2 crashes at `after_step.charge`, the same place
# the naive job died. Here is what the job database remembers:

# %%
clock.advance(60)
plan = FaultPlan(seed=SEED).at(steps.after_step("charge"), "crash", nth=1)
print(f"replay: {plan}")
try:
    order_job(2, plan)
except SimulatedCrash as crash:
    print(f"the job died: {crash}")
assert plan.fired_at("after_step.charge", "crash")
show(checkpoints(2), columns=STEP_COLUMNS)

# %% [markdown]
# The re-run is the same call, from the top. `reserve` and `charge` return their stored
# results without touching the world; only `email` runs.

# %%
clock.advance(60)
run = order_job(2)
print("steps done:", run.done())
show([{"order": 2, **effects(2)}])
assert effects(2) == {"reserves": 1, "releases": 0, "charges": 1, "e-mails": 1}

# %% [markdown]
# The async-jobs lesson asks for a test that simulates a failure after each relevant
# boundary and judges the recovered state. Here it is for the three step boundaries,
# one order each: crash, resume, count in the world.

# %%
rows = []
for n, name in zip((10, 11, 12), POLICIES["v1"]["steps"], strict=True):
    point = steps.after_step(name)
    plan = FaultPlan(seed=SEED).at(point, "crash", nth=1)
    try:
        order_job(n, plan)
    except SimulatedCrash:
        pass
    assert plan.fired_at(point, "crash"), point
    order_job(n, plan)  # resume
    rows.append({"crash point": point, **effects(n)})
show(rows)
assert all((r["reserves"], r["charges"], r["e-mails"]) == (1, 1, 1) for r in rows)

# %% [markdown]
# ## 3. A crash between an effect and its checkpoint
#
# A checkpoint is a second write, after the effect, to another system. A crash between
# the two (the point `after_step_effect.<step>`) leaves the effect done and no
# checkpoint, and the resumed job runs that step again. Order 3, still without keys,
# dies right after the charge, before its checkpoint:

# %%
clock.advance(60)
plan = FaultPlan(seed=SEED).at(steps.after_effect("charge"), "crash", nth=1)
try:
    order_job(3, plan)
except SimulatedCrash as crash:
    print(f"the job died: {crash}")
assert plan.fired_at("after_step_effect.charge", "crash")
print("checkpoints before the resume:", [r["step"] for r in checkpoints(3)])
order_job(3)
show([{"order": 3, **effects(3)}])
assert effects(3)["charges"] == 2

# %% [markdown]
# Charged twice again, through the one window checkpoints cannot close. Checkpoints make
# a job at-least-once *per step*, never exactly-once, so each step still needs its own
# idempotency key, built from the job's key and the step's name (`order:4:charge`): the
# key names the step of this order, so a repeat of it is recognised at the destination.
# Order 4 dies at the same point, with `keyed=True`:

# %%
clock.advance(60)
plan = FaultPlan(seed=SEED).at(steps.after_effect("charge"), "crash", nth=1)
try:
    order_job(4, plan, keyed=True)
except SimulatedCrash as crash:
    print(f"the job died: {crash}")
assert plan.fired_at("after_step_effect.charge", "crash")
order_job(4, keyed=True)
show([{"service": c.service, "key": c.key, "outcome": c.outcome}
      for c in world.calls("payments") if c.key == "order:4:charge"])
show([{"order": 4, **effects(4)}])
assert effects(4) == {"reserves": 1, "releases": 0, "charges": 1, "e-mails": 1}

# %% [markdown]
# The charge ran twice and the provider charged once: the second call was `replayed`
# with the first reply, and that reply is the result the checkpoint now holds. The same
# crash after each step's effect, with every step keyed (the reservation by its ledger
# mark):

# %%
rows = []
for n, name in zip((20, 21, 22), POLICIES["v1"]["steps"], strict=True):
    point = steps.after_effect(name)
    plan = FaultPlan(seed=SEED).at(point, "crash", nth=1)
    try:
        order_job(n, plan, keyed=True)
    except SimulatedCrash:
        pass
    assert plan.fired_at(point, "crash"), point
    order_job(n, plan, keyed=True)
    rows.append({"crash point": point, "steps run": plan.hit_count(point), **effects(n)})
show(rows)
assert all((r["reserves"], r["charges"], r["e-mails"]) == (1, 1, 1) for r in rows)
assert all(r["steps run"] == 2 for r in rows)

# %% [markdown]
# "steps run" counts how often the point was reached: each crashed step ran twice, and
# its effect happened once.
#
# ## 4. Compensation: the charge is declined for good
#
# Some failures do not go away with a retry: the provider declines the card
# (`PermanentError`, a 400). The stock reserved in step 1 must not stay held forever.
# `run.compensate()` calls the undo action of each finished step, last first, and
# checkpoints each one `compensated`; the reservation's undo is a `+1` ledger entry
# under its own key. A step with no undo is left alone (an e-mail cannot be unsent; here
# none was sent, since the e-mail comes after the charge).
#
# This time the job runs as labkit jobs do, enqueued in the job table and run by a
# `Worker` (lessons 04 to 07). The handler compensates, then lets the error go, so the
# store marks the job dead with its reason. The run that failed is gone with its
# exception, so the handler opens a new `StepRun` on the same key to compensate, and
# hands it the undo actions by step name.
#
# One `PermanentError` is no decline: `IdempotencyKeyReused` (an `IdempotencyConflict`),
# the payment API saying this key was first used with other parameters. The charge under
# that key went through, so the customer may have paid: compensating would release the
# stock of a paid order. The handler lets it go as it is, for a person to look at.

# %%
def place_order(job, ctx):
    n = job.payload["order"]
    try:
        return order_job(n, keyed=True).done()
    except PermanentError as exc:
        if isinstance(exc, IdempotencyConflict):
            raise  # the key already paid for another request: not a decline
        run = steps.StepRun(jobs, job.key, ctx.clock)
        undone = run.compensate({"reserve": lambda _result: release(n)})
        raise PermanentError(f"charge declined for good ({exc}); compensated: {undone}") from exc


world.payments.script("reject")
job, _ = store.enqueue("order.place", {"order": 5}, key="order:5")
Worker(store, {"order.place": place_order}, clock=clock).run_until_idle()
show(jobs_table(store, columns=("id", "kind", "key", "state", "attempt")))
print("dead_reason:", store.get(job.id).dead_reason)
assert store.get(job.id).state == "dead"

# %% [markdown]
# The job is dead, and its reason says what was undone. The database and the world
# agree:

# %%
show(checkpoints(5), columns=(*STEP_COLUMNS, "compensated_at"))
show([{"key": e.key, "account": e.payload["account"], "amount": e.payload["amount"]}
      for e in world.effects(service="ledger") if e.key.startswith("order:5:")])
show([{"order": 5, **effects(5)}])
assert [r["state"] for r in checkpoints(5)] == ["compensated"]
assert effects(5) == {"reserves": 1, "releases": 1, "charges": 0, "e-mails": 0}

# %% [markdown]
# The stock is back (`-1` then `+1`), no charge, no e-mail. Compensation is not a
# rollback: the reservation did happen and anyone who read the stock in between saw it
# held. That is the saga pattern's trade, and why a compensating step is a new effect
# with its own key (`order:5:release`), checkpointed like any other. Order 8 is declined
# too, and its compensation dies between the release and its checkpoint (the point
# `after_undo_effect.reserve`); the compensation run again releases once.

# %%
clock.advance(60)
world.payments.script("reject")
undo = {"reserve": lambda _result: release(8)}
plan = FaultPlan(seed=SEED).at(steps.after_undo("reserve"), "crash", nth=1)
try:
    order_job(8, keyed=True)
except PermanentError as exc:
    print(f"declined: {exc}")
    try:
        steps.StepRun(jobs, "order:8", clock, faults=plan).compensate(undo)
    except SimulatedCrash as crash:
        print(f"the compensation died: {crash}")
assert plan.fired_at("after_undo_effect.reserve", "crash")
print("checkpoint after the crash:", [(r["step"], r["state"]) for r in checkpoints(8)])
print("compensated on the second run:", steps.StepRun(jobs, "order:8", clock).compensate(undo))
show([{"order": 8, **effects(8)}])
assert effects(8) == {"reserves": 1, "releases": 1, "charges": 0, "e-mails": 0}
assert [r["state"] for r in checkpoints(8)] == ["compensated"]

# %% [markdown]
# ## 5. Which policy version a resumed job runs
#
# A deploy changes the policy. v2 adds a shipping fee (the charge becomes 45.00) and
# sends the e-mail before the charge ("order received, 45.00 will be charged"): reserve,
# e-mail, charge. Order 6 was placed at 42.00 under v1 and died after its reservation,
# before the deploy.

# %%
clock.advance(60)
plan = FaultPlan(seed=SEED).at(steps.after_step("reserve"), "crash", nth=1)
try:
    order_job(6, plan, keyed=True, deployed="v1")
except SimulatedCrash as crash:
    print(f"the job died: {crash}")
assert plan.fired_at("after_step.reserve", "crash")
print("order:6 started with", steps.started_with(jobs, "order:6"))

# %% [markdown]
# Now v2 is deployed, and the worker that resumes order 6 runs the new code. `StepRun`
# recorded the policy version the first time the job ran (`step_jobs`) and reads it back:
# `run.policy_version` is the job's own, `run.deployed` the one running now. Order 7 is a
# new order, placed after the deploy.

# %%
clock.advance(3600)
POLICIES["v2"] = {"steps": ("reserve", "email", "charge"), "amount": 4500}
resumed = order_job(6, keyed=True, deployed="v2")
fresh = order_job(7, keyed=True, deployed="v2")
for run in (resumed, fresh):
    print(f"{run.job_key}: deployed {run.deployed}, runs {run.policy_version}: {run.done()}")
show(checkpoints(6) + checkpoints(7), columns=STEP_COLUMNS)
assert resumed.policy_version == "v1" and resumed.done() == ["reserve", "charge", "email"]
assert fresh.policy_version == "v2" and fresh.done() == ["reserve", "email", "charge"]
assert [e.payload["amount"] for e in world.payments.find("order:6:charge")] == [4200]
assert [e.payload["amount"] for e in world.payments.find("order:7:charge")] == [4500]

# %% [markdown]
# Order 6 finished v1's remaining steps (charge 42.00, then e-mail) under the version
# it started with, as every row of `job_steps` says; order 7 runs v2 and pays 45.00.
# Had order 6 switched to v2 silently, a customer who ordered at 42.00 would have been
# charged 45.00, by a job whose first step ran under other rules: the inconsistent
# result the async-jobs lesson warns about. Switching can be the right call (a price
# that was a bug), but then it is a decision, made per job and recorded, not a side
# effect of a deploy. The rule that follows: keep the code of a policy version deployed
# until no job started under it is still running. Temporal asks the same of workflow
# code: a change goes behind a version marker (`workflow.patched()` in its Python SDK),
# so workflows started before the deploy keep the old path.
#
# In production this is a workflow engine's job: Temporal records each activity's
# result in the workflow's history and does not run finished activities again on
# recovery, but retries an activity whose completion was never recorded, so it asks for
# idempotent activities, the window of section 3. AWS Step Functions keeps each state's
# output and builds compensation from `Catch` transitions.
#
# ## What you should see
#
# | step | the job database | the world |
# |---|---|---|
# | naive job, crash after the charge, re-run | nothing: it keeps no record | order 1: 2 reserves, 2 charges, 1 e-mail |
# | checkpoints, crash at `after_step.charge` | `reserve` and `charge` checkpointed | the resume runs only the e-mail: 1, 1, 1 |
# | crash at each `after_step.<step>`, resume | every step `done` once | 1 reserve, 1 charge, 1 e-mail each |
# | crash at `after_step_effect.charge`, no keys | no checkpoint for `charge` | order 3 charged **twice** |
# | the same crash, each step keyed | `charge` checkpointed with the first reply | the provider `replayed` it: 1 charge |
# | crash at each `after_step_effect.<step>`, keyed | each step ran twice | 1, 1, 1 each |
# | the charge declined for good | `reserve` `compensated`; the job `dead` with its reason | a `-1` and a `+1` ledger entry, no charge, no e-mail |
# | a crash while compensating, then again | `reserve` `compensated` on the second run | order 8: one release |
# | order 6 started under v1, resumed after v2 | rows of order 6 all `v1`: reserve, charge, email | order 6 charged 42.00; order 7 runs v2: reserve, email, charge 45.00 |
#
# **What to take away**
#
# - A job re-run from the top repeats every effect it had already done; a checkpoint per
#   step lets it resume after the last finished step.
# - A checkpoint is a second write after the effect: a crash between the two runs the
#   step again. Checkpoints give at-least-once per step, never exactly-once.
# - So each step still needs its own idempotency key, built from the job's key and the
#   step's name (`order:4:charge`).
# - A step that fails for good calls for compensation: the undo actions of the finished
#   steps, last first, each a new effect with its own key. It is not a rollback: others
#   may have seen the state in between.
# - A resumed job finishes under the policy version it started with; keep that version's
#   code deployed until no job started under it is still running.
#
# ## Glossary and the way back
#
# The terms of this lesson, and of every other, in English and Portuguese:
# [Glossary / Glossário](glossary.md).
#
# This is the last lesson. Next come the exercises, in the `exercises/` folder beside
# this one, starting with the keys of lesson 03:
# [Next: exercise 1 · keys](../exercises/ex01_keys.ipynb).
