# %% [markdown]
# # 00 · Start here
#
# *A ten-minute tour: what this lab teaches, the job store in five cells, how a
# notebook checks itself, and the outside world whose truth every lesson reads.*
#
# > **Resumo.** Um tour de dez minutos: o que o lab ensina, de onde ele vem (quatro
# > artigos em português), a tabela de jobs em cinco células (chave, claim, lease, crash e
# > recuperação), como cada notebook se testa sozinho com `assert` e nbval, e o "mundo
# > externo", cujos registros mostram o que de fato aconteceu.
#
# Run time: about 2 seconds (one small SQLite file; nothing waits).
#
# Background jobs fail in ways that are easy to miss: a cron script charges a customer
# twice because it ran twice; a worker dies after the ERP accepted an order but before it
# wrote that down; a retry storm hits a service that was already down; a poison message
# loops forever. This lab is for developers who run (or are about to run) jobs like these
# in production. Every lesson runs real code from `labkit`, crashes it on purpose, and
# prints the state left behind in the database, so you see what survived instead of
# taking it on trust.
#
# Run the cells from top to bottom (Shift+Enter). Everything a lesson writes goes to a
# fresh folder under `.labkit-scratch/`, so a re-run starts clean.

# %% [markdown]
# ## The lessons
#
# | nb | topic |
# |---|---|
# | 00 | [start here](00_start_here.ipynb) (this tour) |
# | 01 | [the naive script and how it lies](01_naive_script.ipynb) |
# | 02 | [a lockfile: one instance at a time](02_lockfile.ipynb) |
# | 03 | [units of work and stable keys](03_keys.ipynb) |
# | 04 | [the job table: states, claims, leases](04_job_table.ipynb) |
# | 05 | [retries, backoff and jitter](05_retries.ipynb) |
# | 06 | [a crash between the effect and the ack](06_crash_matrix.ipynb) |
# | 07 | [dead letters and redrive](07_dead_letter.ipynb) |
# | 08 | [a circuit breaker, a queue per account, a serial queue](08_breaker_and_queues.ipynb) |
# | 09 | [the transactional outbox and its relay](09_outbox.ipynb) |
# | 10 | [periodic jobs: two schedulers, one run per slot](10_periodic_jobs.ipynb) |
# | 11 | [observability: logs, the runs table, metrics, an alert](11_observability.ipynb) |
# | 12 | [async request-reply over real HTTP](12_request_reply.ipynb) |
# | 13 | [beyond one machine: PostgreSQL and Redis Streams](13_beyond_one_machine.ipynb) |
# | 14 | [Celery in production, for real](14_celery.ipynb) |
# | 15 | [the three bad nights again: before and after](15_three_nights_again.ipynb) |
# | 16 | [multi-step jobs: checkpoints, compensation, policy versions](16_multi_step_jobs.ipynb) |
#
# Words you do not know, in English or Portuguese: [Glossary / Glossário](glossary.md).
#
# ## Where the lab comes from
#
# Four articles, written in Portuguese, tell the stories this lab re-runs. The lessons
# name them by a short name:
#
# | short name | article | what the lab takes from it |
# |---|---|---|
# | the cron article | *Automação Resiliente com Python: Retries, Lockfile e Idempotência Sem Drama* | the naive cron script and its bad nights, the lockfile, errors sorted before retrying, an expired token that must fail loudly (lessons 01, 02, 03, 05) |
# | the ERP article | *Filas que falham bem: retry, dead-letter, circuit breaker e idempotência com Celery* | the event row with a content key, dead letter as a screen with a redrive button, a breaker and a queue per ERP account, a serial queue (lessons 03, 04, 07, 08, 09) |
# | the async-jobs lesson | *Queues/Workers/async agents* | job states, durable acceptance, redelivery and the effect/ack window, the outbox, dead letters with their origin, checkpoints per step and the policy version a resumed job runs (lessons 04, 06, 07, 09, 12, 16) |
# | the Celery-in-production article | *Celery em produção — retries, idempotência e Celery Beat* | retries with backoff and jitter, the dedup record in the effect's transaction, upsert instead of increment, one Celery Beat and how long to keep keys (lessons 05, 06, 10, 14) |
#
# Where an article is wrong the lab says so and shows it. The Celery-in-production
# article says Celery is at-least-once by default; it is not. By default Celery
# acknowledges a task *before* running it (`task_acks_late=False`), so a worker killed
# mid-task loses it. With late acks alone, a task comes back when the whole worker dies
# (the broker never got its ack) but not when only the pool process running it dies:
# Celery then records a failure and acknowledges it. Adding
# `task_reject_on_worker_lost=True` brings that one back too. On Redis a redelivery waits
# for the visibility timeout, and even the default runs a task twice when its countdown
# is longer than that timeout (lessons 06 and 14).
#
# ### Errata: what the articles get wrong, and where the lab shows it
#
# | article | what it gets wrong | shown in |
# |---|---|---|
# | the cron article | lists timeouts and 5xx among the transient failures to retry with backoff; a read timeout or a 500 can come after the work was done | 05 §1: a server charges, then answers late; the client's `TimeoutError` is *maybe done* |
# | the cron article | adds a fixed jitter of up to 1.5 s to an exponential wait: it barely spreads the clients once the waits grow | 05 §5, the cron article's jitter beside full jitter, 50 clients |
# | the Celery-in-production article | "Celery is at-least-once by default": the default acknowledges before the task runs | 06 §5 (the `ack_first` row) and 14 §1, with a real worker killed |
# | the Celery-in-production article | late acks alone are not enough: a killed pool process's task is marked failed and acknowledged | 14 §1-§4: lost when the child dies, back when the whole worker dies or with `reject_on_worker_lost` |
# | the Celery-in-production article | makes `evento_id` with `uuid4()` when the task is sent: a second dispatch of the same event gets a new key, and the dedup never matches | 03 §2: keys from a uuid make the same intent two jobs |
# | the Celery-in-production article | guards with `select_for_update().filter(...).exists()`, which locks nothing the first time (there is no row yet): two first runs both pass | 13 §3, "A lock on a row that does not exist yet", on a real PostgreSQL |
# | the ERP article | claims its events with a conditional `UPDATE` and no lease: a worker that dies leaves the event `running` for good | 04 §4, "A claim without a lease" |
# | the ERP article | one worker with `concurrency=1` does not keep order: a countdown retry is a new message, and the next one passes it | 08 §4, "What one worker with `concurrency=1` keeps", and 14 §7 |
# | the ERP article | a retry countdown can grow past Redis's visibility timeout, and then the task runs twice, even with Celery's default acks | 14 §6, the ETA cell |
# | the ERP article | its breaker lets every worker's call through when the cooldown ends; a half-open breaker lets one trial call through | 08 §1, the half-open cell: one trial slot, the other worker refused |

# %% [markdown]
# ## Setup
#
# Two things make every lesson repeatable: a `FakeClock`, which moves only when told
# to (so "wait 30 seconds" takes no time and prints the same timestamps on every run),
# and a fresh scratch folder.

# %%
from labkit.clock import FakeClock, isoformat
from labkit.errors import LeaseLost, ResponseLost
from labkit.tables import format_table, jobs_table, show
from labkit.notebook.scratch import fresh_dir
from labkit.store import JobStore
from labkit.world import World

clock = FakeClock()
folder = fresh_dir("00")
store = JobStore(folder / "jobs.db", clock=clock)
print(f"clock={clock}  folder={folder}")

# %% [markdown]
# ## The store in five cells
#
# **1. Accept a job, twice.** A job carries a *key* naming the intent ("send the
# receipt for order 17"). Sending the same key again, as a second cron run or a
# retrying client would, returns the job that already exists instead of a new one.

# %%
key = "shop:order-17:send_receipt:v1"
job, created = store.enqueue("send_receipt", {"order": 17}, key=key)
again, created_again = store.enqueue("send_receipt", {"order": 17}, key=key)
print(f"first call:  job {job.id}, created={created}")
print(f"second call: job {again.id}, created={created_again}")
assert again.id == job.id and created and not created_again
show(jobs_table(store))

# %% [markdown]
# **2. A worker claims it.** Claiming is atomic: one worker gets the job, with a
# *lease* of 30 seconds. Until the lease runs out, nobody else can take it.

# %%
held = store.claim("worker-a", lease_s=30)
print(f"worker-a holds job {held.id}, attempt {held.attempt}, "
      f"lease until {isoformat(held.lease_until)}")
assert store.claim("worker-b") is None
show(jobs_table(store, columns=("id", "state", "attempt", "lease_owner", "lease_until")))

# %% [markdown]
# **3. The worker crashes.** Here `worker-a` simply never comes back (in lesson 04 a
# real process is killed with SIGKILL). Nothing in the database changes at the crash;
# what changes is time: 31 seconds later the lease has expired.

# %%
clock.advance(31)
print(f"now {isoformat(clock.now())}")
show(jobs_table(store, columns=("id", "state", "attempt", "lease_owner", "lease_until")))

# %% [markdown]
# **4. Another worker claims it again.** The job is claimable once its lease has expired:
# that is crash recovery. It comes back as attempt 2, with a new lease token, so when
# `worker-a` wakes up late and tries to finish, the store refuses it.

# %%
taken = store.claim("worker-b", lease_s=30)
print(f"worker-b holds job {taken.id}, attempt {taken.attempt}")
assert taken.id == job.id and taken.attempt == 2
try:
    store.complete(held)
except LeaseLost as exc:
    print(f"worker-a is refused: LeaseLost: {exc}")
else:
    raise AssertionError("a worker whose lease expired must not finish the job")

# %% [markdown]
# **5. It finishes, and the history tells the story.** `worker-b` completes the job.
# The attempts history keeps both runs: who ran, when, and how each ended.

# %%
store.complete(taken, result={"receipt": "sent"})
show(jobs_table(store))
print()
show(
    [{"attempt": a.attempt, "worker": a.worker, "started": isoformat(a.started_at),
      "finished": isoformat(a.finished_at), "outcome": a.outcome}
     for a in store.attempts(job.id)]
)
print()
print(store.counts())
assert store.counts()["succeeded"] == 1 and sum(store.counts().values()) == 1
assert [a.outcome for a in store.attempts(job.id)] == ["lease_expired", "succeeded"]

# %% [markdown]
# ## How a notebook checks itself
#
# The cells that matter end with `assert`s, like the ones above. They are the lesson's
# promises in code: if a change to `labkit` broke, say, the lease, cell 4 would fail
# here instead of printing a wrong table. The continuous integration re-runs every
# notebook and compares each output with the stored one (with nbval), so a lesson cannot
# quietly drift from what its text says.
#
# You can run the same check from a terminal in the lab's folder:
#
# ```
# make check-one NB=00_start_here   # re-run this notebook, compare every output
# make check                        # the same for every lesson
# ```
#
# `check-one` runs `pytest --nbval` in strict mode: the notebook runs from top to
# bottom in a fresh kernel, and every cell must pass its `assert`s and print exactly
# what is stored. That is why every lesson uses a `FakeClock` and a seeded random
# generator: a wall-clock time or an unseeded draw would differ on every run. A failing
# cell is reported with the stored output next to the new one; after you change a
# lesson on purpose, re-run it in JupyterLab and save it: the stored outputs are the new ones.
#
# The exercises work the same way from the other side: you write a function, and a
# cell calling `check("ex03")` (from `labkit.grading`) runs the exercise's checks on it
# and prints a table of what passed, with points and hints.

# %% [markdown]
# ## The outside world and its truth
#
# A job exists to do something outside the database: send an email, charge a card,
# call an ERP. `labkit.world.World` plays that outside world. It keeps its own SQLite
# file and records each effect *before* it replies, so after any crash the world still
# knows what really happened. Lessons judge a strategy by reading that file: one effect
# per key is `ok`, two is a `duplicate`, none is `lost`.
#
# The mail provider does not deduplicate. Sending the receipt twice with the same key
# (as a naive retry would) sends two emails:

# %%
world = World(folder / "world.db", clock=clock)
world.mail.send("ana@example.com", "Your receipt for order 17", key=key)
world.mail.send("ana@example.com", "Your receipt for order 17", key=key)
show(
    [{"id": e.id, "service": e.service, "action": e.action, "key": e.key,
      "to": e.payload["to"], "at": isoformat(e.at)} for e in world.effects()]
)
assert world.count(key) == 2
print(f"effects for {key}: {world.count(key)}  -> a duplicate")

# %% [markdown]
# The world keeps a second record: its log of **calls**, every request it received and
# how it ended for the caller. The two can disagree, and that disagreement is where
# most of this lab lives. Here the payments API charges the card and the reply is lost
# on the way back: the caller sees a timeout, the effects show the charge.

# %%
world.payments.script("lose_response")
try:
    world.payments.charge("ana", 4_990, key="shop:order-17:charge:v1")
except ResponseLost as exc:
    print(f"the caller saw: {type(exc).__name__}: {exc}")
print()
show([{"id": c.id, "service": c.service, "key": c.key, "outcome": c.outcome,
       "status": c.status} for c in world.calls(service="payments")])
print(f"charges recorded: {world.count('shop:order-17:charge:v1', 'payments')}")
assert [c.outcome for c in world.calls(service="payments")] == ["ok_response_lost"]
assert world.count("shop:order-17:charge:v1", "payments") == 1

# %% [markdown]
# So read a lesson's world in two ways: `world.effects()` and `world.count(key)` for
# what really happened; `world.calls()` for what each caller was told. The lessons that
# follow are about making each count exactly one, whatever crashes and whatever replies
# are lost.

# %%
store.close()
world.close()
print(format_table([{"file": p.name} for p in sorted(folder.iterdir()) if p.suffix == ".db"]))

# %% [markdown]
# ## What you should see
#
# | step | what the output shows |
# |---|---|
# | enqueue twice with one key | one job (id 1); `created=True`, then `created=False` |
# | claim | `worker-a`, attempt 1, lease until 00:00:30; `worker-b` gets nothing |
# | 31 s later | still `running` for `worker-a`, lease in the past |
# | claim again | `worker-b`, attempt 2; `worker-a`'s `complete` raises `LeaseLost` |
# | finish | `succeeded`; history: attempt 1 `lease_expired`, attempt 2 `succeeded` |
# | the world | two `mail` effects for one key: a duplicate |
# | a lost reply | the caller saw `ResponseLost`; the call log says `ok_response_lost`; one charge |
#
# **What to take away**
#
# - A job's key names the intent: enqueueing the same key twice returns the job that
#   already exists, not a second one.
# - A claim is atomic and comes with a lease: if the worker crashes, the lease expires
#   and another worker takes the job back as a new attempt.
# - A worker whose lease expired is refused when it tries to finish (`LeaseLost`).
# - Judge a strategy by the outside world's records (`world.effects()`, `world.count(key)`),
#   not by what the code or the caller believes happened.
# - A lost reply is not a failed call: the caller saw an error, and the charge was made.
# - Every lesson checks itself: `assert`s, nbval re-running the notebook, and a fake
#   clock and seeded randomness so each run prints the same output.
#
# ## Glossary and next
#
# The terms of this lesson, and of every other, in English and Portuguese:
# [Glossary / Glossário](glossary.md).
#
# [Next: 01 · The naive script](01_naive_script.ipynb)
