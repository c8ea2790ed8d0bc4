"""A long ``TMPDIR`` must not fail a student's checks for a reason that is not theirs.

Each check of exercise 9 starts a Redis listening on a unix socket in the student's
folder, below the grader's temporary folder. A unix socket's path holds at most 107
bytes on Linux; CI's pytest folder (``/tmp/pytest-of-root/pytest-103/popen-gw2/...``)
once made it 108, every ``redis-server`` exited at once, and the reference solution
scored 0/22 ("the check's private Redis to start"). The grader now keeps its scratch
folders where the deepest socket fits, and a path too long is named as such.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from labkit.grading.checks import CheckFailed
from labkit.grading.grade import SCRATCH_PREFIX, scratch_root, sweep_abandoned
from labkit.grading.isolation.services import REDIS_SOCKET, SOCKET_PATH_MAX, private_redis


def _deepest_socket(root: Path, folder: str = f"{SCRATCH_PREFIX}4194304-xxxxxxxx") -> Path:
    """The deepest socket under ``root``: a scratch folder named for its grader's pid (up
    to 7 digits) and mkdtemp's 8 characters."""
    return root / folder / "student" / "work" / REDIS_SOCKET


def test_a_short_temporary_folder_is_used_as_it_is() -> None:
    assert scratch_root(Path("/tmp")) == Path("/tmp")
    assert scratch_root(Path("/var/tmp/grading")) == Path("/var/tmp/grading")


@pytest.mark.parametrize("extra", [0, 1, 40])
def test_a_temporary_folder_too_long_for_a_socket_falls_back_to_tmp(extra: int) -> None:
    # The longest folder whose deepest socket still fits, then one byte more and beyond.
    room = SOCKET_PATH_MAX - len(str(_deepest_socket(Path("/"))).lstrip("/")) - 1
    fits = Path("/" + "d" * (room - 1))
    assert len(str(_deepest_socket(fits))) == SOCKET_PATH_MAX
    assert scratch_root(fits) == fits
    too_long = Path("/" + "d" * (room + extra))
    assert len(str(_deepest_socket(too_long))) > SOCKET_PATH_MAX
    chosen = scratch_root(too_long)
    assert chosen == Path("/tmp")
    assert len(str(_deepest_socket(chosen))) <= SOCKET_PATH_MAX


def test_the_ci_folder_that_broke_exercise_9_is_not_used() -> None:
    ci = Path("/tmp/pytest-of-root/pytest-103/popen-gw2/serviceclass0/scratch")
    # What happened in CI, when the folder's name held no pid yet.
    assert len(str(_deepest_socket(ci, f"{SCRATCH_PREFIX}xxxxxxxx"))) == SOCKET_PATH_MAX + 1
    assert scratch_root(ci) == Path("/tmp")


def test_a_socket_path_too_long_is_named_not_reported_as_a_dead_redis(tmp_path: Path) -> None:
    workdir = tmp_path / ("w" * (SOCKET_PATH_MAX - len(str(tmp_path))))
    started: list[Any] = []

    def spawn(*args: Any, **kwargs: Any) -> subprocess.Popen[Any]:
        started.append(args)
        raise AssertionError("no redis-server may start on a socket path it cannot bind")

    with pytest.raises(CheckFailed) as failed:
        private_redis(spawn, workdir)
    assert started == []
    assert f"at most {SOCKET_PATH_MAX} bytes" in failed.value.expected
    assert str(workdir / REDIS_SOCKET) in failed.value.got
    assert "not yours" in (failed.value.hint or "")


def test_a_killed_graders_folder_is_swept_even_before_its_pid_file_was_written(
    tmp_path: Path,
) -> None:
    # A grader killed between making its folder and writing its pid file: the name says
    # whose it is. A live grader's folder, and one that names nobody, stay.
    gone = subprocess.Popen(["true"])
    gone.wait()
    live = subprocess.Popen(["sleep", "30"])
    try:
        dead_one = tmp_path / f"{SCRATCH_PREFIX}{gone.pid}-abc_1234"
        live_one = tmp_path / f"{SCRATCH_PREFIX}{live.pid}-def_5678"
        nobody = tmp_path / f"{SCRATCH_PREFIX}cache-xyz"
        for folder in (dead_one, live_one, nobody):
            (folder / "student" / "work").mkdir(parents=True)
        assert sweep_abandoned(tmp_path) == 1
        assert not dead_one.exists() and live_one.exists() and nobody.exists()
    finally:
        live.kill()
        live.wait()
