"""One run of the Celery lab: its config, app, workers and beats, the world, and the cleanup.

``CeleryRun(broker, folder, postgres=None, transport_options=None, beat=False,
dead_letter=False, quick_pool_check=False)`` gives a lesson or a test short verbs over
the harness:

- ``worker(name, **kw)`` starts a ``celery worker`` on the run's queue and waits until
  it is ready; ``beat(name)`` starts a ``celery beat``;
- ``send(task, *args, **options)`` publishes a task by name;
- ``pause(point)`` / ``wait_paused(point)`` / ``unpause()``: the next task to reach
  ``point`` stops there (``labkit.integrations.celery.points``) so a real kill lands
  exactly there;
- ``effects(key)``, ``calls(service)``: the world's records; ``depth()``,
  ``unacked()``, ``dead_letters()`` (with ``dead_letter=True`` the run's queue
  dead-letters to a queue of its own): the broker's; ``settle()``: send a probe and
  wait until it ran, so everything queued before it has been delivered;
- ``close()`` (or leaving ``with``) SIGKILLs every process group the run started,
  deletes the run's queue / Redis keys / PostgreSQL schema, and raises if any process
  carrying the run's tag is still alive.

This is the lab's bench, not a production pattern: in production a supervisor runs the
workers, nobody pauses a task to kill it, and the broker's own console shows the queues.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from labkit.clock import SystemClock
from labkit.integrations.celery import brokers, harness, points
from labkit.integrations.celery.app import LabConfig, cleanup, make_app, prepare_postgres
from labkit.world import World
from labkit.world.records import Call, Effect

APP = "labkit.integrations.celery.app"


#: Seconds a killed task has to be received again before the run counts it as not given back.
REDELIVERY_GRACE = 2.0


def received_of(procs: Sequence[Any], task_id: str) -> int:
    """How many times the workers in ``procs`` logged receiving ``task_id``."""
    return sum(
        p.log_text().count(f"[{task_id}] received")
        for p in procs
        if isinstance(p, harness.CeleryWorker)
    )


def all_received(folder: str | Path, procs: Sequence[Any], task_ids: Sequence[str]) -> bool:
    """True when the workers in ``procs`` logged receiving each of ``task_ids`` once, and
    once more for each retry its runs published (``retry`` in the runs log of ``folder``).

    A message the broker no longer counts as ready may still be on its way to a worker;
    once this holds, none of ``task_ids`` is.
    """
    retries = Counter(task for event, task, _pid, _ppid in points.runs(folder) if event == "retry")
    logs = [p.log_text() for p in procs if isinstance(p, harness.CeleryWorker)]
    return all(
        sum(log.count(f"[{task_id}] received") for log in logs) >= 1 + retries[task_id]
        for task_id in task_ids
    )


class Kills:
    """Tasks whose process was killed, and whether the broker has given each back yet.

    A killed task's message is either acknowledged (lost) or given back and received
    again, by the same worker or a new one. The second shows in the workers' logs; the
    first is what remains after ``grace`` seconds without it: a lost message cannot
    announce itself, so the grace is the bound on "not yet".
    """

    def __init__(self, grace: float = REDELIVERY_GRACE) -> None:
        self.grace = grace
        self.clock = SystemClock()
        self._killed: dict[str, tuple[int, float | None]] = {}

    def record(self, task_id: str, procs: Sequence[Any]) -> None:
        """Before the kill: how often ``task_id`` was received so far."""
        self._killed[task_id] = (received_of(procs, task_id), None)

    def start_grace(self) -> None:
        """After the kill, once the worker has acked or given back each task: start the clock.

        (Celery may take seconds to declare a killed child's task lost; the grace counts
        from then, not from the kill.)
        """
        now = self.clock.now()
        for task_id, (before, started) in self._killed.items():
            self._killed[task_id] = (before, now if started is None else started)

    def decided(self, procs: Sequence[Any]) -> bool:
        """True when every killed task was received again, or its grace has run out."""
        now = self.clock.now()
        return all(
            received_of(procs, task_id) > before
            or (started is not None and now - started >= self.grace)
            for task_id, (before, started) in self._killed.items()
        )

    def wait(self, procs: Sequence[Any], timeout: float = 60.0) -> None:
        harness.wait_until(
            lambda: self.decided(procs), timeout, "the killed tasks to come back or not"
        )
        self._killed.clear()


def quiet(folder: str | Path, procs: Sequence[Any]) -> bool:
    """True when no task runs and every live worker in ``procs`` started all it received.

    ``folder`` is the workers' ``LABKIT_PAUSE_DIR`` (their runs log lives there).
    """
    if points.running(folder, harness.is_alive):
        return False
    return all(
        proc.received() == points.started_under(folder, proc.main_pid or proc.pid)
        for proc in procs
        if isinstance(proc, harness.CeleryWorker) and proc.alive
    )


class CeleryRun:
    """See the module docstring."""

    def __init__(
        self,
        broker: str,
        folder: str | Path,
        *,
        postgres: str | None = None,
        transport_options: dict[str, Any] | None = None,
        beat: bool = False,
        dead_letter: bool = False,
        quick_pool_check: bool = False,
    ) -> None:
        self.folder = Path(folder)
        self.config = LabConfig.new(
            broker,
            self.folder,
            postgres=postgres,
            transport_options=transport_options,
            beat=beat,
            dead_letter=dead_letter,
            quick_pool_check=quick_pool_check,
        )
        self.app = make_app(self.config)
        self.world = World(self.config.world_path)
        self._procs: list[harness._CeleryProcess] = []
        self._pauses = 0
        self._pause = ("", "")
        self._held: list[tuple[str, str]] = []
        self.kills = Kills()
        self._probes = 0
        if postgres:
            prepare_postgres(self.config)
        if dead_letter:
            brokers.amqp_declare_dead_letters(broker, self.config.dead_letter_queue)

    # -- processes ------------------------------------------------------------------------

    def worker(self, name: str = "w1", *, ready: bool = True, **kwargs: Any) -> Any:
        """Start a worker (prefork, one child by default) on the run's queue."""
        proc = harness.start_worker(
            APP,
            queue=self.config.queue,
            folder=self.folder,
            name=name,
            tag=self.config.tag,
            env=self.config.env(),
            **kwargs,
        )
        self._procs.append(proc)
        return proc.wait_ready() if ready else proc

    def beat(self, name: str = "beat1") -> Any:
        proc = harness.start_beat(
            APP, folder=self.folder, name=name, tag=self.config.tag, env=self.config.env()
        )
        self._procs.append(proc)
        return proc.wait_ready()

    # -- messages and pauses ----------------------------------------------------------

    def send(self, task: str, *args: Any, **options: Any) -> None:
        self.app.send_task(task, args=list(args), **options)

    def pause(self, point: str) -> str:
        """The next task reaching ``point`` stops there; returns this pause's label."""
        self._pauses += 1
        label = f"p{self._pauses}"
        points.set_pause(self.folder, point, label)
        self._pause = (point, label)
        return label

    def wait_paused(self, timeout: float = 60.0) -> None:
        """Wait until a task is paused at the point of the last ``pause``."""
        point, label = self._pause
        points.wait_reached(self.folder, point, label, timeout)

    def hold(self, point: str, task: str, *args: Any, **options: Any) -> None:
        """Send ``task`` and wait until it is paused at ``point`` (other held tasks stay held)."""
        label = self.pause(point)
        self.send(task, *args, **options)
        self.wait_paused()
        self._held.append((point, label))

    def kill_held(self, worker: Any) -> None:
        """SIGKILL the pool children of ``worker`` running the held tasks, all at once.

        Waits until the worker has declared each task lost (acked or requeued it), then
        lifts the pause so the redeliveries run through.
        """
        held = [points.paused(self.folder, point, label) for point, label in self._held]
        self._held.clear()
        # A held task whose worker died whole (kill_main) is no longer anyone's to kill.
        alive = [(pid, task_id) for pid, task_id in held if harness.is_alive(pid)]
        for _, task_id in alive:
            self.kills.record(task_id, self._procs)
        worker.kill_children([pid for pid, _ in alive])
        self.kills.start_grace()
        self.unpause()

    def holder(self, *workers: Any) -> Any:
        """Which of ``workers`` runs the paused task (its pool child wrote the marker)."""
        point, label = self._pause
        pid, _ = points.paused(self.folder, point, label)
        for worker in workers:
            if pid in worker.pool_children():
                return worker
        raise LookupError(f"no worker among {[w.name for w in workers]} holds pid {pid}")

    def release_held(self) -> None:
        """Let every held task go on past its pause point (it was only waiting)."""
        for _, label in self._held:
            points.release(self.folder, label)
        self._held.clear()
        self.unpause()

    def unpause(self) -> None:
        points.clear_pause(self.folder)

    # -- what the world and the broker say --------------------------------------------

    def effects(self, key: str | None = None, service: str | None = None) -> list[Effect]:
        return self.world.effects(service=service, key=key)

    def count(self, key: str) -> int:
        return len(self.effects(key))

    def calls(self, service: str | None = None) -> list[Call]:
        return self.world.calls(service)

    def wait_effects(self, key: str, n: int, timeout: float = 60.0) -> int:
        """Wait until ``key`` has at least ``n`` effects; return the count."""
        harness.wait_until(lambda: self.count(key) >= n, timeout, f"{n} effect(s) of {key}")
        return self.count(key)

    def wait_calls(
        self, key: str, n: int, service: str = "payments", timeout: float = 60.0
    ) -> int:
        """Wait until the world has logged at least ``n`` calls for ``key``; return how many.

        A call is logged as its reply leaves, after its effect committed (the reply may
        still be lost on the way back): ``wait_effects`` can return while the call that
        made the effect is not in the log yet, so wait for this one before reading it.
        """

        def logged() -> int:
            return sum(1 for call in self.calls(service) if call.key == key)

        harness.wait_until(lambda: logged() >= n, timeout, f"{n} logged call(s) of {key}")
        return logged()

    def settle(self, timeout: float = 60.0) -> None:
        """Wait until the queue has moved on and no task of the run is still running.

        Each task killed by ``kill_held`` must have been received again or be past its
        grace (``Kills``); a probe sent now runs after every message ahead of it reached
        a worker; then every message a live worker received must have started, and
        every start must have ended or died with its process (``points.running``).
        Tasks waiting for an ETA keep a run unsettled.
        """
        self.kills.wait(self._procs, timeout)
        self._probes += 1
        key = f"probe-{self._probes}"
        self.send("lab.probe", key)
        self.wait_effects(key, 1, timeout)
        harness.wait_until(self.quiet, timeout, "the run's tasks to finish")

    def quiet(self) -> bool:
        """No task running, and every live worker started every message it received."""
        return quiet(self.folder, self._procs)

    def depth(self) -> int:
        """Messages ready in the run's queue, as the broker counts them."""
        if self.config.broker.startswith("redis"):
            return brokers.redis_depth(
                self.config.broker, self.config.redis_prefix, self.config.queue
            )
        return brokers.amqp_depth(self.config.broker, self.config.queue)

    def dead_letters(self) -> int:
        """RabbitMQ, ``dead_letter=True``: messages in the run's dead-letter queue."""
        return brokers.amqp_depth(self.config.broker, self.config.dead_letter_queue)

    def wait_depth(self, n: int, timeout: float = 30.0) -> int:
        """Wait until the queue holds exactly ``n`` ready messages (the broker lags a kill)."""
        harness.wait_until(lambda: self.depth() == n, timeout, f"queue depth {n}")
        return n

    def wait_unacked(self, n: int, timeout: float = 30.0) -> int:
        """Redis only: wait until exactly ``n`` messages are delivered and not yet acked."""
        harness.wait_until(lambda: self.unacked() == n, timeout, f"{n} unacked message(s)")
        return n

    def unacked(self) -> int:
        """Redis only: messages delivered and not yet acknowledged."""
        return brokers.redis_unacked(self.config.broker, self.config.redis_prefix)

    # -- the end ----------------------------------------------------------------------

    def stop_all(self) -> None:
        """Kill every process of the run (its whole groups), keep the broker state."""
        for proc in self._procs:
            proc.close()
        self._procs.clear()

    def leftovers(self) -> list[int]:
        return harness.leftovers(self.config.tag)

    def close(self) -> None:
        try:
            self.stop_all()
        finally:
            with contextlib.suppress(Exception):
                self.world.close()
            cleanup(self.config)
        left = self.leftovers()
        if left:
            raise RuntimeError(f"processes of run {self.config.tag} still alive: {left}")

    def __enter__(self) -> CeleryRun:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
