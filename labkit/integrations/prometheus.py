"""A private Prometheus server for one lesson or test: scrape labkit's metrics, evaluate an alert.

- ``serve_metrics(registry)`` serves a ``prometheus_client`` registry (``labkit.metrics.
  registry_for(store)``) on 127.0.0.1 at a port the kernel picks, from a thread of this
  process (``prometheus_client.start_http_server``);
- ``shortened_rule(rules, alert, for_)`` is one alert of a parsed rule file (the
  ``ops/alerts.yml`` mapping) with the same ``expr`` and a shorter ``for:``, so a lesson
  sees pending turn to firing in seconds;
- ``Prometheus.start(target, rules)`` writes a ``prometheus.yml`` that scrapes and evaluates
  every second (as JSON, which is YAML too: labkit needs no YAML library), starts the real
  ``prometheus`` binary in a session of its own on a temporary TSDB, and waits until it is
  ready; ``wait_for_target()``, ``wait_for_evaluation()``, ``alert(name)`` and
  ``query(expr)`` read its HTTP API; ``stop()`` (also on leaving a ``with`` block) sends
  SIGTERM to its process group, SIGKILL if it lingers, and removes the temporary folder;
- ``watch_alert(server, name, until)`` polls the alert's state and returns each distinct
  state once, in the order seen (inactive, pending, firing), never timestamps;
- ``find_prometheus()`` is the binary's path, or None with ``MISSING`` saying how to install
  it; under ``LABKIT_REQUIRE_SERVICES=1`` (what CI exports) it raises instead, so a run
  cannot pass by skipping.

In production Prometheus is a long-lived service (Debian's ``prometheus.service``, or the
Prometheus Operator on Kubernetes) that scrapes every 15 s to 1 min, loads
``ops/alerts.yml`` unchanged and sends firing alerts to Alertmanager, which pages or opens
tickets. This module is that server for the few seconds a lesson needs.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from prometheus_client import CollectorRegistry, start_http_server

from labkit.clock import Clock, SystemClock
from labkit.errors import LabkitError

HOST = "127.0.0.1"
#: How to get the binary, as the README's requirements say.
MISSING = (
    "prometheus is not installed: apt-get install prometheus (Debian and Ubuntu; it ships "
    "promtool too), or brew install prometheus on macOS"
)
#: Seconds Prometheus may take to start, or to scrape its first sample.
START_TIMEOUT_S = 30.0


class PrometheusMissing(LabkitError):
    """prometheus is not installed and LABKIT_REQUIRE_SERVICES=1 makes that a failure."""


def find_prometheus() -> str | None:
    """The ``prometheus`` binary; None if missing (PrometheusMissing in CI, see above)."""
    found = shutil.which("prometheus")
    if found is None and os.environ.get("LABKIT_REQUIRE_SERVICES", "") == "1":
        raise PrometheusMissing(f"{MISSING} (LABKIT_REQUIRE_SERVICES=1 makes this a failure)")
    return found


@dataclass
class MetricsEndpoint:
    """A registry served over HTTP by a thread of this process (``serve_metrics``)."""

    server: Any  # prometheus_client's WSGIServer
    target: str  # host:port, as a scrape config names it

    @property
    def url(self) -> str:
        return f"http://{self.target}/metrics"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def serve_metrics(registry: CollectorRegistry) -> MetricsEndpoint:
    """Serve ``registry`` on 127.0.0.1 at a port the kernel picks (port 0)."""
    server, _thread = start_http_server(0, addr=HOST, registry=registry)
    return MetricsEndpoint(server, f"{HOST}:{server.server_port}")


def shortened_rule(rules: dict[str, Any], alert: str, for_: str) -> dict[str, Any]:
    """A rule file holding only ``alert`` of ``rules``, with its expr and ``for: for_``."""
    found = [dict(r) for g in rules["groups"] for r in g["rules"] if r.get("alert") == alert]
    if not found:
        raise ValueError(f"no alert {alert!r} among the rules")
    return {"groups": [{"name": "lesson", "rules": [{**found[0], "for": for_}]}]}


def _free_port() -> int:
    # Prometheus binds its own socket, so the port is chosen here and released: another
    # process could take it in between, which start() answers by trying again.
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class AlertState:
    """One alert as Prometheus reports it: inactive, pending or firing, and its value."""

    state: str
    value: float | None  # the expr's value while active; None while inactive


@dataclass
class Prometheus:
    """A ``prometheus`` process in its own session, on a temporary TSDB (module docstring)."""

    popen: subprocess.Popen[bytes]
    url: str
    workdir: Path
    clock: Clock = field(default_factory=SystemClock)

    @classmethod
    def start(
        cls,
        target: str,
        rules: dict[str, Any],
        *,
        binary: str = "prometheus",
        interval: str = "1s",
        timeout: float = START_TIMEOUT_S,
    ) -> Prometheus:
        """Scrape ``target`` (host:port) and evaluate ``rules`` every ``interval``."""
        workdir = Path(tempfile.mkdtemp(prefix="labkit-prometheus-"))
        (workdir / "rules.yml").write_text(json.dumps(rules, indent=2))
        config = {
            "global": {"scrape_interval": interval, "evaluation_interval": interval},
            "rule_files": [str(workdir / "rules.yml")],
            "scrape_configs": [{"job_name": "labkit", "static_configs": [{"targets": [target]}]}],
        }
        (workdir / "prometheus.yml").write_text(json.dumps(config, indent=2))
        try:
            for _ in range(3):  # a port taken between choosing and binding: choose again
                server = cls._launch(binary, workdir)
                try:
                    server._wait_ready(timeout)
                    return server
                except _PortTaken:
                    server.stop(remove=False)
            raise RuntimeError("prometheus found no free port on 127.0.0.1 in three tries")
        except BaseException:
            shutil.rmtree(workdir, ignore_errors=True)
            raise

    @classmethod
    def _launch(cls, binary: str, workdir: Path) -> Prometheus:
        port = _free_port()
        with (workdir / "prometheus.log").open("wb") as log:
            popen = subprocess.Popen(
                [
                    binary,
                    f"--config.file={workdir / 'prometheus.yml'}",
                    f"--storage.tsdb.path={workdir / 'data'}",
                    f"--web.listen-address={HOST}:{port}",
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=workdir,
                start_new_session=True,  # its own process group: stop() signals all of it
            )
        return cls(popen, f"http://{HOST}:{port}", workdir)

    def log_text(self) -> str:
        path = self.workdir / "prometheus.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def _wait_ready(self, timeout: float) -> None:
        def ready() -> bool:
            if self.popen.poll() is not None:
                if "address already in use" in self.log_text():
                    raise _PortTaken()
                raise RuntimeError(f"prometheus exited at start:\n{self.log_text()[-2000:]}")
            try:
                return httpx.get(f"{self.url}/-/ready", timeout=2.0).status_code == 200
            except httpx.TransportError:
                return False

        self.wait(ready, timeout, "prometheus to be ready")

    def wait(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        """Poll ``predicate`` every 0.1 s; TimeoutError naming ``what`` after ``timeout``."""
        deadline = self.clock.now() + timeout
        while not predicate():
            if self.clock.now() > deadline:
                raise TimeoutError(f"still waiting after {timeout:g}s for {what}")
            self.clock.sleep(0.1)

    def api(self, path: str, **params: str) -> Any:
        """GET ``/api/v1/<path>`` and return its ``data`` (RuntimeError on an API error)."""
        body = httpx.get(f"{self.url}/api/v1/{path}", params=params, timeout=5.0).json()
        if body.get("status") != "success":
            raise RuntimeError(f"prometheus /api/v1/{path}: {body}")
        return body["data"]

    def wait_for_target(self, timeout: float = START_TIMEOUT_S) -> None:
        """Until every target's last scrape succeeded (health "up")."""

        def up() -> bool:
            targets = self.api("targets")["activeTargets"]
            return bool(targets) and all(t["health"] == "up" for t in targets)

        self.wait(up, timeout, "the scrape target to be up")

    def _rule(self, alert: str) -> dict[str, Any]:
        for group in self.api("rules", type="alert")["groups"]:
            for rule in group["rules"]:
                if rule["name"] == alert:
                    return dict(rule)
        raise KeyError(f"prometheus has no alerting rule {alert!r}")

    def wait_for_evaluation(self, alert: str, timeout: float = START_TIMEOUT_S) -> None:
        """Until ``alert`` has been evaluated once more, that is after everything before now."""
        before = self._rule(alert).get("lastEvaluation")
        self.wait(
            lambda: self._rule(alert).get("lastEvaluation") != before,
            timeout,
            f"an evaluation of {alert}",
        )

    def alert(self, name: str) -> AlertState:
        """The alert's state now, and the expr's value while it is active."""
        rule = self._rule(name)
        values = [float(a["value"]) for a in rule.get("alerts", [])]
        return AlertState(rule["state"], values[0] if values else None)

    def query(self, expr: str) -> float | None:
        """The value of an instant query returning one sample; None when it returns none."""
        result = self.api("query", query=expr)["result"]
        return float(result[0]["value"][1]) if result else None

    def stop(self, grace_s: float = 5.0, *, remove: bool = True) -> None:
        """SIGTERM the process group, SIGKILL after ``grace_s``; remove the temporary folder."""
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.popen.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(grace_s)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, signal.SIGKILL)  # whatever is left of the group
        self.popen.wait()
        if remove:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> Prometheus:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _PortTaken(Exception):
    """The port chosen for Prometheus was taken before it could bind it."""


def watch_alert(
    server: Prometheus,
    name: str,
    until: str = "firing",
    timeout: float = 60.0,
    since: AlertState | None = None,
) -> list[AlertState]:
    """Poll ``name`` until it is ``until``; each distinct state once, first sighting, in order.

    ``since`` is a state read earlier (before the lesson changed the data), kept first.
    """
    seen: list[AlertState] = [since] if since is not None else []

    def reached() -> bool:
        now = server.alert(name)
        if not seen or seen[-1].state != now.state:
            seen.append(now)
        return now.state == until

    server.wait(reached, timeout, f"{name} to be {until}")
    return seen
