"""Run a worker in a real child process, so a crash can be a real ``kill -9``.

``run_worker_process(db_path, handlers, ...)`` (``db_path``: a SQLite file, or a
PostgreSQL / Redis store spec of ``labkit.backends.spec``) starts ``python -m
labkit.worker_process`` with a JSON config and returns a ``WorkerProcess`` handle (``pid``,
``wait()``, ``kill()``, ``terminate()``, ``log_text()``). Spawn-safe by construction:
nothing is pickled or forked; the child imports everything it needs by name.

- ``handlers`` is either ``{"kind": "module:function"}`` or ``"module:attribute"``
  naming a dict of handlers. The code must live in an importable module (labkit's own
  ``labkit.explore.strategies``, or your package); a function defined in a notebook cell cannot
  be imported by another process. The parent's ``sys.path`` is passed to the child, so
  a module the parent can import, the child can import too.
- ``faults`` is a ``FaultPlan`` (or its replay line). ``"kill"`` rules SIGKILL the child
  at the point; before any fault acts, the child writes ``FAULT fired ...`` to its log
  and syncs it, so the parent can prove the fault fired even after a kill. Every point
  reached is logged too (``HIT point key=... n=...``, read back with ``hits()``).
- Clock: ``clock_start=None`` uses ``SystemClock`` (real time, real leases: use it to
  watch a real restart); a number gives the child a ``FakeClock`` starting there, whose
  sleeps are instant, so a test can kill, restart and drain in milliseconds and get the
  same times on every run. The explorer uses the second. ``clock_skew_s=30`` runs the
  child on a real clock 30 s ahead (``SystemClock(skew_s=30)``; negative: behind), to
  play a machine whose clock is wrong. The worker keeps time by its store's clock
  (``store.clock``): on PostgreSQL and Redis that is the server's, whatever the skew.
- ``mode``: ``"drain"`` (every job to the end, sleeping to retries and expired leases),
  ``"until_idle"`` (stop when nothing is ready now) or ``"forever"`` (poll until SIGTERM;
  SIGTERM asks the worker to stop after its current job and exit 0).
- Output (the worker's log lines, tracebacks) goes to ``log_path``, never to the parent's
  stdout, so nothing leaks into a notebook cell. ``json_logs=True`` writes the worker's
  lines as JSON (``labkit.logs.JobFormatter``, on the child's clock); ``log_fields=
  "module:factory"`` adds fields looked up by job id (the factory is called with
  ``db_path`` and returns the lookup of ``labkit.logs.FieldsByJob``), for example
  ``labkit.integrations.http.correlation:job_request_ids``.

Production equivalents: a process supervisor (systemd, supervisord, Kubernetes) runs
workers and restarts them; ``celery worker`` and ``rq worker`` are such processes.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import random
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from labkit.backends.spec import is_url, open_store
from labkit.clock import Clock, FakeClock, SystemClock
from labkit.faults import FaultPlan, Fired, Hit
from labkit.logs import FieldsByJob, JobFormatter
from labkit.worker import Handler, Worker
from labkit.world import World

if TYPE_CHECKING:
    pass

Mode = Literal["drain", "until_idle", "forever"]


@dataclass
class WorkerProcess:
    """A worker running in a child process."""

    popen: subprocess.Popen[bytes]
    log_path: Path
    name: str

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def returncode(self) -> int | None:
        """None while running; the exit code after; ``-9`` when it was SIGKILLed."""
        return self.popen.poll()

    @property
    def killed(self) -> bool:
        """True if the process died of SIGKILL (from a "kill" fault or ``kill()``)."""
        return self.popen.poll() == -signal.SIGKILL

    def wait(self, timeout: float | None = 60.0) -> int:
        """Wait for the child to end and return its exit code (``-9`` after SIGKILL)."""
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError(
                f"worker process {self.name} (pid {self.pid}) still running after {timeout}s; "
                f"see its log {self.log_path}; call kill() to end it"
            ) from None

    def kill(self) -> None:
        """SIGKILL the child: no cleanup, no ``finally``, exactly like ``kill -9``."""
        if self.popen.poll() is None:
            self.popen.kill()
        self.popen.wait()

    def terminate(self) -> None:
        """SIGTERM the child: the worker finishes its current job and exits 0."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)

    def log_text(self) -> str:
        """What the child wrote (log lines, ``FAULT fired`` lines, tracebacks)."""
        return self.log_path.read_text(encoding="utf-8") if self.log_path.exists() else ""

    def hits(self) -> list[str]:
        """The ``HIT`` lines of the log: every fault point the child reached, in order."""
        return [line for line in self.log_text().splitlines() if line.startswith("HIT ")]

    def fired(self) -> list[str]:
        """The ``FAULT fired`` lines of the log: the proof a fault acted in the child."""
        return [line for line in self.log_text().splitlines() if line.startswith("FAULT fired")]

    def __repr__(self) -> str:
        return f"WorkerProcess({self.name!r}, returncode={self.returncode})"


def run_worker_process(
    db_path: str | Path,
    handlers: Mapping[str, str] | str,
    *,
    world_path: str | Path | None = None,
    name: str = "w1",
    queues: Sequence[str] = ("default",),
    lease_s: float = 30.0,
    ack: Literal["late", "first"] = "late",
    faults: FaultPlan | str | None = None,
    clock_start: float | None = None,
    clock_skew_s: float = 0.0,
    mode: Mode = "drain",
    poll_s: float = 0.5,
    max_jobs: int | None = None,
    seed: int = 0,
    log_path: str | Path | None = None,
    json_logs: bool = False,
    log_fields: str | None = None,
) -> WorkerProcess:
    """Start a worker in a child process (see the module docstring); return its handle."""
    if mode not in ("drain", "until_idle", "forever"):
        raise ValueError(f"mode must be 'drain', 'until_idle' or 'forever', not {mode!r}")
    if isinstance(handlers, Mapping):
        for kind, target in handlers.items():
            _check_target(target, f"handler for {kind!r}")
    else:
        _check_target(handlers, "handlers")
    if log_fields is not None:
        _check_target(log_fields, "log_fields")
    if clock_skew_s and clock_start is not None:
        raise ValueError(
            "clock_skew_s plays a real clock that is wrong; clock_start a simulated one: "
            "give one of them"
        )
    # A PostgreSQL or Redis store spec (labkit.backends.spec) passes through as it is.
    url = is_url(db_path)
    db_path = Path(db_path) if not url else db_path
    if log_path is None and url:
        raise ValueError("a worker on a server-backed store needs log_path= (no folder to guess)")
    log = Path(log_path) if log_path is not None else Path(db_path).with_name(f"{name}.log")
    config = {
        "db_path": str(db_path) if url else str(Path(db_path).resolve()),
        "world_path": None if world_path is None else str(Path(world_path).resolve()),
        "handlers": dict(handlers) if isinstance(handlers, Mapping) else handlers,
        "name": name,
        "queues": [queues] if isinstance(queues, str) else list(queues),
        "lease_s": lease_s,
        "ack": ack,
        "faults": None if faults is None else str(faults),
        "clock_start": clock_start,
        "clock_skew_s": float(clock_skew_s),
        "mode": mode,
        "poll_s": poll_s,
        "max_jobs": max_jobs,
        "seed": seed,
        "json_logs": json_logs or log_fields is not None,
        "log_fields": log_fields,
        "sys_path": [p for p in sys.path if p and Path(p).is_dir()],
    }
    with log.open("ab") as out:
        popen = subprocess.Popen(
            [sys.executable, "-m", "labkit.worker_process", json.dumps(config)],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    return WorkerProcess(popen, log, name)


def _check_target(target: object, what: str) -> None:
    if not isinstance(target, str) or ":" not in target:
        raise ValueError(
            f"{what} must be an import path 'module:function' (a child process imports it), "
            f"not {target!r}; move the function into a .py module, for example "
            "'labkit.explore.strategies:reconcile'"
        )


def load_target(target: str) -> Any:
    """Import ``"module:attr"`` (``attr`` may be dotted) and return the object."""
    module_name, _, attr = target.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def load_handlers(spec: Mapping[str, str] | str) -> dict[str, Handler]:
    """Resolve a handlers spec: ``{"kind": "mod:fn"}`` or ``"mod:dict_of_handlers"``."""
    if isinstance(spec, str):
        found = load_target(spec)
        if not isinstance(found, Mapping):
            raise ValueError(
                f"{spec} must name a dict of kind -> handler, not {type(found).__name__}"
            )
        return dict(found)
    return {kind: load_target(target) for kind, target in spec.items()}


def _child(config: dict[str, Any]) -> int:
    """The child's body: build store, world and worker from the config and run."""
    for entry in reversed(config["sys_path"]):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    start = config["clock_start"]
    clock: Clock = SystemClock(config["clock_skew_s"]) if start is None else FakeClock(start)
    _log_to_stdout(config, clock)
    plan = FaultPlan.parse(config["faults"]) if config["faults"] else FaultPlan()

    def note(fired: Fired) -> None:
        # A kill leaves no traceback: this line, synced to disk first, is the only proof.
        sys.stdout.write(
            f"FAULT fired {fired.action} at {fired.point} key={fired.key} n={fired.n}\n"
        )
        sys.stdout.flush()
        os.fsync(sys.stdout.fileno())

    def seen(hit: Hit) -> None:
        # Flushed, not synced: the kernel keeps what was written when the process dies.
        sys.stdout.write(f"HIT {hit.point} key={hit.key} n={hit.n}\n")
        sys.stdout.flush()

    plan.on_fire = note
    plan.on_hit = seen
    print(
        f"worker {config['name']} pid {os.getpid()} clock {clock!r} faults: {plan.replay()}",
        flush=True,
    )
    store = open_store(config["db_path"], clock, random.Random(config["seed"]))
    world = None
    if config["world_path"]:
        world = World(config["world_path"], clock=clock, faults=plan)
    worker = Worker(
        store,  # any engine's store (labkit.backends.spec) is a WorkerStore
        load_handlers(config["handlers"]),
        name=config["name"],
        queues=config["queues"],
        lease_s=config["lease_s"],
        faults=plan,
        clock=store.clock,  # the server's on PostgreSQL and Redis, else the one given
        world=world,
        ack=config["ack"],
    )
    signal.signal(signal.SIGTERM, lambda signum, frame: worker.stop())
    mode = config["mode"]
    if mode == "drain":
        ran = worker.drain(config["max_jobs"])
    elif mode == "until_idle":
        ran = worker.run_until_idle(config["max_jobs"])
    else:
        ran = worker.run_forever(config["poll_s"])
    print(f"worker {config['name']} exits after {ran} jobs: {store.counts()}", flush=True)
    store.close()
    if world is not None:
        world.close()
    return 0


def _log_to_stdout(config: dict[str, Any], clock: Clock) -> None:
    if not config.get("json_logs"):
        logging.basicConfig(
            level=logging.INFO,
            stream=sys.stdout,
            format=f"%(levelname)s {config['name']} %(message)s",
        )
        return
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(JobFormatter(clock))
    if config.get("log_fields"):
        handler.addFilter(FieldsByJob(load_target(config["log_fields"])(config["db_path"])))
    logging.basicConfig(level=logging.INFO, handlers=[handler])


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print(
            "usage: python -m labkit.worker_process '<json config>' (use run_worker_process)",
            file=sys.stderr,
        )
        return 2
    return _child(json.loads(args[0]))


if __name__ == "__main__":
    sys.exit(main())
