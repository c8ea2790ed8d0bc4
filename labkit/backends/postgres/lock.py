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

import os
import subprocess
import sys
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


# The child takes the lock, says so on stdout, and holds it until it is killed or its
# stdin closes (so a parent that dies does not leave a holder behind).
_HOLDER = """
import os, sys
from labkit.backends.postgres.lock import single_instance_pg
with single_instance_pg(os.environ["LABKIT_LOCK_DSN"], sys.argv[1], sys.argv[2]) as conn:
    print("held", conn.info.backend_pid, flush=True)
    sys.stdin.read()
"""


def hold_in_subprocess(
    dsn: str, name: str, application_name: str = "labkit-holder"
) -> tuple[subprocess.Popen[str], int]:
    """Start a Python process holding ``name``'s lock; ``(process, its server pid)``.

    Returns once the child holds the lock. The caller must stop the process (kill it,
    or close its stdin for a clean exit) and ``wait()`` for it. The DSN travels in the
    child's environment, not its command line, so ``ps`` does not show it.
    """
    env = {**os.environ, "LABKIT_LOCK_DSN": dsn}
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, name, application_name],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline().split()
    if first[:1] != ["held"]:
        proc.kill()
        _out, err = proc.communicate()
        raise StoreError(
            f"the lock holder process for {name!r} did not take the lock: "
            f"{redact(err.strip()) or 'no output'}"
        )
    return proc, int(first[1])
