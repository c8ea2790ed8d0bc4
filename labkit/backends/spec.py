"""One string names a job store on any engine, so a child process can open the same one.

``open_store(spec, clock, rng)`` opens:

- a file path: ``labkit.store.sqlite.JobStore`` (SQLite);
- ``postgresql://...#schema=NAME``: ``labkit.backends.postgres.store.PostgresJobStore`` in
  that schema;
- ``redis://...#prefix=NAME&reclaim_idle_ms=N``: ``labkit.backends.redis.store.StreamJobStore``.

``new_spec(backend, folder, url, name)`` makes a fresh one for a run (its own file,
schema or key prefix) and ``drop(spec)`` removes what it holds: the explorer and the
tests make one per run and leave nothing behind in the servers. Drivers are imported
only when their engine is asked for.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from labkit.clock import Clock

BACKENDS = ("sqlite", "postgres", "redis_streams")
_pool_lock = threading.Lock()
#: PostgreSQL specs emptied by ``drop`` inside ``reuse_schemas()``, ready to hand out again.
_pool: list[str] | None = None
POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"
REDIS_URL = "redis://127.0.0.1:6379/0"


def _split(spec: str) -> tuple[str, dict[str, str]]:
    url, _, fragment = spec.partition("#")
    return url, {k: v[-1] for k, v in parse_qs(fragment).items()}


def is_url(spec: str | Path) -> bool:
    return isinstance(spec, str) and spec.startswith(("postgresql://", "redis://"))


def open_store(spec: str | Path, clock: Clock, rng: random.Random | None = None) -> Any:
    """Open the job store ``spec`` names (see the module docstring)."""
    text = str(spec)
    if text.startswith("postgresql://"):
        from labkit.backends.postgres.store import PostgresJobStore

        url, opts = _split(text)
        return PostgresJobStore(url, clock=clock, rng=rng, schema=opts.get("schema"))
    if text.startswith("redis://"):
        from labkit.backends.redis.store import StreamJobStore

        url, opts = _split(text)
        if "prefix" not in opts:
            raise ValueError(f"a Redis store spec needs #prefix=NAME, got {text!r}")
        idle = int(opts.get("reclaim_idle_ms", "30000"))
        return StreamJobStore(url, opts["prefix"], clock=clock, rng=rng, reclaim_idle_ms=idle)
    from labkit.store import JobStore

    return JobStore(Path(text), clock, rng=rng)


def new_spec(backend: str, folder: Path, name: str, url: str | None = None) -> str:
    """A spec for a fresh, empty store of ``backend`` named after ``name``.

    On Redis a restarted worker takes a dead one's entry back when the job's lease runs
    out on the injected clock (the store keeps one beside the PEL), as on SQL.
    """
    safe = "".join(c if c.isalnum() else "_" for c in name.lower())
    if backend == "sqlite":
        return str(folder / "jobs.db")
    if backend == "postgres":
        with _pool_lock:
            for reused in _pool or []:
                if reused.startswith(f"{url or POSTGRES_URL}#"):
                    _pool.remove(reused)  # type: ignore[union-attr]
                    return reused
        return f"{url or POSTGRES_URL}#schema={safe[:63]}"
    if backend == "redis_streams":
        return f"{url or REDIS_URL}#prefix={safe}"
    raise ValueError(f"unknown backend {backend!r}; choose from {', '.join(BACKENDS)}")


def drop(spec: str | Path) -> None:
    """Remove everything the store ``spec`` names holds on its server (files stay)."""
    text = str(spec)
    if text.startswith("postgresql://"):
        import psycopg
        from psycopg import sql

        url, opts = _split(text)
        schema = sql.Identifier(opts["schema"])
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("SET lock_timeout = '10s'")
            with _pool_lock:
                keep = _pool is not None
            if keep:
                # Emptied, not dropped: creating a schema with its triggers costs ten times
                # more. DELETE, not TRUNCATE: the explorer's tables hold a handful of rows.
                with conn.transaction():
                    for table in ("attempts", "redrives", "jobs"):
                        conn.execute(
                            sql.SQL("DELETE FROM {}.{}").format(schema, sql.Identifier(table))
                        )
                with _pool_lock:
                    if _pool is not None:
                        _pool.append(text)
                        return
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(schema))
    elif text.startswith("redis://"):
        import redis

        url, opts = _split(text)
        client = redis.Redis.from_url(url)
        try:
            keys = list(client.scan_iter(match=f"{opts['prefix']}:*", count=1000))
            if keys:
                client.delete(*keys)
        finally:
            client.close()


@contextmanager
def reuse_schemas() -> Iterator[None]:
    """Inside the block, ``drop`` empties a PostgreSQL store and ``new_spec`` reuses it.

    The explorer makes a store per run; with this, 42 runs cost one schema (per thread)
    instead of 42. Every schema is dropped when the block ends, whatever happened in it.
    """
    global _pool
    with _pool_lock:
        if _pool is not None:  # already inside a reuse_schemas block
            outer = True
        else:
            outer, _pool = False, []
    try:
        yield
    finally:
        if not outer:
            with _pool_lock:
                left, _pool = _pool or [], None
            for spec in left:
                drop(spec)
