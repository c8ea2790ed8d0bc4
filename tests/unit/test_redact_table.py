"""The redactor on real-shaped secrets and on the ids, hashes and times that must survive.

Every secret is built at run time from a seeded generator (nothing here is a live
key, and no committed string looks like one). Each row is a sentence an error message
could carry; a secret row passes when the secret is gone, a look-alike row when the
text is unchanged. The last tests follow secrets through a real store: the stored
error, the database file and its WAL, ``labkit inspect``.
"""

from __future__ import annotations

import base64
import json
import random
import string
import uuid
from pathlib import Path

import pytest

from labkit.cli import main
from labkit.clock import FakeClock
from labkit.errors import PayloadError, PermanentError
from labkit.redact import find_secrets, redact, sanitize
from labkit.store import JobStore

R = random.Random(20260101)
LOWER, UPPER, DIGITS = string.ascii_lowercase, string.ascii_uppercase, string.digits
ALNUM = LOWER + UPPER + DIGITS


def pick(alphabet: str, n: int) -> str:
    return "".join(R.choice(alphabet) for _ in range(n))


def b64(n: int) -> str:
    return pick(ALNUM + "+/", n)


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def luhn_complete(prefix: str, length: int) -> str:
    """A card number: ``prefix`` + random digits + the Luhn check digit."""
    body = prefix + pick(DIGITS, length - len(prefix) - 1)
    for check in DIGITS:
        digits = body + check
        total = sum(
            (int(d) * 2 - 9 if int(d) * 2 > 9 else int(d) * 2) if i % 2 else int(d)
            for i, d in enumerate(reversed(digits))
        )
        if total % 10 == 0:
            return digits
    raise AssertionError("unreachable")


def jwt() -> str:
    header = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = b64url(json.dumps({"sub": pick(DIGITS, 8), "exp": 1767225600}).encode())
    return f"{header}.{body}.{b64url(R.randbytes(32))}"


def dotted(number: str, sep: str, groups: tuple[int, ...]) -> str:
    out, i = [], 0
    for g in groups:
        out.append(number[i : i + g])
        i += g
    return sep.join(out)


PW = pick(ALNUM, 14)


def row(label: str, template: str, secret: str) -> tuple[str, str, str]:
    """A table row: ``template`` with ``{s}`` replaced by ``secret``."""
    return label, template.replace("{s}", secret), secret


PEM_BODY = "\n".join(b64(64) for _ in range(6))
PEM_KIND = "RSA " + "PRIVATE KEY"
# (row label, text, the secret that must disappear)
SECRETS: list[tuple[str, str, str]] = [
    row("redis url, empty user", "redis://:{s}@cache:6379/0 refused", PW + "x"),
    row("postgres url", "connect postgresql://app:{s}@db:5432/app failed", PW + "y"),
    row("password holding @", "amqp://user:{s}@broker// down", "p@ss" + PW),
    row("https url", "GET https://ana:{s}@example.com/x 401", PW + "z"),
    row("AWS_SECRET_ACCESS_KEY", "AWS_SECRET_ACCESS_KEY={s}", b64(40)),
    row("aws_secret_access_key spaced", "aws_secret_access_key = {s}", b64(40)),
    row("SECRET_KEY", "SECRET_KEY={s}", pick(ALNUM + "!@#%^&*(-_=+)", 50)),
    row("pass=", "login failed user=bob pass={s}", PW + "p"),
    row("pwd=", "pwd={s};timeout=3", PW + "q"),
    row("DB_PASSWORD", "DB_PASSWORD={s}", PW + "r"),
    row("json password with spaces", '{"password": "{s}"}', "correct horse battery staple"),
    row("json api_key", '{"api_key": "{s}"}', pick(ALNUM, 32)),
    row("X-Api-Key header", "X-Api-Key: {s}", pick(ALNUM, 40)),
    row("client_secret", "client_secret={s}&grant_type=client_credentials", pick(ALNUM, 40)),
    row("github_token", "github_token={s}", pick(ALNUM, 30)),
    row("passphrase yaml", "passphrase: {s}", pick(ALNUM, 20)),
    row("token yaml", "token: {s}", pick(ALNUM, 30)),
    row("cookie header", "Cookie: sessionid={s}; csrftoken=abc", pick("0123456789abcdef", 32)),
    row("set-cookie header", "Set-Cookie: session={s}; Path=/; HttpOnly", pick(ALNUM, 40)),
    row("sessionid pair", "sessionid={s}", pick("0123456789abcdef", 32)),
    row("password is X", "the password is {s}, please rotate", PW + "s"),
    row("password was X", "old password was {s}", PW + "t"),
    row("url-encoded form", "body=user%3Dbob%26password%3D{s}%26x%3D1", PW + "u"),
    row("bearer", "Authorization: Bearer {s}", pick(ALNUM, 40)),
    row("proxy basic", "Proxy-Authorization: Basic {s}", b64(32)),
    row("bare bearer", "sent bearer {s} upstream", pick(ALNUM, 40)),
    row("stripe live", "{s}", "sk_" + "live_" + pick(ALNUM, 34)),
    row("stripe restricted", "key {s} refused", "rk_" + "live_" + pick(ALNUM, 24)),
    row("github pat", "{s}", "gh" + "p_" + pick(ALNUM, 36)),
    row("github oauth", "cloning with {s}", "gh" + "o_" + pick(ALNUM, 36)),
    row("gitlab pat", "{s}", "gl" + "pat-" + pick(ALNUM, 20)),
    row("jwt", "{s}", jwt()),
    row("jwt in text", "rejected: {s} expired", jwt()),
    row("aws access key", "{s}", "AK" + "IA" + pick(UPPER + DIGITS, 16)),
    row("aws temp key", "key id {s} denied", "AS" + "IA" + pick(UPPER + DIGITS, 16)),
    row("pem block", f"-----BEGIN {PEM_KIND}-----\n{{s}}\n-----END {PEM_KIND}-----", PEM_BODY),
    row("slack bot", "{s}", "xo" + f"xb-{pick(DIGITS, 12)}-{pick(DIGITS, 12)}-{pick(ALNUM, 24)}"),
    row("sendgrid", "{s}", "S" + f"G.{pick(ALNUM, 22)}.{pick(ALNUM, 43)}"),
    row("twilio key", "{s}", "S" + "K" + pick("0123456789abcdef", 32)),
    row("openai", "{s}", "s" + f"k-{pick(ALNUM, 20)}" + "T3Blbk" + "FJ" + pick(ALNUM, 20)),
    row("azure account key", "AccountKey={s}", b64(86) + "=="),
    row("mailchimp", "{s}", pick("0123456789abcdef", 32) + "-us12"),
    row("npm token", "//registry.npmjs.org/:_auth" + "Token={s}", "npm_" + pick(ALNUM, 36)),
    row("card with dots", "{s}", dotted(luhn_complete("4", 16), ".", (4, 4, 4, 4))),
    row("card with spaces", "paid with {s}", dotted(luhn_complete("5", 16), " ", (4, 4, 4, 4))),
    row("amex with dashes", "{s}", dotted(luhn_complete("37", 15), "-", (4, 6, 5))),
    row("card bare", "charged {s} ok", luhn_complete("4", 16)),
]


def _secret_of(text: str, secret: str) -> list[str]:
    """The parts that must be gone (each line of a PEM body; sanitize joins the lines)."""
    return [line for line in secret.splitlines() if line]


@pytest.mark.parametrize("label,text,secret", SECRETS, ids=[s[0] for s in SECRETS])
def test_a_real_shaped_secret_is_redacted(label: str, text: str, secret: str) -> None:
    for out in (redact(text), sanitize(text)):
        for part in _secret_of(text, secret):
            assert part not in out, f"{label}: {part!r} survived in {out!r}"
    assert len(SECRETS) >= 40


sha256 = "".join(R.choice("0123456789abcdef") for _ in range(64))
LOOK_ALIKES: list[tuple[str, str]] = [
    ("uuid4", str(uuid.UUID(int=R.getrandbits(128), version=4))),
    ("uuid in text", f"job {uuid.UUID(int=R.getrandbits(128), version=4)} went dead"),
    ("uuid all digits", "12345678-1234-5678-1234-567812345678"),
    ("sha256", sha256),
    ("sha256 labelled", f"fingerprint sha256:{sha256}"),
    ("git sha", pick("0123456789abcdef", 40)),
    ("short git sha", f"deployed {pick('0123456789abcdef', 7)}"),
    ("md5 etag", f'etag: "{pick("0123456789abcdef", 32)}"'),
    ("iso timestamp", "2026-01-01T12:00:00Z"),
    ("iso timestamp micro", "2026-01-01 12:00:00.123456+00:00"),
    ("unix seconds", "run_after=1767225660.5"),
    ("unix millis", "at 1767225600123 ms"),
    ("order id", "ORD-2026-000123 shipped"),
    ("cep and order", "order 2026-000123 to CEP 01310-100"),
    ("invoice key", "key=billing:42:charge:v1"),
    ("job key", "charge:invoice:42:v1 attempt 3 of 5"),
    ("http status", "HTTP 503 Service Unavailable; Retry-After: 120"),
    ("base64 of text", base64.b64encode(b"invoice 42 for ACME, due Friday").decode()),
    ("base64 uuid", base64.b64encode(uuid.UUID(int=R.getrandbits(128)).bytes).decode()),
    ("ipv4", "connect to 10.0.0.12:5432 refused"),
    ("public ip", "from 203.0.113.7"),
    ("url no credentials", "https://example.com/api/v1/orders?id=42&page=2"),
    ("dsn without password", "postgresql://postgres@127.0.0.1:5432/test"),
    ("email", "sent to ana@example.com"),
    ("phone", "+55 11 91234-5678"),
    ("version", "labkit 0.1.0 on Python 3.11.7"),
    ("max_tokens", "max_tokens=256 token_count=12"),
    ("token bucket sentence", "the token bucket is empty"),
    ("compass", "compass=north passenger=3"),
    ("author", "author=ana"),
    ("non-luhn card shape", "4111 1111 1111 1112"),
    ("digits starting with 1", "1111 2222 3333 4444"),
    ("isbn", "978-3-16-148410-0"),
    ("12 digits", "4000 1234 5678"),
    ("eyJ word", "eyJustKidding"),
    ("short AKIA", "AKIA123"),
    ("certificate header", "-----BEGIN CERTIFICATE-----"),
    ("hex colour", "colour #ff00aa"),
    ("big job id", "job 123456789012 not found"),
    ("dead reason", "permanent error: 400 Bad Request (field 'amount')"),
    ("path", "/var/lib/labkit/jobs.db is locked"),
    ("content type", "Content-Type: application/json"),
    ("amount", "amount=1999.90 BRL"),
    ("skip live tests", "skip_live_tests=true"),
    ("lease", "lease 30.0s expired on worker w-3"),
    ("credential reference", "credential_id=erp-readonly secret_name: billing/erp"),
]


@pytest.mark.parametrize("label,text", LOOK_ALIKES, ids=[s[0] for s in LOOK_ALIKES])
def test_a_look_alike_is_kept(label: str, text: str) -> None:
    assert redact(text) == text, f"{label} was changed"
    assert len(LOOK_ALIKES) >= 40


@pytest.mark.parametrize(
    "field",
    ["db_password", "secret_key", "aws_secret_access_key", "x-api-key", "pwd", "password",
     "githubToken", "client_secret", "refresh_token", "card_number", "Authorization", "passwd",
     "session_id", "sessionid"],
)
def test_payload_fields_named_like_credentials_are_refused(store: JobStore, field: str) -> None:
    with pytest.raises(PayloadError, match="credential"):
        store.enqueue("k", {"customer": {field: "x"}})
    assert store.counts()["pending"] == 0


@pytest.mark.parametrize(
    "field", ["key", "kind", "invoice_id", "customer_email", "max_tokens", "token_count",
              "compass", "author", "key_version", "passenger_count", "spin",
              # references to a secret are what a payload should carry instead
              "credential_id", "secret_name", "api_key_id", "token_expires_at", "secret_ref"],
)
def test_ordinary_payload_fields_pass(store: JobStore, field: str) -> None:
    assert store.enqueue("k", {field: 1})[1]


def test_secrets_reach_neither_the_database_nor_its_wal_nor_inspect(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "jobs.db"
    planted = [row for row in SECRETS if "PRIVATE" not in row[1]][:20]
    message = " | ".join(text for _, text, _ in planted)
    with JobStore(db, clock=FakeClock(1_000.0)) as store:
        store.conn.execute("PRAGMA wal_autocheckpoint = 0")  # keep the writes in the WAL
        store.enqueue("charge", {"n": 1}, key="leaky", max_attempts=1)
        job = store.claim("w1")
        assert job is not None
        store.fail(job, PermanentError(message[:4000]))
        raw = db.read_bytes() + (tmp_path / "jobs.db-wal").read_bytes()
        assert (tmp_path / "jobs.db-wal").stat().st_size > 0, "the WAL must hold the write"
        assert main(["inspect", str(db)]) == 0
        assert main(["inspect", str(db), "--job", str(job.id)]) == 0
    shown = capsys.readouterr().out
    for label, text, given in planted:
        for part in _secret_of(text, given):
            # Stored errors are cut to 500 characters: check only what could be stored.
            assert part.encode() not in raw, f"{label} reached the database file or WAL"
            assert part not in shown, f"{label} reached labkit inspect"


@pytest.mark.parametrize(
    "flag",
    [
        # A switch about a credential, never the credential: true, false and null cannot
        # hold a secret whatever the field is called (issue 25 added auth and otp).
        {"otp_enabled": False},
        {"auth_required": True},
        {"password_reset_required": True},
        {"cookie_consent": None},
        {"settings": {"two_factor": {"otp_enabled": True}}},
        {"users": [{"name": "ana", "pin_set": False}]},
    ],
)
def test_a_flag_named_after_a_credential_is_accepted(store: JobStore, flag: dict) -> None:
    assert find_secrets(flag) == []
    assert store.enqueue("k", flag)[1]


@pytest.mark.parametrize(
    "body",
    [
        # The same names with a value that could be the secret are still refused.
        {"otp": "492817"},
        {"auth": {"user": "ana"}},
        {"pin": 1234},
        {"password": ["x"]},
    ],
)
def test_a_credential_name_with_a_value_is_still_refused(store: JobStore, body: dict) -> None:
    assert find_secrets(body)
    with pytest.raises(PayloadError, match="credential"):
        store.enqueue("k", body)
