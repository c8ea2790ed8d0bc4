"""What one student may use while graded, and which limit a failure points at.

``Limits`` are the numbers (the ``labkit grade`` options take their defaults from
it); ``limit_of_error`` and ``limit_of_signal`` read which one a dead or failing
student process hit, so the feedback can name it.
"""

from __future__ import annotations

import dataclasses
import signal
from dataclasses import dataclass


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} bytes"


@dataclass(frozen=True)
class Limits:
    """What one student's process may use; each one, when hit, is named in the feedback."""

    memory: int = 1 << 30
    processes: int = 128
    open_files: int = 256
    file_size: int = 64 << 20
    cpu_seconds: int = 120
    output: int = 4 << 20
    #: Every process of one notebook together, and what it writes to the RAM-backed /tmp
    #: (held by the notebook's control group, where the machine has one).
    memory_total: int = 2 << 30
    #: What one notebook's files in its folder may take together (as root: a tmpfs
    #: of this size, ``labkit.grading.isolation.disk``).
    disk: int = 512 << 20
    #: CPU seconds of every process of one notebook together (its control group), over
    #: all its checks; ``cpu_seconds`` stays the cap of each process.
    cpu_total: int = 600

    def for_services(self) -> Limits:
        """The per-process limits of a server the grader starts for a notebook (a broker,
        a database): an Erlang VM reserves gigabytes of address space and wants file
        descriptors, and a server idles for the notebook's whole life. The notebook's own
        limits (``memory_total``, processes) still hold for it with everything else."""
        return dataclasses.replace(self, memory=16 << 30, open_files=4096, cpu_seconds=3600)

    def hit(self, what: str) -> str:
        """The feedback line for a limit: ``limit hit: used more than 1 GiB of memory``."""
        text = {
            "memory": f"used more than {_size(self.memory)} of memory",
            "processes": f"started more than {self.processes} processes",
            "open_files": f"opened more than {self.open_files} files at once",
            "file_size": f"wrote a file bigger than {_size(self.file_size)}",
            "cpu": f"used more than {self.cpu_seconds} s of CPU time",
            "output": f"printed more than {_size(self.output)}; the rest was not read",
            "memory_total": f"used more than {_size(self.memory_total)} of memory together "
            "(every process of the notebook, and its files in /tmp)",
            "disk": f"wrote more than {_size(self.disk)} of files in its folder",
            "cpu_total": f"used more than {self.cpu_total} s of CPU time together "
            "(every process of the notebook)",
        }[what]
        return f"limit hit: {text}"

    def summary(self) -> str:
        return (
            f"memory {_size(self.memory)}, {self.processes} processes, "
            f"{self.open_files} open files, files up to {_size(self.file_size)}, "
            f"{self.cpu_seconds} s CPU, output {_size(self.output)}, "
            f"{_size(self.memory_total)}, {self.cpu_total} s CPU and {_size(self.disk)} of "
            "files per notebook"
        )


def limit_of_error(type_names: tuple[str, ...] | list[str], message: str) -> str | None:
    """Which limit an exception from student code points at, if any."""
    if "MemoryError" in type_names:
        return "memory"
    if "OSError" in type_names:
        if message.startswith("[Errno 24]"):
            return "open_files"
        if message.startswith("[Errno 27]"):
            return "file_size"
        if message.startswith("[Errno 28]"):
            return "disk"
        if "BlockingIOError" in type_names and message.startswith("[Errno 11]"):
            return "processes"
    return None


def limit_of_signal(returncode: int | None) -> str | None:
    """Which limit killed a process, from its (negative) return code."""
    if returncode == -signal.SIGXCPU:
        return "cpu"
    if returncode == -signal.SIGXFSZ:
        return "file_size"
    return None
