"""A worker's hold on a received message ends when the message starts, even if its pass fails.

The hold renews an entry's pending mark (or a step's fence) while the message waits in the
worker. Once a pool process starts the task, its pass holds the order itself; a task that fails
before it gets that far (Redis timing out mid-fault, say) must not leave the hold renewing a
mark no message stands behind, or every later event finds the mark and publishes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis

from tasks import runtime
from tasks.holding import StepHolds
from tenantdb.adapters.workqueue import WorkQueue, ready_fence
from tenantdb.core.keys import OrderKey
from tenantdb.core.tasknames import RECONCILE_ORDER
from tenantdb.settings import load_settings
from tests.conftest import REDIS_URL
from tests.support import wait_for

LEASE = 0.6
ORDER = OrderKey.parse("mariadbdatabase/tenant-a/held")


@pytest.fixture
def queue(monkeypatch: pytest.MonkeyPatch, key_prefix: str) -> Iterator[WorkQueue]:
    """The worker's work queue on a prefix of this test's own, with a short lease."""
    monkeypatch.setenv("TENANTDB_KEY_PREFIX", key_prefix)
    monkeypatch.setenv("TENANTDB_REDIS_URL", REDIS_URL)
    monkeypatch.setenv("TENANTDB_LOCK_TTL_SECONDS", str(LEASE))
    load_settings.cache_clear()
    runtime.workqueue.cache_clear()
    client = redis.Redis.from_url(REDIS_URL)
    yield WorkQueue(client, lambda key: None, prefix=key_prefix, lock_ttl=LEASE)
    load_settings.cache_clear()
    runtime.workqueue.cache_clear()
    for key in client.scan_iter(match=f"{key_prefix}*"):
        client.delete(key)


def test_an_entry_that_started_and_failed_leaves_its_order_to_the_sweep(queue: WorkQueue) -> None:
    holds = StepHolds()
    assert queue.mark_pending(ORDER, 0)
    holds.received(RECONCILE_ORDER, [str(ORDER)], 0)
    # Held: renewed past several leases while the message waits in the worker.
    time.sleep(LEASE * 3)
    assert queue.is_pending(ORDER), "a held entry's mark runs out while it waits"
    # The task starts and fails before its pass begins: the mark stays behind it.
    holds.started(RECONCILE_ORDER, [str(ORDER)])
    wait_for(lambda: not queue.is_pending(ORDER), LEASE * 4, "the mark to run out")
    swept = wait_for(queue.sweep_orphans, LEASE * 4, "the sweep to hand the order back")
    assert swept == [ORDER]


def test_a_started_entry_of_another_order_keeps_this_ones_hold(queue: WorkQueue) -> None:
    holds = StepHolds()
    other = OrderKey.parse("mariadbdatabase/tenant-a/other")
    for key in (ORDER, other):
        assert queue.mark_pending(key, 0)
        holds.received(RECONCILE_ORDER, [str(key)], 0)
    holds.started(RECONCILE_ORDER, [str(other)])
    time.sleep(LEASE * 3)
    assert queue.is_pending(ORDER), "the order still waiting lost its hold"
    assert not queue.is_pending(other), "the started entry kept its hold"


def test_a_step_received_again_after_its_hold_was_let_go_is_held_again(queue: WorkQueue) -> None:
    # The broker connection was lost: the worker let go of its holds, and the message, put back,
    # reaches a worker again while its fence still says "held". It must be held again, or the
    # order waits for the hand-over's lease with nobody renewing it.
    holds = StepHolds()
    lease = queue.acquire(ORDER)
    assert lease is not None
    waiting = queue.hand_over(lease, ready_fence(2, 0), queue.lock_ttl_ms)
    assert waiting is not None
    step = ("tenantdb.mariadbdatabase.provision.role", [str(ORDER), waiting.name, 2], 0)
    holds.received(*step)
    assert holds.let_go() == 1
    holds.received(*step)
    time.sleep(LEASE * 3)
    assert queue.is_locked(ORDER), "the step received again was not held again"
    assert queue.find(ORDER, waiting.name) is not None
    assert holds.let_go() == 1
