"""The ``Idempotency-Key`` header: read it quoted or bare, refuse a malformed one.

The IETF Idempotency-Key draft makes the value an RFC 8941 String (``"8e03978e-..."``);
Stripe's clients send it bare. Both name the same key, so a client may switch forms
between retries. ``check_idempotency_key`` returns the key or raises a ``400`` that says
what is wrong with it, by position, never repeating the value sent;
``labkit.integrations.http.service`` scopes the key to its caller.
"""

from __future__ import annotations

from fastapi import HTTPException

#: Longest Idempotency-Key accepted (the IETF draft leaves it to the server; Stripe: 255).
MAX_KEY_LENGTH = 255
#: The header on an answer that returns an earlier request's job.
REPLAYED = "Idempotent-Replayed"


def check_idempotency_key(value: str | None) -> str | None:
    """The key the header carries, quoted or bare; 400 saying what is wrong otherwise.

    The IETF draft makes the value an RFC 8941 String, ``"8e03978e-..."`` (RFC 8941
    section 3.3.3: printable ASCII in double quotes, backslash-quote and
    backslash-backslash the only escapes); Stripe's clients send the bare value. Both
    give the same key, so a client may switch forms between retries.
    """
    if value is None:
        return None
    key = _unquote(value) if value.startswith('"') else value
    if not key or len(key) > MAX_KEY_LENGTH or not key.isascii() or not key.isprintable():
        raise HTTPException(
            400,
            f"Idempotency-Key must be 1 to {MAX_KEY_LENGTH} printable ASCII characters; "
            "use one fresh random value (a UUID) per operation and resend it on every retry",
        )
    return key


def _unquote(value: str) -> str:
    """The content of a quoted String (RFC 8941, 3.3.3); 400 naming the first fault."""
    chars: list[str] = []
    i = 1
    while i < len(value):
        char = value[i]
        if char == "\\":
            escaped = value[i + 1 : i + 2]
            if escaped not in ('"', "\\"):
                raise _malformed(
                    f"character {i + 1} is a backslash before neither a quote nor a backslash"
                )
            chars.append(escaped)
            i += 2
        elif char == '"':
            if value[i + 1 :]:
                raise _malformed(f"{len(value) - i - 1} characters follow the closing quote")
            return "".join(chars)
        elif " " <= char <= "~":
            chars.append(char)
            i += 1
        else:
            raise _malformed(f"character {i + 1} is not printable ASCII")
    raise _malformed("the closing quote is missing")


def _malformed(fault: str) -> HTTPException:
    return HTTPException(
        400,
        "Idempotency-Key opens a quote but is not one quoted string: "
        f"{fault}. Send the key bare, or quoted as the IETF draft shows "
        '(Idempotency-Key: "8e03978e-40d5-43e8-bc93-6894a57f9324"), '
        "escaping only a quote or a backslash with a backslash",
    )
