"""single_instance: one holder per file, freed by the kernel on SIGKILL; naive pidfiles go stale."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import labkit.patterns.lock
from labkit.clock import FakeClock
from labkit.errors import AlreadyRunning, LabkitError
from labkit.patterns.lock import naive_pidfile, read_holder, single_instance

START = 1_767_225_600.0  # 2026-01-01 00:00:00 UTC

# The child takes the lock, says so, then blocks on stdin until it is killed (no sleep).
HOLDER = textwrap.dedent(
    """
    import sys
    from labkit.patterns.lock import {name}
    with {name}(sys.argv[1], started_at={start}):
        print("locked", flush=True)
        sys.stdin.read()
    """
)


def spawn_holder(path: Path, name: str) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER.format(name=name, start=START), str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "locked"
    return child


def kill9(child: subprocess.Popen[str]) -> None:
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=10)
    assert child.returncode == -signal.SIGKILL


def test_second_holder_in_the_same_process_gets_already_running(tmp_path):
    path = tmp_path / "job.lock"
    clock = FakeClock(start=START)
    with single_instance(path, clock) as holder:
        assert holder.pid == os.getpid()
        with pytest.raises(AlreadyRunning) as info:
            with single_instance(path, clock):
                pass
        assert f"pid {os.getpid()}" in str(info.value)
        assert "2026-01-01 00:00:00" in str(info.value)
    with single_instance(path, clock):  # released on leaving the block
        pass


def test_lock_released_when_the_block_raises(tmp_path):
    path = tmp_path / "job.lock"
    with pytest.raises(RuntimeError):
        with single_instance(path, started_at=START):
            raise RuntimeError("the job failed")
    with single_instance(path, started_at=START):
        pass


def test_kernel_frees_the_lock_when_the_holder_is_sigkilled(tmp_path):
    path = tmp_path / "job.lock"
    child = spawn_holder(path, "single_instance")
    try:
        with pytest.raises(AlreadyRunning) as info:
            with single_instance(path, started_at=START + 60):
                pass
        assert f"pid {child.pid}" in str(info.value)
        assert "2026-01-01 00:00:00" in str(info.value)
    finally:
        kill9(child)
    # The file is still there and still names the dead holder: only the lock is gone.
    assert read_holder(path).pid == child.pid
    with single_instance(path, started_at=START + 60) as holder:
        assert read_holder(path) == holder


def test_naive_pidfile_stays_stale_after_kill_9(tmp_path):
    path = tmp_path / "job.pid"
    child = spawn_holder(path, "naive_pidfile")
    kill9(child)
    assert path.exists(), "kill -9 skips the cleanup, so the pidfile must remain"
    with pytest.raises(AlreadyRunning) as info:
        with naive_pidfile(path, started_at=START + 60):
            pass
    assert f"pid {child.pid}" in str(info.value) and "stale" in str(info.value)


def test_naive_pidfile_is_removed_on_a_clean_exit(tmp_path):
    path = tmp_path / "job.pid"
    with naive_pidfile(path, started_at=START):
        assert read_holder(path).started_at == START
    assert not path.exists()


def test_without_fcntl_the_message_says_use_wsl(tmp_path, monkeypatch):
    monkeypatch.setattr(labkit.patterns.lock, "fcntl", None)
    with pytest.raises(LabkitError, match="WSL"):
        with single_instance(tmp_path / "job.lock", started_at=START):
            pass
