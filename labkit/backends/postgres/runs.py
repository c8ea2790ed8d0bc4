"""A PostgreSQL schema per run of a lesson, and the sweep of what failed runs left.

A lesson names its schema ``lesson13_<run id>`` and drops it in its last cell. A run that
fails part-way never reaches that cell, and its schema stays on the shared server. The
next run cannot simply drop every ``lesson13_*`` schema: another run of the same lesson
(a second kernel, another checkout's tests) may be using its own right now.

So a run holds a session-level advisory lock named after its schema (``labkit.backends.
pg_lock``) for as long as it lives. ``RunSchema(url, "lesson13_")`` takes its own lock,
then drops every schema of the pattern ``lesson13_<run id>`` whose lock it can take: no
live session holds it, so its run is over. When a run's process ends, however it ends,
its connection closes and the server gives the lock back, so a killed kernel's schema is
swept by the next run; a run still going keeps its lock and its schema.

A run that also keeps Redis keys names them ``<key prefix><run id>:...``; ``sweep_keys``
removes those of runs whose lock is free, by the same rule.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from functools import partial
from typing import Any

import psycopg
from psycopg import sql

from labkit.backends.postgres.lock import SQL as LOCK_SQL
from labkit.backends.postgres.lock import single_instance_pg
from labkit.backends.postgres.sql import load_statements

SQL = load_statements("backends/postgres/runs.sql")
_PREFIX = re.compile(r"^[a-z_][a-z0-9_]{0,40}$")
#: A run id: 10 hex digits, as the lessons have always named their runs.
_RUN_ID = "[0-9a-f]{10}"


def _lock_name(schema: str) -> str:
    return f"labkit-run:{schema}"


def _glob_escape(text: str) -> str:
    """``text`` as a literal in a Redis SCAN MATCH pattern."""
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)


class RunSchema:
    """The schema name of one run, ``<prefix><run id>``, guarded while the run lives.

    ``RunSchema(url, prefix)`` picks a fresh run id, holds the run's advisory lock on a
    connection of its own, and drops the schemas earlier runs with the same ``prefix``
    left behind (``swept`` lists them). It does not create the schema: the store does.
    ``close()`` gives the lock back; drop the schema before, or the next run will.
    """

    def __init__(self, url: str, prefix: str) -> None:
        if not isinstance(prefix, str) or not _PREFIX.match(prefix):
            raise ValueError(
                "prefix must start a lower-case SQL identifier (letters, digits, _; at most "
                f"41), e.g. 'lesson13_', not {prefix!r}"
            )
        self.id = uuid.uuid4().hex[:10]
        self.prefix = prefix
        self.name = prefix + self.id
        self._held = ExitStack()
        self._conn: psycopg.Connection[Any] = self._held.enter_context(
            single_instance_pg(url, _lock_name(self.name), application_name=self.name)
        )
        try:
            self.swept = self._sweep(prefix)
        except BaseException:
            self._held.close()
            raise

    def _sweep(self, prefix: str) -> list[str]:
        conn = self._conn
        # A lock some statement of a dying run still holds must not hang the sweep.
        conn.execute("SET lock_timeout = '10s'")
        pattern = f"^{prefix}{_RUN_ID}$"
        names = [row[0] for row in conn.execute(SQL["run_schemas"], {"pattern": pattern})]
        swept = []
        for name in names:
            drop = sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name))
            if self._if_over(name.removeprefix(prefix), partial(conn.execute, drop)):
                swept.append(name)
        return swept

    def _if_over(self, run_id: str, clean: Callable[[], object]) -> bool:
        """Run ``clean`` while holding the lock of run ``run_id``, if no live session has it."""
        if run_id == self.id:
            return False  # this session holds that lock already: taking it again succeeds
        lock = {"name": _lock_name(self.prefix + run_id)}
        got = self._conn.execute(LOCK_SQL["try_lock"], lock).fetchone()
        if not (got and got[0]):
            return False  # its run is alive
        try:
            clean()
        finally:
            self._conn.execute(LOCK_SQL["unlock"], lock)
        return True

    def sweep_keys(self, redis_url: str, key_prefix: str) -> list[str]:
        """Remove the Redis keys ``<key_prefix><run id>:*`` of runs that are over.

        Returns the key prefixes removed (``<key_prefix><run id>``). A live run's keys stay,
        whether or not it has made its schema yet: its lock is what counts.
        """
        import redis

        from labkit.backends import spec

        shape = re.compile(rf"{re.escape(key_prefix)}({_RUN_ID}):")
        with redis.Redis.from_url(redis_url) as client:
            keys = client.scan_iter(match=f"{_glob_escape(key_prefix)}*", count=1000)
            found = {m.group(1) for key in keys if (m := shape.match(key.decode("latin-1")))}
        swept = []
        for run_id in sorted(found):
            target = f"{redis_url}#prefix={key_prefix}{run_id}"
            if self._if_over(run_id, partial(spec.drop, target)):
                swept.append(key_prefix + run_id)
        return swept

    def close(self) -> None:
        """Give the run's lock back (closing its connection)."""
        self._held.close()

    def __enter__(self) -> RunSchema:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RunSchema({self.name!r})"
