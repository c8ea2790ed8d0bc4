"""Every lesson, run in the student kit with the kit's own ``make check-one`` (nbval, strict).

Half of them here, the other half in test_kit_lessons_odd.py (on another worker); ``make
check``, which the README gives, is checked to be the same command over all of them.

Then the kit's ``make lab``: its banner gives the URL JupyterLab really serves, and
saving every lesson and exercise through that server (its REST API, as the browser
saves) leaves ``git status`` clean.

This is the run that proves the lessons in CI: the kit holds the same lesson files as the
repository (tests/grading/test_bundle.py checks they are byte for byte the same), and
running them here, on the kit's own .venv, also fails when the kit lacks a package a
lesson imports, a file a lesson reads, or a Makefile target the lessons name. Lessons 13
and 14 need PostgreSQL, Redis and RabbitMQ; without them the test skips, saying how to
start them (LABKIT_REQUIRE_SERVICES=1 makes that a failure).
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from studentkit import (
    as_a_kernel_leaves_it,
    every_other_lesson,
    free_port,
    git_status,
    kit_env,
    make_check_runs,
    run_in_kit,
    saves_held_off,
)

from labkit.integrations.celery.proctree import kill_tree

pytestmark = pytest.mark.slow


def test_every_other_lesson_from_the_first_runs_in_the_kit_and_prints_what_is_stored(
    kit: Path, postgres_dsn: str, redis_url: str, amqp_url: str
) -> None:
    """Lessons 00, 02, 04, ...; test_kit_lessons_odd.py runs the others on another worker
    (the whole edition in one test was the suite's longest, and set the end of the run)."""
    make_check_runs(kit, "notebooks", every_other_lesson(kit, 0), {}, every=False)


def test_make_check_runs_the_lessons_as_check_one_does(kit: Path) -> None:
    """The lessons run through ``make check-one`` (two halves, on two workers): ``make
    check``, what the README tells a student, is the same command over every lesson."""
    check = run_in_kit(kit, ["make", "-n", "check"], timeout=60, env={}).stdout
    one = run_in_kit(kit, ["make", "-n", "check-one", "NB=00_start_here"], timeout=60,
                     env={}).stdout
    [check_line] = [line for line in check.splitlines() if "-m pytest" in line]
    [one_line] = [line for line in one.splitlines() if "-m pytest" in line]
    assert check_line == one_line.replace("notebooks/00_start_here.ipynb",
                                          "notebooks/*.ipynb"), (check_line, one_line)


def _banner_url(proc: subprocess.Popen[str], timeout_s: float = 120) -> str:
    """The URL ``make lab`` printed, read from its output as a student reads it."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    seen = []
    banner = False  # Jupyter's own log lists URLs too: take the one under labkit's banner
    for line in proc.stdout:
        seen.append(line)
        banner = banner or line.startswith("JupyterLab is serving the lessons")
        found = re.search(r"^\s+(http://\S+)$", line)
        if banner and found:
            return found[1]
        assert time.monotonic() < deadline, "make lab printed no URL:\n" + "".join(seen)
    raise AssertionError("make lab ended before printing its URL:\n" + "".join(seen))


def test_make_lab_prints_its_real_url_and_saving_any_notebook_changes_nothing(
    kit: Path, tmp_path: Path
) -> None:
    """``make lab`` headless, then every lesson and exercise saved through its REST API."""
    env = kit_env({"PORT": str(free_port()), "DISPLAY": "", "WAYLAND_DISPLAY": "",
                   "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
                   "JUPYTER_CONFIG_DIR": str(tmp_path / "config")})
    proc = subprocess.Popen(["make", "lab"], cwd=kit, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        url = _banner_url(proc)
        parts = urlsplit(url)
        token = parse_qs(parts.query)["token"][0]
        assert re.fullmatch(r"[0-9a-f]{32,}", token), url  # a real token, not "..."
        assert parts.path == "/lab/tree/notebooks/00_start_here.ipynb", url
        api = f"{parts.scheme}://{parts.netloc}/api/contents"
        headers = {"Authorization": f"token {token}"}
        folders = ("notebooks", "exercises", "notebooks/pt_BR", "exercises/pt_BR")
        paths = sorted(p.relative_to(kit).as_posix() for folder in folders
                       for p in (kit / folder).glob("*.ipynb"))
        assert len(paths) >= 60, paths  # both editions
        # No git status is read in the kit while these saves write (saves_held_off).
        with saves_held_off(kit), httpx.Client(headers=headers, timeout=60) as client:
            for rel in paths:
                model = client.get(f"{api}/{rel}", params={"content": 1}).raise_for_status()
                notebook = model.json()["content"]
                as_a_kernel_leaves_it(notebook)
                saved = client.put(f"{api}/{rel}", json={"type": "notebook", "format": "json",
                                                         "content": notebook})
                assert saved.status_code == 200, f"{rel}: {saved.status_code} {saved.text[:300]}"
    finally:
        kill_tree(proc.pid)
    status = git_status(kit)
    assert status == "", f"saving in the kit's JupyterLab changed files:\n{status}"
