"""The world's mail provider sends on every call, unless an Idempotency-Key repeats."""

from __future__ import annotations

import pytest

from labkit.world import IdempotencyKeyReused, World


def test_mail_without_a_key_sends_every_time(tmp_path, clock):
    with World(tmp_path / "world.db", clock) as world:
        world.mail.send("a@example.com", "hi", key="m1")
        world.mail.send("a@example.com", "hi", key="m1")
        assert world.count("m1", "mail") == 2


def test_mail_with_an_idempotency_key_replays_the_first_reply(tmp_path, clock):
    with World(tmp_path / "world.db", clock) as world:
        first = world.mail.send("a@example.com", "hi", idempotency_key="r1")
        again = world.mail.send("a@example.com", "hi", idempotency_key="r1")
        assert again == first and world.count("r1", "mail") == 1
        assert [c.outcome for c in world.calls("mail")] == ["ok", "replayed"]
        with pytest.raises(IdempotencyKeyReused):
            world.mail.send("b@example.com", "hi", idempotency_key="r1")
