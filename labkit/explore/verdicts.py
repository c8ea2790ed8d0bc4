"""The crash table's verdicts: one ``Row`` per run, and the ``Matrix`` that pivots them.

A row says where a run broke, what the world counted and how to run it again (its
``seed`` and one-line ``replay``). ``Matrix`` shows rows as a strategy x point table of
verdicts (``ok``, ``duplicate``, ``lost``, ``unknown``; ``-`` where the point was never
reached). ``labkit.explore.matrix`` makes the rows;
``labkit.notebook.timelines.matrix_grid`` draws a matrix.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from labkit.tables import format_table

OUTCOMES = ("ok", "duplicate", "lost", "unknown")


@dataclass(frozen=True)
class Row:
    """One run: where it broke, what the world says, and how to run it again."""

    strategy: str
    point: str
    outcome: str
    effects: int
    fired: tuple[str, ...]
    seed: int
    replay: str
    attempts: int = 0
    restarts: int = 0
    hits: int = 0


@dataclass
class Matrix:
    """Rows of runs, shown as a strategy x point table of verdicts."""

    rows: list[Row] = field(default_factory=list)

    def outcome(self, strategy: str, point: str) -> str:
        """The verdict of one cell (``-`` if the point was never reached)."""
        for row in self.rows:
            if row.strategy == strategy and row.point == point:
                return row.outcome if row.fired else "-"
        raise KeyError(f"no run of {strategy!r} at {point!r} in this matrix")

    def points(self) -> list[str]:
        return list(dict.fromkeys(r.point for r in self.rows))

    def strategies(self) -> list[str]:
        return list(dict.fromkeys(r.strategy for r in self.rows))

    def pivot(self) -> list[dict[str, str]]:
        """One dict per strategy: ``{"strategy": name, point: verdict, ...}``."""
        return [
            {"strategy": s, **{p: self._cell(s, p) for p in self.points()}}
            for s in self.strategies()
        ]

    def _cell(self, strategy: str, point: str) -> str:
        try:
            return self.outcome(strategy, point)
        except KeyError:
            return ""

    def table(self) -> str:
        """The pivot as plain text, with the seed to replay it."""
        seeds = sorted({r.seed for r in self.rows})
        return format_table(self.pivot()) + f"\nseed={','.join(map(str, seeds))}"

    def details(self, columns: Sequence[str] | None = None) -> str:
        """Every row as text (outcome, effects, attempts, restarts, replay line)."""
        cols = columns or (
            "strategy",
            "point",
            "outcome",
            "effects",
            "attempts",
            "restarts",
            "replay",
        )
        return format_table(self.rows, cols)

    def counts(self) -> dict[str, int]:
        """How many reached cells ended in each verdict."""
        found = {o: 0 for o in OUTCOMES}
        for row in self.rows:
            if row.fired:
                found[row.outcome] += 1
        return found

    def __str__(self) -> str:
        return self.table()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.table())
