"""A notebook's RabbitMQ boots with only the applications its core needs.

``services.rabbitmq_core`` builds the plugins folder the notebook's broker starts with:
the applications ``rabbit`` needs, followed through each ``.app`` file, as hard links
(files of the system the student's uid cannot write) in the student's folder, since the
sandbox shows no other folder and ``hand_over`` removes symlinks that lead out of it.
The broker's boot through the sandbox is ``test_notebook_network.py``'s and
``test_ex08_graded.py``'s.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from labkit.grading.isolation.services import rabbitmq_core


def _app(plugins: Path, folder: str, needs: str, included: str = "") -> None:
    name = folder.rsplit("-", 1)[0]
    ebin = plugins / folder / "ebin"
    ebin.mkdir(parents=True)
    spec = f"{{application, {name}, [\n\t{{applications, [{needs}]}},\n"
    if included:
        spec += f"\t{{included_applications,[{included}]}},\n"
    (ebin / f"{name}.app").write_text(spec + "\t{env, []}]}.\n", encoding="utf-8")
    (ebin / f"{name}.beam").write_bytes(b"FOR1")


def test_the_core_is_rabbit_and_what_it_needs_and_nothing_else(tmp_path: Path) -> None:
    plugins, home = tmp_path / "plugins", tmp_path / "home"
    _app(plugins, "rabbit-3.10.8", "kernel,stdlib,rabbit_common,\n\t\tra", included="inner")
    _app(plugins, "rabbit_common-3.10.8", "kernel, jsx")
    _app(plugins, "ra-2.2.0", "kernel,stdlib,aten,\n gen_batch_server")
    _app(plugins, "inner-1.0", "kernel")
    for leaf in ("jsx-3.1.0", "aten-0.5.8", "gen_batch_server-0.8.8"):
        _app(plugins, leaf, "kernel")
    _app(plugins, "rabbitmq_management-3.10.8", "rabbit, cowboy")
    _app(plugins, "cowboy-2.8.0", "kernel")
    home.mkdir()

    core = rabbitmq_core(plugins, home)

    assert core == home / "plugins"
    assert sorted(p.name for p in core.iterdir()) == [
        "aten-0.5.8",
        "gen_batch_server-0.8.8",
        "inner-1.0",
        "jsx-3.1.0",
        "ra-2.2.0",
        "rabbit-3.10.8",
        "rabbit_common-3.10.8",
    ]
    linked = core / "ra-2.2.0" / "ebin" / "ra.beam"
    assert not linked.is_symlink()
    assert os.path.samefile(linked, plugins / "ra-2.2.0" / "ebin" / "ra.beam")


@pytest.mark.parametrize("layout", ["no rabbit", "packed in .ez archives", "unreadable .app"])
def test_an_unknown_layout_keeps_the_whole_folder(tmp_path: Path, layout: str) -> None:
    plugins, home = tmp_path / "plugins", tmp_path / "home"
    home.mkdir()
    _app(plugins, "ra-2.2.0", "kernel")
    if layout == "packed in .ez archives":
        (plugins / "rabbit-3.10.8.ez").write_bytes(b"PK")
    elif layout == "unreadable .app":
        _app(plugins, "rabbit-3.10.8", "ra")
        (plugins / "ra-2.2.0" / "ebin" / "ra.app").write_bytes(b"\xff\xfe")
    assert rabbitmq_core(plugins, home) is None
    assert rabbitmq_core(tmp_path / "no such folder", home) is None


@pytest.mark.skipif(shutil.which("rabbitmq-server") is None, reason="needs RabbitMQ (CI has it)")
def test_the_installed_brokers_core_leaves_its_plugins_out(tmp_path: Path) -> None:
    server = shutil.which("rabbitmq-server")
    assert server is not None
    plugins = Path(os.path.realpath(server)).parents[1] / "plugins"
    if not plugins.is_dir():  # Debian's rabbitmq-server on PATH is a wrapper script
        [plugins] = Path("/usr/lib/rabbitmq/lib").glob("rabbitmq_server-*/plugins")
    core = rabbitmq_core(plugins, tmp_path)
    assert core is not None
    names = {p.name.rsplit("-", 1)[0] for p in core.iterdir()}
    assert {"rabbit", "rabbit_common", "rabbitmq_prelaunch", "ra", "ranch"} <= names
    assert not names & {"rabbitmq_management", "rabbitmq_mqtt", "rabbitmq_shovel"}
    assert len(names) < len(list(plugins.iterdir())) / 2
