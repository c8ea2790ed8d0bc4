"""What counts as one claim in exercise 3, from the statements a claim sent (``Traced``).

One ``UPDATE ... RETURNING`` chooses and takes in one step. So does a transaction that
holds SQLite's write lock before its first read (``BEGIN IMMEDIATE`` or ``EXCLUSIVE``,
or a ``BEGIN`` whose first statement writes): no other worker writes between its choice
and its take, as SQLite lets one writer in at a time. Exercise 13 takes both, and its
race checks judge them; ``claim_is_one_statement`` reads them here.
"""

from __future__ import annotations

import re

from labkit.grading.exercises.tracing import WRITES


def _first(verbs: str, then: str = "") -> re.Pattern[str]:
    """A statement whose first word is one of ``verbs`` (``then`` after it). One that
    comments before it (``-- take the next job``), or names its choice first (``WITH next
    AS (SELECT ...) UPDATE ...``), still is: the statement arrives with its lines joined,
    so a comment is skipped by what follows it."""
    lead = rf"(?:/\*.*?\*/\s*|--.*?(?=\b(?:{verbs})\b)|WITH\b.*?(?=\b(?:{verbs})\b))*"
    return re.compile(rf"^{lead}(?:{verbs})\b{then}", re.IGNORECASE | re.DOTALL)


_UPDATE_RETURNING = _first("UPDATE", r".*\bRETURNING\b")
_WRITES = _first("|".join(WRITES))
#: What opens a transaction on an autocommit connection, and what ends it well.
_OPENS = re.compile(r"^(BEGIN|SAVEPOINT)\b(\s+(DEFERRED|IMMEDIATE|EXCLUSIVE)\b)?", re.I)
_ENDS = re.compile(r"^(COMMIT|END|RELEASE)\b", re.I)


def verb(statement: str) -> str:
    """A statement's first word, with BEGIN's kind: UPDATE, SELECT, BEGIN IMMEDIATE."""
    words = statement.split()[: 2 if _OPENS.match(statement) else 1]
    return " ".join(words).upper().rstrip(";")


def _is_update_returning(statement: str) -> bool:
    return bool(_UPDATE_RETURNING.match(statement.strip()))


def one_step(statements: list[str]) -> bool:
    """One UPDATE ... RETURNING; or one transaction holding SQLite's write lock before its
    first read (BEGIN IMMEDIATE or EXCLUSIVE, or a BEGIN whose first statement writes)
    around the claim's statements, a write among them, ended by COMMIT (or by
    ``conn.commit()``, which sends nothing the trace sees). Inside it no other worker
    writes between the choice and the take, as SQLite serializes writers: as atomic as
    one statement. A deferred BEGIN that reads first fails to upgrade under load
    ("database is locked"), and a read before the BEGIN leaves the gap open. A PRAGMA
    (``busy_timeout``, say) reads and writes no row: it is left out."""
    statements = [s for s in statements if verb(s) != "PRAGMA"]
    if len(statements) == 1:
        return _is_update_returning(statements[0])
    if not statements or not (opened := _OPENS.match(statements[0].strip())):
        return False
    inside = statements[1:]
    if inside and _ENDS.match(inside[-1].strip()):
        inside = inside[:-1]
    if any(_OPENS.match(s.strip()) or _ENDS.match(s.strip()) for s in inside):
        return False
    locked = (opened.group(3) or "").upper() in ("IMMEDIATE", "EXCLUSIVE")
    writes = [bool(_WRITES.match(s.strip())) for s in inside]
    return any(writes) and (locked or writes[0])
