"""Other homes for the job store contract (``labkit.contract.JobStoreContract``).

``labkit.store.JobStore`` keeps jobs in one SQLite file. Here:

- ``postgres.PostgresJobStore``: a PostgreSQL schema for workers on many machines (the
  same ``tests/contract`` suite); ``pg_queues`` adds per-account caps and serial queues
  on it, ``pg_lock`` a single-instance lock across machines (an advisory lock),
  ``pg_runs`` a schema per lesson run that the next run drops if this one died;
- ``redis_streams.StreamQueue``: the moves of Redis Streams one by one (``XADD``,
  ``XREADGROUP``, ``XPENDING``, ``XAUTOCLAIM``, a dead-letter stream, redrive);
  ``redis_store.StreamJobStore``: the contract's stream-shaped subset on top, so the
  worker and the crash explorer run on Redis; ``redis_lua``: their atomic steps;
- ``spec``: one string that names a store on any engine (``open_store``, ``new_spec``,
  ``drop``), for child processes and the explorer.

Import the backend module itself (``from labkit.backends.postgres import
PostgresJobStore``): this package imports no driver, so labkit works without psycopg or
redis installed.
"""
