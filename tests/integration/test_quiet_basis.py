"""What Redis keeps for quiet refreshes, on the real Redis: which enqueues touch an order, the
basis a converged pass leaves, and the watcher's lease it is tied to."""

from __future__ import annotations

import redis

from tenantdb.adapters.leader import LeaderLease
from tenantdb.adapters.workqueue import WorkQueue
from tenantdb.core.keys import OrderKey
from tenantdb.core.quiet import QuietBasis, QuietVerdict, decide_quiet
from tenantdb.core.schedule import Timetable
from tenantdb.core.seal import SealKeys
from workers.beat import sweep_once

KEY = OrderKey.parse("probe/tenant-a/order-1")
OTHER = OrderKey.parse("probe/tenant-a/order-2")
DAY = 86_400.0
NOTE_KEYS = SealKeys.parse("k" * 32)


def _queue(client: redis.Redis, prefix: str, published: list[OrderKey]) -> WorkQueue:
    return WorkQueue(client, published.append, prefix=prefix, seal_keys=NOTE_KEYS)


def test_every_enqueue_touches_the_order_but_its_refresh(
    real_redis: redis.Redis, key_prefix: str
) -> None:
    queue = _queue(real_redis, key_prefix, [])
    queue.enqueue(KEY)
    queue.enqueue(KEY, force=True)
    assert queue.look_quiet(KEY)[0].touched == 2
    queue.enqueue(KEY, refresh=True)
    queue.enqueue(KEY, force=True, refresh=True)
    assert queue.look_quiet(KEY)[0].touched == 2
    assert queue.progress(KEY)[0] == 4  # every one of them is still an event that asks a pass


def test_beat_sweeps_refreshes_without_a_touch_and_come_backs_with_one(
    real_redis: redis.Redis, key_prefix: str
) -> None:
    published: list[OrderKey] = []
    queue = _queue(real_redis, key_prefix, published)
    queue.schedule(KEY, 1_000.0, Timetable.REFRESH)
    queue.schedule(OTHER, 1_000.0, Timetable.DUE)
    sweep_once(queue, 5_000.0, refresh_cycle=1.0, interval=1.0)
    assert sorted(published) == sorted([KEY, OTHER])
    assert queue.look_quiet(KEY)[0].touched == 0
    assert queue.look_quiet(OTHER)[0].touched == 1


def test_a_basis_holds_while_the_watcher_that_vouched_leads(
    real_redis: redis.Redis, key_prefix: str
) -> None:
    queue = _queue(real_redis, key_prefix, [])
    watcher = LeaderLease(real_redis, "watcher", prefix=key_prefix, ttl=30.0)
    assert watcher.try_acquire()
    look, note = queue.look_quiet(KEY)
    assert (look.leader, look.basis, note) == (watcher.token, None, None)
    queue.record_quiet(KEY, QuietBasis(look.touched, watcher.token, 1_000.0), '{"a":1}', 60_000)
    look, note = queue.look_quiet(KEY)
    assert look.basis == QuietBasis(0, watcher.token, 1_000.0)
    assert note == '{"a":1}'
    assert decide_quiet(look, now=1_060.0, full_every=DAY) is QuietVerdict.QUIET
    queue.enqueue(KEY)
    assert decide_quiet(queue.look_quiet(KEY)[0], now=1_060.0, full_every=DAY) is (
        QuietVerdict.TOUCHED
    )
    watcher.release()
    assert queue.look_quiet(KEY)[0].leader is None
    queue.forget_quiet(KEY)
    look, note = queue.look_quiet(KEY)
    assert (look.basis, note) == (None, None)


def test_a_basis_ends_with_its_period_and_a_damaged_one_reads_as_none(
    real_redis: redis.Redis, key_prefix: str
) -> None:
    queue = _queue(real_redis, key_prefix, [])
    queue.record_quiet(KEY, QuietBasis(0, "t", 1.0), "{}", 60_000)
    ttl = real_redis.pttl(f"{key_prefix}quiet:{KEY}")
    assert 0 < ttl <= 60_000
    real_redis.set(f"{key_prefix}quiet:{KEY}", "not json")
    assert queue.look_quiet(KEY)[0].basis is None
