"""Another machine, for code that (wrongly) reads where it runs.

A function whose result must not depend on the host, the user, the folder or the
process it runs in (an operation key, a step's key) gives the same answer with
``on_another_machine(values)`` around it, as a worker on another machine, or restarted,
would compute it.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import platform
import socket
from collections.abc import Iterator, MutableMapping
from typing import Any
from unittest import mock

#: What another machine says about itself: its name, its user, its working folder.
ELSEWHERE = "worker-b.example"
#: How far the process ids over there are from the ones here.
PID_SHIFT = 7919


@contextlib.contextmanager
def on_another_machine(values: MutableMapping[str, Any]) -> Iterator[None]:
    """The process as another worker on another machine sees itself, for the block: its
    host name (``socket``, ``platform``, ``os.uname``, the environment's ``HOSTNAME``,
    ``POD_NAME`` ...), its user, its working folder and its process ids; the names the
    student bound (``from socket import gethostname``) swapped too, then put back."""
    real = os.uname()
    pid, ppid = os.getpid() + PID_SHIFT, os.getppid() + PID_SHIFT
    fakes: dict[str, Any] = {
        "gethostname": lambda: ELSEWHERE,
        "getfqdn": lambda name="": ELSEWHERE,
        "node": lambda: ELSEWHERE,
        "uname": lambda: type(real)(
            (real.sysname, ELSEWHERE, real.release, real.version, real.machine)
        ),
        "getuser": lambda: "svc-other",
        "getcwd": lambda: "/srv/other",
        "getpid": lambda: pid,
        "getppid": lambda: ppid,
    }
    owners = {
        "gethostname": socket,
        "getfqdn": socket,
        "node": platform,
        "uname": os,
        "getuser": getpass,
        "getcwd": os,
        "getpid": os,
        "getppid": os,
    }
    #: The student's ``from socket import gethostname`` and the like, by identity.
    bound = {id(getattr(owners[name], name)): fake for name, fake in fakes.items()}
    saved = {k: v for k, v in values.items() if id(v) in bound}
    env = {
        "HOSTNAME": ELSEWHERE,
        "USER": "svc-other",
        "LOGNAME": "svc-other",
        "PWD": "/srv/other",
        # What a container platform says about the worker: its pod, its node.
        "HOST": ELSEWHERE,
        "POD_NAME": ELSEWHERE,
        "NODE_NAME": ELSEWHERE,
    }
    with contextlib.ExitStack() as stack:
        for name, fake in fakes.items():
            stack.enter_context(mock.patch.object(owners[name], name, fake))
        stack.enter_context(mock.patch.dict(os.environ, env))
        values.update({k: bound[id(v)] for k, v in saved.items()})
        try:
            yield
        finally:
            values.update(saved)
