"""Load named SQL from ``labkit/sql/*.sql``.

Each query sits under a ``-- name --`` header line followed by a one-line ``--``
description; parameters are ``:named``. Only the store (and its backends) names queries.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

_HEADER = re.compile(r"^-- ([a-z_][a-z0-9_]*) --\s*$", re.MULTILINE)


@cache
def load(filename: str) -> dict[str, str]:
    """Return ``{name: sql}`` for every query in ``labkit/sql/<filename>``."""
    text = resources.files("labkit").joinpath("sql", filename).read_text(encoding="utf-8")
    parts = _HEADER.split(text)
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        lines = [line for line in body.strip().splitlines() if not line.startswith("--")]
        queries[name] = "\n".join(lines).strip()
    return queries
