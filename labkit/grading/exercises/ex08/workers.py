"""Exercise 8's checks' world: workers on the student's module, a queue, a schema, kills.

``Ex08Run`` starts real ``celery worker`` processes on ``ex08_tasks.py`` (each with its
own str hash salt), publishes charge messages, pauses a task at a point, kills the pool
child or the whole worker, waits for the redelivery, and reads what PostgreSQL holds and
what each run returned (``labkit.integrations.celery.returns``).
"""

from __future__ import annotations

import contextlib
import functools
import random
import shutil
import uuid
from pathlib import Path

from celery import Celery

from labkit.grading.checks import CheckFailed, Namespace
from labkit.grading.exercises.killsweep import hash_salt, scene_seeds
from labkit.grading.stub import stub_error, stub_line
from labkit.integrations.celery import brokers, commits, harness, points, returns
from labkit.integrations.celery.app import LabConfig, charges_for, cleanup, pg, prepare_postgres
from labkit.integrations.celery.run import Kills, all_received, quiet
from labkit.lang import _

#: What a worker imports before the student's module: under labkit grade each worker is
#: forked from an interpreter that imported these once (``ns.spawn(warm=...)``). Not the
#: lab's ``--include`` modules: ``commits`` patches psycopg as it is imported, when the
#: worker's environment asks for it, and a zygote's environment never does.
WARM = (
    "celery.bin.celery",
    "celery.apps.worker",
    "celery.worker",
    "celery.concurrency.prefork",
    "kombu.transport.pyamqp",
    "psycopg",
    harness.__name__,
)
#: Seconds ``settle`` looks again before it believes the workers idle: once every message
#: sent has reached a worker, only a message a task itself published may still be on its
#: way (the broker's count lags by a round trip); while one sent is unaccounted for (a
#: worker that discards it unlogged), as long as the slowest hand-over seen.
SETTLE_LOOK_S = 0.05
UNACCOUNTED_S = 0.3
MODULE = "ex08_tasks"
#: Two machines' time zones, 26 hours apart: at any moment their local dates differ (a
#: POSIX TZ, read without the time zone database: UTC-12 and UTC+14).
WEST = "LKW+12"
EAST = "LKE-14"
TASK = "ex08.charge"
STUB = stub_line(8)


class Ex08Run:
    """One check's world: a queue, a schema, workers on the student's module, the cleanup."""

    def __init__(self, ns: Namespace) -> None:
        source = Path(ns.workdir) / f"{MODULE}.py"
        if not source.exists():
            raise CheckFailed(
                _("{file} in your folder").format(file=f"{MODULE}.py"),
                _("no such file"),
                "run the %%writefile ex08_tasks.py cell (and do not rename it), then check again",
            )
        if STUB in source.read_text(encoding="utf-8"):
            raise stub_error(8)
        # The student's workers and this check reach the same broker and database, by
        # different addresses under labkit grade (the notebook's own, through relays).
        # A Redis too, unchecked: the exercise needs none, but a task that keeps its
        # dedup record there must meet one under labkit grade as it does in check().
        found = ns.services("rabbitmq", "postgres", "redis")
        needed = {name: e.checker for name, e in found.items() if name != "redis"}
        down = brokers.unreachable(needed)
        if down:
            raise CheckFailed(
                "RabbitMQ and PostgreSQL",
                _("not reachable: {services}").format(services=", ".join(down)),
                brokers.HOW_TO_START,
            )
        rabbitmq, postgres = found["rabbitmq"], found["postgres"]
        self.amqp = rabbitmq.checker
        self.ns = ns
        self.folder = Path(ns.workdir) / f".labkit-ex08-{uuid.uuid4().hex[:8]}"
        self.folder.mkdir()
        self.config = LabConfig.new(self.amqp, self.folder, postgres=postgres.checker)
        prepare_postgres(self.config)
        self.env = {
            "EX08_BROKER": rabbitmq.student,
            "EX08_QUEUE": self.config.queue,
            "EX08_DSN": postgres.student,
            "EX08_SCHEMA": self.config.schema,
            points.ENV: str(self.folder.resolve()),
            # libpq reads it: the check can find the worker's sessions in pg_stat_activity.
            "PGAPPNAME": self.config.tag,
        }
        self.procs: list[harness.CeleryWorker] = []
        self.kills = Kills()
        self.held: list[str] = []  # task ids paused by ``hold``
        self.sent: list[str] = []  # every task id published
        self._pauses = 0
        self.app = Celery(f"ex08-check-{self.config.tag}", broker=self.amqp, set_as_current=False)

    def worker(
        self,
        name: str = "w1",
        concurrency: int = 1,
        prefetch: int | None = None,
        tz: str | None = None,
    ) -> harness.CeleryWorker:
        """Start a worker on the student's module; ``prefetch``: its prefetch multiplier;
        ``tz``: the time zone of its machine (a POSIX ``TZ``: ``WEST``, ``EAST``), for its
        Python and its database sessions alike (libpq reads ``PGTZ``)."""
        # Each worker its own str hash salt, as two machines (or yesterday's worker) have:
        # under labkit grade every process would otherwise share the grading run's.
        env = {**self.env, "PYTHONHASHSEED": str(hash_salt(len(self.procs)))}
        if tz is not None:
            env |= {"TZ": tz, "PGTZ": tz}
        proc = harness.start_worker(
            MODULE,
            queue=self.config.queue,
            concurrency=concurrency,
            prefetch_multiplier=prefetch,
            folder=self.folder,
            cwd=self.ns.workdir,
            name=name,
            tag=self.config.tag,
            env=env,
            extra=["--include", f"{points.__name__},{commits.__name__},{returns.__name__}"],
            spawn=functools.partial(self.ns.spawn, warm=WARM),
        )
        self.procs.append(proc)
        try:
            return proc.wait_ready(timeout=60)
        except harness.CeleryNotReady:
            log = proc.log_text()
            if "NotImplementedError: Exercise 8" in log:
                raise stub_error(8) from None
            last = [line for line in log.splitlines() if line.strip()][-1:] or [_("(empty log)")]
            raise CheckFailed(
                _("`celery -A {module} worker` to start").format(module=MODULE),
                _("it stopped: {log_line}").format(log_line=last[0][:200]),
                "run `celery -A ex08_tasks worker` in your folder to see the whole error",
            ) from None

    def send(self, key: str, customer: str | None = "cus_8", amount: int = 800) -> str:
        """Publish one charge message; its task id. A customer of None: a charge the
        database refuses (NOT NULL)."""
        sent = self.app.send_task(TASK, args=[key, customer, amount], queue=self.config.queue)
        self.sent.append(str(sent.id))
        return str(sent.id)

    def hold(self, point: str, key: str) -> int:
        """Send ``key``'s charge, wait until it is paused at ``point``; the child's pid.

        The task counts as killed from here on (``Kills``): ``settle`` waits for the
        broker to give it back, or for the grace to run out.
        """
        self._pauses += 1
        label = f"p{self._pauses}"
        points.set_pause(self.folder, point, label)
        self.send(key)
        try:
            points.wait_reached(self.folder, point, label, timeout=30)
        except TimeoutError:
            self.check_not_stub()
            raise CheckFailed(
                _("the task {task} to start on a worker").format(task=TASK),
                _("it never reached the worker's task start within 30 s"),
                _("keep @app.task(name={task_name}) and the queue from EX08_QUEUE").format(
                    task_name=repr(TASK)
                ),
            ) from None
        pid, task_id = points.paused(self.folder, point, label)
        self.kills.record(task_id, self.procs)
        self.held.append(task_id)
        return pid

    def ran_again(self) -> bool:
        """True when a task this run paused (and killed) started again: it was redelivered."""
        starts = [task for event, task, _pid, _ppid in points.runs(self.folder) if event == "start"]
        return any(starts.count(task) > 1 for task in self.held)

    def kill_children(self, worker: harness.CeleryWorker, pids: list[int]) -> None:
        """SIGKILL these pool children; once the worker has declared their tasks lost,
        start the redelivery grace and lift the pause."""
        worker.kill_children(pids)
        self.kills.start_grace()
        points.clear_pause(self.folder)

    def kill_and_hold_redelivery(
        self, worker: harness.CeleryWorker, child: int, point: str
    ) -> int | None:
        """SIGKILL ``child`` (paused by ``hold``) with a pause at ``point`` planned for
        its redelivery; the redelivery's pid once it waits there, None if it ended
        without getting there, or never got there within 30 s (the pause lifted then)."""
        self._pauses += 1
        label = f"p{self._pauses}"
        task = self.held[-1]
        ends = sum(1 for e, t, *_rest in points.runs(self.folder) if e == "end" and t == task)
        points.set_pause(self.folder, point, label)
        worker.kill_children([child])
        self.kills.start_grace()
        reached = points.marker(self.folder, point, label)

        def reached_or_ended() -> bool:
            runs = points.runs(self.folder)
            return reached.exists() or (
                sum(1 for e, t, *_rest in runs if e == "end" and t == task) > ends
            )

        with contextlib.suppress(TimeoutError):
            harness.wait_until(reached_or_ended, 30, "the redelivery to reach its commit")
        if not reached.exists():
            points.clear_pause(self.folder)
            return None
        pid, task_id = points.paused(self.folder, point, label)
        self.kills.record(task_id, self.procs)
        self.held.append(task_id)
        return pid

    def kill_main(self, worker: harness.CeleryWorker) -> None:
        """SIGKILL the whole worker; RabbitMQ gives back what it had not acknowledged."""
        worker.kill_main()
        self.kills.start_grace()
        points.clear_pause(self.folder)

    def settle(self, timeout: float = 60.0) -> None:
        """Wait for the killed tasks' fate, then until every message sent reached a
        worker, the queue is empty and all are idle (and still are a moment later)."""
        self.kills.wait(self.procs, timeout)

        def idle() -> bool:
            return brokers.amqp_depth(self.amqp, self.config.queue) == 0 and quiet(
                self.folder, self.procs
            )

        def settled() -> bool:
            if not idle():
                return False
            accounted = all_received(self.folder, self.procs, self.sent)
            return _pause(SETTLE_LOOK_S if accounted else UNACCOUNTED_S) and idle()

        harness.wait_until(settled, timeout, "the workers to finish")
        self.check_not_stub()

    def check_not_stub(self) -> None:
        if any("NotImplementedError: Exercise 8" in p.log_text() for p in self.procs):
            raise stub_error(8)

    def charges(self, key: str) -> int:
        return charges_for(self.config, key)

    def rows(self, key: str) -> list[tuple[str, int]]:
        """``(customer, amount)`` of each charge row for ``key``."""
        with pg(self.config) as conn:
            found = conn.execute(
                "SELECT customer, amount FROM charges WHERE key = %s ORDER BY id", (key,)
            ).fetchall()
        return [(str(row["customer"]), int(row["amount"])) for row in found]

    def returned(self) -> dict[str, list[returns.Returned]]:
        """What each task id's runs returned (or raised), in the order they finished."""
        found: dict[str, list[returns.Returned]] = {}
        for run in returns.returned(self.folder):
            found.setdefault(run.task_id, []).append(run)
        return found

    def close(self) -> None:
        for proc in self.procs:
            proc.close()
        self.app.close()  # its pooled broker connection
        cleanup(self.config)
        # Logs, markers and the runs log: the check has read what it needed.
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> Ex08Run:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def scene_randoms(what: str) -> list[random.Random]:
    """The generators a check draws its scenes' ``what`` from: ``check()``'s and, under a
    grading seed, the run's own too (``killsweep.scene_seeds``)."""
    return [random.Random(f"ex08 {what} {seed}") for seed in scene_seeds()]


def _pause(seconds: float) -> bool:
    from labkit.clock import SystemClock

    SystemClock().sleep(seconds)
    return True
