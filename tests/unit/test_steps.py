"""Checkpoints per step: crash at every boundary, resume, and each effect happens once."""

from __future__ import annotations

import pytest

from labkit.clock import FakeClock
from labkit.errors import LabkitError, PermanentError, SimulatedCrash
from labkit.faults import FaultPlan
from labkit.patterns import steps
from labkit.world import World

SEED = 16
STEPS = ("reserve", "charge", "email")


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def conn(tmp_path):
    conn = steps.connect(tmp_path / "jobs.db")
    steps.install(conn)
    return conn


@pytest.fixture
def world(tmp_path, clock):
    with World(tmp_path / "world.db", clock=clock) as world:
        yield world


def reserve_once(world, key, amount):
    """A ledger entry guarded by its key in the same transaction: the ledger's idempotency."""
    with world.ledger.transaction() as tx:
        if tx.status(key) is None:
            tx.post("stock:sku-1", amount, key=key)
            tx.mark(key)
    return {"reserved": key}


def order_job(conn, world, clock, faults=None, *, version="v1", keyed=True):
    """Reserve, charge, e-mail; v2 sends the e-mail before the charge."""
    run = steps.StepRun(conn, "order:1", clock, faults=faults, policy_version=version)

    def charge():
        idem = "order:1:charge" if keyed else None
        return world.payments.charge("cus_1", 4200, key="order:1:charge", idempotency_key=idem)

    actions = {
        "reserve": lambda: reserve_once(world, "order:1:reserve", -1),
        "charge": charge,
        "email": lambda: world.mail.send(
            "ana@example.com", "your order", key="order:1:email",
            idempotency_key="order:1:email" if keyed else None,
        ),
    }
    order = {"v1": STEPS, "v2": ("reserve", "email", "charge")}[run.policy_version]
    for name in order:
        run.step(name, actions[name],
                 undo=(lambda _r: reserve_once(world, "order:1:release", +1))
                 if name == "reserve" else None)
    return run


def counts(world):
    reserves = sum(e.payload["amount"] == -1 for e in world.ledger.find("order:1:reserve"))
    return (reserves, world.count("order:1:charge", "payments"),
            world.count("order:1:email", "mail"))


def test_a_job_without_faults_runs_each_step_once_and_checkpoints_it(conn, world, clock):
    run = order_job(conn, world, clock)
    assert counts(world) == (1, 1, 1)
    assert run.done() == list(STEPS)
    assert [r["policy_version"] for r in steps.rows(conn, "order:1")] == ["v1"] * 3


def test_a_finished_job_run_again_skips_every_step(conn, world, clock):
    order_job(conn, world, clock)
    order_job(conn, world, clock, keyed=False)  # no idempotency key: only the checkpoints
    assert counts(world) == (1, 1, 1)


# One row per boundary of the three-step job: between steps, and between an effect and
# its checkpoint (the step runs again, its idempotency key absorbs the repeat).
POINTS = [steps.after_step(s) for s in STEPS] + [steps.after_effect(s) for s in STEPS]


@pytest.mark.parametrize("point", POINTS)
def test_a_crash_at_each_boundary_resumes_with_every_effect_once(conn, world, clock, point):
    plan = FaultPlan(seed=SEED).at(point, "crash", nth=1)
    with pytest.raises(SimulatedCrash):
        order_job(conn, world, clock, faults=plan)
    assert plan.fired_at(point, "crash"), f"the crash at {point} never fired"
    order_job(conn, world, clock, faults=plan)
    assert counts(world) == (1, 1, 1)
    assert steps.rows(conn, "order:1")[-1]["step"] == "email"


@pytest.mark.parametrize("step", ["charge", "email"])
def test_a_crash_between_effect_and_checkpoint_repeats_an_unkeyed_effect(
    conn, world, clock, step
):
    plan = FaultPlan(seed=SEED).at(steps.after_effect(step), "crash", nth=1)
    with pytest.raises(SimulatedCrash):
        order_job(conn, world, clock, faults=plan, keyed=False)
    assert plan.fired
    order_job(conn, world, clock, faults=plan, keyed=False)
    charges, emails = counts(world)[1:]
    assert (charges, emails) == ((2, 1) if step == "charge" else (1, 2))


def test_a_step_between_steps_is_not_run_again_without_any_key(conn, world, clock):
    plan = FaultPlan(seed=SEED).at(steps.after_step("charge"), "crash", nth=1)
    with pytest.raises(SimulatedCrash):
        order_job(conn, world, clock, faults=plan, keyed=False)
    assert plan.fired_at(steps.after_step("charge"))
    order_job(conn, world, clock, keyed=False)
    assert counts(world) == (1, 1, 1)


def test_a_permanent_failure_compensates_the_finished_steps_in_reverse(conn, world, clock):
    world.payments.script("reject")
    run = steps.StepRun(conn, "order:1", clock)
    run.step("reserve", lambda: reserve_once(world, "order:1:reserve", -1),
             undo=lambda _r: reserve_once(world, "order:1:release", +1))
    run.step("note", lambda: {"noted": True}, undo=lambda _r: {"unnoted": True})
    with pytest.raises(PermanentError):
        run.step("charge", lambda: world.payments.charge("cus_1", 4200,
                                                           idempotency_key="order:1:charge"))
    assert run.compensate() == ["note", "reserve"]
    assert [r["state"] for r in steps.rows(conn, "order:1")] == ["compensated", "compensated"]
    amounts = [e.payload["amount"] for e in world.effects(service="ledger")]
    assert amounts == [-1, +1]
    assert world.count("order:1:charge", "payments") == 0
    with pytest.raises(steps.JobCompensated):
        run.step("reserve", lambda: reserve_once(world, "order:1:reserve", -1))


def test_a_crash_while_compensating_resumes_the_compensation(conn, world, clock):
    plan = FaultPlan(seed=SEED).at(steps.after_undo("reserve"), "crash", nth=1)
    run = steps.StepRun(conn, "order:1", clock, faults=plan)
    run.step("reserve", lambda: reserve_once(world, "order:1:reserve", -1),
             undo=lambda _r: reserve_once(world, "order:1:release", +1))
    with pytest.raises(SimulatedCrash):
        run.compensate()
    assert plan.fired_at(steps.after_undo("reserve"), "crash")
    again = steps.StepRun(conn, "order:1", clock, faults=plan)
    assert again.compensate({"reserve": lambda _r: reserve_once(world, "order:1:release", +1)}) == [
        "reserve"]
    assert again.compensate() == []
    assert [e.payload["amount"] for e in world.effects(service="ledger")] == [-1, +1]


def test_a_resumed_job_keeps_the_policy_version_it_started_under(conn, world, clock):
    plan = FaultPlan(seed=SEED).at(steps.after_step("reserve"), "crash", nth=1)
    with pytest.raises(SimulatedCrash):
        order_job(conn, world, clock, faults=plan, version="v1")
    assert plan.fired
    run = order_job(conn, world, clock, version="v2")  # deployed since
    assert run.policy_version == "v1" and run.deployed == "v2" and run.resumed_old_policy
    assert steps.started_with(conn, "order:1") == "v1"
    assert run.done() == ["reserve", "charge", "email"]  # v1's order, not v2's
    assert {r["policy_version"] for r in steps.rows(conn)} == {"v1"}


def test_a_new_job_starts_under_the_deployed_version(conn, clock):
    assert steps.started_with(conn, "order:2") is None
    run = steps.StepRun(conn, "order:2", clock, policy_version="v2")
    assert run.policy_version == "v2" and not run.resumed_old_policy


def test_a_step_whose_effect_raises_checkpoints_nothing(conn, clock):
    run = steps.StepRun(conn, "order:1", clock)

    def boom():
        raise PermanentError("400: card declined")

    with pytest.raises(PermanentError):
        run.step("charge", boom)
    assert steps.rows(conn, "order:1") == []


def test_a_result_that_is_not_json_is_refused(conn, clock):
    run = steps.StepRun(conn, "order:1", clock)
    with pytest.raises(LabkitError):
        run.step("odd", lambda: object())
    assert steps.rows(conn) == []


def test_an_open_transaction_is_refused(conn, clock):
    conn.execute("BEGIN")
    with pytest.raises(LabkitError, match="open transaction"):
        steps.StepRun(conn, "order:1", clock)
    conn.execute("ROLLBACK")


def test_a_run_needs_a_key(conn, clock):
    with pytest.raises(ValueError, match="stable key"):
        steps.StepRun(conn, "", clock)
