"""FaultPlan: triggers, actions, the record of hits, and the replay line."""

from __future__ import annotations

import pytest

from labkit.clock import FakeClock
from labkit.errors import PermanentError, ResponseLost, SimulatedCrash, TransientError
from labkit.faults import FaultPlan, plan_for


def test_nth_fires_only_on_that_hit_and_records_every_hit() -> None:
    plan = FaultPlan(seed=1).at("after_effect", "crash", nth=2)
    assert plan.hit("after_effect", key="a") is None
    with pytest.raises(SimulatedCrash) as crash:
        plan.hit("after_effect", key="b")
    assert crash.value.point == "after_effect"
    assert plan.hit("after_effect", key="c") is None
    assert [(h.point, h.key, h.n) for h in plan.hits] == [
        ("after_effect", "a", 1),
        ("after_effect", "b", 2),
        ("after_effect", "c", 3),
    ]
    assert [(f.point, f.key, f.n, f.action) for f in plan.fired] == [
        ("after_effect", "b", 2, "crash")
    ]


def test_key_trigger_counts_only_that_keys_hits() -> None:
    plan = FaultPlan().at("before_effect", "raise_transient", key="k2", nth=2)
    for key in ("k1", "k2", "k1"):
        plan.hit("before_effect", key=key)
    with pytest.raises(TransientError) as err:
        plan.hit("before_effect", key="k2")
    assert err.value.status == 503
    assert plan.fired_at("before_effect", "raise_transient")


def test_probability_is_drawn_from_the_seed_so_equal_seeds_fire_alike() -> None:
    def fired_hits(seed: int) -> list[int]:
        plan = FaultPlan(seed).at("after_claim", "raise_permanent", probability=0.3)
        out = []
        for n in range(200):
            try:
                plan.hit("after_claim")
            except PermanentError:
                out.append(n)
        return out

    first = fired_hits(5)
    assert first == fired_hits(5)
    assert first != fired_hits(6)
    assert 30 < len(first) < 90  # about 60 of 200


# Each row: an action and what the caller must see.
@pytest.mark.parametrize(
    ("action", "error", "status"),
    [
        ("raise_transient", TransientError, 503),  # a 5xx: try again later
        ("rate_limit", TransientError, 429),  # a 429 carrying retry_after
        ("raise_permanent", PermanentError, 400),  # a 400: retrying cannot help
        ("lose_response", ResponseLost, None),  # done, but the reply never came
    ],
)
def test_raising_actions(action: str, error: type[Exception], status: int | None) -> None:
    plan = FaultPlan().at("lost_response", action, nth=1)
    with pytest.raises(error) as raised:
        plan.hit("lost_response", key="k")
    assert getattr(raised.value, "status", None) == status
    assert plan.fired_at("lost_response", action)


def test_delay_sleeps_through_the_clock() -> None:
    clock = FakeClock()
    before = clock.now()
    plan = FaultPlan().at("before_commit", "delay", delay=42.0)
    assert plan.hit("before_commit", clock=clock) == "delay"
    assert clock.now() - before == 42.0
    assert plan.fired_at("before_commit", "delay")


def test_crash_is_not_an_exception() -> None:
    plan = FaultPlan().at("after_ack", "crash")
    with pytest.raises(SimulatedCrash):
        try:
            plan.hit("after_ack")
        except Exception:  # what a careless handler writes: it must not swallow a crash
            pytest.fail("SimulatedCrash was caught by except Exception")
    assert plan.fired


def test_replay_round_trip_keeps_seed_rules_and_odd_keys() -> None:
    plan = (
        FaultPlan(seed=99)
        .at("after_effect", "crash", nth=1)
        .at("lost_response", "lose_response", key="billing:42; charge v1", probability=0.25)
        .at("before_call", "delay", delay=2.5)
    )
    line = plan.replay()
    assert "\n" not in line and line.startswith("seed=99;")
    again = FaultPlan.parse(line)
    assert again == plan and str(again) == line
    assert plan_for(["after_effect:crash nth=1"], seed=3) == FaultPlan(3).at(
        "after_effect", "crash", nth=1
    )


def test_a_parsed_plan_replays_the_same_faults() -> None:
    plan = FaultPlan(seed=4).at("p", "raise_transient", probability=0.5)
    clone = FaultPlan.parse(str(plan))

    def run(p: FaultPlan) -> list[int]:
        for _ in range(50):
            try:
                p.hit("p")
            except TransientError:
                pass
        return [f.n for f in p.fired]

    assert run(plan) == run(clone) and plan.fired


# Each row: a bad rule and the words the error must contain.
@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"point": "after_effect", "action": "explode"}, "unknown action"),
        ({"point": "after effect", "action": "crash"}, "plain name"),
        ({"point": "after_effect", "action": "crash", "nth": 0}, "nth counts hits from 1"),
        ({"point": "after_effect", "action": "crash", "probability": 2}, "between 0 and 1"),
        ({"point": "after_effect", "action": "delay"}, "needs delay"),
    ],
)
def test_bad_rules_are_refused_with_a_reason(kwargs: dict[str, object], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        FaultPlan().at(**kwargs)  # type: ignore[arg-type]


def test_parse_refuses_a_line_without_seed() -> None:
    with pytest.raises(ValueError, match="seed="):
        FaultPlan.parse("after_effect:crash nth=1")
