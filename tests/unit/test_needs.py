"""labkit.notebook.needs: a notebook's first cell names what is missing and the fix, then stops."""

from __future__ import annotations

import socket

import pytest

from labkit.integrations.celery import brokers
from labkit.notebook.needs import HOW_TO_INSTALL, MissingRequirement, require


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when the socket goes


def test_a_missing_package_names_itself_its_extra_and_make_venv(capsys):
    with pytest.raises(MissingRequirement, match="a package is missing"):
        require("json", "no_such_module_labkit", extra="web")
    said = capsys.readouterr().out
    assert said.startswith("This notebook needs no_such_module_labkit (labkit's [web] extra)")
    assert HOW_TO_INSTALL in said and "`make venv`" in said and "restart" in said


def test_a_service_that_does_not_answer_is_named_with_how_to_start_it(capsys, monkeypatch):
    port = _closed_port()
    monkeypatch.setitem(brokers.SERVICES, "redis", port)
    with pytest.raises(MissingRequirement, match="a service is not running"):
        require("json", extra="services", services=("redis",))
    said = capsys.readouterr().out
    assert f"Redis (127.0.0.1:{port})" in said and "docker compose up -d" in said


def test_when_everything_is_there_it_says_so_in_one_line(capsys):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        with pytest.MonkeyPatch.context() as mp:
            mp.setitem(brokers.SERVICES, "postgres", port)
            require("json", extra="lab", services=("postgres",))
    assert capsys.readouterr().out == "Ready: json installed; PostgreSQL answering.\n"


def test_an_unknown_service_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown service \\['mysql'\\]: choose among"):
        require(extra="services", services=("mysql",))
