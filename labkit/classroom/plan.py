"""What a grading worker needs to grade as the run says: the ``Settings`` as JSON.

A ``Settings`` holds a ``Confinement`` probed on one machine (its bubblewrap, its uids,
its control groups): it cannot travel to another process or machine. A ``Plan`` holds
what the instructor chose (limits, timeouts, network, sandbox, seed), and each worker
probes its own machine's confinement from it. A run keeps its plan in ``plan.json``, so
a resumed run grades with the settings it started with.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labkit.grading.grade import Settings, seeded_environment
from labkit.grading.isolation.confine import Confinement
from labkit.grading.isolation.limits import Limits


@dataclass(frozen=True)
class Plan:
    """The instructor's choices for one run, as plain data."""

    limits: dict[str, int] = field(default_factory=lambda: dataclasses.asdict(Limits()))
    network: bool = False
    sandbox: bool = True
    cell_timeout: float = 30.0
    check_timeout: float | None = None
    timeout_factor: float = 1.0
    seed: int | None = None
    #: How long a claimed notebook stays a worker's without a word from it: a killed
    #: worker's notebook is graded again this long after (a live one renews it).
    lease_s: float = 10.0

    @classmethod
    def of(cls, settings: Settings, lease_s: float = 10.0) -> Plan:
        """The plan a ``Settings`` was made from (confined if its confinement is)."""
        c = settings.confinement
        return cls(
            dataclasses.asdict(c.limits),
            c.network,
            c.isolated,
            settings.cell_timeout,
            settings.check_timeout,
            settings.timeout_factor,
            settings.seed,
            lease_s,
        )

    def settings(self, solutions: Path) -> Settings:
        """This machine's ``Settings`` for the plan: its own confinement, probed here.

        Raises ``RuntimeError`` when the machine cannot confine student code as the plan
        asks (the refusal says what to install), so no worker grades unconfined.
        """
        confinement = Confinement.detect(Limits(**self.limits), self.network, self.sandbox)
        refused = confinement.refusal() if self.sandbox else None
        if refused:
            raise RuntimeError(refused)
        if self.seed is not None:
            zone = seeded_environment(self.seed)["TZ"]
            confinement = dataclasses.replace(confinement, timezone=zone)
        return Settings(
            solutions,
            cell_timeout=self.cell_timeout,
            check_timeout=self.check_timeout,
            timeout_factor=self.timeout_factor,
            confinement=confinement,
            seed=self.seed,
        )

    def environment(self) -> dict[str, str]:
        """The environment a worker process must start with: the seed's str-hash salt."""
        return (
            {}
            if self.seed is None
            else {"PYTHONHASHSEED": seeded_environment(self.seed)["PYTHONHASHSEED"]}
        )

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Plan:
        data: dict[str, Any] = json.loads(text)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(
                f"a grading plan with unknown fields {unknown}: a newer labkit wrote it"
            )
        return cls(**data)
