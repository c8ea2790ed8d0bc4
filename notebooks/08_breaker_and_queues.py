# %% [markdown]
# # 08 · Circuit breaker, a queue per account, a serial queue
#
# *When the ERP is down, stop knocking and keep the jobs' attempts; when one customer
# floods the queue, the others still get served; when order matters, one job per key at a
# time.*
#
# > **Resumo.** Quando o ERP cai, pare de insistir e poupe as tentativas dos jobs;
# > quando uma conta entope a fila ou recebe 429, as outras continuam sendo atendidas;
# > quando a ordem importa, um job por chave de cada vez. Você vai ver o circuit breaker
# > compartilhado, o breaker e a fila por conta, a fila serial, o que acontece quando o
# > primeiro da fila morre e o retry com countdown que quebra a ordem no artigo do ERP.
#
# Run time: about 2 seconds (a simulated ten-minute outage and a flood of 66 jobs, on a fake clock).
#
# Retries (lesson 05) fix one failed call. They do not fix a dependency that is down for
# ten minutes: every job tries, fails, waits, tries again, and the queue turns into a
# machine that produces errors and burns every job's attempt budget. The ERP article, an ERP
# integration built on Celery, adds three tools on top of retries and dead letters, and
# this lesson runs each of them against the job table:
#
# 1. a **circuit breaker** per dependency, its state in SQLite so every worker sees it;
# 2. a worker that **snoozes** jobs while the breaker is open, without spending attempts;
# 3. a **queue per account** with a concurrency cap, so one flooding account does not
#    starve the others, and a **breaker per account**, so one throttled account (429)
#    does not stop the others;
# 4. a **serial queue**: one job per key at a time, in order; what happens when its head
#    dies, and what the ERP article's single-worker queue keeps and loses.

# %% [markdown]
# ## Setup
#
# A `FakeClock`, a seeded rng, a fresh folder. Matplotlib draws inline; its font-cache
# notice is silenced so a first run prints the same text as every other.

# %%
import logging
import random

logging.getLogger("matplotlib.font_manager").setLevel(logging.ERROR)
import matplotlib.pyplot as plt  # noqa: E402

from labkit.patterns.breaker import CircuitBreaker
from labkit.clock import FakeClock, isoformat
from labkit.errors import CircuitOpen, PermanentError, TransientError
from labkit.keys import operation_key
from labkit.patterns.queues import AccountQueues, SerialQueues, simulate_accounts
from labkit.tables import jobs_table, show
from labkit.retry import RetryPolicy, constant, exponential
from labkit.notebook.scratch import fresh_dir
from labkit.store import JobStore
from labkit.worker import Worker

SEED = 8
rng = random.Random(SEED)
clock = FakeClock()
folder = fresh_dir("08")
print(f"seed={SEED}  clock={clock}  folder={folder}")

# %% [markdown]
# ## 1. The breaker, one transition at a time
#
# A breaker watches consecutive failures of one dependency. It has three states:
#
# | state | calls | leaves it when |
# |---|---|---|
# | `closed` | pass | `threshold` failures in a row: → `open` |
# | `open` | refused at once with `CircuitOpen` | `cooldown` has passed: → `half_open` |
# | `half_open` | one trial call passes | the trial succeeds: → `closed`; it fails: → `open` |
#
# The ERP article keeps its breaker in the Django cache so that every Celery worker shares it.
# `labkit.patterns.breaker.CircuitBreaker` keeps it in a SQLite table, here in the job store's own
# file. Two breaker objects on that file play two worker processes: `erp_in_w1` and
# `erp_in_w2` share nothing but the file. A listener on w1's object prints each
# transition it makes.

# %% [markdown]
# The three states as a diagram, from `labkit.notebook.timelines.breaker_mermaid()` (a test drives a real
# breaker through every arrow, so the picture cannot drift from the code):
#
# ```mermaid
# stateDiagram-v2
#     [*] --> closed: created
#     closed --> open: threshold failures in a row
#     open --> half_open: cooldown has passed
#     half_open --> closed: the trial call succeeds
#     half_open --> open: the trial call fails
# ```

# %%
store = JobStore(folder / "jobs.db", clock=clock, rng=rng)
erp_in_w1 = CircuitBreaker("erp", threshold=3, cooldown=60, clock=clock, store_path=store.path)
erp_in_w2 = CircuitBreaker("erp", threshold=3, cooldown=60, clock=clock, store_path=store.path)
erp_in_w1.on_transition(lambda t: print(f"  w1 saw: {t.from_state} -> {t.to_state} ({t.reason})"))

erp_calls = []


def erp_down():
    erp_calls.append(clock.now())
    raise TransientError("ERP answered 503", status=503)


print(f"w1: {erp_in_w1.state}, w2: {erp_in_w2.state}")
assert erp_in_w1.state == erp_in_w2.state == "closed"

# %% [markdown]
# The ERP goes down. Worker 1 calls it three times through its breaker; the third
# failure in a row reaches the threshold and opens the breaker. Worker 2 did nothing, yet
# its object reads `open`: the state is a row in the file, not a variable in a process.

# %%
for _ in range(3):
    try:
        erp_in_w1.call(erp_down)
    except TransientError as exc:
        print(f"{clock}: w1 call failed: {exc}")
print(f"w1: {erp_in_w1.state}, w2: {erp_in_w2.state}, failures counted: {erp_in_w2.failures}")
assert erp_in_w1.state == "open" and erp_in_w2.state == "open"
assert erp_in_w2.retry_at == clock.now() + 60

# %% [markdown]
# Now worker 2 tries. Its call is refused before it leaves the process: the ERP is not
# called, and the `CircuitOpen` error says until when.

# %%
try:
    erp_in_w2.call(erp_down)
except CircuitOpen as exc:
    print(f"CircuitOpen: {exc}")
    print(f"retry_at: {isoformat(exc.retry_at)}")
else:
    raise AssertionError("an open breaker must refuse the call")
print(f"calls that reached the ERP: {len(erp_calls)}")
assert len(erp_calls) == 3

# %% [markdown]
# A minute later the cooldown is over. The next caller, worker 2, gets the one **trial**
# slot (`half_open`); worker 1, asking at the same moment, is refused, because one trial
# is enough to learn whether the ERP is back. The ERP is still down, so the trial fails
# and the breaker opens for another minute.

# %%
clock.advance(60)
print(f"{clock}: w2 allowed: {erp_in_w2.allow()}  w1 allowed: {erp_in_w1.allow()}  "
      f"state: {erp_in_w1.state}")
assert erp_in_w1.state == "half_open" and not erp_in_w1.allow()
erp_in_w2.record_failure()  # the trial call failed
print(f"after the failed trial: {erp_in_w1.state}, retry at {isoformat(erp_in_w1.retry_at)}")
assert erp_in_w1.state == "open" and erp_in_w1.retry_at == clock.now() + 60

# %% [markdown]
# Another minute; this time the ERP answers. Worker 1 takes the trial through `call`,
# which records the success, and the breaker closes for everyone.

# %%
clock.advance(60)
print(f"{clock}: w1 trial -> {erp_in_w1.call(lambda: 'ERP answered 200')}")
print(f"w1: {erp_in_w1.state}, w2: {erp_in_w2.state}, failures counted: {erp_in_w2.failures}")
assert erp_in_w2.state == "closed" and erp_in_w2.allow()

# %% [markdown]
# Every transition is also a row in `breaker_events`, whichever process made it. Worker
# 1's listener printed only the ones worker 1 made; the history has all five.

# %%
history = erp_in_w2.history()
show([{"at": isoformat(t.at), "from": t.from_state, "to": t.to_state, "reason": t.reason}
      for t in history])
assert [(t.from_state, t.to_state) for t in history] == [
    ("closed", "open"), ("open", "half_open"), ("half_open", "open"),
    ("open", "half_open"), ("half_open", "closed")]

# %% [markdown]
# ## 2. A ten-minute outage, with and without the breaker
#
# Six orders wait to be synced to the ERP, five attempts each, with an exponential
# backoff (10 s, 20 s, 40 s, ...). The ERP is down for the first ten minutes. The
# handler is what a student would write; with the breaker it sends its call through
# `breaker.call`. When the breaker refuses, the worker catches `CircuitOpen` and
# **snoozes** the job until `retry_at`: back to `retry_wait`, attempt counter unchanged.
#
# `outage` runs the whole thing on its own clock and its own file, with one worker that
# drains the queue (sleeping on the fake clock until the next job is due).

# %% tags=["no-output"]
OUTAGE_S = 600


def outage(with_breaker):
    """Six ERP syncs through a 10-minute outage; returns the store, the breaker, the calls."""
    clock = FakeClock()
    store = JobStore(folder / f"outage_{with_breaker}.db", clock=clock, rng=random.Random(SEED),
                     retry=RetryPolicy(backoff=exponential(base=10, cap=300)))
    breaker = CircuitBreaker("erp", threshold=3, cooldown=60, clock=clock, store_path=store.path)
    calls = []

    def sync_order(job, ctx):
        def call_erp():
            calls.append(job.id)
            if clock.now() < store.get(1).created_at + OUTAGE_S:
                raise TransientError("ERP answered 503", status=503)
            return {"erp_order": f"E-{job.payload['order']}"}

        return breaker.call(call_erp) if with_breaker else call_erp()

    for order in range(1, 7):
        store.enqueue("erp.sync_order", {"order": order},
                      key=operation_key("shop", order, "sync_order"), max_attempts=5)
    Worker(store, {"erp.sync_order": sync_order}, name="w1").drain()
    return store, breaker, calls


def spent(store, job_id):
    """Attempts that ran the handler to an outcome (a snooze is not one)."""
    return sum(a.error_class != "Snoozed" for a in store.attempts(job_id))

# %% [markdown]
# Without the breaker every job hammers the ERP on its own schedule. The outage outlasts
# the whole backoff budget (10 + 20 + 40 + 80 s), so all six die with "attempts
# exhausted", after 30 calls to a dependency that was already down.

# %%
plain, _, plain_calls = outage(with_breaker=False)
show(jobs_table(plain, columns=("id", "key", "state", "attempt", "dead_reason")))
print(f"\ncalls to the ERP: {len(plain_calls)}")
assert plain.counts()["dead"] == 6 and len(plain_calls) == 30

# %% [markdown]
# With the breaker, the first three failures open it; from then on the ERP sees one
# trial call a minute, and every other job is snoozed. The table shows the difference:

# %%
guarded, breaker, guarded_calls = outage(with_breaker=True)
show([{"id": j.id, "key": j.key, "state": str(j.state), "attempts spent": spent(guarded, j.id),
       "snoozes": sum(a.error_class == "Snoozed" for a in guarded.attempts(j.id))}
      for j in guarded.jobs()])
print(f"\ncalls to the ERP: {len(guarded_calls)}   breaker now: {breaker.state}")
# At most: 3 failures to open it, one trial per minute of outage, one success per job.
assert len(guarded_calls) <= 3 + OUTAGE_S // 60 + 6 < len(plain_calls)
assert guarded.counts()["succeeded"] == 4 and breaker.state == "closed"

# %% [markdown]
# Read it honestly. The trial calls are real calls: each one is carried by some job and
# spends that job's attempt. Jobs 1 and 2 were the oldest in `retry_wait`, so they
# carried most trials and ran out of attempts before the ERP came back (lesson 07's
# redrive brings them back); job 3 carried two and still had attempts left. Jobs 4, 5 and 6 never reached the ERP while it was down:
# they slept through the outage and succeeded on their first attempt.
#
# The attempts history of job 4 shows it: ten claims refused by the breaker, each one
# closed as `retry_wait` / `Snoozed` and still numbered **attempt 1**, then the run that
# succeeded, also attempt 1.

# %%
show([{"attempt": a.attempt, "worker": a.worker, "started_at": isoformat(a.started_at),
       "outcome": a.outcome, "error_class": a.error_class}
      for a in guarded.attempts(4)])
assert {a.attempt for a in guarded.attempts(4)} == {1}
assert [a.outcome for a in guarded.attempts(4)][-1] == "succeeded"
assert all(a.error_class == "Snoozed" for a in guarded.attempts(4)[:-1])
assert guarded.get(4).attempt == 1 and spent(guarded, 4) == 1

# %% [markdown]
# The breaker's own history: it opened at the third failure, then let one trial through
# each minute until the ERP answered at 00:10:00.

# %%
transitions = breaker.history()
show([{"at": isoformat(t.at), "from": t.from_state, "to": t.to_state, "reason": t.reason}
      for t in transitions[:3] + transitions[-2:]])
print(f"... {len(transitions)} transitions in all")
assert (transitions[0].from_state, transitions[0].to_state) == ("closed", "open")
assert (transitions[-1].to_state, isoformat(transitions[-1].at)) == (
    "closed", "2026-01-01 00:10:00")

# %% [markdown]
# ## 3. A queue per account, with a cap
#
# The ERP article's second problem: several customer accounts share the ERP integration. When
# one account is throttled, or simply drops thousands of jobs at once, a single
# first-in-first-out queue gives every worker to that account, and everyone else waits.
# The fix there was a Celery queue per account. `labkit.patterns.queues.AccountQueues` does it on
# the job table: each account gets a queue (`account:<id>`), and a claim skips any
# account that already has `cap` jobs running, least busy accounts first.
#
# Account `acme` enqueues six jobs, then `bolt` and `cora` one each. Three workers' worth
# of claims, without and with a cap:

# %%
def three_claims(cap):
    where = JobStore(folder / f"claims_{cap}.db", clock=FakeClock(), rng=rng)
    queues = AccountQueues(where, cap=cap)
    for account, count in (("acme", 6), ("bolt", 1), ("cora", 1)):
        for n in range(count):
            queues.enqueue(account, "erp.sync", {"n": n}, key=operation_key(account, n, "sync"))
    return [job.queue for job in queues.claim("w", limit=3)]


no_cap, capped = three_claims(None), three_claims(2)
print("no cap:", no_cap)
print("cap 2 :", capped)
assert no_cap == ["account:acme"] * 3
assert sorted(capped) == ["account:acme", "account:bolt", "account:cora"]

# %% [markdown]
# That is one moment. `simulate_accounts` runs a whole flood through three workers: acme
# drops 60 jobs, then bolt and cora 3 each, all at the same instant; every job takes one
# second. It reads each job's wait (enqueue to claim) from the store.

# %%
FLOOD = {"acme": 60, "bolt": 3, "cora": 3}
runs = {}
for cap in (None, 2):
    sim = JobStore(folder / f"flood_{cap}.db", clock=FakeClock(), rng=rng)
    runs[cap] = simulate_accounts(sim, FLOOD, workers=3, service_s=1.0, cap=cap)
show([{"cap": "none" if cap is None else cap, "account": w.account, "jobs": w.jobs,
       "mean wait s": round(w.mean_wait, 1), "max wait s": w.max_wait}
      for cap, waits in runs.items() for w in waits.values()])
for cap in runs:
    assert {a: w.jobs for a, w in runs[cap].items()} == FLOOD  # every job ran
for small in ("bolt", "cora"):
    assert runs[None][small].mean_wait >= 20 and runs[2][small].max_wait <= 2
assert runs[2]["acme"].max_wait > runs[None]["acme"].max_wait

# %% [markdown]
# Without a cap, bolt and cora wait behind all 60 of acme's jobs: 20 seconds, the time
# three workers need to get through the flood. With a cap of 2, acme never holds more
# than two workers, so the third serves bolt and cora at once. The price is on the right
# of the chart: once only acme's jobs are left, the third worker idles, and acme's last
# job waits 31 s instead of 19 s. A cap trades the flooder's throughput for everyone
# else's latency; choose it so the flooder still gets most of the workers.

# %%
fig, axes = plt.subplots(1, 2, figsize=(10, 3.5), sharey=True)
for ax, stat in zip(axes, ("mean_wait", "max_wait"), strict=True):
    for offset, (cap, waits) in zip((-0.2, 0.2), runs.items(), strict=True):
        ax.bar([i + offset for i in range(len(FLOOD))],
               [getattr(waits[a], stat) for a in FLOOD], width=0.4,
               label="no cap" if cap is None else f"cap {cap}")
    ax.set_xticks(range(len(FLOOD)), list(FLOOD))
    ax.set_title(stat.replace("_", " ") + " (s)", fontsize=10, loc="left")
axes[0].legend()
fig.tight_layout()
plt.show()

# %% [markdown]
# ### A breaker per account: throttled, not flooded
#
# A flood is one account sending too much; a **throttle** is the ERP refusing one account
# (429, "over your request quota") while it serves the others. The ERP article keeps
# one breaker per ERP account for that reason. Here account `acme` is throttled and
# `bolt` is fine. Each round, acme's queue tries three calls and bolt's one. With one
# breaker for the whole ERP, acme's three 429s in a row open it for everyone; with a
# breaker per account (`erp:acme`, `erp:bolt`), only acme waits.

# %%
def throttled(per_account):
    """Four rounds of calls: acme (throttled, 3 a round) then bolt (1 a round)."""
    where = folder / f"throttle_{'per_account' if per_account else 'shared'}.db"
    t_clock = FakeClock()
    breakers = {}

    def breaker_for(account):
        name = f"erp:{account}" if per_account else "erp"
        if name not in breakers:
            breakers[name] = CircuitBreaker(name, threshold=3, cooldown=60, clock=t_clock,
                                            store_path=where)
        return breakers[name]

    def erp(account):
        reached[account] += 1
        if account == "acme":
            raise TransientError("429 from the ERP: account acme is over its request quota",
                                 status=429, retry_after=60)
        return "200"

    reached = {"acme": 0, "bolt": 0}
    served, refused = {"acme": 0, "bolt": 0}, {"acme": 0, "bolt": 0}
    for _round in range(4):
        for account in ["acme"] * 3 + ["bolt"]:
            try:
                breaker_for(account).call(lambda: erp(account))  # noqa: B023
                served[account] += 1
            except CircuitOpen:
                refused[account] += 1
            except TransientError:
                pass
        t_clock.advance(10)
    return [{"breakers": "one per account" if per_account else "one for the ERP",
             "account": a, "calls that reached the ERP": reached[a],
             "refused by a breaker": refused[a], "served": served[a]} for a in reached], breakers


shared_rows, _ = throttled(per_account=False)
account_rows, account_breakers = throttled(per_account=True)
show(shared_rows + account_rows)
print("breakers:", {name: str(b.state) for name, b in account_breakers.items()})
assert [r["served"] for r in shared_rows] == [0, 0]  # bolt starved by acme's 429s
assert [r["served"] for r in account_rows] == [0, 4]  # bolt served every round
assert account_rows[0]["calls that reached the ERP"] == 3  # acme stopped knocking
assert {n: b.state for n, b in account_breakers.items()} == {"erp:acme": "open",
                                                             "erp:bolt": "closed"}

# %% [markdown]
# With one breaker, bolt is refused every round for a quota it never exceeded. With one
# per account, acme's breaker opened after its three 429s and stopped its calls, while
# bolt was served four times out of four. Pair it with the queue per account above:
# acme's jobs snooze in acme's queue, so they hold no worker either. (The 429 also says
# how long to wait, `retry_after=60`; a breaker whose cooldown honours it comes back
# exactly when the ERP allows.)
#
# ## 4. A serial queue
#
# Some jobs must not overlap and must keep their order: the ERP article's fiscal adjustments,
# where the second depends on the result of the first. The ERP article routes them to a Celery
# queue consumed by one worker with `concurrency=1`. `labkit.patterns.queues.SerialQueues` gets the
# same guarantee per key, with any number of workers: it puts each serial key in its own
# queue (`serial:<key>`) and claims only the **head** of each, the oldest live job.
# While the head runs, or waits in `retry_wait` for its next attempt, the later jobs of
# that key wait behind it; other keys go on.
#
# Order 42 has three adjustments, order 43 two. The first try of order 42's first step
# is turned away: the ERP answers 503, busy, nothing done (never sent, so it is retried
# 10 s later). Two workers claim every 5 seconds;
# a job takes less than that. `run_serial` runs this with a claim function and logs who
# ran what.

# %% tags=["no-output"]
STEPS = {42: ["open", "adjust tax", "close"], 43: ["open", "close"]}


def run_serial(name, make_claim, workers=("w1", "w2")):
    """Enqueue STEPS, then the workers claim every 5 s with ``make_claim(store)``; log runs."""
    clock = FakeClock()
    store = JobStore(folder / f"serial_{name}.db", clock=clock, rng=rng,
                     retry=RetryPolicy(backoff=constant(10)))
    serial = SerialQueues(store)
    for order, steps in STEPS.items():
        for n, step in enumerate(steps, start=1):
            serial.enqueue(f"order:{order}", "erp.fiscal_adjust",
                           {"order": order, "step": n, "what": step},
                           key=operation_key("fiscal", f"{order}-{n}", "adjust"))
    claim = make_claim(store, serial)
    log = []
    while store.counts()["succeeded"] < 5:
        for worker in workers:
            for job in claim(worker):
                p = job.payload
                turned_away = (p["order"], p["step"], job.attempt) == (42, 1, 1)
                log.append({"at": isoformat(clock.now())[11:], "worker": worker,
                            "order": p["order"], "step": f"{p['step']} {p['what']}",
                            "attempt": job.attempt, "outcome": "503 busy" if turned_away else "ok"})
                if turned_away:
                    store.fail(job, TransientError("ERP busy, nothing done", status=503))
                else:
                    store.complete(job)
        clock.advance(5)
    return log

# %% [markdown]
# First the naive way: all the adjustments in one ordinary queue, claimed oldest first.
# While step 1 of order 42 waits for its retry, w2 runs step 2, then step 3: the tax is
# adjusted and the order closed before it was opened.

# %%
def plain_claim(store, serial):
    queues = [serial.queue_for(f"order:{order}") for order in STEPS]
    return lambda worker: [job for job in [store.claim(worker, queues=queues)] if job]


naive = run_serial("naive", plain_claim)
show(naive)
order_42 = [row["step"][0] for row in naive if row["order"] == 42 and row["outcome"] == "ok"]
print("order 42 finished its steps in the order:", order_42)
assert order_42 != ["1", "2", "3"]

# %% [markdown]
# With `SerialQueues`, the two workers still work in parallel across orders, but order
# 42's steps 2 and 3 wait until step 1 is done, retry included.

# %%
ordered = run_serial("serial", lambda store, serial: serial.claim)
show(ordered)
for order, steps in STEPS.items():
    done = [row["step"] for row in ordered if row["order"] == order and row["outcome"] == "ok"]
    assert done == [f"{n} {s}" for n, s in enumerate(steps, start=1)], done
assert len({row["worker"] for row in ordered}) == 2

# %% [markdown]
# ### What "one worker with `concurrency=1`" keeps
#
# The ERP article gets its order from a Celery queue consumed by one worker with
# `concurrency=1`. That prevents overlap, but not reordering: its retry is
# `apply_async(..., countdown=delay)`, a *new* message that waits for its countdown while
# the single worker takes the next message in the queue. Played here with one worker on
# one ordinary queue, as in that design: step 1 is turned away, and step 2 runs before it.

# %%
single = run_serial("one_worker", plain_claim, workers=("w1",))
show(single)
order_42 = [row["step"][0] for row in single if row["order"] == 42 and row["outcome"] == "ok"]
print("order 42 finished its steps in the order:", order_42)
assert order_42 != ["1", "2", "3"] and {row["worker"] for row in single} == {"w1"}

# %% [markdown]
# So "the same guarantee per key" means, in `SerialQueues`: no two jobs of a key run at
# once, and a later job waits while the head runs **or waits for its retry**, and while
# a crashed head's lease runs out. One worker with `concurrency=1` keeps the first part
# only; a countdown retry (or a second worker added on a busy day) breaks the order.
#
# One thing breaks the order on purpose: a head that **dies** stops blocking. Otherwise
# one bad job would hold its key forever. Order 44's first step is rejected by the ERP
# (a permanent error): it goes to `dead`, and the next claim hands out step 2.

# %%
dies_store = JobStore(folder / "serial_dies.db", clock=FakeClock(), rng=rng)
dies = SerialQueues(dies_store)
for n, step in enumerate(("open", "close"), start=1):
    dies.enqueue("order:44", "erp.fiscal_adjust", {"order": 44, "step": n, "what": step},
                 key=operation_key("fiscal", f"44-{n}", "adjust"))
head = dies.claim("w1")[0]
dies_store.fail(head, PermanentError("ERP rejected step 1: invalid tax code", status=400))
after = dies.claim("w1")
show(jobs_table(dies_store, columns=("id", "key", "state", "attempt", "dead_reason")))
print("\nclaimed after the head died:", [f"step {j.payload['step']}" for j in after])
assert dies_store.get(head.id).state == "dead" and [j.payload["step"] for j in after] == [2]

# %% [markdown]
# Decide per domain whether that is right: for fiscal steps, closing an order whose
# opening was rejected may be wrong, and the fix is to redrive the dead head (lesson 07)
# before anything else of that key, or to have step 2 check step 1's result. And one
# slow key holds up only itself, never the other keys.
#
# ## What you should see
#
# | step | what the records show |
# |---|---|
# | three failures through w1's breaker | both objects read `open`; 3 failures counted |
# | w2 calls while open | `CircuitOpen` with `retry_at`; the ERP still has 3 calls |
# | after the cooldown | one trial admitted (w2), w1 refused; the failed trial opens it again |
# | the trial succeeds | `closed` for both; history: 5 transitions |
# | 10-minute outage, no breaker | 6 dead "attempts exhausted", 30 ERP calls |
# | same outage, with the breaker | 4 succeeded, 2 dead (they carried the trials), 16 calls |
# | job 4's attempts history | ten `Snoozed` claims, all attempt 1, then `succeeded` at attempt 1 |
# | three claims, no cap / cap 2 | all acme / one each for acme, bolt, cora |
# | the flood | bolt and cora wait 20-21 s without a cap, at most 2 s with cap 2; acme's worst wait 19 → 31 s |
# | throttled acme, one breaker for the ERP | bolt refused every round, served 0 |
# | throttled acme, a breaker per account | acme's breaker open after 3 calls; bolt served 4 of 4 |
# | one ordinary queue | order 42's steps finish out of order |
# | serial queue | each order's steps in order; step 1's retry blocks steps 2 and 3 only |
# | one worker, one queue, a countdown retry | order 42's step 2 runs before step 1's retry |
# | the head dies | step 1 `dead`; the next claim hands out step 2 |
#
# **What to take away**
#
# - Retries fix one failed call, not a dependency that is down: a circuit breaker stops
#   calling it after `threshold` failures in a row and lets one trial call through per
#   cooldown.
# - Keep the breaker's state where every worker reads it (a row in the database, not a
#   variable in a process), so one worker's failures protect them all.
# - While the breaker is open, snooze the jobs instead of failing them: they keep their
#   attempts. The trial calls are real calls, though, and spend the attempts of the jobs
#   that carry them.
# - A queue per account with a concurrency cap keeps one flooding account from starving
#   the others, at some cost to the flooder; a breaker per account does the same for a
#   throttled (429) account.
# - A serial queue runs one job per key at a time, and later jobs wait while the head
#   runs or waits for its retry; one worker with `concurrency=1` stops overlap, not
#   reordering.
# - A dead head stops blocking its key: decide per domain whether the next job may run,
#   or redrive the head first.
#
# ## Glossary and next
#
# The terms of this lesson, and of every other, in English and Portuguese:
# [Glossary / Glossário](glossary.md).
#
# [Next: 09 · The transactional outbox](09_outbox.ipynb)
