"""One benchmark process: enqueue N jobs, or work until the queue is empty.

Run by bench/run.py as ``python bench/child.py '<json spec>'``; prints one JSON line with
its timings and peak memory. It is a separate process so that a worker can be killed
with SIGKILL for real, and so that peak memory is the worker's own.

The effect is the same for every library: append one line ``"<i>\\n"`` to a file opened
with O_APPEND (one ``write`` call, atomic for lines this short), so duplicates and losses
are counted from what happened, not from what the library reports.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.adapters import ADAPTERS  # noqa: E402
from bench.pg import PG_ADAPTERS  # noqa: E402
from bench.streams import STREAM_ADAPTERS  # noqa: E402

SUBJECTS = {**ADAPTERS, **PG_ADAPTERS, **STREAM_ADAPTERS}


class Effect:
    """Append ``i`` to the effects log; optionally SIGKILL this process around the k-th effect."""

    def __init__(self, log: str, kill_at: str | None, kill_after: int) -> None:
        self.fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.kill_at = kill_at
        self.kill_after = kill_after
        self.seen = 0
        #: monotonic time of the last effect: a rate stops there, not at the worker's exit
        #: (pgqueuer's drain mode takes seconds to shut down after its last job).
        self.t_last = 0.0

    def before(self, i: int) -> None:
        self.seen += 1
        if self.seen == 1:
            print("first effect", flush=True)  # W3 random kills count from here
        if self.kill_at == "before_effect" and self.seen == self.kill_after:
            os.kill(os.getpid(), signal.SIGKILL)

    def after(self, i: int) -> None:
        self.t_last = time.monotonic()
        if self.kill_at == "after_effect" and self.seen == self.kill_after:
            os.kill(os.getpid(), signal.SIGKILL)

    def __call__(self, i: int) -> None:
        self.before(i)
        os.write(self.fd, b"%d\n" % i)
        self.after(i)


def peak_rss_kb() -> int:
    """This process's own peak RSS (VmHWM).

    Not ``getrusage().ru_maxrss``: Linux carries that across ``exec``, so a child would
    report its parent's size at fork whenever the parent was bigger.
    """
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def main(spec: dict) -> dict:
    adapter = SUBJECTS[spec["adapter"]](Path(spec["dir"]))
    out: dict = {}
    if spec["phase"] in ("enqueue", "fill"):
        t0 = time.perf_counter()
        if spec["phase"] == "fill":
            adapter.fill(spec["n"])
        else:
            adapter.enqueue(spec["n"], spec.get("start", 0))
        out["elapsed"] = time.perf_counter() - t0
        out["done"] = spec["n"]
    else:
        effect = Effect(spec["log"], spec.get("kill_at"), spec.get("kill_after", 0))
        recover_wait = spec.get("recover_wait", 0.0)
        errors: Counter[str] = Counter()
        done, idle_since = 0, None
        # A queue whose claim slows down with its length could take hours at N=100,000:
        # past the budget the run stops and reports the rate of the jobs it did finish.
        budget = spec.get("budget_s") or float("inf")
        print("working", flush=True)
        out["t_start"] = time.monotonic()
        t0 = time.perf_counter()
        while True:
            try:
                got = adapter.work_one(effect, spec.get("worker", "w1"))
            except Exception as exc:  # a library error is data here, not the end of the run
                errors[f"{type(exc).__name__}: {str(exc)[:80]}"] += 1
                if sum(errors.values()) > 1000:
                    break
                continue
            if got:
                done += got
                idle_since = None
                if time.perf_counter() - t0 > budget:
                    break
                continue
            # Nothing ready. In W3 a killed worker's job may come back when its lease
            # expires: wait for it, but only while the queue says work remains.
            if recover_wait <= 0 or adapter.remaining() == 0:
                break
            if idle_since is None:
                idle_since = time.monotonic()
            elif time.monotonic() - idle_since > recover_wait:
                break
            time.sleep(0.02)
        out["elapsed"] = time.perf_counter() - t0
        out["t_end"] = time.monotonic()
        out["t_last"] = effect.t_last or out["t_end"]
        out["done"] = done
        out["errors"] = dict(errors)
    out["maxrss_kb"] = peak_rss_kb()
    adapter.close()
    return out


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))), flush=True)
