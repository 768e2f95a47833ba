"""Redis under fault: restarted empty under load, restarted with its data while steps wait out
their retries, and frozen for longer than a lease."""

from __future__ import annotations

import signal
import time
import urllib.error

import pytest

from tests.faults.conftest import Faults, hold
from tests.support import wait_for

pytestmark = [pytest.mark.slow]

ORDERS = 10
PAUSE_SECONDS = 13.0
"""Longer than the stack's 10 s lease (TENANTDB_LOCK_TTL_SECONDS)."""


def _retries(faults: Faults) -> float:
    try:
        return faults.counter("tenantdb_step_retries_total")
    except urllib.error.URLError:  # a worker not serving its metrics yet
        return 0.0


def _leader(faults: Faults, name: str, role: str) -> float:
    return faults.stack.counter(name, "tenantdb_leader", role=role)


@pytest.mark.timeout(150)
def test_redis_restarted_empty_under_load_loses_no_order(faults: Faults) -> None:
    for n in range(ORDERS):
        faults.create(f"wiped{n}")
    wait_for(faults.in_flight, 30, "passes in flight")
    ready_before = sum(faults.ready(n) for n in faults.live)
    faults.redis_server.kill()
    faults.redis_server.start()
    ended = time.monotonic()
    try:
        faults.settle(
            "redis restarted empty under load",
            ended,
            60,
            note=f"{ready_before}/{ORDERS} Ready at the restart",
        )
    finally:
        alive = faults.alive()
    assert alive == dict.fromkeys(alive, True), f"a process died with Redis: {alive}"
    wait_for(lambda: _leader(faults, "beat", "beat") == 1, 30, "beat to lead again")
    wait_for(lambda: _leader(faults, "watcher", "watcher") == 1, 30, "the watcher to lead again")
    # Orders made after the restart are served too: the watcher's watches feed the new Redis.
    late = faults.create("after-wipe")
    faults.stack.wait_ready(late, seconds=40)


@pytest.mark.timeout(150)
def test_redis_frozen_past_the_lease_loses_no_order(faults: Faults) -> None:
    for n in range(ORDERS):
        faults.create(f"frozen-redis{n}")
    wait_for(faults.in_flight, 30, "passes in flight")
    faults.redis_server.pause()
    try:
        hold(PAUSE_SECONDS)
    finally:
        faults.redis_server.resume()
    ended = time.monotonic()
    faults.settle("redis frozen 13 s (lease 10 s)", ended, 60)
    alive = faults.alive()
    assert alive == dict.fromkeys(alive, True), f"a process died with Redis frozen: {alive}"


@pytest.mark.timeout(150)
@pytest.mark.private_platform  # OpenBao is suspended
def test_redis_restarted_with_its_data_frees_the_steps_workers_held(faults: Faults) -> None:
    # Steps waiting out a retry's countdown live in their worker, held there. Redis goes away
    # and comes back with its data: the worker's broker connection is lost, and with it the
    # countdowns, while the messages stay unacknowledged in Redis until the visibility timeout.
    openbao = faults.stack.platform.openbao
    assert openbao is not None
    openbao.suspend()
    try:
        names = [faults.create(f"kept-redis{n}") for n in range(4)]
        wait_for(lambda: _retries(faults) >= 2 * len(names), 60, "every order's role step to retry")
        faults.redis_server.save()
        faults.redis_server.kill()
        hold(2.0)
        faults.redis_server.start()
    finally:
        openbao.resume()
    ended = time.monotonic()
    faults.settle("redis restarted with its data, retries held", ended, 60)
    alive = faults.alive()
    assert alive == dict.fromkeys(alive, True), f"a process died with Redis: {alive}"


@pytest.mark.timeout(150)
def test_redis_that_lost_its_last_writes_and_kept_the_lease_still_serves_the_order(
    faults: Faults,
) -> None:
    # A partial loss: the last second of an append-only file, or a failover to a replica a
    # little behind. The watcher's lease survives it, so no new term relists; the enqueue of an
    # order created in that second is gone, with its pending mark and its message.
    first = faults.create("before-the-loss")
    faults.stack.wait_ready(first, seconds=40)
    lease_key = f"{faults.stack.prefix}leader:watcher"
    workers = faults.workers()
    for name in workers:  # the order's pass must not run before Redis loses it
        faults.signal_tree(name, signal.SIGSTOP)
    try:
        faults.redis_server.save()  # what the loss keeps
        lost = faults.create("in-the-lost-second")
        wait_for(lambda: faults.pending(lost), 10, "the watcher to enqueue the order")
        lease = faults.client.get(lease_key)
        assert lease is not None
        # The watcher is held over the restart too, so it cannot look at Redis before the test
        # has seen the loss (on a loaded machine it may otherwise restore the enqueue first).
        faults.signal_tree("watcher", signal.SIGSTOP)
        try:
            faults.redis_server.kill()
            faults.redis_server.start()
            # The lease as the loss left it, however long the restart took: held, by the same
            # token.
            faults.client.set(lease_key, lease, px=10_000)
            assert not faults.pending(lost), "the loss took the order's enqueue"
        finally:
            faults.signal_tree("watcher", signal.SIGCONT)
        # Enqueues after the loss, the watcher's own among them, count on from what Redis kept;
        # they must not hide the loss before the watcher looks.
        after = faults.create("after-the-loss")
        wait_for(lambda: faults.pending(after), 10, "the watcher to enqueue the next order")
    finally:
        for name in workers:
            faults.signal_tree(name, signal.SIGCONT)
    ended = time.monotonic()
    faults.stack.wait_ready(after, seconds=40)
    faults.stack.wait_ready(lost, seconds=40)
    faults.settle("redis lost its last writes, lease kept", ended, 60)
    assert faults.stack.counter("watcher", "tenantdb_redis_rollbacks_total") >= 1
    assert not any("afresh" in line for line in faults.log_lines("watcher")), (
        "the watcher started a new term: the test did not keep the lease"
    )
