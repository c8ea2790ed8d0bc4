# %% [markdown]
# # 04 · The job table
#
# *A job is a row: accepted only once it is on disk, claimed by exactly one worker at a
# time, and given back when its worker dies.*
#
# Lesson 03 gave every piece of work a stable key. Now the work needs a home that
# outlives any process: a table of jobs with a state, an attempt counter and a lease.
# This lesson walks through that table, `labkit.store.JobStore` on SQLite, and checks
# each promise it makes:
#
# 1. the states, and the only moves between them;
# 2. **durable acceptance**: when `enqueue` returns, the job is committed;
# 3. the **atomic claim**: two workers, one job, one winner;
# 4. **leases**: a worker that stops answering loses the job, and its late result is
#    refused;
# 5. the attempts history;
# 6. a real worker process killed with SIGKILL, and the table before and after.

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
from labkit.report import jobs_table, show
from labkit.scratch import fresh_dir
from labkit.store import JobStore

SEED = 4
rng = random.Random(SEED)
clock = FakeClock()
folder = fresh_dir("04")
print(f"seed={SEED}  clock={clock}  folder={folder}")

# %% [markdown]
# ## 1. States and transitions
#
# Seed 003 names five states: `pending`, `running`, `succeeded`, `retry_wait` and `dead`.
# `labkit.job.TRANSITIONS` is the whole contract: a job moves only along these arrows.
# `running → running` is crash recovery: the lease expired and another worker took the
# job. `dead → pending` happens only when a person redrives it (lesson 07).

# %% [markdown]
# The same contract as a diagram, drawn from `labkit.viz.job_states_mermaid()` (a test
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
#     succeeded --> [*]
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
# Seed 003 makes the point: "received by the process" and "recorded so it can be
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
# ## 3. The atomic claim
#
# A worker takes a job with `claim`: one `UPDATE ... RETURNING` inside a `BEGIN
# IMMEDIATE` transaction that sets `running`, adds one to `attempt` and writes a lease.
# Seed 002 does the same with a conditional `UPDATE` in Django: only one worker can
# "take" the event. Two workers ask for the one ready job; only the first gets it.

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
# ## 5. The attempts history
#
# Every lease opens a row in the attempts history and every exit from `running` closes
# it (database triggers write it, so no code path can forget). Seed 003 asks for exactly
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
# ## What you should see
#
# | step | what the table shows |
# |---|---|
# | transitions | `succeeded` is final; `dead` goes only to `pending` |
# | redrive a succeeded job | `InvalidTransition`, nothing changed |
# | enqueue, then a fresh connection | the job is there, `pending` |
# | two workers, one job | one gets it, the other gets `None` |
# | 200 jobs, two racing threads | 200 claims, 200 distinct jobs, 0 claimed twice |
# | heartbeat in time | the lease is extended; nobody else can claim |
# | lease expired | worker-b claims the same job, attempt 2 |
# | the old worker's `complete` / `heartbeat` | `LeaseLost`; the row is unchanged |
# | attempts history | attempt 1 `lease_expired`, attempt 2 `succeeded` |
# | real worker holding order 2 | 1 succeeded, 1 running (worker-1), 1 pending |
# | after SIGKILL | the same table: the dead process changed nothing |
# | restart past the lease | 3 succeeded; order 2 at attempt 2 by worker-2 |
#
# ## Glossary
#
# | English | Português (Brasil) |
# |---|---|
# | job table | tabela de jobs |
# | state, transition | estado, transição |
# | durable acceptance | aceitação durável |
# | claim | reivindicar (pegar) o job |
# | atomic | atômico |
# | lease | lease, concessão com prazo |
# | heartbeat | heartbeat, sinal de vida |
# | lease token, fencing | token do lease, cercamento (fencing) |
# | lease lost | lease perdido |
# | attempts history | histórico de tentativas |
# | crash recovery | recuperação após queda |
