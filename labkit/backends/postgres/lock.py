"""One instance across machines: a PostgreSQL advisory lock held by a session.

``single_instance_pg(dsn, name)`` opens its own connection and takes
``pg_try_advisory_lock(hashtext(name))``. A second instance, on this machine or any
other that reaches the same database, gets ``AlreadyRunning`` naming the holder's
server pid, application name and connection time (from ``pg_locks`` and
``pg_stat_activity``). The lock belongs to the session: when the holder exits, crashes
or is SIGKILLed, its connection closes and the server releases the lock, the way the
kernel releases lesson 02's ``flock``.

Compared with ``labkit.patterns.lock.single_instance`` (``flock`` on a file): flock guards one
host (two machines each get their own lock on their own disk, and NFS makes flock
unreliable); the advisory lock guards every host that shares the database. Its price:
the lock lives as long as the TCP connection does, so a holder behind a network
partition keeps it until the server notices the dead connection (TCP keepalives,
``tcp_keepalives_idle``, ``idle_session_timeout``), and a holder cut off from the
database keeps running while a new instance may start elsewhere: pair it with fenced
writes (lesson 04's lease tokens) when two instances overlapping would do harm.
Session-level advisory locks also do not survive a transaction-pooling proxy such as
PgBouncer in transaction mode: take them on a direct connection.

In production: the same call through your driver, or ``pg_advisory_lock`` helpers in
procrastinate / Django's ``django-pglock``; for Redis, ``SET NX PX`` with a token (and
its caveats); for Kubernetes, a Lease object.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.rows import dict_row

from labkit.backends.postgres.sql import load_statements
from labkit.errors import AlreadyRunning, StoreError
from labkit.redact import redact

SQL = load_statements("backends/postgres/lock.sql")


def holder(conn: psycopg.Connection[Any], name: str) -> dict[str, Any] | None:
    """The session holding ``name``'s advisory lock (pid, application_name, ...), or None."""
    row = conn.cursor(row_factory=dict_row).execute(SQL["holder"], {"name": name}).fetchone()
    return dict(row) if row else None


@contextmanager
def single_instance_pg(
    dsn: str, name: str, application_name: str = "labkit"
) -> Iterator[psycopg.Connection[Any]]:
    """Hold ``name``'s advisory lock for the ``with`` block; ``AlreadyRunning`` if taken.

    Yields the connection that holds the lock: keep it open (and idle) for as long as
    the instance runs; closing it gives the lock back.
    """
    if not name:
        raise ValueError("name the job the lock guards, e.g. 'nightly-billing'")
    try:
        conn = psycopg.connect(dsn, autocommit=True, application_name=application_name)
    except psycopg.OperationalError as exc:
        raise StoreError(
            f"cannot connect to PostgreSQL for lock {name!r}: {redact(str(exc).strip())}"
        ) from None
    try:
        got = conn.execute(SQL["try_lock"], {"name": name}).fetchone()
        if not (got and got[0]):
            who = holder(conn, name)
            held_by = (
                f"server pid {who['pid']} ({who['application_name'] or 'no application name'})"
                if who
                else "a session that just let go (try again)"
            )
            raise AlreadyRunning(
                f"lock {name!r} is held by {held_by} on this database; another instance "
                "is running. Wait for it to finish; if its machine died, the server frees "
                "the lock once that connection is gone."
            )
        try:
            yield conn
        finally:
            if not conn.closed:
                conn.execute(SQL["unlock"], {"name": name})
    finally:
        conn.close()
