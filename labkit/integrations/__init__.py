"""Labkit beside the tools a production system would use: an HTTP front door, Celery,
Prometheus.

- ``http/``: ``service`` is the request-reply service of lesson 12, ``serve`` starts it
  in a server process, ``report_job`` is its example job;
- ``celery/``: ``app`` is the Celery app lesson 14 runs, ``run`` one run of it,
  ``harness`` starts, watches, kills and stops real ``celery worker`` / ``celery beat``
  processes, ``points`` pauses a task where the lab kills it, ``table`` is lesson 06's
  crash table on Celery, ``brokers`` reads queue depths and unacked messages straight
  from the brokers, and ``proctree`` answers "is that process really gone?" from /proc;
- ``prometheus``: a private Prometheus server that scrapes lesson 11's metrics and
  reports its alerts' states.
"""
