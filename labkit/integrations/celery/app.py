"""The Celery app lesson 14 runs in real workers: the lab's charge, under Celery's settings.

A worker imports this module (``celery -A labkit.integrations.celery.app worker``) and
builds its app from the JSON in ``LABKIT_CELERY`` (``LabConfig.env()``), so each run
has its own queue, Redis key prefix, PostgreSQL schema and world file, and parallel
runs on a shared broker never meet. The notebook builds the same app with
``make_app(config)`` to send tasks by name.

Tasks, each a different set of Celery options around the same work:

==========================  ================================================================
``lab.charge_early``        Celery's defaults: the message is acked just before the task runs
``lab.charge_late``         ``acks_late=True`` alone
``lab.charge_late_reject``  ``acks_late=True`` + ``reject_on_worker_lost=True``
``lab.charge_pg``           the last, with the dedup record in the effect's transaction
``lab.charge_backoff``      ``autoretry_for`` + ``retry_backoff`` (+ ``_max``, ``_jitter``)
``lab.charge_retry_after``  ``self.retry(countdown=...)`` from the API's Retry-After
``lab.serial_step``         one step of the ERP article's serial queue; may retry once
``lab.tick``                the periodic job two ``celery beat`` processes enqueue
``lab.welcome_atomic``      the article's e-mail task: dedup record and send, one transaction
``lab.welcome_reconciled``  the e-mail with lesson 06's reconcile (the outbox relay's task)
``lab.probe``               a marker: once it ran, everything before it in the queue did
``lab.poison``              the poison task: every run kills its own process (an OOM kill)
``lab.poison_limited``      the same, with a delivery counter in the world and ``Reject``
==========================  ================================================================

The ``lab.charge_*`` tasks run a strategy of ``labkit.explore.strategies`` (lesson 06) by name,
so the crash table on Celery compares the very same handlers. Every task writes its
effects to the world (``labkit.world``), which the lab reads to judge.

In production this is your project's own Celery app module (``celery -A proj worker``);
the options each task shows are the ones to choose there, per task or in ``app.conf``.
The run's tag comes from ``uuid4``: it only has to be unique, it is never printed.
"""

from __future__ import annotations

import inspect
import json
import math
import os
import signal
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

from celery import Celery, Task
from celery.beat import ScheduleEntry, Scheduler
from celery.concurrency.asynpool import AsynPool
from celery.concurrency.prefork import TaskPool
from celery.exceptions import Reject
from celery.schedules import schedstate, schedule

from labkit.backends.postgres.sql import load_statements
from labkit.clock import SystemClock
from labkit.errors import TransientError
from labkit.explore.strategies import STRATEGIES
from labkit.integrations.celery import brokers
from labkit.integrations.celery.points import ENV as PAUSE_ENV
from labkit.integrations.celery.points import checkpoint
from labkit.patterns.schedule import slot_key
from labkit.world import World

ENV = "LABKIT_CELERY"
SQL = load_statements("integrations/celery/app.sql", verbatim=("schema",))


@dataclass(frozen=True)
class LabConfig:
    """Where one run's Celery app connects and keeps its files (plain data, JSON-able)."""

    broker: str
    queue: str
    folder: str
    tag: str
    postgres: str | None = None
    transport_options: dict[str, Any] = field(default_factory=dict)
    beat: bool = False
    dead_letter: bool = False
    quick_pool_check: bool = False

    @classmethod
    def new(
        cls,
        broker: str,
        folder: str | Path,
        *,
        postgres: str | None = None,
        transport_options: dict[str, Any] | None = None,
        beat: bool = False,
        dead_letter: bool = False,
        quick_pool_check: bool = False,
    ) -> LabConfig:
        """A config with a fresh tag: its own queue, Redis prefix and schema."""
        tag = f"lab{uuid.uuid4().hex[:10]}"
        options = dict(transport_options or {})
        if broker.startswith("redis"):
            options.setdefault("global_keyprefix", f"{tag}:")
        folder = Path(folder).resolve()
        queue = f"q-{tag}"
        return cls(
            broker, queue, str(folder), tag, postgres, options, beat, dead_letter, quick_pool_check
        )

    @classmethod
    def from_env(cls) -> LabConfig:
        raw = os.environ.get(ENV)
        if not raw:
            return cls("amqp://guest:guest@127.0.0.1:5672//", "lab", ".", "lab")
        return cls(**json.loads(raw))

    def env(self) -> dict[str, str]:
        """The environment a worker or beat of this run needs."""
        return {ENV: json.dumps(asdict(self)), PAUSE_ENV: self.folder}

    @property
    def world_path(self) -> Path:
        return Path(self.folder) / "world.db"

    @property
    def schema(self) -> str:
        return self.tag

    @property
    def dead_letter_queue(self) -> str:
        """RabbitMQ only: the exchange (fanout) and the queue bound to it, one name, where
        the run's queue puts what is rejected without requeue (``dead_letter=True``)."""
        return f"{self.queue}.dead"

    @property
    def redis_prefix(self) -> str:
        return str(self.transport_options.get("global_keyprefix", ""))


# -- PostgreSQL: the idempotent charge and the signups ----------------------------------


@contextmanager
def pg(config: LabConfig) -> Iterator[Any]:
    """A psycopg connection to the run's schema (rows as dicts)."""
    import psycopg
    from psycopg.rows import dict_row

    if not config.postgres:
        raise ValueError("this LabConfig has no postgres URL: pass postgres=... to LabConfig.new")
    with psycopg.connect(
        config.postgres, options=f"-c search_path={config.schema}", row_factory=dict_row
    ) as conn:
        yield conn


def prepare_postgres(config: LabConfig) -> None:
    """Create the run's schema and its tables."""
    from psycopg import sql

    with pg(config) as conn:
        conn.execute(
            sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(config.schema))
        )
        conn.execute(SQL["schema"])


def charges_for(config: LabConfig, key: str) -> int:
    """Charge rows PostgreSQL holds for ``key``."""
    with pg(config) as conn:
        return int(conn.execute(SQL["charges_for"], {"key": key}).fetchone()["n"])


def cleanup(config: LabConfig) -> None:
    """Remove what the run created on the broker and in PostgreSQL."""
    if config.broker.startswith("redis"):
        brokers.redis_cleanup(config.broker, config.redis_prefix)
    else:
        queues = [config.queue, config.dead_letter_queue] if config.dead_letter else [config.queue]
        brokers.amqp_cleanup(config.broker, queues)
    if config.postgres:
        import psycopg
        from psycopg import sql

        with psycopg.connect(config.postgres, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(config.schema))
            )


# -- the periodic job: slots aligned to whole seconds -----------------------------------


class whole_seconds(schedule):  # noqa: N801 - reads like Celery's own ``crontab``
    """Due at every whole second of the clock, so two beats agree on each slot."""

    def __init__(self) -> None:
        super().__init__(run_every=timedelta(seconds=1))

    def is_due(self, last_run_at: Any) -> schedstate:
        now = SystemClock().now()
        due = math.floor(now) > math.floor(last_run_at.timestamp())
        return schedstate(due, max(0.01, math.ceil(now) - now))


class SlotScheduler(Scheduler):
    """A beat scheduler that hands each run its slot (the whole second it fired for)."""

    def apply_async(
        self, entry: ScheduleEntry, producer: Any = None, advance: bool = True, **kwargs: Any
    ) -> Any:
        entry = self.reserve(entry) if advance else entry
        entry.kwargs = {**(entry.kwargs or {}), "slot": float(math.floor(SystemClock().now()))}
        return super().apply_async(entry, producer, advance=False, **kwargs)


# -- the app ------------------------------------------------------------------------------


class _Job:
    """What a lesson-06 handler reads from a job: its key and payload."""

    def __init__(self, key: str, customer: str, amount: int) -> None:
        self.key = key
        self.payload = {"customer": customer, "amount": amount}


class _Ctx:
    """What a lesson-06 handler reads from its context: the world and ``point``."""

    def __init__(self, world: World) -> None:
        self.world = world

    def point(self, name: str) -> None:
        checkpoint(name)


def run_strategy(config: LabConfig, strategy: str, key: str, customer: str, amount: int) -> Any:
    """Run a ``labkit.explore.strategies`` handler in a task, checkpointed as in lesson 06."""
    handler = STRATEGIES[strategy].handler
    own: frozenset[str] = getattr(handler, "fires_points", frozenset())
    with World(config.world_path) as world:
        if "before_effect" not in own:
            checkpoint("before_effect")
        reply = handler(cast(Any, _Job(key, customer, amount)), cast(Any, _Ctx(world)))
        if "after_effect" not in own:
            checkpoint("after_effect")
        if "after_commit" not in own:
            checkpoint("after_commit")
    return reply


#: Deliveries ``lab.poison_limited`` lets die before it rejects its message for good.
POISON_LIMIT = 3


def _killed_by_oom() -> None:
    """Die as the kernel's OOM killer ends a process: SIGKILL."""
    os.kill(os.getpid(), signal.SIGKILL)


class QuickCheckPool(TaskPool):
    """Celery's prefork pool, checking for dead children every 0.2 s instead of every 5 s.

    A child that kills itself is often declared lost only at the pool's next periodic
    check: on this machine a loop of such deliveries ran at about 0.1 s or 5 s per
    delivery, from one run to the next. With checks every 0.2 s the outcome is the same
    and the wait short and steady. ``LabConfig(quick_pool_check=True)``.
    """

    class Pool(AsynPool):
        @property
        def timers(self) -> dict[Any, float]:
            return {self.maintain_pool: 0.2}


def make_app(config: LabConfig) -> Celery:
    """The lab's Celery app for ``config`` (see the module docstring for its tasks)."""
    app = Celery(f"labkit-{config.tag}", set_as_current=False)
    app.conf.update(
        broker_url=config.broker,
        broker_transport_options=config.transport_options,
        broker_connection_retry_on_startup=True,
        task_default_queue=config.queue,
        task_default_exchange=config.queue,
        task_default_routing_key=config.queue,
        task_ignore_result=True,
        # On a broker other people share, the lab's workers must not answer their
        # broadcasts nor leave pidbox queues behind.
        worker_enable_remote_control=False,
        # How long the main process waits for a result a killed child might have sent
        # before it declares WorkerLostError (10 s by default): shortened so lessons wait
        # less; the outcome is the same.
        worker_lost_wait=1.0,
        enable_utc=True,
        timezone="UTC",
    )
    if config.dead_letter:
        from kombu.entity import Exchange, Queue

        # The queue Celery declares (worker and sender alike) carries the argument: a
        # message rejected without requeue goes to this exchange instead of vanishing.
        dead = {"x-dead-letter-exchange": config.dead_letter_queue}
        app.conf.task_queues = [
            Queue(config.queue, Exchange(config.queue), config.queue, queue_arguments=dead)
        ]
    if config.quick_pool_check:
        # ``--pool prefork`` (the harness's) gives way to a configured worker_pool.
        app.conf.worker_pool = f"{__name__}:QuickCheckPool"
    if config.beat:
        app.conf.beat_scheduler = f"{__name__}:SlotScheduler"
        app.conf.beat_schedule = {"nightly": {"task": "lab.tick", "schedule": whole_seconds()}}

    def world() -> World:
        return World(config.world_path)

    def charge(strategy: str, key: str, customer: str, amount: int) -> Any:
        return run_strategy(config, strategy, key, customer, amount)

    app.task(name="lab.charge_early")(charge)
    app.task(name="lab.charge_late", acks_late=True)(charge)
    app.task(name="lab.charge_late_reject", acks_late=True, reject_on_worker_lost=True)(charge)

    @app.task(name="lab.charge_pg", acks_late=True, reject_on_worker_lost=True)
    def charge_pg(key: str, customer: str, amount: int) -> str:
        with pg(config) as conn:
            with conn.transaction():
                if conn.execute(SQL["claim_key"], {"key": key}).fetchone() is None:
                    return "skipped: already processed"
                conn.execute(
                    SQL["add_charge"], {"key": key, "customer": customer, "amount": amount}
                )
                checkpoint("after_effect")
            checkpoint("after_commit")
        return "charged"

    @app.task(
        name="lab.charge_backoff",
        acks_late=True,
        autoretry_for=(TransientError,),
        retry_backoff=1,
        retry_backoff_max=4,
        retry_jitter=False,
        max_retries=3,
    )
    def charge_backoff(key: str, customer: str, amount: int) -> Any:
        with world() as w:
            return w.payments.charge(customer, amount, key=key, idempotency_key=key)

    @app.task(name="lab.charge_retry_after", bind=True, acks_late=True, max_retries=3)
    def charge_retry_after(self: Task, key: str, customer: str, amount: int) -> Any:
        with world() as w:
            try:
                return w.payments.charge(customer, amount, key=key, idempotency_key=key)
            except TransientError as exc:
                if exc.retry_after is None:
                    raise
                raise self.retry(exc=exc, countdown=exc.retry_after) from None

    @app.task(name="lab.serial_step", bind=True, acks_late=True, max_retries=3)
    def serial_step(self: Task, name: str, fail_first: bool) -> None:
        if fail_first and self.request.retries == 0:
            raise self.retry(countdown=2)
        with world() as w:
            w.webhook.post("erp", {"step": name}, key=name)

    @app.task(name="lab.tick", acks_late=True)
    def tick(slot: float) -> str:
        key = slot_key("nightly", slot)
        with world() as w:
            w.webhook.post("deliveries", {"slot": slot}, key=key)  # every delivery, deduped or not
            with w.ledger.transaction() as tx:
                if tx.status(key) == "done":
                    return "skipped: slot already ran"
                tx.post("nightly-report", 1, key=key)
                tx.mark(key, "done")
        return "ran"

    @app.task(name="lab.welcome_atomic", acks_late=True, reject_on_worker_lost=True)
    def welcome_atomic(email: str, event_id: str) -> str:
        # The Celery-in-production article's fix: dedup record and send in one
        # transaction. The transaction covers the record, not the e-mail.
        with pg(config) as conn, conn.transaction(), world() as w:
            if conn.execute(SQL["claim_key"], {"key": event_id}).fetchone() is None:
                return "skipped: already processed"
            w.mail.send(email, "Welcome!", key=event_id)
            checkpoint("after_effect")
        return "sent"

    @app.task(name="lab.welcome_reconciled", acks_late=True, reject_on_worker_lost=True)
    def welcome_reconciled(email: str, event_id: str) -> str:
        # Lesson 06's reconcile: "sending" is committed before the send; a rerun that
        # finds it asks the provider (by the key the message was tagged with) first.
        with world() as w:
            state = w.ledger.status(event_id)
            if state == "done":
                return "skipped: already sent"
            if state == "sending" and w.mail.find(event_id):
                w.ledger.mark(event_id, "done")
                return "reconciled: the provider has it"
            w.ledger.mark(event_id, "sending")
            w.mail.send(email, "Welcome!", key=event_id)
            checkpoint("after_effect")
            w.ledger.mark(event_id, "done")
        return "sent"

    @app.task(name="lab.probe")
    def probe(key: str) -> None:
        with world() as w:
            w.webhook.post("probe", {}, key=key)

    @app.task(name="lab.poison", bind=True, acks_late=True, reject_on_worker_lost=True)
    def poison(self: Task) -> None:
        with world() as w:
            w.webhook.post("deliveries", {}, key=self.request.id)
        _killed_by_oom()

    @app.task(name="lab.poison_limited", bind=True, acks_late=True, reject_on_worker_lost=True)
    def poison_limited(self: Task, limit: int = POISON_LIMIT) -> None:
        # The count lives outside the message: a classic queue redelivers the very same
        # message, with nothing in it that says how often it came before.
        with world() as w:
            delivery = w.count(self.request.id) + 1
            w.webhook.post("deliveries", {"delivery": delivery}, key=self.request.id)
        if delivery > limit:
            raise Reject(f"its process died in each of {limit} deliveries", requeue=False)
        _killed_by_oom()

    return app


def task_source(strategy: str = "ack_late") -> str:
    """The source of the lab's app (settings and tasks) and of the charge its tasks run.

    ``lab.charge_*`` run ``run_strategy``, which calls the lesson-06 handler ``strategy``
    (the lesson passes ``ack_late``: the plain charge).
    """
    parts: list[Callable[..., Any]] = [make_app, run_strategy, STRATEGIES[strategy].handler]
    return "\n\n".join(inspect.getsource(part) for part in parts)


#: What ``celery -A labkit.integrations.celery.app worker`` loads.
app = make_app(LabConfig.from_env())
