# %% [markdown]
# # 11 · Observability
#
# *Know what your jobs did last night without reading code: log lines that carry the
# job's key, the attempts table as the runs table, the operator's queries, the `labkit`
# command, and metrics an alert can fire on.*
#
# > **Resumo.** Uma noite de trabalho registrada de quatro formas: logs em JSON com o id do
# > job, a chave, a tentativa e o worker; a tabela de tentativas como tabela de execuções,
# > com as consultas do operador (jobs presos, tempestade de retries, pendente mais antigo,
# > mortos por motivo); o comando `labkit` num banco real; e métricas Prometheus com regras
# > de alerta: num Prometheus real, você vê um alerta ir de pendente a disparado.
#
# Run time: about 15 seconds. The real Prometheus server of section 4 takes about 10 of
# them: it hands its first target to the scrape loop about 5 s after it starts, and the
# alert's shortened `for:` waits 5 s more. The four `labkit` commands, real subprocesses,
# take most of the rest.
#
# The cron article asks two things of a job that must not fail in silence: log lines
# that say which item failed, at which step, with which error, after how many attempts
# and what was decided; and a table of runs, so that "is it healthy?" needs no terminal
# archaeology. The Celery-in-production article adds that a sudden spike of retries on
# a task that normally runs clean is often the first sign that a dependency is
# degrading, and that a dashboard is not an alert. This lesson builds that kit on the
# job table of lesson 04:
#
# 1. one night of jobs, logged as JSON lines with `job_id`, `key`, `attempt`, `worker`;
# 2. the attempts table, which is the runs table, and four inspection queries;
# 3. the `labkit` command on the same database: inspect, one job's history, retry-failed;
# 4. Prometheus metrics read from the database, alert rules on them, and a real Prometheus
#    server that scrapes them while an alert goes pending, then firing;
# 5. what Flower would add, and what it would not.

# %% [markdown]
# ## Setup
#
# The metrics need `prometheus_client` (labkit's `web` extra) and the alert rules are
# read with PyYAML: the first cell checks both and, if one is missing, says the command
# that installs it and stops there. A real Prometheus server is optional: without one,
# the cells that need it say so and skip.

# %%
from labkit.notebook.needs import require

require("prometheus_client", "yaml", extra="web")

# %% [markdown]
# Then a `FakeClock`, a seeded rng for the retry jitter, a fresh folder, and a store
# whose retry policy allows three attempts.

# %%
import io
import random

from labkit.clock import FakeClock, isoformat
from labkit.errors import PermanentError, TransientError
from labkit.faults import FaultPlan
from labkit.keys import operation_key
from labkit.logs import job_logs, parse
from labkit.tables import show
from labkit.retry import RetryPolicy, exponential
from labkit.notebook.scratch import fresh_dir
from labkit.store import JobStore
from labkit.worker import Worker

SEED = 11
clock = FakeClock()
folder = fresh_dir("11")
db = folder / "jobs.db"
store = JobStore(db, clock=clock, rng=random.Random(SEED),
                 retry=RetryPolicy(max_attempts=3, backoff=exponential(base=30, cap=300)))
print(f"seed={SEED}  clock={clock}  folder={folder}")

# %% [markdown]
# ## 1. A night of jobs, in JSON lines
#
# Eight invoices to sync to the ERP. The handler's behaviour depends on the invoice:
# most sync at once; invoice 3's ERP answers 503 twice before it works; invoice 5 is
# refused for good (a 400); invoice 7's ERP is down all night.

# %%
def sync_invoice(job, ctx):
    n = job.payload["invoice"]
    if n == 3 and job.attempt < 3:
        raise TransientError("ERP answered 503 Service Unavailable")
    if n == 5:
        raise PermanentError("ERP answered 400: invoice 5 has no tax id")
    if n == 7:
        raise TransientError("ERP timed out after 30s (login erp_user password=hunter2)")
    return {"erp_id": f"E-{n}"}


for n in range(1, 9):
    store.enqueue("sync_invoice", {"invoice": n}, key=operation_key("erp", n, "sync"),
                  max_attempts=3)
print(store.counts())

# %% [markdown]
# The worker logs each outcome through stdlib `logging` and passes the job's fields
# with `extra=` (`labkit.logs.job_fields`). `labkit.logs.JobFormatter` writes one JSON
# object per line, time from the injected clock, message redacted: invoice 7's error
# text carries a password, and the log line does not. `drain()` runs every retry to the
# end, sleeping on the fake clock.

# %%
out = io.StringIO()
with job_logs(out, clock=clock):
    Worker(store, {"sync_invoice": sync_invoice}, name="w1").drain()
lines = out.getvalue().splitlines()
print(len(lines), "lines; the first three and the last one:")
for line in lines[:3] + lines[-1:]:
    print(line)
assert "hunter2" not in out.getvalue()

# %% [markdown]
# Because every line carries the key, "what happened to invoice 3?" is a filter, not an
# investigation. In production the same filter is a query in Loki, Elasticsearch or
# CloudWatch Logs Insights (`key = "erp:3:sync:v1"`).

# %%
for line in parse(out.getvalue()):
    if line["key"] == "erp:3:sync:v1":
        print(line["at"], f"attempt {line['attempt']}", line["worker"], line["outcome"])

# %% [markdown]
# ## 2. The attempts table is the runs table
#
# The cron article asks for a table of runs: when each one started and ended, how it
# ended, and the error. labkit's history triggers already write it: one row in
# `attempts` per claim, closed with the outcome the job reached. Nobody can forget to
# write it, because no code path writes it by hand.

# %%
rows = []
for job in store.jobs():
    for a in store.attempts(job.id):
        rows.append({"job": a.job_id, "key": job.key, "attempt": a.attempt, "worker": a.worker,
                     "started": isoformat(a.started_at)[11:], "ended": isoformat(a.finished_at)[11:],
                     "outcome": a.outcome, "error": (a.error or "")[:44]})
show(rows)

# %% [markdown]
# Two more things go wrong before morning. A second worker, `w2`, claims a new job and
# dies mid-run (an in-process crash here; lesson 04 did it with `kill -9`): its job
# stays `running` under a lease nobody will renew. And three report jobs arrive while
# no worker is up. Then the clock moves on a quarter of an hour.

# %%
store.enqueue("sync_invoice", {"invoice": 9}, key=operation_key("erp", 9, "sync"))
crash = FaultPlan(seed=SEED).at("after_effect", "crash", key="erp:9:sync:v1")
try:
    Worker(store, {"sync_invoice": sync_invoice}, name="w2", faults=crash).run_once()
except BaseException as exc:
    print("w2 died:", type(exc).__name__, "| fired:", [f.point for f in crash.fired])
print("fault plan (replay):", crash.replay())
for month in ("2026-01", "2026-02", "2026-03"):
    store.enqueue("monthly_report", {"month": month}, key=operation_key("reports", month, "build"))
    clock.advance(60)
clock.advance(15 * 60)
print(clock, store.counts())
assert crash.fired_at("after_effect")

# %% [markdown]
# Now the operator's four questions, each one query on these tables
# (`labkit.metrics.inspect`; the SQL is in `labkit/metrics.sql`). The first one, as
# SQL:

# %%
from labkit import metrics

print(metrics.SQL["stuck_running"])

# %% [markdown]
# **Stuck running**: jobs whose lease ran out (their worker died) or that have run for
# longer than they should (here, 10 minutes). A worker that hangs without dying shows
# up here long before anything times out.

# %%
stuck = metrics.inspect(store, "stuck_running", older_than_s=600)
show([{**row, "started_at": isoformat(row["started_at"])} for row in stuck])
assert [(row["key"], row["worker"], row["lease_expired"]) for row in stuck] == [
    ("erp:9:sync:v1", "w2", 1)]

# %% [markdown]
# **Retry storms**: kinds with many failed attempts in the last hour. One flaky call
# is normal; a kind failing over and over means a dependency is down, and every retry
# adds load to it (lesson 05's thundering herd).

# %%
show(metrics.inspect(store, "retry_storms", window_s=3600, min_failures=3))

# %% [markdown]
# **Oldest pending**: ready work nobody has taken. Its age is the delay your users feel.

# %%
show(metrics.inspect(store, "oldest_pending"))

# %% [markdown]
# **Dead by reason**: what the dead-letter queue holds, grouped, so one cause fixed
# clears many jobs.

# %%
dead = metrics.inspect(store, "dead_by_reason")
show(dead)
assert {r["error_class"] for r in dead} == {"PermanentError", "TransientError"}

# %% [markdown]
# ## 3. The `labkit` command
#
# The same questions from a terminal, on the same file, in a real subprocess:
# `labkit inspect` (counts and dead letters), `labkit inspect --job` (one job's runs)
# and `labkit retry-failed` (redrive the dead jobs whose failures were transient; the
# permanent one is left for a person). These jobs carry fake-clock times from
# 2026-01-01, so each command gets `--as-of` the lesson's clock: it measures ages as if
# it ran at that moment, and prints the same on every run.

# %%
import subprocess
import sys

LABKIT = [sys.executable, "-m", "labkit.cli"]
NOW = isoformat(clock.now()).replace(" ", "T") + "Z"  # the lesson's clock, for --as-of


def labkit(*args):
    argv = [str(a) for a in args] + ["--as-of", NOW]
    done = subprocess.run(LABKIT + argv, capture_output=True, text=True, timeout=60)
    print(f"$ labkit {' '.join(argv)}   (exit {done.returncode})")
    print(done.stdout + done.stderr)
    assert done.returncode == 0


labkit("inspect", db)

# %%
labkit("inspect", db, "--job", 3)

# %%
labkit("retry-failed", db, "--limit", 5, "--dry-run")
labkit("retry-failed", db, "--limit", 5)
print(store.counts())

# %% [markdown]
# `retry-failed` asks for `--limit` and offers `--dry-run`: redriving a whole
# dead-letter queue by accident floods the dependency that killed those jobs.

# %% [markdown]
# ## 4. Metrics and an alert
#
# Logs tell you what happened to one job; metrics tell you, at every scrape, whether
# the queue is healthy (Prometheus scrapes each target once a minute unless
# `scrape_interval` says otherwise; its example configuration sets 15 s:
# [Prometheus: configuration](https://prometheus.io/docs/prometheus/latest/configuration/configuration/)). `labkit.metrics.StoreCollector` is a `prometheus_client`
# collector that reads the database at each scrape, so every process agrees and a
# restart loses nothing. The HTTP service of lesson 12 serves it at `/metrics`, to callers
# with a token; here is the text a Prometheus server would scrape, less the histogram's bucket lines (twelve
# per outcome; the end of this section shows them). Every series is there even at 0:
# `TransientError` reads 0 dead jobs since `retry-failed` redrove invoice 7, where a
# vanished series would look to Prometheus like a target that stopped answering.

# %%
text, content_type = metrics.exposition(store)
print(content_type)
print("\n".join(line for line in text.splitlines() if "_bucket{" not in line))

# %% [markdown]
# An alert rule turns a metric into a page or a ticket. `ops/alerts.yml` holds five
# examples: a job died, the dead-letter queue grows, the oldest ready job waits too
# long, most attempts fail (a retry storm), leases keep expiring. Two of them:

# %%
from pathlib import Path

import yaml

# ops/ sits beside notebooks/; this finds it from either edition's folder.
OPS = next(p / "ops" for p in Path.cwd().parents if (p / "ops" / "alerts.yml").exists())
rules = {r["alert"]: r for g in yaml.safe_load((OPS / "alerts.yml").read_text())["groups"]
         for r in g["rules"]}
for name in ("LabkitJobsDeadLettered", "LabkitOldestReadyJobTooOld"):
    print(f"{name}:  {rules[name]['expr'].strip()}   for={rules[name].get('for', '0m')}")

# %% [markdown]
# The rules on gauges can be compared with the numbers above. Over its threshold is not
# firing yet: both rules have a `for:` clause, and Prometheus evaluates a rule once a
# minute by default; an alert whose condition holds is first **pending**, and it
# **fires** (goes to Alertmanager) only after the condition held at every evaluation
# for the whole `for:` ([Prometheus: alerting rules](https://prometheus.io/docs/prometheus/latest/configuration/alerting_rules/)).

# %%
from prometheus_client.parser import text_string_to_metric_families

values = {(s.name, tuple(sorted(s.labels.items()))): s.value
          for f in text_string_to_metric_families(text) for s in f.samples}
oldest = values[("labkit_oldest_ready_age_seconds", ())]
dead_now = sum(v for (name, _), v in values.items() if name == "labkit_dead_jobs")
print(f"oldest ready job waited {oldest:.0f}s -> LabkitOldestReadyJobTooOld "
      f"{'over 600s: pending, firing after 5m' if oldest > 600 else 'quiet'}")
print(f"dead jobs now: {dead_now:.0f} -> LabkitDeadLetterBacklog "
      f"{'over 20: pending, firing after 1h' if dead_now > 20 else 'quiet'} (threshold 20)")
assert oldest > 600

# %% [markdown]
# Prometheus's own rule engine says the same. `promtool test rules` (it ships with
# Prometheus) replays sample series through the rules of `ops/alerts.yml` and reports
# the alerts that fire at a given minute. Here the series is tonight's value, scraped
# once a minute as if the oldest job kept waiting that long, and we ask at each minute.

# %%
import shutil
import tempfile

RULE = "LabkitOldestReadyJobTooOld"
promtool = shutil.which("promtool")


def fires_at(minute: int, age: float) -> bool:
    """Does Prometheus fire RULE ``minute`` minutes after it first scraped ``age``?"""
    test = {"rule_files": [str((OPS / "alerts.yml").resolve())],
            "evaluation_interval": "1m",
            "tests": [{"interval": "1m",
                       "input_series": [{"series": "labkit_oldest_ready_age_seconds",
                                         "values": f"{age:.0f}x10"}],
                       "alert_rule_test": [{"eval_time": f"{minute}m", "alertname": RULE,
                                            "exp_alerts": []}]}]}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "oldest_test.yml"
        path.write_text(yaml.safe_dump(test))
        done = subprocess.run([promtool, "test", "rules", str(path)],
                              capture_output=True, text=True, check=False)
    out = done.stdout + done.stderr
    assert done.returncode == 0 or f'alertname="{RULE}"' in out, out  # failed: it fired
    return done.returncode != 0


if promtool is None:
    print("promtool is not installed (apt-get install prometheus, or brew install "
          "prometheus); ops/alerts_test.yml holds the same cases")
else:
    show([{"minute": m, "condition": "true" if oldest > 600 else "false",
           "alert": "firing" if fires_at(m, oldest) else "pending"} for m in range(7)])

# %% [markdown]
# Pending for minutes 0 to 4, firing from minute 5: a single slow scrape pages nobody.
# The rate rules (`LabkitRetryStorm`, `LabkitJobsDeadLettered`) need the history a
# `rate()` or `increase()` is computed from; `ops/alerts_test.yml`, beside the rules,
# feeds each of them such a history, including the false ticket a counter raises when it
# goes *down* (old rows pruned): Prometheus reads a fall as a restart from zero. Here is
# `promtool test rules` running that whole file: every case passes.

# %%
if promtool is None:
    print("promtool is not installed: the rule tests are skipped here")
else:
    done = subprocess.run([promtool, "test", "rules", "alerts_test.yml"], cwd=OPS,
                          capture_output=True, text=True, check=False)
    cases = len(yaml.safe_load((OPS / "alerts_test.yml").read_text())["tests"])
    print(f"promtool test rules alerts_test.yml: {cases} test groups,",
          "every one passed" if done.returncode == 0 else "FAILED:\n" + done.stdout + done.stderr)

# %% [markdown]
# labkit's counters do not go down. `prune_finished` deletes old succeeded jobs with
# their attempts, so a count of the attempts table would fall at every cleanup; the
# prune first adds the attempts it deletes to the `pruned_attempts` table, in the same
# transaction, and the metrics are that table plus the rows still there. A day later
# the operator prunes what finished more than an hour ago:

# %%
def scrape():
    text, _ = metrics.exposition(store)
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


def attempt_rows():
    return sum(len(store.attempts(job.id)) for job in store.jobs())


before, rows_before = scrape(), attempt_rows()
clock.advance(24 * 3600)
pruned = store.prune_finished(older_than_s=3600)
after, rows_after = scrape(), attempt_rows()
print(f"pruned {pruned} jobs; attempts table: {rows_before} rows -> {rows_after}")
show([{"outcome": o, "before prune": before[("labkit_attempts_total", (("outcome", o),))],
       "after prune": after[("labkit_attempts_total", (("outcome", o),))]}
      for o in metrics.OUTCOMES])
assert pruned > 0 and rows_after < rows_before
assert all(after[k] >= v for k, v in before.items() if k[0] == "labkit_attempts_total")

# %% [markdown]
# The same holds for `labkit_attempt_duration_seconds`, a histogram of how long each
# attempt ran (claim to end), by outcome. Its buckets are cumulative, as Prometheus's
# are: `le="5.0"` counts every attempt of 5 seconds or less, and `+Inf` is the count.
# Here every handler returned at once on the fake clock, so every attempt sits in the
# first bucket, and the ones pruned are still counted:

# %%
show([{"le": dict(labels)["le"], "succeeded": value}
      for (name, labels), value in after.items()
      if name == "labkit_attempt_duration_seconds_bucket"
      and ("outcome", "succeeded") in labels])
assert after[("labkit_attempt_duration_seconds_count", (("outcome", "succeeded"),))] == \
    after[("labkit_attempts_total", (("outcome", "succeeded"),))]

# %% [markdown]
# ### A real Prometheus server
#
# `promtool` replays made-up series through a rule. A real server does all of it: it
# scrapes an endpoint, stores the samples and evaluates the rule on its own clock. The
# lesson serves this job database's metrics on 127.0.0.1 from a thread of this kernel
# (`prometheus_client`'s own HTTP server, holding only the `StoreCollector`), and starts
# the `prometheus` binary with a configuration of its own: `scrape_interval: 1s` and
# `evaluation_interval: 1s` (both default to one minute), and one rule,
# `LabkitDeadLetterBacklog`, with the same `expr` as in `ops/alerts.yml` but **`for: 5s`
# instead of `1h`. The `for:` is shortened only so that this lesson runs in seconds; the
# real rule keeps its `1h`** (`labkit.integrations.prometheus` does the starting,
# polling and stopping).

# %%
from labkit.integrations import prometheus

ALERT = "LabkitDeadLetterBacklog"
DEAD = "sum(labkit_dead_jobs)"  # the expr, less "> 20"
lesson_rules = prometheus.shortened_rule(
    yaml.safe_load((OPS / "alerts.yml").read_text()), ALERT, for_="5s")
print(yaml.safe_dump(lesson_rules, sort_keys=False))
binary = prometheus.find_prometheus()  # under LABKIT_REQUIRE_SERVICES=1 a missing one fails
assert lesson_rules["groups"][0]["rules"][0]["expr"] == rules[ALERT]["expr"]

# %% [markdown]
# Prometheus evaluates on the wall clock, not on the lesson's `FakeClock`, so the
# condition has to be true in real terms. A count of dead jobs is the same whatever the
# clock says, and the lesson moves it: one job is dead now (invoice 5), and a batch of 20
# invoices from a second branch arrives with no tax id; the ERP refuses each one for good,
# so 21 are dead, over the threshold of 20. The batch has a queue of its own, so the
# worker `w3` takes only those.

# %%
def refused(job, ctx):
    raise PermanentError(f"ERP answered 400: invoice {job.payload['invoice']} has no tax id")


def branch_batch():
    for n in range(101, 121):
        store.enqueue("sync_invoice", {"invoice": n, "branch": 2},
                      key=operation_key("erp", n, "sync"), queue="branch2", max_attempts=3)
    Worker(store, {"sync_invoice": refused}, name="w3", queues=("branch2",)).drain()


print("dead now:", store.counts()["dead"], "| the batch adds 20 on queue branch2")

# %% [markdown]
# Now the server. The alert's state is read from Prometheus's HTTP API
# (`/api/v1/rules`) every 0.1 s and printed as the sequence of distinct states, not
# timestamps, so the output is the same on every run. Prometheus and everything in its
# process group are stopped in the `finally`, whatever happened.

# %%
from labkit.integrations.celery.proctree import group_members

if binary is None:
    print(prometheus.MISSING, "- the live server is skipped here; "
          "the lab's test suite runs the same steps against a real server")
    branch_batch()
else:
    endpoint = prometheus.serve_metrics(metrics.registry_for(store))
    server = prometheus.Prometheus.start(endpoint.target, lesson_rules, binary=binary)
    try:
        server.wait_for_target()
        server.wait_for_evaluation(ALERT)  # it has judged a scrape of tonight's numbers
        before, read_before = server.alert(ALERT), server.query(DEAD)
        branch_batch()
        seen = prometheus.watch_alert(server, ALERT, until="firing", timeout=40, since=before)
        read_after = server.query(DEAD)
    finally:
        server.stop()
        endpoint.stop()
    show([{"alert state": s.state,
           "dead jobs Prometheus read": f"{read_before if s.value is None else s.value:.0f}"}
          for s in seen])
    print(" -> ".join(s.state for s in seen), f"| after: {read_after:.0f} dead")
    print("processes left in Prometheus's group:", len(group_members(server.popen.pid)))
    assert [s.state for s in seen] == ["inactive", "pending", "firing"]
    assert not server.workdir.exists()

# %% [markdown]
# Inactive at one dead job; pending from the first evaluation that saw 21; firing once
# the condition had held at every evaluation for the 5 s of `for:`. Elements that are
# active but not yet firing are pending ([Prometheus: alerting rules](https://prometheus.io/docs/prometheus/latest/configuration/alerting_rules/)).
# With the real `for: 1h` the same batch would page an hour later, and a cleanup inside
# that hour would page nobody. Here nothing is listening: a production server sends the
# firing alert to Alertmanager, which routes it to a pager or a ticket queue.

# %% [markdown]
# ## 5. Flower
#
# With Celery, Flower is the usual dashboard: it shows workers, their pools and
# prefetch, tasks by state and each task's arguments, result and traceback, and it can
# revoke a task or restart a pool. Two things it is not: it is **not alerting** (it
# shows, it does not page anyone; alerts come from Prometheus rules like the ones
# above, on metrics Flower or celery-exporter expose), and it has **no dead-letter
# screen with redrive**. Celery has no dead-letter *state*: a failed task's record is a
# result-backend entry, and sending it back is your code. It can still dead-letter a
# message: a task with `acks_late=True` that raises `Reject(exc, requeue=False)` rejects
# its message ([Celery: Reject](https://docs.celeryq.dev/en/stable/userguide/tasks.html#reject);
# without `acks_late` it has no effect), and RabbitMQ republishes a message rejected with
# `requeue=false` to the dead-letter exchange configured on its queue (the
# `x-dead-letter-exchange` queue argument, or a policy), or drops it if none is
# ([RabbitMQ: dead letter exchanges](https://www.rabbitmq.com/docs/dlx)). What lands
# there is a message, not a job with its attempts. The Celery
# lesson (14) runs real Celery; this kit's inspection queries, `labkit retry-failed`
# and the alert rules are the parts Flower leaves to you.

# %%
store.close()
print("closed", db.name)

# %% [markdown]
# ## What you should see
#
# | step | what the records show |
# |---|---|
# | the night's run | JSON lines with `job_id`, `key`, `attempt`, `worker`, `outcome`; no password |
# | filter by key | invoice 3: `retry_wait`, `retry_wait`, `succeeded` |
# | attempts table | one row per run; invoice 7 three `retry_wait`/`dead` rows, invoice 5 one `dead` |
# | stuck running | invoice 9, worker `w2`, lease expired |
# | retry storms | `sync_invoice` with 6 failed attempts on 3 jobs |
# | oldest pending | the three reports, oldest first |
# | dead by reason | one `PermanentError` (no tax id), one `TransientError` (attempts exhausted) |
# | `labkit retry-failed` | invoice 7 redriven; invoice 5 left for a person |
# | metrics | `labkit_jobs{state}`, oldest ready age, dead jobs by class (`TransientError` at 0), attempts by outcome, attempt durations |
# | prune | the attempts table shrinks; `labkit_attempts_total` and the histogram stay the same |
# | alert | `LabkitOldestReadyJobTooOld` pending for minutes 0-4, firing from minute 5 (promtool); `LabkitDeadLetterBacklog` quiet |
# | real Prometheus | `LabkitDeadLetterBacklog` with `for: 5s` (the real rule: `1h`): `inactive` at 1 dead job, `pending` at 21, then `firing`; no process left |
#
# **What to take away**
#
# - Put the job's id, key, attempt and worker on every log line: "what happened to
#   invoice 3?" becomes a filter, not an investigation.
# - The attempts table, written by triggers, is the runs table: no code path can forget it.
# - Four queries answer the operator: stuck running, retry storms, oldest pending, dead
#   by reason.
# - Redrive only transient failures, with a `--limit` and a `--dry-run` first.
# - A dashboard is not an alert: alert rules on metrics read from the database, with a
#   `for:` so one bad scrape pages nobody.
# - Counters must never go down: pruning old rows must not lower them.
#
# ## Glossary and next
#
# The terms of this lesson, and of every other, in English and Portuguese:
# [Glossary / Glossário](glossary.md).
#
# [Next: 12 · Async request-reply](12_request_reply.ipynb)
