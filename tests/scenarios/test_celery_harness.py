"""The Celery harness: real workers and beats start, pause, die as asked, and leave nothing.

Every test ends by asserting that no process carrying its run's tag is alive.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading

import pytest

from labkit.integrations.celery import harness as celery_harness
from labkit.integrations.celery import points as celery_points
from labkit.integrations.celery.app import LabConfig
from labkit.integrations.celery.run import APP, CeleryRun

pytestmark = [pytest.mark.services, pytest.mark.slow]


def test_worker_starts_runs_a_task_and_stops_warm(amqp_url, tmp_path):
    with CeleryRun(amqp_url, tmp_path) as run:
        worker = run.worker("w1")
        assert worker.alive and len(worker.pool_children()) == 1
        run.send("lab.probe", "hello")
        run.wait_effects("hello", 1)
        assert worker.stop() == 0  # SIGTERM: warm shutdown, exit code 0
        assert run.leftovers() == []
    assert celery_harness.leftovers(run.config.tag) == []


def test_killed_pool_child_is_replaced_and_its_task_reported_lost(amqp_url, tmp_path):
    with CeleryRun(amqp_url, tmp_path) as run:
        worker = run.worker("w1")
        run.hold("before_effect", "lab.charge_late", "ack_late", "k1", "cus_1", 100)
        [child] = worker.pool_children()
        run.kill_held(worker)
        assert not celery_harness.is_alive(child)
        celery_harness.wait_until(lambda: bool(worker.pool_children()), 30, "a new pool child")
        assert worker.alive and child not in worker.pool_children()
        assert worker.log_text().count(celery_harness.LOST_LINE) == 1
        run.settle()
        assert run.count("k1") == 0  # acks_late alone: the lost child's task is acked
    assert celery_harness.leftovers(run.config.tag) == []


def test_kill_main_takes_the_whole_worker_down(amqp_url, tmp_path):
    with CeleryRun(amqp_url, tmp_path) as run:
        worker = run.worker("w1", concurrency=2)
        children = worker.pool_children()
        assert len(children) == 2
        worker.kill_main()
        assert worker.popen.returncode == -signal.SIGKILL
        assert not any(celery_harness.is_alive(pid) for pid in children)
        assert run.leftovers() == []


def test_kill_children_refuses_pids_that_are_not_its_children(amqp_url, tmp_path):
    with CeleryRun(amqp_url, tmp_path) as run:
        worker = run.worker("w1")
        with pytest.raises(ValueError, match="not pool children"):
            worker.kill_children([os.getpid()])
        assert celery_harness.is_alive(os.getpid())


def test_beat_starts_and_is_killed_with_its_group(amqp_url, tmp_path):
    with CeleryRun(amqp_url, tmp_path, beat=True) as run:
        beat = run.beat("beat1")
        assert beat.alive
        run.worker("w1")
        # The beat really publishes: a tick for some slot reaches the world.
        celery_harness.wait_until(
            lambda: bool(run.effects(service="webhook")), 30, "a tick from the beat"
        )
        beat.close()
        assert not beat.alive
    assert celery_harness.leftovers(run.config.tag) == []
    assert not list(tmp_path.glob("celerybeat*")), "beat wrote its files outside the folder"


def test_a_worker_that_cannot_start_says_why(amqp_url, tmp_path):
    (tmp_path / "broken_app.py").write_text(
        "raise ImportError('no such thing: broken on purpose')\n"
    )
    cfg = LabConfig.new(amqp_url, tmp_path)
    worker = celery_harness.start_worker(
        "broken_app", queue=cfg.queue, folder=tmp_path, tag=cfg.tag, env=cfg.env()
    )
    try:
        with pytest.raises(celery_harness.CeleryNotReady, match="broken on purpose"):
            worker.wait_ready(timeout=60)
    finally:
        worker.close()
    assert celery_harness.leftovers(cfg.tag) == []


def test_workers_die_when_the_process_that_started_them_is_killed(amqp_url, tmp_path):
    cfg = LabConfig.new(amqp_url, tmp_path)
    script = textwrap.dedent(
        f"""
        import os, signal
        from labkit.integrations.celery import harness as celery_harness
        from labkit.integrations.celery.app import LabConfig
        cfg = LabConfig(**{cfg.__dict__!r})
        w = celery_harness.start_worker({APP!r}, queue=cfg.queue, folder={str(tmp_path)!r},
                                        tag=cfg.tag, env=cfg.env(), concurrency=2)
        w.wait_ready()
        print(len(celery_harness.leftovers(cfg.tag)), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)  # no finally, no atexit
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == -signal.SIGKILL, out.stderr[-2000:]
    assert out.stdout.strip() == "3"  # main + 2 pool children were alive before the kill
    celery_harness.wait_until(
        lambda: celery_harness.leftovers(cfg.tag) == [], 15, "the orphaned worker to die"
    )
    from labkit.integrations.celery.app import cleanup

    cleanup(cfg)


def test_checkpoint_pauses_once_per_plan_and_is_a_noop_without_a_folder(tmp_path, monkeypatch):
    monkeypatch.delenv(celery_points.ENV, raising=False)
    celery_points.checkpoint("after_effect")  # no folder: returns at once
    monkeypatch.setenv(celery_points.ENV, str(tmp_path))
    monkeypatch.setattr(celery_points, "HOLD_S", 0.5)
    celery_points.set_pause(tmp_path, "after_effect", "p1")
    celery_points.checkpoint("before_effect")  # another point: passes
    assert celery_points.marker(tmp_path, "after_effect", "p1").exists() is False
    first = threading.Thread(target=celery_points.checkpoint, args=("after_effect",))
    first.start()
    celery_points.wait_reached(tmp_path, "after_effect", "p1", timeout=10)
    assert first.is_alive()  # paused there, waiting to be killed
    celery_points.checkpoint("after_effect")  # the second arrival (a redelivery) passes
    first.join(5)
    assert not first.is_alive()


def test_the_marker_is_never_seen_before_it_is_whole(tmp_path, monkeypatch):
    """Whoever waits for the marker reads the pid and task id at once: never an empty file.

    The write is where a slow task would be caught mid-way, so the test looks at the
    marker's path at that moment: it must not exist yet.
    """
    monkeypatch.setenv(celery_points.ENV, str(tmp_path))
    monkeypatch.setattr(celery_points, "HOLD_S", 0.2)
    path = celery_points.set_pause(tmp_path, "after_effect", "whole")
    seen_during_write: list[bool] = []
    real_write = os.write

    def watching_write(fd: int, data: bytes) -> int:
        seen_during_write.append(path.exists())
        return real_write(fd, data)

    monkeypatch.setattr(celery_points.os, "write", watching_write)
    celery_points.checkpoint("after_effect")
    assert seen_during_write == [False]  # the write happened, with no marker in sight
    pid, task_id = celery_points.paused(tmp_path, "after_effect", "whole")
    assert (pid, task_id) == (os.getpid(), "-")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".reached")] == []


class _Log:
    """A stand-in worker: only its log text matters to ``received_of``."""

    def __init__(self, text: str) -> None:
        self.text = text

    def log_text(self) -> str:
        return self.text


def test_kills_wait_for_a_redelivery_or_the_grace(monkeypatch):
    from labkit.clock import FakeClock
    from labkit.integrations.celery import run as celery_run

    monkeypatch.setattr(celery_run.harness, "CeleryWorker", _Log)
    worker = _Log("Task lab.x[t1] received\nTask lab.x[t2] received\n")
    kills = celery_run.Kills(grace=2.0)
    kills.clock = FakeClock(0.0)
    kills.record("t1", [worker])
    kills.record("t2", [worker])
    kills.clock.advance(10.0)  # Celery still deciding: the grace has not started
    assert not kills.decided([worker])
    kills.start_grace()  # the worker has acked or given back both
    worker.text += "Task lab.x[t1] received\n"  # t1 given back and received again
    assert not kills.decided([worker])  # t2 still might come back
    kills.clock.advance(2.0)
    assert kills.decided([worker])  # t2's grace ran out: it was not given back


def test_all_received_counts_each_sent_message_and_each_retry(monkeypatch, tmp_path):
    from labkit.integrations.celery import run as celery_run

    monkeypatch.setattr(celery_run.harness, "CeleryWorker", _Log)
    first, second = _Log("Task x[t1] received\n"), _Log("")
    procs = [first, second]
    assert celery_run.all_received(tmp_path, procs, ["t1"])
    assert not celery_run.all_received(tmp_path, procs, ["t1", "t2"])  # t2 on its way
    second.text += "Task x[t2] received\n"  # another worker took it
    assert celery_run.all_received(tmp_path, procs, ["t1", "t2"])
    # t1's run published a retry (same id): its message must be received once more.
    (tmp_path / celery_points.RUNS).write_text("start t1 11 10\nretry t1 11 10\nend t1 11 10\n")
    assert not celery_run.all_received(tmp_path, procs, ["t1", "t2"])
    first.text += "Task x[t1] received\n"
    assert celery_run.all_received(tmp_path, procs, ["t1", "t2"])


def test_a_worker_under_the_lab_records_a_retry_with_its_task_id(amqp_url, tmp_path):
    from labkit.integrations.celery import run as celery_run

    with CeleryRun(amqp_url, tmp_path) as run:
        worker = run.worker("w1")
        run.send("lab.serial_step", "s1", True, task_id="t-retried")  # retries once, 2 s on

        def retries() -> list[str]:
            return [task for event, task, *_ in celery_points.runs(run.folder) if event == "retry"]

        celery_harness.wait_until(lambda: bool(retries()), 30, "the retry record")
        assert retries() == ["t-retried"]
        celery_harness.wait_until(
            lambda: celery_run.all_received(run.folder, [worker], ["t-retried"]),
            30,
            "the retry's own message",
        )
        assert worker.log_text().count("[t-retried] received") == 2


def test_running_reads_the_runs_log(tmp_path):
    (tmp_path / celery_points.RUNS).write_text(
        "start a 11 10\nend a 11 10\nstart b 12 10\nstart c 13 10\n"
    )
    alive = {12}.__contains__  # 13 was killed: its run never ends, and it is not running
    assert celery_points.running(tmp_path, alive) == ["b"]
    assert celery_points.started_under(tmp_path, 10) == 3
    assert celery_points.started_under(tmp_path, 99) == 0


def _wrapped(argv, **kwargs):  # type: ignore[no-untyped-def]
    # Like the grader's bubblewrap (--new-session): the spawned pid is a wrapper, and the
    # command runs as its child in a session of its own (setsid forks when, as here, it
    # already leads a process group).
    kwargs["start_new_session"] = True
    return subprocess.Popen(["setsid", "--wait", *argv], **kwargs)


def test_a_wrapped_worker_is_found_killed_and_leaves_nothing(amqp_url, tmp_path):
    with CeleryRun(amqp_url, tmp_path) as run:
        worker = run.worker("w1", spawn=_wrapped)
        main = worker.main_pid
        assert main is not None and main != worker.pid
        assert os.getsid(main) != os.getsid(worker.pid)  # a group kill of the wrapper misses it
        run.hold("before_effect", "lab.charge_late", "ack_late", "k1", "cus_1", 100)
        [child] = worker.pool_children()
        assert child in celery_harness.descendants_of(worker.pid)
        assert child not in celery_harness.children_of(worker.pid)
        run.kill_held(worker)
        assert not celery_harness.is_alive(child)
        assert worker.log_text().count(celery_harness.LOST_LINE) == 1
        run.settle()  # counts the tasks started under the main pid, not the wrapper's
        assert run.count("k1") == 0
        tree = [worker.pid, *celery_harness.descendants_of(worker.pid)]
        assert main in tree and len(tree) >= 3  # wrapper, celery, a pool child
        worker.close()
        assert not any(celery_harness.is_alive(pid) for pid in tree)
    assert celery_harness.leftovers(run.config.tag) == []


def test_a_wrapped_worker_killed_whole_takes_its_children(amqp_url, tmp_path):
    with CeleryRun(amqp_url, tmp_path) as run:
        worker = run.worker("w1", spawn=_wrapped, concurrency=2)
        children = worker.pool_children()
        assert len(children) == 2
        worker.kill_main()
        assert not celery_harness.is_alive(worker.main_pid or 0)
        assert not any(celery_harness.is_alive(pid) for pid in children)
        assert run.leftovers() == []
    assert celery_harness.leftovers(run.config.tag) == []


def test_under_the_lab_a_worker_checks_its_pool_more_often_than_every_5_s(monkeypatch):
    class Hub:
        def __init__(self):
            self.timers = []

        def call_repeatedly(self, seconds, fn):
            self.timers.append((seconds, fn))

    class Consumer:
        def __init__(self):
            self.hub = Hub()
            self.pool = type("TaskPool", (), {})()
            self.pool._pool = type("Pool", (), {"maintain_pool": lambda self: None})()

    monkeypatch.delenv(celery_points.ENV, raising=False)
    outside = Consumer()
    celery_points._notice_lost_children_sooner(sender=outside)
    assert outside.hub.timers == []  # production: Celery's own 5 s, untouched

    monkeypatch.setenv(celery_points.ENV, "/tmp/lab")
    inside = Consumer()
    celery_points._notice_lost_children_sooner(sender=inside)
    assert [s for s, _ in inside.hub.timers] == [celery_points.LOST_CHECK_S]
    assert inside.hub.timers[0][1] == inside.pool._pool.maintain_pool
    assert celery_points.LOST_CHECK_S < 5.0

    solo = Consumer()
    solo.pool = object()  # a pool without maintain_pool (solo, threads): nothing added
    celery_points._notice_lost_children_sooner(sender=solo)
    assert solo.hub.timers == []
