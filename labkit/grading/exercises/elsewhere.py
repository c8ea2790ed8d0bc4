"""Another machine, for code that (wrongly) reads where it runs.

A function whose result must not depend on the host, the user, the folder, the process,
the time zone or the language it runs in (an operation key, a step's key) gives the same
answer with ``on_another_machine(values)`` around it, as a worker on another machine, or
restarted, would compute it. ``as_process_one`` runs a function as a worker in a container of its
own sees itself: process 1, like every other such worker.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import platform
import socket
import uuid
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any
from unittest import mock

from labkit.grading.exercises.wallclock import in_time_zone

#: What another machine says about itself: its name, its user, its working folder.
ELSEWHERE = "worker-b.example"
#: How far the process ids over there are from the ones here.
PID_SHIFT = 7919


#: Another machine's network card (its MAC address, which ``uuid.getnode()`` reads).
ELSEWHERE_NODE = 0x02_42_AC_11_F0_0D
#: Another machine's user id: ``nobody``'s, a user every Linux has (root's when this
#: process runs as ``nobody``).
ELSEWHERE_UID = 65534


#: Time zones and languages of a machine over there (a worker in another region), none
#: of them a zone ``labkit grade`` runs student code in; the first unlike this machine's.
ELSEWHERE_TZS = ("<+0545>-5:45", "<-0930>9:30")
ELSEWHERE_LANGS = ("ja_JP.UTF-8", "fi_FI.UTF-8")
#: What a worker over there is called in its environment, beyond its host and pod names:
#: a worker id or name its launcher gives it, a container or cloud instance name, and
#: Windows' own name for the host.
WORKER_NAMES = {
    "WORKER_ID": "7",
    "WORKER_NAME": "worker-7",
    "CONTAINER_NAME": "worker-7",
    "INSTANCE_ID": "i-0f7",
    "COMPUTERNAME": "WORKER-B",
}


@contextlib.contextmanager
def on_another_machine(values: MutableMapping[str, Any]) -> Iterator[None]:
    """The process as another worker on another machine sees itself, for the block: its
    host name (``socket``, ``platform`` including its cached ``uname()``, ``os.uname``,
    the environment's ``HOSTNAME``, ``POD_NAME`` ...), its network card
    (``uuid.getnode()``), its user (name, id, login, home folder), its working folder, its
    process ids, its time zone and language (``TZ``, ``LANG``), and the worker names its
    launcher sets (``WORKER_ID``...); the names the student bound (``from socket import
    gethostname``) swapped too, then put back."""
    real, platform_real = os.uname(), platform.uname()
    pid, ppid = os.getpid() + PID_SHIFT, os.getppid() + PID_SHIFT
    uid = ELSEWHERE_UID if os.getuid() != ELSEWHERE_UID else 0
    fakes: list[tuple[Any, str, Any]] = [
        (socket, "gethostname", lambda: ELSEWHERE),
        (socket, "getfqdn", lambda name="": ELSEWHERE),
        (platform, "node", lambda: ELSEWHERE),
        # platform.uname() caches its answer: no patch of os.uname reaches it.
        (platform, "uname", lambda: platform_real._replace(node=ELSEWHERE)),
        (
            os,
            "uname",
            lambda: type(real)((real.sysname, ELSEWHERE, real.release, real.version, real.machine)),
        ),
        (uuid, "getnode", lambda: ELSEWHERE_NODE),
        (getpass, "getuser", lambda: "svc-other"),
        (os, "getuid", lambda: uid),
        (os, "geteuid", lambda: uid),
        (os, "getlogin", lambda: "svc-other"),
        (os, "getcwd", lambda: "/srv/other"),
        (os, "getpid", lambda: pid),
        (os, "getppid", lambda: ppid),
    ]
    #: The student's ``from socket import gethostname`` and the like, by identity.
    bound = {id(getattr(owner, name)): fake for owner, name, fake in fakes}
    saved = {k: v for k, v in values.items() if id(v) in bound}
    env = {
        "HOSTNAME": ELSEWHERE,
        "USER": "svc-other",
        "LOGNAME": "svc-other",
        "HOME": "/home/svc-other",
        "PWD": "/srv/other",
        # What a container platform says about the worker: its pod, its node.
        "HOST": ELSEWHERE,
        "POD_NAME": ELSEWHERE,
        "NODE_NAME": ELSEWHERE,
        **{name: value for name, value in WORKER_NAMES.items() if os.environ.get(name) != value},
    }
    lang = next(name for name in ELSEWHERE_LANGS if name != os.environ.get("LANG"))
    env.update({"LANG": lang, "LC_ALL": lang, "LANGUAGE": lang.split(".")[0]})
    tz = next(zone for zone in ELSEWHERE_TZS if zone != os.environ.get("TZ"))
    with contextlib.ExitStack() as stack:
        for owner, name, fake in fakes:
            stack.enter_context(mock.patch.object(owner, name, fake))
        stack.enter_context(mock.patch.dict(os.environ, env))
        stack.enter_context(in_time_zone(tz))
        values.update({k: bound[id(v)] for k, v in saved.items()})
        try:
            yield
        finally:
            values.update(saved)


def as_process_one(values: MutableMapping[str, Any], fn: Callable[[], Any]) -> Any:
    """``fn()`` with ``os.getpid()`` answering 1, also under a name the student bound
    (``from os import getpid``), as in a container of its own: for a forked child, whose
    id would otherwise tell it from its siblings."""
    bound = {k: (lambda: 1) for k, v in values.items() if v is os.getpid}
    with mock.patch.object(os, "getpid", lambda: 1), mock.patch.dict(values, bound):
        return fn()
