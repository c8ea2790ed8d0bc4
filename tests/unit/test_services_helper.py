"""The services helper in tests/conftest.py: skip with a how-to normally, fail in CI."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

# A private copy of tests/conftest.py: `import conftest` would be ambiguous next to other
# conftest files, and patching the copy cannot leak into the real fixtures.
_spec = importlib.util.spec_from_file_location(
    "labkit_tests_conftest", Path(__file__).parents[1] / "conftest.py"
)
assert _spec is not None and _spec.loader is not None
conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(conftest)


@pytest.fixture
def service_down(monkeypatch):
    """Every probed port looks closed, whatever runs on this machine."""
    probed: list[int] = []

    def closed(port: int, host: str = "127.0.0.1", timeout: float = 0.5) -> bool:
        probed.append(port)
        return False

    monkeypatch.setattr(conftest, "_port_open", closed)
    return probed


@pytest.mark.parametrize(
    ("name", "port", "hint"),
    [("postgres", 5432, "PostgreSQL"), ("redis", 6379, "Redis"), ("rabbitmq", 5672, "RabbitMQ")],
)
def test_a_missing_service_skips_with_how_to_start_it(monkeypatch, service_down, name, port, hint):
    monkeypatch.delenv("LABKIT_REQUIRE_SERVICES", raising=False)
    with pytest.raises(pytest.skip.Exception) as caught:
        conftest.require_service(name)
    assert service_down == [port]
    assert hint in str(caught.value) and "start" in str(caught.value)


def test_a_missing_service_fails_when_services_are_required(monkeypatch, service_down):
    monkeypatch.setenv("LABKIT_REQUIRE_SERVICES", "1")
    with pytest.raises(pytest.fail.Exception, match="LABKIT_REQUIRE_SERVICES=1"):
        conftest.require_service("redis")
    assert service_down == [6379]


def test_a_running_service_gives_its_url(monkeypatch):
    monkeypatch.setattr(conftest, "_port_open", lambda port, **_: port == 5432)
    assert conftest.require_service("postgres").startswith("postgresql://")
