"""How ``labkit grade`` confines a student's code: user, sandbox, limits, and the final sweep.

The strongest confinement the machine offers, decided once per run (``Confinement.detect``):

- **as root**: each grading process runs student code as its own unprivileged uid, so the
  grader (root) cannot be signalled, the instructor's files and other graders' folders
  cannot be written, and every process left behind is found by uid and killed. Each
  grading process claims its own uid (``student_uid``, an flock held while it runs), so
  two graders on one machine never share, or sweep, each other's uids;
- **with bubblewrap** (``bwrap`` on Linux): a new mount, pid, ipc and network namespace;
  the system read-only; a private ``/tmp``; only Python, the venv, the ``labkit``
  package folder (not the repository: no ``solutions/``) and the student's own folder
  are visible. The pid namespace dies with its first process, so nothing outlives it;
- **always**: resource limits (``Limits``) and a process group of its own.

In production the same job is done by containers (Docker, gVisor) or nsjail; labkit
uses what a Debian machine has after ``apt-get install bubblewrap``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labkit.grading.course import PACKAGE
from labkit.grading.isolation import cgroups
from labkit.grading.isolation.cgroups import Group, Hierarchy
from labkit.grading.isolation.limits import Limits
from labkit.grading.isolation.netns import NetworkNamespace
from labkit.grading.isolation.netns import available as netns_missing
from labkit.grading.isolation.processes import ConfinedPopen, SandboxedPopen

#: The uids student code runs as when grading as root: one per grading process.
BASE_UID, UIDS = 61_000, 64
#: One folder for the whole machine: two graders whose TMPDIR differ must still see each
#: other's claims, or both would run (and sweep) student code as the same uid. /run is
#: root's and never a student's; elsewhere the system's temporary folder.
UID_LOCKS = (
    Path("/run/labkit-grade-uids")
    if os.access("/run", os.W_OK)
    else Path(tempfile.gettempdir()) / "labkit-grade-uids"
)
#: lane -> (the uid this process runs that lane's student code as, the lock's fd)
_claimed: dict[int, tuple[int, int]] = {}
_claim_lock = threading.Lock()


def student_uid(lane: int = 0) -> int:
    """The uid this grading process runs student code as, claimed once and held until it exits.

    A uid is claimed by an exclusive ``flock`` on a file in ``UID_LOCKS``;
    the kernel releases it when the process ends, however it ends. Two grading processes
    (``--jobs``, or two graders on one machine) never share, or sweep, each other's uid.
    ``lane``: a notebook graded in lanes (``Checks.lanes``) runs each lane's copy of the
    student's process as a uid of its own, so that one lane's sweep never kills the
    other's processes.
    """
    with _claim_lock:
        if lane in _claimed:
            return _claimed[lane][0]
        folder = UID_LOCKS
        folder.mkdir(mode=0o700, exist_ok=True)
        for n in range(UIDS):
            fd = os.open(folder / f"{n}.lock", os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue
            # No live grader holds this uid now: whatever still runs as it was left by
            # one that died (a SIGKILLed grader's orphans), and would count against this
            # run's process limit, which is per uid.
            kill_all_of(BASE_UID + n)
            _claimed[lane] = (BASE_UID + n, fd)
            return _claimed[lane][0]
    raise RuntimeError(f"all {UIDS} grading uids are in use: too many graders at once")


#: Sets the limits, drops to the student's uid (when given), then runs the real command.
#: A small interpreter instead of ``preexec_fn``, which is unsafe in a threaded grader.
_ENTER = """
import os, resource, sys
uid, nproc, *limits = (int(a) for a in sys.argv[1:7])
for name, value in zip(("AS", "NOFILE", "FSIZE", "CPU"), limits):
    # CPU: the soft limit sends SIGXCPU (named in the feedback); the hard one, SIGKILL.
    hard = value + 5 if name == "CPU" else value
    try:
        resource.setrlimit(getattr(resource, "RLIMIT_" + name), (value, hard))
    except (ValueError, OSError):  # macOS refuses some (RLIMIT_AS): the rest still hold
        pass
if uid >= 0:
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
os.execv(sys.argv[7], sys.argv[7:])
"""


#: Read-only system folders every sandbox sees.
_SYSTEM = tuple(Path(p) for p in ("/usr", "/bin", "/lib", "/lib64", "/lib32", "/sbin", "/etc"))


def _groups() -> Hierarchy | None:
    """The machine's control groups for the grader, or None (no cgroups, or they refuse)."""
    try:
        return cgroups.detect()
    except OSError:
        return None


def _ancestors(path: Path) -> list[Path]:
    return list(reversed(path.parents))[1:]


@dataclass(frozen=True)
class Confinement:
    """How student processes are started: as whom, in which sandbox, with which limits."""

    limits: Limits = field(default_factory=Limits)
    bwrap: str | None = None
    drop_uid: bool = False
    network: bool = False
    #: Why a stronger confinement was not used (set by ``detect``).
    fallback: str = ""
    #: A control group per notebook, where the machine lets the grader make one.
    groups: Hierarchy | None = None
    #: The time zone student code runs in (``TZ``); None: the machine's.
    timezone: str | None = None
    #: Which lane of a notebook graded in lanes this confines (``student_uid``).
    lane: int = 0

    @classmethod
    def detect(
        cls, limits: Limits | None = None, network: bool = False, sandbox: bool = True
    ) -> Confinement:
        """The strongest confinement this machine allows (``sandbox=False``: limits only)."""
        bwrap = shutil.which("bwrap") if sandbox and sys.platform == "linux" else None
        drop = sandbox and hasattr(os, "geteuid") and os.geteuid() == 0
        skipped = ""
        for bwrap_option, drop_option in ((bwrap, drop), (None, drop), (None, False)):
            found = cls(limits or Limits(), bwrap_option, drop_option, network, skipped)
            if (bwrap_option is None and not drop_option) or found.works():
                return dataclasses.replace(found, groups=_groups()) if drop_option else found
            skipped += f"{found.describe_short()} failed a trial run; "
        return found

    def describe_short(self) -> str:
        what = ["own uid" if self.drop_uid else "grader's uid"]
        what += ["bubblewrap"] if self.bwrap else []
        return " + ".join(what)

    @property
    def isolated(self) -> bool:
        """True when a student's processes can be told apart from everyone else's."""
        return self.drop_uid or self.bwrap is not None

    def refusal(self) -> str | None:
        """Why grading a class must not start with this confinement, or None if it may.

        Student code as root with nothing around it can kill every process on the
        machine and rewrite every file, the gradebook and the hidden checks included:
        that is no trust boundary at all. As an ordinary user it can still reach that
        user's files, which ``describe`` says in the log; as root it is refused.
        """
        if self.isolated or not (hasattr(os, "geteuid") and os.geteuid() == 0):
            return None
        python = Path(sys.executable).resolve()
        return (
            "refusing to run student code as root with no confinement: it could kill any "
            "process and change any file, the gradebook included. "
            + (f"Tried and failed: {self.fallback.strip('; ')}. " if self.fallback else "")
            + "Install bubblewrap (apt-get install bubblewrap), or let other users run "
            f"this Python ({python}: every folder above it must be searchable, "
            "chmod o+x), or grade as an ordinary user. --no-sandbox grades anyway, to "
            "debug the grader on trusted notebooks only."
        )

    def describe(self) -> str:
        """One line for the grading log: what is confined, and what is not."""
        parts = []
        if self.drop_uid:
            parts.append(f"as its own uid ({student_uid(self.lane)})")
        elif hasattr(os, "geteuid") and os.geteuid() == 0:
            parts.append(
                "AS ROOT (WARNING: nothing stops it from changing the instructor's files; "
                "install bubblewrap, or a Python other users can run)"
            )
        else:
            parts.append("as the grader's user (not root: no uid of its own)")
        if self.bwrap:
            net = self.network_words()
            parts.append(f"in bubblewrap ({net}, read-only system, private /tmp)")
        else:
            parts.append("without a sandbox (install bubblewrap on Linux for one)")
        if self.groups is not None:
            parts.append(f"in a control group per notebook (cgroup v{self.groups.version})")
        text = "student code runs " + ", ".join(parts) + f"; limits: {self.limits.summary()}"
        return text + (f" ({self.fallback.strip('; ')})" if self.fallback else "")

    def network_words(self) -> str:
        """What the network of student code is, for the grading log."""
        if not self.network:
            return "no network"
        why_not = netns_missing()
        if why_not is None:
            return "a network namespace of its own per notebook, with its own services"
        return f"the machine's network, shared ({why_not})"

    def uid(self) -> int | None:
        """The uid student code runs as (None when it keeps the grader's uid)."""
        return student_uid(self.lane) if self.drop_uid else None

    def works(self) -> bool:
        """Can a trivial command run inside this confinement? (bwrap may lack namespaces.)"""
        probe = Path("/")
        try:
            done = subprocess.run(
                self.command([sys.executable, "-I", "-S", "-c", "pass"], probe),
                capture_output=True,
                timeout=30,
                env=self.environment(probe),
            )
        except (OSError, subprocess.TimeoutExpired):
            return False
        return done.returncode == 0

    def _bwrap_args(
        self, workdir: Path, own_pids: bool = True, keep_net: bool = False
    ) -> list[str]:
        assert self.bwrap is not None
        args = [self.bwrap, "--die-with-parent", "--new-session"]
        args += ["--unshare-pid"] if own_pids else []
        args += ["--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        if not keep_net:
            args.append("--unshare-net")
        args += ["--perms", "1777", "--tmpfs", "/tmp", "--dev", "/dev", "--proc", "/proc"]
        # multiprocessing's locks and queues live in /dev/shm: writable, like /tmp.
        args += ["--perms", "1777", "--tmpfs", "/dev/shm"]
        for system in _SYSTEM:
            args += ["--ro-bind-try", str(system), str(system)]
        visible = [Path(sys.base_prefix), Path(sys.prefix), PACKAGE]
        made: set[Path] = {Path("/"), Path("/tmp")}
        for path in [*visible, workdir]:
            for parent in _ancestors(path.resolve()):
                if parent not in made and not any(parent.is_relative_to(m) for m in _SYSTEM):
                    args += ["--perms", "0755", "--dir", str(parent)]
                    made.add(parent)
        for path in visible:
            args += ["--ro-bind", str(path.resolve()), str(path.resolve())]
        uid = self.uid()
        if uid is not None:  # programs that look their user up (initdb, getpass) find it
            for name, text in _account_files(uid).items():
                args += ["--ro-bind", str(text), f"/etc/{name}"]
        if workdir != Path("/"):
            args += ["--bind", str(workdir), str(workdir)]
        return [*args, "--chdir", str(workdir), "--"]

    def command(
        self,
        argv: list[str],
        workdir: Path,
        own_pids: bool = True,
        netns: NetworkNamespace | None = None,
        limits: Limits | None = None,
    ) -> list[str]:
        """``argv`` wrapped in the sandbox, the limits and the uid drop (when they apply).

        With ``netns`` the process runs in that network namespace (the notebook's own
        loopback); without one, in no network at all, unless the exercise asked for the
        network and the machine can make no namespace (then the machine's is shared).
        """
        uid = self.uid()
        lim = limits or self.limits
        enter = [sys.executable, "-I", "-S", "-c", _ENTER, str(-1 if uid is None else uid)]
        enter += [str(v) for v in (lim.processes, lim.memory, lim.open_files, lim.file_size)]
        enter += [str(lim.cpu_seconds)]
        exe = shutil.which(argv[0]) or argv[0]
        inner = [*enter, exe, *argv[1:]]
        keep_net = netns is not None or self.network
        if self.bwrap:
            inner = [*self._bwrap_args(workdir, own_pids, keep_net), *inner]
        return netns.enter(inner) if netns is not None else inner

    def environment(self, workdir: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """A small environment: nothing of the grader's (no tokens, no DSNs with passwords)."""
        bin_dir = str(Path(sys.executable).parent)
        env = {
            "PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(workdir),
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            "TMPDIR": "/tmp" if self.bwrap else str(workdir),
        }
        if self.timezone:
            env["TZ"] = self.timezone
        # Only what the caller added or changed: a check passing {**os.environ, ...} must
        # not hand the grader's own environment (tokens, passwords) to student code.
        env.update({k: v for k, v in (extra or {}).items() if os.environ.get(k) != v})
        return env

    def notebook_group(self) -> Group | None:
        """A new control group for one notebook, with the per-student limits set."""
        if self.groups is None:
            return None
        group = self.groups.group("notebook")
        group.limit(self.limits.memory_total, self.limits.processes)
        return group

    def popen(
        self,
        argv: list[str],
        workdir: Path,
        own_pids: bool = True,
        group: Group | None = None,
        netns: NetworkNamespace | None = None,
        limits: Limits | None = None,
        **kwargs: Any,
    ) -> subprocess.Popen[Any]:
        """Start ``argv`` confined, in its own session (so its group can be killed).

        With ``group``, the process joins that control group before anything else runs,
        and ``kill_tree`` kills the group: whatever the process started, in any session.
        ``netns`` and ``limits`` as for ``command``.
        """
        kwargs.setdefault("cwd", workdir)
        kwargs["env"] = self.environment(workdir, kwargs.get("env"))
        kwargs["start_new_session"] = True
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        command = self.command(argv, Path(workdir), own_pids, netns, limits)
        if group is not None:
            command = group.join_argv(command)
        popen = SandboxedPopen if self.bwrap else ConfinedPopen
        proc = popen(command, **kwargs)
        proc.group = group  # read back by kill_tree
        proc.output_cap = self.limits.output
        return proc

    def hand_over(self, workdir: Path) -> None:
        """Before the student's code runs again: give it what the grader made in its folder,
        and remove the student's symlinks that lead out of it.

        Files the grader created become the student uid's, so the student's code can write
        the databases a check prepared; only files with one link (a hard link planted by
        the student must not turn an instructor's file into theirs), never through a
        symlink. A symlink out of the folder is deleted: a check reading ``jobs.db`` as
        root must not read the file it points to (``/etc/shadow``, the hidden checks) into
        the feedback. Code still running during a check (a server) could plant one between
        two requests; checks read the student's files with that in mind.
        """
        uid = self.uid()
        me = os.geteuid()
        inside = ""  # the folder's real path, found when a symlink needs it (rarely)
        for root, dirs, files in os.walk(workdir):
            for name in [*dirs, *files]:
                path = os.path.join(root, name)
                with contextlib.suppress(OSError):
                    st = os.lstat(path)
                    if stat.S_ISLNK(st.st_mode):
                        inside = inside or os.path.realpath(workdir)
                        target = os.path.realpath(path)
                        if os.path.commonpath([inside, target]) != inside:
                            os.unlink(path)
                    elif uid is not None and st.st_uid == me and (st.st_nlink == 1 or name in dirs):
                        os.chown(path, uid, uid, follow_symlinks=False)
        with contextlib.suppress(OSError):
            if uid is not None and os.lstat(workdir).st_uid == me:
                os.chown(workdir, uid, uid)

    def sweep(self) -> int:
        """Kill every process running as the student uid (Linux ``/proc``); how many were found."""
        uid = self.uid()
        return 0 if uid is None else kill_all_of(uid)


def kill_all_of(uid: int) -> int:
    """SIGKILL every process running as ``uid`` (Linux ``/proc``); how many were found."""
    if not Path("/proc/self/status").exists():
        return 0
    found = 0
    for _ in range(20):  # a forking process can add children while we look
        pids = _pids_of(uid)
        if not pids:
            break
        found += len(pids)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    return found


def _account_files(uid: int) -> dict[str, Path]:
    """The machine's ``/etc/passwd`` and ``/etc/group`` with the student's uid added.

    ``initdb`` and ``postgres`` refuse to run as a uid with no name; the student's uid is
    nobody's on the machine. Written once per uid, beside the uid claims (root's folder).
    """
    made = {}
    for name, line in (
        ("passwd", f"student:x:{uid}:{uid}:labkit student:/tmp:/usr/sbin/nologin\n"),
        ("group", f"student:x:{uid}:\n"),
    ):
        target = UID_LOCKS / f"{name}-{uid}"
        system = Path("/etc") / name
        base = system.read_text(encoding="utf-8") if system.exists() else ""
        text = base + ("" if base.endswith("\n") or not base else "\n") + line
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            scratch = target.with_suffix(f".{os.getpid()}")
            scratch.write_text(text, encoding="utf-8")
            scratch.chmod(0o644)
            scratch.replace(target)
        made[name] = target
    return made


def _pids_of(uid: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for line in (entry / "status").read_text().splitlines():
                if line.startswith("Uid:"):
                    if int(line.split()[1]) == uid:
                        pids.append(int(entry.name))
                    break
    return pids
