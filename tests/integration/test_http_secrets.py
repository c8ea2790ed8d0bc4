"""A secret anywhere in a request body is refused: 422 naming the field and the kind.

A real uvicorn server and httpx. Each row puts one kind of secret into one field, by
its value or by its name; the answer must name the field's path and the kind, must not
carry the secret's text, and the database must hold no new job and no new idempotency
row. Every secret is built at run time from a seeded generator: nothing committed here
is a live key, and no committed string looks like one.
"""

from __future__ import annotations

import base64
import json
import random
import sqlite3
import string
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest
from httpkit import ALICE, job_count

from labkit.keys import operation_key

SEED = 20260525
R = random.Random(SEED)
ALNUM = string.ascii_letters + string.digits


def pick(alphabet: str, n: int) -> str:
    return "".join(R.choice(alphabet) for _ in range(n))


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwt() -> str:
    head = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    claims = b64url(json.dumps({"sub": pick(string.digits, 8)}).encode())
    return f"{head}.{claims}.{b64url(R.randbytes(32))}"


def card(prefix: str = "4", length: int = 16) -> str:
    """A Luhn-valid card number that starts with ``prefix``."""
    body = prefix + pick(string.digits, length - len(prefix) - 1)
    for check in string.digits:
        digits = body + check
        total = sum(
            (2 * int(d) - 9 if 2 * int(d) > 9 else 2 * int(d)) if i % 2 else int(d)
            for i, d in enumerate(reversed(digits))
        )
        if total % 10 == 0:
            return digits
    raise AssertionError("unreachable")


PW = pick(ALNUM, 16)
PEM = "RSA " + "PRIVATE KEY"
PEM_BODY = pick(ALNUM + "+/", 64)
CARD = card()
CYRILLIC, ZERO_WIDTH = "p\u0430ssword", "pass\u200bword"
FULLWIDTH = "".join(chr(ord(c) + 0xFEE0) for c in "password")

# (body, the path the answer must name, a word of the kind it must name, the secret text)
ROWS: list[tuple[dict[str, Any], str, str, str]] = [
    # A bearer token pasted into a free-text note.
    ({"note": f"call it with Bearer {PW}"}, "payload.note", "bearer", PW),
    # A whole Authorization header in a note.
    ({"note": f"Authorization: Token {PW}x"}, "payload.note", "authorization", PW + "x"),
    # A JWT as the value of an innocent-looking field.
    ({"session_ref": (token := jwt())}, "payload.session_ref", "json web token", token),
    # A PEM private key, nested.
    (
        {"erp": {"cert": f"-----BEGIN {PEM}-----\n{PEM_BODY}\n-----END {PEM}-----"}},
        "payload.erp.cert",
        "private key",
        PEM_BODY,
    ),
    # A URL with its password.
    ({"source": f"postgresql://report:{PW}y@db/erp"}, "payload.source", "url", PW + "y"),
    # password=... inside a sentence, in a list.
    (
        {"items": [{"note": f"log in with password={PW}z please"}]},
        "payload.items[0].note",
        "assigned",
        PW + "z",
    ),
    # A Stripe live key.
    ({"note": (stripe := "sk_" + "live_" + pick(ALNUM, 24))}, "payload.note", "stripe", stripe),
    # An AWS access key id.
    ({"note": (aws := "AK" + "IA" + pick(string.ascii_uppercase, 16))}, "payload.note", "aws", aws),
    # A card number in text, with spaces.
    ({"note": f"paid with {' '.join(CARD[i : i + 4] for i in range(0, 16, 4))}"},
     "payload.note", "card", CARD[4:8]),
    # A card number sent as a JSON number.
    ({"customer": int(CARD)}, "payload.customer", "card", CARD),
    # A field named password, with a Cyrillic "а" in it (the path shows it escaped).
    ({CYRILLIC: PW + "c"}, f"payload[{json.dumps(CYRILLIC)}]", "named like a", PW + "c"),
    # A zero-width space inside "password".
    ({ZERO_WIDTH: PW + "w"}, f"payload[{json.dumps(ZERO_WIDTH)}]", "named like a", PW + "w"),
    # Fullwidth letters (NFKC folds them).
    ({FULLWIDTH: PW + "f"}, f"payload[{json.dumps(FULLWIDTH)}]", "named like a", PW + "f"),
    # Names that carry a credential without saying password or token.
    ({"auth": PW + "1"}, "payload.auth", "named like a credential", PW + "1"),
    ({"bearer": PW + "2"}, "payload.bearer", "named like a credential", PW + "2"),
    ({"jwt": PW + "3"}, "payload.jwt", "named like a credential", PW + "3"),
    ({"signing_key": PW + "4"}, "payload.signing_key", "named like a credential", PW + "4"),
    ({"otp": "492817"}, "payload.otp", "named like a credential", "492817"),
]


def request_rows(db: Path) -> int:
    if not db.exists():
        return 0
    with closing(sqlite3.connect(db)) as conn:
        try:
            return int(conn.execute("SELECT count(*) FROM http_requests").fetchone()[0])
        except sqlite3.OperationalError:  # the service has not made its table yet
            return 0


@pytest.mark.parametrize(
    ("body", "path", "kind", "secret"), ROWS, ids=[f"{r[1]}-{r[2]}" for r in ROWS]
)
def test_a_secret_in_the_body_is_422_naming_field_and_kind_with_nothing_stored(
    client: httpx.Client, db: Path, body: dict[str, Any], path: str, kind: str, secret: str
) -> None:
    jobs, keys = job_count(db), request_rows(db)
    reply = client.post(
        "/jobs/report",
        json={"month": "2026-05", **body},
        headers={**ALICE, "Idempotency-Key": f"s-{pick(ALNUM, 8)}"},
    )
    assert reply.status_code == 422, f"seed {SEED}: {reply.status_code} {reply.text}"
    assert secret not in reply.text, f"seed {SEED}: the answer echoes the secret"
    [error] = reply.json()["errors"]
    assert error["field"] == path, error
    assert kind in error["problem"].lower(), error
    assert error["field"] in reply.json()["detail"]
    assert job_count(db) == jobs and request_rows(db) == keys


def test_a_reference_to_a_secret_and_ordinary_values_are_accepted(client: httpx.Client) -> None:
    body = {
        "month": "2026-05",
        "credential_id": "erp-readonly",
        "note": "author=ana; order 2026-000123; uuid 12345678-1234-5678-1234-567812345678",
        "amount_cents": 1999,
    }
    reply = client.post("/jobs/report", json=body, headers=ALICE)
    assert reply.status_code == 202, reply.text


# (header, a secret a careless client sends as its value): a client that reuses its own
# credential as an id. Each header is stored with the job (its key, its request row).
HEADER_ROWS: list[tuple[str, str]] = [
    # The caller's JWT reused as an Idempotency-Key.
    ("Idempotency-Key", jwt()),
    # An AWS access key id as the key.
    ("Idempotency-Key", "AK" + "IA" + pick(string.ascii_uppercase, 16)),
    # A Stripe key as the request id.
    ("X-Request-Id", "sk_" + "live_" + pick(ALNUM, 24)),
    # A card number as the request id.
    ("X-Request-Id", card()),
]


@pytest.mark.parametrize(("header", "secret"), HEADER_ROWS, ids=[r[0] for r in HEADER_ROWS])
def test_a_secret_in_a_stored_header_is_422_naming_the_header_with_nothing_stored(
    client: httpx.Client, db: Path, header: str, secret: str
) -> None:
    jobs, keys = job_count(db), request_rows(db)
    headers = {**ALICE, header: secret}
    reply = client.post("/jobs/report", json={"month": "2026-05"}, headers=headers)
    assert reply.status_code == 422, f"seed {SEED}: {reply.status_code} {reply.text}"
    assert secret not in reply.text, f"seed {SEED}: the answer echoes the secret"
    assert secret not in str(reply.headers), f"seed {SEED}: a header echoes the secret"
    assert header in reply.text
    assert job_count(db) == jobs and request_rows(db) == keys


def test_a_key_built_by_operation_key_is_accepted_whatever_it_names(client: httpx.Client) -> None:
    # A key names an intent; "password:42:reset:v1" is an action on a password, not one.
    for key in (operation_key("password", 42, "reset"), operation_key("auth", 7, "login")):
        reply = client.post(
            "/jobs/report", json={"month": "2026-05"}, headers={**ALICE, "Idempotency-Key": key}
        )
        assert reply.status_code == 202, reply.text
    reply = client.post(
        "/jobs/report", json={"month": "2026-06"}, headers={**ALICE, "X-Request-Id": "token:7"}
    )
    assert reply.status_code == 202, reply.text
