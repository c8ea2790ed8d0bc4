"""Timelines of attempts: who ran which job when, where a worker died, how long jobs waited.

The picture comes from the store's attempts history (``JobStore.attempts``), which
database triggers write, so it shows what really happened rather than what a worker
says it did. Two steps, so the logic can be tested without drawing:

- ``timeline(attempts, crashed_at=None, now=None, origin=None)`` is a pure function:
  attempts in, a ``Timeline`` of plottable pieces out (seconds since ``origin``):

  ``Segment``  one attempt on its worker's lane, coloured by how it ended;
  ``Gap``      the time a job waited between two attempts: ``backoff`` after a retryable
               failure, ``lease`` after a worker died (nobody may take the job until
               the dead worker's lease runs out), ``dead letter`` before a redrive;
  ``Crash``    an attempt that ended because its lease expired (the worker died or
               froze).

  The store knows when a dead worker's job was taken over, not when the worker died.
  Pass ``crashed_at={(job_id, attempt): time}`` when you know (a notebook catching a
  ``SimulatedCrash`` does); otherwise the attempt's bar runs until the takeover.

- ``plot_timeline(tl, ax=None, title=None)`` draws it with matplotlib (one lane per
  worker, a cross at each crash, dotted lines for the waits);
  ``store_timeline(store, ...)`` reads every job's attempts from a store first.

Production dashboards (Flower for Celery, the RQ dashboard, Grafana over a runs table)
show the same thing live; labkit draws it from the table so a lesson can point at it.

``job_states_mermaid()`` and ``breaker_mermaid()`` are the Mermaid state diagrams of
lessons 04 and 08 (JupyterLab 4 draws a ```` ```mermaid ```` block in a markdown cell).
They are built from ``JOB_STATE_EDGES`` and ``BREAKER_EDGES``, which the tests hold
against ``labkit.job.TRANSITIONS`` and against the transitions a real
``CircuitBreaker`` makes, and the lessons' markdown against these functions.

``matrix_grid(matrix)`` shows the crash matrix (``labkit.explore.verdicts.Matrix``) as a grid
coloured by verdict (``ok``, ``duplicate``, ``lost``, ``unknown``, ``-`` unreached)
with a legend; its plain-text twin is ``matrix.table()`` plus the same legend in words.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from labkit.job import Attempt
from labkit.tables import TABLE_STYLE, Rich, html_cell

#: The job's moves with the event that makes each one (``labkit.job.TRANSITIONS``).
JOB_STATE_EDGES: tuple[tuple[str, str, str], ...] = (
    ("pending", "running", "claim"),
    ("running", "succeeded", "complete"),
    ("running", "retry_wait", "transient failure"),
    ("retry_wait", "running", "claim after run_after"),
    ("running", "dead", "permanent, or out of attempts"),
    ("running", "running", "lease expired"),
    ("dead", "pending", "redrive"),
    ("pending", "cancelled", "cancel"),
    ("retry_wait", "cancelled", "cancel"),
)
#: The breaker's moves (``labkit.patterns.breaker.CircuitBreaker``) with their causes.
BREAKER_EDGES: tuple[tuple[str, str, str], ...] = (
    ("closed", "open", "threshold failures in a row"),
    ("open", "half_open", "cooldown has passed"),
    ("half_open", "closed", "the trial call succeeds"),
    ("half_open", "open", "the trial call fails"),
)


def mermaid_states(
    edges: Iterable[tuple[str, str, str]], start: tuple[str, str], final: Iterable[str] = ()
) -> str:
    """A Mermaid ``stateDiagram-v2``: ``start`` is (first state, how it is entered)."""
    first, how = start
    lines = ["stateDiagram-v2", f"    [*] --> {first}: {how}"]
    lines += [f"    {a} --> {b}: {label}" for a, b, label in edges]
    lines += [f"    {state} --> [*]" for state in final]
    return "\n".join(lines)


def job_states_mermaid() -> str:
    """Lesson 04's diagram: the job states and the only moves between them."""
    return mermaid_states(JOB_STATE_EDGES, ("pending", "enqueue"),
                          final=("succeeded", "cancelled"))


def breaker_mermaid() -> str:
    """Lesson 08's diagram: closed, open, half_open and what moves a breaker between them."""
    return mermaid_states(BREAKER_EDGES, ("closed", "created"))


#: Crash-matrix verdicts as cell colours (dark text on light fills reads in both themes).
VERDICT_COLOURS: dict[str, str] = {
    "ok": "#c8e6c9",
    "duplicate": "#ffe0b2",
    "lost": "#ffcdd2",
    "unknown": "#e1bee7",
    "-": "#eeeeee",
}
#: What each verdict means, for the legend under the grid.
VERDICT_MEANING: dict[str, str] = {
    "ok": "the effect happened exactly once",
    "duplicate": "the effect happened more than once",
    "lost": "the job was acknowledged, the effect never happened",
    "unknown": "the world cannot tell",
    "-": "the run never reached this point",
}

#: Bar colour per attempt outcome (``running``: still open).
COLOURS: dict[str, str] = {
    "succeeded": "tab:green",
    "retry_wait": "tab:orange",
    "dead": "tab:gray",
    "lease_expired": "tab:red",
    "running": "tab:blue",
}
#: What a job waited for after an attempt that ended this way.
WAIT_REASONS: dict[str, str] = {
    "retry_wait": "backoff",
    "lease_expired": "lease",
    "dead": "dead letter",
}


@dataclass(frozen=True)
class Segment:
    """One attempt on one worker's lane, in seconds since the timeline's origin."""

    worker: str
    job_id: int
    attempt: int
    start: float
    end: float
    outcome: str


@dataclass(frozen=True)
class Gap:
    """A job waiting between attempt ``after_attempt`` and the next one."""

    job_id: int
    after_attempt: int
    start: float
    end: float
    reason: str
    from_worker: str
    to_worker: str


@dataclass(frozen=True)
class Crash:
    """An attempt that lost its lease; ``exact`` is False when the death time is unknown."""

    worker: str
    job_id: int
    attempt: int
    at: float
    exact: bool


@dataclass(frozen=True)
class Timeline:
    """Everything ``plot_timeline`` draws; ``workers`` in order of first appearance."""

    workers: tuple[str, ...]
    segments: tuple[Segment, ...]
    gaps: tuple[Gap, ...]
    crashes: tuple[Crash, ...]
    origin: float
    end: float


def timeline(
    attempts: Iterable[Attempt],
    crashed_at: Mapping[tuple[int, int], float] | None = None,
    now: float | None = None,
    origin: float | None = None,
) -> Timeline:
    """Turn attempt rows into lanes, waits and crash marks (see the module docstring).

    ``now`` closes attempts still open (default: their start); ``origin`` is time zero
    (default: the first start).
    """
    rows = sorted(attempts, key=lambda a: (a.started_at, a.job_id, a.attempt))
    crashed_at = crashed_at or {}
    if origin is None:
        origin = rows[0].started_at if rows else 0.0
    for job_id, attempt in crashed_at:
        if not any(a.job_id == job_id and a.attempt == attempt for a in rows):
            raise ValueError(
                f"crashed_at names job {job_id} attempt {attempt}, which is not in the "
                "attempts given; pass the (job_id, attempt) of a row you are plotting"
            )
    segments, crashes = [], []
    for a in rows:
        finished = a.finished_at if a.finished_at is not None else now
        end = max(finished if finished is not None else a.started_at, a.started_at)
        outcome = a.outcome or "running"
        key = (a.job_id, a.attempt)
        if outcome == "lease_expired":
            exact = key in crashed_at
            if exact:
                end = crashed_at[key]
                if end < a.started_at or (finished is not None and end > finished):
                    raise ValueError(
                        f"job {a.job_id} attempt {a.attempt} crashed at {end}, outside the "
                        f"attempt ({a.started_at} to {finished})"
                    )
            crashes.append(Crash(a.worker, a.job_id, a.attempt, end - origin, exact))
        segments.append(
            Segment(a.worker, a.job_id, a.attempt, a.started_at - origin, end - origin, outcome)
        )
    gaps = []
    by_job: dict[int, list[Segment]] = {}
    for s in segments:
        by_job.setdefault(s.job_id, []).append(s)
    for runs in by_job.values():
        for before, after in zip(runs, runs[1:], strict=False):
            if after.start > before.end:
                reason = WAIT_REASONS.get(before.outcome, "waiting")
                gaps.append(
                    Gap(
                        before.job_id,
                        before.attempt,
                        before.end,
                        after.start,
                        reason,
                        before.worker,
                        after.worker,
                    )
                )
    workers = tuple(dict.fromkeys(s.worker for s in segments))
    end_all = max([s.end for s in segments], default=0.0)
    return Timeline(workers, tuple(segments), tuple(gaps), tuple(crashes), origin, end_all)


def store_timeline(
    store: Any,
    crashed_at: Mapping[tuple[int, int], float] | None = None,
    now: float | None = None,
    origin: float | None = None,
) -> Timeline:
    """``timeline`` over every job's attempts in ``store`` (a ``JobStore``)."""
    rows = [a for job in store.jobs() for a in store.attempts(job.id)]
    return timeline(rows, crashed_at, now if now is not None else store.clock.now(), origin)


def plot_timeline(tl: Timeline, ax: Any = None, title: str | None = None) -> Any:
    """Draw ``tl``: a lane per worker, bars per attempt, crosses at crashes; returns the axes."""
    # Drawing only: the pure part needs no matplotlib.
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Rectangle

    if ax is None:
        _fig, ax = plt.subplots(figsize=(9, 1.6 + 0.7 * max(len(tl.workers), 1)))
    lane = {w: i for i, w in enumerate(tl.workers)}
    width = max(tl.end, 1.0)
    for s in tl.segments:
        # A zero-length attempt still gets a sliver, so it can be seen.
        ax.barh(
            lane[s.worker],
            max(s.end - s.start, width / 200),
            left=s.start,
            height=0.5,
            color=COLOURS.get(s.outcome, "tab:purple"),
            edgecolor="black",
            linewidth=0.5,
        )
        ax.annotate(
            f"{s.job_id}#{s.attempt}",
            # Lanes run top-down (the y axis is inverted), so "- 0.3" is above the bar.
            (s.start, lane[s.worker] - 0.3),
            fontsize=7,
            va="bottom",
        )
    for g in tl.gaps:
        y0, y1 = lane[g.from_worker], lane[g.to_worker]
        ax.plot([g.start, g.end], [y0, y1], linestyle=":", color="black", linewidth=1)
        ax.annotate(
            f"{g.reason} {round(g.end - g.start, 1):g}s",
            ((g.start + g.end) / 2, (y0 + y1) / 2 + 0.1),
            fontsize=7,
            ha="center",
            va="top",
        )
    for c in tl.crashes:
        ax.plot(c.at, lane[c.worker], marker="X", markersize=12, color="darkred", zorder=5)
    ax.set_yticks(range(len(tl.workers)), labels=list(tl.workers))
    ax.set_ylim(len(tl.workers) - 0.4, -0.9)
    ax.set_xlim(-width * 0.02, width * 1.05)
    ax.set_xlabel("seconds since the first claim    (bar labels: job id#attempt)")
    handles = [Rectangle((0, 0), 1, 1, color=c) for o, c in COLOURS.items() if o != "running"]
    ax.legend(
        [*handles, Line2D([], [], marker="X", color="darkred", linestyle="")],
        [*(o for o in COLOURS if o != "running"), "worker died"],
        fontsize=7,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.3),
        ncol=5,
        frameon=False,
    )
    if title:
        ax.set_title(title)
    return ax


def matrix_grid(matrix: Any) -> Rich:
    """The crash matrix as a grid coloured by verdict, with a legend and the replay seed.

    ``matrix`` is a ``labkit.explore.verdicts.Matrix``; only verdicts found in it are in the legend.
    """
    points = matrix.points()
    pivot = matrix.pivot()
    found = [v for v in VERDICT_COLOURS if any(v in row.values() for row in pivot)]
    # Point names may wrap after "_", so seven columns fit beside the file browser.
    head = html_cell("strategy \\ crash point", "th") + "".join(
        html_cell(p, "th") for p in points
    )
    body = ""
    for row in pivot:
        cells = html_cell(row["strategy"], "th", "white-space:nowrap")
        for p in points:
            verdict = row[p]
            colour = VERDICT_COLOURS.get(verdict, "#ffffff")
            cells += html_cell(verdict, "td", f"background:{colour};color:#000;"
                               "text-align:center;white-space:nowrap;border:1px solid #fff")
        body += f"<tr>{cells}</tr>"
    legend = " ".join(
        f'<span style="background:{VERDICT_COLOURS[v]};color:#000;padding:1px 8px;'
        f'white-space:nowrap">{v}</span> {VERDICT_MEANING[v]}'
        for v in found
    )
    seeds = ",".join(str(s) for s in sorted({r.seed for r in matrix.rows}))
    html_out = (
        f'<table class="labkit-matrix" style="{TABLE_STYLE}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table>"
        f'<div style="margin:0.3em 0;line-height:1.9">{legend}</div>'
        f"<div>seed={seeds}</div>"
    )
    words = "\n".join(f"  {v:<9}  {VERDICT_MEANING[v]}" for v in found)
    return Rich(f"{matrix.table()}\nlegend:\n{words}", html_out)
