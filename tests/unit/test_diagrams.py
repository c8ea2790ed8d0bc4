"""The Mermaid diagrams of lessons 04 and 08 cannot drift from the code they draw.

Job states: the diagram's arrows are exactly ``labkit.job.TRANSITIONS``. Breaker: a real
``CircuitBreaker`` is driven along every path and the transitions it records are
exactly the diagram's arrows. And each lesson's markdown holds the generated block.
"""

from __future__ import annotations

from pathlib import Path

import jupytext
import pytest

from labkit.clock import FakeClock
from labkit.job import TRANSITIONS
from labkit.notebook.timelines import (
    BREAKER_EDGES,
    JOB_STATE_EDGES,
    breaker_mermaid,
    job_states_mermaid,
)
from labkit.patterns.breaker import CircuitBreaker

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def test_job_state_arrows_are_exactly_the_transition_table():
    drawn = {(a, b) for a, b, _label in JOB_STATE_EDGES}
    table = {(str(a), str(b)) for a, targets in TRANSITIONS.items() for b in targets}
    assert drawn == table, f"only drawn: {drawn - table}; only in TRANSITIONS: {table - drawn}"
    assert len(drawn) == len(JOB_STATE_EDGES), "an arrow is drawn twice"


def test_breaker_arrows_are_the_transitions_a_real_breaker_makes(tmp_path):
    clock = FakeClock(1_767_225_600.0)
    breaker = CircuitBreaker("erp", threshold=2, cooldown=30, clock=clock,
                             store_path=tmp_path / "breakers.db")
    for _ in range(2):
        breaker.record_failure()           # closed -> open
    clock.advance(30)
    assert breaker.allow()                 # open -> half_open
    breaker.record_failure()               # half_open -> open
    clock.advance(30)
    assert breaker.allow()                 # open -> half_open
    breaker.record_success()               # half_open -> closed
    seen = {(t.from_state, t.to_state) for t in breaker.history()}
    breaker.close()
    drawn = {(a, b) for a, b, _label in BREAKER_EDGES}
    assert seen == drawn, f"breaker made {sorted(seen)}, the diagram draws {sorted(drawn)}"


@pytest.mark.parametrize(
    ("lesson", "diagram"),
    [
        ("04_job_table", job_states_mermaid),  # the job states
        ("08_breaker_and_queues", breaker_mermaid),  # the breaker
    ],
)
def test_lesson_shows_the_generated_diagram(lesson, diagram):
    block = f"```mermaid\n{diagram()}\n```"
    cells = jupytext.read(NOTEBOOKS / f"{lesson}.py").cells
    markdown = [c.source for c in cells if c.cell_type == "markdown"]
    assert any(block in source for source in markdown), (
        f"{lesson}.py has no markdown cell with the current diagram; paste this block:\n{block}"
    )


@pytest.mark.parametrize("diagram", [job_states_mermaid, breaker_mermaid])
def test_diagram_is_a_mermaid_state_diagram_with_a_start(diagram):
    lines = diagram().splitlines()
    assert lines[0] == "stateDiagram-v2" and lines[1].lstrip().startswith("[*] --> ")
