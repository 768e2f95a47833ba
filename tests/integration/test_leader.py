"""Leader election through a Redis lease: one leader, quick takeover, no acting after a loss."""

from __future__ import annotations

import threading
import time

import redis

from tenantdb.adapters.leader import LeaderLease


def test_only_one_replica_leads(real_redis: redis.Redis, key_prefix: str) -> None:
    a = LeaderLease(real_redis, "watcher", prefix=key_prefix, ttl=5)
    b = LeaderLease(real_redis, "watcher", prefix=key_prefix, ttl=5)
    assert a.try_acquire()
    assert not b.try_acquire()
    assert a.is_leader
    assert not b.is_leader
    assert a.try_acquire(), "the leader renews its own lease"


def test_a_released_lease_is_taken_at_once(real_redis: redis.Redis, key_prefix: str) -> None:
    a = LeaderLease(real_redis, "beat", prefix=key_prefix, ttl=5)
    b = LeaderLease(real_redis, "beat", prefix=key_prefix, ttl=5)
    assert a.try_acquire()
    a.release()
    assert not a.is_leader
    assert b.try_acquire()


def test_a_standby_takes_over_after_the_leader_dies(
    real_redis: redis.Redis, key_prefix: str
) -> None:
    dead = LeaderLease(real_redis, "watcher", prefix=key_prefix, ttl=0.6)
    assert dead.try_acquire()  # then never renews again: the process died
    standby = LeaderLease(real_redis, "watcher", prefix=key_prefix, ttl=0.6, retry=0.05)
    stop = threading.Event()
    changes: list[bool] = []
    took_over = threading.Event()

    def record(held: bool) -> None:
        changes.append(held)
        if held:
            took_over.set()

    thread = threading.Thread(target=standby.run, args=(stop, record))
    died = time.monotonic()
    thread.start()
    try:
        assert took_over.wait(5), "the standby never took over"
        assert time.monotonic() - died < 0.6 + 1.0
        assert standby.is_leader
        assert not dead.try_acquire(), "the old leader cannot come back while the lease is held"
    finally:
        stop.set()
        thread.join(5)
    assert changes == [True, False]


def test_a_leader_cut_off_from_redis_stops_acting_before_its_ttl_ends(
    real_redis: redis.Redis, key_prefix: str
) -> None:
    now = [100.0]
    lease = LeaderLease(real_redis, "watcher", prefix=key_prefix, ttl=10, clock=lambda: now[0])
    assert lease.try_acquire()
    now[0] += 7.9
    assert lease.is_leader
    now[0] += 0.2  # past 80% of the TTL with no renewal
    assert not lease.is_leader


def test_a_lease_taken_afresh_while_leading_is_a_new_term(
    real_redis: redis.Redis, key_prefix: str
) -> None:
    lease = LeaderLease(real_redis, "watcher", prefix=key_prefix, ttl=0.6, retry=0.05)
    stop = threading.Event()
    changes: list[bool] = []
    thread = threading.Thread(target=lease.run, args=(stop, changes.append))
    thread.start()
    try:
        deadline = time.monotonic() + 5
        while changes != [True]:
            assert time.monotonic() < deadline, changes
            time.sleep(0.01)
        real_redis.delete(lease.key)  # Redis lost its data; the leader takes the key afresh
        while changes != [True, False, True]:
            assert time.monotonic() < deadline, changes
            time.sleep(0.01)
        assert lease.term == 2
    finally:
        stop.set()
        thread.join(5)
