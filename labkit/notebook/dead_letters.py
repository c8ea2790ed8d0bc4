"""The dead-letter screen: filters, a dry run, and redrive of exactly the ticked jobs.

The widgets are thin. Everything they do is a plain function a test (or the CLI) calls
directly; the callbacks only read widget values, call it, and show the text it returns:
``dead_rows(store, kind=None, error_class=None)`` the dead letters as table rows;
``plan_redrive(store, ids)`` the dry run (what would go back, what would be refused);
``redrive_selected(store, ids, note="")`` redrives exactly those jobs, each with its own
key, and reports what happened. An empty selection raises ``NothingSelected``: the
screen has no "redrive everything" (``JobStore.redrive_where`` has a ``limit`` for bulk
work, on purpose).

``dead_letter_screen(store)`` wraps them in ipywidgets, which need no browser: a test
sets ``checkbox.value`` and calls ``button.click()``. The dead letters are a grid (a tick
box, then one cell per column) that fits a 1366 px window: long reasons wrap between
words, error classes and numbers never break. Before a notebook runs, the widget's
stored output reads as one short line of text.

In production nobody builds this: Oban Web and River UI list and retry dead jobs with
filters and bulk actions, and a broker's own console (RabbitMQ management, SQS "start
DLQ redrive") moves dead messages back. Celery has no dead-letter state and Flower no
dead-letter screen or redrive: it monitors tasks and workers; a Celery dead-letter queue
is a broker feature (a RabbitMQ dead-letter exchange) or a table of your own.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import ipywidgets as widgets  # type: ignore[import-untyped]  # ships no type hints

from labkit.errors import InvalidTransition, LabkitError, NotFound
from labkit.job import Job, JobState
from labkit.store import JobStore
from labkit.tables import Table, age_text, format_table, html_cell, pre_html

ALL = "(all)"
DEAD_COLUMNS = ("id", "kind", "key", "reason", "error_class", "attempts", "age")
REASON_WIDTH = 160
#: The grid's column widths: a tick box, then DEAD_COLUMNS; only the reason stretches.
DEAD_GRID = (
    "2em max-content minmax(6em, max-content) minmax(8em, 16em) minmax(14em, 1fr) "
    "max-content max-content max-content"
)
NOWRAP_COLUMNS = ("id", "error_class", "attempts", "age")


class NothingSelected(LabkitError, ValueError):
    """Nothing is selected, so nothing was redriven: tick the rows to send back first."""


def dead_rows(
    store: JobStore, kind: str | None = None, error_class: str | None = None, limit: int = 100
) -> list[dict[str, Any]]:
    """The dead letters, oldest first, as rows of ``DEAD_COLUMNS`` (reason shortened)."""
    rows = []
    for d in store.dead_letters(kind=kind, limit=limit):
        if error_class is not None and d.error_class != error_class:
            continue
        reason = d.reason if len(d.reason) <= REASON_WIDTH else d.reason[: REASON_WIDTH - 1] + "…"
        rows.append(
            {
                "id": d.id,
                "kind": d.kind,
                "key": d.key,
                "reason": reason,
                "error_class": d.error_class,
                "attempts": d.attempts,
                "age": age_text(d.age_s),
            }
        )
    return rows


@dataclass
class RedriveReport:
    """What a (dry or real) redrive did: jobs sent back, jobs refused and why, counts after."""

    dry_run: bool
    jobs: list[Job] = field(default_factory=list)
    refused: list[tuple[int, str]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    def text(self) -> str:
        verb = "would redrive" if self.dry_run else "redrove"
        lines = [
            f"{verb} {len(self.jobs)} job(s)"
            + (" (dry run: nothing changed)" if self.dry_run else " (same keys)")
        ]
        if self.jobs:
            lines.append(format_table(self._job_rows()))
        lines += [f"refused job {job_id}: {why}" for job_id, why in self.refused]
        if self.counts:
            lines += ["", "jobs by state:", format_table([self.counts])]
        return "\n".join(lines)

    def _job_rows(self) -> list[dict[str, Any]]:
        """The redriven jobs, one row each, for the text and the HTML report alike."""
        return [
            {
                "id": j.id,
                "kind": j.kind,
                "key": j.key,
                "state": str(j.state),
                "redrives": j.redrives,
            }
            for j in self.jobs
        ]

    def html(self) -> str:
        """The same report for the screen: a bold summary, then HTML tables."""
        verb = "would redrive" if self.dry_run else "redrove"
        note = " (dry run: nothing changed)" if self.dry_run else " (same keys)"
        parts = [f"<p><b>{verb} {len(self.jobs)} job(s)</b>{note}</p>"]
        if self.jobs:
            parts.append(Table(self._job_rows()).html)
        parts += [
            f"<p>refused job {job_id}: {html.escape(why)}</p>" for job_id, why in self.refused
        ]
        if self.counts:
            parts += ["<p>jobs by state:</p>", Table([self.counts]).html]
        return "".join(parts)


def _need_ids(ids: Iterable[int]) -> list[int]:
    chosen = list(dict.fromkeys(int(i) for i in ids))
    if not chosen:
        raise NothingSelected()
    return chosen


def plan_redrive(store: JobStore, ids: Iterable[int]) -> RedriveReport:
    """The dry run: which selected jobs are still dead (would go back), which would be refused."""
    report = RedriveReport(dry_run=True)
    for job_id in _need_ids(ids):
        try:
            job = store.get(job_id)
        except NotFound as exc:
            report.refused.append((job_id, str(exc)))
            continue
        if job.state == JobState.DEAD:
            report.jobs.append(job)
        else:
            report.refused.append((job_id, f"it is {job.state} now, not dead; left alone"))
    return report


def redrive_selected(store: JobStore, ids: Iterable[int], note: str = "") -> RedriveReport:
    """Redrive each selected job (same id, same key); a job no longer dead is refused, not fatal.

    Each redrive is its own transaction, so a job someone else already redrove (or that
    was deleted) is reported and the others still go back.
    """
    chosen = _need_ids(ids)
    report = RedriveReport(dry_run=False)
    for job_id in chosen:
        try:
            report.jobs.append(store.redrive(job_id, note=note))
        except (InvalidTransition, NotFound) as exc:
            report.refused.append((job_id, str(exc)))
    report.counts = store.counts()
    return report


def _grid_cell(value: Any, column: str, header: bool = False) -> widgets.HTML:
    """One cell of the dead-letter grid: wraps between words unless it must stay whole."""
    style = "white-space:nowrap" if column in NOWRAP_COLUMNS or header else ""
    inner = html_cell(
        value,
        "div",
        ("font-weight:bold;" if header else "")
        + style
        + ";line-height:1.35;border-bottom:none;padding:2px 4px",
    )
    return widgets.HTML(inner, layout=widgets.Layout(height="auto", margin="0"))


def _option(value: str) -> str | None:
    return None if value == ALL else value


class DeadLetterScreen(widgets.VBox):  # type: ignore[misc]
    """The dead-letter screen; build it with ``dead_letter_screen(store)``.

    Parts a test (or a notebook) drives: ``kind`` and ``error_class`` (dropdowns),
    ``checkboxes`` (``{job_id: Checkbox}`` for the rows shown), ``note``, the buttons
    ``dry_run_button``, ``redrive_button``, ``refresh_button``, and ``message`` (HTML);
    ``text`` is the message as plain text (what the CLI would print).
    """

    def __init__(self, store: JobStore) -> None:
        self.store = store
        label = {"description_width": "initial"}
        self.kind = widgets.Dropdown(description="kind", options=[ALL], style=label)
        self.error_class = widgets.Dropdown(description="error class", options=[ALL], style=label)
        self.note = widgets.Text(
            description="note",
            placeholder="why (stored with the redrive)",
            style=label,
            layout=widgets.Layout(width="24em"),
        )
        self.dry_run_button = widgets.Button(description="Dry run", icon="eye")
        self.redrive_button = widgets.Button(description="Redrive selected", button_style="warning")
        self.refresh_button = widgets.Button(description="Refresh", icon="refresh")
        self.table = widgets.VBox()
        self.message = widgets.HTML()
        self.text = ""
        self.checkboxes: dict[int, widgets.Checkbox] = {}
        self._refreshing = False
        #: The filter and the ids the table shows, so a refresh that would show the same
        #: rows keeps its widgets (and a tick the browser is still sending).
        self._shown: tuple[Any, ...] | None = None
        super().__init__(
            [
                widgets.HTML("<b>Dead letters</b> (oldest first)"),
                widgets.HBox([self.kind, self.error_class, self.refresh_button]),
                self.table,
                widgets.HBox([self.note, self.dry_run_button, self.redrive_button]),
                self.message,
            ]
        )
        self.kind.observe(self._on_filter, names="value")
        self.error_class.observe(self._on_filter, names="value")
        self.refresh_button.on_click(lambda _b: self.refresh())
        self.dry_run_button.on_click(lambda _b: self._act(dry_run=True))
        self.redrive_button.on_click(lambda _b: self._act(dry_run=False))
        self.refresh()

    def selected(self) -> list[int]:
        """Ids of the ticked rows, in table order."""
        return [job_id for job_id, box in self.checkboxes.items() if box.value]

    def refresh(self) -> None:
        """Re-read the store: filter choices, rows (keeping ticks on rows still shown)."""
        self._refreshing = True
        try:
            everything = dead_rows(self.store)
            for dropdown, column in ((self.kind, "kind"), (self.error_class, "error_class")):
                values = sorted({str(r[column]) for r in everything})
                current = dropdown.value if dropdown.value in values else ALL
                dropdown.options = [ALL, *values]
                dropdown.value = current
        finally:
            self._refreshing = False
        ticked = set(self.selected())
        rows = dead_rows(self.store, _option(self.kind.value), _option(self.error_class.value))
        shown = (self.kind.value, self.error_class.value, *(r["id"] for r in rows))
        if shown == self._shown:
            # Dead rows change only by leaving (a redrive) or arriving: the same ids are the
            # same rows. Rebuilding them would drop a tick sent while the browser echoed
            # the filter change back (a second refresh right after the first).
            return
        self._shown = shown
        self.checkboxes = {
            r["id"]: widgets.Checkbox(
                value=r["id"] in ticked,
                indent=False,
                layout=widgets.Layout(width="2em", margin="0"),
            )
            for r in rows
        }
        if not rows:
            self.table.children = [widgets.HTML(pre_html("(no dead letters)"))]
            return
        cells: list[widgets.Widget] = [widgets.HTML("")]
        cells += [_grid_cell(c, c, header=True) for c in DEAD_COLUMNS]
        for row, box in zip(rows, self.checkboxes.values(), strict=True):
            cells.append(box)
            cells += [_grid_cell(row[c], c) for c in DEAD_COLUMNS]
        self.table.children = [
            widgets.GridBox(
                cells,
                layout=widgets.Layout(
                    grid_template_columns=DEAD_GRID,
                    grid_gap="2px 6px",
                    width="100%",
                    align_items="flex-start",
                ),
            )
        ]

    def _on_filter(self, _change: Any) -> None:
        if not self._refreshing:
            self.refresh()

    def _act(self, dry_run: bool) -> None:
        try:
            if dry_run:
                report = plan_redrive(self.store, self.selected())
            else:
                report = redrive_selected(self.store, self.selected(), note=self.note.value)
        except LabkitError as exc:
            counts = self.store.counts()
            self._say(
                f"{exc}\n\njobs by state:\n{format_table([counts])}",
                f"<p><b>{html.escape(str(exc))}</b></p><p>jobs by state:</p>"
                + Table([counts]).html,
            )
            return
        if not dry_run:
            self.refresh()
        self._say(report.text(), report.html())

    def _say(self, text: str, page: str) -> None:
        self.text = text
        self.message.value = page

    def __repr__(self) -> str:
        # The text JupyterLab shows for this output before the notebook runs.
        return "Dead-letter screen: run the notebook to filter, dry-run and redrive here."


def dead_letter_screen(store: JobStore) -> DeadLetterScreen:
    """The dead-letter screen for ``store``: filter, tick, dry run, redrive selected."""
    return DeadLetterScreen(store)
