"""Load named SQL from ``labkit/sql/*.sql``.

Each query sits under a ``-- name --`` header line followed by a one-line ``--``
description; parameters are ``:named``. Only the store (and its backends) names queries.

A line ``{{ name }}`` in a query is replaced by the fragment ``name`` of
``labkit/sql/shared.sql``: what every claim sets, for example, is written once for
both engines, so the store's claim and the queues' claims cannot drift apart.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

_HEADER = re.compile(r"^-- ([a-z_][a-z0-9_]*) --\s*$", re.MULTILINE)
_FRAGMENT = re.compile(r"\{\{ ([a-z_][a-z0-9_]*) \}\}")
SHARED = "shared.sql"


@cache
def load(filename: str) -> dict[str, str]:
    """Return ``{name: sql}`` for every query in ``labkit/sql/<filename>``, fragments filled in."""
    text = resources.files("labkit").joinpath("sql", filename).read_text(encoding="utf-8")
    parts = _HEADER.split(text)
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        lines = [line for line in body.strip().splitlines() if not line.startswith("--")]
        # Blank edges go, the first line's indent stays (a fragment is indented to fit).
        queries[name] = "\n".join(lines).strip("\n").rstrip()
    if filename == SHARED:
        return queries
    return {name: _fill(sql, f"{filename}: {name}") for name, sql in queries.items()}


def _fill(sql: str, where: str) -> str:
    def fragment(match: re.Match[str]) -> str:
        try:
            return load(SHARED)[match.group(1)].rstrip()
        except KeyError:
            raise KeyError(
                f"{where} uses {{{{ {match.group(1)} }}}}, which labkit/sql/{SHARED} does not "
                "define: add it there under a '-- name --' header"
            ) from None

    return _FRAGMENT.sub(fragment, sql)
