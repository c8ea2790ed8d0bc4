# %% [markdown]
# # 13 · Beyond one machine
#
# *The job of lessons 04, 06 and 07 moves to PostgreSQL and to Redis Streams: the same
# rules, new ways for a worker to die, and the same strategy × crash-point table.*
#
# > **Resumo.** O job das lições 04, 06 e 07 vai para o PostgreSQL e o Redis Streams.
# > No PostgreSQL: três processos com `SKIP LOCKED` sem dividir um job, uma conexão
# > derrubada com `pg_terminate_backend` e o lease devolvendo o job, um advisory lock.
# > No Redis: um consumidor morto com SIGKILL, `XPENDING`, `XAUTOCLAIM`, um job venenoso
# > no dead-letter e o redrive. No fim, a tabela da lição 06 nos três motores.
#
# Run time: about 30 seconds (more on a busy machine), most of it starting worker
# processes (three on PostgreSQL, one on Redis, and 24 for the crash table's twelve real
# kills and their restarts) and the crash table's 42 runs on PostgreSQL.
#
# The articles this lab follows run their jobs on a broker, not on a file: the ERP
# article's Celery workers and the async-jobs lesson's queue, where a consumer
# *acknowledges* what it finished and everything else is redelivered. SQLite taught the
# rules on one machine; here they meet a database shared by many machines and a stream.

# %% [markdown]
# ## Setup
#
# This lesson needs PostgreSQL on 127.0.0.1:5432 and Redis on 127.0.0.1:6379. The cell
# below checks both and stops with how to start them if one is missing.

# %%
import re

import psycopg

from labkit.backends import spec
from labkit.backends.postgres.lock import single_instance_pg
from labkit.backends.postgres.runs import RunSchema
from labkit.backends.postgres.store import PostgresJobStore
from labkit.backends.redis.streams import StreamQueue
from labkit.clock import LAB_EPOCH, FakeClock, SystemClock
from labkit.errors import AlreadyRunning, PermanentError
from labkit.explore import crash_matrix
from labkit.faults import FaultPlan
from labkit.worker_process import run_worker_process
from labkit.tables import format_table
from labkit.notebook.scratch import fresh_dir
from labkit.world import World

problems = spec.missing_services()
for line in problems:
    print(line)
if problems:
    raise RuntimeError("start the services above (docker compose up -d), then re-run")

PG, REDIS = spec.POSTGRES_URL, spec.REDIS_URL
# Names of our own, removed at the end: other notebooks and tests share these servers.
# Taking a run name also drops the schema and the Redis keys of earlier runs that failed
# before the end (a run that is still going, in another kernel, keeps its own).
run = RunSchema(PG, "lesson13_")
run.sweep_keys(REDIS, "lesson13:")
RUN = run.id
SCHEMA, PREFIX = run.name, f"lesson13:{RUN}"
folder = fresh_dir("13")
print("PostgreSQL and Redis answer; scratch folder:", folder)

# %% [markdown]
# ## 1. PostgreSQL: three worker processes, one queue, no job shared
#
# Thirty invoices wait in a PostgreSQL job table (same schema and rules as lesson 04's
# SQLite file, `labkit.backends.postgres.store`). Three real worker processes drain it at once,
# each charging through the payments API with the job key as `Idempotency-Key`; every
# job takes 0.15 real seconds (a `delay` fault before the effect), so the three overlap.
#
# SQLite let one writer in at a time. PostgreSQL lets all three claim together, so the
# claim locks the rows it picks with `FOR UPDATE SKIP LOCKED`: a second claimer skips a
# locked row instead of waiting for it or taking it too.

# %%
clock = FakeClock(LAB_EPOCH)
store = PostgresJobStore(PG, clock=clock, schema=SCHEMA)
for n in range(30):
    store.enqueue("charge", {"customer": f"cus_{n}", "amount": 1000 + n}, key=f"invoice:{n}")
World(folder / "world.db", clock).close()
print(store.counts())

# %%
target = f"{PG}#schema={SCHEMA}"
pace = FaultPlan(seed=13).at("before_effect", "delay", delay=0.15)
workers = [
    run_worker_process(target, {"charge": "labkit.explore.strategies:idempotency_key"},
                       world_path=folder / "world.db", name=f"pg-{i}", faults=pace,
                       mode="until_idle", log_path=folder / f"pg-{i}.log")
    for i in range(3)
]
print("exit codes:", [w.wait(120) for w in workers])

# %% [markdown]
# What the database and the world say (never what the workers claimed to do): every job
# succeeded at its first attempt, each attempt row has one worker, and the payments API
# has exactly one charge per invoice. Which worker took which job changes between runs;
# that no job was taken twice does not.

# %%
history = store.conn.execute(
    "SELECT job_id, count(*) AS attempts, count(DISTINCT worker) AS workers, "
    "min(worker) AS worker FROM attempts GROUP BY job_id").fetchall()
with World(folder / "world.db", clock) as world:
    charges = [world.count(f"invoice:{n}", "payments") for n in range(30)]
print("jobs by state:", {k: v for k, v in store.counts().items() if v})
print("attempts per job:", sorted({r["attempts"] for r in history}),
      "| workers per job:", sorted({r["workers"] for r in history}))
print("charges per invoice:", sorted(set(charges)))
print("more than one process took jobs:", len({r["worker"] for r in history}) > 1)
assert store.counts()["succeeded"] == 30 and {r["attempts"] for r in history} == {1}
assert set(charges) == {1}

# %% [markdown]
# ## 2. A connection terminated mid-claim, and a worker that vanishes holding a lease
#
# Two ways a PostgreSQL worker disappears. First, **mid-claim**: worker A has locked
# invoice 100's row inside its claim transaction and not committed. Worker B's claim skips
# the locked row (it does not wait). Then an operator (or a failover, or a network cut)
# terminates A's connection with `pg_terminate_backend`: the server rolls A's transaction
# back, the row is free, and B's next claim takes it. (`pg_terminate_backend` only
# signals the backend; `terminate` below waits until it is gone from `pg_stat_activity`.)

# %%
admin = psycopg.connect(PG, autocommit=True)


def terminate(pid):
    signalled = admin.execute("SELECT pg_terminate_backend(%s)", [pid]).fetchone()[0]
    gone = "SELECT count(*) FROM pg_stat_activity WHERE pid = %s"
    while admin.execute(gone, [pid]).fetchone()[0]:
        SystemClock().sleep(0.01)
    return signalled


store.enqueue("charge", {"customer": "cus_100", "amount": 10000}, key="invoice:100")
worker_a = psycopg.connect(PG, autocommit=False)
worker_a.execute(f'SELECT id FROM "{SCHEMA}".jobs WHERE key = %s FOR UPDATE', ["invoice:100"])
worker_b = PostgresJobStore(PG, clock=clock, schema=SCHEMA)
print("B while A holds the row lock:", worker_b.claim("worker-b", lease_s=30))
print("A's backend terminated:", terminate(worker_a.info.backend_pid))
job = worker_b.claim("worker-b", lease_s=30)
print(f"B now: job {job.id} {job.key} attempt {job.attempt}, lease until +30 s")

# %% [markdown]
# Second, **after the claim committed**: B holds invoice 100 under a 30 s lease and its
# connection is terminated mid-job. Nothing rolls back now: the row says *running,
# leased to worker-b*. Worker C finds nothing to claim until the lease runs out on the
# clock, then reclaims it, and the attempts table shows both attempts.

# %%
print("B's backend terminated:", terminate(worker_b.conn.info.backend_pid))
worker_c = PostgresJobStore(PG, clock=clock, schema=SCHEMA)
print("C before the lease ends:", worker_c.claim("worker-c", lease_s=30))
clock.advance(31)
again = worker_c.claim("worker-c", lease_s=30)
worker_c.complete(again, {"charged": True})
rows = worker_c.attempts(again.id)
print(format_table([{"attempt": a.attempt, "worker": a.worker, "outcome": a.outcome}
                    for a in rows]))
assert [a.outcome for a in rows] == ["lease_expired", "succeeded"]

# %% [markdown]
# ## 3. One instance across machines: an advisory lock
#
# Lesson 02's `flock` guards one host: a second machine has its own disk and takes its
# own lock. When the nightly billing run must run once *anywhere*, take a lock in the
# database every machine shares: `pg_try_advisory_lock`, held by a session
# (`labkit.backends.postgres.lock.single_instance_pg`). A second instance on another connection
# is refused and told who holds it; when the holder's connection ends, even by SIGKILL,
# the server frees the lock, as the kernel frees a `flock`. Server pids and this run's
# name change between runs, so the cell prints `<pid>` and `<run>` in their place.

# %%
LOCK = f"nightly-billing-{RUN}"
with single_instance_pg(PG, LOCK, application_name="billing-host-1"):
    try:
        with single_instance_pg(PG, LOCK, application_name="billing-host-2"):
            print("second instance ran (it should not have)")
    except AlreadyRunning as exc:
        print(re.sub(r"pid \d+", "pid <pid>", str(exc)).replace(RUN, "<run>"))
with single_instance_pg(PG, LOCK, application_name="billing-host-2"):
    print("after host 1 let go, host 2 holds the lock")

# %% [markdown]
# | | `flock` (lesson 02) | advisory lock |
# |---|---|---|
# | guards | one host | every host on the database |
# | freed when the holder dies | at once, by the kernel | when the server sees the connection gone (at once on a clean kill; TCP keepalive after a network cut) |
# | breaks with | NFS, containers without a shared volume | PgBouncer in transaction mode; a partitioned holder still running |
#
# ## 4. Redis Streams: a consumer SIGKILLed mid-job
#
# On Redis the queue is a **stream** and the workers form a **consumer group**. Reading
# with `XREADGROUP ... >` hands an entry to one consumer and records it in the group's
# Pending Entries List (PEL) until that consumer sends `XACK`. Invoice 200 goes in
# (`XADD`); one worker process, `w1`, reads invoice 200 and is SIGKILLed right after the
# charge, before its `XACK`.

# %%
target = f"{REDIS}#prefix={PREFIX}&reclaim_idle_ms=30000"
stream_store = spec.open_store(target, FakeClock(LAB_EPOCH))
stream_store.enqueue("charge", {"customer": "cus_200", "amount": 2000}, key="invoice:200")
q = StreamQueue(REDIS, PREFIX)
print("stream length:", q.length(), "| pending:", q.pending())

plan = FaultPlan(seed=13).at("after_effect", "kill", nth=1)
w1 = run_worker_process(target, {"charge": "labkit.explore.strategies:idempotency_key"},
                        world_path=folder / "world.db", name="w1", clock_start=LAB_EPOCH,
                        faults=plan, mode="drain", log_path=folder / "w1.log")
print("w1 exit code:", w1.wait(60), "| fired:", w1.fired())
print("replay:", plan.replay())


# %% [markdown]
# `XPENDING` shows what the group knows: the entry is still with `w1`, delivered once.
# Its idle time is measured by the Redis server's own clock (not the lesson's
# `FakeClock`), so we print it as a class against the 30 s threshold, never the number.

# %%
def show_pending():
    rows = [{"key": q.r.xrange(q.stream, p.id, p.id)[0][1]["key"], "consumer": p.consumer,
             "deliveries": p.deliveries,
             "idle": "idle >= 30 s" if p.idle_ms >= 30_000 else "idle < 30 s"}
            for p in q.pending()]
    print(format_table(rows) if rows else "(nothing pending)")


show_pending()
with World(folder / "world.db") as world:
    print("charges for invoice:200 in the world:", world.count("invoice:200", "payments"))

# %% [markdown]
# ## 5. `XAUTOCLAIM`: another consumer takes over
#
# A rescuer asks for entries idle at least 30 s (`XAUTOCLAIM ... 30000`). `w1` died a
# moment ago, so nothing qualifies yet: a live but slow consumer must not lose its entry.
# Rather than wait 30 real seconds, we tell Redis the entry has been idle a minute
# (`XCLAIM ... IDLE 60000 JUSTID`, what `q.age` does), then ask again.

# %%
print("before the threshold:", q.autoclaim("rescuer", min_idle_ms=30_000).entries)
entry_id = q.pending()[0].id
q.age(entry_id, 60_000)
show_pending()
taken = q.autoclaim("rescuer", min_idle_ms=30_000)
print("rescuer took:", [e.key for e in taken.entries])
show_pending()

# %% [markdown]
# The rescuer runs the job again. The charge already happened once (w1 died after it),
# but the key travels as `Idempotency-Key`, so the payments API answers with the stored
# reply instead of charging twice. Then `XACK`, and the PEL is empty.

# %%
(entry,) = taken.entries
with World(folder / "world.db") as world:
    world.payments.charge(entry.payload["customer"], entry.payload["amount"],
                          key=entry.key, idempotency_key=entry.key)
    print("charges for invoice:200:", world.count("invoice:200", "payments"))
print("XACK acknowledged:", q.ack(entry.id))
show_pending()

# %% [markdown]
# ## 6. A poison entry reaches the dead-letter stream after N deliveries
#
# Invoice 666 carries its amount as the text `"5.00"`, and this consumer has a bug: it
# passes the amount through, and the payments API refuses anything but whole cents (400).
# A consumer that just leaves a failed entry pending gets it again: each read of its own
# pending entries (`XREADGROUP ... 0`) counts one more delivery. With a cap of 3
# deliveries, the fourth read sends it to `<prefix>:dead` with its reason, and the `XACK`
# of the original happens in the same `MULTI`.

# %%
q.add("charge", {"customer": "cus_666", "amount": "5.00"}, "invoice:666")
MAX_DELIVERIES = 3
with World(folder / "world.db") as world:
    while True:
        (entry,) = q.read_own_pending("c2", count=1) or q.read_new("c2", count=1)
        n = q.deliveries(entry.id)
        if n > MAX_DELIVERIES:
            q.dead_letter(entry, f"failed {n - 1} deliveries: {last_error}", deliveries=n - 1)
            print(f"delivery {n}: over the cap, dead-lettered")
            break
        try:
            world.payments.charge(entry.payload["customer"], entry.payload["amount"],
                                  idempotency_key=entry.key)
        except PermanentError as exc:
            last_error = str(exc)
            print(f"delivery {n}: {last_error}")
show_pending()
(dead,) = q.dead_letters()
print("dead letter:", dead.key, "|", dead.fields["reason"])

# %% [markdown]
# ## 7. The operator redrives it
#
# The bug is fixed: the consumer now turns `"5.00"` into 500 cents. Redrive moves at most
# `limit` dead letters back onto the stream, with the **same key**, and deletes them from
# the dead-letter stream in one `MULTI`. `limit` has no default, so nobody redrives a
# thousand dead letters by accident.

# %%
print("moved:", len(q.redrive(limit=1, note="amount fixed to 500 by ops")))
(entry,) = q.read_new("c2", count=1)
print("redriven:", entry.key, entry.payload, "| from the dead letters:",
      bool(entry.fields["redriven_from"]))
cents = round(float(entry.payload["amount"]) * 100)  # the fix
with World(folder / "world.db") as world:
    world.payments.charge(entry.payload["customer"], cents, idempotency_key=entry.key)
    print("charges for invoice:666:", world.count("invoice:666", "payments"))
q.ack(entry.id)
print("dead letters left:", len(q.dead_letters()), "| pending:", q.pending())

# %% [markdown]
# ## 8. The idempotency record, and a TTL that is too short
#
# A consumer whose effect has no `Idempotency-Key` of its own (an e-mail) keeps a record
# per key: `SET <prefix>:done:<key> done NX EX <ttl>`; only the consumer that sets it
# sends. The record must outlive every late copy of the message: a redelivery after the
# idle threshold, a redrive next week. Here the TTL is one second (we let it run out with
# a short `PEXPIRE` rather than waiting), and a late copy of the same job sends the
# e-mail again.

# %%
def send_receipt(key, ttl_s):
    if not q.remember(key, ttl_s=ttl_s):
        return "skipped: already done"
    with World(folder / "world.db") as world:
        world.mail.send("cus_201@example.com", "receipt", key=key)
    return "sent"


print("first delivery:", send_receipt("receipt:201", ttl_s=1))
print("redelivered within the TTL:", send_receipt("receipt:201", ttl_s=1))
q.r.pexpire(f"{PREFIX}:done:receipt:201", 1)
while q.r.exists(f"{PREFIX}:done:receipt:201"):
    SystemClock().sleep(0.01)
print("a late copy after the record expired:", send_receipt("receipt:201", ttl_s=1))
with World(folder / "world.db") as world:
    print("receipts sent:", world.count("receipt:201", "mail"))

# %% [markdown]
# ## 9. `MAXLEN` trims what is still pending
#
# `XADD ... MAXLEN 3` keeps the stream short, and it does not ask whether an entry was
# acknowledged. Consumer c3 holds invoice 300 (its process is about to die); five more
# invoices arrive with `MAXLEN 3`. When the rescuer autoclaims, Redis reports invoice
# 300's id as **deleted**: still in the PEL, its payload gone. That job is lost. Trim by
# age of *acknowledged* work only (or not at all), and alert on deleted ids.

# %%
q.add("charge", {"customer": "cus_300", "amount": 3000}, "invoice:300")
(held,) = q.read_new("c3", count=1)
for n in range(301, 306):
    q.add("charge", {"customer": f"cus_{n}", "amount": 3000}, f"invoice:{n}", maxlen=3)
print("stream length after MAXLEN 3:", q.length())
claimed = q.autoclaim("rescuer", min_idle_ms=0, count=10)
print("autoclaimed entries:", len(claimed.entries),
      "| deleted ids reported:", len(claimed.deleted), "| invoice:300's among them:",
      held.id in claimed.deleted)
assert held.id in claimed.deleted

# %% [markdown]
# ## 10. The crash table on three engines
#
# Lesson 06 crashed six strategies at seven points on SQLite. `labkit.explore` takes the
# engine as a parameter: each run starts from an empty store (a fresh file, an emptied
# schema, a fresh key prefix), all removed afterwards; the world stays the judge. First in-process (a `SimulatedCrash`), all
# cells, on the three engines; then the `after_effect` column again with real SIGKILLs
# of worker processes on PostgreSQL and Redis Streams (the test suite does the same for
# `after_commit`: `tests/scenarios/test_explore_streams_and_pg.py`).

# %%
from labkit.notebook.timelines import matrix_grid

tables = {"sqlite": crash_matrix(seed=6)}
matrix_grid(tables["sqlite"])

# %% [markdown]
# The same 42 runs on PostgreSQL (one schema, emptied between runs: the slow part of
# this lesson) and on Redis Streams (a key prefix each), then every cell compared with
# SQLite's.

# %%
tables["postgres"] = crash_matrix(seed=6, backend="postgres")
print(tables["postgres"].counts())

# %%
tables["redis_streams"] = crash_matrix(seed=6, backend="redis_streams")
differ = [(engine, r.strategy, r.point)
          for engine in ("postgres", "redis_streams")
          for r, s in zip(tables[engine].rows, tables["sqlite"].rows, strict=True)
          if (r.outcome, r.effects, bool(r.fired)) != (s.outcome, s.effects, bool(s.fired))]
print("cells that differ from SQLite:", differ or "none")
print({engine: t.counts() for engine, t in tables.items()})

# %%
real = {engine: crash_matrix(points=["after_effect"], seed=6, backend=engine, real_kill=True)
        for engine in ("postgres", "redis_streams")}
POINTS = ("after_effect",)
rows = [{"strategy": s,
         **{f"sqlite {p}": tables["sqlite"].outcome(s, p) for p in POINTS},
         **{f"{e} {p} (kill -9)": real[e].outcome(s, p) for e in real for p in POINTS}}
        for s in tables["sqlite"].strategies()]
print(format_table(rows))
assert all(real[e].outcome(s, p) == tables["sqlite"].outcome(s, p)
           for e in real for s in tables["sqlite"].strategies()
           for p in POINTS)

# %% [markdown]
# **Why no cell differs.** A verdict depends on where the effect and its record live
# relative to the crash, not on which engine queued the job: `ack_late` duplicates
# after the effect on every engine because nothing outside knows the charge happened;
# `same_transaction`, `idempotency_key` and `reconcile` hold everywhere because the
# protection sits at the effect. The engines differ in *how* the job comes back:
#
# - SQLite and PostgreSQL give a dead worker's job back when its **lease** runs out on
#   the injected clock; PostgreSQL also lets many claimers work at once (`SKIP LOCKED`).
# - A plain Redis consumer gets it back when the entry has been **idle** past a
#   threshold on the server's clock (`XAUTOCLAIM`, section 5), or when the same
#   consumer restarts and reads its own pending entries. labkit's Redis store also keeps
#   a lease on the injected clock beside the PEL, so in the explorer a restarted worker
#   takes the entry back when the lease runs out, as on SQL, and with the same verdict.
# - `after_commit` and `after_ack` are one moment in all three here: the labkit stores
#   commit and acknowledge in one step (the Redis store records the result and `XACK`s
#   in one Lua script). A consumer that writes its result somewhere else and *then*
#   sends `XACK` has a real gap between the two: a crash there redelivers a finished
#   job, and only an idempotent effect or a record like section 8's keeps it single.
#
# ## Clean up
#
# The lesson's schema and keys go, so the servers hold nothing of this run.

# %%
for closing in (store, worker_c, stream_store, worker_b.conn, admin, worker_a):
    closing.close()
spec.drop(f"{PG}#schema={SCHEMA}")
run.close()
spec.drop(f"{REDIS}#prefix={PREFIX}")
with psycopg.connect(PG) as conn:
    left = conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s", [SCHEMA])
    print("schema left:", left.fetchone()[0])
print("keys left:", len(list(q.r.scan_iter(match=f"{PREFIX}:*"))))
q.close()

# %% [markdown]
# ## What you should see
#
# | step | what the records show |
# |---|---|
# | 3 PostgreSQL workers | 30 succeeded, 1 attempt and 1 worker per job, 1 charge per invoice, more than one process took jobs |
# | row locked mid-claim | B gets `None`; after `pg_terminate_backend`, B claims attempt 1 |
# | B's connection terminated after its claim | C gets `None` until the lease ends, then attempt 2; history `lease_expired`, `succeeded` |
# | advisory lock | host 2 refused, naming host 1; free once host 1 lets go |
# | w1 SIGKILLed after the charge | `XPENDING`: w1, 1 delivery, idle < 30 s; 1 charge |
# | `XAUTOCLAIM` | nothing before the threshold; rescuer, 2 deliveries after; still 1 charge; PEL empty after `XACK` |
# | poison invoice 666 | 3 failed deliveries, dead-lettered on the 4th read with the 400 reason |
# | redrive limit 1 | same key back on the stream, 1 charge, no dead letters left |
# | TTL 1 s | sent, skipped, then sent again after expiry: 2 receipts |
# | `MAXLEN 3` | invoice 300 reported deleted while pending: lost |
# | crash table | no cell differs between SQLite, PostgreSQL and Redis Streams; the real kills at `after_effect` agree |
#
# In production: PostgreSQL queues such as procrastinate or Oban-style libraries claim
# exactly like section 1; on Redis, Streams with redis-py as here, or a library on top.
# Whatever the engine, the protection sits at the effect (lesson 06).
#
# ## Glossary and next
#
# The terms of this lesson (consumer group, pending entries list, idle time, delivery
# count, dead-letter stream, advisory lock, trimming), and of every other, in English
# and Portuguese: [Glossary / Glossário](glossary.md).
#
# [Next: 14 · Celery in production](14_celery.ipynb)
