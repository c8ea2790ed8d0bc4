"""The broker views lesson 14 asserts with, and the first cell's service probe."""

from __future__ import annotations

import socket
import uuid

import pytest

from labkit.integrations.celery import brokers


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # free once the socket closes: nothing listens


def test_unreachable_names_the_services_down_and_how_to_start_them():
    port = _closed_port()
    assert brokers.unreachable({"rabbitmq": f"amqp://guest:guest@127.0.0.1:{port}//"}) == [
        "rabbitmq"
    ]
    assert "docker compose up -d" in brokers.HOW_TO_START


@pytest.mark.services
def test_amqp_depth_counts_ready_messages_and_cleanup_deletes_the_queue(amqp_url):
    from kombu import Connection, Exchange, Queue

    name = f"q-test-{uuid.uuid4().hex[:8]}"
    try:
        with Connection(amqp_url) as conn:
            queue = Queue(name, Exchange(name, type="direct"), routing_key=name)
            producer = conn.Producer()
            for n in range(3):
                producer.publish(
                    {"n": n}, exchange=queue.exchange, routing_key=name, declare=[queue]
                )
        assert brokers.amqp_depth(amqp_url, name) == 3
    finally:
        brokers.amqp_cleanup(amqp_url, [name])
    with pytest.raises(Exception, match="NOT_FOUND|no queue"):
        brokers.amqp_depth(amqp_url, name)


@pytest.mark.services
def test_redis_views_read_the_prefixed_keys_and_cleanup_only_those(redis_url):
    import redis

    prefix = f"test-{uuid.uuid4().hex[:8]}:"
    with redis.Redis.from_url(redis_url) as client:
        client.rpush(prefix + "q", "a", "b")
        client.hset(prefix + "unacked", "tag1", "x")
        client.set("outside-" + prefix, "kept")
        try:
            assert brokers.redis_depth(redis_url, prefix, "q") == 2
            assert brokers.redis_unacked(redis_url, prefix) == 1
            assert brokers.redis_cleanup(redis_url, prefix) == 2
            assert client.get("outside-" + prefix) == b"kept"
        finally:
            client.delete("outside-" + prefix)
    with pytest.raises(ValueError, match="refusing"):
        brokers.redis_cleanup(redis_url, "")
