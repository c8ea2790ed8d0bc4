"""A control group per graded notebook: its processes found, limited and killed together.

A process tree can leave its session (``setsid``), its process group and, once it runs
as the student's uid, its parent's death signal; it cannot leave its control group. So
when ``labkit grade`` runs as root on Linux, each notebook gets a group: the confined
process that runs its cells, and every process a check spawns for it, join their own
sub-group before they exec (``join_argv``), and a check that kills a spawned consumer
kills that sub-group, with whatever the consumer started. The notebook's group carries
the per-student limits (``Limits.memory_total``: every process of the notebook and the
files it writes to the RAM-backed ``/tmp``, together; ``Limits.processes``), counts the
CPU time they use together (``cpu_seconds``, which the grader holds to
``Limits.cpu_total``), and at the end of the notebook it is killed whole and removed.

cgroup v2 is used where the unified hierarchy offers the ``memory`` and ``pids``
controllers; else cgroup v1's ``memory``, ``pids`` and ``freezer`` hierarchies, each group
placed under this process's own group (so a machine's own limits still hold); else
``detect()`` returns None and the grader falls back to sessions and the uid sweep. A
kill freezes the group first (v2: ``cgroup.kill``), so a fork loop cannot outrun it.

In production the same job is done by systemd scopes or a container runtime's cgroup.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

from labkit.clock import SystemClock

MOUNT = Path("/sys/fs/cgroup")
V1 = ("memory", "pids", "freezer")
#: Used where the machine has it: the CPU time a notebook's processes used together.
V1_OPTIONAL = ("cpuacct",)
_names = itertools.count()

#: Runs as root between the grader and the sandbox: joins the groups, then becomes argv.
_JOIN = """
import os, sys
split = sys.argv.index("--")
for procs in sys.argv[1:split]:
    with open(procs, "w") as fh:
        fh.write(str(os.getpid()))
os.execv(sys.argv[split + 1], sys.argv[split + 1:])
"""


def _own_path(controller: str) -> str:
    """This process's group in a v1 hierarchy (``/`` at the top)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, names, path = line.split(":", 2)
        if controller in names.split(","):
            return path
    return "/"


def detect() -> Hierarchy | None:
    """The control groups this machine lets the grader make, or None."""
    if sys.platform != "linux" or os.geteuid() != 0:
        return None
    for unified in (MOUNT, MOUNT / "unified"):
        controllers = unified / "cgroup.controllers"
        with contextlib.suppress(OSError):
            if {"memory", "pids"} <= set(controllers.read_text().split()):
                return Hierarchy.make(2, {"": unified})
    roots = {c: MOUNT / c / _own_path(c).lstrip("/") for c in V1}
    if all((root / "cgroup.procs").exists() for root in roots.values()):
        for extra in V1_OPTIONAL:
            root = MOUNT / extra / _own_path(extra).lstrip("/")
            if (root / "cgroup.procs").exists():
                roots[extra] = root
        return Hierarchy.make(1, roots)
    return None


@dataclass(frozen=True)
class Hierarchy:
    """Where this grader's groups go: one folder per controller (v2: one folder)."""

    version: int
    roots: dict[str, Path]

    @classmethod
    def make(cls, version: int, roots: dict[str, Path]) -> Hierarchy:
        found = cls(version, roots)
        found.probe()
        return found

    def probe(self) -> None:
        """Make and remove one group: a hierarchy that is there but refuses raises OSError."""
        group = self.group("probe")
        group.remove()

    def group(self, purpose: str) -> Group:
        """A new, empty group for one notebook (``labkit-<pid>-<n>-<purpose>``)."""
        name = f"labkit-{os.getpid()}-{next(_names)}-{purpose}"
        group = Group(self.version, {c: root / name for c, root in self.roots.items()})
        group.create()
        return group


@dataclass(frozen=True)
class Group:
    """One control group, in each controller's hierarchy (v1) or in the unified one (v2)."""

    version: int
    paths: dict[str, Path]

    def create(self) -> None:
        for path in self.paths.values():
            path.mkdir(exist_ok=True)
        if self.version == 2:
            # Children may use the controllers; the group itself then holds no process.
            with contextlib.suppress(OSError):
                self._write("", "cgroup.subtree_control", "+memory +pids")

    def child(self, name: str) -> Group:
        """A sub-group (its own kill, under this group's limits)."""
        group = Group(self.version, {c: p / name for c, p in self.paths.items()})
        group.create()
        return group

    def admit(self, pid: int) -> None:
        """Move the running process ``pid`` into this group (its children follow it)."""
        for path in self.paths.values():
            (path / "cgroup.procs").write_text(str(pid))

    def join_argv(self, argv: list[str]) -> list[str]:
        """``argv`` run as a member of this group from its first instruction on."""
        procs = [str(p / "cgroup.procs") for p in self.paths.values()]
        return [sys.executable, "-I", "-S", "-c", _JOIN, *procs, "--", *argv]

    def limit(self, memory: int, processes: int) -> None:
        """At most ``memory`` bytes (RAM and tmpfs, no swap) and ``processes`` tasks inside."""
        if self.version == 2:
            self._write("", "memory.max", str(memory))
            with contextlib.suppress(OSError):  # no swap accounting on this kernel
                self._write("", "memory.swap.max", "0")
            self._write("", "pids.max", str(processes))
        else:
            self._write("memory", "memory.limit_in_bytes", str(memory))
            self._write("pids", "pids.max", str(processes))

    def hits(self) -> list[str]:
        """Which of the group's limits were reached (``memory_total``, ``processes``)."""
        found = []
        if self._events("pids", "pids.events").get("max", 0) > 0:
            found.append("processes")
        if self.version == 2:
            memory = self._events("", "memory.events")
            if memory.get("max", 0) or memory.get("oom_kill", 0):
                found.append("memory_total")
        elif int(self._read("memory", "memory.failcnt") or 0) > 0:
            found.append("memory_total")
        return found

    def cpu_seconds(self) -> float | None:
        """CPU time every process of the group used so far, together; None if not counted."""
        if self.version == 2:
            stat = self._events("", "cpu.stat")
            return stat["usage_usec"] / 1e6 if "usage_usec" in stat else None
        if "cpuacct" not in self.paths:
            return None
        used = self._read("cpuacct", "cpuacct.usage").strip()
        return int(used) / 1e9 if used.isdigit() else None

    def pids(self) -> list[int]:
        """Every process in this group and its sub-groups."""
        root = self.paths.get("pids", self.paths.get(""))
        assert root is not None
        found: list[int] = []
        for procs in root.rglob("cgroup.procs"):
            with contextlib.suppress(OSError):
                found += [int(p) for p in procs.read_text().split()]
        return found

    def kill(self, timeout: float = 5.0) -> int:
        """SIGKILL every process inside (frozen first, so none forks past it); how many."""
        victims = self.pids()
        if self.version == 2 and self._try_write("", "cgroup.kill", "1"):
            return self._until_empty(len(victims), timeout)
        self._freeze(True)
        try:
            for pid in self.pids():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        finally:
            self._freeze(False)  # a frozen process cannot die: thaw so the kill lands
        return self._until_empty(len(victims), timeout)

    def remove(self) -> None:
        """Kill what is left, then delete the group and its sub-groups."""
        self.kill()
        for path in self.paths.values():
            for folder in sorted((p for p in path.rglob("*") if p.is_dir()), reverse=True):
                with contextlib.suppress(OSError):
                    folder.rmdir()
            with contextlib.suppress(OSError):
                path.rmdir()

    # -- the files -------------------------------------------------------------------

    def _until_empty(self, count: int, timeout: float) -> int:
        clock = SystemClock()
        deadline = clock.now() + timeout
        while self.pids() and clock.now() < deadline:
            clock.sleep(0.01)
        return count

    def _freeze(self, frozen: bool) -> None:
        if self.version == 2:
            self._try_write("", "cgroup.freeze", "1" if frozen else "0")
        else:
            self._try_write("freezer", "freezer.state", "FROZEN" if frozen else "THAWED")

    def _path(self, controller: str, name: str) -> Path:
        return self.paths[controller if self.version == 1 else ""] / name

    def _write(self, controller: str, name: str, value: str) -> None:
        self._path(controller, name).write_text(value)

    def _try_write(self, controller: str, name: str, value: str) -> bool:
        try:
            self._write(controller, name, value)
        except OSError:
            return False
        return True

    def _read(self, controller: str, name: str) -> str:
        try:
            return self._path(controller, name).read_text()
        except OSError:
            return ""

    def _events(self, controller: str, name: str) -> dict[str, int]:
        events = {}
        for line in self._read(controller, name).splitlines():
            key, _, value = line.partition(" ")
            with contextlib.suppress(ValueError):
                events[key] = int(value)
        return events
