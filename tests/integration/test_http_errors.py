"""Every 4xx answer of the HTTP service names the field and the fault, never the value.

A real uvicorn server and httpx. Each row sends a recognisable marker in one place a
client controls (the body, a path parameter, a header) where it is wrong; the answer
must be a 4xx that names that place and does not carry the marker back. An error that
echoes its input hands a log viewer, a proxy's cache or a browser whatever the caller
sent, secrets and markup included.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from httpkit import ALICE, job_count

MARKER = "MARKER-q7x-<b>"
JSON = {"Content-Type": "application/json"}


@pytest.mark.parametrize(
    ("method", "url", "headers", "content", "status", "names"),
    [
        # The body is a JSON string, not an object.
        ("POST", "/jobs/report", {**ALICE, **JSON}, f'"{MARKER}"', 422, "payload"),
        # The body is a list holding the marker.
        ("POST", "/jobs/report", {**ALICE, **JSON}, f'["{MARKER}"]', 422, "payload"),
        # The body is not JSON at all, the marker in it.
        ("POST", "/jobs/report", {**ALICE, **JSON}, f'{{"month": {MARKER}}}', 422, "payload"),
        # A job id that is not an integer.
        ("GET", f"/jobs/{MARKER}", ALICE, None, 422, "job_id"),
        ("DELETE", f"/jobs/{MARKER}", ALICE, None, 422, "job_id"),
        # A job kind the service does not have.
        ("POST", f"/jobs/{MARKER}", {**ALICE, **JSON}, "{}", 404, "kind"),
        # An Idempotency-Key that is not one quoted string.
        ("POST", "/jobs/report", {**ALICE, **JSON, "Idempotency-Key": f'"{MARKER}'}, "{}", 400,
         "Idempotency-Key"),
        # An Idempotency-Key with a character it may not hold.
        ("POST", "/jobs/report", {**ALICE, **JSON, "Idempotency-Key": f"{MARKER}\u00e9"}, "{}",
         400, "Idempotency-Key"),
        # An X-Request-Id with characters it may not hold.
        ("GET", "/jobs/1", {**ALICE, "X-Request-Id": f"{MARKER} x"}, None, 400, "X-Request-Id"),
    ],
    ids=[
        "body a string",
        "body a list",
        "body not json",
        "GET id not int",
        "DELETE id not int",
        "unknown kind",
        "unclosed quoted key",
        "non-ascii key",
        "bad request id",
    ],
)
def test_a_4xx_names_the_field_and_never_echoes_the_value(
    client: httpx.Client,
    db: Path,
    method: str,
    url: str,
    headers: dict[str, str],
    content: str | None,
    status: int,
    names: str,
) -> None:
    before = job_count(db)
    encoded = {k: v.encode() for k, v in headers.items()}  # headers may be non-ASCII
    reply = client.request(method, url, headers=encoded, content=content)
    assert reply.status_code == status, reply.text
    assert "MARKER" not in reply.text, f"the answer echoes what was sent: {reply.text}"
    assert names in reply.text, f"the answer does not say which field: {reply.text}"
    assert job_count(db) == before


def test_a_validation_error_lists_each_field_and_its_fault_without_input(
    client: httpx.Client,
) -> None:
    reply = client.post("/jobs/report", content=f'["{MARKER}"]', headers={**ALICE, **JSON})
    assert reply.status_code == 422
    [error] = reply.json()["errors"]
    assert error["field"] == "payload" and "dictionary" in error["problem"]
    assert set(error) == {"field", "problem"}
