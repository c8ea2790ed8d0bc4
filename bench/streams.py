"""The Redis Streams subjects: labkit's StreamQueue against the thinnest raw loop.

Same interface as bench/adapters.py, same effect, same workloads. Each measurement uses
its own key prefix (``labkit-bench:<folder>``), deleted by ``drop(path)`` afterwards.

- ``labkit Redis Streams``: ``labkit.backends.redis.streams.StreamQueue``: ``add`` (a Lua
  script: ``SET key NX`` + ``XADD``), ``read_new`` (``XREADGROUP ... >``), effect, ``ack``
  (``XACK``); a dead consumer's entries are taken with ``autoclaim`` (``XAUTOCLAIM``)
  once idle for ``IDLE_MS``.
- ``raw XREADGROUP/XACK``: redis-py, ``XADD`` of the payload alone, ``XREADGROUP COUNT 1``,
  effect, ``XACK``; ``XAUTOCLAIM`` for a dead consumer's entries.

Both are at-least-once and both fsync as the server is configured (Redis's default
``appendfsync everysec``: an acknowledged entry can vanish in a power cut, not in a crash
of the worker). Neither fences the acknowledgement (``XACK`` does not check the holder).
The server is ``LABKIT_BENCH_REDIS`` (default ``redis://127.0.0.1:6379/0``).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from bench.adapters import Adapter, Effect

URL = os.environ.get("LABKIT_BENCH_REDIS", "redis://127.0.0.1:6379/0")
#: An entry idle this long belongs to a dead consumer and may be autoclaimed.
IDLE_MS = 500
GROUP = "bench"


def prefix_for(path: Path) -> str:
    return "labkit-bench:" + re.sub(r"[^a-z0-9_]", "_", path.name.lower())[:50]


def drop(path: Path) -> None:
    """Delete every key of the measurement."""
    import redis

    client = redis.Redis.from_url(URL)
    try:
        keys = list(client.scan_iter(match=f"{prefix_for(path)}:*", count=1000))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


def _remaining(r: Any, stream: str) -> int:
    """Entries not yet acknowledged: never delivered (lag) plus pending."""
    for group in r.xinfo_groups(stream):
        if group["name"] == GROUP:
            return int(group.get("lag") or 0) + int(group["pending"])
    return 0


class LabkitStreams(Adapter):
    """``StreamQueue``: add, read_new, effect, ack; autoclaim what a dead consumer left."""

    name = "labkit Redis Streams"

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        from labkit.backends.redis.streams import StreamQueue
        from labkit.clock import SystemClock

        self.q = StreamQueue(URL, prefix_for(path), group=GROUP, clock=SystemClock())

    def enqueue(self, n: int, start: int = 0) -> None:
        add = self.q.add
        for i in range(start, start + n):
            add("bench", {"i": i}, key=f"k{i}")

    def work_one(self, effect: Effect, worker: str) -> int:
        entries = self.q.read_new(worker, count=1)
        if not entries:
            entries = self.q.autoclaim(worker, min_idle_ms=IDLE_MS, count=1).entries
        for entry in entries:
            effect(entry.payload["i"])
            self.q.ack(entry.id)
        return len(entries)

    def remaining(self) -> int:
        return _remaining(self.q.r, self.q.stream)

    def close(self) -> None:
        self.q.close()


class RawStreams(Adapter):
    """redis-py alone: XADD, XREADGROUP COUNT 1, effect, XACK; XAUTOCLAIM for the dead."""

    name = "raw XREADGROUP/XACK"

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        import redis

        self.r: Any = redis.Redis.from_url(URL, decode_responses=True)
        self.stream = f"{prefix_for(path)}:raw"
        try:
            self.r.xgroup_create(self.stream, GROUP, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def enqueue(self, n: int, start: int = 0) -> None:
        xadd = self.r.xadd
        for i in range(start, start + n):
            xadd(self.stream, {"p": json.dumps({"i": i})})

    def work_one(self, effect: Effect, worker: str) -> int:
        reply = self.r.xreadgroup(GROUP, worker, {self.stream: ">"}, count=1)
        rows = reply[0][1] if reply else []
        if not rows:
            rows = self.r.xautoclaim(self.stream, GROUP, worker, IDLE_MS, "0-0", count=1)[1]
        done = 0
        for entry_id, fields in rows:
            if not fields:  # trimmed away: nothing to run
                continue
            effect(json.loads(fields["p"])["i"])
            self.r.xack(self.stream, GROUP, entry_id)
            done += 1
        return done

    def remaining(self) -> int:
        return _remaining(self.r, self.stream)

    def close(self) -> None:
        self.r.close()


STREAM_ADAPTERS: dict[str, type[Adapter]] = {
    "streams_labkit": LabkitStreams,
    "streams_raw": RawStreams,
}
