"""The outside world: each behaviour, Stripe-like idempotency, and truth that survives."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from labkit.clock import FakeClock
from labkit.errors import IdempotencyConflict, PermanentError, ResponseLost, TransientError
from labkit.faults import FaultPlan
from labkit.world import IdempotencyKeyReused, KeyInProgress, World


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path / "world.db", FakeClock())


def test_every_effect_is_recorded_with_key_and_payload(world: World) -> None:
    world.payments.charge("cus_1", 500, key="inv:1")
    world.mail.send("a@example.com", "hi", key="mail:1")
    world.webhook.post("https://example.com/h", {"event": 1}, key="hook:1")
    effects = world.effects()
    assert [(e.service, e.key) for e in effects] == [
        ("payments", "inv:1"),
        ("mail", "mail:1"),
        ("webhook", "hook:1"),
    ]
    assert effects[0].payload == {"customer": "cus_1", "amount": 500, "currency": "BRL"}
    assert world.payments.find("inv:1")[0].response["charge_id"] == "ch_1"


def test_without_idempotency_key_a_repeat_charges_again(world: World) -> None:
    world.payments.charge("cus_1", 500, key="inv:1")
    world.payments.charge("cus_1", 500, key="inv:1")
    assert world.count("inv:1") == 2


def test_same_key_same_params_returns_the_stored_reply_without_a_new_effect(world: World) -> None:
    first = world.payments.charge("cus_1", 500, idempotency_key="inv:1")
    second = world.payments.charge("cus_1", 500, idempotency_key="inv:1")
    assert first == second and world.count("inv:1") == 1
    assert [c.outcome for c in world.calls()] == ["ok", "replayed"]


def test_same_key_other_params_is_a_permanent_conflict(world: World) -> None:
    world.payments.charge("cus_1", 500, idempotency_key="inv:1")
    with pytest.raises(IdempotencyKeyReused, match="other parameters") as err:
        world.payments.charge("cus_1", 999, idempotency_key="inv:1")
    assert isinstance(err.value, PermanentError) and isinstance(err.value, IdempotencyConflict)
    assert world.count("inv:1") == 1


def test_an_expired_idempotency_key_no_longer_protects(tmp_path: Path) -> None:
    clock = FakeClock()
    world = World(tmp_path / "world.db", clock)
    world.payments.charge("cus_1", 500, idempotency_key="inv:1")
    clock.advance(3600)
    world.payments.charge("cus_2", 700, idempotency_key="inv:2")
    world.mail.send("a@example.com", "hi", key="m")  # mail keeps no keys: nothing to expire
    clock.advance(23 * 3600)  # inv:1 is 24 h old now, inv:2 only 23 h
    assert world.payments.expire_idempotency_keys(older_than_s=24 * 3600) == 1
    world.payments.charge("cus_2", 700, idempotency_key="inv:2")
    assert world.count("inv:2") == 1  # still remembered: replayed
    world.payments.charge("cus_1", 500, idempotency_key="inv:1")
    assert world.count("inv:1") == 2  # forgotten: a new request, a second charge
    with pytest.raises(ValueError, match=">= 0"):
        world.payments.expire_idempotency_keys(-1)


def test_key_still_in_progress_gets_a_409(tmp_path: Path) -> None:
    seen: list[Exception] = []

    class Meddling(FakeClock):
        """While the first (slow) request holds the key, a second one arrives."""

        def sleep(self, seconds: float) -> None:
            try:
                world.payments.charge("cus_1", 500, idempotency_key="inv:1")
            except KeyInProgress as exc:
                seen.append(exc)
            super().sleep(seconds)

    world = World(tmp_path / "w.db", Meddling())
    world.payments.script("slow", delay=3.0)
    world.payments.charge("cus_1", 500, idempotency_key="inv:1")
    assert len(seen) == 1 and seen[0].status == 409 and isinstance(seen[0], TransientError)
    assert world.count("inv:1") == 1
    assert [c.outcome for c in world.calls()] == ["in_progress", "ok"]


def test_lose_response_does_the_effect_then_raises(world: World) -> None:
    world.payments.script("lose_response")
    with pytest.raises(ResponseLost):
        world.payments.charge("cus_1", 500, key="inv:1")
    assert world.count("inv:1") == 1
    assert world.calls()[0].outcome == "ok_response_lost"


# Each row: a scripted behaviour that fails before any effect, and the status it carries.
@pytest.mark.parametrize(
    ("behaviour", "error", "status"),
    [
        ("fail_before", TransientError, 503),  # server error: nothing done, retry later
        ("rate_limit", TransientError, 429),  # too many requests, with retry_after
        ("reject", PermanentError, 400),  # bad request: do not retry
    ],
)
def test_failures_before_the_effect_do_nothing(
    world: World, behaviour: str, error: type[Exception], status: int
) -> None:
    world.mail.script(behaviour, retry_after=12.0)
    with pytest.raises(error) as raised:
        world.mail.send("a@example.com", "hi", key="m1")
    assert getattr(raised.value, "status", None) == status
    if behaviour == "rate_limit":
        assert raised.value.retry_after == 12.0  # type: ignore[attr-defined]
    assert world.count("m1") == 0
    world.mail.send("a@example.com", "hi", key="m1")  # the script is used up: normal again
    assert world.count("m1") == 1


def test_slow_sleeps_through_the_clock(tmp_path: Path) -> None:
    clock = FakeClock()
    world = World(tmp_path / "w.db", clock)
    world.webhook.script("slow", delay=7.0)
    start = clock.now()
    world.webhook.post("https://example.com", {}, key="h")
    assert clock.now() - start == 7.0


def test_fault_plan_points_before_call_and_lost_response(tmp_path: Path) -> None:
    plan = (
        FaultPlan(seed=2)
        .at("before_call", "raise_transient", nth=1)
        .at("lost_response", "lose_response", nth=1)
    )
    world = World(tmp_path / "w.db", FakeClock(), faults=plan)
    with pytest.raises(TransientError):
        world.payments.charge("c", 1, key="k")
    assert world.count("k") == 0
    with pytest.raises(ResponseLost):
        world.payments.charge("c", 1, key="k")
    assert world.count("k") == 1
    assert plan.fired_at("before_call") and plan.fired_at("lost_response")


def test_ledger_transaction_is_all_or_nothing(world: World) -> None:
    class Boom(Exception):
        pass

    with pytest.raises(Boom), world.ledger.transaction() as tx:
        tx.post("acc", 10, key="k")
        tx.mark("k", "done")
        raise Boom
    assert world.ledger.status("k") is None and world.ledger.find("k") == []
    with world.ledger.transaction() as tx:
        tx.post("acc", 10, key="k")
        tx.mark("k", "done")
    assert world.ledger.status("k") == "done" and len(world.ledger.find("k")) == 1


@pytest.mark.parametrize(
    ("account", "amount", "says"),
    [
        (None, 4400, "needs an account, a non-empty text, not NoneType None"),
        ("", 4400, "needs an account, a non-empty text, not str ''"),
        ("cus_44", None, "amount is a whole number of cents, not NoneType None"),
        ("cus_44", 44.0, "amount is a whole number of cents, not float 44.0"),
        ("cus_44", True, "amount is a whole number of cents, not bool True"),
    ],
)
def test_a_ledger_entry_without_its_account_or_amount_is_refused(
    world: World, account: object, amount: object, says: str
) -> None:
    # A payload's missing field passed on as None is refused, never booked as a NULL.
    with pytest.raises(ValueError, match=says), world.ledger.transaction() as tx:
        tx.mark("k", "started")
        tx.post(account, amount, key="k")  # type: ignore[arg-type]
    assert world.ledger.status("k") is None and world.ledger.find("k") == []
    assert world.ledger.post("cus_44", -1, key="k")["entry_id"].startswith("le_")


def test_the_truth_survives_closing_and_reopening(tmp_path: Path) -> None:
    path = tmp_path / "world.db"
    first = World(path, FakeClock())
    first.payments.charge("c", 1, idempotency_key="k")
    first.payments.script("reject")
    first.close()
    again = World(path, FakeClock())
    assert again.count("k") == 1
    with pytest.raises(PermanentError):  # scripts live in the file too
        again.payments.charge("c", 2, key="other")
    assert again.payments.charge("c", 1, idempotency_key="k")["charge_id"] == "ch_1"
    assert again.count("k") == 1


def test_refuses_a_database_that_is_not_a_world(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE customers (id INTEGER)")
    with pytest.raises(Exception, match="not a labkit world"):
        World(path)


def test_unknown_behaviour_is_refused(world: World) -> None:
    with pytest.raises(ValueError, match="unknown behaviour"):
        world.payments.script("explode")


def test_two_threads_with_their_own_connections_get_409_then_the_stored_reply(
    tmp_path: Path,
) -> None:
    path = tmp_path / "world.db"
    entered, release = threading.Event(), threading.Event()

    class Gate(FakeClock):
        """The slow request waits here, holding the key, until the test lets it go."""

        def sleep(self, seconds: float) -> None:
            entered.set()
            assert release.wait(10), "the test never released the slow request"
            super().sleep(seconds)

    first, second = World(path, Gate()), World(path, FakeClock())
    first.payments.script("slow", delay=3.0)
    replies: list[dict[str, object]] = []
    slow = threading.Thread(
        target=lambda: replies.append(first.payments.charge("c", 500, idempotency_key="inv:1"))
    )
    slow.start()
    try:
        assert entered.wait(10), "the slow request never started"
        with pytest.raises(KeyInProgress) as busy:
            second.payments.charge("c", 500, idempotency_key="inv:1")
        with pytest.raises(IdempotencyKeyReused):
            second.payments.charge("c", 999, idempotency_key="inv:1")
    finally:
        release.set()
        slow.join(10)
    assert busy.value.status == 409 and replies and world_count(second, "inv:1") == 1
    assert second.payments.charge("c", 500, idempotency_key="inv:1") == replies[0]
    assert [c.outcome for c in second.calls()] == ["in_progress", "conflict", "ok", "replayed"]


def test_racing_threads_never_charge_one_key_twice(tmp_path: Path) -> None:
    path = tmp_path / "world.db"
    worlds = [World(path, FakeClock()) for _ in range(2)]
    seen: list[str] = []

    def race(world: World) -> None:
        for n in range(40):
            try:
                world.payments.charge("c", 100 + n, idempotency_key=f"inv:{n}")
                seen.append("reply")
            except KeyInProgress:
                seen.append("409")

    threads = [threading.Thread(target=race, args=(w,)) for w in worlds]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(seen) == 80 and all(world_count(worlds[0], f"inv:{n}") == 1 for n in range(40))
    outcomes = {c.outcome for c in worlds[0].calls()}
    assert outcomes <= {"ok", "replayed", "in_progress"} and "ok" in outcomes


def world_count(world: World, key: str) -> int:
    return world.count(key, "payments")
