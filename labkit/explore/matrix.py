"""Crash every strategy at every point, restart, and read the verdict from the world.

``crash_matrix(strategies=None, points=None, seed=0, real_kill=False)`` runs, for each
strategy of ``labkit.explore.strategies`` and each point of ``faults.MATRIX_POINTS``, one job
("charge invoice 42") with a plan that breaks the run once at that point: a crash
(``SimulatedCrash`` in-process, or a real SIGKILL of a child process with
``real_kill=True``) at the six worker boundaries, and a lost reply (the world did the
effect, the caller got a timeout) at ``lost_response``. After a crash a fresh worker
(fresh store and world objects, or a new process) takes over and drains every retry.
Then the judge counts the world's effects for the job's key:

=========  ==============================================================
ok         exactly one effect
duplicate  more than one effect
lost       no effect, yet the job says succeeded
unknown    no effect and the job is dead or unfinished (nothing was hidden,
           but nothing happened either)
=========  ==============================================================

A cell whose point the run never reached shows ``-``: the fault had nowhere to fire
(``same_transaction`` has no outside call, so no response to lose).

Each row carries its ``seed`` and a one-line ``replay`` (``"ack_late | seed=0;
after_effect:crash nth=1"``); ``replay(row.replay)`` runs it again and returns an equal
row. In-process runs use a ``FakeClock`` starting at ``LAB_EPOCH`` and seeded random
generators, so equal means equal. In real-kill mode the plan runs in the first process
only; restarts run without faults; ``hits`` counts the points every process logged
(the same number as in-process).

The rows and the table are ``labkit.explore.verdicts`` (``Row``, ``Matrix``).

``explore_all_boundaries(scenario)`` first runs a scenario with an empty plan that
records every point hit, then re-runs it breaking at each of those hits in turn: no list
of points to keep up to date, and a student's own ``ctx.point("...")`` is covered too.

``backend=`` runs the same table on another engine: ``"sqlite"`` (a file per run),
``"postgres"`` (a schema per run; ``crash_matrix`` empties and reuses one per thread)
or ``"redis_streams"`` (a key prefix per run), all removed afterwards
(``labkit.backends.spec``). The world stays a SQLite file: it is the
outside truth the judge reads, whatever engine queued the job.
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from random import Random
from typing import Any, Literal

from labkit.backends.spec import drop, new_spec, open_store, reuse_schemas
from labkit.clock import LAB_EPOCH, FakeClock
from labkit.errors import SimulatedCrash
from labkit.explore.strategies import STRATEGIES
from labkit.explore.verdicts import Matrix, Row
from labkit.faults import LOST_RESPONSE, MATRIX_POINTS, FaultPlan
from labkit.job import JobState
from labkit.store.contract import JobStoreContract
from labkit.worker import Handler, Worker
from labkit.world import World

DEFAULT_JOBS: tuple[tuple[str, dict[str, Any], str], ...] = (
    ("charge", {"customer": "cus_42", "amount": 4200}, "billing:42:charge:v1"),
)
#: A crash loop stops here even if the plan keeps crashing (each crash spends an attempt).
MAX_RESTARTS = 200


@dataclass(frozen=True)
class Scenario:
    """Jobs, the handlers that run them and how the worker acknowledges them.

    ``service`` names the world service whose effects the judge counts (None: all).
    For ``real_kill`` runs the handlers must be module-level functions of an importable
    module (a child process imports them by path).
    """

    name: str
    handlers: Mapping[str, Handler]
    ack: Literal["late", "first"] = "late"
    service: str | None = None
    jobs: tuple[tuple[str, dict[str, Any], str], ...] = DEFAULT_JOBS
    max_attempts: int = 10
    lease_s: float = 30.0

    @classmethod
    def of(cls, strategy: str, **changes: Any) -> Scenario:
        """The scenario of a named strategy (``"reconcile"``...), optionally changed."""
        if strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {strategy!r}; choose from {', '.join(STRATEGIES)}")
        s = STRATEGIES[strategy]
        return cls(strategy, s.handlers, s.ack, s.service, **changes)

    def handler_paths(self) -> dict[str, str]:
        """``{"kind": "module:function"}`` for a child process to import."""
        paths = {}
        for kind, fn in self.handlers.items():
            module, qual = getattr(fn, "__module__", ""), getattr(fn, "__qualname__", "")
            if module in ("__main__", "") or "<" in qual:
                raise ValueError(
                    f"handler {qual or fn!r} for {kind!r} is defined in {module or 'no module'}; "
                    "a real child process cannot import it. Move it to a .py module."
                )
            paths[kind] = f"{module}:{qual}"
        return paths


def _scenario(scenario: Scenario | str) -> Scenario:
    return Scenario.of(scenario) if isinstance(scenario, str) else scenario


def judge(world: World, store: JobStoreContract, scenario: Scenario) -> tuple[str, int]:
    """The worst verdict over the scenario's jobs, and the number of effects counted."""
    verdicts, total = [], 0
    for _kind, _payload, key in scenario.jobs:
        n = world.count(key, scenario.service)
        total += n
        job = store.get_by_key(key)
        if n > 1:
            verdicts.append("duplicate")
        elif n == 1:
            verdicts.append("ok")
        elif job is not None and job.state == JobState.SUCCEEDED:
            verdicts.append("lost")
        else:
            verdicts.append("unknown")
    worst = min(verdicts, key=("duplicate", "lost", "unknown", "ok").index)
    return worst, total


def run_scenario(
    scenario: Scenario | str,
    plan: FaultPlan,
    *,
    real_kill: bool = False,
    point: str | None = None,
    workdir: str | Path | None = None,
    backend: str = "sqlite",
) -> Row:
    """Run the scenario's jobs to the end under ``plan``, restarting after crashes; judge."""
    sc = _scenario(scenario)
    first = plan.rules[0].point if plan.rules else "-"
    label = point or first
    line = f"{sc.name} | {plan.replay()}"
    if label != first:  # e.g. "before_call#2" from explore_all_boundaries
        line += f" | at={label}"
    if real_kill:
        line += " | real_kill"
    if backend != "sqlite":
        line += f" | backend={backend}"
    if workdir is not None:
        return _run_in(Path(workdir), sc, plan, real_kill, label, line, backend)
    with tempfile.TemporaryDirectory(prefix="labkit-explore-") as tmp:
        return _run_in(Path(tmp), sc, plan, real_kill, label, line, backend)


def _prepare(folder: Path, sc: Scenario, seed: int, spec: str) -> Path:
    world_path = folder / "world.db"
    clock = FakeClock(LAB_EPOCH)
    store = open_store(spec, clock, Random(seed))
    try:
        for kind, payload, key in sc.jobs:
            store.enqueue(kind, payload, key=key, max_attempts=sc.max_attempts)
    finally:
        store.close()
    World(world_path, clock).close()
    return world_path


def _run_in(
    folder: Path,
    sc: Scenario,
    plan: FaultPlan,
    real: bool,
    label: str,
    line: str,
    backend: str = "sqlite",
) -> Row:
    spec = new_spec(backend, folder, f"explore_{uuid.uuid4().hex[:12]}")
    try:
        world_path = _prepare(folder, sc, plan.seed, spec)
        if real:
            fired, restarts, hits = _run_processes(folder, spec, world_path, sc, plan)
        else:
            fired, restarts = _run_in_process(spec, world_path, sc, plan)
            hits = len(plan.hits)
        clock = FakeClock(LAB_EPOCH)
        store = open_store(spec, clock)
        try:
            with World(world_path, clock) as world:
                outcome, effects = judge(world, store, sc)
            attempts = sum(
                j.attempt for _k, _p, key in sc.jobs if (j := store.get_by_key(key)) is not None
            )
        finally:
            store.close()
    finally:
        drop(spec)
    return Row(
        sc.name,
        label,
        outcome,
        effects,
        fired,
        plan.seed,
        line,
        attempts,
        restarts,
        hits,
    )


def one_life(
    sc: Scenario,
    store: JobStoreContract,
    world: World,
    plan: FaultPlan,
    clock: FakeClock,
    restarts: int,
) -> bool:
    """Run one worker life until the queue drains (True) or a simulated crash ends it."""
    worker = Worker(
        store,
        sc.handlers,
        name=f"w{restarts + 1}",
        lease_s=sc.lease_s,
        faults=plan,
        clock=clock,
        world=world,
        ack=sc.ack,
    )
    try:
        worker.drain()
    except SimulatedCrash:
        return False
    return True


def _run_in_process(
    spec: str, world_path: Path, sc: Scenario, plan: FaultPlan
) -> tuple[tuple[str, ...], int]:
    clock = FakeClock(LAB_EPOCH)
    restarts = 0
    while True:
        # Fresh objects and connections for every worker life, as after a real restart.
        store = open_store(spec, clock, Random(plan.seed + restarts))
        world = World(world_path, clock, faults=plan)
        try:
            if one_life(sc, store, world, plan, clock, restarts):
                break
            restarts += 1
            if restarts >= MAX_RESTARTS:
                break
        finally:
            store.close()
            world.close()
    return tuple(f"{f.action} at {f.point} n={f.n}" for f in plan.fired), restarts


def _run_processes(
    folder: Path, spec: str, world_path: Path, sc: Scenario, plan: FaultPlan
) -> tuple[tuple[str, ...], int, int]:
    """Run worker processes until one drains; the faults fired, restarts and points hit."""
    from labkit.worker_process import run_worker_process  # only real-kill runs need processes

    paths = sc.handler_paths()
    fired: list[str] = []
    restarts, start, hits = 0, LAB_EPOCH, 0
    faults: str | None = str(plan)
    while True:
        proc = run_worker_process(
            spec,
            paths,
            world_path=world_path,
            name=f"w{restarts + 1}",
            lease_s=sc.lease_s,
            ack=sc.ack,
            faults=faults,
            clock_start=start,
            mode="drain",
            seed=plan.seed + restarts,
            log_path=folder / f"w{restarts + 1}.log",
        )
        code = proc.wait(60)
        # "FAULT fired kill at after_effect key=... n=1" -> "kill at after_effect n=1"
        fired += [f"{t[2]} at {t[4]} {t[-1]}" for t in (f.split() for f in proc.fired())]
        hits += len(proc.hits())
        if code == 0 or not proc.killed or restarts >= MAX_RESTARTS:
            if code != 0 and not proc.killed:
                raise RuntimeError(
                    f"worker process failed (exit {code}):\n{proc.log_text()[-2000:]}"
                )
            break
        restarts += 1
        faults = None  # the plan ran in the first process; restarts run clean
        store = open_store(spec, FakeClock(LAB_EPOCH))
        try:
            start = max([LAB_EPOCH, *(j.updated_at for j in store.jobs())])
        finally:
            store.close()
    return tuple(fired), restarts, hits


def replay(line: str, scenario: Scenario | None = None) -> Row:
    """Run again the run a row's ``replay`` line describes; returns the new row."""
    parts = [p.strip() for p in line.split("|")]
    if len(parts) < 2:
        raise ValueError(
            f"a replay line looks like 'ack_late | seed=0; after_effect:crash nth=1', got {line!r}"
        )
    sc = scenario if scenario is not None else Scenario.of(parts[0])
    if sc.name != parts[0]:
        raise ValueError(f"this line replays scenario {parts[0]!r}, not {sc.name!r}")
    plan = FaultPlan.parse(parts[1])
    real, point, backend = False, None, "sqlite"
    for extra in parts[2:]:
        if extra == "real_kill":
            real = True
        elif extra.startswith("at="):
            point = extra.removeprefix("at=")
        elif extra.startswith("backend="):
            backend = extra.removeprefix("backend=")
        else:
            raise ValueError(
                f"unknown part {extra!r} in replay line {line!r}: expected 'real_kill' or "
                "'at=<label>' (a 'fuzz jobs=N' line is replayed by labkit.explore.fuzz.replay)"
            )
    return run_scenario(sc, plan, real_kill=real, point=point, backend=backend)


def _cell_plan(point: str, seed: int, real_kill: bool, nth: int = 1) -> FaultPlan:
    if point == LOST_RESPONSE:
        action = "lose_response"
    else:
        action = "kill" if real_kill else "crash"
    return FaultPlan(seed).at(point, action, nth=nth)


def _run_all(
    jobs: Iterable[tuple[Scenario, FaultPlan, str]],
    real_kill: bool,
    parallel: int,
    backend: str = "sqlite",
) -> list[Row]:
    tasks = list(jobs)

    def one(task: tuple[Scenario, FaultPlan, str]) -> Row:
        sc, plan, label = task
        return run_scenario(sc, plan, real_kill=real_kill, point=label, backend=backend)

    if real_kill and parallel > 1:
        # Threads only wait for child processes here; the work runs in the children.
        with ThreadPoolExecutor(max_workers=parallel) as pool:
            return list(pool.map(one, tasks))
    return [one(t) for t in tasks]


def crash_matrix(
    strategies: Sequence[str] | None = None,
    points: Sequence[str] | None = None,
    seed: int = 0,
    real_kill: bool = False,
    parallel: int = 2,
    backend: str = "sqlite",
) -> Matrix:
    """Run every strategy broken once at every point; see the module docstring."""
    names = list(strategies or STRATEGIES)
    where = list(points or MATRIX_POINTS)
    tasks = [(Scenario.of(s), _cell_plan(p, seed, real_kill), p) for s in names for p in where]
    with reuse_schemas():
        return Matrix(_run_all(tasks, real_kill, parallel, backend))


def explore_all_boundaries(
    scenario: Scenario | str, seed: int = 0, real_kill: bool = False, parallel: int = 2
) -> Matrix:
    """Record every point one clean run hits, then break the run at each hit in turn."""
    sc = _scenario(scenario)
    probe = FaultPlan(seed)
    run_scenario(sc, probe)
    total = {p: probe.hit_count(p) for p in probe.points_hit()}
    tasks = []
    for hit in probe.hits:
        label = hit.point if total[hit.point] == 1 else f"{hit.point}#{hit.n}"
        tasks.append((sc, _cell_plan(hit.point, seed, real_kill, nth=hit.n), label))
    return Matrix(_run_all(tasks, real_kill, parallel))
