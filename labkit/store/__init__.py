"""The job store: one contract, the shared flow, the SQLite engine.

``from labkit.store import JobStore`` is the SQLite store every lesson uses. Inside:

- ``contract``: the ``JobStoreContract`` Protocol every engine implements, and the
  constants the engines share (schema version, dead reasons);
- ``rules``: the job contract's decisions as pure functions (what a failure becomes);
- ``base``: the shared flow of enqueue, claim, complete, fail and redrive, over
- ``hooks``: the engine seam, what each database driver supplies;
- ``admin``: inspection, pruning, redrive in bulk;
- ``sqlite``: the SQLite engine, its statements in ``sqlite.sql``; ``common.sql`` holds
  the statements both engines run alike, ``shared.sql`` the fragments (``{{ name }}``)
  both engines' own statements use.

The PostgreSQL and Redis engines are in ``labkit.backends``. ``JobStore`` loads lazily,
so importing ``labkit.store.contract`` does not load the SQLite engine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from labkit import lazy_exports

if TYPE_CHECKING:
    from labkit.store.sqlite import JobStore

__all__ = ["JobStore"]
__getattr__, __dir__ = lazy_exports(__name__, {"JobStore": "labkit.store.sqlite"})
