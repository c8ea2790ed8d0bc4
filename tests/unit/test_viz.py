"""labkit.notebook.timelines: attempts become lanes, waits and crash marks; drawn headless (Agg)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from labkit.errors import SimulatedCrash, TransientError  # noqa: E402
from labkit.faults import FaultPlan  # noqa: E402
from labkit.job import Attempt  # noqa: E402
from labkit.notebook.timelines import plot_timeline, store_timeline, timeline  # noqa: E402
from labkit.retry import RetryPolicy, exponential  # noqa: E402
from labkit.store.sqlite import JobStore  # noqa: E402
from labkit.worker import Worker  # noqa: E402

T0 = 1000.0


def attempt(job_id, n, worker, start, end, outcome):
    return Attempt(
        job_id, n, worker, T0 + start, None if end is None else T0 + end, outcome, None, None
    )


def test_one_successful_attempt_is_one_segment_without_waits():
    tl = timeline([attempt(1, 1, "w1", 0, 2, "succeeded")])
    assert tl.workers == ("w1",)
    assert [(s.start, s.end, s.outcome) for s in tl.segments] == [(0, 2, "succeeded")]
    assert tl.gaps == () and tl.crashes == ()
    assert (tl.origin, tl.end) == (T0, 2)


def test_retry_then_success_shows_the_backoff_between_the_attempts():
    tl = timeline(
        [
            attempt(3, 2, "w2", 16, 18, "succeeded"),  # given out of order on purpose
            attempt(3, 1, "w1", 4, 6, "retry_wait"),
        ],
        origin=T0,
    )
    assert [(s.attempt, s.worker) for s in tl.segments] == [(1, "w1"), (2, "w2")]
    (gap,) = tl.gaps
    assert (gap.reason, gap.start, gap.end, gap.after_attempt) == ("backoff", 6, 16, 1)
    assert (gap.from_worker, gap.to_worker) == ("w1", "w2")


def test_a_crash_with_a_known_time_ends_the_bar_there_and_waits_for_the_lease():
    rows = [attempt(2, 1, "w1", 2, 32, "lease_expired"), attempt(2, 2, "w2", 32, 34, "succeeded")]
    tl = timeline(rows, crashed_at={(2, 1): T0 + 4}, origin=T0)
    assert tl.segments[0].end == 4
    (crash,) = tl.crashes
    assert (crash.worker, crash.job_id, crash.attempt) == ("w1", 2, 1)
    assert (crash.at, crash.exact) == (4, True)
    (gap,) = tl.gaps
    assert (gap.reason, gap.start, gap.end) == ("lease", 4, 32)


def test_a_crash_at_an_unknown_time_keeps_the_bar_until_the_takeover():
    rows = [attempt(2, 1, "w1", 2, 32, "lease_expired"), attempt(2, 2, "w2", 32, 34, "succeeded")]
    tl = timeline(rows, origin=T0)
    assert tl.segments[0].end == 32
    assert [(c.at, c.exact) for c in tl.crashes] == [(32, False)]
    assert tl.gaps == ()  # the bar already covers the wait


@pytest.mark.parametrize(
    "crash_time",
    [
        1.0,  # before the attempt started
        40.0,  # after the job was taken over
    ],
)
def test_a_crash_time_outside_its_attempt_is_refused(crash_time):
    rows = [attempt(2, 1, "w1", 2, 32, "lease_expired")]
    with pytest.raises(ValueError, match="outside the attempt"):
        timeline(rows, crashed_at={(2, 1): T0 + crash_time})


def test_a_crash_for_an_attempt_not_plotted_is_refused():
    with pytest.raises(ValueError, match="job 9 attempt 1"):
        timeline([attempt(1, 1, "w1", 0, 1, "succeeded")], crashed_at={(9, 1): T0})


def test_an_open_attempt_runs_until_now_and_is_marked_running():
    tl = timeline([attempt(1, 1, "w1", 0, None, None)], now=T0 + 5)
    assert [(s.end, s.outcome) for s in tl.segments] == [(5, "running")]


def test_lanes_follow_first_appearance_and_origin_can_be_set():
    rows = [
        attempt(1, 1, "w2", 3, 4, "succeeded"),
        attempt(2, 1, "w1", 5, 6, "succeeded"),
        attempt(3, 1, "w2", 7, 8, "succeeded"),
    ]
    tl = timeline(rows, origin=T0)
    assert tl.workers == ("w2", "w1")
    assert tl.segments[0].start == 3


def test_no_attempts_give_an_empty_timeline_that_still_draws():
    tl = timeline([])
    assert (tl.workers, tl.segments, tl.end) == ((), (), 0.0)
    ax = plot_timeline(tl)
    plt.close(ax.figure)


def test_plot_draws_a_bar_per_attempt_and_a_cross_per_crash():
    rows = [
        attempt(2, 1, "w1", 2, 32, "lease_expired"),
        attempt(2, 2, "w2", 32, 34, "succeeded"),
        attempt(3, 1, "w2", 4, 6, "retry_wait"),
        attempt(3, 2, "w2", 16, 18, "succeeded"),
    ]
    ax = plot_timeline(timeline(rows, crashed_at={(2, 1): T0 + 4}, origin=T0), title="t")
    bars = [p for p in ax.patches if p.get_height() == 0.5]
    crosses = [line for line in ax.lines if line.get_marker() == "X" and len(line.get_xdata()) == 1]
    labels = [t.get_text() for t in ax.texts]
    assert len(bars) == 4 and len(crosses) == 1
    assert "lease 28s" in labels and "backoff 10s" in labels
    assert [t.get_text() for t in ax.get_yticklabels()] == ["w1", "w2"]
    plt.close(ax.figure)


def test_from_a_real_store_a_crashed_worker_and_a_retry_show_up(tmp_path, clock, rng):
    store = JobStore(
        tmp_path / "jobs.db",
        clock=clock,
        rng=rng,
        retry=RetryPolicy(backoff=exponential(base=10, cap=300)),
    )
    a, _ = store.enqueue("pay", {"n": 1}, key="k1")
    b, _ = store.enqueue("pay", {"n": 2}, key="k2")
    failed_once = set()

    def pay(job, ctx):
        ctx.clock.sleep(2)
        if job.key == "k2" and job.key not in failed_once:
            failed_once.add(job.key)
            raise TransientError("503", status=503)
        return {"ok": True}

    plan = FaultPlan(seed=1).at("after_effect", "crash", nth=1, key="k1")
    w1 = Worker(store, {"pay": pay}, name="w1", lease_s=30, faults=plan)
    with pytest.raises(SimulatedCrash):
        w1.run_once()
    crash_time = clock.now()
    assert plan.fired_at("after_effect", "crash")
    Worker(store, {"pay": pay}, name="w2", lease_s=30, faults=plan).drain()

    tl = store_timeline(store, crashed_at={(a.id, 1): crash_time})
    assert tl.workers == ("w1", "w2")
    assert [(c.worker, c.job_id) for c in tl.crashes] == [("w1", a.id)]
    reasons = {(g.job_id, g.reason) for g in tl.gaps}
    assert reasons == {(a.id, "lease"), (b.id, "backoff")}
    assert [s.outcome for s in tl.segments if s.job_id == a.id] == ["lease_expired", "succeeded"]
