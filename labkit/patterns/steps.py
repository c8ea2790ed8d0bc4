"""Checkpoints per step: a multi-step job that crashes resumes after its last finished step.

An order job reserves stock, charges the card and sends an e-mail. Run as one block, a
crash after the charge and a re-run from the top reserve and charge a second time. Here
each step's result is checkpointed in a ``job_steps`` table of the job's own database,
in its own transaction, once the step's effect is done::

    steps.install(conn)
    run = steps.StepRun(conn, "order:42", clock, policy_version="v1")
    stock = run.step("reserve", reserve, undo=release)
    charge = run.step("charge", lambda: charge_card(stock))
    run.step("email", send_receipt)

``step`` returns the stored result of a step that already has its checkpoint, without
calling it, so a resumed job skips what it finished. But the effect and the checkpoint
are two writes to two systems: a crash between them (the point
``after_step_effect.<step>``) leaves an effect done and no checkpoint, and the resumed
job runs that step again. Checkpoints make a job at-least-once per step, never
exactly-once: each step's effect still needs its own idempotency key (the world's
``idempotency_key=``, or a ledger write guarded by its key) so its repeat is harmless.

When a step fails for good (a ``PermanentError``), ``compensate`` runs the undo actions
of the finished steps in reverse order, each checkpointed ``compensated`` in its turn, so
a crash halfway through compensating resumes it too (undo actions need keys as well). A
step with no undo (an e-mail cannot be unsent) is left ``done``.

The job also keeps the policy version it started under (``step_jobs``). A job resumed
after a deploy reads that version back and runs the rest of *its* policy, not the one
deployed since: ``run.policy_version`` is the stored one, ``started_with`` reads it.

In production this is a workflow engine's job. Temporal records each activity's result
in the workflow's event history and, on recovery, replays the workflow code against it
without running finished activities again; its activities are retried at least once,
so Temporal asks for idempotent activities, and versions workflow code with
``workflow.patched()`` (Python SDK) so running workflows keep their old path. AWS Step
Functions keeps each state's output and builds compensation from ``Catch`` transitions
(the saga pattern). Celery's ``chain`` sends each link as its own message once the
previous one succeeded, so a crash re-runs the current link only.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from labkit import dbfile, queries
from labkit.clock import Clock
from labkit.errors import LabkitError
from labkit.faults import FaultPlan
from labkit.keys import check_payload

SQL = queries.load("patterns/steps.sql")


def after_effect(step: str) -> str:
    """The point between a step's effect and its checkpoint: ``after_step_effect.<step>``."""
    return f"after_step_effect.{step}"


def after_step(step: str) -> str:
    """The point after a step's checkpoint committed, before the next step starts."""
    return f"after_step.{step}"


def after_undo(step: str) -> str:
    """The point between a step's undo action and its ``compensated`` checkpoint."""
    return f"after_undo_effect.{step}"


class JobCompensated(LabkitError):
    """This job was compensated (its steps undone); it does not run again."""


def connect(path: str | Path) -> sqlite3.Connection:
    """A connection the step helpers can drive: autocommit mode, WAL, rows by name."""
    return dbfile.connect(path, check_same_thread=True)


def _immediate(conn: sqlite3.Connection) -> AbstractContextManager[Any]:
    return dbfile.own_transaction(conn, "each checkpoint commits on its own")


def install(conn: sqlite3.Connection) -> None:
    """Create ``step_jobs`` and ``job_steps`` in the job's database (safe to call every time)."""
    with _immediate(conn):
        dbfile.run_script(conn, SQL["steps_schema"])


def started_with(conn: sqlite3.Connection, job_key: str) -> str | None:
    """The policy version ``job_key`` started under, or None if it never started."""
    row = conn.execute(SQL["job_version"], {"job_key": job_key}).fetchone()
    return None if row is None else str(row["policy_version"])


def rows(conn: sqlite3.Connection, job_key: str | None = None) -> list[dict[str, Any]]:
    """The checkpoints of one job (or of every job), in the order the steps finished."""
    if job_key is None:
        found = conn.execute(SQL["steps_all"])
    else:
        found = conn.execute(SQL["steps_of_job"], {"job_key": job_key})
    return [{**dict(r), "result": json.loads(r["result"])} for r in found]


class StepRun:
    """One run of a multi-step job: ``step`` skips what is checkpointed, ``compensate`` undoes.

    The first run of ``job_key`` records ``policy_version``; a later run (a resume) keeps
    the recorded one in ``self.policy_version`` whatever it was given, and the version
    it was given in ``self.deployed``. ``faults`` is hit at ``after_step_effect.<step>``,
    ``after_step.<step>`` and ``after_undo_effect.<step>`` with the job key.
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        job_key: str,
        clock: Clock,
        faults: FaultPlan | None = None,
        policy_version: str = "v1",
    ) -> None:
        if not job_key:
            raise ValueError("a StepRun needs the job's stable key, e.g. 'order:42'")
        self.conn = conn
        self.job_key = job_key
        self.clock = clock
        self.faults = faults
        self.deployed = policy_version
        self._undo: dict[str, Callable[[Any], Any]] = {}
        params = {"job_key": job_key, "policy_version": policy_version, "now": clock.now()}
        with _immediate(conn):
            conn.execute(SQL["job_start"], params)
        self.policy_version = started_with(conn, job_key) or policy_version

    @property
    def resumed_old_policy(self) -> bool:
        """True when this job started under another version than the one deployed now."""
        return self.policy_version != self.deployed

    def _hit(self, point: str) -> None:
        if self.faults is not None:
            self.faults.hit(point, key=self.job_key, clock=self.clock)

    def step(
        self, name: str, fn: Callable[[], Any], undo: Callable[[Any], Any] | None = None
    ) -> Any:
        """Run step ``name`` once per job: its stored result if checkpointed, else ``fn()``.

        The checkpoint commits in its own transaction after ``fn`` returns; an exception
        from ``fn`` checkpoints nothing. ``undo(result)`` is what ``compensate`` calls
        to reverse this step; it is registered on skipped steps too, so a resumed job
        can still compensate what an earlier run did.
        """
        if undo is not None:
            self._undo[name] = undo
        row = self.conn.execute(SQL["step_get"], {"job_key": self.job_key, "step": name}).fetchone()
        if row is not None:
            if row["state"] == "compensated":
                raise JobCompensated(
                    f"job {self.job_key!r} was compensated (step {name!r} undone); it does "
                    "not run again: enqueue a new job under a new key if the order is retried"
                )
            return json.loads(row["result"])
        result = fn()
        text = check_payload(result)
        self._hit(after_effect(name))
        params = {
            "job_key": self.job_key,
            "step": name,
            "result": text,
            "policy_version": self.policy_version,
            "now": self.clock.now(),
        }
        with _immediate(self.conn):
            self.conn.execute(SQL["step_done"], params)
        self._hit(after_step(name))
        return result

    def done(self) -> list[str]:
        """The steps checkpointed ``done``, in the order they finished."""
        return [r["step"] for r in rows(self.conn, self.job_key) if r["state"] == "done"]

    def compensate(self, undo: dict[str, Callable[[Any], Any]] | None = None) -> list[str]:
        """Undo the finished steps, last first, each checkpointed ``compensated``; their names.

        ``undo`` adds or replaces undo actions by step name (besides those given to
        ``step``). A finished step without one is left ``done``. Steps already
        compensated are skipped, so a compensation that crashed resumes where it stopped.
        """
        actions = {**self._undo, **(undo or {})}
        undone: list[str] = []
        for row in reversed(rows(self.conn, self.job_key)):
            name = row["step"]
            if row["state"] != "done" or name not in actions:
                continue
            actions[name](row["result"])
            self._hit(after_undo(name))
            params = {"job_key": self.job_key, "step": name, "now": self.clock.now()}
            with _immediate(self.conn):
                self.conn.execute(SQL["step_compensated"], params)
            undone.append(name)
        return undone
