"""Serve an ASGI app with uvicorn in a child process, on a port the kernel picked.

``start_server("module:attr", env=..., cwd=..., log_path=...)`` binds a listening socket
on 127.0.0.1 port 0 in the parent (the kernel picks a free port, so two lessons or tests
never clash and nothing can take the port between choosing and binding), hands it to
``python -m labkit.integrations.http.serve`` (uvicorn on that socket) in a new session, and
waits until the server answers. The ``Server`` it returns has ``url``, ``kill()``
(SIGKILL to the whole process group: a crash), ``stop()`` (SIGTERM, then SIGKILL if it
lingers) and ``log_text()``; used as a context manager it is stopped on the way out,
whatever happened inside.

``limits=ConnectionLimits(...)`` (``labkit.integrations.http.connections``) sets what one
connection may cost the server: deadlines for a request's head (10 s) and body (30 s),
the keep-alive (5 s), the connections served at once (200, then ``503``), the largest
head and the graceful-shutdown wait. Without it the server gets those defaults, so no
client can hold it by sending slowly or not at all.

``listening_socket``, ``server_argv`` and ``wait_until_serving`` are the same steps for
a caller that starts the process itself (an exercise check uses ``ns.spawn``).

In production a process manager (systemd, Kubernetes, gunicorn with uvicorn workers)
owns the socket and the processes; this module is that job for one lesson.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from labkit.clock import Clock, SystemClock

if TYPE_CHECKING:  # the server process imports it (and uvicorn); a parent needs neither
    from labkit.integrations.http.connections import ConnectionLimits

HOST = "127.0.0.1"
#: Seconds a server may take to answer its first request (importing FastAPI is most of it).
START_TIMEOUT_S = 60.0


def listening_socket(path: Path | None = None) -> socket.socket:
    """A listening socket, inheritable: TCP on 127.0.0.1 at a port the kernel chose, or
    with ``path`` a unix socket there (reached by path only: no network needed, and no
    one outside the folder's sandbox can connect)."""
    if path is not None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        sock.bind(str(path))
    else:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((HOST, 0))
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def url_of(sock: socket.socket) -> str:
    """The base URL of a TCP listening socket (a unix socket's requests name no host)."""
    if sock.family == socket.AF_UNIX:
        return "http://localhost"
    host, port = sock.getsockname()[:2]
    return f"http://{host}:{port}"


def client_for(sock: socket.socket, timeout: float = 30.0) -> httpx.Client:
    """An httpx client that talks to the server listening on ``sock`` (TCP or unix)."""
    # Plain HTTP to a server of the lab's own, so no TLS: verify=False only spares the
    # transport loading the machine's certificate store, which httpx does for every
    # client (about 0.1 CPU-second each; a grading check makes one per server it starts).
    uds = sock.getsockname() if sock.family == socket.AF_UNIX else None
    transport = httpx.HTTPTransport(uds=uds, verify=False)
    return httpx.Client(base_url=url_of(sock), transport=transport, timeout=timeout)


def server_argv(
    target: str, fd: int, factory: bool = False, limits: ConnectionLimits | None = None
) -> list[str]:
    """The command that serves ``target`` (``module:attr``) on the inherited socket ``fd``,
    with ``limits`` (the defaults of ``ConnectionLimits`` when None)."""
    argv = [sys.executable, "-m", "labkit.integrations.http.serve", target, "--fd", str(fd)]
    argv += ["--factory"] if factory else []
    return argv + (limits.argv() if limits is not None else [])


def wait_until_serving(
    url: str,
    alive: Callable[[], bool],
    timeout: float = START_TIMEOUT_S,
    path: str = "/",
    clock: Clock | None = None,
    client: httpx.Client | None = None,
) -> None:
    """Poll ``url + path`` until any HTTP answer comes back; RuntimeError if the process died.

    ``client`` (``client_for``) reaches a server on a unix socket. The wait is real (a
    process is starting), so ``clock`` defaults to the wall clock.
    """
    clock = clock or SystemClock()
    deadline = clock.now() + timeout
    get = client.get if client is not None else httpx.get
    while True:
        if not alive():
            raise RuntimeError(f"the server process for {url} exited before it answered")
        try:
            get(url + path, timeout=2.0)
            return
        except httpx.TransportError:
            if clock.now() > deadline:
                raise TimeoutError(f"no answer from {url} within {timeout:g}s") from None
            clock.sleep(0.05)


@dataclass
class Server:
    """A uvicorn server running in its own process group (see the module docstring)."""

    popen: subprocess.Popen[bytes]
    url: str
    log_path: Path | None

    @property
    def returncode(self) -> int | None:
        """None while it runs; ``-9`` after a SIGKILL (``kill()`` or a "kill" fault)."""
        return self.popen.poll()

    def kill(self) -> None:
        """SIGKILL the whole process group, as a crash or an OOM kill would."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        self.popen.wait()

    def stop(self, grace_s: float = 5.0) -> None:
        """SIGTERM (uvicorn finishes the requests in flight), SIGKILL after ``grace_s``."""
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(grace_s)
            except subprocess.TimeoutExpired:
                pass
        # The group may hold more than the leader: kill whatever is left of it.
        self.kill()

    def log_text(self) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_server(
    target: str,
    *,
    factory: bool = False,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    log_path: str | Path | None = None,
    ready_path: str = "/",
    timeout: float = START_TIMEOUT_S,
    limits: ConnectionLimits | None = None,
) -> Server:
    """Start ``target`` under uvicorn in a new session and wait until it answers."""
    sock = listening_socket()
    url = url_of(sock)
    log = Path(log_path) if log_path is not None else None
    out = log.open("ab") if log is not None else subprocess.DEVNULL
    try:
        popen = subprocess.Popen(
            server_argv(target, sock.fileno(), factory, limits),
            env={**os.environ, **(env or {})},
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            pass_fds=(sock.fileno(),),
            start_new_session=True,
        )
    finally:
        # The child holds its own copy; if it dies, connections are refused, not left hanging.
        sock.close()
        if log is not None and not isinstance(out, int):
            out.close()
    server = Server(popen, url, log)
    try:
        wait_until_serving(url, lambda: popen.poll() is None, timeout, ready_path)
    except BaseException:
        server.kill()
        raise
    return server


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m labkit.integrations.http.serve",
        description="Serve an ASGI app with uvicorn on an inherited listening socket.",
    )
    parser.add_argument("target", help="the app as module:attribute")
    parser.add_argument("--fd", type=int, required=True, help="the listening socket's fd")
    parser.add_argument("--factory", action="store_true", help="target is a function")
    from labkit.integrations.http.connections import ConnectionLimits

    ConnectionLimits.add_arguments(parser)
    args = parser.parse_args(argv)
    import uvicorn

    # The working directory first, as `python -m uvicorn` does: the app may live there.
    sys.path.insert(0, os.getcwd())
    sock = socket.socket(fileno=args.fd)
    config = uvicorn.Config(
        args.target,
        factory=args.factory,
        log_level="warning",
        access_log=False,
        **ConnectionLimits.from_args(args).uvicorn_settings(),
    )
    uvicorn.Server(config).run(sockets=[sock])
    return 0


if __name__ == "__main__":
    sys.exit(main())
