# %% [markdown]
# # 10 · Periodic jobs
#
# *Key every periodic run by its schedule and fire time, so any number of schedulers
# enqueue each slot once, downtime is caught up by a rule you chose, and a late arrival
# finds the slot already done, as long as you keep the keys.*
#
# > **Resumo.** Cada execução de um job periódico tem como chave o par (agendamento,
# > horário de disparo): rodem quantos schedulers rodarem, cada slot entra na fila uma
# > vez só. Você vai ver réplicas ingênuas mandando três relatórios, as chaves de slot,
# > o catch-up após uma parada, quanto tempo guardar as chaves (as do Stripe expiram), o
# > Celery Beat e por que um flock não basta, o horário de verão e um checklist de cron.
#
# Run time: about 3 seconds.
#
# The cron article's script charged customers twice because two runs overlapped. The Celery-in-production article
# tells the same story one level up: Celery Beat, the scheduler that pushes periodic
# tasks onto the broker, must run as exactly one instance; a deployment with three
# replicas of Beat sent the daily sales report to the board three times. This lesson:
#
# 1. three scheduler replicas, the naive way: three reports;
# 2. slot keys `schedule:<name>:<fire time>`: three replicas, one job per slot;
# 3. catch-up after downtime: `skip`, `once` or `all`;
# 4. how long to keep the keys: prune too early and a reconciliation charges twice; the
#    provider's own idempotency keys expire after a day;
# 5. what that means for Celery Beat, and why a lockfile cannot keep it to one instance;
# 6. time zones: the hour daylight saving time skips or repeats, and keys built from the
#    machine's local time;
# 7. a checklist before putting a script on cron.

# %% [markdown]
# ## Setup
#
# A `FakeClock`, a seeded rng (it decides which replica ticks first each minute), a fresh
# folder, and the outside world (`labkit.world`), whose records tell us how many reports
# were mailed and how many charges were made. The handlers take their effect's key from
# the job key.

# %%
import random

from labkit.clock import LAB_EPOCH, FakeClock, isoformat
from labkit.tables import jobs_table, show
from labkit.patterns.schedule import Scheduler, fire_time_of, slot_key
from labkit.notebook.scratch import fresh_dir
from labkit.store import JobStore
from labkit.worker import Worker
from labkit.world import World

SEED = 10
rng = random.Random(SEED)
folder = fresh_dir("10")
MINUTE, HOUR, DAY = 60.0, 3600.0, 86_400.0


def send_report(job, ctx):
    return ctx.world.mail.send("board@shop.example", f"Daily sales {job.payload['day']}",
                               key=job.key)


def sync_stock(job, ctx):
    return {"synced": isoformat(fire_time_of(job))}


def charge_plan(job, ctx):
    return ctx.world.payments.charge(job.payload["customer"], job.payload["amount"],
                                     key=job.key)


HANDLERS = {"report.daily": send_report, "stock.sync": sync_stock, "billing.charge": charge_plan}
print(f"seed={SEED}  folder={folder}")

# %% [markdown]
# ## 1. Three replicas of a naive scheduler
#
# A naive scheduler is a loop that remembers, in its own memory, when it should fire
# next. That is what Beat does, and what cron does. Run three copies (Kubernetes
# `replicas: 3`, as in the Celery-in-production article) and each one fires on its own: nothing tells a replica
# that another one already did. This class is the naive thing the lesson shows failing.

# %%
class NaiveScheduler:
    """Fires the daily report at 06:00, remembering the next fire time in memory."""

    def __init__(self, store, first_fire):
        self.store, self.next_fire = store, first_fire

    def tick(self, now):
        if now >= self.next_fire:
            day = isoformat(self.next_fire)[:10]
            self.store.enqueue("report.daily", {"day": day})  # no key: a fresh one each time
            self.next_fire += DAY


clock = FakeClock()
naive_store = JobStore(folder / "naive.db", clock=clock, rng=rng)
naive_world = World(folder / "naive_world.db", clock)
replicas = [NaiveScheduler(naive_store, clock.now() + 6 * HOUR) for _ in range(3)]
clock.advance(6 * HOUR - 2 * MINUTE)  # 05:58
for _ in range(5):  # every replica ticks once a minute until 06:02
    for replica in replicas:
        replica.tick(clock.now())
    clock.advance(MINUTE)
Worker(naive_store, HANDLERS, world=naive_world).run_until_idle()
show(jobs_table(naive_store, columns=("id", "kind", "state", "payload")))
print()
show([{"mail": e.response["message_id"], "subject": e.payload["subject"], "at": isoformat(e.at)}
      for e in naive_world.effects("mail")])
assert len(naive_world.effects("mail")) == 3

# %% [markdown]
# Three jobs, three mails to the board, all for the same 06:00 slot. The job keys were
# random, so the store had nothing to compare.
#
# ## 2. Slot keys: one job per slot, whoever ticks
#
# `labkit.patterns.schedule.Scheduler` names each run by what it is, not by who fired it: the key
# of the 06:00 report on 2 January is `schedule:daily-sales:2026-01-02T06:00:00Z`. Any
# replica computes the same slots and the same keys (slots are aligned to the clock,
# not to when a process started), and the job store accepts a key once (lesson 03). A
# second replica's `enqueue` returns the existing job with `created=False`.
#
# Three replicas again, each with its own connection to the job file, as three pods
# would have. Each knows two schedules: the daily report (a crontab, `0 6 * * *`) and a
# stock sync every 15 minutes. They tick once a minute from 05:58 to 07:00, in an order
# the seeded rng shuffles each minute, so the winner of each slot varies.

# %%
clock = FakeClock(LAB_EPOCH + 6 * HOUR - 2 * MINUTE)  # 05:58, when the replicas start
path = folder / "jobs.db"
world = World(folder / "world.db", clock)
schedulers = []
for n in (1, 2, 3):
    replica = Scheduler(JobStore(path, clock=clock, rng=rng), clock, name=f"replica-{n}")
    replica.cron("report.daily", {"day": "2026-01-01"}, name="daily-sales", minute=0, hour=6)
    replica.every(15 * MINUTE, "stock.sync", {"warehouse": "main"}, name="stock-sync")
    schedulers.append(replica)
store = schedulers[0].store

fired = []
while clock.now() <= LAB_EPOCH + 7 * HOUR:
    for replica in rng.sample(schedulers, k=3):
        fired += replica.tick()
    clock.advance(MINUTE)

show([{"key": f.job.key, "job": f.job.id, "created by": f.scheduler, "created": f.created}
      for f in fired])
assert [f.created for f in fired] == [True] * 6 and len(store.jobs()) == 6
assert len({f.job.key for f in fired}) == 6

# %% [markdown]
# Six slots, six jobs, whichever replica happened to tick first. The replicas that
# ticked after it offered nothing: a scheduler reads the latest slot it has from the
# keys in the store, so it saw the slot was taken.
#
# Real processes can also decide at the same instant: both read the store before either
# wrote. Then the key settles it. Here replica-3 works out what is due at 07:15, and
# before it enqueues, replica-1 ticks and takes the slot. replica-3's enqueue, with the
# same slot key, gets the existing job back.

# %%
clock.set(LAB_EPOCH + 7 * HOUR + 15 * MINUTE)
late, first = schedulers[2], schedulers[0]
decided = late.due(late.schedules["stock-sync"], clock.now())  # replica-3 reads...
won = first.tick()  # ...replica-1 enqueues first...
job, created = late.store.enqueue(  # ...then replica-3 enqueues what it decided
    "stock.sync", {"warehouse": "main"}, key=slot_key("stock-sync", decided[0]),
    run_after=decided[0])
print(f"replica-3 decided: {[isoformat(t) for t in decided]}")
print(f"replica-1 created: {[(f.job.key, f.job.id) for f in won if f.created]}")
print(f"replica-3 got    : job {job.id}, created={created}")
assert created is False and job.id == won[0].job.id and len(store.jobs()) == 7

# %% [markdown]
# A worker runs the seven jobs, and the world's mail log has one report.

# %%
Worker(store, HANDLERS, world=world).run_until_idle()
show(jobs_table(store, columns=("id", "kind", "key", "state", "run_after")))
print()
show([{"mail": e.response["message_id"], "key": e.key, "subject": e.payload["subject"]}
      for e in world.effects("mail")])
assert [e.key for e in world.effects("mail")] == [slot_key("daily-sales", store.get(1).run_after)]
assert store.counts()["succeeded"] == 7

# %% [markdown]
# ## 3. Catch-up after downtime
#
# All schedulers were down from 00:00 to 03:10 (a bad deploy). An hourly job missed
# 01:00, 02:00 and 03:00. What should the first tick after the outage do? It depends on
# the job, so each schedule says, with `catch_up`:
#
# | policy | the first tick after downtime enqueues | good for |
# |---|---|---|
# | `skip` | nothing missed (only slots within `grace`, 60 s by default) | a cache refresh: the next slot does the same work |
# | `once` | one run, for the most recent missed slot (Beat's habit) | a report or a sync that covers "everything so far" |
# | `all` | every missed slot, oldest first (bounded by `max_catch_up`) | per-slot work: hourly invoices, one per hour owed |
#
# The scheduler knows what was missed without any state of its own: the latest slot it
# has is the latest key in the job store.

# %%
def after_downtime(policy):
    clock = FakeClock()
    sched = Scheduler(JobStore(folder / f"catch_up_{policy}.db", clock=clock, rng=rng), clock)
    sched.every(HOUR, "stock.sync", name="hourly", catch_up=policy)
    on_time = sched.tick()  # 00:00, on time
    clock.advance(3 * HOUR + 10 * MINUTE)  # down until 03:10
    return {"catch_up": policy, "before": [f.fire_iso[11:16] for f in on_time],
            "after downtime": [f.fire_iso[11:16] for f in sched.tick()],
            "last slot": isoformat(sched.last_slot("hourly"))[11:]}


catch_up = [after_downtime(policy) for policy in ("skip", "once", "all")]
show(catch_up)
assert [c["after downtime"] for c in catch_up] == [[], ["03:00"], ["01:00", "02:00", "03:00"]]

# %% [markdown]
# ## 4. How long to keep the keys
#
# The slot key only protects a slot while its job is in the store. Job tables grow, so
# someone adds a cleanup: `JobStore.prune_finished(older_than_s)` deletes finished jobs
# and their history. The Celery-in-production article describes what happens when the cleanup is too eager: the
# dedup records of a week were deleted after 24 hours, a reconciliation re-ran that week,
# and every payment was made again.
#
# Here is the same thing in minutes. An hourly billing schedule charges a customer per
# slot through the payments API. The fast scheduler enqueues slot 01:00 and a worker
# charges it. Ten seconds later the cleanup runs. Twenty seconds after that, a second
# scheduler that was restarting reconciles its slots: 01:00 is still inside its grace
# window, so it offers that slot. We run this twice, once with a cleanup that prunes at
# once and once with a one-week retention.

# %%
def reconcile_after_prune(retention_s):
    clock = FakeClock(LAB_EPOCH + 30 * MINUTE)  # the schedule starts at 00:30
    name = f"billing_keep_{int(retention_s)}s"
    where = folder / f"{name}.db"
    world = World(folder / f"{name}_world.db", clock)
    fast, slow = (Scheduler(JobStore(where, clock=clock, rng=rng), clock, name=who)
                  for who in ("fast", "slow"))
    for sched in (fast, slow):
        sched.every(HOUR, "billing.charge", {"customer": "cus_7", "amount": 2900}, name="billing")
    clock.advance(30 * MINUTE + 5)  # 01:00:05
    fast.tick()
    Worker(fast.store, HANDLERS, world=world).run_until_idle()
    clock.advance(10)
    pruned = fast.store.prune_finished(older_than_s=retention_s)
    clock.advance(20)
    again = slow.tick()  # the restarted scheduler reconciles
    Worker(fast.store, HANDLERS, world=world).run_until_idle()
    return {"retention": f"{retention_s / DAY:g} days", "jobs pruned": pruned,
            "slow scheduler enqueued": [f.fire_iso for f in again],
            "charges for slot 01:00": world.count(slot_key("billing", LAB_EPOCH + HOUR),
                                                  "payments")}


retention = [reconcile_after_prune(0.0), reconcile_after_prune(7 * DAY)]
show(retention)
assert [r["charges for slot 01:00"] for r in retention] == [2, 1]
assert retention[0]["slow scheduler enqueued"] == ["2026-01-01T01:00:00Z"]
assert retention[1]["jobs pruned"] == 0 and retention[1]["slow scheduler enqueued"] == []

# %% [markdown]
# Pruned at once, the key was gone when the slow scheduler arrived, so the store had no
# reason to refuse: slot 01:00 was charged twice. Kept for a week, the key was still
# there and the late arrival changed nothing.
#
# The rule: keep keys longer than anything can arrive late with them. That is not only
# the broker's redelivery window (minutes to hours) but every re-run a person or a
# reconciliation job can start: often months, and then an explicit, audited archive is
# safer than a silent expiry.
#
# ### The destination's keys expire too
#
# The payments API above got no idempotency key. With one (lesson 06's fix), it would
# have refused the second charge, as a second layer, but only for as long as it keeps
# the key: Stripe removes an `Idempotency-Key` once it is at least 24 hours old. After
# that the same key is a new request. `expire_idempotency_keys` plays Stripe's cleanup.
# The slot is charged with its slot key as the `Idempotency-Key`; our own job for the
# slot is already pruned (as in the first run above), so nothing on our side refuses a
# re-run; and a reconciliation re-runs the slot 2 hours later, then 25 hours later:

# %%
def late_rerun(after_s):
    clock = FakeClock(LAB_EPOCH + HOUR)
    world = World(folder / f"stripe_after_{int(after_s)}s.db", clock)
    key = slot_key("billing", LAB_EPOCH + HOUR)
    world.payments.charge("cus_7", 2900, idempotency_key=key)
    clock.advance(after_s)
    forgotten = world.payments.expire_idempotency_keys(older_than_s=DAY)  # the provider's cleanup
    world.payments.charge("cus_7", 2900, idempotency_key=key)  # the late re-run
    row = {"re-run after": f"{after_s / HOUR:g} h", "provider forgot the key": bool(forgotten),
           "calls": [c.outcome for c in world.calls("payments")],
           "charges for slot 01:00": world.count(key, "payments")}
    world.close()
    return row


stripe = [late_rerun(2 * HOUR), late_rerun(25 * HOUR)]
show(stripe)
assert [r["charges for slot 01:00"] for r in stripe] == [1, 2]
assert stripe[0]["calls"] == ["ok", "replayed"] and stripe[1]["provider forgot the key"]

# %% [markdown]
# Within the day the provider answered from its stored reply; a day later it had
# forgotten, and charged again. So the destination's key covers the redelivery window
# (minutes), not the re-runs a person or a reconciliation starts days later. Your own
# keys must outlive every late arrival, because after 24 hours they are the only layer
# left: keep the job table's keys (or the ledger of lesson 06) at least as long as any
# re-run can reach back, and much longer than the provider keeps its own.
#
# ## 5. And Celery Beat?
#
# Beat is a separate process that pushes a message onto the broker at each scheduled
# time. Several Beat instances do not coordinate, and a broker does not deduplicate
# messages, so the Celery-in-production article's advice has two layers:
#
# 1. run **exactly one** Beat: `replicas: 1`, no autoscaling, or a lock that a second
#    instance cannot take, or a scheduler built for several instances;
# 2. make the task itself idempotent with a key from (schedule, fire time), checked in
#    the same transaction as its effect, so an accidental second Beat, or an operator
#    running the task by hand, changes nothing. Keep those keys as long as section 4 says.
#
# Which lock? Not lesson 02's lockfile. `single_instance` is a `flock` on a file, and a
# file lives on one machine's disk: it keeps two Beats apart on one host only. A
# Kubernetes rolling update starts the new Beat pod before it stops the old one, often
# on another node, and each pod takes the lock in its own filesystem. Two "hosts" with
# the same lock path, played here as two folders:

# %%
from contextlib import ExitStack

from labkit.patterns.lock import single_instance

with ExitStack() as pods:
    holders = []
    for node in ("node-a", "node-b"):
        (folder / node).mkdir()
        # each Beat pod takes "the" lock, in its own node's filesystem
        holders.append(pods.enter_context(
            single_instance(folder / node / "celerybeat.lock", started_at=LAB_EPOCH)))
    print(f"Beat pods holding celerybeat.lock at the same time: {len(holders)}")
assert len(holders) == 2

# %% [markdown]
# Both got it. A lock that spans machines must live where both can see it: a PostgreSQL
# advisory lock (`pg_try_advisory_lock`, released when the holder's session ends, which
# lesson 13 shows), a lease row in a shared database, or a leader election (a Kubernetes
# `Lease`). Even then, a lock only makes a second Beat *unlikely* (a paused holder can
# lose it and come back); the slot key is the real fix, because it holds while two Beats
# run. `labkit.patterns.schedule` is that second layer built into the scheduler: the key is the
# enqueue's key, so the job table itself is the one place where "this slot ran" is
# written.

# %% [markdown]
# ## 6. Time zones and daylight saving time
#
# labkit's schedules run in UTC, and a slot's key is its UTC instant. A business
# schedule is usually local ("every day at 02:30 in New York"), and local time is not a
# clock: on the day daylight saving time starts, 02:30 does not happen there at all; on
# the day it ends, 01:30 happens twice. A scheduler that fires "when the wall clock reads
# 02:30" skips a day, and one at 01:30 runs twice. Python's `zoneinfo` (the IANA time
# zone database) shows it: every minute of each day, in UTC, whose New York wall clock
# reads the schedule's time.

# %%
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from labkit.patterns.schedule import slot_iso

NEW_YORK = ZoneInfo("America/New_York")


def wall_clock_hits(day: str, hhmm: str, zone: ZoneInfo) -> list[datetime]:
    """The UTC minutes of ``day`` (local) at which ``zone``'s wall clock reads ``hhmm``."""
    start = datetime.fromisoformat(day).replace(tzinfo=zone).astimezone(UTC)
    minutes = (start + timedelta(minutes=k) for k in range(26 * 60))
    return [m for m in minutes if m.astimezone(zone).strftime("%Y-%m-%d %H:%M") == f"{day} {hhmm}"]


rows = [{"New York day": day, "wall clock": hhmm,
         "times it happens": len(hits := wall_clock_hits(day, hhmm, NEW_YORK)),
         "UTC instants": ", ".join(slot_iso(h.timestamp()) for h in hits) or "-"}
        for day, hhmm in (("2026-03-08", "02:30"), ("2026-11-01", "01:30"),
                          ("2026-11-02", "01:30"))]
show(rows)
assert [r["times it happens"] for r in rows] == [0, 2, 1]

# %% [markdown]
# The fix is to decide the fire *instant* once per local day, with a stated rule for the
# gap and the repeat, and to key the slot by that instant. `zoneinfo` has the rule
# built in ([Python: zoneinfo](https://docs.python.org/3/library/zoneinfo.html), and
# [PEP 495](https://peps.python.org/pep-0495/) for `fold`): a local time built with
# `fold=0` that falls in the gap is read with the offset from before the change, and
# one that happens twice means its first occurrence. Each day then has exactly one
# instant, and two schedulers that both compute it enqueue one job:

# %%
def local_daily_instant(day: str, hhmm: str, zone: ZoneInfo) -> float:
    """The one UTC instant of ``day`` at ``hhmm`` in ``zone`` (gap: offset before; repeat: first)."""
    local = datetime.fromisoformat(f"{day}T{hhmm}").replace(tzinfo=zone, fold=0)
    return local.timestamp()


local_store = JobStore(folder / "local.db", clock=FakeClock(LAB_EPOCH))
rows = []
for day, hhmm in (("2026-03-08", "02:30"), ("2026-11-01", "01:30")):
    when = local_daily_instant(day, hhmm, NEW_YORK)
    created = [local_store.enqueue("report.daily", {"day": day},
                                   key=slot_key("ny-report", when))[1] for _replica in "ab"]
    rows.append({"New York day": day, "wall clock": hhmm, "fire instant": slot_iso(when),
                 "created by replica a, b": created})
show(rows)
print("jobs:", local_store.counts()["pending"])
assert local_store.counts()["pending"] == 2

# %% [markdown]
# One more trap, the one exercise 12 grades: a key built from the *machine's* local
# time. `datetime.fromtimestamp(ts)` without a zone uses the zone the process runs in,
# so two schedulers on machines set to different zones name the same slot differently,
# and the job store sees two slots. Here is what that call returns for the same instant
# on a machine set to UTC and on one set to São Paulo (computed with each zone, so this
# lesson does not depend on the zone of the machine you run it on):

# %%
instant = LAB_EPOCH + 9 * HOUR
naive_keys = {tz: "schedule:report:" + datetime.fromtimestamp(instant, ZoneInfo(tz))
              .replace(tzinfo=None).isoformat() for tz in ("UTC", "America/Sao_Paulo")}
for tz, key in naive_keys.items():
    local_store.enqueue("report.daily", {"machine": tz}, key=key)
show([{"machine's zone": tz, "key it builds": key} for tz, key in naive_keys.items()])
one_slot = [j for j in local_store.jobs() if j.key.startswith("schedule:report:")]
print("jobs in the table for one slot:", len(one_slot), "| its UTC key, the same everywhere:",
      slot_key("report", instant))
assert len(one_slot) == 2

# %% [markdown]
# ## 7. Before you put a script on cron
#
# Each item points at where this lab shows it:
#
# 1. **Two runs at once will happen** (a slow run still going when the next starts, a
#    second host, a re-run by hand): key each run by its slot (§2), or at the very least
#    hold a lock for the run (lesson 02).
# 2. **A run must be safe to repeat**: keys from the intent, not from the clock or a
#    uuid (lesson 03); effects recorded with their key (lesson 06).
# 3. **Every outside call has a timeout**, and retries know a request that was never
#    sent from one that may have been done (lesson 05).
# 4. **cron starts the command in a small environment**: crontab(5) says `SHELL` is set
#    to `/bin/sh` and `LOGNAME` and `HOME` come from the owner's `/etc/passwd` entry,
#    and that a line like `PATH = $HOME/bin:$PATH` is not expanded
#    ([crontab(5)](https://man.cx/crontab(5))). Use absolute paths, and set what the
#    script needs (its virtualenv, `TZ`) in the script itself.
# 5. **Its output goes to mail or nowhere**: crontab(5)'s `MAILTO` decides. Log each run
#    with its slot and key where you will read it, and exit non-zero on failure
#    (lesson 11).
# 6. **A run that never happened raises no error**: alert on the age of the last
#    success or of the oldest waiting job, not only on failures (lesson 11's
#    `LabkitOldestReadyJobTooOld`).
# 7. **Write down the catch-up policy** after downtime (§3) and **the time zone** of the
#    schedule, with its rule for the skipped and the repeated hour (§6).

# %% [markdown]
# ## What you should see
#
# | step | what the records show |
# |---|---|
# | three naive replicas | 3 jobs with random keys; the board gets the 06:00 report 3 times |
# | three replicas with slot keys | 6 slots, 6 jobs, each created by one replica |
# | two replicas decide at once | the late enqueue gets the same job back, `created=False` |
# | the worker runs them | one report mailed |
# | downtime 00:00 → 03:10 | `skip`: nothing; `once`: 03:00; `all`: 01:00, 02:00, 03:00 |
# | prune at once, then reconcile | 1 job pruned; slot 01:00 enqueued again; 2 charges |
# | keep keys a week, then reconcile | nothing pruned, nothing enqueued; 1 charge |
# | provider key, re-run after 2 h / 25 h | `replayed`, 1 charge / forgotten, 2 charges |
# | a lockfile on two nodes | both Beat pods hold it at once |
# | New York wall clock, 8 Mar / 1 Nov 2026 | 02:30 happens 0 times; 01:30 happens twice |
# | one instant per local day, two replicas | one job per day, the second replica's `created` is False |
# | keys from the machine's local time | two keys, two jobs for one slot; the UTC key is one |
#
# **What to take away**
#
# - Key each periodic run by its schedule and fire time, `schedule:<name>:<fire time>`:
#   any number of schedulers then enqueue each slot once, and the key settles races.
# - Choose the catch-up policy per schedule (`skip`, `once`, `all`): what a missed slot
#   should do after downtime depends on the job.
# - A key protects a slot only while it is kept: keep your keys longer than any re-run or
#   reconciliation can reach back; the provider's idempotency keys expire after a day.
# - Run exactly one Celery Beat, but do not count on it: a lockfile holds on one host
#   only, so the task itself must be idempotent, keyed by its slot.
# - Decide the fire instant once per local day, with a rule for the skipped and the
#   repeated hour, and key the slot by its UTC instant, never by the machine's local
#   time.
#
# ## Glossary and next
#
# The terms of this lesson, and of every other, in English and Portuguese:
# [Glossary / Glossário](glossary.md).
#
# [Next: 11 · Observability](11_observability.ipynb)
