"""Load named SQL from the ``.sql`` file beside the module that runs it.

``load("store/sqlite.sql")`` reads ``labkit/store/sqlite.sql``: a path inside the
package, so each engine's statements sit in its own folder.

Each query sits under a ``-- name --`` header line followed by a one-line ``--``
description; parameters are ``:named``. Only the store (and its backends) names queries.

A line ``{{ name }}`` in a query is replaced by the fragment ``name`` of
``labkit/store/shared.sql``: what every claim sets, for example, is written once for
both engines, so the store's claim and the queues' claims cannot drift apart.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

_HEADER = re.compile(r"^-- ([a-z_][a-z0-9_]*) --\s*$", re.MULTILINE)
_FRAGMENT = re.compile(r"\{\{ ([a-z_][a-z0-9_]*) \}\}")
SHARED = "store/shared.sql"


@cache
def load(filename: str) -> dict[str, str]:
    """Return ``{name: sql}`` for every query in ``labkit/<filename>``, fragments filled in."""
    text = resources.files("labkit").joinpath(*filename.split("/")).read_text(encoding="utf-8")
    parts = _HEADER.split(text)
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        lines = [line for line in body.strip().splitlines() if not line.startswith("--")]
        # Blank edges go, the first line's indent stays (a fragment is indented to fit).
        queries[name] = "\n".join(lines).strip("\n").rstrip()
    if filename == SHARED:
        return queries
    return {name: _fill(sql, f"{filename}: {name}") for name, sql in queries.items()}


def load_all(*filenames: str) -> dict[str, str]:
    """The statements of several files as one dict; a name defined twice is an error.

    Each engine loads ``store/common.sql`` (what reads the same on SQLite and
    PostgreSQL) beside its own file, so a shared statement is written once.
    """
    merged: dict[str, str] = {}
    for filename in filenames:
        for name, sql in load(filename).items():
            if name in merged:
                raise ValueError(
                    f"{filename} defines {name!r} again: a statement lives in one of "
                    f"{', '.join(filenames)}, never in two"
                )
            merged[name] = sql
    return merged


def _fill(sql: str, where: str) -> str:
    def fragment(match: re.Match[str]) -> str:
        try:
            return load(SHARED)[match.group(1)].rstrip()
        except KeyError:
            raise KeyError(
                f"{where} uses {{{{ {match.group(1)} }}}}, which labkit/{SHARED} does not "
                "define: add it there under a '-- name --' header"
            ) from None

    return _FRAGMENT.sub(fragment, sql)
