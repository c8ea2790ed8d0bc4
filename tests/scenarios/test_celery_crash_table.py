"""Lesson 06's strategy × crash-point table with Celery as the queue, confirmed by real kills.

Each column pauses every strategy's task at the point in its own pool child, SIGKILLs
them together, lets redeliveries run, and reads each verdict from the world. Lesson 14
runs the ``after_effect`` column; this test runs them all.
"""

from __future__ import annotations

import pytest

from labkit.explore import crash_matrix
from labkit.integrations.celery import harness as celery_harness
from labkit.integrations.celery.run import CeleryRun
from labkit.integrations.celery.table import EXPECTED, POINTS, ROWS, crash_column, verdict

pytestmark = [pytest.mark.services, pytest.mark.slow]


def test_verdict_reads_the_world_count():
    assert [verdict(n) for n in (0, 1, 2, 3)] == ["lost", "ok", "duplicate", "duplicate"]


def test_every_cell_of_the_table_on_celery(amqp_url, tmp_path):
    with CeleryRun(amqp_url, tmp_path) as run:
        worker = run.worker("w1", concurrency=len(ROWS))
        found = {point: crash_column(run, worker, point) for point in POINTS}
        lost_lines = worker.log_text().count(celery_harness.LOST_LINE)
    # Every cell was a real kill: one WorkerLostError per task per column.
    assert lost_lines == len(ROWS) * len(POINTS)
    table = {row: {point: found[point][row] for point in POINTS} for row in ROWS}
    assert table == EXPECTED
    assert celery_harness.leftovers(run.config.tag) == []


def test_celery_differs_from_lesson_06_only_where_the_ack_differs():
    """The expected Celery table against lesson 06's simulated one, cell by cell.

    ``after_commit``: lesson 06's store commits result and ack together (ack_late ok),
    Celery's late ack is a separate step (duplicate); lesson 06's ack_first passes
    after_commit before its effect (lost), a Celery task body only after it (ok).
    """
    lesson06 = crash_matrix(points=list(POINTS), seed=6)
    differ = {
        (row, point)
        for row, (_, strategy) in ROWS.items()
        if row != "acks_late alone"
        for point in POINTS
        if lesson06.outcome(strategy, point) != EXPECTED[row][point]
    }
    assert differ == {("ack_late", "after_commit"), ("ack_first", "after_commit")}
