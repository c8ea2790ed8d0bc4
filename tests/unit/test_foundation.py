"""The bottom of labkit: clock, errors, keys, redact, and the retry formulas the store uses."""

from __future__ import annotations

import hashlib
import inspect
import random

import pytest

from labkit import errors
from labkit.clock import LAB_EPOCH, Clock, FakeClock, SystemClock, isoformat
from labkit.errors import (
    LabkitError,
    LeaseLost,
    PayloadError,
    PermanentError,
    ResponseLost,
    SimulatedCrash,
    TransientError,
)
from labkit.keys import (
    MAX_PAYLOAD_BYTES,
    canonical_json,
    check_payload,
    fingerprint,
    operation_key,
    unique_key,
)
from labkit.redact import describe, redact, sanitize
from labkit.retry import RetryPolicy, capped, constant, exponential, full_jitter

# -- clock -------------------------------------------------------------------------------


def test_fake_clock_starts_at_the_lab_epoch_and_moves_only_when_told():
    clock = FakeClock()
    assert clock.now() == LAB_EPOCH
    assert clock.now() == LAB_EPOCH
    clock.sleep(3600)
    assert clock.now() == LAB_EPOCH + 3600
    assert clock.advance(0.5) == LAB_EPOCH + 3600.5
    clock.set(LAB_EPOCH + 7200)
    assert clock.now() == LAB_EPOCH + 7200
    assert isoformat(clock.now()) == "2026-01-01 02:00:00"


def test_fake_clock_never_goes_back():
    clock = FakeClock(100.0)
    with pytest.raises(ValueError, match="back in time"):
        clock.advance(-1)
    with pytest.raises(ValueError, match="back in time"):
        clock.set(99.0)
    clock.sleep(-5)  # a negative sleep is no sleep
    assert clock.now() == 100.0


def test_both_clocks_satisfy_the_protocol():
    assert isinstance(FakeClock(), Clock) and isinstance(SystemClock(), Clock)
    assert SystemClock().now() > LAB_EPOCH - 10 * 365 * 86400


# -- errors ------------------------------------------------------------------------------


def _labkit_error_classes() -> list[type[BaseException]]:
    return [
        cls
        for _, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, LabkitError) and cls.__module__ == errors.__name__
    ]


@pytest.mark.parametrize("cls", _labkit_error_classes(), ids=lambda c: c.__name__)
def test_an_error_without_a_message_says_its_docstring(cls):
    assert cls.__doc__, f"{cls.__name__} needs a docstring: it is its default message"
    assert str(cls()) == cls.__doc__.strip()
    assert str(cls("custom words")) == "custom words"


def test_simulated_crash_is_not_an_exception():
    assert not issubclass(SimulatedCrash, Exception)
    swallowed = False
    with pytest.raises(SimulatedCrash, match="after_effect"):
        try:
            raise SimulatedCrash("after_effect")
        except Exception:  # what a careless handler writes
            swallowed = True
    assert not swallowed


def test_error_extras_are_kept():
    assert TransientError(retry_after=30, status=429).retry_after == 30
    assert PermanentError(status=400).status == 400
    assert ResponseLost().ambiguous and not TransientError().ambiguous
    assert isinstance(LeaseLost(), LabkitError)


# -- keys --------------------------------------------------------------------------------


def test_canonical_json_sorts_keys_and_drops_spaces():
    assert canonical_json({"b": 1, "a": [1, 2], "c": "ç"}) == '{"a":[1,2],"b":1,"c":"ç"}'


def test_fingerprint_is_stable_and_order_free():
    one = fingerprint({"invoice": 42, "amount": "10.00"})
    assert one == fingerprint({"amount": "10.00", "invoice": 42})
    # Stored fingerprints must match across versions: SHA-256 of the canonical text.
    assert one == hashlib.sha256(b'{"amount":"10.00","invoice":42}').hexdigest()
    assert len(one) == 64 and one != fingerprint({"invoice": 42, "amount": "10.01"})


@pytest.mark.parametrize(
    "payload",
    [
        {"when": __import__("datetime").date(2026, 1, 1)},  # a date, not JSON
        {"ids": {1, 2}},  # a set
        {"x": float("nan")},  # NaN is not JSON
        object(),
    ],
)
def test_a_non_json_payload_is_a_clear_payload_error(payload):
    with pytest.raises(PayloadError, match="not plain JSON"):
        check_payload(payload)
    assert issubclass(PayloadError, LabkitError)


@pytest.mark.parametrize("field", ["password", "Token", "api_key", "authorization"])
def test_secret_named_fields_are_refused_even_nested(field):
    with pytest.raises(PayloadError, match="credential"):
        check_payload({"customer": 1, "auth": [{field: "x"}]})


def test_an_oversized_payload_is_refused():
    with pytest.raises(PayloadError, match="byte limit"):
        check_payload({"blob": "x" * MAX_PAYLOAD_BYTES})
    assert check_payload({"blob": "x" * 100}) == '{"blob":"' + "x" * 100 + '"}'


def test_operation_keys_come_from_intent():
    assert operation_key("billing", 42, "charge") == "billing:42:charge:v1"
    assert operation_key("billing", 42, "charge", version=2) == "billing:42:charge:v2"
    with pytest.raises(ValueError, match="entity_id"):
        operation_key("billing", " ", "charge")
    assert unique_key() != unique_key()


# -- redact ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("login failed password=hunter2 for ana", "hunter2"),
        ("refresh token: abc.def.ghi rejected", "abc.def.ghi"),
        ('{"api_key": "AKIA1234567890"}', "AKIA1234567890"),
        ("headers: Authorization: Bearer eyJhbGciOi.x.y", "eyJhbGciOi"),
        ("sent Bearer abcdefghij123 to the ERP", "abcdefghij123"),
        ("postgresql://app:s3cret@db:5432/x", "s3cret"),
        ("card 4111 1111 1111 1111 declined", "4111 1111 1111 1111"),
        ('login failed, password: "correct horse" refused', "horse"),  # quoted, with a space
        ("connect(password='p a s s') failed", "p a s s"),  # a Python repr
        ("env DB_PASSWORD=hunter2 rejected", "hunter2"),  # a prefixed name
        ("github_token=ghp_abc123 expired", "ghp_abc123"),  # a prefixed name
        ('sent {"Authorization": "Token abcdef12345"}', "abcdef12345"),  # quoted header
        ("sent {'authorization': 'Basic dXNlcjpwYXNz'}", "dXNlcjpwYXNz"),  # a dict repr
    ],
)
def test_redact_removes_secrets_and_keeps_the_rest(text, secret):
    clean = redact(text)
    assert secret not in clean
    assert "***" in clean or "[card]" in clean
    assert clean[:5] == text[:5], "only the secret goes, the context stays"


def test_sanitize_cuts_long_messages_and_marks_the_cut():
    out = sanitize("boom " * 500, limit=100)
    assert len(out) <= 100 and out.endswith("[cut]")
    assert sanitize("short") == "short"


def test_describe_names_the_error_class():
    assert describe(ValueError("password=x1y2")) == "ValueError: password=***"
    assert describe(KeyError()) == "KeyError"


# -- retry formulas and decisions --------------------------------------------------------


def test_backoff_formulas():
    rng = random.Random(1)
    assert [exponential(base=1)(n, rng) for n in range(5)] == [1, 2, 4, 8, 16]
    assert exponential(base=1, cap=5)(10, rng) == 5
    assert constant(3)(7, rng) == 3
    assert capped(exponential(base=10), 25)(3, rng) == 25
    draws = [full_jitter(base=1, cap=8)(n, rng) for n in range(10) for _ in range(20)]
    assert all(0 <= d <= 8 for d in draws) and len(set(draws)) > 100


def test_same_seed_same_delays():
    strategy = full_jitter(base=1, cap=60)
    first = [strategy(n, random.Random(7)) for n in range(6)]
    assert first == [strategy(n, random.Random(7)) for n in range(6)]


@pytest.mark.parametrize(
    ("error", "attempt", "kwargs", "retry", "reason"),
    [
        (PermanentError("400"), 1, {}, False, "permanent"),  # never retried
        (TransientError("503"), 1, {}, True, "never sent"),  # retried with backoff
        (ResponseLost(), 1, {}, True, "maybe done"),  # retried: the default trusts keys
        (TransientError("503"), 5, {}, False, "exhausted"),  # 5 of 5 used
        (TransientError("503"), 1, {"now": 100.0}, False, "deadline"),  # 100 > 0 + 50
        (TransientError("429", retry_after=40), 1, {}, True, "retry in 40.0s"),
    ],
)
def test_retry_policy_decides(error, attempt, kwargs, retry, reason):
    policy = RetryPolicy(max_attempts=5, backoff=constant(2), deadline=50)
    decision = policy.decide(error, attempt, random.Random(0), started_at=0.0, **kwargs)
    assert decision.retry is retry and reason in decision.reason


def test_retry_policy_refuses_maybe_done_without_idempotency():
    policy = RetryPolicy(retry_maybe_done=False)
    decision = policy.decide(ResponseLost(), 1, random.Random(0))
    assert not decision.retry and decision.verdict == "maybe_done"
