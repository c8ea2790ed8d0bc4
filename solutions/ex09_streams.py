# %% [markdown]
# # Exercise 9: a Redis Streams consumer that loses nothing and does nothing twice
#
# Lesson 13 did it by hand, one command per cell: a consumer died holding an entry,
# `XAUTOCLAIM` gave it to another, a poison entry went to the dead-letter stream after
# three deliveries. Now write the consumer that does all of it by itself.
#
# The grader runs your `consume` in **real processes** against Redis on
# 127.0.0.1:6379 (start it with `docker compose up -d`), kills some of them with
# SIGKILL in the middle of a job, restarts them, and then reads Redis itself: the
# effects list must hold every key exactly once, nothing may stay pending, and the
# poison entry must be in the dead-letter stream.
#
# Your code goes in a file (`%%writefile`), because a process the grader starts cannot
# import a function from a notebook cell. Run the cell to write the file, then the
# check.

# %%
# %%writefile stream_consumer.py
"""Exercise 9's consumer; the grader runs it as ``python stream_consumer.py '<json>'``."""

import json
import os
import signal
import sys
import time

import redis

GROUP = "workers"


def run_job(payload, deliveries):
    """The job's own work (given: do not change). Call it before applying an entry.

    - sleeps ``payload["work_s"]`` seconds (a slow job: a kill lands in the middle), on
      the first ``payload["slow_deliveries"]`` deliveries only when that is given;
    - ``payload["flaky"] = n``: raises ConnectionError on deliveries 1..n (a dependency
      that is down for a while: leave the entry pending and it comes back);
    - ``payload["crash"]``: kills this process with SIGKILL (a poison entry: only the
      delivery count can stop it).
    """
    if deliveries <= int(payload.get("slow_deliveries", deliveries)):
        time.sleep(float(payload.get("work_s", 0)))
    if payload.get("crash"):
        os.kill(os.getpid(), signal.SIGKILL)
    if deliveries <= int(payload.get("flaky", 0)):
        raise ConnectionError(f"dependency down (delivery {deliveries})")


def consume(url, prefix, consumer, max_deliveries=3, idle_ms=1000):
    """Run the entries of stream ``<prefix>:stream`` as ``consumer`` of group ``workers``.

    Return how many entries this call applied, once no entry is pending for anyone
    (``XPENDING`` empty) and no new entry waits. The group exists already.

    - Each entry has fields ``key`` and ``payload`` (JSON text). **Applying** it means
      ``RPUSH <prefix>:effects <key>``, at most once per key, ever: keep a record
      ``<prefix>:done:<key>`` and make record, effect and ``XACK`` one atomic step
      (``WATCH`` + ``MULTI``, or a Lua script), so a kill can never split them. An entry
      whose key is already done is only acknowledged.
    - Each round takes ONE entry (``COUNT 1``), from the first of: your own pending
      entries (``XREADGROUP ... 0``, what you held before a restart), entries of any
      consumer idle at least ``idle_ms`` (``XAUTOCLAIM``), new entries (``XREADGROUP ...
      >``). One at a time, because an entry you hold and have not started still gains a
      delivery each time you crash on another. If there is none but something is still
      pending, wait about 50 ms and look again.
    - One ``XAUTOCLAIM`` looks at no more than ten pending entries for each one it may
      claim (https://redis.io/docs/latest/commands/xautoclaim/: ten times ``COUNT``): start
      each call at the cursor the last one returned (its reply's first element), or an
      idle entry behind ten busy ones is never reached.
    - Before running an entry, read its delivery count (``XPENDING``). Above
      ``max_deliveries``: add it to ``<prefix>:dead`` with fields ``key``, ``payload`` and
      a non-empty ``reason``, and ``XACK`` it in the same ``MULTI``; do not run it.
    - Otherwise call ``run_job(payload, deliveries)``; if it raises, leave the entry
      pending (no ``XACK``): it comes back with one more delivery.
    - An entry of yours that ``XREADGROUP ... 0`` returns with no fields (``{}``) was
      deleted from the stream (``XDEL``, ``XTRIM``) while pending: nothing is left to run
      or count, but it stays pending until you ``XACK`` it, or until an ``XAUTOCLAIM``
      drops it from the PEL (it drops such entries whatever their idle time, and lists
      them in its reply's third element).
    """
    ### BEGIN SOLUTION
    r = redis.Redis.from_url(url, decode_responses=True)
    stream, dead, effects = f"{prefix}:stream", f"{prefix}:dead", f"{prefix}:effects"
    applied = 0
    # Where the next XAUTOCLAIM looks from: one call looks at no more than ten pending
    # entries (COUNT 1), so each goes on where the last one stopped, and the scan starts
    # again at "0-0" once a call returns "0-0" (it went round the whole PEL).
    cursor = "0-0"
    while True:
        # An entry of ours deleted from the stream comes with no fields: skipped here,
        # the XAUTOCLAIM below drops it from the PEL (whatever its idle time).
        rows = r.xreadgroup(GROUP, consumer, {stream: "0"}, count=1)
        entries = [e for _s, found in rows for e in found if e[1]]
        if not entries:
            cursor, claimed = r.xautoclaim(stream, GROUP, consumer, idle_ms, cursor, 1)[:2]
            entries = [e for e in claimed if e[1]]
        if not entries:
            rows = r.xreadgroup(GROUP, consumer, {stream: ">"}, count=1, block=50)
            entries = [e for _s, found in rows for e in found if e[1]]
        if not entries:
            if not r.xpending_range(stream, GROUP, "-", "+", 1):
                return applied
            time.sleep(0.05)
            continue
        for entry_id, fields in entries:
            info = r.xpending_range(stream, GROUP, entry_id, entry_id, 1)
            deliveries = int(info[0]["times_delivered"]) if info else 1
            if deliveries > max_deliveries:
                pipe = r.pipeline(transaction=True)
                pipe.xadd(dead, {"key": fields["key"], "payload": fields["payload"],
                                 "reason": f"delivered {deliveries} times, more than "
                                           f"{max_deliveries}: the consumer never finished it"})
                pipe.xack(stream, GROUP, entry_id)
                pipe.execute()
                continue
            try:
                run_job(json.loads(fields["payload"]), deliveries)
            except Exception:
                continue
            record = f"{prefix}:done:{fields['key']}"
            try:
                with r.pipeline(transaction=True) as pipe:
                    pipe.watch(record)
                    done_before = pipe.exists(record)
                    pipe.multi()
                    if not done_before:
                        pipe.set(record, entry_id)
                        pipe.rpush(effects, fields["key"])
                    pipe.xack(stream, GROUP, entry_id)
                    pipe.execute()
            except redis.WatchError:
                continue  # someone applied the key meanwhile: the entry comes round again
            applied += 0 if done_before else 1
    ### END SOLUTION


if __name__ == "__main__":
    config = json.loads(sys.argv[1])
    print(consume(config["url"], config["prefix"], config["consumer"],
                  config["max_deliveries"], config["idle_ms"]))

# %% [markdown]
# ## Try it
#
# A small run against your local Redis: three entries, one consumer, then what Redis
# holds. The cell defines `try_it()`; call it in a cell of your own (`try_it()`) once
# your consumer is written: it returns the effects your consumer recorded and Redis's
# pending summary, which should show nothing pending. It uses keys of its own and
# deletes them. The check below does much more (and kills your consumers for real).

# %%
import json
import subprocess
import sys
import uuid

import redis


def try_it(url="redis://127.0.0.1:6379/0"):
    prefix = f"ex09-try:{uuid.uuid4().hex[:8]}"
    r = redis.Redis.from_url(url, decode_responses=True)
    try:
        r.xgroup_create(f"{prefix}:stream", "workers", id="0", mkstream=True)
        for n in range(3):
            r.xadd(f"{prefix}:stream", {"key": f"k{n}", "payload": json.dumps({"n": n})})
        config = {"url": url, "prefix": prefix, "consumer": "a", "max_deliveries": 3,
                  "idle_ms": 1000}
        subprocess.run([sys.executable, "stream_consumer.py", json.dumps(config)],
                       check=False, timeout=60)
        return r.lrange(f"{prefix}:effects", 0, -1), r.xpending(f"{prefix}:stream", "workers")
    finally:
        keys = list(r.scan_iter(match=f"{prefix}:*"))
        if keys:
            r.delete(*keys)


# %% [markdown]
# ## Check your work
#
# Checks marked *severe* catch a mistake that loses or duplicates an effect, lets two
# holders run, shows one owner's data to another or never runs a retried job again:
# failing one caps the exercise's score at half. Here: `applies_each_entry_once`,
# `recovers_its_own_pending_after_a_kill`, `takes_over_a_dead_consumers_entries`,
# `leaves_a_live_consumers_entry_alone`, `dead_letters_a_crashing_entry_after_max_deliveries`,
# `survives_a_kill_after_every_command`, and hidden ones the grader runs.

# %%
from labkit.grading import check

check("ex09")
