# %% [markdown]
# # 14 · Celery in production
#
# *Real Celery workers, really killed: which settings lose a task, which run it twice,
# and which make it run once, each shown by the outside world's records and the broker.*
#
# > **Resumo.** Workers Celery de verdade, derrubados com `kill -9`, com RabbitMQ e Redis.
# > O padrão do Celery **não** é at-least-once: o ack sai antes de a tarefa rodar, e um
# > worker morto perde a tarefa; `acks_late` sozinho também a perde se o processo filho
# > morre; `reject_on_worker_lost` a traz de volta (e cobra duas vezes sem idempotência).
# > Depois: o Redis, retries, prefetch, dois Beats, um deploy e a tarefa venenosa.
#
# Run time: about 45 to 60 seconds. Every section starts or kills real `celery worker`
# processes (about a second each to start), and a few wait on purpose: retries with real
# countdowns (about 5 s), two `celery beat` processes left to tick (about 3 s), and
# Redis's visibility timeout and a countdown (about 7 s), a deploy's three workers
# stopped with SIGTERM (about 5 s), and a poison task's redeliveries (about 3 s).
#
# The Celery-in-production article says Celery is "at-least-once by default". **It is
# not.** By default Celery acknowledges a message just before the task runs
# (`task_acks_late=False`): a worker that dies mid-task has already told the broker
# "done", and the task is gone. This lesson shows that, and every setting around it, with
# real workers and real `SIGKILL`s:
#
# 1. the default, and a killed worker; 2. `acks_late=True` alone; 3. plus
# `reject_on_worker_lost=True`, and the idempotent task that makes the redelivery
# harmless; 4. the whole worker killed: RabbitMQ redelivers; 5. prefetch; 6. Redis: when
# a killed worker's task really comes back, and an ETA that runs twice; 7. retries,
# mapped to lesson 05; 8. the welcome e-mail inside a transaction; 9. two Beats; 10. the
# crash table of lesson 06, on Celery; 11. a deploy: SIGTERM, warm shutdown, grace
# period; 12. the poison task: `reject_on_worker_lost` redelivers it forever, until a delivery
# counter and a dead-letter queue stop it.

# %% [markdown]
# ## Setup: the brokers
#
# This lesson needs RabbitMQ (5672), Redis (6379) and PostgreSQL (5432) on this machine,
# and labkit's `services` extra (Celery, psycopg, redis). The first cell checks, and if
# one is missing says the command that fixes it (`make venv`, or the lab's
# `compose.yaml` for the services) and stops here instead of failing in every later cell.

# %%
from labkit.notebook.needs import require

require("celery", "psycopg", "redis", extra="services",
        services=("rabbitmq", "redis", "postgres"))

# %% [markdown]
# A run (`labkit.integrations.celery.run.CeleryRun`) owns a queue with a fresh name, a
# PostgreSQL schema and a world file, so nothing here collides with anyone else on the
# same broker. Its app (`labkit.integrations.celery.app`) has one task per Celery
# setting, all doing the same work: charge 1.00 BRL through the world's payment API.
# `run.worker()` starts a real `celery worker --pool prefork`: a main process that talks
# to the broker, and pool children that run the tasks.
#
# To kill a worker at an exact moment, the task stops there and waits:
# `run.hold(point, task, ...)` sends a task and returns once it is paused at `point`;
# `run.kill_held(worker)` SIGKILLs the pool children running the held tasks, for real.
# Celery notices a dead child at once, but declares its task lost only at a later pool
# check (every 5 s, or when another child exits) once `worker_lost_wait` has passed (10 s
# by default, 1 s in the lab's app): that is why a kill can take a few seconds, and why
# several tasks are killed together. `run.settle()` then waits until each killed task
# was received again (or 2 s passed without it: the bound on "not yet"), the queue has
# moved on and nothing is running, so "no charge" means lost.
#
# The code the workers run, exactly as they import it: the app's settings and every task
# of this lesson (`make_app`), and the lesson-06 charge the `lab.charge_*` tasks call
# (`run_strategy`, then the `ack_late` handler: a plain charge, the key only a tag).

# %%
from labkit.integrations.celery.app import task_source

print(task_source())

# %%
from labkit.integrations.celery.run import CeleryRun
from labkit.tables import show
from labkit.notebook.scratch import fresh_dir

AMQP = "amqp://guest:guest@127.0.0.1:5672//"
REDIS = "redis://127.0.0.1:6379/0"
POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"

rabbit = CeleryRun(AMQP, fresh_dir("14-rabbit"), postgres=POSTGRES, beat=True)
w1 = rabbit.worker("w1", concurrency=7)
print("worker ready; pool children:", len(w1.pool_children()))

# %% [markdown]
# ## 1 · Celery's default: acknowledged before it runs; 2 · `acks_late=True` alone
#
# `lab.charge_early` has Celery's default options: the worker acks the message just
# before the task starts. `lab.charge_late` has `acks_late=True`: the ack waits until
# the task ends. Each is paused *before* the charge, and both pool children are
# SIGKILLed (what the kernel's OOM killer does to a child that grew too big).
#
# The default loses the task: the broker already had its ack. `acks_late` alone loses it
# too: when the pool child dies, the main process raises `WorkerLostError`, counts it as
# the task's failure, and **acknowledges** the message
# (`task_acks_on_failure_or_timeout=True` by default). The world has no charge, the
# queue is empty, and the worker's log names the error.

# %%
rabbit.hold("before_effect", "lab.charge_early", "ack_late", "default-1", "cus_1", 100)
rabbit.hold("before_effect", "lab.charge_late", "ack_late", "late-1", "cus_1", 100)
rabbit.kill_held(w1)
rabbit.settle()
show([{"task options": "Celery's defaults", "charges": rabbit.count("default-1")},
      {"task options": "acks_late=True", "charges": rabbit.count("late-1")}])
print("messages left in the queue:", rabbit.depth(),
      "| WorkerLostError in the log:", "WorkerLostError" in w1.log_text())
assert rabbit.count("default-1") == 0 and rabbit.count("late-1") == 0
assert rabbit.depth() == 0

# %% [markdown]
# ## 3 · `acks_late=True` + `reject_on_worker_lost=True`: redelivered
#
# Now a lost child makes the worker *reject with requeue*: the broker delivers the
# message again, to a new child. Killed before the charge, the task runs once; killed
# **after** the charge, it runs twice, because the charge itself is not idempotent.

# %%
rabbit.hold("before_effect", "lab.charge_late_reject", "ack_late", "reject-1", "cus_1", 100)
rabbit.hold("after_effect", "lab.charge_late_reject", "ack_late", "reject-2", "cus_1", 100)
rabbit.kill_held(w1)
rabbit.settle()
show([{"killed at": "before_effect", "charges": rabbit.count("reject-1")},
      {"killed at": "after_effect", "charges": rabbit.count("reject-2")}])
assert (rabbit.count("reject-1"), rabbit.count("reject-2")) == (1, 2)

# %% [markdown]
# At-least-once is what this buys, and the task must make the second run harmless.
# `lab.charge_pg` keeps its effect in PostgreSQL: in **one transaction** it inserts the
# dedup record (`INSERT INTO processed ... ON CONFLICT DO NOTHING RETURNING key`, an
# upsert that returns a row only to the first run) and the charge row. A kill inside the
# transaction rolls both back; a kill after the commit finds the record on redelivery.
# The charge rows are counted in PostgreSQL itself.

# %%
from labkit.integrations.celery.app import charges_for

rabbit.hold("after_effect", "lab.charge_pg", "pg-1", "cus_1", 100)
rabbit.hold("after_commit", "lab.charge_pg", "pg-2", "cus_1", 100)
rabbit.kill_held(w1)
rabbit.settle()
show([
    {"killed at": "after_effect (inside the transaction)", "charge rows": charges_for(rabbit.config, "pg-1")},
    {"killed at": "after_commit (before the late ack)", "charge rows": charges_for(rabbit.config, "pg-2")},
])
assert charges_for(rabbit.config, "pg-1") == 1 and charges_for(rabbit.config, "pg-2") == 1

# %% [markdown]
# ## 4 · The whole worker killed: RabbitMQ redelivers on connection loss
#
# A dead pool child is one thing; a dead *main process* (the container is killed, the
# machine reboots) is another: the broker connection dies with it, and RabbitMQ puts
# every unacknowledged message of that connection back in the queue. So with
# `acks_late=True` **alone**, a whole-worker kill is survived where a child kill was not.
# The queue holds the message again before any new worker exists.
#
# Sections 4 and 5 kill whole workers, so they get a second run, `one`, with its own
# queue and one pool child per worker (`w1` stays up for later sections).

# %%
one = CeleryRun(AMQP, fresh_dir("14-one"))
w2 = one.worker("w2")
one.hold("before_effect", "lab.charge_late", "ack_late", "main-1", "cus_1", 100)
w2.kill_main()
one.unpause()
one.wait_depth(1)  # RabbitMQ notices the closed connection within moments
print("worker alive:", w2.alive, "| messages back in the queue:", one.depth())
assert one.depth() == 1

w3 = one.worker("w3")
print("charges after a new worker started:", one.wait_effects("main-1", 1))
assert one.count("main-1") == 1

# %% [markdown]
# ## 5 · Prefetch: what a killed worker was holding
#
# A worker does not take one message at a time: it *prefetches*
# `worker_prefetch_multiplier × concurrency` messages: the multiplier is 4 by default,
# and the concurrency defaults to the number of CPUs (`celery worker --concurrency`'s
# help says so); this worker runs one pool process, so it holds 4. Four tasks are sent; the
# first stops before its charge. With the default, the worker holds all four (the queue
# is empty) while it runs only one, so nobody else could take the other three. With
# early acks, only the running one was acknowledged: kill the worker and the other three
# come back, the running one is lost.

# %%
one.pause("before_effect")  # w3 has the default prefetch: 4
for n in range(4):
    one.send("lab.charge_early", "ack_late", f"prefetch4-{n}", "cus_1", 100)
one.wait_paused()
one.wait_depth(0)  # the three others travel to the worker too
held = one.depth()
w3.kill_main()
back = one.wait_depth(3) and one.depth()
one.unpause()
w4 = one.worker("w4", prefetch_multiplier=1)
one.settle()
print("queue while the first task ran:", held, "| back after the kill:", back)
print("charges per task:", [one.count(f"prefetch4-{n}") for n in range(4)])
assert (held, back) == (0, 3)
assert [one.count(f"prefetch4-{n}") for n in range(4)] == [0, 1, 1, 1]

# %% [markdown]
# With `worker_prefetch_multiplier=1` and late acks, the worker holds just the one it is
# running: the other three stay in the queue for any worker, and a kill gives back all
# four, the running one included.

# %%
one.pause("before_effect")
for n in range(4):
    one.send("lab.charge_late", "ack_late", f"prefetch1-{n}", "cus_1", 100)
one.wait_paused()
held = one.depth()
w4.kill_main()
back = one.wait_depth(4) and one.depth()
one.unpause()
w5 = one.worker("w5", prefetch_multiplier=1)
one.settle()
print("queue while the first task ran:", held, "| back after the kill:", back)
print("charges per task:", [one.count(f"prefetch1-{n}") for n in range(4)])
assert (held, back) == (3, 4)
assert [one.count(f"prefetch1-{n}") for n in range(4)] == [1, 1, 1, 1]

# %% [markdown]
# ## 6 · Redis: when does a killed worker's task come back?
#
# Redis has no connection-bound acks. kombu keeps each delivered message in an
# `unacked` hash (with its delivery time in `unacked_index`); an ack deletes it. When the
# worker dies, the message just stays there. A *restore* moves it back to the queue, but
# only if it is older than `visibility_timeout` (1 hour by default), and only when a
# restore runs: once when a worker starts consuming, then every
# `unacked_restore_interval` (10 s) × `unacked_restore_throttle` (10), about 100 s, in
# each live worker (`unacked_restore_limit` caps how many per sweep). So the real delay
# is "visibility timeout, then the next restore". The lesson uses a 1-second visibility
# timeout and two workers; the one that gets the task is killed, whole, after the charge.

# %%
redis_run = CeleryRun(REDIS, fresh_dir("14-redis"), transport_options={"visibility_timeout": 1})
pair = (redis_run.worker("r1"), redis_run.worker("r2"))
redis_run.pause("after_effect")
redis_run.send("lab.charge_late_reject", "ack_late", "redis-1", "cus_1", 100)
redis_run.wait_paused()
victim = redis_run.holder(*pair)
survivor = pair[1] if victim is pair[0] else pair[0]
victim.kill_main()
redis_run.unpause()
print("queue:", redis_run.depth(), "| unacked:", redis_run.unacked())
assert (redis_run.depth(), redis_run.unacked()) == (0, 1)

# %% [markdown]
# The other worker is alive and idle, and the visibility timeout passes. Three seconds
# later the task is still stranded: the survivor did its start-up restore before the
# message existed, and its next sweep is about 100 s away.

# %%
import time

time.sleep(3)  # real time on purpose: the visibility timeout is real time
print("charges:", redis_run.count("redis-1"), "| unacked:", redis_run.unacked())
assert redis_run.count("redis-1") == 1 and redis_run.unacked() == 1

# %% [markdown]
# Another worker starting now (past the timeout) restores it at start, and the task runs
# again. The world's own timestamps measure the gap between the two charges.

# %%
r3 = redis_run.worker("r3")
redis_run.wait_effects("redis-1", 2)
redis_run.wait_unacked(0)  # the second run's ack reaches Redis a moment after its charge
first, second = redis_run.effects("redis-1")
print("charges:", redis_run.count("redis-1"), "| unacked:", redis_run.unacked())
print("came back later than the visibility timeout:", second.at - first.at >= 1.0)
print("and later than the 3 s we waited:", second.at - first.at >= 3.0)
assert second.at - first.at >= 3.0

# %% [markdown]
# In production, set `broker_transport_options={"visibility_timeout": ...}` longer than
# your longest task *and* your longest countdown, and know that recovery waits for it
# plus the next restore (`unacked_restore_interval`, `unacked_restore_throttle`).
#
# **ETA longer than the visibility timeout, under Celery's default acks.** Early acks do
# not help here: a task is acknowledged when it *starts*, and a task sent with
# `countdown=4` is delivered at once and held, unacknowledged, by a worker until its
# time. Retries with a countdown (section 7) are such messages too. After 1 s it looks
# abandoned: the next restore puts it back in the queue and the other worker takes it
# too; at the ETA both run it. This run sweeps every second
# (`unacked_restore_interval=1`, `unacked_restore_throttle=1`), so every held copy is
# restored again each second it waits.

# %%
redis_run.close()
fast = {"visibility_timeout": 1, "unacked_restore_interval": 1, "unacked_restore_throttle": 1}
eta_run = CeleryRun(REDIS, fresh_dir("14-eta"), transport_options=fast)
for name in ("e1", "e2"):
    eta_run.worker(name)
eta_run.send("lab.charge_early", "ack_late", "eta-1", "cus_1", 100, countdown=4)
eta_run.wait_effects("eta-1", 2)
eta_run.settle()
print("one task with Celery's default options, sent once; charged more than once:",
      eta_run.count("eta-1") >= 2)
assert eta_run.count("eta-1") >= 2
eta_run.close()

# %% [markdown]
# ## 7 · Retries, mapped to lesson 05
#
# | lesson 05 (`labkit.retry`) | Celery task option |
# |---|---|
# | classify: transient errors retry | `autoretry_for=(TransientError,)` |
# | `exponential(base=1, cap=4)` | `retry_backoff=1`, `retry_backoff_max=4` |
# | `full_jitter(base, cap)` | `retry_jitter=True` (Celery's default!) |
# | `RetryPolicy(max_attempts=4)` | `max_retries=3` (retries, not attempts) |
# | Retry-After honoured | `raise self.retry(exc=exc, countdown=exc.retry_after)` |
# | a retry is the same job, `retry_wait` | a retry is a **new message**; with a countdown a worker takes it at once and holds it, unacknowledged, until its ETA |
#
# Celery's own backoff function and lesson 05's give the same delays:

# %%
import random

from celery.utils.time import get_exponential_backoff_interval

from labkit.retry import exponential

celery_delays = [get_exponential_backoff_interval(1, n, 4, full_jitter=False) for n in range(4)]
labkit_delays = [exponential(1, 4)(n, random.Random(14)) for n in range(4)]
print("Celery:", celery_delays, "| labkit:", labkit_delays)
assert celery_delays == labkit_delays

# %% [markdown]
# For real: the payment API fails twice with a 503, then works (`lab.charge_backoff`,
# waits 1 s then 2 s), and then answers 429 with `Retry-After: 1` once
# (`lab.charge_retry_after`). The world logged every call it received.

# %%
rabbit.world.payments.script("fail_before", "fail_before")
rabbit.send("lab.charge_backoff", "backoff-1", "cus_1", 100)
rabbit.wait_calls("backoff-1", 3)
rabbit.world.payments.script("rate_limit", retry_after=1)
rabbit.send("lab.charge_retry_after", "retry-after-1", "cus_1", 100)
rabbit.wait_calls("retry-after-1", 2)
show([{"key": c.key, "outcome": c.outcome, "status": c.status} for c in rabbit.calls("payments")
      if c.key in ("backoff-1", "retry-after-1")])
calls = [c for c in rabbit.calls("payments") if c.key == "retry-after-1"]
print("second call waited the Retry-After:", calls[1].at - calls[0].at >= 1.0)
assert calls[1].at - calls[0].at >= 1.0
assert rabbit.count("backoff-1") == 1 and rabbit.count("retry-after-1") == 1

# %% [markdown]
# **A retry breaks a serial queue's order.** The ERP article sends one customer's
# updates through a queue with one worker, so they apply in order (here: run `one`,
# worker `w5`, one pool child, prefetch 1). Step A fails once and retries with
# `countdown=2`: the retry is a new message, and B and C pass it. The world's log of
# what the ERP received:

# %%
for step, fail_first in (("A", True), ("B", False), ("C", False)):
    one.send("lab.serial_step", step, fail_first)
one.wait_effects("A", 1)
order = [e.key for e in one.effects(service="webhook") if e.key in ("A", "B", "C")]
print("sent A, B, C; the ERP received:", order)
assert order == ["B", "C", "A"]

# %% [markdown]
# Where order matters, do not retry inside the serial queue: park the failed step (and
# everything after it for that customer), as lesson 08 does.
#
# ## 8 · The welcome e-mail inside `transaction.atomic`
#
# The Celery-in-production article fixes its duplicate welcome e-mail with a dedup record
# written in the same `transaction.atomic` block as the SMTP send. That rule is right for
# a *database* effect (section 3). But a transaction undoes database writes only: the
# e-mail is not in it. `lab.welcome_atomic` is that task (with psycopg for Django): the
# worker dies after the send and before the commit, the dedup record rolls back with the
# transaction, and the redelivery sends again.
#
# `lab.welcome_reconciled` is lesson 06's `reconcile` instead: it commits "sending"
# before the send; a rerun that finds "sending" asks the provider whether a message with
# this key exists (providers keep a tag or metadata per message) before sending again.
# Both are killed at the same point; the world counts the e-mails.

# %%
rabbit.hold("after_effect", "lab.welcome_atomic", "ana@example.com", "welcome-ana-1")
rabbit.hold("after_effect", "lab.welcome_reconciled", "bia@example.com", "welcome-bia-1")
rabbit.kill_held(w1)
rabbit.settle()
show([{"task": "lab.welcome_atomic", "e-mails": rabbit.count("welcome-ana-1")},
      {"task": "lab.welcome_reconciled", "e-mails": rabbit.count("welcome-bia-1")}])
assert (rabbit.count("welcome-ana-1"), rabbit.count("welcome-bia-1")) == (2, 1)

# %% [markdown]
# The transaction hurts in the other direction too: a signup that sends its e-mail and
# then fails leaves an e-mail for a user who never existed.

# %%
from labkit.integrations.celery.app import SQL, pg

try:
    with pg(rabbit.config) as conn, conn.transaction():
        conn.execute(SQL["add_user"], {"email": "caio@example.com"})
        rabbit.world.mail.send("caio@example.com", "Welcome!", key="welcome-caio")
        raise ValueError("the signup failed after the e-mail was sent")
except ValueError:
    pass
with pg(rabbit.config) as conn:
    users = conn.execute(SQL["count_users"]).fetchone()["n"]
print("users:", users, "| welcome e-mails sent:", rabbit.count("welcome-caio"))
assert users == 0 and rabbit.count("welcome-caio") == 1

# %% [markdown]
# What is safe here: write the *intent* to send in the signup's transaction (an outbox
# row, lesson 09) and let a relay enqueue the send after the commit; a rolled-back
# signup leaves no intent. The relay and the task are at-least-once, so the send itself
# still needs a provider key, or the reconcile above.

# %%
import json

for email, fails in (("davi@example.com", True), ("eva@example.com", False)):
    try:
        with pg(rabbit.config) as conn, conn.transaction():
            conn.execute(SQL["add_user"], {"email": email})
            conn.execute(SQL["add_outbox"], {"topic": "welcome", "payload": json.dumps({"email": email})})
            if fails:
                raise ValueError("signup failed")
    except ValueError:
        pass
with pg(rabbit.config) as conn:  # the relay
    for row in conn.execute(SQL["unsent_outbox"]).fetchall():
        rabbit.send("lab.welcome_reconciled", json.loads(row["payload"])["email"], f"welcome-{row['id']}")
        conn.execute(SQL["mark_sent"], {"id": row["id"]})
rabbit.settle()
relayed = [e.payload["to"] for e in rabbit.effects(service="mail") if e.payload["to"] in ("davi@example.com", "eva@example.com")]
print("e-mails the relay sent:", relayed)
assert relayed == ["eva@example.com"]

# %% [markdown]
# ## 9 · Two `celery beat` processes
#
# Beat is a scheduler that publishes periodic tasks; two of them (two replicas of a
# deployment) do not know about each other. Here both publish `lab.tick` every second
# (to the queue `w1` consumes),
# each run carrying its slot (the whole second it fired for). The task records every
# delivery, then, in one ledger transaction, runs the report only if the slot key
# `schedule:nightly:<slot>` (lesson 10) is not done yet.

# %%
two = (rabbit.beat("beat1"), rabbit.beat("beat2"))
time.sleep(2.5)  # real seconds: each beat fires once per second
for beat in two:
    beat.close()
rabbit.settle()  # the worker ran everything the beats sent
deliveries = [e.key for e in rabbit.effects(service="webhook") if e.key.startswith("schedule:")]
reports = [e.key for e in rabbit.effects(service="ledger") if e.key.startswith("schedule:")]
print("slots delivered more than once:", len(deliveries) > len(set(deliveries)))
print("every delivered slot reported exactly once:", sorted(set(deliveries)) == sorted(reports))
assert len(deliveries) > len(set(deliveries)) and sorted(set(deliveries)) == sorted(reports)

# %% [markdown]
# ## 10 · The crash table of lesson 06, on Celery
#
# The same six strategies (`labkit.explore.strategies`), each run as a Celery task and killed
# at a point: the pool children are SIGKILLed while the tasks are paused there. The late
# strategies run with `acks_late=True, reject_on_worker_lost=True`; `ack_first` with
# Celery's default; and one more row, `acks_late alone`, that lesson 06 did not need.
# To fit in this lesson, one column runs here, `after_effect` (the charge is done, the
# task has not finished), next to lesson 06's verdict for the same cell (its simulated
# worker, re-run here); the lab's own test suite runs every column.

# %%
from labkit.explore import crash_matrix
from labkit.integrations.celery.table import EXPECTED, ROWS, crash_column

column = crash_column(rabbit, w1, "after_effect")  # w1: seven pool children
lesson06 = crash_matrix(points=["after_effect"], seed=6)
twin = {row: "-" if row == "acks_late alone" else lesson06.outcome(ROWS[row][1], "after_effect")
        for row in ROWS}
show([{"strategy": row, "lesson 06": twin[row], "Celery": column[row]} for row in ROWS])
assert column == {row: EXPECTED[row]["after_effect"] for row in ROWS}
assert all(column[row] == twin[row] for row in ROWS if twin[row] != "-")
w5.stop()  # a warm shutdown: it finishes what it runs, then exits
print("w5 exit code after a warm shutdown:", w5.popen.returncode)
rabbit.close()
one.close()
print("no Celery process left:", rabbit.leftovers() == [] and one.leftovers() == [])

# %% [markdown]
# The verdicts match lesson 06 where the strategies match: at `after_effect` the plain
# late ack charges twice, check-then-act charges twice (its mark is not written yet),
# and the three fixes hold. Where Celery differs is the ack itself:
#
# - "ack late" is at-least-once only with `reject_on_worker_lost=True` (or a whole-worker
#   death on RabbitMQ); `acks_late` alone behaves like `ack_first` when the pool child
#   dies, and loses the task at `before_effect` (section 2);
# - at `after_commit` (the task's work is done and committed), lesson 06's store commits
#   the result and the ack in one transaction, so `ack_late` is `ok` there; Celery's
#   late ack is a separate message sent after the task returns, so a kill in between
#   redelivers and `ack_late` is a `duplicate`. And lesson 06's `ack_first` passes
#   `after_commit` *before* its effect (lost), where a Celery task body has nothing
#   before its ack to kill. The test checks both differences against lesson 06's table;
# - lesson 06's `after_ack` column has no Celery twin: the late ack is sent by the main
#   process after the child returns, with no task code in between to pause.

# %% [markdown]
# ## 11 · A deploy: SIGTERM, warm shutdown and the grace period
#
# The Celery-in-production article's first scenario is a deploy: the old workers are
# stopped while they run tasks. A deploy does not start with `kill -9`. `docker stop`
# and Kubernetes first send SIGTERM, wait a grace period (Kubernetes' default
# `terminationGracePeriodSeconds` is 30 s, in its "Pod Lifecycle" docs), and only then
# send SIGKILL. Celery's Workers guide ("Stopping the worker") says that on SIGTERM the
# worker finishes all currently executing tasks before it terminates: a **warm
# shutdown**. A third run, `deploy`, with one worker at a time. First, a task in hand
# (paused before its charge) when SIGTERM arrives:

# %%
deploy = CeleryRun(AMQP, fresh_dir("14-deploy"))
w7 = deploy.worker("w7")
deploy.hold("before_effect", "lab.charge_early", "ack_late", "deploy-1", "cus_1", 100)
w7.terminate()  # what a deploy sends first
w7.wait_log("Warm shutdown")
print("after SIGTERM, still finishing its task:", w7.alive)
deploy.release_held()  # the task goes on to its charge
print("exit code once the task is done:", w7.popen.wait(30))
print("charges:", deploy.count("deploy-1"))
assert deploy.count("deploy-1") == 1 and w7.popen.returncode == 0

# %% [markdown]
# Now the task outlasts the grace period: after SIGTERM it is still paused, so the
# supervisor sends SIGKILL to the whole worker. What happens to the task depends on when
# it was acknowledged. With Celery's default the ack went out when the task started, so
# it is gone; with `acks_late=True` the broker still holds the message, and the next
# worker runs it (the whole worker died, as in section 4).

# %%
def deploy_cut_short(task, key, worker):
    w = deploy.worker(worker)
    deploy.hold("before_effect", task, "ack_late", key, "cus_1", 100)
    w.terminate()
    w.wait_log("Warm shutdown")
    w.kill_main()  # the grace period is over
    deploy.unpause()


deploy_cut_short("lab.charge_early", "deploy-2", "w8")
deploy_cut_short("lab.charge_late", "deploy-3", "w9")
w10 = deploy.worker("w10")  # the new version's worker
deploy.wait_effects("deploy-3", 1)
deploy.settle()
show([{"task options": "Celery's defaults", "charges": deploy.count("deploy-2")},
      {"task options": "acks_late=True", "charges": deploy.count("deploy-3")}])
assert deploy.count("deploy-2") == 0 and deploy.count("deploy-3") == 1
deploy.close()
print("no Celery process left:", deploy.leftovers() == [])

# %% [markdown]
# So a deploy loses a default task that runs longer than the grace period, and
# redelivers a late-acked one, which must then be idempotent (section 3). Make the grace
# period longer than your longest task, keep tasks short (split long work into steps),
# and use late acks with an idempotent task for the rest.

# %% [markdown]
# ## 12 · The poison task: `reject_on_worker_lost` redelivers it forever
#
# Section 3's setting has a price, and Celery's docs name it. Its Configuration guide
# (`task_reject_on_worker_lost`, the same words in `Task.reject_on_worker_lost`'s
# docstring): "Setting this to true allows the message to be re-queued instead, so that
# the task will execute again by the same worker, or another worker. Warning: Enabling
# this can cause message loops; make sure you know what you're doing." A task whose run
# always kills its own process (an input that makes it grow until the OOM killer picks
# it) is requeued, delivered again and killed again, for as long as a worker runs.
# `lab.poison` records each delivery in the world, then SIGKILLs its own pool process.
#
# A child that kills itself is often declared lost only at the pool's next periodic
# check, every 5 s; these two runs check every 0.2 s (`quick_pool_check=True`, like the
# shortened `worker_lost_wait`: the outcome is the same, the lesson waits less).

# %%
from labkit.integrations.celery.harness import wait_until

loop = CeleryRun(AMQP, fresh_dir("14-poison"), quick_pool_check=True)
w11 = loop.worker("w11")
loop.send("lab.poison", task_id="poison-1")
loop.wait_effects("poison-1", 4)
w11.kill_main()  # we stop here; the loop would not
loop.wait_depth(1)
first = loop.effects("poison-1")[:4]
show([{"delivery": n, "task id": e.key, "then": "its process was killed"} for n, e in enumerate(first, 1)])
print("4 deliveries in under 5 s:", first[3].at - first[0].at < 5.0,
      "| WorkerLostError in the log:", "WorkerLostError" in w11.log_text())
print("worker stopped; the message is back in the queue for the next one:", loop.depth())
assert first[3].at - first[0].at < 5.0 and loop.depth() == 1
loop.close()

# %% [markdown]
# The message cannot say how often it came: a classic queue (this lesson's) requeues the
# very same message, with only AMQP's `redelivered` flag set. Quorum queues do count:
# they set an `x-delivery-count` header and, past the queue's `x-delivery-limit`, drop or
# dead-letter the message (RabbitMQ's "Quorum Queues" guide, "Poison Message Handling").
# (Celery 5.7, installed here, also adds `retry_on_worker_lost`: a lost task is sent again
# as a retry, so `max_retries` bounds it; see `Task.retry_on_worker_lost`'s docstring.)
#
# The fix on a classic queue keeps the counter outside the message. `lab.poison_limited`
# counts its deliveries in the world, keyed by the task id (a redelivery keeps it), and
# from delivery `POISON_LIMIT + 1` on it raises `celery.exceptions.Reject(requeue=False)`
# instead of running. RabbitMQ then *dead-letters* the message: this run, `dlx`, declares
# its queue with the `x-dead-letter-exchange` argument (Celery's `task_queues`, a kombu
# `Queue(..., queue_arguments={...})`), and a queue bound to that exchange keeps the
# message for a person to look at.

# %%
from labkit.integrations.celery.app import POISON_LIMIT

dlx = CeleryRun(AMQP, fresh_dir("14-dlx"), dead_letter=True, quick_pool_check=True)
w12 = dlx.worker("w12")
dlx.send("lab.poison_limited", task_id="poison-2")
wait_until(lambda: dlx.dead_letters() == 1, 30, "the message in the dead-letter queue")
show([{"delivery": n, "then": "its process was killed" if n <= POISON_LIMIT else "Reject(requeue=False)"}
      for n, _ in enumerate(dlx.effects("poison-2"), 1)])
print("queue:", dlx.depth(), "| dead-letter queue:", dlx.dead_letters(),
      "| the worker lives on:", w12.alive)
assert dlx.count("poison-2") == POISON_LIMIT + 1 and (dlx.depth(), dlx.dead_letters()) == (0, 1)
dlx.close()
print("no Celery process left:", loop.leftovers() == [] and dlx.leftovers() == [])
assert loop.leftovers() == [] and dlx.leftovers() == []

# %% [markdown]
# One more limit for late acks on RabbitMQ: `consumer_timeout`, 30 minutes by default.
# A consumer that holds a delivery unacknowledged longer than that has its channel closed
# with a `PRECONDITION_FAILED` error, and the channel's deliveries go back to the queue
# (RabbitMQ's "Consumers" guide, "Delivery Acknowledgement Timeout"). A late-acked task
# that runs longer, and a countdown or ETA task that a worker holds unacknowledged until
# its time (section 6: the worker takes it at once), both hit it: the task runs again
# elsewhere. Keep late-acked tasks and countdowns well under it, or raise it on the broker.

# %% [markdown]
# ## What you should see
#
# | step | what the world and the broker show |
# |---|---|
# | 1 · default, child killed before the charge | 0 charges, queue 0: lost |
# | 2 · `acks_late` alone, child killed | 0 charges, queue 0, `WorkerLostError`: lost |
# | 3 · + `reject_on_worker_lost` | killed before: 1 charge; killed after: 2 |
# | 3 · idempotent (PostgreSQL, one transaction) | 1 charge row at either point |
# | 4 · main process killed, `acks_late` alone | queue 1 before any worker; 1 charge |
# | 5 · prefetch 4, early ack | queue 0 while running; 3 back; charges 0, 1, 1, 1 |
# | 5 · prefetch 1, late ack | queue 3 while running; 4 back; charges 1, 1, 1, 1 |
# | 6 · Redis, whole worker killed | unacked 1; still 1 charge 3 s later; 2 once a worker starts |
# | 6 · Redis, countdown > visibility timeout, default acks | one task, charged more than once |
# | 7 · backoff, Retry-After | 503, 503, ok; 429, ok: 1 charge each |
# | 7 · serial queue with a retry | sent A, B, C; received B, C, A |
# | 8 · killed after the send: `transaction.atomic` / reconcile | 2 e-mails / 1 e-mail |
# | 8 · signup fails after the send / outbox | 0 users, 1 e-mail / only the committed user mailed |
# | 9 · two beats | slots delivered twice, each reported once |
# | 10 · crash table, `after_effect` | Celery = lesson 06 for all six; `acks_late alone` ok |
# | 11 · SIGTERM, task in hand | warm shutdown: the task finishes, 1 charge, exit code 0 |
# | 11 · grace period over, SIGKILL | default: 0 charges (lost); `acks_late`: 1 charge on the next worker |
# | 12 · poison task, `reject_on_worker_lost` | 4 deliveries in under 5 s, each killed; back in the queue when stopped |
# | 12 · delivery counter + `Reject(requeue=False)` | 3 killed, the 4th rejected; queue 0, dead-letter queue 1 |
#
# **What to take away**
#
# - Celery's default acks a task before it runs, so a killed worker loses it. A task that
#   must survive any kill needs `acks_late=True` *and* `reject_on_worker_lost=True`.
# - A task that comes back can run twice: make it idempotent, with the dedup record and
#   the effect in one database transaction. A transaction cannot take back an e-mail.
# - On Redis an unacknowledged task returns only after the visibility timeout and the
#   next restore; set the timeout longer than your longest task and countdown.
# - A retry is a new message (it breaks a serial queue's order), and two Beats send each
#   slot twice: key each periodic run by its slot.
# - A deploy sends SIGTERM, then SIGKILL after the grace period: make the grace period
#   longer than your longest task, and use late acks with an idempotent task for the rest.
# - `reject_on_worker_lost` redelivers a poison task forever: count deliveries outside
#   the message and reject it into a dead-letter queue.
#
# ## Glossary and next
#
# The terms of this lesson (pool child, main process, prefetch, unacked message, restore,
# warm shutdown...), and of every other, in English and Portuguese:
# [Glossary / Glossário](glossary.md).
#
# [Next: 15 · The three bad nights, again](15_three_nights_again.ipynb)
