"""Other homes for the job store contract (``labkit.store.contract.JobStoreContract``).

``labkit.store.sqlite.JobStore`` keeps jobs in one SQLite file. Here:

- ``postgres/``: ``store.PostgresJobStore``, a PostgreSQL schema for workers on many
  machines (the same ``tests/contract`` suite); ``queues`` adds per-account caps and
  serial queues on it, ``lock`` a single-instance lock across machines (an advisory
  lock), ``runs`` a schema per lesson run that the next run drops if this one died,
  ``session`` its connections and ``sql`` its statements in psycopg's style;
- ``redis/``: ``streams.StreamQueue``, the moves of Redis Streams one by one (``XADD``,
  ``XREADGROUP``, ``XPENDING``, ``XAUTOCLAIM``, a dead-letter stream, redrive);
  ``store.StreamJobStore``, the contract's stream-shaped subset on top, so the worker
  and the crash explorer run on Redis; ``lua``, their atomic steps;
- ``spec``: one string that names a store on any engine (``open_store``, ``new_spec``,
  ``drop``), for child processes and the explorer.

Import the backend module itself (``from labkit.backends.postgres.store import
PostgresJobStore``): this package imports no driver, so labkit works without psycopg or
redis installed.
"""
