"""Other homes for the job store contract (``labkit.contract.JobStoreContract``).

``labkit.store.JobStore`` keeps jobs in one SQLite file; ``postgres.PostgresJobStore``
keeps them in a PostgreSQL schema for workers on many machines. Both pass the same
``tests/contract`` suite. Import the backend module itself
(``from labkit.backends.postgres import PostgresJobStore``): this package imports no
driver, so labkit works without psycopg installed.
"""
