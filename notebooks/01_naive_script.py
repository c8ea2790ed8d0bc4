# %% [markdown]
# # 01 · The naive script
#
# *A billing script that fetches, processes and sends, with no protection, and the
# three ways it charges people twice, each shown from the payment provider's own
# records.*
#
# > **Resumo.** O script de cobrança que todo mundo escreve primeiro (buscar, processar,
# > enviar), sem proteção nenhuma, passa por três noites ruins: o processo morre no meio e
# > a reexecução cobra de novo; o cron dispara duas execuções ao mesmo tempo; a resposta
# > do provedor se perde e o retry cobra duas vezes. Quem dá o veredito são os registros
# > do provedor de pagamentos, não o log do script.
#
# Run time: about 2 seconds (two threads play the overlapping cron runs).
#
# The cron article opens with the script everyone writes first: fetch the data, process it,
# send the result. It is clean, it works on the first day, and it knows nothing: not
# whether it is already running, not whether it died halfway last night, not whether
# the provider did the charge whose reply never came back. This lesson writes that
# script on purpose (the only lesson where naive code lives in the notebook) and runs
# it in three bad nights:
#
# 1. the process dies in the middle of the run, and the re-run charges again;
# 2. cron starts a second run while the first is still going;
# 3. the provider charges, the reply is lost, and the script "retries".
#
# The judge is not the script's own log (it believes it did fine) but the outside
# world: `labkit.world.World`, a payment API and a mail provider that record every
# effect in their own database file.

# %% [markdown]
# ## Setup
#
# A `FakeClock` that starts at 02:00 on 1 January 2026 (when the cron line fires), a
# fixed seed for the fault plans, and a fresh folder for the world's files.

# %%
import threading
from collections import Counter

from labkit.clock import LAB_EPOCH, FakeClock, isoformat
from labkit.errors import SimulatedCrash, TransientError
from labkit.faults import FaultPlan
from labkit.tables import format_table, show
from labkit.notebook.scratch import fresh_dir
from labkit.world import World

SEED = 1
clock = FakeClock(LAB_EPOCH + 2 * 3600)
folder = fresh_dir("01")
print(f"seed={SEED}  clock={clock}  folder={folder}")

# %% [markdown]
# ## The script
#
# Six customers are due this month. The script fetches them, works out each invoice
# (the table below), charges the card and emails the invoice. It even retries a
# timeout, three tries, because the payment API is sometimes slow: that is day four in
# the cron article's story, and on day five "the retry duplicates everything".
#
# It passes the invoice reference to the provider as `key`, the way one puts an order
# number in Stripe's metadata. That is a label for us to read the records by; it does
# not stop anything (an idempotency key the provider honours would, lessons 03 and 06).

# %%
CUSTOMERS = [
    ("ana", "basic"), ("bruno", "pro"), ("carla", "basic"),
    ("davi", "pro"), ("elis", "team"), ("fabio", "basic"),
]
PRICES = {"basic": 4_990, "pro": 9_990, "team": 29_990}  # cents, BRL
MONTH = "2026-01"


def fetch_due_customers():
    return list(CUSTOMERS)


def process(customer, plan):
    return {"customer": customer, "amount": PRICES[plan], "ref": f"inv-{MONTH}-{customer}"}


def send(world, invoice):
    for attempt in range(1, 4):  # the naive retry: try again on a timeout
        try:
            world.payments.charge(invoice["customer"], invoice["amount"], key=invoice["ref"])
            break
        except TransientError:
            if attempt == 3:
                raise
    world.mail.send(f"{invoice['customer']}@example.com", f"Invoice {invoice['ref']}",
                    key=invoice["ref"])


def billing_run(world):
    for customer, plan in fetch_due_customers():
        send(world, process(customer, plan))


show([process(customer, plan) for customer, plan in fetch_due_customers()])

# %% [markdown]
# Two helpers read the world's truth: every effect it recorded, and how many times each
# customer was charged. One charge per customer is right; anything else is a lie the
# script told nobody about.

# %% tags=["no-output"]
def effects_table(world):
    return format_table(
        [{"id": e.id, "service": e.service, "action": e.action, "key": e.key,
          "amount": e.payload.get("amount", "-"), "at": isoformat(e.at)}
         for e in world.effects()]
    )


def charges_per_customer(world):
    counted = Counter(e.payload["customer"] for e in world.effects(service="payments"))
    return {customer: counted[customer] for customer, _ in CUSTOMERS}

# %% [markdown]
# ## A good night, for reference
#
# Nothing goes wrong: six charges, six emails, one charge per customer.

# %%
good = World(folder / "world-good.db", clock=clock)
billing_run(good)
print(effects_table(good))
print()
print("charges per customer:", charges_per_customer(good))
assert charges_per_customer(good) == {c: 1 for c, _ in CUSTOMERS}
assert len(good.effects(service="mail")) == 6

# %% [markdown]
# ## Lie 1: the process dies in the middle
#
# The server restarts (a deploy, the out-of-memory killer, a power cut) while the
# script is calling the payment API for davi. A `FaultPlan` puts the crash exactly
# there: at `before_call` for davi's invoice, the first time. `SimulatedCrash` is a
# `BaseException`, so no `except` in the script can catch it; the process is gone.

# %%
plan = FaultPlan(seed=SEED).at("before_call", "crash", key=f"inv-{MONTH}-davi", nth=1)
print(f"fault plan (replay): {plan}")
night1 = World(folder / "world-crash.db", clock=clock, faults=plan)
try:
    billing_run(night1)
except SimulatedCrash as exc:
    print(f"the process died: {exc}")
else:
    raise AssertionError("the planned crash did not happen")
assert plan.fired_at("before_call", "crash")

# %% [markdown]
# What did the world see? Three customers charged and emailed, three not. The script
# left no record of how far it got: its progress lived in a `for` loop, in memory, in
# a process that no longer exists.

# %%
print(effects_table(night1))
print()
print("charges per customer:", charges_per_customer(night1))
assert charges_per_customer(night1) == {
    "ana": 1, "bruno": 1, "carla": 1, "davi": 0, "elis": 0, "fabio": 0}

# %% [markdown]
# In the morning someone notices and does the obvious thing: run it again. The script
# starts from the top, because it has no way to know where it stopped.

# %%
clock.advance(6 * 3600)
rerun = World(folder / "world-crash.db", clock=clock)  # a new process, same provider
billing_run(rerun)
print(effects_table(rerun))
print()
print("charges per customer:", charges_per_customer(rerun))
assert charges_per_customer(rerun) == {
    "ana": 2, "bruno": 2, "carla": 2, "davi": 1, "elis": 1, "fabio": 1}

# %% [markdown]
# The re-run finished the job and charged ana, bruno and carla a second time, at 08:00,
# with a second invoice email each. Fixing a half-done run by hand (work out who was
# charged, edit the customer list, run it for the rest) is the job the script should
# have done itself.

# %% [markdown]
# ## Lie 2: two cron runs at once
#
# The cron line says "every hour". The next night the payment API is slow and the 02:00
# run is still going when the 03:00 one starts. Cron does not know or care: it starts
# another process. Here two threads play the two processes, each with its own
# connection to the provider's file. Which one charges whom first changes from run to
# run, so we print only what does not change: the counts.

# %%
clock.set(LAB_EPOCH + 24 * 3600 + 3 * 3600)  # the next night, 03:00
overlap = World(folder / "world-overlap.db", clock=clock)  # the provider, up before the runs


def cron_run():
    world = World(folder / "world-overlap.db", clock=clock)
    billing_run(world)
    world.close()


runs = [threading.Thread(target=cron_run) for _ in range(2)]
for run in runs:
    run.start()
for run in runs:
    run.join()

print("charges per customer:", charges_per_customer(overlap))
print("emails sent:", len(overlap.effects(service="mail")))
assert charges_per_customer(overlap) == {c: 2 for c, _ in CUSTOMERS}
assert len(overlap.effects(service="mail")) == 12

# %% [markdown]
# Every customer charged twice and emailed twice. Nothing crashed and no error was
# logged; both runs "succeeded". Whether the two runs overlapped by a millisecond or
# by an hour makes no difference: the script has no memory of what it did, and no way
# to see that another copy of itself is running.

# %% [markdown]
# ## Lie 3: the lost response
#
# The third night is the subtlest. The provider receives bruno's charge, does it,
# commits it, and the reply is lost on the way back (a load balancer timeout, a dropped
# connection). For the script this is a timeout, and its naive retry sends the charge
# again. `payments.script` tells the provider how to behave on its next calls: the
# first normally, the second with its reply lost.

# %%
clock.set(LAB_EPOCH + 2 * 24 * 3600 + 2 * 3600)  # the night after, 02:00
night3 = World(folder / "world-lost.db", clock=clock)
night3.payments.script("ok", "lose_response")
billing_run(night3)
print("the script finished without an error")
print()
print(effects_table(night3))
print()
print("charges per customer:", charges_per_customer(night3))
assert charges_per_customer(night3) == {
    "ana": 1, "bruno": 2, "carla": 1, "davi": 1, "elis": 1, "fabio": 1}

# %% [markdown]
# The provider's log of calls shows how it happened: bruno's first charge was done and
# its reply lost (`ok_response_lost`), then the retry was done again (`ok`). The script
# saw one timeout and one success, and believes it charged bruno once.
#
# The call ids have a gap (1, 3, 4) because the world numbers the calls of all its
# services in one sequence, and this table shows only the payment API: call 2 is the
# invoice email to ana, sent between her charge and bruno's.

# %%
show(
    [{"id": c.id, "service": c.service, "key": c.key, "outcome": c.outcome,
      "status": c.status} for c in night3.calls(service="payments")][:3]
)
call_2 = next(c for c in night3.calls() if c.id == 2)
print(f"\ncall 2 is {call_2.service}.{call_2.action} for {call_2.key}")
assert (call_2.service, call_2.key) == ("mail", f"inv-{MONTH}-ana")
bruno = [c.outcome for c in night3.calls(service="payments") if c.key == f"inv-{MONTH}-bruno"]
assert bruno == ["ok_response_lost", "ok"]

# %% [markdown]
# A timeout does not mean "it did not happen". It means "I do not know". Retrying an
# unknown outcome is only safe when the destination can recognise the second request
# as the same one, which is what an idempotency key is for (lessons 03 and 06). Not
# retrying is no fix either: then a charge whose request really was lost is never made.

# %% [markdown]
# ## The three lies side by side
#
# The same question put to each provider file: how many charges per customer?

# %%
for world in (good, night1, overlap, night3):
    world.close()
summary = []
for night, path in (("good night", "world-good.db"), ("crash + re-run", "world-crash.db"),
                    ("two cron runs", "world-overlap.db"), ("lost response", "world-lost.db")):
    with World(folder / path, clock=clock) as world:
        counts = charges_per_customer(world)
    summary.append({"night": night, **counts, "total": sum(counts.values()),
                    "customers overcharged": sum(n > 1 for n in counts.values())})
show(summary)
assert [row["customers overcharged"] for row in summary] == [0, 3, 6, 1]

# %% [markdown]
# Each lie needs its own defence, and the next lessons build them one at a time:
#
# * two runs at once: a lock, so only one instance runs (lesson 02);
# * the re-run after a crash: a record of each unit of work under a stable key, so a
#   re-run skips what is done (lessons 03 and 04);
# * the lost response: retries that know which errors are safe to repeat (lesson 05),
#   and an idempotency key the destination honours (lesson 06).

# %% [markdown]
# ## What you should see
#
# | night | what the world's records show |
# |---|---|
# | good night | 6 charges, 6 emails, 1 charge per customer |
# | crash at davi's charge | ana, bruno, carla charged; davi, elis, fabio not; the script kept no record |
# | re-run in the morning | ana, bruno and carla charged twice (2, 2, 2, 1, 1, 1) |
# | two cron runs at once | every customer charged twice, 12 emails, no error anywhere |
# | lost response | bruno charged twice: calls `ok_response_lost`, then `ok` |
# | side by side | overcharged customers: 0, 3, 6, 1 |
#
# **What to take away**
#
# - A script that keeps its progress in memory cannot tell, after a crash, what it
#   already did: a re-run from the top repeats the work.
# - Cron starts a new run whether or not the last one finished; nothing stops two copies
#   from doing the same work.
# - A timeout means "I don't know", not "it did not happen": a blind retry after a lost
#   reply charges twice, and not retrying loses the charges that really failed.
# - Judge by the destination's records, not the script's log: the script believes it did
#   fine, and two of the three bad nights logged no error at all.
# - Each failure needs its own defence: a lock, a record per unit of work under a stable
#   key, and retries carrying an idempotency key.
#
# ## Glossary and next
#
# The terms of this lesson, and of every other, in English and Portuguese:
# [Glossary / Glossário](glossary.md).
#
# [Next: 02 · A lockfile](02_lockfile.ipynb)
