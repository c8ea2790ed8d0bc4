# %% [markdown]
# # 13 · Beyond one machine
#
# *The job of lessons 04, 06 and 07 moves to PostgreSQL and to Redis Streams: the same
# rules, new ways for a worker to die, and the same strategy × crash-point table.*
#
# > **Resumo.** O job das aulas 04, 06 e 07 sai do SQLite. No PostgreSQL: `SKIP LOCKED` sem
# > job pego duas vezes, uma conexão derrubada e o job que volta no fim do lease, um
# > advisory lock liberado mesmo com SIGKILL. No Redis Streams: `XAUTOCLAIM` depois de um
# > SIGKILL, o job venenoso e o redrive, um "feito" gravado cedo demais, que perde o e-mail,
# > e um `XTRIM` que apaga entradas pendentes. E a tabela da aula 06 nos três bancos.
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
# This lesson needs PostgreSQL on 127.0.0.1:5432 and Redis on 127.0.0.1:6379, and
# labkit's `services` extra (psycopg, redis). The first cell checks all four and, if one
# is missing, says the command that fixes it and stops there.

# %%
from labkit.notebook.needs import require

require("psycopg", "redis", extra="services", services=("postgres", "redis"))

# %% [markdown]
# Then the imports, and names of this run's own on the shared servers: a PostgreSQL
# schema and a Redis key prefix, both removed at the end of the lesson.

# %%
import re

import psycopg

from labkit.backends import spec
from labkit.backends.postgres.lock import hold_in_subprocess, single_instance_pg
from labkit.backends.postgres.runs import RunSchema
from labkit.backends.postgres.store import PostgresJobStore
from labkit.backends.redis.streams import StreamQueue
from labkit.clock import LAB_EPOCH, FakeClock, SystemClock
from labkit.errors import AlreadyRunning, PermanentError, SimulatedCrash
from labkit.explore import crash_matrix
from labkit.faults import FaultPlan
from labkit.worker_process import run_worker_process
from labkit.tables import format_table
from labkit.notebook.scratch import fresh_dir
from labkit.world import World

PG, REDIS = spec.POSTGRES_URL, spec.REDIS_URL
# Names of our own, removed at the end: other notebooks and tests share these servers.
# Taking a run name also drops the schema and the Redis keys of earlier runs that failed
# before the end (a run that is still going, in another kernel, keeps its own).
run = RunSchema(PG, "lesson13_")
run.sweep_keys(REDIS, "lesson13:")
RUN = run.id
SCHEMA, PREFIX = run.name, f"lesson13:{RUN}"
folder = fresh_dir("13")
print("scratch folder:", folder)

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
#
# Here B and C read one `FakeClock`. On two machines each reads its own clock, and
# clocks drift apart: a lease written with B's time and checked with C's ends early or
# late by the skew between them, and an early end runs the job twice. So check every
# lease on one clock: the database's (`clock_timestamp()` is the server's current time,
# [PostgreSQL docs](https://www.postgresql.org/docs/current/functions-datetime.html#FUNCTIONS-DATETIME-CURRENT)),
# or Redis's (`TIME`, [Redis docs](https://redis.io/docs/latest/commands/time/), or a
# `PX` expiry, which the server counts, as in section 8); or keep each lease longer
# than the longest job plus the worst skew you have measured.

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
# labkit's PostgreSQL store takes the first way. Given a real clock it keeps time by the
# server's `clock_timestamp()` (read every few seconds, carried forward by the machine's
# monotonic clock), whatever the worker's own clock says; only a `FakeClock`, as in this
# lesson, is kept as it is. Below, two stores whose machines are 30 s ahead and 30 s
# behind (`SystemClock(skew_s=...)`) agree on the time within a second, because both
# read it from the server. The tests run the same with real worker processes: the one
# 30 s ahead leaves a live lease alone, the one behind sees new jobs at once.

# %%
ahead = PostgresJobStore(PG, clock=SystemClock(skew_s=30), schema=SCHEMA)
behind = PostgresJobStore(PG, clock=SystemClock(skew_s=-30), schema=SCHEMA)
print("store clocks:", type(ahead.clock).__name__, type(behind.clock).__name__)
print("ahead and behind agree within 1 s:", abs(ahead.clock.now() - behind.clock.now()) < 1)
print("this lesson's store keeps its FakeClock:", worker_c.clock is clock)
behind.close()

# %% [markdown]
# A worker can also stop without dying: a paused VM, a debugger, `SIGSTOP`. If it stops
# inside a transaction that locked its job's row (say it completed the job with
# `complete(job, conn=...)` beside its own write, and has not committed), claims with
# `SKIP LOCKED` pass that row by for as long as it is stopped, lease or no lease. So every
# connection the store opens or hands out has `idle_in_transaction_session_timeout`
# (60 s by default, `idle_in_transaction_s=` to change it): the server ends a session
# idle inside a transaction that long, rolls it back and releases its locks
# ([PostgreSQL docs](https://www.postgresql.org/docs/current/runtime-config-client.html#GUC-IDLE-IN-TRANSACTION-SESSION-TIMEOUT)).
# Here this notebook plays the stopped worker, with a 1 s timeout and a 1 s lease; this
# cell waits 1.5 s of real time for the server.

# %%
frozen = PostgresJobStore(PG, clock=SystemClock(), schema=SCHEMA, idle_in_transaction_s=1)
frozen.enqueue("charge", {"customer": "cus_101", "amount": 500}, key="invoice:101",
               queue="stopped")
held = frozen.claim("frozen", queues=["stopped"], lease_s=1)
own = frozen.connect(autocommit=False)
frozen.complete(held, {"charged": True}, conn=own)  # not committed: its row stays locked
SystemClock().sleep(1.5)
taken = ahead.claim("worker-d", queues=["stopped"], lease_s=30)
print(f"after the lease and the timeout: {taken.key} attempt {taken.attempt} to worker-d")
try:
    own.commit()
except psycopg.Error as exc:
    print(f"the stopped worker's commit: {type(exc).__name__}, its session is gone")
ahead.complete(taken, {"charged": True})
own.close()
frozen.close()
ahead.close()

# %% [markdown]
# ## 3. One instance across machines: an advisory lock
#
# Lesson 02's `flock` guards one host: a second machine has its own disk and takes its
# own lock. When the nightly billing run must run once *anywhere*, take a lock in the
# database every machine shares: `pg_try_advisory_lock`, held by a session
# (`labkit.backends.postgres.lock.single_instance_pg`). A second instance on another connection
# is refused and told who holds it; when the holder's connection ends the server frees
# the lock, as the kernel frees a `flock` (a session-level lock "is held until explicitly
# released or the session ends",
# [PostgreSQL docs](https://www.postgresql.org/docs/current/explicit-locking.html#ADVISORY-LOCKS)).
# Server pids and this run's name change between runs, so the cell prints `<pid>` and
# `<run>` in their place.

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
# Letting go inside a `with` is the easy case. Now the holder is a real process that
# gets SIGKILL while it holds the lock: no `finally`, no unlock. Its kernel closes the
# socket, the server's backend sees the connection end, and the lock goes with the
# session. Another session waits for that (at most 10 s), then takes the lock.

# %%
import signal


def wait_until_free(name, timeout_s=10.0):
    """Try as host 4 until it gets the lock (True) or timeout_s pass (False)."""
    clock = SystemClock()
    deadline = clock.now() + timeout_s
    while True:
        try:
            with single_instance_pg(PG, name, application_name="billing-host-4"):
                return True
        except AlreadyRunning:
            if clock.now() >= deadline:
                return False
            clock.sleep(0.02)


holder, _pid = hold_in_subprocess(PG, LOCK, application_name="billing-host-3")
try:
    before = wait_until_free(LOCK, timeout_s=0)
    print("host 4 while host 3's process holds it:", "got it" if before else "refused")
    holder.send_signal(signal.SIGKILL)
    print("host 3 exit code:", holder.wait(10))
    after = wait_until_free(LOCK)
    print("after the SIGKILL, host 4 got the lock:", after)
finally:
    if holder.poll() is None:
        holder.kill()
    holder.communicate(timeout=10)
assert not before and after and holder.returncode == -signal.SIGKILL

# %% [markdown]
# | | `flock` (lesson 02) | advisory lock |
# |---|---|---|
# | guards | one host | every host on the database |
# | freed when the holder dies | at once, by the kernel | when the server sees the connection gone (at once on a clean kill; TCP keepalive after a network cut) |
# | breaks with | NFS, containers without a shared volume | PgBouncer in transaction mode; a partitioned holder still running |
#
# ### A lock on a row that does not exist yet
#
# The Celery-in-production article guards its task with
# `Evento.objects.select_for_update().filter(evento_id=...).exists()`: if the event is
# there, skip; else do the work and create it. `SELECT ... FOR UPDATE` locks the rows it
# *returns* (PostgreSQL's docs, "The Locking Clause"), and the first time there is no
# row, so it locks nothing. Two deliveries of one event, run A and run B, each in its
# own transaction on its own connection:

# %%
EVENTS = f"{SCHEMA}.celery_events"
admin.execute(f"CREATE TABLE {EVENTS} (evento_id text PRIMARY KEY)")
FIND = f"SELECT 1 FROM {EVENTS} WHERE evento_id = %s FOR UPDATE"
ADD = f"INSERT INTO {EVENTS} VALUES (%s)"
emails = []
run_a, run_b = psycopg.connect(PG), psycopg.connect(PG)
try:
    for name, conn in (("A", run_a), ("B", run_b)):
        if not conn.execute(FIND, ["evt-42"]).fetchall():  # nothing found, nothing locked
            emails.append(name)  # the e-mail goes out
    run_a.execute(ADD, ["evt-42"])
    run_a.commit()
    try:
        run_b.execute(ADD, ["evt-42"])
        run_b.commit()
        b_insert = "inserted"
    except psycopg.errors.UniqueViolation:
        run_b.rollback()
        b_insert = "unique violation (its e-mail already went out)"
finally:
    run_a.close()
    run_b.close()
print("e-mails sent by:", emails, "| run B's insert:", b_insert)
assert emails == ["A", "B"]

# %% [markdown]
# Both runs sent the e-mail; the unique key only turned the second insert into an
# error after the fact. Claim by inserting instead: `INSERT ... ON CONFLICT DO NOTHING
# RETURNING` makes the row that the other run's insert must wait for. Run A claims and
# holds its transaction open while it sends; run B's claim waits for A (here it gives
# up after 200 ms, `lock_timeout`); once A commits, B's claim returns no row and B skips.

# %%
CLAIM = f"INSERT INTO {EVENTS} VALUES (%s) ON CONFLICT DO NOTHING RETURNING evento_id"
emails = []
run_a, run_b = psycopg.connect(PG), psycopg.connect(PG)
try:
    run_b.execute("SET lock_timeout = '200ms'")
    run_b.commit()
    if run_a.execute(CLAIM, ["evt-43"]).fetchall():
        emails.append("A")
    try:
        run_b.execute(CLAIM, ["evt-43"])
        b_first = "claimed (it should have waited)"
    except psycopg.errors.LockNotAvailable:
        run_b.rollback()
        b_first = "waits for run A's claim"
    run_a.commit()
    b_after = "claimed" if run_b.execute(CLAIM, ["evt-43"]).fetchall() else "no row: skip"
    run_b.commit()
finally:
    run_a.close()
    run_b.close()
print("run B while A holds the claim:", b_first, "| after A commits:", b_after)
print("e-mails sent by:", emails)
assert emails == ["A"] and b_after == "no row: skip"

# %% [markdown]
# One e-mail. A crash between the send and the commit rolls the claim back and the
# redelivery sends again, so the send itself still carries an idempotency key (section
# 8); the claim stops two *live* runs from doing it at once.

# %% [markdown]
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
# `limit` dead letters back onto the stream, with the **same key**. Each one is deleted
# from the dead-letter stream and added back by one Lua script, which Redis runs with
# every other command held off ([Redis: scripting with Lua](https://redis.io/topics/eval-intro)),
# and which moves it only if its `XDEL` found it: two operators redriving at once move it
# once. `limit` has no default, so nobody redrives a thousand dead letters by accident.

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
# ## 8. The idempotency record: a TTL too short, and a record written too early
#
# A consumer whose effect has no `Idempotency-Key` of its own (a plain e-mail) may keep
# a record per key: `SET <prefix>:done:<key> done NX EX <ttl>`; only the consumer that
# sets it sends. The record must outlive every late copy of the message: a redelivery
# after the idle threshold, a redrive next week. Here the TTL is one second (we let it
# run out with a short `PEXPIRE` rather than waiting), and a late copy of the same job
# sends the e-mail again.

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
# The TTL is the smaller problem. `send_receipt` writes "done" **before** it sends, so
# the e-mail is at most once, not exactly once: a worker that dies between the `SET` and
# the send leaves the record saying done and no e-mail anywhere, and every redelivery
# skips it. The lab's own fault plan crashes it there (a `SimulatedCrash` at a point the
# consumer fires, `after_record`), then the entry is delivered again.

# %%
def send_receipt_early(key, faults):
    """The record first, then the e-mail: what section 8's consumer does."""
    if not q.remember(key, ttl_s=86_400):
        return "skipped: already done"
    faults.hit("after_record", key)
    with World(folder / "world.db") as world:
        world.mail.send("cus_202@example.com", "receipt", key=key)
    return "sent"


early = FaultPlan(seed=13).at("after_record", "crash", nth=1)
try:
    send_receipt_early("receipt:202", early)
except SimulatedCrash as exc:
    print("first delivery:", exc)
print("redelivered:", send_receipt_early("receipt:202", early))
with World(folder / "world.db") as world:
    print("receipts sent for receipt:202:", world.count("receipt:202", "mail"))
    assert early.fired_at("after_record") and world.count("receipt:202", "mail") == 0

# %% [markdown]
# The fix has three parts, and the guarantee rests on the second:
#
# 1. **A claim with a short lease**, not a "done": `SET <prefix>:claim:<key> <consumer>
#    NX PX 30000` (`q.claim_key`) says *in progress*. If its worker dies it expires on
#    Redis's clock; meanwhile another consumer that finds it leaves the entry pending.
# 2. **The effect is idempotent where it lands**: the e-mail carries the job key as
#    `Idempotency-Key` (mail APIs such as
#    [Resend's](https://resend.com/docs/dashboard/emails/idempotency-keys) take one; the
#    world's mail honours it like its payments API), so a second send of the same key
#    returns the first reply and sends nothing.
# 3. **"Done" only after the send** (`q.finish_key`: `SET <prefix>:done:<key> EX ttl`,
#    then drop this consumer's claim), so later copies skip even the call.
#
# The plan crashes the worker in each gap: invoice 203 after the claim (nothing sent),
# invoice 204 after the send (nothing recorded). A redelivery while the lease holds is
# left pending; once the lease runs out (shortened with `PEXPIRE` rather than waiting
# 30 s) the next one finishes the job, and a last copy is skipped.

# %%
def send_receipt_once(key, consumer, faults):
    """Claim, send with the key as Idempotency-Key, then record done."""
    if q.is_done(key):
        return "skipped: done"
    if not q.claim_key(key, consumer, lease_ms=30_000):
        return "left pending: claimed by another consumer"
    faults.hit("after_claim", key)
    with World(folder / "world.db") as world:
        world.mail.send("cus@example.com", "receipt", key=key, idempotency_key=key)
    faults.hit("after_send", key)
    q.finish_key(key, consumer, ttl_s=86_400)
    return "sent"


def let_expire(name):
    q.r.pexpire(name, 1)
    while q.r.exists(name):
        SystemClock().sleep(0.01)


fixed = (FaultPlan(seed=13).at("after_claim", "crash", key="receipt:203", nth=1)
         .at("after_send", "crash", key="receipt:204", nth=1))
for key in ("receipt:203", "receipt:204"):
    try:
        send_receipt_once(key, "c1", fixed)
    except SimulatedCrash as exc:
        print(f"{key}: c1 {exc}")
    print(f"{key}: c2 within the lease:", send_receipt_once(key, "c2", fixed))
    let_expire(f"{PREFIX}:claim:{key}")
    print(f"{key}: c2 after the lease:", send_receipt_once(key, "c2", fixed))
    print(f"{key}: a late copy:", send_receipt_once(key, "c3", fixed))
with World(folder / "world.db") as world:
    sent = {key: world.count(key, "mail") for key in ("receipt:203", "receipt:204")}
    calls = [c.outcome for c in world.calls("mail") if c.key == "receipt:204"]
print("e-mails sent:", sent, "| crashes fired:", [f.point for f in fixed.fired])
print("the mail API's answers for receipt:204:", calls)
assert sent == {"receipt:203": 1, "receipt:204": 1} and len(fixed.fired) == 2

# %% [markdown]
# ## 9. Trimming deletes what is still pending
#
# `XTRIM` keeps a stream short: `MAXLEN n` keeps the newest n entries, `MINID id` drops
# every entry older than `id` (by age, since an id starts with its milliseconds). On
# Redis 7 neither asks whether a group still has an entry pending
# ([XTRIM](https://redis.io/docs/latest/commands/xtrim/)): there is no way to "trim only
# acknowledged work" (Redis 8.2 added an `ACKED` option for that; this server is 7).
# Consumer c3 reads invoices 300 to 302, acknowledges 300 and dies holding 301 and 302;
# then the stream is trimmed to invoice 303 and newer.

# %%
version = q.r.info("server")["redis_version"]
print("Redis server", version)
ids = {q.add("charge", {"customer": f"cus_{n}", "amount": 3000}, f"invoice:{n}")[0]:
       f"invoice:{n}" for n in range(300, 306)}
held = q.read_new("c3", count=3)
q.ack(held[0].id)
print("pending before the trim:", [ids[p.id] for p in q.pending()])
q.trim(minid=list(ids)[3])
print("stream after XTRIM MINID <invoice:303>:", [ids[i] for i, _ in q.r.xrange(q.stream)])
print("still pending, with no payload:", [ids[p.id] for p in q.pending()])
assert version.split(".")[0] == "7"

# %% [markdown]
# The PEL still names 301 and 302, but their payloads are gone. The next `XAUTOCLAIM`
# that reaches them drops them from the PEL and lists their ids **once**, in the third
# element of its reply (deleted ids, since Redis 7.0,
# [XAUTOCLAIM](https://redis.io/docs/latest/commands/xautoclaim/)). A second
# `XAUTOCLAIM` says nothing, and `XPENDING` no longer counts them: that one reply is the
# only signal the jobs were lost.

# %%
first = q.autoclaim("rescuer", min_idle_ms=0, count=10)
print("1st XAUTOCLAIM: claimed", len(first.entries),
      "| deleted:", [ids[i] for i in first.deleted])
second = q.autoclaim("rescuer", min_idle_ms=0, count=10)
print("2nd XAUTOCLAIM: claimed", len(second.entries), "| deleted:", second.deleted)
print("XPENDING count:", q.r.xpending(q.stream, q.group)["pending"])
assert [ids[i] for i in first.deleted] == ["invoice:301", "invoice:302"]
assert second.deleted == [] and not q.pending()

# %% [markdown]
# So a rescuer must act on `deleted` the moment it sees it: here `q.record_lost` writes
# each id with its reason to `<prefix>:lost` (apart from the dead letters: there is no
# payload to redrive), for a reconciliation against the source of the jobs (the
# invoices table) to re-issue what never ran. Better still, trim only behind what every
# group has acknowledged (on Redis 7 compute that `MINID` yourself from `XPENDING` and
# the group's last-delivered id), and alert on any `deleted` at all.

# %%
q.record_lost(first.deleted, "trimmed by XTRIM MINID while pending; payload gone")
lost = q.lost()
print(format_table([{"origin": ids[r["origin"]], "reason": r["reason"]} for r in lost]))
assert [ids[r["origin"]] for r in lost] == ["invoice:301", "invoice:302"]

# %% [markdown]
# ## 10. The crash table on three engines
#
# Lesson 06 crashed six strategies at seven points on SQLite. `labkit.explore` takes the
# engine as a parameter: each run starts from an empty store (a fresh file, an emptied
# schema, a fresh key prefix), all removed afterwards; the world stays the judge. First in-process (a `SimulatedCrash`), all
# cells, on the three engines; then the `after_effect` column again with real SIGKILLs
# of worker processes on PostgreSQL and Redis Streams (the lab's own test suite does the
# same for `after_commit`).

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
#   a lease beside the PEL, judged by Redis's clock (`TIME`), or by the injected clock
#   when it is a `FakeClock` as in the explorer, so a restarted worker takes the entry
#   back when the lease runs out, as on SQL, and with the same verdict. Like the SQL
#   stores it counts an attempt when a handler starts, not when an entry is read.
# - `after_commit` and `after_ack` are one moment in all three here: the labkit stores
#   commit and acknowledge in one step (the Redis store records the result and `XACK`s
#   in one Lua script). A consumer that writes its result somewhere else and *then*
#   sends `XACK` has a real gap between the two: a crash there redelivers a finished
#   job, and only an effect idempotent at its destination keeps it single (section 8:
#   a "done" record written before the effect loses it on a crash, one written after
#   sends it twice without the destination's key).
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
# | stores on clocks 30 s ahead and behind | both `ServerClock`, agreeing within 1 s; the lesson's store keeps its `FakeClock` |
# | a worker stopped inside its transaction | after 1 s lease and 1 s timeout, worker-d claims attempt 2; the stopped worker's commit fails with `IdleInTransactionSessionTimeout` |
# | advisory lock | host 2 refused, naming host 1; free once host 1 lets go |
# | holder SIGKILLed | host 4 refused while host 3's process holds it; exit code -9, then host 4 gets it |
# | `select_for_update().exists()` on a new event | both runs send the e-mail; B's insert is a unique violation |
# | claim by `INSERT ... ON CONFLICT` | B waits for A's claim, then finds no row and skips: 1 e-mail |
# | w1 SIGKILLed after the charge | `XPENDING`: w1, 1 delivery, idle < 30 s; 1 charge |
# | `XAUTOCLAIM` | nothing before the threshold; rescuer, 2 deliveries after; still 1 charge; PEL empty after `XACK` |
# | poison invoice 666 | 3 failed deliveries, dead-lettered on the 4th read with the 400 reason |
# | redrive limit 1 | same key back on the stream, 1 charge, no dead letters left |
# | TTL 1 s | sent, skipped, then sent again after expiry: 2 receipts |
# | "done" before the send, crash after the `SET` | redelivery skipped: 0 receipts (at most once) |
# | claim lease + `Idempotency-Key` + "done" after | crash after the claim or after the send: left pending within the lease, then 1 e-mail each; a late copy skipped; the mail API answers `ok`, `replayed` for 204 |
# | `XTRIM MINID` over pending 301, 302 | Redis 7.0.x; 1st `XAUTOCLAIM` reports both deleted, the 2nd none, `XPENDING` 0; both recorded as lost |
# | crash table | no cell differs between SQLite, PostgreSQL and Redis Streams; the real kills at `after_effect` agree |
#
# **What to take away**
#
# - Claim in one step: on PostgreSQL, `FOR UPDATE SKIP LOCKED` lets many workers claim at
#   once and never hands one job to two of them.
# - A terminated connection rolls back an uncommitted claim at once; a committed claim
#   comes back only when its lease runs out, judged on one clock (the server's).
# - The server frees what a dead or stopped session holds: an advisory lock when its
#   holder is killed, row locks after `idle_in_transaction_session_timeout`.
# - `SELECT ... FOR UPDATE` locks nothing when the row does not exist yet: claim by
#   inserting (`INSERT ... ON CONFLICT DO NOTHING RETURNING`).
# - On Redis Streams an entry without `XACK` stays pending until `XAUTOCLAIM` hands it on;
#   cap its deliveries, and treat every `deleted` id after an `XTRIM` as a lost job.
# - A "done" record written before the effect gives at most once; what holds is an effect
#   idempotent where it lands, which is why the crash table is the same on every engine.
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
