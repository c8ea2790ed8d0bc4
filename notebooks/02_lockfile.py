# %% [markdown]
# # 02 · A lockfile: one instance at a time
#
# *A lock the kernel takes back when its holder dies stops two cron runs from
# overlapping; a pidfile does not, and neither makes a re-run safe.*
#
# > **Resumo.** Um lock que o kernel libera quando o dono morre impede que duas execuções
# > do cron rodem ao mesmo tempo. Com processos reais: a segunda execução é recusada; o
# > dono leva um `kill -9` e o lock é liberado sozinho; já um pidfile ingênuo fica para
# > trás e bloqueia todas as execuções seguintes. E o que o lock não resolve: a
# > reexecução depois de um crash continua cobrando em dobro.
#
# Run time: about 3 seconds (it starts a dozen short Python processes).
#
# Lesson 01's second bad night had two runs of the billing script charging everyone
# twice, because cron starts a new run whether or not the last one finished. The cron article
# calls the lockfile "the cron's seat belt": the first thing a run does is take a lock,
# and a run that cannot take it stops. This lesson runs real processes against
# `labkit.patterns.lock`:
#
# 1. `single_instance`: a second process is refused, and told who holds the lock;
# 2. `kill -9` the holder: the lock frees itself, the next run goes ahead;
# 3. the naive pidfile, for contrast: after `kill -9` it stays behind and blocks every
#    run until someone deletes it by hand;
# 4. what a lock does not do: make a re-run after a crash safe.

# %% [markdown]
# ## Setup
#
# A fresh folder and a `FakeClock` for the in-process part. Real processes get their
# start time on the command line (02:00, 03:00, ... as the cron line fires), so the
# page prints the same times on every run. Their process ids change every time, so the
# page never prints them raw: `named` swaps each pid for the run's name.

# %%
import os
import signal
import subprocess
import sys
from collections import Counter
from select import select

from labkit.clock import LAB_EPOCH, FakeClock
from labkit.errors import SimulatedCrash
from labkit.faults import FaultPlan
from labkit.patterns.lock import read_holder, single_instance
from labkit.tables import show
from labkit.notebook.scratch import fresh_dir
from labkit.world import World

SEED = 2
clock = FakeClock(LAB_EPOCH + 2 * 3600)
folder = fresh_dir("02")
names = {}  # pid -> run name, filled as processes start


def named(text):
    """``text`` with every known pid replaced by its run's name."""
    for pid, name in names.items():
        text = text.replace(f"pid {pid}", f"pid <{name}>")
    return text


def alive(pid):
    """Is there a process with this pid? (Signal 0 checks without sending anything.)"""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


print(f"seed={SEED}  clock={clock}  folder={folder}")

# %% [markdown]
# ## The cron job, as a program
#
# This is the billing run reduced to what matters here: take the lock (the real one,
# `flock`, or the naive pidfile, chosen on the command line), say so, then "work" until
# its standard input closes, which lets the notebook keep it busy for as long as it
# needs, like a run stuck on a slow payment API. A run that cannot take the lock prints
# why and exits with code 1.

# %%
CRON_PROGRAM = """
import sys
from labkit.errors import AlreadyRunning
from labkit.patterns.lock import naive_pidfile, single_instance

how, path, started_at = sys.argv[1], sys.argv[2], float(sys.argv[3])
take = single_instance if how == "flock" else naive_pidfile
try:
    with take(path, started_at=started_at):
        print("RUNNING", flush=True)
        sys.stdin.read()  # the billing run; it ends when the notebook closes stdin
        print("DONE", flush=True)
except AlreadyRunning as exc:
    print("REFUSED", exc, flush=True)
    sys.exit(1)
"""
program = folder / "billing_cron.py"
program.write_text(CRON_PROGRAM)
lock_path = folder / "billing.lock"


def start(name, how, hour, path):
    """Start a run that holds the lock; return once it says RUNNING."""
    child = subprocess.Popen(
        [sys.executable, str(program), how, str(path), str(LAB_EPOCH + hour * 3600)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    names[child.pid] = name
    ready, _, _ = select([child.stdout], [], [], 30)
    assert ready, f"{name} never reported: {child.stderr.read() if child.poll() else 'hung'}"
    said = child.stdout.readline().strip()
    assert said == "RUNNING", f"{name} said {said!r}"
    return child


def run_to_end(name, how, hour, path):
    """Run once with nothing to wait for; return (exit code, what it said)."""
    child = subprocess.Popen(
        [sys.executable, str(program), how, str(path), str(LAB_EPOCH + hour * 3600)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    names[child.pid] = name
    out, err = child.communicate(timeout=60)
    exit_codes[name] = child.returncode
    return child.returncode, named(out.strip()) or err.strip()


exit_codes = {}  # run name -> exit code, for the summary at the end
print(f"program: {program} ({len(CRON_PROGRAM.splitlines())} lines); lock file: {lock_path}")

# %% [markdown]
# ## 1. A second instance is refused
#
# The 02:00 run starts and takes the lock. `single_instance` writes the holder's pid and
# start time into the lock file, so whoever is refused can be told who is in the way.

# %%
run1 = start("run-02h", "flock", 2, lock_path)
holder = read_holder(lock_path)
print(f"run-02h is running; the lock file says: {named(holder.describe())}")
assert holder.pid == run1.pid and holder.started_at == LAB_EPOCH + 2 * 3600

# %% [markdown]
# At 03:00 cron starts the next run while run-02h is still working. It does not wait
# and does not queue up: it is refused at once, with a message naming the holder, and
# exits with code 1 (cron's mail or your monitoring sees a non-zero exit).

# %%
code, said = run_to_end("run-03h", "flock", 3, lock_path)
print(f"run-03h exit code {code}")
print(said)
assert code == 1 and said.startswith("REFUSED")
assert "pid <run-02h>, started 2026-01-01 02:00:00 UTC" in said

# %% [markdown]
# ## 2. kill -9 the holder: the lock frees itself
#
# Now run-02h dies the hard way: SIGKILL, which no program can catch, so no `finally`
# runs and nobody removes anything. The lock file is still there, and it still names
# run-02h, a process that no longer exists.

# %%
run1.kill()  # SIGKILL
run1.wait(timeout=30)
left = read_holder(lock_path)
print(f"run-02h ended by SIGKILL: {run1.returncode == -signal.SIGKILL}")
print(f"lock file still there: {lock_path.exists()}; it says {named(left.describe())}")
print(f"is that process alive? {alive(left.pid)}")
assert run1.returncode == -signal.SIGKILL
assert left.pid == run1.pid and not alive(left.pid)

# %% [markdown]
# None of that matters. `flock` locks belong to an open file, not to the file's
# content: when the kernel tore down the dead process it closed its files, and the lock
# went with them. The 04:00 run takes the lock, does its work and exits cleanly.

# %%
code, said = run_to_end("run-04h", "flock", 4, lock_path)
print(f"run-04h exit code {code}: {said.split()}")
print(f"the lock file now says: {named(read_holder(lock_path).describe())}")
assert code == 0 and said.split() == ["RUNNING", "DONE"]

# %% [markdown]
# ## 3. The naive pidfile goes stale
#
# Many cron scripts start with a different idea: create `billing.pid` with `O_EXCL`
# (fail if it exists), delete it on the way out. `labkit.patterns.lock.naive_pidfile` is that
# idea. On a normal night it works, and the file is gone after the run, which is why
# nobody notices the flaw:

# %%
pidfile = folder / "billing.pid"
code, said = run_to_end("run-05h", "pidfile", 5, pidfile)
print(f"run-05h exit code {code}: {said.split()}; pidfile left behind: {pidfile.exists()}")
assert code == 0 and not pidfile.exists()

# %% [markdown]
# The flaw: the file is removed by code that must run. The 06:00 run is killed with
# `kill -9` halfway, its `finally` never runs, and the file stays.

# %%
run6 = start("run-06h", "pidfile", 6, pidfile)
run6.kill()  # SIGKILL
run6.wait(timeout=30)
stale = read_holder(pidfile)
print(f"run-06h ended by SIGKILL: {run6.returncode == -signal.SIGKILL}")
print(f"pidfile left behind: {pidfile.exists()}; it names {named(stale.describe())}, "
      f"alive: {alive(stale.pid)}")
assert run6.returncode == -signal.SIGKILL and pidfile.exists() and not alive(stale.pid)

# %% [markdown]
# Every later run is refused because of a process that is dead. Nothing runs at 07:00,
# nothing at 08:00, and so on until a person reads the logs and deletes the file by
# hand. A "smarter" pidfile that checks whether the pid is alive only moves the problem:
# pids are reused, so after a reboot or a busy day that pid may belong to something
# else entirely.

# %%
for name, hour in (("run-07h", 7), ("run-08h", 8)):
    code, said = run_to_end(name, "pidfile", hour, pidfile)
    print(f"{name} exit code {code}: {said}")
    assert code == 1 and "pid <run-06h>" in said

# %% [markdown]
# Someone deletes the file by hand; only then does the next run go ahead.

# %%
pidfile.unlink()
code, said = run_to_end("run-09h", "pidfile", 9, pidfile)
print(f"run-09h exit code {code}: {said.split()}")
assert code == 0

# %% [markdown]
# Side by side, after one `kill -9` each:

# %%
show([
    {"lock": "single_instance (flock)", "holder killed": "run-02h",
     "next runs' exit codes": [exit_codes["run-04h"]], "who cleans up": "the kernel, at once"},
    {"lock": "naive_pidfile (O_EXCL)", "holder killed": "run-06h",
     "next runs' exit codes": [exit_codes["run-07h"], exit_codes["run-08h"]],
     "who cleans up": "a person, by hand"},
])
assert exit_codes["run-04h"] == 0 and exit_codes["run-07h"] == exit_codes["run-08h"] == 1

# %% [markdown]
# ## 4. What a lock does not do
#
# A lock stops two runs from *overlapping*. It says nothing about a run that died
# halfway, because by the time the next run starts, the dead one holds nothing. Here is
# lesson 01's billing loop again, now inside `single_instance`, and the same crash: the
# process dies as it calls the payment API for davi.

# %%
CUSTOMERS = [("ana", 4_990), ("bruno", 9_990), ("carla", 4_990),
             ("davi", 9_990), ("elis", 29_990), ("fabio", 4_990)]


def billing_run(world):
    with single_instance(folder / "inprocess.lock", clock=clock):
        for customer, amount in CUSTOMERS:
            world.payments.charge(customer, amount, key=f"inv-2026-01-{customer}")


def charges_per_customer(world):
    counted = Counter(e.payload["customer"] for e in world.effects(service="payments"))
    return {customer: counted[customer] for customer, _ in CUSTOMERS}


plan = FaultPlan(seed=SEED).at("before_call", "crash", key="inv-2026-01-davi", nth=1)
print(f"fault plan (replay): {plan}")
try:
    billing_run(World(folder / "world.db", clock=clock, faults=plan))
except SimulatedCrash as exc:
    print(f"the run died: {exc}")
assert plan.fired_at("before_call", "crash")

# %% [markdown]
# The next run takes the lock without trouble (nobody holds it) and starts from the
# top. The lock was honoured the whole time, and ana, bruno and carla are still
# charged twice:

# %%
clock.advance(3600)
rerun = World(folder / "world.db", clock=clock)
billing_run(rerun)
show([{"customer": c, "charges": n} for c, n in charges_per_customer(rerun).items()])
assert charges_per_customer(rerun) == {
    "ana": 2, "bruno": 2, "carla": 2, "davi": 1, "elis": 1, "fabio": 1}

# %% [markdown]
# The lock guards *time* (not two at once); what is missing is *memory* (what was
# already done). That is a record per unit of work under a stable key, the subject of
# lesson 03. And a lock file guards one machine only: two servers with the same cron
# line each take their own lock. Across machines the coordination has to live in a
# shared place (the job table of lesson 04, a database lock, Redis).

# %% [markdown]
# ## What you should see
#
# | step | what the output shows |
# |---|---|
# | run-02h holds the lock | the lock file names run-02h's pid and 02:00:00 |
# | run-03h starts | exit code 1, `REFUSED`, naming run-02h and its start time |
# | `kill -9` run-02h | exit by SIGKILL; the lock file still names it; it is not alive |
# | run-04h starts | `RUNNING`, `DONE`, exit code 0: the kernel freed the lock |
# | naive pidfile, clean run | exit 0, no file left behind |
# | naive pidfile, `kill -9` run-06h | the file stays, naming a dead process |
# | run-07h, run-08h | refused, both naming run-06h |
# | file deleted by hand | run-09h goes ahead |
# | crash under the lock, then a re-run | ana, bruno, carla charged twice (2, 2, 2, 1, 1, 1) |
#
# **What to take away**
#
# - A `flock` lock belongs to an open file: the kernel releases it when its holder dies,
#   even by `kill -9`, with no cleanup code to run.
# - A pidfile is removed by code that must run: after `kill -9` it stays behind and blocks
#   every later run until someone deletes it by hand.
# - Checking whether the pidfile's pid is still alive does not fix it: pids are reused.
# - A refused run should exit non-zero and name the holder, so monitoring and people see why.
# - A lock stops runs from overlapping; it does not remember what a dead run already did,
#   so a re-run after a crash still charges twice.
# - A lock file guards one machine; across machines the coordination needs a shared place.
#
# ## Glossary and next
#
# The terms of this lesson, and of every other, in English and Portuguese:
# [Glossary / Glossário](glossary.md).
#
# [Next: 03 · Units of work and stable keys](03_keys.ipynb)
