"""A poison task under ``acks_late`` + ``reject_on_worker_lost``, and the counter that ends it.

Real workers on RabbitMQ: ``lab.poison`` SIGKILLs its own pool process on every run, so
the worker requeues it each time (Celery's warning: "message loops"); ``lab.poison_limited``
counts its deliveries in the world and, past ``POISON_LIMIT``, raises
``Reject(requeue=False)``, which RabbitMQ dead-letters to the run's own queue.
"""

from __future__ import annotations

import pytest
from amqp.exceptions import NotFound

from labkit.integrations.celery import harness as celery_harness
from labkit.integrations.celery.app import POISON_LIMIT
from labkit.integrations.celery.run import CeleryRun

pytestmark = [pytest.mark.services, pytest.mark.slow]


def test_poison_task_under_reject_on_worker_lost_is_redelivered_until_stopped(amqp_url, tmp_path):
    with CeleryRun(amqp_url, tmp_path, quick_pool_check=True) as run:
        worker = run.worker("w1")
        run.send("lab.poison", task_id="poison-1")
        run.wait_effects("poison-1", 5, timeout=30)
        assert worker.log_text().count(celery_harness.LOST_LINE) >= 4, (
            "the deliveries were not each ended by a lost pool process"
        )
        assert worker.alive  # the main process survives every kill and takes it again
        worker.kill_main()
        run.wait_depth(1)  # still there for the next worker: the loop has no end of its own
    assert celery_harness.leftovers(run.config.tag) == []


def test_delivery_counter_rejects_the_poison_task_into_the_dead_letter_queue(amqp_url, tmp_path):
    with CeleryRun(amqp_url, tmp_path, dead_letter=True, quick_pool_check=True) as run:
        worker = run.worker("w1")
        run.send("lab.poison_limited", task_id="poison-2")
        celery_harness.wait_until(lambda: run.dead_letters() == 1, 30, "the dead letter")
        run.settle()
        assert run.count("poison-2") == POISON_LIMIT + 1
        assert worker.log_text().count(celery_harness.LOST_LINE) == POISON_LIMIT, (
            "the poison task did not kill its process in each delivery before the limit"
        )
        assert (run.depth(), run.dead_letters()) == (0, 1)
        assert worker.alive
    assert celery_harness.leftovers(run.config.tag) == []
    # close() deleted the dead-letter queue and exchange with the run's own queue.
    with pytest.raises(NotFound):
        run.dead_letters()
