"""A worker on Redis Streams whose clock is wrong: ``python skewed_stream_worker.py JSON``.

Spec keys: ``url``, ``prefix``, ``name``, ``skew_s`` (its ``SystemClock(skew_s=...)``),
``lease_s``, ``ask_s`` (how long it keeps asking for work when it has none), ``release``
(a file: its handler holds each job until the file exists, at most 60 s; absent: it
finishes at once). It stops after its first job or after ``ask_s``, whichever is first.

The store gets the skewed clock and the ``Worker`` is built with ``clock=None``, so it
uses ``store.clock``. The first line printed proves the skew was in effect: the given
clock's ``now() - time.time()`` and the store's. The last line is a JSON report: the
runs (key, attempt, outcome) and how long after start the first claim came.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from labkit.backends.redis.store import StreamJobStore
from labkit.clock import SystemClock
from labkit.worker import Worker


def main() -> int:
    spec = json.loads(sys.argv[1])
    started = time.monotonic()
    given = SystemClock(skew_s=float(spec["skew_s"]))
    store = StreamJobStore(spec["url"], spec["prefix"], clock=given)
    offsets = {
        "clock": repr(given),
        "given_minus_real": given.now() - time.time(),
        "store_minus_real": store.clock.now() - time.time(),
        "store_clock": repr(store.clock),
    }
    print(json.dumps(offsets), flush=True)
    release = Path(spec["release"]) if spec.get("release") else None
    claimed_after: list[float] = []

    def hold(job: Any, ctx: Any) -> dict[str, str]:
        claimed_after.append(time.monotonic() - started)
        until = time.monotonic() + 60
        while release is not None and not release.exists() and time.monotonic() < until:
            time.sleep(0.02)
        return {"by": spec["name"]}

    worker = Worker(store, {"slow": hold}, name=spec["name"], lease_s=float(spec["lease_s"]))
    deadline = time.monotonic() + float(spec["ask_s"])
    while not worker.runs and time.monotonic() < deadline:
        if worker.run_once() is None:
            time.sleep(0.05)
    runs = [(r.key, r.attempt, str(r.outcome)) for r in worker.runs]
    print(json.dumps({"name": spec["name"], "runs": runs, "claimed_after_s": claimed_after}))
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
