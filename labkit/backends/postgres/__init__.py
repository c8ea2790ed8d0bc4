"""The job store contract on PostgreSQL (``FOR UPDATE SKIP LOCKED``).

``store`` the engine, ``session`` its connections, ``queues`` the queue policies,
``lock`` the advisory lock, ``runs`` a schema per run; each module's SQL beside it.
"""
