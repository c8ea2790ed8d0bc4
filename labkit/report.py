"""Plain-text tables of what the database and the world hold, for notebooks and the CLI.

Text, not HTML, so nbval compares outputs exactly and a terminal shows the same thing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, is_dataclass
from typing import Any

from labkit.clock import isoformat


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _as_dict(row: Any) -> dict[str, Any]:
    if is_dataclass(row) and not isinstance(row, type):
        return asdict(row)
    return dict(row)


def format_table(
    rows: Iterable[Mapping[str, Any] | Any], columns: Sequence[str] | None = None
) -> str:
    """Render rows (dicts or dataclasses) as an aligned text table."""
    dicts = [_as_dict(r) for r in rows]
    if columns is None:
        columns = list(dicts[0]) if dicts else []
    if not dicts:
        return "(no rows)"
    cells = [[_cell(d.get(c)) for c in columns] for d in dicts]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    for row in cells:
        lines.append("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(lines)


def age_text(seconds: float) -> str:
    """A short age for people: 90s, 12m, 8h, 3d (whole units, seconds up to two minutes)."""
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    if seconds < 172_800:
        return f"{seconds / 3600:.0f}h"
    return f"{seconds / 86_400:.0f}d"


def show(rows: Iterable[Mapping[str, Any] | Any], columns: Sequence[str] | None = None) -> None:
    """Print ``format_table(rows, columns)``."""
    print(format_table(rows, columns))


JOB_COLUMNS = ("id", "kind", "key", "state", "attempt", "max_attempts", "run_after", "lease_owner")


def jobs_table(store: Any, columns: Sequence[str] = JOB_COLUMNS, state: str | None = None) -> str:
    """The jobs table as text, times shown as UTC."""
    rows = []
    for job in store.jobs(state=state):
        row = asdict(job)
        row["state"] = str(job.state)
        for name in ("run_after", "lease_until", "created_at", "updated_at"):
            row[name] = isoformat(row[name]) if row[name] is not None else None
        rows.append(row)
    return format_table(rows, columns)
