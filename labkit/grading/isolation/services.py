"""Services made for one student: a Redis per check, a RabbitMQ and a PostgreSQL per notebook.

Under ``labkit grade`` an exercise whose code talks to Redis (exercise 9) gets a
``redis-server`` of its own for each check, started like any spawned process (as the
student's uid, in the sandbox, in the check's control group, killed when the check
ends). It listens on no TCP port, only on a unix socket in the student's folder, which
the student's processes and the check reach by path; the student's network namespace
stays empty, so no other service of the machine, and no other student's server, is in
reach. A check's Redis starts empty and dies with the check: no key of one check, or of
one student, is ever seen by another. Starting one costs a few milliseconds.

An exercise whose code needs TCP (exercise 8: Celery on RabbitMQ, charges in
PostgreSQL) gets ``NotebookServices`` instead: a RabbitMQ and a PostgreSQL cluster of the
notebook's own, and a Redis (a student may keep a dedup record there, as they could on
the lab's Redis in ``check()``), started on the first check that asks (``endpoint``), as
the student's uid, in the sandbox, inside the notebook's network namespace (``netns``),
at their usual addresses there (``127.0.0.1:5672``, ``127.0.0.1:5432``,
``127.0.0.1:6379``), with their files in the student's folder. The student's code is
superuser of a database that holds only its own data and runs as its own uid in its own
sandbox, so ``COPY ... TO PROGRAM`` or ``pg_read_file`` reach nothing it could not reach
already. They live until the notebook ends (its control group is killed, its namespace
deleted). Booting RabbitMQ is most of the cost: about 5 s a notebook on two cores,
PostgreSQL's ``initdb`` and start about 2 s, both at once. Two things keep RabbitMQ's
boot short: it sees only the applications its core needs (``rabbitmq_core``: with the
whole plugins folder on its code path it took about 1.2 CPU-seconds more), and its node
is named on the command line (``-sname``), so it does not boot a second Erlang VM only to
start ``epmd`` (``rabbit_nodes_common:ensure_epmd``).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from labkit.clock import SystemClock
from labkit.grading.checks import LAB_SERVICES, CheckFailed, Endpoint
from labkit.grading.isolation.netns import NetworkNamespace

#: The socket's name in the student's folder (a unix socket path must stay short).
REDIS_SOCKET = "redis.sock"
#: The most bytes a unix socket's path may hold on Linux (``sun_path``, less its NUL).
SOCKET_PATH_MAX = 107


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
    if len(os.fsencode(path)) > SOCKET_PATH_MAX:
        raise CheckFailed(
            f"a socket path of at most {SOCKET_PATH_MAX} bytes for the check's private Redis",
            f"{path} ({len(os.fsencode(path))} bytes)",
            "a grading machine problem, not yours: tell your instructor (a shorter TMPDIR)",
        )
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


#: The notebook's services start as confined processes with this signature:
#: ``start(name, argv, env)`` -> the process (in the notebook's group and namespace).
StartService = Callable[[str, list[str], dict[str, str]], subprocess.Popen[Any]]
#: Seconds a service may take to answer after it starts (RabbitMQ on a loaded machine).
BOOT_TIMEOUT_S = 120.0
_MACHINE = (
    "a grading machine problem, not yours: tell your instructor (the grading log says "
    "what the machine lacks)"
)


def _program(name: str, *candidates: str) -> str:
    for candidate in candidates:
        found = shutil.which(candidate) or (candidate if Path(candidate).exists() else None)
        if found:
            return found
    raise CheckFailed(f"{name} on the grading machine", "not installed", _MACHINE)


def _postgres_bin(tool: str) -> str:
    """The newest installed PostgreSQL's ``tool`` (Debian keeps them off PATH, by version)."""
    found = Path("/usr/lib/postgresql").glob(f"*/bin/{tool}")
    newest = sorted(found, key=lambda p: [int(x) for x in p.parts[-3].split(".") if x.isdigit()])
    return _program(f"PostgreSQL's {tool}", *(str(p) for p in reversed(newest)), tool)


class NotebookServices:
    """The RabbitMQ, PostgreSQL and Redis of one notebook (see the module docstring)."""

    #: The student's code reaches them where it would on a laptop (``check()``'s).
    STUDENT_URLS = LAB_SERVICES
    PORTS = {"rabbitmq": 5672, "postgres": 5432, "redis": 6379}

    def __init__(self, netns: NetworkNamespace, start: StartService, workdir: Path) -> None:
        self.netns = netns
        self.start = start
        self.folder = Path(workdir) / ".labkit-services"
        self._running: dict[str, Endpoint] = {}

    def endpoints(self, *names: str) -> dict[str, Endpoint]:
        """Each named service's addresses, starting those not running yet (all at once)."""
        unknown = [n for n in names if n not in self.PORTS]
        if unknown:
            raise ValueError(f"no such service {unknown[0]!r}; there are {sorted(self.PORTS)}")
        starting = {n: self._boot(n) for n in names if n not in self._running}
        for name, proc in starting.items():
            self._wait(name, proc)
            relay = self.netns.relay(self.PORTS[name])
            url = self.STUDENT_URLS[name].replace(f":{self.PORTS[name]}/", f":{relay.port}/")
            if name == "postgres":
                _create_database(url)
            self._running[name] = Endpoint(self.STUDENT_URLS[name], url)
        return {n: self._running[n] for n in names}

    def _boot(self, name: str) -> subprocess.Popen[Any]:
        home = self.folder / name
        home.mkdir(parents=True, exist_ok=True)
        if name == "rabbitmq":
            return self._rabbitmq(home)
        if name == "redis":
            server = _program("Redis (apt-get install redis-server)", "redis-server")
            argv = [server, "--bind", "127.0.0.1", "--port", str(self.PORTS["redis"])]
            argv += ["--save", "", "--appendonly", "no", "--dir", str(home)]
            return self.start("redis", argv, {})
        return self._postgres(home)

    def _rabbitmq(self, home: Path) -> subprocess.Popen[Any]:
        (home / "rabbitmq.conf").write_text("listeners.tcp.local = 127.0.0.1:5672\n")
        (home / "enabled_plugins").write_text("[].\n")
        env = {
            "HOME": str(home),  # the Erlang cookie goes there
            "RABBITMQ_CONF_ENV_FILE": "/dev/null",  # not the machine's broker settings
            "RABBITMQ_NODENAME": "rabbit@localhost",
            "RABBITMQ_CONFIG_FILE": str(home / "rabbitmq"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(home / "enabled_plugins"),
            "RABBITMQ_MNESIA_BASE": str(home / "mnesia"),
            "RABBITMQ_LOG_BASE": str(home / "log"),
            "RABBITMQ_PID_FILE": str(home / "rabbit.pid"),
            "ERL_EPMD_ADDRESS": "127.0.0.1",
            # Erlang's schedulers spin a while before they sleep; on a grading machine
            # that spin is CPU taken from the notebook graded beside this one.
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "+sbwt none +sbwtdcpu none +sbwtdio none",
            # Distributed from the first instant: erlexec starts epmd itself (a small
            # daemon) instead of RabbitMQ's prelaunch booting another VM to start it.
            "RABBITMQ_SERVER_START_ARGS": "-sname rabbit@localhost",
        }
        server = _program(
            "RabbitMQ (apt-get install rabbitmq-server)",
            "/usr/lib/rabbitmq/bin/rabbitmq-server",
            "rabbitmq-server",
        )
        core = rabbitmq_core(Path(os.path.realpath(server)).parents[1] / "plugins", home)
        if core is not None:
            env["RABBITMQ_PLUGINS_DIR"] = str(core)
        return self.start("rabbitmq", [server], env)

    def _postgres(self, home: Path) -> subprocess.Popen[Any]:
        data = home / "data"
        initdb = [_postgres_bin("initdb"), "-D", str(data), "-U", "postgres", "--auth=trust"]
        initdb += ["--no-sync", "-E", "UTF8", "--locale=C.UTF-8"]
        made = self.start("initdb", initdb, {})
        if made.wait(BOOT_TIMEOUT_S) != 0:
            raise CheckFailed("the notebook's PostgreSQL to be created", "initdb failed", _MACHINE)
        settings = {
            "listen_addresses": "127.0.0.1",
            "port": "5432",
            "unix_socket_directories": "",
            "fsync": "off",
            "shared_buffers": "16MB",
            "max_connections": "40",
        }
        argv = [_postgres_bin("postgres"), "-D", str(data)]
        for key, value in settings.items():
            argv += ["-c", f"{key}={value}"]
        return self.start("postgres", argv, {})

    def _wait(self, name: str, proc: subprocess.Popen[Any]) -> None:
        clock = SystemClock()
        deadline = clock.now() + BOOT_TIMEOUT_S
        while clock.now() < deadline and proc.poll() is None:
            with contextlib.suppress(OSError):
                self.netns.connect(self.PORTS[name], timeout=1.0).close()
                return
            clock.sleep(0.1)
        state = f"exited ({proc.returncode})" if proc.poll() is not None else "did not answer"
        raise CheckFailed(
            f"the notebook's {name} to start", f"it {state} within {BOOT_TIMEOUT_S:g} s", _MACHINE
        )


def rabbitmq_core(plugins: Path, home: Path) -> Path | None:
    """A plugins folder in ``home`` with the applications of RabbitMQ's ``plugins`` folder
    that its ``rabbit`` application needs (following each ``.app`` file's
    ``applications``); None (use the whole folder) when its layout is not one of unpacked
    ``app-version`` folders.

    No plugin is enabled for a notebook's broker, yet with the whole folder (about 70
    applications) on its code path every module it loads is looked for in each. The
    files are hard links where they can be (they stay the system's, which the student's
    uid cannot write; about 8 MB copied otherwise): a symlink out of the student's folder
    is removed before the student's code runs (``Confinement.hand_over``), and the
    sandbox shows only that folder and the system's.
    """
    folders = {}
    with contextlib.suppress(OSError):
        folders = {p.name.rsplit("-", 1)[0]: p for p in plugins.iterdir() if p.is_dir()}
    if "rabbit" not in folders:
        return None
    needed: set[str] = set()
    todo = ["rabbit"]
    while todo:
        app = todo.pop()
        if app in needed or app not in folders:
            continue  # one of Erlang/OTP's own (kernel, ssl), on the code path already
        needed.add(app)
        try:
            spec = (folders[app] / "ebin" / f"{app}.app").read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        for listed in re.findall(r"\{\s*(?:included_)?applications\s*,\s*\[([^\]]*)\]", spec):
            todo += re.findall(r"[a-z][A-Za-z0-9_]*", listed)
    core = home / "plugins"
    for app in sorted(needed):
        shutil.copytree(folders[app], core / folders[app].name, copy_function=_link_or_copy)
    return core


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:  # another file system
        shutil.copy2(source, target)


def _create_database(url: str) -> None:
    """``test`` in a fresh cluster (``initdb`` makes only ``postgres``), once it accepts."""
    import psycopg

    clock = SystemClock()
    deadline = clock.now() + BOOT_TIMEOUT_S
    admin = url.rsplit("/", 1)[0] + "/postgres"
    while True:
        try:
            with psycopg.connect(admin, autocommit=True, connect_timeout=5) as conn:
                conn.execute("CREATE DATABASE test")
            return
        except psycopg.OperationalError:  # still starting up
            if clock.now() > deadline:
                raise
            clock.sleep(0.1)
