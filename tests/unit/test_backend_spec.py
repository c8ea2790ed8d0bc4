"""labkit.backends.spec: one string names a store on any engine."""

from __future__ import annotations

import pytest

from labkit.backends import spec
from labkit.clock import FakeClock
from labkit.store import JobStore


def test_a_path_opens_sqlite_and_drop_leaves_files_alone(tmp_path):
    target = spec.new_spec("sqlite", tmp_path, "anything")
    store = spec.open_store(target, FakeClock())
    try:
        assert isinstance(store, JobStore)
        store.enqueue("k", {}, key="a")
    finally:
        store.close()
    spec.drop(target)
    assert (tmp_path / "jobs.db").exists()


def test_server_specs_carry_their_own_names():
    pg = spec.new_spec("postgres", None, "Explore-1")  # type: ignore[arg-type]
    rs = spec.new_spec("redis_streams", None, "Explore-1")  # type: ignore[arg-type]
    assert pg.endswith("#schema=explore_1") and spec.is_url(pg)
    assert rs.endswith("#prefix=explore_1") and spec.is_url(rs)
    with pytest.raises(ValueError, match="choose from sqlite, postgres, redis_streams"):
        spec.new_spec("mongodb", None, "x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="#prefix=NAME"):
        spec.open_store("redis://127.0.0.1:6379/0", FakeClock())
