"""A pytest plugin for nbval: the lesson's kernel talks over Unix sockets, not TCP ports.

jupyter_client gives a kernel its five ports by binding port 0, reading the number and
closing the socket; the kernel binds them a moment later. Any other process that binds
port 0 meanwhile (a test's server, a broker client) can be handed one of them. Seen here:
a stolen shell, stdin or control port kills the kernel ("Kernel died before replying to
kernel_info"); a stolen IOPub port leaves it alive and silent until nbval gives up ("Kernel
didn't respond in 60 seconds"). Over Unix sockets (ZeroMQ's ``ipc://`` transport, which
jupyter_client and ipykernel both support) a kernel's addresses are files named for that
kernel alone, so nothing else can take them; jupyter_client removes them at shutdown.

Loaded with ``-p labkit.notebook.nbval_kernels`` by ``make check`` and ``make check-one``.
Windows has no ``ipc://``; there the kernel keeps TCP.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from typing import Any

from jupyter_client.manager import KernelManager
from traitlets import CaselessStrEnum, default

#: Where the socket files go: a short path (a Unix socket's path has ~100 bytes at most).
SOCKET_FOLDER = tempfile.gettempdir()


class UnixSocketKernelManager(KernelManager):
    """A kernel manager whose kernel listens on ``<tmp>/nbval-<random>-ipc-1`` … ``-5``."""

    transport = CaselessStrEnum(["tcp", "ipc"], default_value="ipc", config=True)

    @default("ip")
    def _socket_prefix(self) -> str:
        # jupyter_client's default prefix is "kernel-ipc" in the working directory: two
        # kernels started at once in one folder would race for the same file names, and
        # the files would land in the student's notebooks folder.
        return os.path.join(SOCKET_FOLDER, f"nbval-{uuid.uuid4().hex[:16]}-ipc")


def pytest_configure(config: Any) -> None:
    """nbval starts every notebook's kernel with the ``KernelManager`` its module imported:
    hand it this one (nbval 0.11's ``nbval.kernel.start_new_kernel``)."""
    if os.name == "nt":
        return
    import nbval.kernel  # type: ignore[import-untyped]

    nbval.kernel.KernelManager = UnixSocketKernelManager
