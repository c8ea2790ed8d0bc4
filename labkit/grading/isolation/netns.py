"""A network namespace per notebook: a loopback of the student's own, and a way in for the checks.

An exercise whose code must talk to a broker and a database over TCP (exercise 8: Celery
on RabbitMQ, charges in PostgreSQL) cannot run with no network at all, and must not
share the machine's: on the host's 127.0.0.1 every local service is in reach, the
machine's own PostgreSQL (superuser, trust authentication) included, and so is every
other student's server. As root on Linux, ``NetworkNamespace.create()`` makes a named
namespace (``ip netns add``) with only a loopback interface, up. Every process of the
notebook enters it (``enter`` puts ``nsenter --net=...`` in front of the sandbox), and
the services made for the notebook (``services.NotebookServices``) listen on its
127.0.0.1, at their usual ports: the student's code sees ``127.0.0.1:5672`` and
``127.0.0.1:5432`` as on a laptop, and nothing else of the machine.

The checks run in the grader, outside the namespace. ``relay(port)`` gives them a TCP
port on the host's loopback that forwards each connection to ``port`` inside the
namespace: the relay's thread opens that connection after ``setns(2)`` into it (a
thread may change its own network namespace; a socket stays in the namespace it was
made in). No student process can reach the relay: every sandbox has a network namespace
of its own. Production platforms do the same with a pod's network namespace and a
port-forward (``kubectl port-forward``).
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import os
import selectors
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

#: ``CLONE_NEWNET`` from <sched.h>: the namespace type ``setns`` is asked to enter.
CLONE_NEWNET = 0x40000000
_names = itertools.count()


def available() -> str | None:
    """None when this machine can make namespaces for notebooks; else why it cannot."""
    if sys.platform != "linux":
        return "network namespaces are Linux's"
    if os.geteuid() != 0:
        return "making a network namespace needs root"
    missing = [tool for tool in ("ip", "nsenter") if shutil.which(tool) is None]
    if missing:
        return f"{' and '.join(missing)} not found (apt-get install iproute2 util-linux)"
    return None


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise OSError(f"ip {' '.join(args)} failed: {done.stderr.strip()[:200]}")


class NetworkNamespace:
    """One notebook's network namespace (see the module docstring); ``remove()`` ends it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.path = Path("/run/netns") / name
        self._relays: list[Relay] = []

    @classmethod
    def create(cls) -> NetworkNamespace:
        """A new namespace with its loopback up; OSError when the machine refuses."""
        name = f"labkit-{os.getpid()}-{next(_names)}"
        _ip("netns", "add", name)
        made = cls(name)
        try:
            _ip("-n", name, "link", "set", "lo", "up")
        except OSError:
            made.remove()
            raise
        return made

    def enter(self, argv: list[str]) -> list[str]:
        """``argv`` run inside this namespace (``nsenter`` needs root: put it before the
        uid drop)."""
        nsenter = shutil.which("nsenter") or "nsenter"
        return [nsenter, f"--net={self.path}", "--", *argv]

    def connect(self, port: int, timeout: float = 5.0) -> socket.socket:
        """A TCP connection to 127.0.0.1:``port`` inside the namespace, made from here."""
        box: dict[str, object] = {}

        def inside() -> None:  # runs in a thread of its own, which ends right after
            try:
                fd = os.open(self.path, os.O_RDONLY)
                try:
                    libc = ctypes.CDLL(None, use_errno=True)
                    if libc.setns(fd, CLONE_NEWNET) != 0:
                        raise OSError(ctypes.get_errno(), "setns into " + self.name)
                finally:
                    os.close(fd)
                box["sock"] = socket.create_connection(("127.0.0.1", port), timeout)
            except OSError as exc:
                box["error"] = exc

        thread = threading.Thread(target=inside, name=f"netns-connect-{port}")
        thread.start()
        thread.join()
        sock = box.get("sock")
        if not isinstance(sock, socket.socket):
            error = box.get("error")
            raise error if isinstance(error, OSError) else OSError(f"no connection to {port}")
        sock.settimeout(None)
        return sock

    def relay(self, port: int) -> Relay:
        """A port on the host's loopback that leads to ``port`` inside (closed with ``remove``)."""
        relay = Relay(self, port)
        self._relays.append(relay)
        return relay

    def remove(self) -> None:
        """Close the relays and delete the namespace (it ends once its last process has)."""
        for relay in self._relays:
            relay.close()
        self._relays.clear()
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            _ip("netns", "del", self.name)


class Relay:
    """Forwards each connection to 127.0.0.1:``port`` (host) into the namespace's ``port``."""

    def __init__(self, netns: NetworkNamespace, target: int) -> None:
        self.netns = netns
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, name=f"relay-{target}", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            try:
                inner = self.netns.connect(self.target)
            except OSError:
                client.close()  # nothing listens there (yet): the caller sees a reset
                continue
            with self._lock:
                self._open.update((client, inner))
            threading.Thread(target=self._pump, args=(client, inner), daemon=True).start()

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        """Copy bytes both ways until either side closes; 64 KiB at a time, so the grader's
        memory does not grow with what flows through."""
        selector = selectors.DefaultSelector()
        selector.register(a, selectors.EVENT_READ, b)
        selector.register(b, selectors.EVENT_READ, a)
        try:
            while True:
                for key, _ in selector.select():
                    data = key.fileobj.recv(1 << 16)  # type: ignore[union-attr]
                    if not data:
                        return
                    key.data.sendall(data)
        except (OSError, ValueError):
            return
        finally:
            selector.close()
            with self._lock:
                for sock in (a, b):
                    self._open.discard(sock)
                    sock.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        self._listener.close()
        with self._lock:
            for sock in self._open:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
            self._open.clear()
