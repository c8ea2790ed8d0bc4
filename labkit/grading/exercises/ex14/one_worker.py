"""Exercise 14's long-lived worker: several jobs in turn on ONE connection and one world.

A worker keeps its connection and hands every job the same object, so a transaction a
failed job leaves open, or state kept per connection, shows in the next job.
"""

from __future__ import annotations

import sqlite3
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

from labkit.grading.exercises.common import fresh_state, need, outcome
from labkit.grading.exercises.ex14.faults import (
    ArmedAtTheCharge,
    ChargeTakenByACopy,
    Down,
    InterruptedInATransaction,
    LedgerDown,
)
from labkit.grading.exercises.ex14.seen import Moments, Seen, job_once, open_world
from labkit.grading.exercises.labdb import connect, rows_of
from labkit.grading.exercises.tracing import Watched, with_what_it_left


def run_on_one_worker(
    values: MutableMapping[str, Any], folder: str, orders: list[dict[str, Any]], fault: str
) -> dict[str, Any]:
    """``run_order`` of each of ``orders`` (policy version 1) in turn on ONE connection
    and one world, as a long-lived worker runs its jobs, the first one made to fail:

    - ``"taken"``: its charge declined (the check's scene scripts the payment API) after a
      second copy of its job checkpointed that charge (``ChargeTakenByACopy``);
    - ``"release_down"``: its charge declined, and the ledger down (a ``TransientError``,
      503) when its stock is released, the second ledger transaction;
    - ``"interrupted"``: a Ctrl-C right after the first write it sends inside a
      transaction once its charge was called (``InterruptedInATransaction``,
      ``ArmedAtTheCharge``): the declined charge's;
    - ``"redelivered"``: every order already run to its end (the first one declined, its
      stock released), each on a connection of its own, before the worker gets them all
      again: a redelivery of a failed job, then of a done one.

    Each outcome (``{"interrupted": True}`` for the Ctrl-C) says under ``left`` what the
    call changed of the connection (``tracing.left_as_given``). Then, the worker still
    alive, another connection reads the last order's job and checkpoints and tries to
    take the write lock (``seen``); the worker's connection is closed (rolled back)
    only after. ``fired``: the fault happened.
    """
    path = Path(folder) / "steps.db"
    conn, world = connect(path), open_world(Path(folder) / "world.db")
    kept = InterruptedInATransaction(conn) if fault == "interrupted" else Watched(conn)
    moments: Moments = Moments()
    if isinstance(kept, InterruptedInATransaction):
        moments = ArmedAtTheCharge(kept)
    elif fault == "taken":
        moments = ChargeTakenByACopy(path, orders[0]["id"])
    elif fault == "release_down":
        moments = LedgerDown(2)
    runs, ended = [], []
    try:
        with fresh_state(values):
            if fault == "redelivered":
                ended = [
                    outcome(job_once, values, Path(folder), order, 1, Moments()) for order in orders
                ]
            for n, order in enumerate(orders):
                # The same connection object for every job, as a worker hands it.
                seen = moments if n == 0 else Moments()
                try:
                    got = outcome(
                        need(values, "run_order"),
                        kept,
                        Seen(world, seen),
                        dict(order),
                        policy_version=1,
                    )
                except KeyboardInterrupt:
                    if n != 0 or not kept.crashed:
                        raise  # a real Ctrl-C of the grader
                    got = {"interrupted": True}
                if isinstance(kept, InterruptedInATransaction):
                    kept.armed = False
                runs.append(with_what_it_left(got, conn))
        seen_by_another = _seen_by_another(path, orders[-1]["id"])
    finally:
        conn.close()
        world.close()
    fired = {
        "taken": getattr(moments, "fired", False),
        "release_down": getattr(moments, "transactions", 0) >= 2,
        "interrupted": kept.crashed,
        "redelivered": bool(ended) and all("returned" in e for e in ended),
    }[fault]
    return {"runs": runs, "seen": seen_by_another, "fired": fired}


def _seen_by_another(path: Path, order_id: int) -> dict[str, Any]:
    """What another worker sees of ``order_id``'s job while this one lives on: its state,
    its checkpoints, and ``write``: ``"ok"``, or why it could not take the write lock."""
    other = connect(path, timeout=0.2)
    try:
        jobs = {r["order_id"]: r["state"] for r in rows_of(other, "all_step_jobs")}
        steps = [r["step"] for r in rows_of(other, "all_job_steps") if r["order_id"] == order_id]
        seen: dict[str, Any] = {"state": jobs.get(order_id), "steps": steps, "write": "ok"}
        try:
            other.execute("BEGIN IMMEDIATE")
            other.execute("ROLLBACK")
        except sqlite3.OperationalError as exc:
            seen["write"] = str(exc)
        return seen
    except sqlite3.OperationalError as exc:
        return {"state": None, "steps": [], "write": str(exc)}
    finally:
        other.close()


def run_again_on_one_worker(
    values: MutableMapping[str, Any],
    folder: str,
    order: dict[str, Any],
    version: int,
    times: int,
    down: str | None = None,
    then: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``run_order`` of ONE order ``times`` times in turn on ONE connection and one world,
    as a long-lived worker runs a job its queue delivers again (a retry, a redelivery):
    the same connection object every time. ``down``: during the first run, every call to
    that effect fails with a 503 (``Down``), so the first run raises and the next one
    resumes. ``then``: another order the worker runs next, on the same connection. Each
    outcome (``then``'s last), and ``fired``."""
    path = Path(folder) / "steps.db"
    conn, world = connect(path), open_world(Path(folder) / "world.db")
    first = Down(down) if down else Moments()
    runs = []
    try:
        with fresh_state(values):
            for n, each in enumerate([order] * times + ([then] if then else [])):
                runs.append(
                    outcome(
                        need(values, "run_order"),
                        conn,
                        Seen(world, first if n == 0 else Moments()),
                        dict(each),
                        policy_version=version,
                    )
                )
    finally:
        conn.close()
        world.close()
    return {"runs": runs, "fired": getattr(first, "fired", True)}
