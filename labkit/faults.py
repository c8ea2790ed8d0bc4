"""Fault injection at named points: a seeded, replayable plan of what goes wrong where.

Code calls ``plan.hit(point, key=job.key)`` at each boundary it crosses. Most hits do
nothing; a hit that matches one of the plan's rules acts: it raises a transient or a
permanent error, delays through the clock, crashes the worker in-process
(``SimulatedCrash``, a ``BaseException`` that ``except Exception`` cannot swallow),
kills the whole process for real (SIGKILL to itself, no cleanup, no ``finally``) or
loses a response (``ResponseLost``: the effect happened, the caller never heard).

Points along one job, fired by ``labkit.worker.Worker`` (see its docstring for exactly
where each one sits, in ack-late and ack-first mode)::

    after_claim  before_effect  after_effect  before_commit  after_commit  after_ack

and by ``labkit.world.World`` on each call to an outside service::

    before_call    the call arrived, nothing done yet (5xx, 429, 400, slow live here)
    lost_response  the effect is done and durable; the reply is about to be returned

A handler fires any point of its own with ``ctx.point("name")``; names are free.

Triggers (a rule may combine them; all given ones must match):

- ``nth=3``: the third hit of that point (counted among hits that match the rule's key);
- ``key="billing:42:charge:v1"``: only hits for that job / operation key;
- ``probability=0.2``: each matching hit fires with that chance, drawn from the plan's
  own ``random.Random(seed)``, so the same sequence of hits gives the same faults.

Without ``nth`` a rule fires on every matching hit. ``plan.hits`` records every hit
(point, key, number) and ``plan.fired`` every fault that acted, so a test can assert
that its fault really fired. ``str(plan)`` is a one-line replay recipe, for example::

    seed=7; after_effect:crash nth=1; lost_response:lose_response key=inv%3A42 p=0.5

and ``FaultPlan.parse(that_line)`` rebuilds an equal plan. Production chaos tools
(Toxiproxy for the network, Chaos Mesh or Gremlin for processes) do this from the
outside; labkit does it from the inside because the lesson is *where* the crash lands.
"""

from __future__ import annotations

import os
import random
import signal
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from urllib.parse import quote, unquote

from labkit.clock import Clock
from labkit.errors import PermanentError, ResponseLost, SimulatedCrash, TransientError

#: The boundaries the worker fires along one job, in ack-late order.
POINTS: tuple[str, ...] = (
    "after_claim",
    "before_effect",
    "after_effect",
    "before_commit",
    "after_commit",
    "after_ack",
)
#: Fired by the outside world after it did the effect and before it replies.
LOST_RESPONSE = "lost_response"
#: Fired by the outside world when a call arrives, before it does anything.
BEFORE_CALL = "before_call"
#: Points a crash matrix walks: the six boundaries plus the lost response.
MATRIX_POINTS: tuple[str, ...] = (*POINTS, LOST_RESPONSE)

ACTIONS: tuple[str, ...] = (
    "raise_transient",  # TransientError(status=503): the same call may work later
    "raise_permanent",  # PermanentError(status=400): retrying cannot help
    "rate_limit",  # TransientError(status=429, retry_after=delay or 1.0)
    "delay",  # clock.sleep(delay): slow, then carry on
    "crash",  # SimulatedCrash: this worker object is dead, in-process
    "kill",  # SIGKILL to this process: dead for real, nothing runs after
    "lose_response",  # ResponseLost: effect done (at lost_response), the reply never arrives
)


@dataclass(frozen=True)
class Rule:
    """One line of a plan: at ``point``, do ``action`` when the triggers match."""

    point: str
    action: str
    nth: int | None = None
    key: str | None = None
    probability: float | None = None
    delay: float | None = None

    def __str__(self) -> str:
        parts = [f"{self.point}:{self.action}"]
        if self.nth is not None:
            parts.append(f"nth={self.nth}")
        if self.key is not None:
            parts.append(f"key={quote(self.key, safe='')}")
        if self.probability is not None:
            parts.append(f"p={self.probability!r}")
        if self.delay is not None:
            parts.append(f"delay={self.delay!r}")
        return " ".join(parts)


@dataclass(frozen=True)
class Hit:
    """A point was reached: its name, the job key, and how many times it was hit so far."""

    point: str
    key: str | None
    n: int


@dataclass(frozen=True)
class Fired:
    """A rule acted at a hit."""

    point: str
    key: str | None
    n: int
    action: str
    rule: str


@dataclass
class FaultPlan:
    """A seeded list of rules, plus the record of what was hit and what fired.

    Build it with chained ``at`` calls::

        plan = FaultPlan(seed=7).at("after_effect", "crash", nth=1)

    The same plan object must be passed to every component that should see it (the
    worker, the world), and kept across an in-process restart, so ``nth`` keeps
    counting and the run can be replayed from ``str(plan)``.
    """

    seed: int = 0
    rules: list[Rule] = field(default_factory=list)
    #: Called with each ``Fired`` before the fault acts (a real kill leaves no other trace).
    on_fire: Callable[[Fired], None] | None = field(default=None, compare=False, repr=False)
    #: Called with each ``Hit`` as it is recorded (a child process logs them for its parent).
    on_hit: Callable[[Hit], None] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.seed, int):
            raise ValueError(f"seed must be a whole number, not {self.seed!r}")
        self.rng = random.Random(self.seed)
        self.hits: list[Hit] = []
        self.fired: list[Fired] = []
        self._point_counts: Counter[str] = Counter()
        self._rule_counts: Counter[int] = Counter()
        self._lock = threading.RLock()

    # -- building ----------------------------------------------------------------------

    def at(
        self,
        point: str,
        action: str,
        *,
        nth: int | None = None,
        key: str | None = None,
        probability: float | None = None,
        delay: float | None = None,
    ) -> FaultPlan:
        """Add a rule and return the plan, so calls chain."""
        if not isinstance(point, str) or not point or any(c in point for c in " ;:="):
            raise ValueError(
                f"point must be a plain name like 'after_effect', not {point!r}; "
                f"the worker's points are {', '.join(POINTS)}, the world's are "
                f"{BEFORE_CALL} and {LOST_RESPONSE}"
            )
        if action not in ACTIONS:
            raise ValueError(f"unknown action {action!r}; choose one of {', '.join(ACTIONS)}")
        if nth is not None and (not isinstance(nth, int) or nth < 1):
            raise ValueError(
                f"nth counts hits from 1, so it must be a whole number >= 1, not {nth!r}"
            )
        if probability is not None and not 0.0 <= probability <= 1.0:
            raise ValueError(f"probability must be between 0 and 1, not {probability!r}")
        if action == "delay" and delay is None:
            raise ValueError("a 'delay' rule needs delay=<seconds>")
        if delay is not None and delay < 0:
            raise ValueError(f"delay must be >= 0 seconds, not {delay!r}")
        rule = Rule(point, action, nth, key, probability, None if delay is None else float(delay))
        self.rules.append(rule)
        return self

    # -- firing ------------------------------------------------------------------------

    def hit(self, point: str, key: str | None = None, clock: Clock | None = None) -> str | None:
        """Record that ``point`` was reached for ``key``; act if a rule matches.

        Returns None when nothing fired, or the action's name for the actions that let
        the caller carry on (``delay``). Raises for the others (or never returns: kill).
        """
        with self._lock:
            self._point_counts[point] += 1
            hit = Hit(point, key, self._point_counts[point])
            self.hits.append(hit)
            chosen = self._match(hit)
            if chosen is None:
                if self.on_hit is not None:
                    self.on_hit(hit)
                return None
            fired = Fired(point, key, hit.n, chosen.action, str(chosen))
            self.fired.append(fired)
        if self.on_hit is not None:
            self.on_hit(hit)
        if self.on_fire is not None:
            self.on_fire(fired)
        return _act(chosen, fired, clock)

    def _match(self, hit: Hit) -> Rule | None:
        """The first rule that fires at this hit (every rule's counters still advance)."""
        chosen = None
        for index, rule in enumerate(self.rules):
            if rule.point != hit.point or (rule.key is not None and rule.key != hit.key):
                continue
            self._rule_counts[index] += 1
            if rule.nth is not None and self._rule_counts[index] != rule.nth:
                continue
            # Draw only for probabilistic rules, so adding a plain rule keeps the others' luck.
            if rule.probability is not None and self.rng.random() >= rule.probability:
                continue
            if chosen is None:
                chosen = rule
        return chosen

    # -- reading -----------------------------------------------------------------------

    def fired_at(self, point: str, action: str | None = None) -> bool:
        """True if a fault fired at ``point`` (of ``action``, when given)."""
        return any(f.point == point and (action is None or f.action == action) for f in self.fired)

    def points_hit(self) -> list[str]:
        """Distinct points reached, in first-hit order."""
        return list(dict.fromkeys(h.point for h in self.hits))

    def hit_count(self, point: str) -> int:
        """How many times ``point`` was reached."""
        return self._point_counts[point]

    def fresh(self) -> FaultPlan:
        """An equal plan with nothing hit yet (the same seed, the same rules)."""
        return FaultPlan(self.seed, list(self.rules), on_fire=self.on_fire, on_hit=self.on_hit)

    # -- replay ------------------------------------------------------------------------

    def replay(self) -> str:
        """The one-line recipe: ``FaultPlan.parse(plan.replay()) == plan``."""
        return "; ".join([f"seed={self.seed}", *(str(r) for r in self.rules)])

    def __str__(self) -> str:
        return self.replay()

    @classmethod
    def parse(cls, text: str) -> FaultPlan:
        """Rebuild a plan from its replay line (what ``str(plan)`` printed)."""
        parts = [p.strip() for p in text.strip().split(";") if p.strip()]
        if not parts or not parts[0].startswith("seed="):
            raise ValueError(
                f"a fault plan line starts with 'seed=<n>', got {text!r}; "
                "copy the whole line the run printed"
            )
        try:
            plan = cls(seed=int(parts[0][5:]))
        except ValueError:
            raise ValueError(f"seed must be a whole number in {parts[0]!r}") from None
        for part in parts[1:]:
            head, *options = part.split()
            point, sep, action = head.partition(":")
            if not sep:
                raise ValueError(f"rule {part!r} must start with point:action")
            kwargs: dict[str, object] = {}
            for option in options:
                name, _, value = option.partition("=")
                if name == "nth":
                    kwargs["nth"] = int(value)
                elif name == "key":
                    kwargs["key"] = unquote(value)
                elif name == "p":
                    kwargs["probability"] = float(value)
                elif name == "delay":
                    kwargs["delay"] = float(value)
                else:
                    raise ValueError(
                        f"unknown option {name!r} in rule {part!r} (nth, key, p, delay)"
                    )
            plan.at(point, action, **kwargs)  # type: ignore[arg-type]
        return plan

    def __repr__(self) -> str:
        return f"FaultPlan.parse({self.replay()!r})"


def _act(rule: Rule, fired: Fired, clock: Clock | None) -> str | None:
    where = f"at {fired.point}" + (f" for {fired.key}" if fired.key else "")
    if rule.action == "delay":
        if clock is None:
            raise ValueError(f"a delay fault {where} needs a clock: call hit(..., clock=clock)")
        clock.sleep(rule.delay or 0.0)
        return "delay"
    if rule.action == "raise_transient":
        raise TransientError(f"injected transient failure (503) {where}", status=503)
    if rule.action == "rate_limit":
        retry_after = rule.delay if rule.delay is not None else 1.0
        raise TransientError(
            f"injected rate limit (429, retry after {retry_after:g}s) {where}",
            status=429,
            retry_after=retry_after,
        )
    if rule.action == "raise_permanent":
        raise PermanentError(f"injected permanent failure (400) {where}", status=400)
    if rule.action == "lose_response":
        raise ResponseLost(f"injected: the response was lost {where}")
    if rule.action == "crash":
        raise SimulatedCrash(fired.point, fired.key)
    if rule.action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
        os._exit(137)  # not reached: SIGKILL to oneself lands before kill() returns
    raise AssertionError(f"unhandled action {rule.action}")  # pragma: no cover


def plan_for(rules: Iterable[str], seed: int = 0) -> FaultPlan:
    """A plan from rule strings like ``"after_effect:crash nth=1"`` (a shorter ``parse``)."""
    return FaultPlan.parse("; ".join([f"seed={seed}", *rules]))
