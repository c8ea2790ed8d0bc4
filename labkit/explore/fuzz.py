"""Many seeded random fault plans against one strategy: the property test of the lab.

``fuzz(strategy, seeds=range(1000))`` runs, for each seed, a few jobs under
``random_plan(seed, ...)``: one rule that surely fires (the first hit of a point the
strategy reaches), plus up to three random rules (crash, 503, 429, lost reply, slow,
with nth / key / probability triggers). After each crash a new worker takes over and
drains. Each seed's jobs are judged like the crash explorer's (``labkit.explore.matrix.judge``).

To stay fast (a thousand plans in seconds) every seed uses its own job keys inside one
pair of files per strategy, and a restart keeps the store and world objects (a crash
rolls their open transactions back, as the OS would); ``explore.crash_matrix`` is the
place where every restart opens fresh connections. Production code would reach for
Hypothesis' stateful testing; here the seed is the whole recipe, printed on failure.

Each result's ``replay`` line (``"reconcile | seed=7; ... | fuzz jobs=2"``) names the
strategy, the plan and the number of jobs; ``labkit.explore.fuzz.replay(line)`` runs that one
seed again, alone in fresh files, and returns an equal ``FuzzResult`` (the jobs' keys
and amounts come from the seed, and every time in a run is relative to its start).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from random import Random

from labkit.clock import LAB_EPOCH, FakeClock
from labkit.explore.matrix import MAX_RESTARTS, Scenario, judge, one_life, run_scenario
from labkit.faults import BEFORE_CALL, LOST_RESPONSE, POINTS, FaultPlan
from labkit.store import JobStore
from labkit.world import World

#: Actions a random rule may take (no "kill": it would end the test process itself).
RANDOM_ACTIONS = ("crash", "crash", "raise_transient", "rate_limit", "lose_response", "delay")


def random_plan(seed: int, points: Iterable[str], keys: Iterable[str]) -> FaultPlan:
    """A plan whose first rule fires for sure (nth=1 at a reached point), then random ones."""
    rng = Random(seed)
    reached, keys = sorted(set(points)), sorted(set(keys))
    first = rng.choice(reached)
    plan = FaultPlan(seed).at(first, "lose_response" if first == LOST_RESPONSE else "crash", nth=1)
    for _ in range(rng.randint(0, 3)):
        point = rng.choice([*reached, BEFORE_CALL])
        action = rng.choice(RANDOM_ACTIONS)
        trigger = rng.choice(("nth", "probability", "key"))
        plan.at(
            point,
            action,
            nth=rng.randint(1, 3) if trigger in ("nth", "key") else None,
            probability=round(rng.uniform(0.05, 0.4), 2) if trigger == "probability" else None,
            key=rng.choice(keys) if trigger == "key" else None,
            delay=float(rng.choice((1, 10, 45))) if action == "delay" else None,
        )
    return plan


@dataclass(frozen=True)
class FuzzResult:
    """One seed: its replay line, the worst verdict over its jobs, and what fired."""

    seed: int
    replay: str
    outcome: str
    #: How many faults acted.
    fired: int
    restarts: int
    #: How many points were hit (the same number when the line is replayed).
    hits: int = 0
    #: The plan's first rule (the one sure to fire) did act.
    sure_fired: bool = False


def fuzz(
    strategy: str | Scenario, seeds: Iterable[int] = range(1000), jobs: int = 3
) -> list[FuzzResult]:
    """Run ``strategy`` under one random plan per seed; return one result per seed."""
    base = Scenario.of(strategy) if isinstance(strategy, str) else strategy
    # Only points this strategy reaches, so the plan's first rule surely fires.
    probe = FaultPlan(0)
    run_scenario(base, probe)
    reached = tuple(p for p in probe.points_hit() if p in (*POINTS, LOST_RESPONSE))
    with tempfile.TemporaryDirectory(prefix="labkit-fuzz-") as tmp:
        clock = FakeClock(LAB_EPOCH)
        store = JobStore(Path(tmp) / "jobs.db", clock, rng=Random(0))
        world = World(Path(tmp) / "world.db", clock)
        try:
            return [_one(base, seed, jobs, store, world, clock, reached) for seed in seeds]
        finally:
            store.close()
            world.close()


def replay(line: str, scenario: Scenario | None = None) -> FuzzResult:
    """Run again the one seed a ``FuzzResult.replay`` line names; return its new result.

    Give ``scenario`` when the line names a scenario of your own, not a strategy.
    """
    parts = [p.strip() for p in line.split("|")]
    if len(parts) != 3 or not parts[2].startswith("fuzz jobs="):
        raise ValueError(
            "a fuzz replay line looks like 'reconcile | seed=7; after_effect:crash nth=1 | "
            f"fuzz jobs=2' (copy the whole line the run printed), got {line!r}"
        )
    base = scenario if scenario is not None else Scenario.of(parts[0])
    if base.name != parts[0]:
        raise ValueError(f"this line replays scenario {parts[0]!r}, not {base.name!r}")
    plan = FaultPlan.parse(parts[1])
    result = fuzz(base, seeds=[plan.seed], jobs=int(parts[2].removeprefix("fuzz jobs=")))[0]
    if result.replay != line:
        raise ValueError(
            f"seed {plan.seed} now draws another plan than the line's ({result.replay!r}); "
            "the strategy's reachable points changed since the line was printed"
        )
    return result


def _one(
    base: Scenario,
    seed: int,
    jobs: int,
    store: JobStore,
    world: World,
    clock: FakeClock,
    reached: tuple[str, ...],
) -> FuzzResult:
    kind, payload, _key = base.jobs[0]
    keys = [f"fuzz:{seed}:{i}" for i in range(jobs)]
    sc = Scenario(
        base.name,
        base.handlers,
        base.ack,
        base.service,
        tuple((kind, {**payload, "amount": 100 + i}, k) for i, k in enumerate(keys)),
        base.max_attempts,
        base.lease_s,
    )
    for kind_, payload_, key in sc.jobs:
        store.enqueue(kind_, payload_, key=key, max_attempts=sc.max_attempts)
    plan = random_plan(seed, reached, keys)
    world.faults = plan
    store.rng.seed(seed)
    restarts = 0
    while restarts < MAX_RESTARTS and not one_life(sc, store, world, plan, clock, restarts):
        restarts += 1
    world.faults = None
    outcome, _effects = judge(world, store, sc)
    sure = str(plan.rules[0])
    return FuzzResult(
        seed,
        f"{sc.name} | {plan.replay()} | fuzz jobs={jobs}",
        outcome,
        len(plan.fired),
        restarts,
        hits=len(plan.hits),
        sure_fired=any(f.rule == sure for f in plan.fired),
    )
