"""What the world's file records: the effects it did and the calls it received.

Every service and the ledger write an effect the same way (``record_effect``): the row
first, then the reply it produced, inside the caller's transaction, so an effect and
its reply are durable together or not at all.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from labkit import dbfile, queries
from labkit.keys import canonical_json, fingerprint

SQL = queries.load("world/world.sql")
SCHEMA_VERSION = 1
WORLD_FILE = dbfile.FileKind(
    noun="world file",
    label="labkit world",
    meta_table="world_meta",
    version_sql=SQL["get_meta"],
    schema_version=SCHEMA_VERSION,
)


@dataclass(frozen=True)
class Effect:
    """One thing the world did: which service, for which key, with what."""

    id: int
    service: str
    action: str
    key: str | None
    payload: dict[str, Any]
    response: dict[str, Any]
    at: float

    @classmethod
    def from_row(cls, r: sqlite3.Row) -> Effect:
        """Decode a row of the ``effects`` table."""
        return cls(
            id=r["id"],
            service=r["service"],
            action=r["action"],
            key=r["key"],
            payload=json.loads(r["payload"]),
            response=json.loads(r["response"]),
            at=r["at"],
        )


@dataclass(frozen=True)
class Call:
    """One call the world received and how it ended (ok, replayed, 503, ...)."""

    id: int
    service: str
    action: str
    key: str | None
    outcome: str
    status: int | None
    at: float


def record_effect(
    conn: sqlite3.Connection,
    *,
    service: str,
    action: str,
    key: str | None,
    params: dict[str, Any],
    now: float,
    reply: Callable[[int], dict[str, Any]],
) -> dict[str, Any]:
    """Write one effect and the reply ``reply(effect_id)`` builds for it; return the reply."""
    effect_id = int(
        conn.execute(
            SQL["insert_effect"],
            {
                "service": service,
                "action": action,
                "key": key,
                "payload": canonical_json(params),
                "fingerprint": fingerprint(params),
                "now": now,
            },
        ).fetchone()[0]
    )
    response = reply(effect_id)
    conn.execute(
        SQL["set_effect_response"], {"id": effect_id, "response": canonical_json(response)}
    )
    return response
