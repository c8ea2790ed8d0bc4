# %% [markdown]
# # 06 · Crash between effect and ack
#
# *A worker can die after the outside world did the work and before anyone recorded it;
# this lesson finds every such moment, shows which designs charge twice and which lose
# the charge, and proves three fixes with the outside world's own records.*
#
# > **Resumo.** O worker pode morrer depois que o sistema externo já cobrou o cartão e
# > antes que alguém do nosso lado registre isso. Você vai ver a cobrança em dobro, a tabela
# > estratégia × ponto de crash (confirmada com `kill -9`), três correções (mesma transação,
# > Idempotency-Key, reconciliação), quando a reconciliação cobra duas vezes e os efeitos
# > idempotentes por natureza: upsert e "atribuir, não incrementar".
#
# Run time: about 5 seconds on an idle machine, more on a busy one (seven cells start and SIGKILL real worker processes).
#
# Lesson 04 ended with a question: the job table made sure order 2 was finished, once,
# by worker-2. But did the ERP receive it twice? The table cannot say. The async-jobs lesson names
# the hard part: the window between the **effect** (the ticket is created, the card is
# charged) and the **acknowledgement** (the queue learns the job is done).
#
# The Celery-in-production article says Celery is at-least-once by default. It is not.
# By default (`task_acks_late=False`) Celery acknowledges a task when a worker takes it,
# *before* running it: a worker killed mid-task has already acked, and the task is lost.
# That is the `ack_first` row of the table below (at most once, when the worker dies
# mid-task; lesson 14 shows that on Redis even the default runs a task twice when its
# countdown outlasts the visibility timeout). Only with
# `task_acks_late=True` and `task_reject_on_worker_lost=True` does a killed worker's task
# come back (on Redis, only after the visibility timeout), and then the article's real
# point holds: a re-run means the effect may happen again, retries do not fix that, and
# idempotency does. Lesson 14 shows both settings on a real Celery.
#
# The job here is "charge invoice 42": 42.00 BRL to customer `cus_42` through a
# Stripe-like payments API (`labkit.world`), which keeps its own durable records, so
# after any crash we can ask the world what really happened. We will:
#
# 1. name the crash points along one job;
# 2. crash once, right after the charge, and count the charges in the world;
# 3. replay that run from its one-line recipe;
# 4. draw the attempts per worker on a timeline;
# 5. crash six strategies at every point: the strategy × crash-point table;
# 6. confirm a column of it with real `kill -9`;
# 7. to 9. prove the three fixes: one transaction, an Idempotency-Key, reconciliation;
# 10. see why acking late is not enough, and when reconciliation charges twice;
# 11. make the effect idempotent by nature: upsert, and set instead of increment;
# 12. try any cell yourself on the fault panel.

# %% [markdown]
# ## Setup
#
# A seed for every fault plan, a fresh folder, and a helper that names each invoice's
# charge by its intent (lesson 03), so every retry of invoice 42 carries the same key.

# %%
import random

import matplotlib.pyplot as plt

from labkit.clock import FakeClock, isoformat
from labkit.errors import SimulatedCrash
from labkit.faults import MATRIX_POINTS, FaultPlan
from labkit.keys import operation_key
from labkit.tables import jobs_table, show
from labkit.retry import RetryPolicy, exponential
from labkit.notebook.scratch import fresh_dir
from labkit.store import JobStore
from labkit.explore.strategies import STRATEGIES
from labkit.worker import Worker
from labkit.world import World

SEED = 6
folder = fresh_dir("06")


def charge_key(invoice):
    return operation_key("billing", invoice, "charge")


print(f"seed={SEED}  folder={folder}  key of invoice 42: {charge_key(42)}")

# %% [markdown]
# ## 1. The crash points along one job
#
# A worker that acknowledges late (after the work) goes through these boundaries. Late
# acking is a choice you make, not a default: Celery acks first unless you set
# `task_acks_late=True`; SQS, RabbitMQ with manual acks and Redis Streams leave the ack to
# your code. A crash can land at any of them, and each leaves a different mess:
#
# ```
#  job store                worker                             payments API (the world)
#  ─────────                ──────                             ────────────────────────
#  claim ───────────────▶  ① after_claim
#                          ② before_effect
#                             charge(...) ──────────────────▶ charges the card, writes it down
#                                         ◀──── reply ─────── ⑦ lost_response: the reply never
#                          ③ after_effect                        arrives (a timeout), yet the
#                             (the world did it; nobody           card was charged
#                              on our side wrote it down)
#                          ④ before_commit
#  complete (commit) ◀───  record the result
#                          ⑤ after_commit
#  ack ◀────────────────  ⑥ after_ack
# ```
#
# * ① ② nothing happened outside yet: a retry is harmless.
# * ③ ④ ⑦ the dangerous window: the world did it, our side does not know.
# * ⑤ ⑥ the result is committed. In labkit's SQLite store the commit *is* the ack; with
#   a broker (RabbitMQ `basic_ack`, Redis Streams `XACK`) it is a separate step, and a
#   crash between the two redelivers a job whose result is already recorded.
#
# `labkit.faults` knows these points by name; the worker fires ① to ⑥, the world fires ⑦.

# %%
print(" → ".join(MATRIX_POINTS))
assert MATRIX_POINTS == ("after_claim", "before_effect", "after_effect", "before_commit",
                         "after_commit", "after_ack", "lost_response")

# %% [markdown]
# ## 2. One crash at `after_effect`, acking late
#
# Three invoices wait in the job table. The payments API takes 2 seconds per call; the
# first call for invoice 43 fails with a 503 (a transient error, retried with backoff);
# and the worker dies right after charging invoice 42. All of that is one `FaultPlan`,
# seeded, whose text is the recipe to run it again.

# %%
INVOICES = {41: 1500, 42: 4200, 43: 990}  # invoice -> amount in cents

plan = (
    FaultPlan(seed=SEED)
    .at("before_call", "raise_transient", nth=1, key=charge_key(43))
    .at("before_call", "delay", delay=2)
    .at("after_effect", "crash", nth=1, key=charge_key(42))
)
print(f"seed={plan.seed}")
print(f"replay: {plan}")

# %% [markdown]
# `run_invoices` plays the deployment: it enqueues the three charges, then starts a
# worker running the `ack_late` strategy from `labkit.explore.strategies` (charge, then record
# and acknowledge). When a worker dies, a supervisor starts the next one with fresh
# connections, as systemd or Kubernetes would. Each worker drains the queue: it sleeps
# (on the fake clock) until retries are due and until a dead worker's lease runs out.
# The function returns the moments the workers died, which only the supervisor knows.

# %%
RETRY = RetryPolicy(backoff=exponential(base=10, cap=300))  # 10 s, 20 s, ... no jitter


def run_invoices(plan, where, strategy="ack_late"):
    """Enqueue the invoices in a fresh folder; run them under ``plan``, restarting after crashes."""
    where.mkdir()
    clock = FakeClock()
    with JobStore(where / "jobs.db", clock, retry=RETRY, rng=random.Random(plan.seed)) as store:
        for invoice, amount in INVOICES.items():
            store.enqueue("charge", {"customer": f"cus_{invoice}", "amount": amount},
                          key=charge_key(invoice))
    died = {}
    for name in ("w1", "w2", "w3"):
        store = JobStore(where / "jobs.db", clock, retry=RETRY, rng=random.Random(plan.seed))
        world = World(where / "world.db", clock, faults=plan)
        chosen = STRATEGIES[strategy]
        worker = Worker(store, chosen.handlers, name=name, lease_s=30, faults=plan,
                        world=world, ack=chosen.ack)
        try:
            worker.drain()
            break
        except SimulatedCrash as crash:
            last = worker.runs[-1]
            died[(last.job_id, last.attempt)] = clock.now()
            print(f"{isoformat(clock.now())}  {name} died: {crash}")
        finally:
            store.close()
            world.close()
    return clock, died


clock, died = run_invoices(plan, folder / "run")
assert plan.fired_at("after_effect", "crash") and plan.fired_at("before_call", "raise_transient")

# %% [markdown]
# The job table is satisfied: three jobs, all `succeeded`. Invoice 42 took two attempts
# (worker w1 died, w2 finished it), which looks like recovery working as designed.

# %%
store = JobStore(folder / "run" / "jobs.db", clock)
world = World(folder / "run" / "world.db", clock)
show(jobs_table(store, columns=("id", "key", "state", "attempt", "lease_owner", "result")))
assert [j.state for j in store.jobs()] == ["succeeded"] * 3

# %% [markdown]
# Now ask the payments API, whose records survived the crash. Customer `cus_42` was
# charged **twice**: `ch_2` by w1 just before it died, and `ch_4` by w2, which had no way
# to know. Our job table only remembers `ch_4`; `ch_2` is money taken that nobody on our
# side can account for.

# %%
show([{"charge": e.response["charge_id"], "key": e.key, "amount": e.payload["amount"],
       "customer": e.payload["customer"], "at": isoformat(e.at)}
      for e in world.effects("payments")])
counts = {invoice: world.count(charge_key(invoice), "payments") for invoice in INVOICES}
print("charges per invoice:", counts)
assert counts == {41: 1, 42: 2, 43: 1}

# %% [markdown]
# The world's call log tells the rest: invoice 43's first call got a 503 and did
# nothing (so its retry was safe), while both calls for invoice 42 went through.

# %%
show([{"call": c.id, "key": c.key, "outcome": c.outcome, "status": c.status,
       "at": isoformat(c.at)} for c in world.calls("payments")])
assert [c.outcome for c in world.calls("payments")] == ["ok", "ok", "failed_before", "ok", "ok"]

# %% [markdown]
# ## 3. Replay: the one-line recipe
#
# A run with faults is only useful if it can be run again. The printed line is the
# whole plan: `FaultPlan.parse` rebuilds it, and running it in another folder gives the
# same charges, the same attempts, at the same (fake) times.

# %%
line = str(plan)
again = FaultPlan.parse(line)
clock2, died2 = run_invoices(again, folder / "replay")
with JobStore(folder / "replay" / "jobs.db", clock2) as store2, \
        World(folder / "replay" / "world.db", clock2) as world2:
    same_charges = world2.effects("payments") == world.effects("payments")
    same_attempts = ([store2.attempts(j.id) for j in store2.jobs()]
                     == [store.attempts(j.id) for j in store.jobs()])
print(f"replayed: {line}")
print(f"same charges: {same_charges}, same attempts: {same_attempts}, same deaths: {died2 == died}")
assert again == plan and same_charges and same_attempts and died2 == died

# %% [markdown]
# ## 4. A timeline of attempts per worker
#
# `labkit.notebook.timelines` reads the attempts history (written by the store's triggers) and turns it
# into lanes, one per worker: a bar per attempt, a cross where a worker died, and the
# waits between two attempts of a job. First the pieces as a table, then the picture.
#
# * Invoice 42 (job 2): w1 charged it from 2 s to 4 s and died. Nobody could take the
#   job until w1's 30-second **lease** ran out, so it waited about 28 s; w2 charged again.
# * Invoice 43 (job 3): the 503 sent it to `retry_wait`; a 10 s **backoff** later, w2
#   ran it again.

# %%
from labkit.notebook.timelines import plot_timeline, store_timeline

tl = store_timeline(store, crashed_at=died)
show(tl.segments)
print()
show(tl.gaps)
lease_wait = next(g for g in tl.gaps if g.reason == "lease")
assert [(c.worker, c.job_id, c.at) for c in tl.crashes] == [("w1", 2, 4.0)]
assert lease_wait.job_id == 2 and lease_wait.end >= 2 + 30  # not before w1's lease ran out
assert [(g.job_id, g.reason, round(g.end - g.start)) for g in tl.gaps if g.reason == "backoff"] == [
    (3, "backoff", 10)]

# %%
plot_timeline(tl, title="ack_late: w1 dies after charging invoice 42; w2 charges it again")
plt.show()

# %% [markdown]
# ## 5. Every strategy × every crash point
#
# One crash proves one case. `labkit.explore.crash_matrix` runs the charge once per
# (strategy, point): it breaks the run at that point (a crash at ① to ⑥, a lost reply at
# ⑦), restarts workers until the job is finished, and judges the world:
#
# | verdict | the world shows |
# |---|---|
# | `ok` | exactly one charge |
# | `duplicate` | more than one charge |
# | `lost` | no charge, yet the job says `succeeded` |
# | `-` | the run never reached that point (no call, no reply to lose) |
#
# The six strategies (`labkit.explore.strategies`):
#
# | strategy | what it does |
# |---|---|
# | `ack_first` | acknowledge the job, then charge (lost if the worker dies mid-task; Celery's default) |
# | `ack_late` | charge, then acknowledge (at-least-once, no protection; Celery with `acks_late` and `reject_on_worker_lost`) |
# | `check_then_act` | look in our ledger, charge, write "done": separate transactions |
# | `same_transaction` | a local effect: ledger entry and "done" mark in one transaction |
# | `idempotency_key` | send the job key as `Idempotency-Key`; the API refuses to charge twice |
# | `reconcile` | write "started" first; on a retry, ask the API before charging again |
#
# Every run is in-process with a fake clock, so the whole table takes a few seconds.

# %%
from labkit.explore import crash_matrix, replay
from labkit.notebook.timelines import matrix_grid

matrix = crash_matrix(seed=SEED)
matrix_grid(matrix)

# %% [markdown]
# This table is the centre of the lab, so the lesson checks every cell. Read it by rows:
#
# * `ack_first` never charges twice, but a crash after the ack (⑤ ⑥, or ② which in this
#   mode comes after the ack) **loses** the charge: the job says succeeded, nobody paid.
# * `ack_late` never loses, but every crash in the window (③ ④ ⑦) **duplicates**.
# * `check_then_act` is no better: the check and the "done" mark are separate
#   transactions, so a crash between the charge and the mark repeats the charge. The
#   Celery-in-production article describes exactly this bug: the dedup record written
#   outside the effect's transaction.
# * The last three rows are `ok` everywhere.

# %%
EXPECTED = {
    "ack_first": ["ok", "lost", "ok", "ok", "lost", "lost", "ok"],
    "ack_late": ["ok", "ok", "duplicate", "duplicate", "ok", "ok", "duplicate"],
    "check_then_act": ["ok", "ok", "duplicate", "duplicate", "ok", "ok", "duplicate"],
    "same_transaction": ["ok"] * 6 + ["-"],
    "idempotency_key": ["ok"] * 7,
    "reconcile": ["ok"] * 7,
}
got = {s: [matrix.outcome(s, p) for p in MATRIX_POINTS] for s in EXPECTED}
print(matrix.counts())
assert got == EXPECTED, got

# %% [markdown]
# The first two rows are Celery's two modes. Read them as a Celery user: with the
# default, a worker killed before its task's effect has already acked it, so the task
# is **lost**; only the late-ack settings bring it back, at the price of a duplicate when
# the kill lands after the effect.

# %%
CELERY = {"ack_first": "task_acks_late=False (the default)",
          "ack_late": "task_acks_late=True + task_reject_on_worker_lost=True"}
show([{"Celery setting": setting, "strategy": name,
       "killed before the effect": matrix.outcome(name, "before_effect"),
       "killed after the effect": matrix.outcome(name, "after_effect")}
      for name, setting in CELERY.items()])
assert [matrix.outcome(n, "before_effect") for n in CELERY] == ["lost", "ok"]
assert [matrix.outcome(n, "after_effect") for n in CELERY] == ["ok", "duplicate"]

# %% [markdown]
# Each cell is a run with its own seed and replay line. Here are the three duplicates
# of `ack_late`, with how many attempts and restarts each needed:

# %%
dupes = [r for r in matrix.rows if r.strategy == "ack_late" and r.outcome == "duplicate"]
show(dupes, columns=("point", "outcome", "effects", "attempts", "restarts", "seed", "replay"))
assert [r.effects for r in dupes] == [2, 2, 2]

# %% [markdown]
# `labkit.explore.replay` takes such a line and runs that cell again: the new row equals
# the old one, field by field.

# %%
cell = next(r for r in dupes if r.point == "after_effect")
rerun = replay(cell.replay)
print(f"replay: {cell.replay}")
print(f"again : {rerun.outcome}, {rerun.effects} charges, fired {rerun.fired}")
assert rerun == cell

# %% [markdown]
# ## 6. Confirmed with real kills
#
# `SimulatedCrash` is an exception the lab raises; a real crash is a process that stops
# mid-instruction. With `real_kill=True` each cell runs its worker in a child process
# that sends itself SIGKILL at the point (no `finally`, no cleanup), then a new process
# takes over. Each cell then starts and kills real processes, and all 42 take about a
# minute, too long for a lesson meant to run in seconds. So here we confirm the column
# the lesson is about,
# `after_effect`, for every strategy, plus the `lost` cell of `ack_first` at
# `after_commit`. The lab's own test suite confirms every cell the same way, with
# `crash_matrix(real_kill=True)`.

# %%
real = crash_matrix(points=["after_effect"], seed=SEED, real_kill=True)
real_lost = crash_matrix(strategies=["ack_first"], points=["after_commit"], seed=SEED,
                         real_kill=True)
rows = real.rows + real_lost.rows
show(rows, columns=("strategy", "point", "outcome", "effects", "restarts", "fired", "replay"))
for row in rows:
    assert row.fired == (f"kill at {row.point} n=1",) and row.restarts == 1, row
    assert row.outcome == matrix.outcome(row.strategy, row.point), row
print("real kills agree with the in-process table:", len(rows), "cells")

# %% [markdown]
# ## 7. Fix 1: the effect and its record in one transaction
#
# When the effect is a write to **our own** database (a ledger entry, a balance), it can
# share a transaction with the record that says "done". Both commit, or neither does.
# The Celery-in-production article tells the story of a deploy that SIGKILLed a Celery
# worker mid-task: the transaction never committed, so the whole effect rolled back, and
# the redelivered task ran from scratch, correctly. (It was redelivered only because the
# task acked late. With Celery's default, acked before running, the rollback would have
# been right and the task simply lost.)
#
# `labkit.explore.run_scenario` runs one strategy under one plan; we keep its files to
# read them. The worker dies at `after_effect`, *inside* the open transaction.

# %%
from labkit.explore import run_scenario

K = charge_key(42)
(folder / "same_tx").mkdir()
row = run_scenario("same_transaction", FaultPlan(SEED).at("after_effect", "crash", nth=1),
                   workdir=folder / "same_tx")
print(f"seed={row.seed}  replay: {row.replay}")
print(f"verdict: {row.outcome}, attempts: {row.attempts}, fired: {row.fired}")

# %% [markdown]
# The ledger holds one entry for invoice 42, marked done, although two attempts ran the
# code that writes it: the first attempt's entry died with its transaction.

# %%
with World(folder / "same_tx" / "world.db", FakeClock()) as tx_world:
    entries = tx_world.ledger.find(K)
    show([{"entry": e.response["entry_id"], "key": e.key, **e.payload} for e in entries])
    print("ledger mark:", tx_world.ledger.status(K))
    assert len(entries) == 1 and tx_world.ledger.status(K) == "done"
assert (row.outcome, row.attempts) == ("ok", 2)

# %% [markdown]
# This fix needs the effect to live in our database. A card charge lives at the payment
# provider; no transaction of ours can include it. The next two fixes are for that case.
#
# ## 8. Fix 2: the destination honours an Idempotency-Key
#
# Stripe and many payment APIs accept an `Idempotency-Key` header: the first request with
# a key does the work and stores its reply; a repeat with the same key and the same
# parameters gets the stored reply and does nothing. The `idempotency_key` strategy
# sends the job's key. Same crash as in section 2:

# %%
(folder / "idem").mkdir()
row = run_scenario("idempotency_key", FaultPlan(SEED).at("after_effect", "crash", nth=1),
                   workdir=folder / "idem")
print(f"seed={row.seed}  replay: {row.replay}")
idem_world = World(folder / "idem" / "world.db", FakeClock())
show([{"call": c.id, "key": c.key, "outcome": c.outcome, "status": c.status}
      for c in idem_world.calls("payments")])
print("charges for invoice 42:", idem_world.count(K, "payments"))
assert [c.outcome for c in idem_world.calls("payments")] == ["ok", "replayed"]
assert idem_world.count(K, "payments") == 1 and row.outcome == "ok"

# %% [markdown]
# Two calls arrived, one charge was made: the second call was answered from the stored
# reply (`replayed`). We can knock on the API ourselves: the same key returns the same
# `charge_id` again, and the same key with another amount is refused, because a key
# names one request, not a customer.

# %%
from labkit.world import IdempotencyKeyReused

first = idem_world.effects("payments")[0].response
same = idem_world.payments.charge("cus_42", 4200, key=K, idempotency_key=K)
print("same key, same amount :", same)
try:
    idem_world.payments.charge("cus_42", 9900, key=K, idempotency_key=K)
except IdempotencyKeyReused as exc:
    print(f"same key, other amount: {type(exc).__name__}: {exc}")
else:
    raise AssertionError("a reused key with other parameters must be refused")
assert same == first and idem_world.count(K, "payments") == 1
idem_world.close()

# %% [markdown]
# ## 9. Fix 3: reconciliation, ask before acting again
#
# Many destinations have no idempotency support (an old ERP, a mail relay). Then our
# side keeps a ledger: mark the key `started` before the call and `done` after. A retry
# that finds `started` does not know whether the call happened, so it **asks the
# destination** (here `payments.find(key)`, in real life a search by reference or
# metadata) and charges only if nothing is there.
#
# The hardest case is the lost reply (⑦): the charge went through and the worker got a
# timeout, so it cannot tell success from failure.

# %%
(folder / "reconcile").mkdir()
row = run_scenario("reconcile", FaultPlan(SEED).at("lost_response", "lose_response", nth=1),
                   workdir=folder / "reconcile")
print(f"seed={row.seed}  replay: {row.replay}")
rec_clock = FakeClock()
with World(folder / "reconcile" / "world.db", rec_clock) as rec_world, \
        JobStore(folder / "reconcile" / "jobs.db", rec_clock) as rec_store:
    job = rec_store.get_by_key(K)
    show([{"attempt": a.attempt, "outcome": a.outcome, "error_class": a.error_class}
          for a in rec_store.attempts(job.id)])
    show([{"call": c.id, "outcome": c.outcome} for c in rec_world.calls("payments")])
    print("ledger mark:", rec_world.ledger.status(K), "| job result:", job.result)
    assert [c.outcome for c in rec_world.calls("payments")] == ["ok_response_lost"]
    assert job.result["reconciled"] is True and rec_world.count(K, "payments") == 1

# %% [markdown]
# The first attempt got `ResponseLost` and went to `retry_wait`. The second found the
# key `started`, asked the API, found `ch_1`, and adopted it: one call, one charge, and
# our records point at the real charge. Compare `ack_late` at ⑦ in the table: duplicate.
# Reconciliation is not an Idempotency-Key, though: section 10 shows a case where it
# charges twice and the key does not.
#
# ## 10. Why acking late is not enough
#
# Acking late moves the risk; it does not remove it. Count the verdicts per strategy in
# the table: acking first trades duplicates for losses, acking late trades losses for
# duplicates.

# %%
tally = [{"strategy": s, **{o: sum(matrix.outcome(s, p) == o for p in MATRIX_POINTS)
                            for o in ("ok", "duplicate", "lost")}}
         for s in matrix.strategies()]
show(tally)
by = {t["strategy"]: t for t in tally}
assert by["ack_first"]["duplicate"] == 0 and by["ack_first"]["lost"] > 0
assert by["ack_late"]["lost"] == 0 and by["ack_late"]["duplicate"] > 0

# %% [markdown]
# And a duplicate needs no crash at all. A worker that is merely **slow** looks dead:
# once its lease (SQS and Celery-on-Redis call it the *visibility timeout*) runs out,
# the job goes to another worker while the first is still working. One thread cannot
# run two workers at the same time, so we play their steps by hand, in the order they
# happen, with the strategy's own handler and the store's own calls:
#
# 1. w1 claims the job (lease 30 s) and calls the API, which hangs for 45 s;
# 2. w1's lease has run out, so w2 claims the job: attempt 2;
# 3. w2 charges; then w1's hung call finally goes through;
# 4. w1 reports success while w2 still holds the job; then w2 reports success.

# %%
from labkit.errors import LeaseLost
from labkit.worker import Context


def slow_worker(strategy):
    """Steps 1-4 above for one strategy; returns what the world and the table say."""
    where = folder / f"slow_{strategy}"
    where.mkdir()
    slow_clock = FakeClock()
    slow_store = JobStore(where / "jobs.db", slow_clock)
    slow_world = World(where / "world.db", slow_clock)
    slow_store.enqueue("charge", {"customer": "cus_42", "amount": 4200}, key=K)
    handler = STRATEGIES[strategy].handler
    w1, w2 = (Worker(slow_store, {"charge": handler}, name=name, world=slow_world)
              for name in ("w1", "w2"))
    held_1 = slow_store.claim("w1", lease_s=30)  # 1
    slow_clock.advance(45)
    held_2 = slow_store.claim("w2", lease_s=30)  # 2
    handler(held_2, Context(held_2, w2))  # 3
    handler(held_1, Context(held_1, w1))
    try:  # 4
        slow_store.complete(held_1, {"by": "w1"})
        w1_ack = "accepted"
    except LeaseLost:
        w1_ack = "LeaseLost"
    done = slow_store.complete(held_2, {"by": "w2"})
    return {"strategy": strategy, "charges": slow_world.count(K, "payments"),
            "w1's late ack": w1_ack, "job": str(done.state), "result": done.result,
            "attempts": done.attempt}


slow = [slow_worker(s) for s in ("ack_late", "idempotency_key")]
show(slow)
assert [(r["charges"], r["w1's late ack"], r["result"]) for r in slow] == [
    (2, "LeaseLost", {"by": "w2"}), (1, "LeaseLost", {"by": "w2"})]

# %% [markdown]
# In both runs the store **fenced** w1: its late `complete` carried a lease token that
# was no longer the current one (w2's claim had replaced it), so it got `LeaseLost` and
# changed nothing; the job's result is w2's (lesson 04). That protects the job table.
# It cannot protect the card: with `ack_late`, w1's call still reached the API and
# charged a second time. Only the destination, told "this is the same request" by the
# key, could refuse it.
#
# ### Reconciliation with a request still in flight
#
# Reconciliation asks the destination "did it happen?" and trusts the answer. With a
# slow first worker the honest answer is "not yet": w1 has marked the key `started` and
# sent its charge, which hangs in the network. Its lease runs out, w2 claims the job,
# finds `started`, asks the API, finds nothing (w1's request has not arrived), and
# charges. Then w1's request arrives. This runs the real `reconcile` handler twice, in
# two threads; w1's thread is held at `before_effect` (its request on the wire) until
# w2 is done.

# %%
import threading


class InFlight(Context):
    """w1's context: at ``before_effect`` its request is sent and hangs until released."""

    def __init__(self, job, worker):
        super().__init__(job, worker)
        self.sent, self.arrives = threading.Event(), threading.Event()

    def point(self, name):
        if name == "before_effect":
            self.sent.set()
            assert self.arrives.wait(30), "w1's request was never let through"
        super().point(name)


where = folder / "in_flight_reconcile"
where.mkdir()
fl_clock = FakeClock()
fl_store, fl_world = JobStore(where / "jobs.db", fl_clock), World(where / "world.db", fl_clock)
fl_store.enqueue("charge", {"customer": "cus_42", "amount": 4200}, key=K)
reconcile = STRATEGIES["reconcile"].handler
w1, w2 = (Worker(fl_store, {"charge": reconcile}, name=n, world=fl_world) for n in ("w1", "w2"))
held_1 = fl_store.claim("w1", lease_s=30)
ctx_1 = InFlight(held_1, w1)
w1_thread = threading.Thread(target=reconcile, args=(held_1, ctx_1))
w1_thread.start()
assert ctx_1.sent.wait(30)
print(f"{isoformat(fl_clock.now())}  w1 marked the key {fl_world.ledger.status(K)!r}; "
      "its charge is on the wire")
fl_clock.advance(45)
held_2 = fl_store.claim("w2", lease_s=30)
print(f"{isoformat(fl_clock.now())}  w2 claims attempt {held_2.attempt}; "
      f"the API has {len(fl_world.payments.find(K))} charge(s) for the key")
print(f"{isoformat(fl_clock.now())}  w2 reconciles and charges: "
      f"{reconcile(held_2, Context(held_2, w2))}")
ctx_1.arrives.set()
w1_thread.join(30)
print(f"{isoformat(fl_clock.now())}  w1's request arrives; charges for invoice 42: "
      f"{fl_world.count(K, 'payments')}")
show([{"charge": e.response["charge_id"], "key": e.key, "amount": e.payload["amount"]}
      for e in fl_world.effects("payments")])
assert not w1_thread.is_alive() and fl_world.count(K, "payments") == 2
fl_store.close()
fl_world.close()

# %% [markdown]
# Two charges, from a strategy that is `ok` in every cell of the crash table: the table
# crashes workers, and a dead worker's request is never in flight. An `Idempotency-Key`
# has no such gap (the slow-worker run above gave 1 charge): the destination holds the
# key while the first request runs and answers the second from it (or with a 409).
#
# Reconciliation is safe only when both of these hold:
#
# * **no earlier attempt can still be in flight** when the lookup runs: the client's
#   request timeout is well under the lease (so a hung request is abandoned before the
#   job can be taken over), or the old worker is fenced off for good (killed), not just
#   presumed dead;
# * **the destination's lookup sees every write at once**: many search endpoints are
#   eventually consistent (a charge may take seconds to minutes to show in a search),
#   and a lagging search says "nothing there" just as a request in flight does.
#
# When a destination offers an idempotency key, use the key; keep reconciliation for
# the ones that do not, with those two conditions checked.
#
# So the rule from the async-jobs lesson and the Celery-in-production article: once you
# ack late, delivery is at-least-once, which means repeats; make every effect
# **idempotent** (a key the destination honours, a record in the effect's own
# transaction, an upsert, or reconciliation where it is safe), and then a repeat changes
# nothing. Do
# not promise "exactly once" because acks are late: the table above shows what that
# promise is worth.

# %% [markdown]
# ## 11. Idempotent by nature: upsert, and set instead of increment
#
# Some effects need no key at all, because running them twice leaves the same state as
# running them once. The Celery-in-production article names two habits for writes to
# your own database:
#
# * **upsert instead of a blind insert**: `INSERT ... ON CONFLICT (order_id) DO UPDATE`
#   lets the database absorb the repeat, atomically;
# * **set, not increment**: `status = 'sent'` ten times is `status = 'sent'`;
#   `views = views + 1` ten times is ten views.
#
# A redelivered task runs each of four handlers three times on one order:

# %%
import sqlite3

shop = sqlite3.connect(folder / "shop.db", isolation_level=None)
shop.executescript("""
    CREATE TABLE invoices (order_id INTEGER, total INTEGER);
    CREATE TABLE invoices_upsert (order_id INTEGER PRIMARY KEY, total INTEGER);
    CREATE TABLE orders (id INTEGER PRIMARY KEY, status TEXT, reminders INTEGER);
    INSERT INTO orders VALUES (42, 'new', 0);
""")
HANDLERS = {
    "blind insert": "INSERT INTO invoices VALUES (42, 4200)",
    "upsert": "INSERT INTO invoices_upsert VALUES (42, 4200) "
              "ON CONFLICT (order_id) DO UPDATE SET total = excluded.total",
    "increment": "UPDATE orders SET reminders = reminders + 1 WHERE id = 42",
    "set": "UPDATE orders SET status = 'reminded' WHERE id = 42",
}
for delivery in range(3):  # the first run and two redeliveries
    for sql in HANDLERS.values():
        shop.execute(sql)
state = {
    "blind insert": shop.execute("SELECT count(*) FROM invoices").fetchone()[0],
    "upsert": shop.execute("SELECT count(*) FROM invoices_upsert").fetchone()[0],
    "increment": shop.execute("SELECT reminders FROM orders").fetchone()[0],
    "set": shop.execute("SELECT status FROM orders").fetchone()[0],
}
show([{"handler": name, "sql": sql[:60], "state after 3 runs": state[name]}
      for name, sql in HANDLERS.items()])
assert state == {"blind insert": 3, "upsert": 1, "increment": 3, "set": "reminded"}
shop.close()

# %% [markdown]
# Prefer the upsert and the set wherever the business meaning allows (a real event
# counter does have to add). They cover writes to a database you own; an email or a
# charge at another company has no upsert, which is why sections 7 to 9 exist.
#
# ## 12. Try it yourself: the fault panel
#
# `labkit.notebook.fault_panel.fault_panel()` runs one cell of the table at a time: pick a strategy, a
# crash point and a seed, press **Run**, and read the verdict, the charges the world
# recorded and the replay line. Its widgets only show in a live notebook, so this
# cell's output is not compared.

# %% tags=["nbval-ignore-output"]
from labkit.notebook.fault_panel import fault_panel, row_text

panel = fault_panel(workdir=folder)
panel

# %% [markdown]
# The panel can be driven from code too. Here it runs `check_then_act` with a crash
# at ④ `before_commit`: the strategy looks careful (it checks its ledger first), yet the
# world holds two charges, exactly as its cell in the table says.

# %%
panel.strategy.value = "check_then_act"
panel.point.value = "before_commit"
panel.seed.value = SEED
panel.run_button.click()
print(row_text(panel.last))
assert panel.last.fired == ("crash at before_commit n=1",)
assert (panel.last.outcome, panel.last.effects) == ("duplicate", 2)
assert panel.last.outcome == matrix.outcome("check_then_act", "before_commit")

# %% [markdown]
# ## What you should see
#
# | step | what the records show |
# |---|---|
# | crash at `after_effect`, `ack_late` | job table: 3 succeeded; the world: invoice 42 charged twice (`ch_2`, `ch_4`) |
# | the replay line | the same charges, attempts and deaths in a fresh folder |
# | timeline | w1 dies at 4 s; a 28 s lease wait; a 10 s backoff for invoice 43; w2 finishes |
# | crash matrix | `ack_first` lost at ②⑤⑥; `ack_late` and `check_then_act` duplicate at ③④⑦; the last three `ok` |
# | Celery's two modes | default (`acks_late=False`): killed before the effect, `lost`; late ack: `ok`, but `duplicate` after the effect |
# | real kills | the `after_effect` column and `ack_first` × `after_commit` agree with the in-process table |
# | one transaction | one ledger entry after two attempts; the first rolled back |
# | Idempotency-Key | calls `ok`, `replayed`; one charge; another amount is refused |
# | reconciliation | one call (`ok_response_lost`), the retry adopts `ch_1`; one charge |
# | slow worker past its lease | w1's late ack gets `LeaseLost`, the result is w2's; `ack_late` 2 charges, `idempotency_key` 1 |
# | reconciliation, w1's request in flight | w2 finds no charge and charges; w1's request arrives: 2 charges |
# | three runs of each handler | blind insert 3 rows, upsert 1, increment 3, set `reminded` |
# | the fault panel, `check_then_act` at ④ | verdict `duplicate`, 2 charges, the same as its cell in the table |
#
# **What to take away**
#
# - A worker can die after the outside world did the work and before your side recorded
#   it; only the destination's own records show the duplicate or the loss.
# - Acking first trades duplicates for losses; acking late trades losses for duplicates.
#   Neither gives "exactly once".
# - A "done" check kept in a separate transaction from the effect (`check_then_act`)
#   protects nothing: a crash between the charge and the mark still charges twice.
# - Three fixes hold at every crash point: the effect and its record in one transaction
#   (your own database), an Idempotency-Key the destination honours, and reconciliation.
# - Reconciliation is safe only when no earlier attempt can still be in flight and the
#   lookup sees every write at once; when the destination offers a key, use the key.
# - For writes to your own database, make the effect idempotent by nature: upsert
#   instead of a blind insert, set instead of increment.
#
# ## Glossary and next
#
# The terms of this lesson, and of every other, in English and Portuguese:
# [Glossary / Glossário](glossary.md).
#
# [Next: 07 · Dead letter and redrive](07_dead_letter.ipynb)
