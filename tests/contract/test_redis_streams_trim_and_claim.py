"""Lesson 13's stream moves for trimming and for a claim written before a done.

On a real Redis (7.0 or newer), each test under its own key prefix, removed afterwards.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from labkit.clock import FakeClock

pytest.importorskip("redis")

from labkit.backends.redis.streams import StreamQueue  # noqa: E402

pytestmark = pytest.mark.services


@pytest.fixture
def queue(redis_url: str, clock: FakeClock) -> Iterator[StreamQueue]:
    prefix = f"test:{uuid.uuid4().hex[:12]}"
    q = StreamQueue(redis_url, prefix, clock=clock)
    yield q
    q.delete_all()
    assert not list(q.r.scan_iter(match=f"{prefix}:*")), "keys left behind"
    q.close()


def test_xtrim_minid_deletes_pending_entries_and_autoclaim_reports_them_once(queue):
    ids = [queue.add("charge", {"n": n}, f"k{n}")[0] for n in range(5)]
    held = queue.read_new("c1", count=3)
    queue.ack(held[0].id)  # acknowledged: trimming it loses nothing
    assert queue.trim(minid=ids[3]) == 3
    assert [p.id for p in queue.pending()] == ids[1:3]  # ids kept, payloads gone
    first = queue.autoclaim("c2", min_idle_ms=0)
    assert first.deleted == ids[1:3] and first.entries == []
    again = queue.autoclaim("c2", min_idle_ms=0)
    assert again.deleted == []  # Redis says it once; then it is forgotten
    assert queue.pending() == []
    queue.record_lost(first.deleted, "trimmed while pending")
    assert [r["origin"] for r in queue.lost()] == ids[1:3]
    assert queue.dead_letters() == []  # nothing to redrive: there is no payload


def test_autoclaim_looks_at_ten_entries_per_count_and_goes_on_from_its_cursor(queue):
    # 25 entries a live consumer just read, then one a dead consumer held an hour ago.
    for n in range(26):
        queue.add("charge", {"n": n}, f"k{n}")
    held = queue.read_new("live", count=26)
    stale = held[-1].id
    queue.r.xclaim(queue.stream, queue.group, "gone", 0, [stale], idle=3_600_000, justid=True)
    first = queue.autoclaim("rescuer", min_idle_ms=60_000, count=1)
    # Ten looked at, none idle enough: nothing taken, and a cursor past them.
    assert first.entries == [] and first.cursor not in ("0-0", stale)
    assert queue.autoclaim("rescuer", min_idle_ms=60_000, count=1).entries == []  # from 0-0
    second = queue.autoclaim("rescuer", min_idle_ms=60_000, count=1, start=first.cursor)
    third = queue.autoclaim("rescuer", min_idle_ms=60_000, count=1, start=second.cursor)
    assert second.entries == [] and [e.id for e in third.entries] == [stale]
    assert third.cursor == "0-0"  # the scan went round the whole PEL


def test_trim_takes_exactly_one_threshold(queue):
    queue.add("charge", {}, "k0")
    queue.add("charge", {}, "k1")
    assert queue.trim(maxlen=1) == 1 and queue.length() == 1
    with pytest.raises(ValueError, match="exactly one"):
        queue.trim()
    with pytest.raises(ValueError, match="exactly one"):
        queue.trim(maxlen=1, minid="0-1")


def test_claim_is_exclusive_until_it_expires_and_done_comes_after(queue):
    assert queue.claim_key("k1", "c1", lease_ms=30_000)
    assert not queue.claim_key("k1", "c2", lease_ms=30_000)  # in progress elsewhere
    assert not queue.is_done("k1")  # a claim is not a done
    assert 0 < queue.r.pttl(f"{queue.prefix}:claim:k1") <= 30_000  # Redis's clock ends it
    queue.r.delete(f"{queue.prefix}:claim:k1")  # what the lease running out does
    assert queue.claim_key("k1", "c2", lease_ms=30_000)
    assert not queue.finish_key("k1", "c1", ttl_s=60)  # c1's claim is gone: c2's stays
    assert queue.r.get(f"{queue.prefix}:claim:k1") == "c2"
    assert queue.finish_key("k1", "c2", ttl_s=60)
    assert queue.is_done("k1") and not queue.r.exists(f"{queue.prefix}:claim:k1")
    assert 0 < queue.r.ttl(f"{queue.prefix}:done:k1") <= 60
    with pytest.raises(ValueError, match="lease_ms"):
        queue.claim_key("k2", "c1", lease_ms=0)
    with pytest.raises(ValueError, match="ttl_s"):
        queue.finish_key("k2", "c1", ttl_s=0)
