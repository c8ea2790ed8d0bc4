"""The student's folder on a filesystem of its own size: what one notebook writes is capped.

A notebook's files land in the folder ``labkit grade`` made for it; on the instructor's
disk a loop writing files fills that disk for everyone (hundreds of MB, seen). As root
on Linux the folder is instead a tmpfs of ``Limits.disk`` bytes (``mount``): a write past
it fails with ENOSPC ("No space left on device"), which the feedback names as the disk
limit; its pages are RAM charged to the notebook's control group, so they count in
``memory_total`` with everything else; and it is gone with ``unmount``. Production
graders get the same from a container's writable-layer quota or an XFS project quota.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

#: Less room than this left at the end counts as the disk limit hit (a write that
#: failed halfway leaves a little).
FULL_BELOW = 1 << 20


def mount(folder: Path, size: int) -> bool:
    """Make ``folder`` a tmpfs of ``size`` bytes; False where this machine cannot (not root)."""
    if sys.platform != "linux" or os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    options = f"size={size},mode=0700,nosuid,nodev"
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "labkit-student", str(folder)],
        capture_output=True,
        timeout=30,
    )
    return done.returncode == 0


def is_mounted(folder: Path) -> bool:
    return os.path.ismount(folder)


def full(folder: Path) -> bool:
    """True when ``folder`` is such a filesystem and the notebook filled it."""
    if not is_mounted(folder):
        return False
    stats = os.statvfs(folder)
    return stats.f_bavail * stats.f_frsize < FULL_BELOW


def unmount(folder: Path) -> None:
    """Undo ``mount`` (lazily: a process still holding a file cannot keep it)."""
    if is_mounted(folder):
        subprocess.run(["umount", "--lazy", str(folder)], capture_output=True, timeout=30)
