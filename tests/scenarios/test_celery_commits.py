"""The commit watcher: which psycopg calls are boundaries, and where the task made them.

``labkit.integrations.celery.commits`` patches psycopg in the process that imports it,
so each case runs in a fresh interpreter (this test process keeps psycopg untouched)
against the machine's PostgreSQL, with no Celery task running (the task id reads ``-``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from labkit.integrations.celery import commits, points

pytestmark = pytest.mark.services

#: Each case's code, run in a file of its own with ``conn`` open; the boundaries it must
#: log, each with its line in the case's code.
CASES = {
    "a transaction block": (
        "with conn.transaction():\n"
        "    conn.execute('INSERT INTO t VALUES (1)')\n"
        "    conn.execute('INSERT INTO t VALUES (2)')\n",
        [("COMMIT", 1)],  # Python names the `with` line for the block's end
    ),
    "an explicit commit, then a rollback": (
        "conn.execute('INSERT INTO t VALUES (1)')\n"
        "conn.commit()\n"
        "conn.execute('INSERT INTO t VALUES (2)')\n"
        "conn.rollback()\n",
        [("COMMIT", 2)],
    ),
    "a block left by an exception": (
        "try:\n"
        "    with conn.transaction():\n"
        "        conn.execute('INSERT INTO t VALUES (1)')\n"
        "        raise KeyError('boom')\n"
        "except KeyError:\n"
        "    pass\n",
        [],
    ),
    "autocommitted writes, not reads": (
        "conn.autocommit = True\n"
        "conn.execute('SELECT 1')\n"
        "conn.execute('INSERT INTO t VALUES (1)')\n"
        "conn.execute('UPDATE t SET n = 2')\n",
        [("autocommitted INSERT", 3), ("autocommitted UPDATE", 4)],
    ),
    "a nested block commits once, at the outer end": (
        "with conn.transaction():\n"
        "    with conn.transaction():\n"
        "        conn.execute('INSERT INTO t VALUES (1)')\n"
        "    conn.execute('INSERT INTO t VALUES (2)')\n",
        [("COMMIT", 1)],
    ),
}

PROLOGUE = """\
import psycopg
import labkit.integrations.celery.commits
conn = psycopg.connect({dsn!r})
conn.execute("CREATE TEMP TABLE t (n int)")
conn.commit()
"""


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_commit_is_a_boundary_named_by_its_line(
    case: str, postgres_dsn: str, tmp_path: Path
) -> None:
    body, want = CASES[case]
    task = tmp_path / "my_task.py"
    task.write_text(PROLOGUE.format(dsn=postgres_dsn) + textwrap.dedent(body))
    env = {**os.environ, points.ENV: str(tmp_path)}
    subprocess.run([sys.executable, str(task)], env=env, check=True, timeout=60)
    first = len(PROLOGUE.splitlines())  # the prologue's own commit is boundary 1
    made = commits.made(tmp_path)
    got = [(what, where) for what, where in made.get("-", [])]
    assert got[0] == ("COMMIT", f"line {first} of my_task.py")
    assert got[1:] == [(what, f"line {first + n} of my_task.py") for what, n in want]


def test_without_the_folder_nothing_is_watched(postgres_dsn: str, tmp_path: Path) -> None:
    task = tmp_path / "my_task.py"
    task.write_text(
        PROLOGUE.format(dsn=postgres_dsn)
        + "print(getattr(psycopg.Connection.commit, '__wrapped__', None) is None)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != points.ENV}
    out = subprocess.run(
        [sys.executable, str(task)], env=env, check=True, timeout=60, capture_output=True
    )
    assert out.stdout.decode().strip() == "True"
    assert not (tmp_path / commits.LOG).exists()
