# %% [markdown]
# # 04 · The job table
#
# *A job is a row: accepted only once it is on disk, claimed by exactly one worker at a
# time, and given back when its worker dies.*
#
# > **Resumo.** Cada job vira uma linha numa tabela: só é aceito depois de gravado em
# > disco, fica com um worker de cada vez (claim com lease) e volta a ficar disponível
# > quando esse worker morre. Você vai ver os estados, o aceite durável (e o que
# > `synchronous=NORMAL` não garante), o fencing, um worker real morto com SIGKILL, o
# > evento que fica preso com o `UPDATE` sem lease do artigo do ERP e o `labkit inspect`.
#
# Run time: about 5 seconds (two real worker processes and three `labkit` commands start).
#
# Lesson 03 gave every piece of work a stable key. Now the work needs a home that
# outlives any process: a table of jobs with a state, an attempt counter and a lease.
# This lesson walks through that table, `labkit.store.JobStore` on SQLite, and checks
# each promise it makes:
#
# 1. the states, and the only moves between them;
# 2. **durable acceptance**: when `enqueue` returns, the job is committed (and what
#    that survives: a process crash, not a power loss, unless `synchronous=FULL`);
# 3. the **atomic claim**: two workers, one job, one winner;
# 4. **leases**: a worker that stops answering loses the job, and its late result is
#    refused; and the ERP article's claim, which has no lease, for contrast;
# 5. the attempts history;
# 6. a real worker process killed with SIGKILL, and the table before and after;
# 7. the same table from a terminal, with the `labkit` command.

# %% [markdown]
# ## Setup
#
# A `FakeClock`, a seeded rng for the retry jitter, and a fresh folder.

# %%
import random
import threading

from labkit.clock import FakeClock, isoformat
from labkit.errors import InvalidTransition, LeaseLost
from labkit.job import TRANSITIONS, JobState
from labkit.keys import operation_key
from labkit.tables import jobs_table, show
from labkit.notebook.scratch import fresh_dir
from labkit.store import JobStore

SEED = 4
rng = random.Random(SEED)
clock = FakeClock()
folder = fresh_dir("04")
print(f"seed={SEED}  clock={clock}  folder={folder}")

# %% [markdown]
# ## 1. States and transitions
#
# The async-jobs lesson names five states: `pending`, `running`, `succeeded`, `retry_wait` and `dead`.
# labkit adds a sixth, `cancelled`, for a job its owner took back before any worker had it
# (lesson 12): it is final, and not a dead letter, because nobody has anything to fix.
# `labkit.job.TRANSITIONS` is the whole contract: a job moves only along these arrows.
# `running → running` is crash recovery: the lease expired and another worker took the
# job. `dead → pending` happens only when a person redrives it (lesson 07).

# %% [markdown]
# The same contract as a diagram, drawn from `labkit.notebook.timelines.job_states_mermaid()` (a test
# holds it against `TRANSITIONS`, so the picture cannot drift from the code):
#
# ```mermaid
# stateDiagram-v2
#     [*] --> pending: enqueue
#     pending --> running: claim
#     running --> succeeded: complete
#     running --> retry_wait: transient failure
#     retry_wait --> running: claim after run_after
#     running --> dead: permanent, or out of attempts
#     running --> running: lease expired
#     dead --> pending: redrive
#     pending --> cancelled: cancel
#     retry_wait --> cancelled: cancel
#     succeeded --> [*]
#     cancelled --> [*]
# ```

# %%
rows = [
    {"from": state, "to": ", ".join(sorted(TRANSITIONS[state])) or "(final)"}
    for state in JobState
]
show(rows)
assert TRANSITIONS[JobState.SUCCEEDED] == frozenset()
assert TRANSITIONS[JobState.DEAD] == {JobState.PENDING}

# %% [markdown]
# The store enforces the contract. A finished job cannot be sent back to work, for
# example, and the error says why:

# %%
store = JobStore(folder / "jobs.db", clock=clock, rng=rng)
done, _ = store.enqueue("sync_order", {"order": 1}, key=operation_key("erp", 1, "sync"))
store.complete(store.claim("worker-a"), result={"erp_id": "E-1"})
try:
    store.redrive(done.id)
except InvalidTransition as exc:
    print(f"InvalidTransition: {exc}")
else:
    raise AssertionError("a succeeded job must not go back to pending")

# %% [markdown]
# ## 2. Durable acceptance
#
# The async-jobs lesson makes the point: "received by the process" and "recorded so it can be
# recovered" are different events. An HTTP endpoint may answer `202 Accepted` only after
# the second. `enqueue` commits before it returns, so another process opening the file
# right after sees the job. Here a second `JobStore` on the same file plays that
# process: its own connection, nothing shared with the first but the file.

# %%
job, created = store.enqueue("sync_order", {"order": 7}, key=operation_key("erp", 7, "sync"))
print(f"enqueue returned job {job.id}, created={created}")

other_process = JobStore(folder / "jobs.db", clock=clock, rng=rng)
seen = other_process.get_by_key("erp:7:sync:v1")
print(f"a fresh connection sees: job {seen.id}, state {seen.state}, payload {seen.payload}")
assert seen is not None and seen.state == JobState.PENDING
other_process.close()

# %% [markdown]
# Durable against what, exactly? The store runs SQLite in WAL mode with
# `synchronous=NORMAL`, labkit's default. A commit then survives the death of any
# *process*, which is what this lesson kills. It does not survive a *power loss* or a
# kernel crash: the last commits may still sit in the operating system's cache, not on
# the disk. `JobStore(path, synchronous="FULL")` makes every commit wait until the disk
# has it: slower, and durable against a power cut. A `202 Accepted` on a machine that can
# lose power promises only what FULL (or a database that replicates before it answers)
# keeps. The connection says which level is in effect:

# %%
LEVELS = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}


def durability(s):
    mode = s.conn.execute("PRAGMA journal_mode").fetchone()[0]
    return f"journal_mode={mode}, synchronous={LEVELS[s.conn.execute('PRAGMA synchronous').fetchone()[0]]}"


with JobStore(folder / "jobs_full.db", clock=clock, rng=rng, synchronous="FULL") as full:
    print(f"JobStore(path)                     -> {durability(store)}")
    print(f'JobStore(path, synchronous="FULL") -> {durability(full)}')
    assert "synchronous=FULL" in durability(full)
assert durability(store) == "journal_mode=wal, synchronous=NORMAL"

# %% [markdown]
# ## 3. The atomic claim
#
# A worker takes a job with `claim`: one `UPDATE ... RETURNING` inside a `BEGIN
# IMMEDIATE` transaction that sets `running`, adds one to `attempt` and writes a lease.
# Two workers ask for the one ready job; only the first gets it.

# %%
got_a = store.claim("worker-a", lease_s=30)
got_b = store.claim("worker-b", lease_s=30)
print("worker-a got:", None if got_a is None else f"job {got_a.id} attempt {got_a.attempt}")
print("worker-b got:", got_b)
assert got_a is not None and got_a.id == job.id and got_b is None

# %% [markdown]
# One at a time proves little; the claim must hold when workers race. Two threads, each
# with its own connection to the file (as two processes would have), claim from a
# shared pile of 200 jobs as fast as they can. Which thread wins each job changes from
# run to run, so we print only what must not change: every job claimed exactly once.

# %%
race = JobStore(folder / "race.db", clock=clock, rng=rng)
for n in range(200):
    race.enqueue("noop", {"n": n}, key=operation_key("race", n, "noop"))

claimed = {"racer-1": [], "racer-2": []}


def racer(name):
    own = JobStore(folder / "race.db", clock=clock, rng=rng)
    while (got := own.claim(name, lease_s=30)) is not None:
        claimed[name].append(got.id)
    own.close()


threads = [threading.Thread(target=racer, args=(name,)) for name in claimed]
for t in threads:
    t.start()
for t in threads:
    t.join()

all_ids = claimed["racer-1"] + claimed["racer-2"]
print(f"claims: {len(all_ids)}, distinct jobs: {len(set(all_ids))}, "
      f"claimed by both: {len(set(claimed['racer-1']) & set(claimed['racer-2']))}")
print(race.counts())
assert len(all_ids) == len(set(all_ids)) == 200

# %% [markdown]
# ## 4. Leases
#
# A claim is not ownership forever: it is a **lease** until `lease_until`. A worker
# that is still working renews it with `heartbeat`. If it stops (crashed, frozen by a
# long GC pause, cut off by the network) the lease runs out and any worker may claim
# the job again. That is how a crashed worker's job comes back with no one watching.
#
# worker-a holds job 2 with a 30-second lease. Twenty seconds in it sends a heartbeat,
# so at 31 seconds the job is still its own and worker-b finds nothing to do.

# %%
show(jobs_table(store, columns=("id", "key", "state", "attempt", "lease_owner", "lease_until")))
clock.advance(20)
got_a = store.heartbeat(got_a, lease_s=30)
clock.advance(11)
assert store.claim("worker-b", lease_s=30) is None
print()
print(f"{clock}: worker-a renewed until {isoformat(got_a.lease_until)}; worker-b got nothing")

# %% [markdown]
# Then worker-a freezes. Nobody tells the table; time just passes. Once the lease is
# over, worker-b's claim takes the job: same job, attempt 2, a new lease token.

# %%
clock.advance(60)
got_b = store.claim("worker-b", lease_s=30)
show(jobs_table(store, columns=("id", "key", "state", "attempt", "lease_owner", "lease_until")))
assert got_b is not None and got_b.id == job.id and got_b.attempt == 2
assert got_b.lease_token != got_a.lease_token

# %% [markdown]
# Now worker-a wakes up and reports success for attempt 1. If the store accepted it,
# worker-b's attempt would be overwritten by a worker that no longer owns the job; that
# is how "done" gets recorded for work whose outcome nobody knows. `complete`,
# `fail` and `heartbeat` are **fenced** by the lease token: the update only matches
# while the token is still the current one. worker-a gets `LeaseLost`, on purpose, and
# the row does not change.

# %%
before = store.get(job.id)
for name, call in (("complete", lambda: store.complete(got_a, result={"erp_id": "E-7a"})),
                   ("heartbeat", lambda: store.heartbeat(got_a))):
    try:
        call()
    except LeaseLost as exc:
        print(f"{name}: LeaseLost: {exc}")
    else:
        raise AssertionError(f"a stale {name} must be refused")

after = store.get(job.id)
print()
show(jobs_table(store, columns=("id", "state", "attempt", "lease_owner", "result")))
assert after == before
assert after.state == JobState.RUNNING and after.lease_owner == "worker-b" and after.result is None

# %% [markdown]
# worker-b, the real holder, finishes the job.

# %%
store.complete(got_b, result={"erp_id": "E-7"})
show(jobs_table(store, columns=("id", "key", "state", "attempt", "lease_owner", "result")))
assert store.get(job.id).state == JobState.SUCCEEDED

# %% [markdown]
# ### A claim without a lease: the ERP article's event
#
# The ERP article claims its integration events with a conditional `UPDATE` in Django:
# `filter(pk=id, status__in=[PENDING, FAILED]).update(status=RUNNING)`. That is atomic
# too (only one worker changes the row), but it writes no lease: nothing says who holds
# the event or until when. Here is that table, with the same two statements, and a
# worker that dies after its claim:

# %%
import sqlite3

erp_db = sqlite3.connect(folder / "erp_events.db", isolation_level=None)
erp_db.execute("CREATE TABLE integration_event (id INTEGER PRIMARY KEY, status TEXT)")
erp_db.execute("INSERT INTO integration_event VALUES (1, 'pending')")
CLAIM_EVENT = ("UPDATE integration_event SET status = 'running' "
               "WHERE id = 1 AND status IN ('pending', 'failed')")

print("worker-a claims:", erp_db.execute(CLAIM_EVENT).rowcount, "row")  # then it is killed
clock.advance(24 * 3600)  # a day later the task runs again (a redelivery, or a person re-sends it)
print("worker-b claims:", erp_db.execute(CLAIM_EVENT).rowcount, "rows")
print("the event:", erp_db.execute("SELECT id, status FROM integration_event").fetchall())
assert erp_db.execute("SELECT status FROM integration_event").fetchone()[0] == "running"
erp_db.close()

# %% [markdown]
# A day later the event is still `running` and no worker may take it: it stays there
# until a person notices. The article's Celery task gives up silently (`if not
# claimed: return`), so even a redelivery does nothing. The lease is the missing piece:
# `lease_until` turns "running" into "running until 00:01:31", and a claim after that
# time is crash recovery (section 6 shows it with a real process). With only a status
# column, the fix is a sweeper that resets events `running` for longer than any run can
# take, which is a lease written by hand.

# %% [markdown]
# ## 5. The attempts history
#
# Every lease opens a row in the attempts history and every exit from `running` closes
# it (database triggers write it, so no code path can forget). The async-jobs lesson asks for exactly
# this: each attempt is work that was spent, and it must show. Job 2 had two attempts:
# worker-a's ended because its lease expired, worker-b's succeeded.

# %%
history = [
    {**vars(a), "started_at": isoformat(a.started_at), "finished_at": isoformat(a.finished_at)}
    for a in store.attempts(job.id)
]
show(history, columns=("attempt", "worker", "started_at", "finished_at", "outcome"))
assert [(a["worker"], a["outcome"]) for a in history] == [
    ("worker-a", "lease_expired"),
    ("worker-b", "succeeded"),
]

# %% [markdown]
# ## 6. Kill a real worker, then restart
#
# Everything so far ran in one Python process. Now a real one dies. Here is a worker
# program as a deployment would run it: it opens the job file and runs
# `labkit.worker.Worker` until there is nothing to do. Its handler gets stuck on order 2
# the first time (an ERP call that never returns), so we can kill the process while it
# holds that job.
#
# Each process gets a `FakeClock` with an explicit start time on its command line, so
# the lease arithmetic is exact and this page prints the same thing on every run, even
# with real processes.

# %%
import shlex
import signal
import subprocess
import sys
from select import select

from labkit.clock import LAB_EPOCH

WORKER_PROGRAM = """
import sys
from labkit.clock import FakeClock
from labkit.store import JobStore
from labkit.worker import Worker

def sync_order(job, ctx):
    if job.payload["order"] == 2 and job.attempt == 1:
        print("HOLDING", job.id, flush=True)
        sys.stdin.read()  # the ERP call that never returns
    return {"erp_id": "E-%d" % job.payload["order"]}

path, start, name = sys.argv[1], float(sys.argv[2]), sys.argv[3]
store = JobStore(path, clock=FakeClock(start))
Worker(store, {"sync_order": sync_order}, name=name, lease_s=30).run_until_idle()
print("IDLE", flush=True)
"""
program = folder / "worker_main.py"
program.write_text(WORKER_PROGRAM)

real = JobStore(folder / "real.db", clock=FakeClock(LAB_EPOCH), rng=rng)
for order in (1, 2, 3):
    real.enqueue("sync_order", {"order": order}, key=operation_key("erp", order, "sync"))
show(jobs_table(real, columns=("id", "key", "state", "attempt", "lease_owner")))

# %% [markdown]
# Start the worker process one second after the jobs were accepted and wait until it
# says it is holding order 2. This is the table **before** the kill, read from the file:
# order 1 is done, order 2 is `running` under worker-1's lease, order 3 is waiting.

# %%
child = subprocess.Popen(
    [sys.executable, str(program), str(real.path), str(LAB_EPOCH + 1), "worker-1"],
    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
)
ready, _, _ = select([child.stdout], [], [], 30)
assert ready, f"the worker never reported: {child.stderr.read() if child.poll() else 'hung'}"
said = child.stdout.readline().split()
print("worker-1 says:", " ".join(said))
show(jobs_table(real, columns=("id", "key", "state", "attempt", "lease_owner", "lease_until")))
assert said == ["HOLDING", "2"]
assert [j.state for j in real.jobs()] == ["succeeded", "running", "pending"]

# %% [markdown]
# `kill -9`: SIGKILL cannot be caught, so no `finally`, no cleanup, no "mark it failed on
# the way out". The table **after** the kill is exactly the table before: the dead
# process could not say anything, and the job is still `running` under a lease nobody
# will renew.

# %%
child.kill()  # SIGKILL
child.wait(timeout=30)
print("worker-1 ended by SIGKILL:", child.returncode == -signal.SIGKILL)
show(jobs_table(real, columns=("id", "key", "state", "attempt", "lease_owner", "lease_until")))
assert child.returncode == -signal.SIGKILL
assert [j.state for j in real.jobs()] == ["succeeded", "running", "pending"]

# %% [markdown]
# A supervisor (systemd, Kubernetes, a shell loop) starts a new worker. It starts at
# 00:00:40, after worker-1's lease ran out at 00:00:31. It picks up order 3, then finds
# order 2's lease expired and claims it: attempt 2. Nobody had to notice the crash.

# %%
restart = subprocess.run(
    [sys.executable, str(program), str(real.path), str(LAB_EPOCH + 40), "worker-2"],
    stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
)
print("worker-2 says:", restart.stdout.strip(), "| exit code", restart.returncode)
show(jobs_table(real, columns=("id", "key", "state", "attempt", "lease_owner", "result")))
assert restart.returncode == 0, restart.stderr
assert real.counts()["succeeded"] == 3 and sum(real.counts().values()) == 3

# %% [markdown]
# The attempts history of order 2 tells the story on its own: worker-1's attempt ended
# because its lease expired, worker-2's succeeded. One job, one key, nothing lost,
# nothing done twice *by the table* (whether the ERP got order 2 twice is lesson 06's
# question).

# %%
show(
    [{"attempt": a.attempt, "worker": a.worker, "started_at": isoformat(a.started_at),
      "finished_at": isoformat(a.finished_at), "outcome": a.outcome}
     for a in real.attempts(2)],
)
assert [(a.worker, a.outcome) for a in real.attempts(2)] == [
    ("worker-1", "lease_expired"), ("worker-2", "succeeded")]

# %% [markdown]
# ## 7. The same table from a terminal: `labkit inspect`
#
# On a server there is no notebook. The `labkit` command reads the same file:
# `labkit inspect DB` prints the counts by state and the dead letters (lesson 07), and
# `labkit inspect DB --job ID` one job's attempts. It only reads; it never creates a
# database by mistake. Here it runs as a separate process on this lesson's file, as you
# would run it over SSH.

# %%
def labkit_cli(*args):
    """Run the ``labkit`` command in the lesson's folder, print what a terminal shows."""
    print("$ " + shlex.join(["labkit", *args]))
    done = subprocess.run([sys.executable, "-m", "labkit.cli", *args], cwd=folder,
                          capture_output=True, text=True, timeout=60)
    print(done.stdout + done.stderr)
    return done


assert labkit_cli("inspect", real.path.name).returncode == 0
shown = labkit_cli("inspect", real.path.name, "--job", "2")
assert "lease_expired" in shown.stdout and "worker-2" in shown.stdout

# %% [markdown]
# A typo in the path is refused with what to do, and nothing is created:

# %%
typo = labkit_cli("inspect", "reel.db")
assert typo.returncode == 2 and not (folder / "reel.db").exists()

# %% [markdown]
# ## What you should see
#
# | step | what the table shows |
# |---|---|
# | transitions | `succeeded` is final; `dead` goes only to `pending` |
# | redrive a succeeded job | `InvalidTransition`, nothing changed |
# | enqueue, then a fresh connection | the job is there, `pending` |
# | the PRAGMAs | default `synchronous=NORMAL` (a process crash), `FULL` when asked (a power loss) |
# | two workers, one job | one gets it, the other gets `None` |
# | 200 jobs, two racing threads | 200 claims, 200 distinct jobs, 0 claimed twice |
# | heartbeat in time | the lease is extended; nobody else can claim |
# | lease expired | worker-b claims the same job, attempt 2 |
# | the old worker's `complete` / `heartbeat` | `LeaseLost`; the row is unchanged |
# | the ERP article's claim, worker dies | a day later still `running`; the second claim changes 0 rows |
# | attempts history | attempt 1 `lease_expired`, attempt 2 `succeeded` |
# | real worker holding order 2 | 1 succeeded, 1 running (worker-1), 1 pending |
# | after SIGKILL | the same table: the dead process changed nothing |
# | restart past the lease | 3 succeeded; order 2 at attempt 2 by worker-2 |
# | `labkit inspect` | the same counts and order 2's two attempts; a wrong path: exit 2, no file created |
#
# **What to take away**
#
# - A job is accepted only once it is committed. With `synchronous=NORMAL` that survives
#   a process crash, not a power loss; `FULL` survives both.
# - A job moves only along `TRANSITIONS`; the store refuses any other move.
# - The claim is one atomic update: however many workers race, each job is claimed once.
# - A claim is a lease, renewed by heartbeats. When it runs out, another worker takes the
#   job, so a crashed worker's job comes back with no one watching.
# - The lease token fences the old worker: its late `complete` or `heartbeat` gets
#   `LeaseLost` and changes nothing.
# - A status column without a lease leaves a dead worker's job `running` for good; the
#   attempts history keeps every attempt, the ones that died included.
#
# ## Glossary and next
#
# The terms of this lesson, and of every other, in English and Portuguese:
# [Glossary / Glossário](glossary.md).
#
# [Next: 05 · Retries](05_retries.ipynb)
