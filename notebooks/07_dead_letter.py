# %% [markdown]
# # 07 · Dead letter and redrive
#
# *A job that cannot finish stops in `dead` with its reason, without secrets, where a
# person can see it, fix the cause, and send it back with the same key.*
#
# > **Resumo.** Um job que não consegue terminar vai parar em `dead`, com o motivo (sem
# > segredos), onde alguém pode vê-lo, corrigir a causa e reprocessá-lo com a mesma chave.
# > Você vai ver três jeitos de morrer, o erro sanitizado, o relatório, o redrive (de um job
# > ou em lote, com limite e dry run), a tela e o comando `labkit`, e o que um dead letter
# > deve trazer (origem, versão do código), quem pode lê-lo e por quanto tempo guardá-lo.
#
# Run time: about 4 seconds (five `labkit` commands start as processes).
#
# Retries (lesson 05) handle failures that go away. Some do not: the data is wrong, the
# dependency stays down, or the job itself crashes every worker that touches it. The ERP article puts it plainly: dead letter is a screen, not a log. This lesson fills a dead-letter
# queue on purpose and then works it the way an operations team would:
#
# 1. the outside world and the handlers that fail in it;
# 2. three ways to die: a permanent error, attempts used up, a poison job;
# 3. the stored error is sanitized: a secret in an exception never reaches the table;
# 4. the operations report: how many, how old, why;
# 5. redrive one job with the same key, keeping its history;
# 6. after fixing a cause, a limited redrive, dry run first;
# 7. the same work on a dead-letter screen: tick, dry run, redrive selected;
# 8. the same work from a terminal, with the `labkit` command;
# 9. what a dead letter must carry (origin, code version), who may read it, and how
#    long to keep it.

# %% [markdown]
# ## Setup
#
# A `FakeClock`, a seeded rng, a fresh folder, and a job store whose retry policy waits
# 10 s, then 20 s, … between attempts (no jitter, so the times below are exact).

# %%
import random

from labkit.clock import FakeClock, isoformat
from labkit.errors import PermanentError, SimulatedCrash, TransientError
from labkit.keys import operation_key
from labkit.tables import jobs_table, show
from labkit.retry import RetryPolicy, exponential
from labkit.notebook.scratch import fresh_dir
from labkit.store import JobStore
from labkit.worker import Worker

SEED = 7
rng = random.Random(SEED)
clock = FakeClock()
folder = fresh_dir("07")
store = JobStore(
    folder / "jobs.db", clock=clock, rng=rng,
    retry=RetryPolicy(backoff=exponential(base=10, cap=300)),
)
print(f"seed={SEED}  clock={clock}  folder={folder}")

# %% [markdown]
# ## 1. The outside world and the handlers
#
# An ERP integration in the spirit of the ERP article. The ERP knows two products; the stock
# endpoint is down; the CRM rejects our credentials (and its client library puts them
# in the error text, as real ones sometimes do); and a report renderer has a bug that
# kills the worker process on one input. Each handler is what a student would write:
# it takes the job and a context (`handler(job, ctx)`), does the call, and raises
# labkit's `PermanentError` or `TransientError` when it fails.

# %% tags=["no-output"]
erp = {"skus": {"SKU-1", "SKU-2"}, "stock_api_up": False}


def create_order(job, ctx):
    p = job.payload
    if p["sku"] not in erp["skus"]:
        raise PermanentError(
            f"ERP rejected order {p['order']} (400): product {p['sku']} is not registered",
            status=400,
        )
    return {"erp_order": f"E-{p['order']}"}


def update_stock(job, ctx):
    if not erp["stock_api_up"]:
        raise TransientError("ERP stock API unavailable (503)", status=503)
    return {"stock": "updated"}


def sync_contact(job, ctx):
    raise PermanentError(
        "CRM refused the call (401) for https://hub:Sup3rS3cret@crm.example/api/contacts"
        "?api_key=ck_live_9f8e7d6c, header Authorization: Bearer eyJhbGciOi.c2VjcmV0.sig",
        status=401,
    )


def render_report(job, ctx):
    # A bug that takes the whole process down, not an exception a worker could catch.
    raise SimulatedCrash("render_report", "segfault in the PDF library")


handlers = {
    "erp.create_order": create_order,
    "erp.update_stock": update_stock,
    "crm.sync_contact": sync_contact,
    "report.render": render_report,
}

# %% [markdown]
# `labkit.worker.Worker` claims a job, runs its handler and records the outcome: a
# result completes the job, an exception goes to `store.fail` (retry or dead, by the
# policy). A `SimulatedCrash` is the process dying: nothing is recorded, the worker is
# gone, and the job keeps its lease until the lease expires. `run_worker` below is the
# supervisor's part: start a worker, let it work until idle, and report how it ended.

# %% tags=["no-output"]
def run_worker(name):
    """Start a fresh worker and let it work until idle; say whether it died."""
    worker = Worker(store, handlers, name=name, lease_s=30)
    try:
        ran = worker.run_until_idle()
    except SimulatedCrash:
        return f"{name} died on job {worker.runs[-1].job_id}"
    return f"{name}: {ran} job(s) run, now idle"


def live(store):
    counts = store.counts()
    return counts["pending"] + counts["running"] + counts["retry_wait"]

# %% [markdown]
# The jobs: six orders (four of them for a product the ERP does not know yet), one
# stock update, one contact sync and one report. Each gets a key from its intent and at
# most three attempts.

# %%
orders = [(101, "SKU-1"), (102, "SKU-9"), (103, "SKU-2"), (104, "SKU-9"), (105, "SKU-9"),
          (106, "SKU-9")]
for order, sku in orders:
    store.enqueue("erp.create_order", {"order": order, "sku": sku},
                  key=operation_key("shop", order, "create_order"), max_attempts=3)
    clock.advance(1)
store.enqueue("erp.update_stock", {"sku": "SKU-1", "qty": 40},
              key=operation_key("shop", "SKU-1", "update_stock"), max_attempts=3)
store.enqueue("crm.sync_contact", {"contact": 77},
              key=operation_key("crm", 77, "sync_contact"), max_attempts=3)
store.enqueue("report.render", {"report": "daily-sales", "day": "2026-01-01"},
              key=operation_key("reports", "daily-sales:2026-01-01", "render"), max_attempts=3)
show(jobs_table(store, columns=("id", "kind", "key", "state", "max_attempts")))

# %% [markdown]
# ## 2. Run until nothing is left to do
#
# Workers start one after another. Each runs until it is idle or dies; then a minute
# passes (longer than any backoff or lease here) and the next one starts, the way a
# supervisor restarts a crashed worker.

# %%
for n in range(1, 10):
    if not live(store):
        break
    print(f"{clock}: {run_worker(f'worker-{n}')}")
    clock.advance(60)
assert not live(store), "jobs still live after 9 workers: is a poison job looping?"
print()
show(jobs_table(store, columns=("id", "kind", "state", "attempt", "max_attempts")))
assert store.counts() == {"pending": 0, "running": 0, "succeeded": 2, "retry_wait": 0, "dead": 7,
                          "cancelled": 0}

# %% [markdown]
# Seven jobs are dead, for three different reasons. Each reason is stored with the job:

# %%
show(
    [{"id": d.id, "kind": d.kind, "attempts": d.attempts, "reason": d.reason}
     for d in store.dead_letters()],
)
by_kind = {d.kind: d for d in store.dead_letters()}
assert by_kind["erp.create_order"].attempts == 1  # permanent: no retry at all
assert by_kind["erp.update_stock"].attempts == 3  # transient, until the budget ran out
assert by_kind["report.render"].attempts == 3  # poison: three workers died, then it stopped
assert by_kind["report.render"].error_class == "LeaseExpired"

# %% [markdown]
# * **Permanent** (`erp.create_order`, `crm.sync_contact`): the ERP answered 400, the CRM
#   401. Retrying cannot fix bad data or a bad credential, so the job dies on attempt 1.
# * **Attempts exhausted** (`erp.update_stock`): 503 is transient, so it waited and
#   tried again, three times in all, then stopped.
# * **Poison** (`report.render`): no error was ever recorded, because the worker died
#   each time. Every redelivery counts as an attempt, so after three dead workers the
#   job is buried instead of killing workers forever.
#
# The poison job's history shows the three workers it took down:

# %%
poison = by_kind["report.render"]
show(
    [{"attempt": a.attempt, "worker": a.worker, "started_at": isoformat(a.started_at),
      "outcome": a.outcome} for a in store.attempts(poison.id)],
)

# %% [markdown]
# ## 3. Sanitized errors
#
# The CRM's exception carried a password in a URL, an API key and a bearer token. A
# dead-letter table is read by many people and exported to many tools, so labkit
# redacts an error before it stores it (`labkit.redact`). Here is everything the
# database kept about that failure:

# %%
crm_job = by_kind["crm.sync_contact"]
stored = store.get(crm_job.id)
print("last_error :", stored.last_error)
print("dead_reason:", stored.dead_reason)
print("attempts   :", [a.error for a in store.attempts(crm_job.id)])

# %% [markdown]
# And not just those columns: none of the three secrets is anywhere in the database
# files, including SQLite's write-ahead log.

# %%
raw = b"".join(p.read_bytes() for p in sorted(folder.glob("jobs.db*")))
for secret in (b"Sup3rS3cret", b"ck_live_9f8e7d6c", b"c2VjcmV0"):
    print(f"{secret.decode():<18} found in the files: {secret in raw}")
    assert secret not in raw
assert "***" in stored.last_error
# Opening and closing the files dropped the locks SQLite holds on them for this process
# (POSIX drops all of a process's locks on a file when any of its descriptors closes), so
# the store reconnects before another process (section 8) opens the file.
store.close()
store = JobStore(folder / "jobs.db", clock=clock, rng=rng,
                 retry=RetryPolicy(backoff=exponential(base=10, cap=300)))

# %% [markdown]
# ## 4. The operations report
#
# The async-jobs lesson: a job buried without an alert is lost work, even if it is still stored. The
# report an on-call person needs answers three questions: how many are dead, how old is
# the oldest, and why. Eight hours pass (the team looks in the morning).
# `store.dead_letters()` lists the dead jobs oldest first, each with its age and reason.

# %%
clock.advance(8 * 3600)
dead = store.dead_letters()
print(f"{isoformat(clock.now())}: {len(dead)} dead of {sum(store.counts().values())} jobs; "
      f"the oldest, job {dead[0].id}, died {dead[0].age_s / 3600:.2f} h ago")
assert len(dead) == store.counts()["dead"] == 7
assert dead[0].age_s == max(d.age_s for d in dead) > 8 * 3600

# %% [markdown]
# Seven reasons in full are too many to read at a glance. Grouped by what the reason
# says (its text up to the details), the report fits in three lines, and each line
# asks for a different fix before any redrive: a **permanent error** needs the data or
# the configuration corrected; **attempts exhausted** on a transient error needs the
# dependency back; a **lease expired** every time means the job kills its worker, a bug
# to find.

# %%
report = {}
for d in dead:
    why = d.reason.split(":")[0]  # "permanent error: ERP rejected ..." -> "permanent error"
    row = report.setdefault(why, {"why": why, "jobs": 0, "kinds": [], "oldest (h)": 0.0})
    row["jobs"] += 1
    row["kinds"] = sorted(set(row["kinds"]) | {d.kind})
    row["oldest (h)"] = max(row["oldest (h)"], round(d.age_s / 3600, 2))
show([{**row, "kinds": ", ".join(row["kinds"])} for row in report.values()])
assert {why: row["jobs"] for why, row in report.items()} == {
    "permanent error": 5, "attempts exhausted (3 of 3)": 1,
    "lease expired on the last attempt (3 of 3)": 1}

# %% [markdown]
# ## 5. Redrive one job, with the same key
#
# The stock API is back. Redriving the stock update sends the **same row** back to
# `pending`: same id, same key, a fresh attempt budget, and the redrive is counted.
# The async-jobs lesson warns against the alternative, enqueueing a copy under a new key: if the
# first attempt had in fact reached the ERP, a new key would let it happen twice.

# %%
erp["stock_api_up"] = True
stock = by_kind["erp.update_stock"]
again = store.redrive(stock.id, note="stock API back after the outage")
print(f"before: job {stock.id} key {stock.key} dead, attempts {stock.attempts}")
print(f"after : job {again.id} key {again.key} {again.state}, attempt {again.attempt}, "
      f"redrives {again.redrives}")
assert (again.id, again.key, again.redrives) == (stock.id, stock.key, 1)

# %% [markdown]
# A worker runs it. The attempts history keeps the three failed attempts from before the
# redrive, followed by the one that worked.

# %%
print(run_worker("worker-morning"))
show(
    [{"attempt": a.attempt, "worker": a.worker, "outcome": a.outcome, "error": a.error}
     for a in store.attempts(stock.id)],
)
assert store.get(stock.id).state == "succeeded"
assert [a.outcome for a in store.attempts(stock.id)] == [
    "retry_wait", "retry_wait", "dead", "succeeded"]

# %% [markdown]
# ## 6. A limited redrive, after fixing the cause
#
# Four orders died because product SKU-9 was not registered in the ERP. Redriving them
# before the fix would only bury them again (and, with a real ERP, add load to a
# dependency that is already struggling). `redrive_where` has no default `limit`, so
# nobody sends back a whole dead-letter queue by accident. First a **dry run**: what
# would go back, changing nothing.

# %%
plan = store.redrive_where(kind="erp.create_order", limit=2, dry_run=True)
show([{"id": j.id, "key": j.key, "state": j.state} for j in plan])
assert len(plan) == 2 and len(store.dead_letters(kind="erp.create_order")) == 4

# %% [markdown]
# The operations team registers SKU-9 in the ERP, then redrives two orders as a canary.

# %%
erp["skus"].add("SKU-9")
sent = store.redrive_where(kind="erp.create_order", limit=2, note="SKU-9 registered")
print(run_worker("worker-canary"))
print()
show(jobs_table(store, columns=("id", "kind", "key", "state", "attempt")))
assert [j.id for j in sent] == [j.id for j in plan]
assert all(store.get(j.id).state == "succeeded" for j in sent)
assert len(store.dead_letters(kind="erp.create_order")) == 2

# %% [markdown]
# Both went through, so the fix works; the other two follow. The contact sync and the
# report stay dead: their causes (a credential, a bug) are not fixed yet, and a redrive
# would only repeat them.

# %%
store.redrive_where(kind="erp.create_order", limit=10, note="SKU-9 registered")
print(run_worker("worker-rest"))
print(store.counts())
show([{"id": d.id, "kind": d.kind, "redrives": d.redrives, "reason": d.reason}
      for d in store.dead_letters()])
assert store.counts()["succeeded"] == 7 and store.counts()["dead"] == 2

# %% [markdown]
# ## 7. The dead-letter screen
#
# The ERP article again: dead letter is a screen. `labkit.notebook.dead_letters.dead_letter_screen(store)` puts
# everything above on one: the dead jobs with id, kind, key, reason, error class,
# attempts and age, a tick box per row, filters by kind and error class, a dry run and
# a **Redrive selected** button. There is no "redrive all": with nothing ticked it
# refuses. In production, Oban Web and River UI ship such a screen with their queues.
# Celery does not: it has no dead-letter *state*. A task can `raise Reject(requeue=False)`
# with `acks_late`, and RabbitMQ then routes the message to the dead-letter exchange
# configured on the queue (Celery's Tasks guide, "Reject"; RabbitMQ's "Dead Letter
# Exchanges"), but nothing in Celery lists or redrives those messages. Flower, its
# dashboard, lists failed tasks with their exceptions but cannot redrive them. That is why the ERP article
# makes its own event table the dead-letter store and builds the screen on it. Its
# widgets only show in a live notebook, so this cell's output is not compared.

# %% tags=["nbval-ignore-output"]
from labkit.notebook.dead_letters import dead_letter_screen

screen = dead_letter_screen(store)
screen

# %% [markdown]
# The screen is driven from code the way its tests drive it. A click on **Redrive
# selected** with nothing ticked changes nothing. Then the CRM team rotates the
# credential; we tick the contact sync row, click again, and read the database.

# %%
screen.redrive_button.click()
print(screen.text)
assert store.counts()["dead"] == 2

handlers["crm.sync_contact"] = lambda job, ctx: {"contact": job.payload["contact"]}
screen.note.value = "CRM credential rotated"
screen.checkboxes[crm_job.id].value = True
screen.redrive_button.click()
print()
print(screen.text)
again = store.get(crm_job.id)
assert (again.state, again.key, again.redrives) == ("pending", crm_job.key, 1)
assert store.get(poison.id).state == "dead" and list(screen.checkboxes) == [poison.id]

# %% [markdown]
# A worker runs it; only the report, whose bug is not fixed, stays on the screen.

# %%
print(run_worker("worker-after-rotation"))
show([{"id": j.id, "kind": j.kind, "state": j.state, "attempt": j.attempt,
       "redrives": j.redrives} for j in store.jobs() if j.id in (crm_job.id, poison.id)])
assert store.get(crm_job.id).state == "succeeded"
assert store.counts() == {"pending": 0, "running": 0, "succeeded": 8, "retry_wait": 0, "dead": 1,
                          "cancelled": 0}

# %% [markdown]
# ## 8. From a terminal: the `labkit` command
#
# The on-call person at 3 a.m. may have a shell, not a notebook. The `labkit` command
# does the same work on the same file, in its own process: `inspect` for the report,
# `inspect --job` for one job's history, `redrive` by id or, in bulk, only with
# `--limit` (and `--dry-run` to look first). `--as-of` makes the command act at this
# lesson's clock (ages are read, and a redriven job becomes due, at that time), so the
# page prints the same on every run; on a server you leave it out.

# %%
import shlex
import subprocess
import sys


def labkit_cli(*args):
    """Run the ``labkit`` command in the lesson's folder, print what a terminal shows."""
    print("$ " + shlex.join(["labkit", *args]))
    done = subprocess.run([sys.executable, "-m", "labkit.cli", *args], cwd=folder,
                          capture_output=True, text=True, timeout=60)
    print(done.stdout + done.stderr)
    return done


now = isoformat(clock.now()).replace(" ", "T") + "Z"  # ISO 8601, UTC
assert labkit_cli("inspect", "jobs.db", "--as-of", now).returncode == 0
shown = labkit_cli("inspect", "jobs.db", "--job", str(poison.id))
assert "LeaseExpired" in shown.stdout and "lease expired on the last attempt" in shown.stdout

# %% [markdown]
# A bulk redrive without `--limit` is refused before it touches anything; with a limit
# and `--dry-run` it names what it would send back, and changes nothing.

# %%
refused = labkit_cli("redrive", "jobs.db")
looked = labkit_cli("redrive", "jobs.db", "--limit", "5", "--dry-run")
assert refused.returncode == 2 and "--limit" in refused.stderr
assert looked.returncode == 0 and poison.key in looked.stdout  # named, in either language
assert store.get(poison.id).state == "dead"

# %% [markdown]
# ## 9. What a dead letter carries, who may read it, how long it stays
#
# The async-jobs lesson asks that a dead letter say **where the job came from** and
# **which code ran it**: "dead after 3 attempts" is not actionable until you know which
# service enqueued it and whether the failing code is the version you are running now.
# labkit's job row has no columns for them, so they travel in the two places the store
# already records: the enqueuer puts its `origin` in the payload (a stable service
# name, the same on every retry of the enqueue), and each worker's name carries its
# code version, so every attempt row says which build ran it.
#
# The receipt mailer of release 1.4.2 has a bug on addresses with a plus sign:

# %%
def send_receipt(job, ctx):
    to = job.payload["to"]
    if "+" in to:  # the bug of release 1.4.2
        raise PermanentError(f"mailer 1.4.2 refused the address {to!r}", status=400)
    return {"sent_to": to}


handlers["mail.send_receipt"] = send_receipt
receipt, _ = store.enqueue(
    "mail.send_receipt",
    {"order": 107, "to": "bia+shop@example.com", "origin": "checkout-api"},
    key=operation_key("shop", 107, "send_receipt"), max_attempts=3)
worker = Worker(store, handlers, name="mailer@1.4.2", lease_s=30)
worker.run_until_idle()
letter = next(d for d in store.dead_letters() if d.id == receipt.id)
show([{"id": letter.id, "kind": letter.kind, "origin": store.get(letter.id).payload["origin"],
       "code version": store.attempts(letter.id)[-1].worker.split("@")[1],
       "reason": letter.reason}])
assert store.attempts(letter.id)[-1].worker == "mailer@1.4.2"

# %% [markdown]
# Now the row answers the questions an operator asks before redriving: the checkout
# API sent it, and release 1.4.2 failed it. After 1.4.3 ships (the fix), the redrive is
# safe. The on-call person does it from the terminal, by id, with a note that stays in
# the job's redrive history; the history then shows which version failed and which
# succeeded:

# %%
handlers["mail.send_receipt"] = lambda job, ctx: {"sent_to": job.payload["to"]}
sent_back = labkit_cli("redrive", "jobs.db", str(receipt.id), "--as-of", now,
                       "--note", "mailer 1.4.3 accepts plus addresses")
assert sent_back.returncode == 0 and store.get(receipt.id).state == "pending"
Worker(store, handlers, name="mailer@1.4.3", lease_s=30).run_until_idle()
show([{"attempt": a.attempt, "worker": a.worker, "outcome": a.outcome, "error": a.error}
      for a in store.attempts(receipt.id)])
assert [a.worker for a in store.attempts(receipt.id)] == ["mailer@1.4.2", "mailer@1.4.3"]

# %% [markdown]
# **Who may read it.** labkit redacts secrets from *errors* (section 3), but the payload
# is stored as the enqueuer gave it, and a dead letter is a payload kept on purpose:
# here, a customer's email address. Anyone who can open the dead-letter screen or run
# `labkit inspect` can read customer data, so give that access to the people who may
# read the customer table (support, on-call), not to everyone with a dashboard; and
# keep credentials out of payloads altogether (lesson 12 shows how).
#
# **How long it stays.** A dead letter is work someone still owes, so the routine
# cleanup of finished jobs leaves it alone: `prune_finished` deletes succeeded jobs and
# their history, never dead ones.

# %%
before = store.counts()
pruned = store.prune_finished(older_than_s=0)
after = store.counts()
print(f"pruned {pruned} succeeded job(s); dead before {before['dead']}, after {after['dead']}")
show([{"id": d.id, "kind": d.kind, "age (h)": round(d.age_s / 3600, 2), "reason": d.reason}
      for d in store.dead_letters()])
assert pruned == before["succeeded"] and after["dead"] == before["dead"] == 1

# %% [markdown]
# So the retention of dead letters is a decision, written down, not a side effect of a
# cleanup: alert when the oldest is older than a day (section 4's report gives the
# number); redrive or close it with a note once the cause is known; and delete or archive
# closed ones after a fixed period that your data rules allow (personal data should not
# outlive its purpose, under the LGPD or the GDPR). A dead letter deleted unread is the
# "job buried without an alert" of section 4, only quieter.

# %% [markdown]
# ## What you should see
#
# | step | what the table shows |
# |---|---|
# | first run | 2 succeeded, 7 dead |
# | permanent error (400, 401) | dead at attempt 1 |
# | transient error (503) | dead after 3 attempts, "attempts exhausted" |
# | poison job | 3 workers died; dead, `LeaseExpired`, "lease expired on the last attempt" |
# | the CRM error | password, API key and token stored as `***`; not in the files at all |
# | the report | 7 dead, the oldest over 8 h; by reason: 5 permanent, 1 attempts exhausted, 1 lease expired |
# | redrive of the stock job | same id and key, `redrives` 1; history: 3 old attempts + 1 success |
# | dry run, limit 2 | two orders listed, still 4 dead |
# | fix, redrive 2, then the rest | orders succeed; only the CRM job and the report stay dead |
# | the screen | "Nothing is selected" and no change; the ticked CRM job pending (redrives 1), then succeeded; the report still dead |
# | `labkit inspect` / `--job` | the same counts; the report's three `LeaseExpired` attempts |
# | `labkit redrive` without `--limit`; with `--dry-run` | refused (exit 2); "would redrive 1 job(s)", nothing changed |
# | a dead receipt | origin `checkout-api`, code version `1.4.2`; `labkit redrive` by id, then `mailer@1.4.3` succeeds |
# | `prune_finished(0)` | every succeeded job deleted; the dead report kept |
#
# **What to take away**
#
# - A job dies in one of three ways: a permanent error (no retry), attempts exhausted on
#   a transient error, or a poison job that kills every worker that runs it.
# - Redact an error before storing it: a dead-letter table is read by many people and
#   exported to many tools.
# - Dead letters need a screen and an alert, not just a log: how many, how old, why; each
#   reason asks for a different fix before any redrive.
# - Redrive the same row with the same key, after fixing the cause; a bulk redrive needs
#   a limit, and a dry run first.
# - A dead letter should say where the job came from and which code version ran it, and
#   only people allowed to see its payload should read it.
# - Keeping dead letters is a written decision: routine cleanup leaves them alone, and
#   an alert fires before they get old.
#
# ## Glossary and next
#
# The terms of this lesson, and of every other, in English and Portuguese:
# [Glossary / Glossário](glossary.md).
#
# [Next: 08 · Circuit breaker and queues](08_breaker_and_queues.ipynb)
