"""Services made for one check: a private Redis on a unix socket in the student's folder.

Under ``labkit grade`` an exercise whose code talks to Redis (exercise 9) gets a
``redis-server`` of its own for each check, started like any spawned process (as the
student's uid, in the sandbox, in the check's control group, killed when the check
ends). It listens on no TCP port, only on a unix socket in the student's folder, which
the student's processes and the check reach by path; the student's network namespace
stays empty, so no other service of the machine, and no other student's server, is in
reach. A check's Redis starts empty and dies with the check: no key of one check, or of
one student, is ever seen by another. Starting one costs a few milliseconds.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from labkit.clock import SystemClock
from labkit.grading.checks import CheckFailed

#: The socket's name in the student's folder (a unix socket path must stay short).
REDIS_SOCKET = "redis.sock"


def private_redis(
    spawn: Callable[..., subprocess.Popen[Any]], workdir: Path, timeout: float = 10.0
) -> str:
    """Start a Redis for this check with ``spawn``; its URL once it answers PING."""
    server = shutil.which("redis-server")
    if server is None:
        raise CheckFailed(
            "a redis-server program on the grading machine",
            "none on PATH",
            "install Redis where you grade (apt-get install redis-server): each check of "
            "this exercise gets a private one",
        )
    path = Path(workdir) / REDIS_SOCKET
    proc = spawn(
        [server, "--port", "0", "--unixsocket", str(path), "--unixsocketperm", "700"]
        + ["--save", "", "--appendonly", "no", "--dir", str(workdir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    clock = SystemClock()
    deadline = clock.now() + timeout
    while clock.now() < deadline:
        if proc.poll() is not None:
            break
        if _answers(path):
            return f"unix://{path}?db=0"
        clock.sleep(0.01)
    raise CheckFailed(
        "the check's private Redis to start",
        f"redis-server {'exited' if proc.poll() is not None else 'did not answer'}",
        "a grading machine problem, not yours: tell your instructor",
    )


def _answers(path: Path) -> bool:
    with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX) as client:
        client.settimeout(1.0)
        client.connect(str(path))
        client.sendall(b"PING\r\n")
        return client.recv(16).startswith(b"+PONG")
    return False
