"""Stop a real Celery task right after each COMMIT it makes, so the lab can kill it there.

``points`` stops a task at its start and its end. A task that splits its work over two
transactions breaks only when it dies *between* them, a moment no outside signal marks.
So this module, loaded into the worker (``celery worker --include
labkit.integrations.celery.commits``), watches psycopg in the worker's pool children:

- each COMMIT that ends a transaction (``conn.commit()``, leaving ``with
  conn.transaction():``, leaving ``with psycopg.connect(...) as conn:``, an ``execute``
  of ``COMMIT``) and each write on an autocommit connection (it commits by itself) is a
  boundary, counted from 1 in each task run;
- each boundary is logged (``commits.log``: the task id, its number, what it was and
  the line of the task's own file that made it), then reached as the point
  ``commit_N`` (``points.checkpoint``): under a plan naming it, the task stops there,
  the COMMIT already done, and waits for the lab's ``kill -9``.

A rollback is not a boundary: nothing of it is left to lose. The hooks only watch; they
change nothing the task's code sees, and without ``LABKIT_PAUSE_DIR`` they do nothing.
In production nobody patches psycopg: a crash between two commits is found by design
review and tests like this one (or avoided with one transaction, as the lesson says).
"""

from __future__ import annotations

import functools
import os
import sys
import sysconfig
from pathlib import Path
from typing import Any

import psycopg
from celery.signals import task_prerun
from psycopg.pq import TransactionStatus

from labkit.integrations.celery import points

LOG = "commits.log"
#: Statements that change rows: on an autocommit connection each commits by itself.
WRITES = ("INSERT", "UPDATE", "DELETE", "MERGE", "COPY")
#: Files that are not the task's own: labkit's, the standard library's, installed packages'.
_NOT_THE_TASK = (
    str(Path(__file__).resolve().parents[2]),
    sysconfig.get_paths()["stdlib"],
    sysconfig.get_paths()["purelib"],
    sysconfig.get_paths()["platlib"],
)
_count = [0]


def point(n: int) -> str:
    """The point reached right after the task run's ``n``-th COMMIT."""
    return f"commit_{n}"


def made(folder: str | Path) -> dict[str, list[tuple[str, str]]]:
    """Each task run's boundaries, in order: ``{task id: [(what, where), ...]}``.

    A task id run twice (a redelivery) lists the boundaries of its last run.
    """
    path = Path(folder) / LOG
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    runs: dict[str, list[tuple[str, str]]] = {}
    for line in text.splitlines():
        task_id, n, what, where = line.split("\t")
        if n == "1":
            runs[task_id] = []
        runs.setdefault(task_id, []).append((what, where))
    return runs


def _where() -> str:
    """The line of the task's code that made the current call, as the student sees it."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if not (name.startswith(_NOT_THE_TASK) or name.startswith("<")):
            return f"line {frame.f_lineno} of {Path(name).name}"
        frame = frame.f_back  # type: ignore[assignment]
    return "a line outside your file"


def _boundary(what: str) -> None:
    folder = os.environ.get(points.ENV)
    if not folder:
        return
    _count[0] += 1
    from celery import current_task

    task_id = getattr(getattr(current_task, "request", None), "id", None) or "-"
    line = f"{task_id}\t{_count[0]}\t{what}\t{_where()}\n"
    with open(Path(folder) / LOG, "a", encoding="utf-8") as fh:  # one short O_APPEND write
        fh.write(line)
    points.checkpoint(point(_count[0]))


def _status(conn: Any) -> TransactionStatus:
    return TransactionStatus(conn.info.transaction_status)


def _after_statement(cursor: Any, before: TransactionStatus) -> None:
    conn = cursor.connection
    message = (cursor.statusmessage or "").split(" ")[0].upper()
    if _status(conn) != TransactionStatus.IDLE:
        return
    if message == "COMMIT" and before != TransactionStatus.IDLE:
        _boundary("COMMIT")
    elif message in WRITES and before == TransactionStatus.IDLE and conn.autocommit:
        _boundary(f"autocommitted {message}")


def _watch_statements(original: Any) -> Any:
    @functools.wraps(original)
    def watched(self: Any, *args: Any, **kwargs: Any) -> Any:
        before = _status(self.connection)
        result = original(self, *args, **kwargs)
        _after_statement(self, before)
        return result

    return watched


def _watch_commit(original: Any) -> Any:
    @functools.wraps(original)
    def watched(self: Any) -> None:
        before = _status(self)
        original(self)
        if before != TransactionStatus.IDLE:
            _boundary("COMMIT")

    return watched


def _watch_block(original: Any) -> Any:
    @functools.wraps(original)
    def watched(self: Any, exc_type: Any, *rest: Any) -> Any:
        before = _status(self.connection)
        result = original(self, exc_type, *rest)
        ended = before != TransactionStatus.IDLE and _status(self.connection) == (
            TransactionStatus.IDLE
        )
        if exc_type is None and ended:
            _boundary("COMMIT")
        return result

    return watched


def install() -> None:
    """Watch psycopg's commits in this process (once)."""
    if getattr(psycopg.Connection.commit, "__wrapped__", None):
        return
    psycopg.Cursor.execute = _watch_statements(psycopg.Cursor.execute)  # type: ignore[method-assign]
    psycopg.Cursor.executemany = _watch_statements(psycopg.Cursor.executemany)  # type: ignore[method-assign]
    psycopg.Connection.commit = _watch_commit(psycopg.Connection.commit)  # type: ignore[method-assign]
    psycopg.Transaction.__exit__ = _watch_block(psycopg.Transaction.__exit__)  # type: ignore[method-assign]


@task_prerun.connect
def _new_run(**_: Any) -> None:
    _count[0] = 0


if os.environ.get(points.ENV):
    install()
