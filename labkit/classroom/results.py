"""A ``Graded`` as the JSON a grading job's completion stores, and back.

The result is written in the same statement that completes the job, so a graded
notebook is either done with its result or not done at all; nothing else keeps it.
"""

from __future__ import annotations

from typing import Any

from labkit.grading.checks import Outcome
from labkit.grading.gradebook import Graded, NotebookStatus


def to_json(graded: Graded) -> dict[str, Any]:
    """Everything the gradebook and the feedback need, as JSON-able data."""
    return {
        "student": graded.student,
        "exercise": graded.exercise,
        "title": graded.title,
        "possible": graded.possible,
        "notebook": graded.notebook,
        "outcomes": [o.to_dict() for o in graded.outcomes],
        "notes": list(graded.notes),
        "status": str(graded.status),
    }


def from_json(data: dict[str, Any]) -> Graded:
    """The ``Graded`` that ``to_json`` wrote."""
    return Graded(
        student=str(data["student"]),
        exercise=str(data["exercise"]),
        title=str(data["title"]),
        possible=int(data["possible"]),
        notebook=data["notebook"],
        outcomes=[Outcome(**o) for o in data["outcomes"]],
        notes=[str(n) for n in data["notes"]],
        status=NotebookStatus(data["status"]),
    )
