"""The student side of a warm start: one confined Python that imports once and forks.

``python -m labkit.grading.isolation.zygote FD MODULE...`` imports each ``MODULE`` (the
libraries a spawned program needs: FastAPI and uvicorn for exercise 10's server, Celery
for exercise 8's workers, redis-py for exercise 9's consumers), says
``{"ready": pid}`` on the socket ``FD`` (a ``SOCK_SEQPACKET`` end the grader passed
down), then serves requests on it, one JSON message each:

- ``{"op": "start", "module": M, "args": [...], "env": {...}, "cwd": D, "fds": [N...]}``
  (or ``"script": PATH`` instead of ``"module"``) with descriptors attached (stdin,
  stdout, stderr, then one for each ``N``): fork a child, answer ``{"started": pid}``.
  The child makes itself a session, then waits on a gate before it runs anything;
- ``{"op": "go", "pid": P}``: open child P's gate. The child takes the descriptors at
  0, 1, 2 and at each ``N``, the environment (``TZ`` applied), the folder, and runs
  ``python -m M ARGS...`` (or ``python PATH ARGS...``) as that command would. The grader
  sends it once it has moved the child into a control group of its own, so whatever the
  child starts is killed with it.

Each child that ends is reaped and reported: ``{"exited": pid, "code": C}``, ``C`` as
``subprocess`` reports a return code (``-9`` after a SIGKILL). The zygote ends when the
grader closes its end.

This runs as the student's uid, in the student's sandbox, with the student's code in
reach: nothing it says is trusted by the grader beyond which child is which
(``labkit.grading.isolation.warm``). It is ``multiprocessing``'s forkserver start method
made for whole programs; in production, gunicorn's ``preload_app`` forks
workers from an interpreter that imported the app once.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import importlib
import json
import os
import runpy
import select
import signal
import socket
import sys
import time
import traceback
from typing import Any

#: The largest request (an environment, some arguments) and the most descriptors in one.
MAX_MESSAGE = 1 << 16
MAX_FDS = 16
#: The zygote's own descriptors are moved above this, out of the child's way.
HIGH_FD = 100


def send(control: socket.socket, message: dict[str, Any]) -> None:
    control.send(json.dumps(message).encode())


def main(argv: list[str]) -> int:
    control = socket.socket(fileno=int(argv[0]))
    for name in argv[1:]:
        importlib.import_module(name)
    gates: dict[int, int] = {}
    send(control, {"ready": os.getpid()})
    while True:
        readable, _w, _x = select.select([control], [], [], 0.05)
        _reap(control, gates)
        if not readable:
            continue
        try:
            data, fds, _flags, _addr = socket.recv_fds(control, MAX_MESSAGE, MAX_FDS)
        except OSError:
            return 0
        if not data:
            return 0  # the grader closed its end
        request = json.loads(data)
        if request.get("op") == "start":
            _start(control, request, fds, gates)
            continue
        for fd in fds:
            os.close(fd)
        gate = gates.pop(int(request.get("pid", 0)), None) if request.get("op") == "go" else None
        if gate is not None:
            os.write(gate, b"g")
            os.close(gate)


def _reap(control: socket.socket, gates: dict[int, int]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        gate = gates.pop(pid, None)
        if gate is not None:
            os.close(gate)
        send(control, {"exited": pid, "code": os.waitstatus_to_exitcode(status)})


def _start(
    control: socket.socket, request: dict[str, Any], fds: list[int], gates: dict[int, int]
) -> None:
    read_end, write_end = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the zygote's loop
        code = 1
        try:
            os.close(write_end)
            control.close()
            code = _child(request, fds, read_end)
        except BaseException:  # noqa: BLE001 - whatever it was, the child ends here
            traceback.print_exc()
        finally:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(code)
    os.close(read_end)
    for fd in fds:
        os.close(fd)
    gates[pid] = write_end
    send(control, {"started": pid})


def _child(request: dict[str, Any], fds: list[int], gate: int) -> int:
    os.setsid()
    # As a new interpreter starts (a plain start's): SIGPIPE ignored, so a write to a
    # socket its client closed raises BrokenPipeError instead of killing the program
    # (a server forked with SIGPIPE at its default died, silently, when a check's
    # first request timed out on a loaded machine: code -13); SIGINT raises
    # KeyboardInterrupt; the rest at their defaults.
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for number in (signal.SIGTERM, signal.SIGCHLD):
        signal.signal(number, signal.SIG_DFL)
    if os.read(gate, 1) != b"g":
        return 1  # the grader never let it run (it closed the zygote, or the check ended)
    os.close(gate)
    targets = [0, 1, 2, *(int(n) for n in request.get("fds", []))]
    if len(fds) != len(targets):
        raise SystemExit(f"zygote: {len(fds)} descriptors for {len(targets)} places")
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, HIGH_FD) for fd in fds]
    for fd in fds:
        os.close(fd)
    for fd, target in zip(high, targets, strict=True):
        os.dup2(fd, target, inheritable=True)
        os.close(fd)
    os.environ.clear()
    os.environ.update({str(k): str(v) for k, v in request["env"].items()})
    time.tzset()
    os.chdir(request["cwd"])
    sys.path[0] = os.getcwd()  # as `python -m` puts the folder first
    args = [str(a) for a in request.get("args", [])]
    try:
        if "script" in request:  # python PATH ARGS: the script's folder first, as python does
            path = str(request["script"])
            sys.path[0] = os.path.dirname(os.path.abspath(path))
            sys.argv = [path, *args]
            runpy.run_path(path, run_name="__main__")
        else:
            module = str(request["module"])
            sys.modules.pop(module, None)  # it runs as __main__, not as the zygote's module
            sys.argv = [module, *args]
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc.code)
    atexit._run_exitfuncs()
    return code


def _exit_code(value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
