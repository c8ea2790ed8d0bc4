"""Start JupyterLab on the lessons and say the URL it really serves (``make lab``).

``python -m labkit.notebook.server --notebook-dir notebooks --port 8888`` starts ``jupyter
lab`` in its own process group, waits for the server's runtime file
(``jpserver-<pid>.json``, the one ``jupyter server list --json`` reads), and prints the
URL from it: Jupyter moves to the next free port when the asked one is taken, so the
banner cannot be built from the port it was given. Ctrl-C (or any exit) stops the whole
process tree: the server and every kernel it started.

``start_lab(...)`` is the same start as a function, used by the browser test, so the
test opens JupyterLab exactly the way a student does.

Saves go through jupytext's contents manager (paired ``.py`` + ``.ipynb``) with
``labkit.notebook.refresh.pre_save_hook``, which drops what the running kernel adds to a
notebook (its Python version, cell trust), so opening and saving a lesson leaves the
committed files as they were.

In production one runs JupyterHub (or ``jupyter lab`` behind a proxy); this is only
the lab's launcher.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from labkit.lang import ENGLISH, language

#: Passed to every lab this module starts; see labkit.notebook.refresh.pre_save_hook.
SERVER_FLAGS = ("--ContentsManager.pre_save_hook=labkit.notebook.refresh.pre_save_hook",)


class LabDidNotStart(RuntimeError):
    """JupyterLab exited or never wrote its runtime file; its log says why."""


@dataclass
class Lab:
    """A running JupyterLab: its process, the URL it serves and its token."""

    popen: subprocess.Popen[bytes]
    url: str
    token: str
    runtime_dir: Path
    landing: str = ""

    def page(self, path: str = "") -> str:
        """The URL of ``path`` (relative to the notebook dir) in JupyterLab, token included."""
        where = f"{self.url}lab/tree/{path}" if path else f"{self.url}lab"
        return f"{where}?token={self.token}" if self.token else where

    @property
    def lab_url(self) -> str:
        """The URL the banner shows: the landing page, token included."""
        return self.page(self.landing)

    @property
    def port(self) -> int:
        """The port Jupyter really listens on (not necessarily the one asked for)."""
        return urlsplit(self.url).port or 80

    def stop(self) -> None:
        """Stop the server and its kernels (the whole process group), then reap it."""
        stop_group(self.popen)


def stop_group(popen: subprocess.Popen[bytes], grace_s: float = 5.0) -> None:
    """SIGTERM the process group of ``popen``, SIGKILL what is left after ``grace_s``."""
    if popen.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(popen.pid, signal.SIGTERM)
        try:
            popen.wait(grace_s)
        except subprocess.TimeoutExpired:
            pass
    # Kernels live in the same group and may outlive the server: kill what remains.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(popen.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        popen.wait(grace_s)


def lab_argv(
    notebook_dir: str | Path,
    port: int,
    open_browser: bool,
    landing: str = "",
    extra: Sequence[str] = (),
    python: str | None = None,
) -> list[str]:
    """The ``jupyter lab`` command line ``make lab`` runs (``python``: default, this one)."""
    argv = [python or sys.executable, "-m", "jupyterlab", f"--notebook-dir={notebook_dir}",
            f"--port={port}", *SERVER_FLAGS]
    if landing:
        argv.append(f"--ServerApp.default_url=/lab/tree/{landing}")
    if not open_browser:
        argv += ["--no-browser", "--ip=127.0.0.1"]
    if os.geteuid() == 0:
        # Jupyter refuses root (common in containers) unless told it is deliberate.
        argv.append("--allow-root")
    return [*argv, *extra]


def _runtime_info(runtime_dir: Path, pid: int) -> dict[str, object] | None:
    path = runtime_dir / f"jpserver-{pid}.json"
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return info if isinstance(info, dict) else None


def start_lab(
    notebook_dir: str | Path,
    port: int = 8888,
    *,
    open_browser: bool = False,
    landing: str = "",
    runtime_dir: str | Path | None = None,
    log_path: str | Path | None = None,
    env: dict[str, str] | None = None,
    extra: Sequence[str] = (),
    timeout_s: float = 120.0,
    python: str | None = None,
) -> Lab:
    """Start JupyterLab in its own process group and wait until it says where it listens.

    ``runtime_dir`` (default: Jupyter's own) is where the server writes its
    ``jpserver-<pid>.json``; a test passes a fresh folder. Output goes to ``log_path``
    (default: inherited, so ``make lab`` shows Jupyter's log as usual). ``python`` is the
    interpreter whose JupyterLab runs, and so the kernels' (default: this one; the kit's
    tests pass the student kit's own).
    """
    child_env = dict(os.environ if env is None else env)
    if runtime_dir is not None:
        child_env["JUPYTER_RUNTIME_DIR"] = str(runtime_dir)
    found = Path(runtime_dir) if runtime_dir is not None else Path(_jupyter_runtime_dir())
    log = open(log_path, "ab") if log_path is not None else None
    try:
        popen = subprocess.Popen(
            lab_argv(notebook_dir, port, open_browser, landing, extra, python),
            env=child_env, stdout=log, stderr=subprocess.STDOUT if log else None,
            start_new_session=True,
        )
    finally:
        if log is not None:
            log.close()
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            info = _runtime_info(found, popen.pid)
            if info is not None:
                return Lab(popen, str(info["url"]), str(info.get("token", "")), found, landing)
            if popen.poll() is not None:
                raise LabDidNotStart(
                    f"jupyter lab exited with code {popen.returncode} before serving"
                    + (f"; see {log_path}" if log_path else "; its output is above")
                )
            if time.monotonic() > deadline:
                raise LabDidNotStart(
                    f"jupyter lab wrote no {found}/jpserver-{popen.pid}.json within "
                    f"{timeout_s:.0f}s" + (f"; see {log_path}" if log_path else "")
                )
            time.sleep(0.2)
    except BaseException:
        stop_group(popen)
        raise


def _jupyter_runtime_dir() -> str:
    from jupyter_core.paths import jupyter_runtime_dir

    return str(jupyter_runtime_dir())


def _stop_on_sigterm(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt  # a closed terminal takes the same path as Ctrl-C


def first_lesson(root: Path, lang: str) -> str:
    """The page ``make lab`` opens: the first lesson in ``lang`` where that edition is
    there (``notebooks/pt_BR/``), else in English."""
    english = "notebooks/00_start_here.ipynb"
    edition = f"notebooks/{lang}/00_start_here.ipynb"
    return edition if lang != ENGLISH and (root / edition).exists() else english


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labkit.notebook.server", description=__doc__)
    parser.add_argument("--notebook-dir", default="notebooks")
    parser.add_argument("--port", type=int, default=8888)
    parser.add_argument("--landing", default=None,
                        help="the page to open, relative to --notebook-dir (default: the "
                        "first lesson, in the language of LABKIT_LANG)")
    parser.add_argument("--open", action="store_true", help="open a browser (needs a display)")
    args = parser.parse_args(argv)
    landing = args.landing or first_lesson(Path(args.notebook_dir), language())
    lab = start_lab(args.notebook_dir, args.port, open_browser=args.open, landing=landing)
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    try:
        where = "opened in your browser" if args.open else "open it in a browser"
        print(f"\nJupyterLab is serving the lessons ({where}; Ctrl-C stops it):\n\n"
              f"    {lab.lab_url}\n", flush=True)
        if not args.open:
            print("On a remote machine, tunnel the port first: "
                  f"ssh -L {lab.port}:127.0.0.1:{lab.port} HOST\n", flush=True)
        return lab.popen.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        lab.stop()


if __name__ == "__main__":
    sys.exit(main())
