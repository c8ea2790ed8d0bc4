# %% [markdown]
# # 03 · Units of work and stable keys
#
# *A retry, a second cron run and a redelivery must all carry the same key, so the job
# table can tell "again" from "new".*
#
# > **Resumo.** Cada unidade de trabalho ganha uma chave estável, montada a partir da
# > intenção (origem, id, ação, versão), nunca de um uuid ou do horário. Você vai ver duas
# > execuções do cron gerarem três jobs, não seis; o mesmo item repetido na origem e um
# > webhook entregue duas vezes virarem um job só; o fingerprint do payload; e a mesma
# > chave com outro conteúdo sendo recusada com `IdempotencyConflict`.
#
# Run time: about 2 seconds.
#
# Lesson 01 ended with a customer charged twice: the cron script ran twice and nothing
# could tell that the second run was the same work as the first. This lesson gives each
# piece of work a name that does not change between runs, and shows what the job table
# does with it.
#
# The plan:
#
# 1. pick the **unit of work**: the smallest thing that can be done on its own;
# 2. see keys made from a uuid or from the time fail: the same intent becomes two jobs;
# 3. build the key from the **intent** with `labkit.keys.operation_key`;
# 4. fingerprint the payload, so a rebuilt dict is still the same job;
# 5. refuse the same key with other content: an `IdempotencyConflict`;
# 6. decide when a key's version must change.

# %% [markdown]
# ## Setup
#
# Every lesson starts the same way: a `FakeClock` (time moves only when we say so), a
# seeded `random.Random`, and a fresh folder for its files. Nothing on this page depends
# on the wall clock, so every run prints the same text.

# %%
import random
import uuid

from labkit.clock import FakeClock, isoformat
from labkit.errors import IdempotencyConflict, TransientError
from labkit.keys import canonical_json, fingerprint, operation_key
from labkit.tables import jobs_table, show
from labkit.notebook.scratch import fresh_dir
from labkit.store import JobStore

SEED = 3
rng = random.Random(SEED)
clock = FakeClock()
folder = fresh_dir("03")
print(f"seed={SEED}  clock={clock}  folder={folder}")

# %% [markdown]
# ## 1. The unit of work
#
# The billing script from lesson 01 charges every open invoice. The unit of work is
# **one charge of one invoice**: it can succeed or fail on its own, and the customer
# cares about each one separately. For every unit we must be able to answer: what is
# its stable identity, what action runs on it, and how do we know it was already done?
#
# Here are this month's open invoices, as the billing system returns them.

# %%
invoices = [
    {"invoice": 41, "customer": "c-ana", "amount_cents": 4990},
    {"invoice": 42, "customer": "c-bruno", "amount_cents": 1990},
    {"invoice": 43, "customer": "c-carla", "amount_cents": 12900},
]
show(invoices)

# %% [markdown]
# ## 2. Keys that name an attempt, not an intent
#
# A common first try gives each job a fresh `uuid4()` (here drawn from the seeded rng so
# the page prints the same ids every run; a real `uuid4()` is worse, not better). The
# cron job runs at midnight and, because the first run was slow, again five minutes
# later.
# Both runs enqueue the same three charges.

# %%
naive = JobStore(folder / "naive_uuid.db", clock=clock, rng=rng)


def cron_run_with_uuid_keys(store):
    for inv in invoices:
        key = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        store.enqueue("charge", inv, key=key)


cron_run_with_uuid_keys(naive)
clock.advance(300)  # the second cron run, five minutes later
cron_run_with_uuid_keys(naive)
show(jobs_table(naive, columns=("id", "key", "state")))
assert naive.counts()["pending"] == 6, "two runs of the same intent should make six jobs here"

# %% [markdown]
# Six jobs for three invoices: each customer will be charged twice, and the table has no
# way to know. The same happens with a key built from the time (the second run has
# another `now`), and with no key at all: `enqueue` without `key=` gives each job its
# own `auto:` key, which by design can never match another.

# %%
timed = JobStore(folder / "naive_time.db", clock=clock, rng=rng)
for _run in range(2):
    for inv in invoices:
        timed.enqueue("charge", inv, key=f"charge-{inv['invoice']}-{clock.now():.0f}")
    clock.advance(300)

keyless = JobStore(folder / "naive_nokey.db", clock=clock, rng=rng)
for _run in range(2):
    for inv in invoices:
        keyless.enqueue("charge", inv)

show(jobs_table(timed, columns=("id", "key", "state")))
print()
print("without a key:", keyless.counts()["pending"], "jobs, keys start with",
      {job.key.split(":")[0] for job in keyless.jobs()})
assert timed.counts()["pending"] == 6
assert keyless.counts()["pending"] == 6

# %% [markdown]
# ## 3. A key built from intent
#
# `operation_key(source, entity_id, action, version=1)` names *what we mean to do*:
# "billing, invoice 42, charge, version 1". It uses nothing that changes between runs,
# processes or attempts, so every run that means the same thing produces the same
# string.

# %%
print(operation_key("billing", 42, "charge"))
assert operation_key("billing", 42, "charge") == "billing:42:charge:v1"

# %% [markdown]
# Now the same two cron runs against a fresh job table. `enqueue` returns
# `(job, created)`: the second run finds each key already there and gets the existing
# job back with `created=False`.

# %%
store = JobStore(folder / "jobs.db", clock=clock, rng=rng)


def cron_run(store):
    outcomes = []
    for inv in invoices:
        key = operation_key("billing", inv["invoice"], "charge")
        job, created = store.enqueue("charge", inv, key=key)
        outcomes.append({"run_at": isoformat(clock.now()), "key": key, "job": job.id, "created": created})
    return outcomes


first = cron_run(store)
clock.advance(300)
second = cron_run(store)
show(first + second)
print()
show(jobs_table(store, columns=("id", "key", "state")))
assert store.counts()["pending"] == 3
assert [o["created"] for o in second] == [False, False, False]

# %% [markdown]
# The key also survives the job's whole life. A retry is the **same row**. Three calls
# of the job store appear here for the first time (lesson 04 takes each one apart):
#
# * `store.claim(worker, lease_s=30)` hands the oldest ready job to one worker, marks it
#   `running` and counts an attempt;
# * `store.fail(job, error)` records a failed attempt; for an error that can pass (a
#   503; a read timeout only for a job with a natural key, lesson 05 says why) the job
#   goes to **`retry_wait`**, a state that means "try again after a
#   backoff" (lesson 05 chooses how long), instead of being lost or retried at once;
# * `store.complete(job, result=...)` records success.
#
# A worker claims the first charge (invoice 41) and the payment API times out: the job
# goes to `retry_wait` with attempt 1 recorded. Another worker charges invoices 42 and
# 43, and when the backoff has passed it picks invoice 41 up again: same id, same key,
# attempt 2. Nothing about a retry needs a new name.

# %%
first_try = store.claim("worker-a", lease_s=30)
store.fail(first_try, TransientError("payment API timed out", status=504))
show(jobs_table(store, columns=("id", "key", "state", "attempt")))

for _ in range(2):
    job = store.claim("worker-b", lease_s=30)
    store.complete(job, result={"charge_id": f"ch_{job.payload['invoice']}"})
clock.advance(600)  # longer than any backoff of a first retry here
retry = store.claim("worker-b", lease_s=30)
print()
print(f"claimed again: job {retry.id}, key {retry.key}, attempt {retry.attempt}")
assert (retry.id, retry.key, retry.attempt) == (first_try.id, first_try.key, 2)

# %% [markdown]
# The retry succeeds. Tomorrow's cron run asks for the same three charges: each key
# already names a `succeeded` job, so nothing is created and nothing will run. This is
# the "skip what is done" that lets a script stop at invoice 37 of 100 and resume
# without charging the first 36 again.

# %%
store.complete(retry, result={"charge_id": "ch_41"})
clock.advance(24 * 3600)
tomorrow = cron_run(store)
show(tomorrow, columns=("key", "job", "created"))
print()
print(store.counts())
assert store.counts()["succeeded"] == 3 and store.counts()["pending"] == 0
assert not any(o["created"] for o in tomorrow)

# %% [markdown]
# ### The same item twice in the source
#
# The cron article lists another thing the naive script cannot know: whether the same
# item appeared twice in the source. Exports and paginated APIs do this (a row updated
# while the pages were read shows up on two pages). Next month's fetch returns invoice
# 44 twice; the key, built from the invoice, makes the second copy the same job.

# %%
next_month = [
    {"invoice": 44, "customer": "c-davi", "amount_cents": 7900},
    {"invoice": 45, "customer": "c-elis", "amount_cents": 2500},
    {"invoice": 44, "customer": "c-davi", "amount_cents": 7900},  # page 2 repeats it
]
seen = []
for inv in next_month:
    job, created = store.enqueue("charge", inv, key=operation_key("billing", inv["invoice"], "charge"))
    seen.append({"invoice": inv["invoice"], "job": job.id, "created": created})
show(seen)
assert [row["created"] for row in seen] == [True, True, False]
assert store.counts()["pending"] == 2

# %% [markdown]
# ### A duplicate inbound webhook
#
# The same happens on the way *in*. The ERP article's integration receives webhooks from
# the ERP, and "the webhook that should arrive once arrives twice": the sender did not
# get our 200 in time and delivered it again. A webhook carries the sender's own event
# id; make it the key, and the second delivery finds the first job. (The ERP article
# builds its key from a hash of the content instead; the difference is the subject of
# section 5.) The endpoint below answers 200 both times, so the sender stops resending.

# %%
def receive_webhook(body):
    """What an inbound webhook endpoint does: accept durably, by the sender's event id."""
    job, created = store.enqueue("erp.order_updated", body,
                                 key=operation_key("erp-webhook", body["event_id"], "handle"))
    return {"status": 200, "job": job.id, "created": created}


delivery = {"event_id": "evt_981", "order": 42, "status": "invoiced"}
print("first delivery :", receive_webhook(delivery))
print("second delivery:", receive_webhook(dict(delivery)))
hooks = [j for j in store.jobs() if j.kind == "erp.order_updated"]
print(f"jobs for evt_981: {len(hooks)}")
assert len(hooks) == 1

# %% [markdown]
# ## 4. The payload fingerprint
#
# The key says *which* operation; the **fingerprint** says *with what content*. It is a
# SHA-256 of the payload's canonical JSON: keys sorted, no spaces. Two dicts that hold
# the same data in another order are the same payload.

# %%
a = {"invoice": 42, "customer": "c-bruno", "amount_cents": 1990}
b = {"amount_cents": 1990, "invoice": 42, "customer": "c-bruno"}
c = {"invoice": 42, "customer": "c-bruno", "amount_cents": 2990}
print("canonical a:", canonical_json(a))
print("canonical b:", canonical_json(b))
for name, payload in (("a", a), ("b", b), ("c", c)):
    print(f"fingerprint {name}: {fingerprint(payload)[:16]}…")
assert fingerprint(a) == fingerprint(b)
assert fingerprint(a) != fingerprint(c)

# %% [markdown]
# So a redelivery that rebuilt the dict in another order is still recognised as the same
# job:

# %%
job, created = store.enqueue("charge", b, key=operation_key("billing", 42, "charge"))
print(f"job {job.id}, created={created}, state={job.state}")
assert not created

# %% [markdown]
# ## 5. Same key, other payload: a conflict, on purpose
#
# Now someone enqueues the charge for invoice 42 with a different amount under the same
# key. Returning the old job would silently ignore the new amount; creating a second job
# would charge twice. Neither is safe, so the store refuses with `IdempotencyConflict`
# and changes nothing. Read the message: it names the key, the job it already belongs
# to, both fingerprints, and what to do.

# %%
before = store.counts()
try:
    store.enqueue("charge", c, key=operation_key("billing", 42, "charge"))
except IdempotencyConflict as exc:
    print(f"IdempotencyConflict: {exc}")
else:
    raise AssertionError("the same key with another payload must be refused")
assert store.counts() == before
assert store.get_by_key("billing:42:charge:v1").payload["amount_cents"] == 1990

# %% [markdown]
# The same holds for the same key with another *kind* of job: a key names one
# operation, and a refund is not a charge.

# %%
try:
    store.enqueue("refund", a, key=operation_key("billing", 42, "charge"))
except IdempotencyConflict as exc:
    print(f"IdempotencyConflict: {exc}")
else:
    raise AssertionError("the same key with another kind must be refused")
assert store.counts() == before

# %% [markdown]
# A conflict is a bug to find, not an error to retry: two callers disagree about what
# "charge invoice 42" means. Usually the key is missing something that makes the
# operations distinct (an installment number, a currency), or the payload carries
# something that changes on every call (a timestamp, a request id) and should not be
# there.
#
# The ERP article takes another route: it puts a hash of the payload *into* the key, so a
# changed order becomes a new event. That is right for "sync the latest state of this
# order", where the newest content should win. For a charge it is dangerous: a corrected
# amount would become a second charge. labkit keeps the two apart: the key names the
# intent, the fingerprint guards the content.
#
# ## 6. When to bump the version
#
# The version is the last part of the key. Bump it when the business has decided that
# the operation must **happen again**, for example the first charge of invoice 42 was
# refunded and the customer asked to be charged once more, with a new amount. `v2` is a
# new intent, so it is a new job; `v1` stays as history.

# %%
v2 = operation_key("billing", 42, "charge", version=2)
job, created = store.enqueue("charge", c, key=v2)
print(f"{v2}: job {job.id}, created={created}")
print()
show(jobs_table(store, columns=("id", "key", "state", "attempt")))
assert created and store.get_by_key("billing:42:charge:v1").state == "succeeded"

# %% [markdown]
# Never bump the version to make a conflict go away, and never bump it inside a retry
# loop: that is a uuid per attempt with extra steps. The decision belongs to a person or
# to a business rule that can say *why* the operation happens again.
#
# ## What you should see
#
# | step | what the table shows |
# |---|---|
# | uuid, time or no key, two cron runs | 6 pending jobs for 3 invoices |
# | `operation_key`, two cron runs | 3 jobs; the second run gets `created=False` |
# | a retry | the same job id and key, attempt 2 |
# | tomorrow's run after success | nothing created; 3 succeeded |
# | invoice 44 twice in one fetch | 2 jobs for 3 rows; the repeat gets `created=False` |
# | the same webhook delivered twice | 200 both times, one job |
# | dict in another order | same fingerprint, the existing job |
# | same key, other amount (or kind) | `IdempotencyConflict`, nothing changed |
# | `version=2` | a new job; `v1` stays succeeded |
#
# **What to take away**
#
# - A key names the intent (source, entity, action, version), never the attempt: no
#   uuid, no timestamp, nothing that changes between runs.
# - With a stable key, a second cron run, a row repeated in the source and a redelivered
#   webhook all find the existing job instead of creating a new one.
# - A retry is the same job: same id, same key, one more attempt.
# - The key says which operation; the fingerprint says with what content. The same key
#   with other content (or another kind) is a bug to fix, not an error to retry.
# - Bump the version only when the business decides the operation must happen again;
#   never to silence a conflict, never inside a retry loop.
#
# ## Glossary and next
#
# The terms of this lesson, and of every other, in English and Portuguese:
# [Glossary / Glossário](glossary.md).
#
# [Next: 04 · The job table](04_job_table.ipynb)
