"""The ``labkit`` commands on a really full disk: a 1 MiB tmpfs filled to its last byte.

Each scenario runs whole inside one ``bwrap`` (bubblewrap) call, because the size-limited
tmpfs exists only in bwrap's mount namespace: a driver script makes a job database on
it, fills the rest with a filler file, runs the real commands (``python -m labkit``),
then removes the filler and checks the file. It prints what it saw as JSON; the test
asserts on that. ``--die-with-parent`` and ``--unshare-pid`` end every process of the
run with bwrap, and ``subprocess.run``'s timeout ends bwrap.

Each test failed before its fix: the commands said "disk I/O error ... Restore it from a
backup" and left ``-wal`` and ``-shm`` files behind.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

#: The tmpfs's size: room for the database, then filled.
DISK = 1 << 20

DRIVER = r"""
import json, os, sqlite3, subprocess, sys
from labkit.clock import LAB_EPOCH, FakeClock
from labkit.store import JobStore

disk, db, room = sys.argv[1], os.path.join(sys.argv[1], "jobs.db"), int(sys.argv[2])
commands = json.loads(sys.argv[3])
with JobStore(db, clock=FakeClock(LAB_EPOCH)) as store:
    for i in range(40):
        store.enqueue("charge", {"i": i, "pad": "p" * 200}, key=f"job-{i}")
    store.conn.execute(
        "UPDATE jobs SET state = 'dead', error_class = 'E', updated_at = created_at + id,"
        " dead_reason = 'attempts exhausted (1 of 1): 503'"
    )
before = sorted(os.listdir(disk))
filler = os.path.join(disk, "filler")
fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
try:
    while True:
        os.write(fd, b"\0" * 4096)
except OSError:
    pass
os.close(fd)
if room:  # give back room bytes, so the open can succeed and a write fails later
    os.truncate(filler, os.path.getsize(filler) - room)
st = os.statvfs(disk)
runs = []
for argv in commands:
    done = subprocess.run(
        [sys.executable, "-m", "labkit", *[a.replace("DB", db) for a in argv]],
        capture_output=True, text=True, timeout=120,
    )
    runs.append({"argv": argv, "rc": done.returncode, "err": done.stderr,
                 "out": done.stdout, "files": sorted(os.listdir(disk))})
os.unlink(filler)
check = sqlite3.connect(db)
result = {
    "before": before,
    "free": st.f_bavail * st.f_frsize,
    "runs": runs,
    "integrity": check.execute("PRAGMA integrity_check").fetchall(),
    "jobs": check.execute("SELECT key, state FROM jobs ORDER BY id").fetchall(),
}
check.close()
print(json.dumps(result))
"""


def _bwrap() -> str:
    """bwrap's path, when it can mount a size-limited tmpfs here; else skip (or fail in CI)."""
    found = shutil.which("bwrap")
    why = "bubblewrap (bwrap) is not installed: apt-get install bubblewrap"
    if found is not None:
        probe = subprocess.run(
            [found, "--dev-bind", "/", "/", "--size", "4096", "--tmpfs", "/mnt", "true"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        if probe.returncode == 0:
            return found
        why = (
            "bwrap cannot mount a size-limited tmpfs here (it needs bwrap 0.7 or newer and "
            f"namespaces): {probe.stderr.strip()}"
        )
    if os.environ.get("LABKIT_REQUIRE_SERVICES", "") == "1":
        pytest.fail(f"{why} (LABKIT_REQUIRE_SERVICES=1 makes this a failure)")
    pytest.skip(why)


def _on_a_full_disk(tmp_path: Path, commands: list[list[str]], room: int = 0) -> dict[str, Any]:
    """Run ``commands`` (DB stands for the database) on a full 1 MiB tmpfs; what the driver saw."""
    bwrap = _bwrap()
    disk = tmp_path / "disk"
    disk.mkdir()
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    done = subprocess.run(
        [bwrap, "--dev-bind", "/", "/", "--size", str(DISK), "--tmpfs", str(disk),
         "--die-with-parent", "--unshare-pid", "--chdir", str(tmp_path),
         sys.executable, str(driver), str(disk), str(room), json.dumps(commands)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, f"the driver failed:\n{done.stdout}\n{done.stderr}"
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _assert_whole(result: dict[str, Any]) -> None:
    """The file is intact once space is freed, and every job is still dead."""
    assert result["integrity"] == [["ok"]]
    assert result["jobs"] == [[f"job-{i}", "dead"] for i in range(40)], "a job changed or is gone"


def test_commands_on_a_disk_with_no_byte_free_say_it_is_full_and_leave_nothing_behind(
    tmp_path: Path,
) -> None:
    commands = [
        ["redrive", "DB", "--limit", "5"],
        ["redrive", "DB", "1"],
        ["retry-failed", "DB", "--limit", "5"],
        ["inspect", "DB"],
        ["inspect", "DB", "--job", "1"],
    ]
    result = _on_a_full_disk(tmp_path, commands)
    assert result["free"] == 0, "the disk must really be full"
    assert result["before"] == ["jobs.db"]
    for run in result["runs"]:
        said = run["err"]
        assert run["rc"] == 2, run  # the command refused to start: the CLI's refusal code
        assert "Traceback" not in said, said
        assert "is full (0 bytes free)" in said and "free some space" in said, said
        assert "nothing was changed" in said, said
        assert "corrupt" not in said and "backup" not in said and "I/O" not in said, said
        assert run["files"] == ["filler", "jobs.db"], f"{run['argv']} left {run['files']}"
    _assert_whole(result)


def test_a_disk_that_fills_during_a_redrive_says_it_is_full_and_leaves_nothing_behind(
    tmp_path: Path,
) -> None:
    # 40 KiB back: the open and its 32 KiB -shm fit, the redrive's WAL pages do not.
    result = _on_a_full_disk(tmp_path, [["redrive", "DB", "--limit", "40"]], room=40 * 1024)
    (run,) = result["runs"]
    said = run["err"]
    assert run["rc"] != 0 and "Traceback" not in said, run
    assert "is full (" in said and "bytes free)" in said and "free some space" in said, said
    assert "corrupt" not in said and "backup" not in said, said
    assert run["files"] == ["filler", "jobs.db"], f"left {run['files']}"
    _assert_whole(result)
