"""Look at the brokers directly: queue depth, unacknowledged messages, and clean up after a run.

The lab never trusts what a task returned; it asks the broker:

- RabbitMQ: ``amqp_depth`` is the ready-message count of a passive ``queue.declare``
  (what ``rabbitmqctl list_queues`` shows; messages delivered and not yet acknowledged
  are not in it, they come back only if their consumer's connection dies);
- Redis (kombu's transport): a queue is a list (``redis_depth``); a message delivered
  and not acknowledged sits in the ``unacked`` hash (``redis_unacked``) until it is
  acked or restored;
- ``unreachable()`` says which of the lab's services do not answer, and ``HOW_TO_START``
  how to start them (the lab's ``compose.yaml``); ``labkit.notebook.needs`` uses both.

Operators use the RabbitMQ management UI or ``redis-cli`` for the same numbers.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

#: host port and name of each service the Celery lessons use.
SERVICES = {"rabbitmq": 5672, "redis": 6379, "postgres": 5432}
HOW_TO_START = (
    "start them with `docker compose up -d` in the lab's folder (its compose.yaml runs "
    "PostgreSQL 5432, Redis 6379, RabbitMQ 5672), then run this notebook again"
)


def unreachable(urls: Mapping[str, str]) -> list[str]:
    """The names whose URL's host and port accept no TCP connection (``name -> URL``)."""
    down = []
    for name, url in urls.items():
        parts = urlsplit(url)
        try:
            with socket.create_connection((parts.hostname, parts.port), timeout=1.0):
                pass
        except OSError:
            down.append(name)
    return down


def amqp_depth(url: str, queue: str) -> int:
    """Messages ready in ``queue`` (delivered-but-unacked ones are not counted)."""
    from kombu.connection import Connection

    with Connection(url) as conn:
        channel = conn.channel()
        try:
            _, count, _ = channel.queue_declare(queue=queue, passive=True)
        finally:
            channel.close()
    return int(count)


def amqp_declare_dead_letters(url: str, name: str) -> None:
    """Declare a fanout exchange ``name`` and a queue ``name`` bound to it.

    A queue declared with ``x-dead-letter-exchange: name`` sends there every message
    rejected without requeue; without the exchange RabbitMQ would drop it silently.
    """
    from kombu.connection import Connection
    from kombu.entity import Exchange, Queue

    with Connection(url) as conn:
        Queue(name, Exchange(name, type="fanout"), name)(conn.default_channel).declare()


def amqp_cleanup(url: str, queues: Iterable[str]) -> None:
    """Delete the run's queues and their exchanges (same names), ignoring missing ones."""
    from kombu.connection import Connection

    with Connection(url) as conn:
        for name in queues:
            for delete in ("queue_delete", "exchange_delete"):
                # A failed delete closes the channel: one channel per attempt.
                channel = conn.channel()
                try:
                    getattr(channel, delete)(name)
                except conn.channel_errors:
                    pass
                finally:
                    if channel.is_open:
                        channel.close()


def redis_depth(url: str, prefix: str, queue: str) -> int:
    """Messages waiting in kombu's Redis list for ``queue`` (keys under ``prefix``)."""
    import redis

    with redis.Redis.from_url(url) as client:
        return int(client.llen(prefix + queue))


def redis_unacked(url: str, prefix: str) -> int:
    """Messages delivered and not acknowledged (kombu's ``unacked`` hash under ``prefix``)."""
    import redis

    with redis.Redis.from_url(url) as client:
        return int(client.hlen(prefix + "unacked"))


def redis_cleanup(url: str, prefix: str) -> int:
    """Delete every key under ``prefix`` (the run's own); return how many were deleted."""
    import redis

    if not prefix or "*" in prefix:
        raise ValueError(f"refusing to delete keys for prefix {prefix!r}: give the run's own")
    with redis.Redis.from_url(url) as client:
        keys = list(client.scan_iter(match=prefix + "*", count=500))
        return int(client.delete(*keys)) if keys else 0
