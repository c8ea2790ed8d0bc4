"""Lesson 06's strategy × crash-point table, with Celery as the queue and real kills.

Each row is a strategy of ``labkit.explore.strategies`` run by a Celery task with the ack
settings that strategy means on Celery; each cell pauses the task at a point, SIGKILLs
the worker's pool child there, lets the redelivery (if any) run, and judges from the
world how many effects the key has: 0 ``lost``, 1 ``ok``, 2+ ``duplicate``.

Points: ``before_effect`` (the task runs, nothing charged), ``after_effect`` (charged,
nothing recorded), ``after_commit`` (the task's own records committed, the late ack
not sent yet).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: row name -> (Celery task, lesson-06 strategy)
ROWS: dict[str, tuple[str, str]] = {
    "ack_first": ("lab.charge_early", "ack_first"),
    "acks_late alone": ("lab.charge_late", "ack_late"),
    "ack_late": ("lab.charge_late_reject", "ack_late"),
    "check_then_act": ("lab.charge_late_reject", "check_then_act"),
    "same_transaction": ("lab.charge_late_reject", "same_transaction"),
    "idempotency_key": ("lab.charge_late_reject", "idempotency_key"),
    "reconcile": ("lab.charge_late_reject", "reconcile"),
}
POINTS = ("before_effect", "after_effect", "after_commit")

#: What each cell must read, and why where Celery differs from lesson 06.
EXPECTED: dict[str, dict[str, str]] = {
    "ack_first": {"before_effect": "lost", "after_effect": "ok", "after_commit": "ok"},
    # Celery-only row: a lost pool child acks the message (WorkerLostError), so acks_late
    # without reject_on_worker_lost behaves like ack_first.
    "acks_late alone": {"before_effect": "lost", "after_effect": "ok", "after_commit": "ok"},
    "ack_late": {"before_effect": "ok", "after_effect": "duplicate", "after_commit": "duplicate"},
    "check_then_act": {"before_effect": "ok", "after_effect": "duplicate", "after_commit": "ok"},
    "same_transaction": {"before_effect": "ok", "after_effect": "ok", "after_commit": "ok"},
    "idempotency_key": {"before_effect": "ok", "after_effect": "ok", "after_commit": "ok"},
    "reconcile": {"before_effect": "ok", "after_effect": "ok", "after_commit": "ok"},
}


def verdict(effects: int) -> str:
    """The world's verdict on one key: 0 lost, 1 ok, more duplicate."""
    return "lost" if effects == 0 else "ok" if effects == 1 else "duplicate"


def _key(row: str, point: str) -> str:
    return f"table:{row}:{point}"


def crash_column(
    run: Any, worker: Any, point: str, rows: Sequence[str] = tuple(ROWS)
) -> dict[str, str]:
    """Each row's task paused at ``point`` in its own pool child, all killed together.

    ``run`` is a ``CeleryRun``; ``worker`` one of its prefork workers with at least
    ``len(rows)`` children. Its main process survives and forks new children, which run
    the redeliveries; returns ``{row: verdict}`` read from the world.
    """
    # same_transaction pauses inside its ledger transaction, holding the world's write
    # lock: it goes last, once every other task is already paused past its writes.
    for row in sorted(rows, key=lambda r: ROWS[r][1] == "same_transaction"):
        task, strategy = ROWS[row]
        run.hold(point, task, strategy, _key(row, point), "cus_1", 100)
    run.kill_held(worker)
    run.settle()
    verdicts = {}
    for row in rows:
        service = "ledger" if ROWS[row][1] == "same_transaction" else "payments"
        verdicts[row] = verdict(len(run.effects(_key(row, point), service)))
    return verdicts
