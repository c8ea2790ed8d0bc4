"""environment.yml (conda users) names the same packages and versions as pyproject.toml."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml  # PyYAML comes with jupytext, a pinned lab dependency

ROOT = Path(__file__).resolve().parents[2]
#: Extras a conda user gets from environment.yml (bench stays pip-only, for maintainers).
EXTRAS = ("lab", "web", "check", "dev", "services")
#: pip name -> conda-forge name where they differ.
CONDA_NAMES = {"psycopg": "psycopg", "redis": "redis-py"}


def _pip_pins() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = list(project["dependencies"])
    for extra in EXTRAS:
        specs += project["optional-dependencies"][extra]
    pins = {}
    for spec in specs:
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)(\[[^\]]*\])?==([^\s;]+)", spec)
        assert match, f"pyproject.toml: {spec!r} is not pinned with =="
        name = match.group(1).lower()
        pins[CONDA_NAMES.get(name, name)] = match.group(3)
    return pins


def _conda_spec() -> tuple[str, dict[str, str], list[str]]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    python, pins, pip = "", {}, []
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            pip += dep.get("pip", [])
            continue
        name, _, version = dep.partition("=")
        if name == "python":
            python = version
        elif name != "pip":
            assert version, f"environment.yml: {dep!r} has no version"
            pins[name.lower()] = version
    return python, pins, pip


def test_environment_yml_pins_what_pyproject_pins():
    _, conda, _ = _conda_spec()
    pip = _pip_pins()
    missing = sorted(set(pip) - set(conda))
    extra = sorted(set(conda) - set(pip))
    differ = {n: (pip[n], conda[n]) for n in sorted(set(pip) & set(conda)) if pip[n] != conda[n]}
    assert not missing, f"environment.yml lacks {missing}"
    assert not extra, f"environment.yml pins {extra}, which pyproject.toml does not"
    assert not differ, f"versions differ (pyproject, environment.yml): {differ}"


def test_environment_yml_uses_conda_forge_python_311_and_installs_labkit():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    python, _, pip = _conda_spec()
    assert env["channels"] == ["conda-forge"]
    assert python == "3.11"
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert requires == ">=3.11"
    assert pip == ["-e ."]
