"""A connection that notes, and may scale down, the row caps the student's SQL holds.

A claim or a relay with a silent cap (``LIMIT 5000``, ``fetchmany(20000)``) bigger than a
check's backlog shows nothing on it; a backlog past a cap of a million rows is too slow
to build. ``LimitsSeen`` notes every ``LIMIT`` operand (a literal, or the parameter
bound to it) and every ``fetchmany`` size, and with ``scale_above`` runs each cap past it
as ``scaled_to``, so the check's backlog stands beyond it. Exercises 11 (the relay) and
13 (the claims) use it.
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
from typing import Any

from labkit.grading.exercises.tracing import Rows, Watched

_LIMIT = re.compile(r"\bLIMIT\s+(\d+|[:@$]\w+|\?\d*)(?:\s*,\s*(\d+|[:@$]\w+|\?\d*))?", re.I)


def _slot(sql: str, at: int, token: str) -> str | int:
    """Where the parameter bound to one LIMIT operand sits in the statement's parameters:
    its name (``:n``, ``@n``, ``$n``), or its index (``?3``, or the ``?`` count before it)."""
    if token[0] in ":@$":
        return token[1:]
    return int(token[1:]) - 1 if len(token) > 1 else sql[:at].count("?")


def _limit_value(sql: str, at: int, token: str, params: Any) -> int | None:
    """The value of one LIMIT operand: a literal, or the parameter bound to it."""
    if token.isdigit():
        return int(token)
    try:
        return int(params[_slot(sql, at, token)])
    except (KeyError, IndexError, TypeError, ValueError):
        return None


def _bound(sql: str, at: int, token: str, params: Any, value: int) -> Any:
    """``params`` (a copy) with the parameter bound to one LIMIT operand set to ``value``."""
    try:
        slot = _slot(sql, at, token)
        if isinstance(slot, str):
            return {**params, slot: value}
        changed = list(params)
        changed[slot] = value
        return changed
    except (KeyError, IndexError, TypeError, ValueError):
        return params


class LimitsSeen(Watched):
    """``Watched`` that also notes the row count of every ``LIMIT`` the student's SQL has,
    and every ``fetchmany`` size.

    A relay with a silent cap bigger than the check's backlog publishes it all; the
    check then builds a backlog one past that cap (``LIMIT count`` and ``LIMIT offset,
    count`` alike; a literal, or the parameter bound to it).
    """

    def __init__(
        self, conn: sqlite3.Connection, scale_above: int | None = None, scaled_to: int = 0
    ) -> None:
        super().__init__(conn)
        self.limits: list[int] = []
        self.scale_above, self.scaled_to = scale_above, scaled_to
        self.scaled: list[int] = []

    def execute(self, sql: str, params: Any = ()) -> Any:
        if isinstance(sql, str) and ("LIMIT" in sql or "limit" in sql.lower()):
            edits: list[tuple[int, int, str]] = []
            for found in _LIMIT.finditer(sql):
                group = 2 if found.group(2) else 1
                token = found.group(group)
                value = _limit_value(sql, found.start(group), token, params)
                if value is not None:
                    self.limits.append(value)
                if value is not None and self._past_the_scale(value):
                    self.scaled.append(value)
                    if token.isdigit():
                        edits.append((found.start(group), found.end(group), str(self.scaled_to)))
                    else:
                        params = _bound(sql, found.start(group), token, params, self.scaled_to)
            for start, end, text in reversed(edits):
                sql = sql[:start] + text + sql[end:]
        rows = super().execute(sql, params)
        if isinstance(rows, Rows) and rows._rows:  # fetchmany(20000): a cap in Python
            limits, fetchmany, scaled = self.limits, rows.fetchmany, self.scaled

            def noted(size: int = 1) -> Any:
                with contextlib.suppress(TypeError, ValueError):
                    limits.append(int(size))
                    if self._past_the_scale(int(size)):
                        scaled.append(int(size))
                        size = self.scaled_to
                return fetchmany(size)

            rows.fetchmany = noted  # type: ignore[method-assign]
        return rows

    def _past_the_scale(self, value: int) -> bool:
        return self.scale_above is not None and value > self.scale_above
