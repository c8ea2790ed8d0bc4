"""Exercise 8: a Celery task module that charges once, whatever is killed.

The student's ``%%writefile ex08_tasks.py`` cell leaves the module in their folder
(``ns.workdir``). Each check starts real ``celery worker`` processes on it through
``ns.spawn`` (RabbitMQ, a fresh queue; PostgreSQL, a fresh schema with ``charges`` and
``processed``; under ``labkit grade`` both are the notebook's own, ``ns.services``),
pauses the task at a point with ``labkit.integrations.celery.points`` (loaded into the
worker with ``--include``; ``commits`` adds a point right after each COMMIT), SIGKILLs
the pool child or the whole worker, lets the broker redeliver, and counts the
``charges`` rows itself. The student's code is never imported here: it runs only in
the workers.
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

from celery import Celery

from labkit.grading.checks import CheckFailed, Checks, Namespace, expect
from labkit.grading.stub import stub_error, stub_line
from labkit.integrations.celery import brokers, commits, harness, points
from labkit.integrations.celery.app import LabConfig, charges_for, cleanup, prepare_postgres
from labkit.integrations.celery.run import Kills, quiet
from labkit.lang import _

CHECKS = Checks("ex08", "a Celery task that charges once, whatever is killed", network=True)

MODULE = "ex08_tasks"
TASK = "ex08.charge"
STUB = stub_line(8)
#: Seconds one check may take: it starts workers and waits for Celery to notice kills.
TIMEOUT = 120.0


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
        found = ns.services("rabbitmq", "postgres")
        down = brokers.unreachable({name: e.checker for name, e in found.items()})
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
        self._pauses = 0
        self.app = Celery(f"ex08-check-{self.config.tag}", broker=self.amqp, set_as_current=False)

    def worker(self, name: str = "w1", concurrency: int = 1) -> harness.CeleryWorker:
        proc = harness.start_worker(
            MODULE,
            queue=self.config.queue,
            concurrency=concurrency,
            folder=self.folder,
            cwd=self.ns.workdir,
            name=name,
            tag=self.config.tag,
            env=self.env,
            extra=["--include", f"{points.__name__},{commits.__name__}"],
            spawn=self.ns.spawn,
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

    def send(self, key: str, customer: str = "cus_8", amount: int = 800) -> None:
        self.app.send_task(TASK, args=[key, customer, amount], queue=self.config.queue)

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

    def kill_main(self, worker: harness.CeleryWorker) -> None:
        """SIGKILL the whole worker; RabbitMQ gives back what it had not acknowledged."""
        worker.kill_main()
        self.kills.start_grace()
        points.clear_pause(self.folder)

    def settle(self, timeout: float = 60.0) -> None:
        """Wait for the killed tasks' fate, then until the queue is empty and all idle."""
        self.kills.wait(self.procs, timeout)

        def idle() -> bool:
            return brokers.amqp_depth(self.amqp, self.config.queue) == 0 and quiet(
                self.folder, self.procs
            )

        harness.wait_until(
            lambda: idle() and _pause(0.3) and idle(), timeout, "the workers to finish"
        )
        self.check_not_stub()

    def check_not_stub(self) -> None:
        if any("NotImplementedError: Exercise 8" in p.log_text() for p in self.procs):
            raise stub_error(8)

    def charges(self, key: str) -> int:
        return charges_for(self.config, key)

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


def _pause(seconds: float) -> bool:
    from labkit.clock import SystemClock

    SystemClock().sleep(seconds)
    return True


#: The hint for "0 rows" when the runs log shows the killed task ran again: the ack
#: settings did their job, and the task itself threw the redelivery away. A hint is
#: looked up in the catalog again where the report shows it (``scoring.shown``).
SKIPPED_REDELIVERY = _(
    "the message came back and your task ran again, but charged nothing: the redelivery "
    "must charge when the first run's charge never committed. Is the key recorded in "
    "processed before the charge commits (or in another transaction), or does the task "
    "return early when it sees a redelivered message?"
)


def _charged_once(run: Ex08Run, key: str, when: str, hint: str) -> None:
    n = run.charges(key)
    if n == 0 and run.ran_again():
        hint = SKIPPED_REDELIVERY
    expect(
        n == 1,
        _("exactly 1 charge row for {key} {when}").format(key=repr(key), when=when),
        _("{count} charge rows").format(count=n),
        hint,
    )


@CHECKS.add(1, "the worker imports ex08_tasks.py and charges once", timeout=TIMEOUT)
def worker_starts_and_charges_once(ns: Namespace) -> None:
    with Ex08Run(ns) as run:
        run.worker()
        run.send("inv-1")
        run.settle()
        _charged_once(
            run, "inv-1", _("with nothing killed"), _("the task must insert into charges")
        )


@CHECKS.add(
    3,
    "killed before charging, the task must come back: acknowledge late "
    "(task_acks_late) and give the message back when the pool child dies "
    "(task_reject_on_worker_lost)",
    timeout=TIMEOUT,
    severe=True,
)
def worker_killed_before_the_charge(ns: Namespace) -> None:
    with Ex08Run(ns) as run:
        worker = run.worker()
        child = run.hold("task_start", "inv-2")
        run.kill_children(worker, [child])
        run.settle()
        _charged_once(
            run,
            "inv-2",
            _("after its pool child was SIGKILLed before charging"),
            _(
                "0 rows means the task was acknowledged and lost: set task_acks_late and "
                "task_reject_on_worker_lost"
            ),
        )


@CHECKS.add(
    3,
    "killed after the charge committed, the task runs again: the dedup record in "
    "the same transaction as the charge makes the second run charge nothing",
    timeout=TIMEOUT,
    severe=True,
)
def worker_killed_after_the_commit(ns: Namespace) -> None:
    with Ex08Run(ns) as run:
        worker = run.worker()
        child = run.hold("task_end", "inv-3")
        run.kill_children(worker, [child])
        run.settle()
        _charged_once(
            run,
            "inv-3",
            _("after its pool child was SIGKILLed once the charge had committed"),
            _(
                "2 rows means the redelivery charged again: insert the key into processed "
                "(ON CONFLICT DO NOTHING RETURNING key) in the charge's transaction, and "
                "skip the charge when no row comes back"
            ),
        )


@CHECKS.add(
    2,
    "the whole worker (main process) killed: RabbitMQ gives back every message that "
    "was not acknowledged, so only a late ack survives",
    timeout=TIMEOUT,
    severe=True,
)
def whole_worker_killed_before_the_charge(ns: Namespace) -> None:
    with Ex08Run(ns) as run:
        first = run.worker("w1")
        run.hold("task_start", "inv-4")
        run.kill_main(first)
        run.worker("w2")
        run.settle()
        _charged_once(
            run,
            "inv-4",
            _("after the whole worker was SIGKILLed and a new one started"),
            _(
                "0 rows means the message was acknowledged before the task ran (Celery's "
                "default): set task_acks_late"
            ),
        )


def split_commits_hint(rows: int) -> str:
    """The hint after a kill right after a commit left ``rows`` charge rows for the key:
    what a split in two transactions did (0: the charge lost, 2: charged twice)."""
    hints = {
        0: _(
            "the dedup record committed before the charge, so the redelivery skipped the "
            "key and the charge is lost: insert both in one `conn.transaction()`"
        ),
        2: _(
            "the charge committed before the dedup record, so the redelivery charged "
            "again: insert both in one `conn.transaction()`"
        ),
    }
    return hints.get(rows) or _("insert both in one `conn.transaction()`")


#: At most this many of the task's commits are each killed after, one delivery each.
COMMITS = 4


@CHECKS.add(
    3,
    "killed right after each COMMIT the task makes, the redelivery charges exactly once: "
    "the dedup record and the charge in ONE transaction, so no kill falls between them",
    timeout=TIMEOUT,
    severe=True,
)
def killed_right_after_each_commit(ns: Namespace) -> None:
    with Ex08Run(ns) as run:
        worker = run.worker()
        run.send("inv-probe")
        run.settle()
        made = commits.made(run.folder)
        expect(
            bool(made),
            "the task to commit its work to PostgreSQL",
            _("no COMMIT and no autocommitted write in the task's run"),
            "write through psycopg, in `with connect() as conn, conn.transaction():`",
        )
        [probe] = made.values()
        for nth, (what, where) in enumerate(probe[:COMMITS], start=1):
            key = f"inv-c{nth}"
            child = run.hold(commits.point(nth), key)
            run.kill_children(worker, [child])
            run.settle()
            n = run.charges(key)
            expect(
                n == 1,
                _(
                    "exactly 1 charge row for {key} after a kill -9 right after your "
                    "{boundary} at {where} (commit {commit_number} of {commit_count}) and "
                    "the redelivery"
                ).format(
                    key=repr(key),
                    boundary=what,
                    where=where,
                    commit_number=nth,
                    commit_count=len(probe),
                ),
                _("{count} charge rows").format(count=n),
                split_commits_hint(n),
            )
