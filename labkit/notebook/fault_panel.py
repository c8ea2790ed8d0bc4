"""The fault panel: one cell of the crash matrix, picked with widgets and judged from the world.

``run_fault(strategy, point, seed)`` runs one scenario of ``labkit.explore`` (the strategy
broken once at the point) and returns its row (verdict, effects, replay line);
``fault_panel()`` wraps it in ipywidgets (a test sets the dropdowns and calls
``button.click()``). Before a notebook runs, the widget's stored output reads as one
short line of text.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

import ipywidgets as widgets  # type: ignore[import-untyped]  # ships no type hints

from labkit.errors import LabkitError
from labkit.explore.matrix import run_scenario
from labkit.explore.strategies import STRATEGIES
from labkit.explore.verdicts import Row
from labkit.faults import LOST_RESPONSE, MATRIX_POINTS, FaultPlan
from labkit.notebook.scratch import fresh_dir
from labkit.notebook.timelines import VERDICT_COLOURS
from labkit.tables import pre_html


def fault_plan(point: str, seed: int) -> FaultPlan:
    """Break the run once at ``point``: a crash, or a lost reply at ``lost_response``."""
    action = "lose_response" if point == LOST_RESPONSE else "crash"
    return FaultPlan(seed).at(point, action, nth=1)


def run_fault(strategy: str, point: str, seed: int = 0, workdir: str | Path | None = None) -> Row:
    """Run one scenario (``strategy`` broken at ``point``) and judge it from the world.

    With ``workdir`` the run's ``jobs.db`` and ``world.db`` stay there (emptied first)
    so they can be inspected; otherwise they live in a temporary folder.
    """
    if point not in MATRIX_POINTS:
        raise ValueError(f"unknown crash point {point!r}; choose from {', '.join(MATRIX_POINTS)}")
    folder = None if workdir is None else fresh_dir("fault-run", root=workdir)
    return run_scenario(strategy, fault_plan(point, seed), point=point, workdir=folder)


def row_text(row: Row) -> str:
    """Verdict (``-`` if the run never reached the point), effects, seed and replay line."""
    verdict = row.outcome if row.fired else "- (the run never reached this point)"
    return "\n".join(
        [
            f"verdict : {verdict}",
            f"effects : {row.effects} in the world",
            f"attempts: {row.attempts}, restarts {row.restarts}",
            f"fired   : {', '.join(row.fired) or 'nothing'}",
            f"seed    : {row.seed}",
            f"replay  : {row.replay}",
        ]
    )


class FaultPanel(widgets.VBox):  # type: ignore[misc]
    """Pick a strategy, a crash point and a seed; ``run_button`` runs that one scenario.

    After a run, ``last`` holds the ``labkit.explore.verdicts.Row`` and ``result`` shows it.
    """

    def __init__(
        self, strategies: Sequence[str] | None = None, workdir: str | Path | None = None
    ) -> None:
        names = list(strategies or STRATEGIES)
        self.workdir = workdir
        # Labels sized to their words (not the default 80 px, which cut "crash at" short),
        # and a row that wraps instead of running past a 1366 px window.
        label = {"description_width": "initial"}
        self.strategy = widgets.Dropdown(
            description="strategy",
            options=[(f"{n}: {STRATEGIES[n].summary}", n) for n in names],
            style=label,
            layout=widgets.Layout(width="34em", max_width="100%"),
        )
        self.point = widgets.Dropdown(
            description="crash at",
            options=list(MATRIX_POINTS),
            style=label,
            layout=widgets.Layout(width="16em"),
        )
        self.seed = widgets.IntText(
            description="seed", value=0, style=label, layout=widgets.Layout(width="9em")
        )
        self.run_button = widgets.Button(description="Run", button_style="primary")
        self.result = widgets.HTML()
        self.last: Row | None = None
        super().__init__(
            [
                widgets.HBox(
                    [self.strategy, self.point, self.seed, self.run_button],
                    layout=widgets.Layout(flex_flow="row wrap"),
                ),
                self.result,
            ]
        )
        self.run_button.on_click(lambda _b: self.run())

    def run(self) -> Row | None:
        """Run the chosen scenario and show its verdict; errors are shown, not raised."""
        try:
            self.last = run_fault(
                self.strategy.value, self.point.value, int(self.seed.value), workdir=self.workdir
            )
        except (ValueError, LabkitError) as exc:
            self.result.value = pre_html(f"not run: {exc}")
            return None
        self.result.value = verdict_badge(self.last) + pre_html(row_text(self.last))
        return self.last

    def __repr__(self) -> str:
        # The text JupyterLab shows for this output before the notebook runs.
        return "Fault panel: run the notebook, pick a strategy, a crash point and a seed."


def verdict_badge(row: Row) -> str:
    """The verdict of one run as a coloured label (the crash matrix grid's colours)."""
    verdict = row.outcome if row.fired else "-"
    colour = VERDICT_COLOURS.get(verdict, VERDICT_COLOURS["-"])
    return (
        f'<span style="background:{colour};color:#000;padding:2px 10px;'
        f'font-weight:bold;border-radius:3px">{html.escape(verdict)}</span>'
    )


def fault_panel(
    strategies: Sequence[str] | None = None, workdir: str | Path | None = None
) -> FaultPanel:
    """The fault panel over ``labkit.explore.strategies`` (all unless ``strategies`` given)."""
    return FaultPanel(strategies, workdir)
