"""Beat against the real Redis: an error in mid-sweep loses no key, and never ends beat."""

from __future__ import annotations

import contextlib
import threading

import redis
from kombu.exceptions import OperationalError

from tenantdb.adapters.workqueue import WorkQueue
from tenantdb.core.keys import OrderKey
from tenantdb.core.schedule import Timetable
from workers.beat import CLAIM_RECOVERY, run_beat, sweep_once

KEYS = [OrderKey("probe", "ns", f"order-{i}") for i in range(12)]


class FlakyBroker:
    """A publisher that fails on chosen calls, like a broker connection that drops."""

    def __init__(self, fail_on: set[int]) -> None:
        self.calls = 0
        self.fail_on = fail_on
        self.published: list[OrderKey] = []

    def __call__(self, key: OrderKey) -> None:
        self.calls += 1
        if self.calls in self.fail_on:
            raise OperationalError("connection to the broker was lost")
        self.published.append(key)


def _queue(client: redis.Redis, prefix: str, broker: FlakyBroker) -> WorkQueue:
    return WorkQueue(client, broker, prefix=prefix)


def test_a_publish_error_mid_sweep_leaves_the_rest_due(
    real_redis: redis.Redis, key_prefix: str
) -> None:
    broker = FlakyBroker(fail_on={5})
    queue = _queue(real_redis, key_prefix, broker)
    for i, key in enumerate(KEYS):
        queue.schedule(key, 1_000.0 + i)
    try:
        sweep_once(queue, 5_000.0, batch=4)
    except OperationalError:
        pass
    else:
        raise AssertionError("the broker error did not reach the sweep")
    assert broker.published == KEYS[:4]
    still_due = [key for key in KEYS if queue.due_at(key) is not None]
    assert still_due == KEYS[4:], "a key whose enqueue failed must stay due"
    for key in KEYS[4:]:
        queue.clear_pending(key)
    sweep_once(queue, 5_000.0, batch=4)
    assert sorted(broker.published) == sorted(KEYS)
    assert queue.due_count() == 0


def test_a_refresh_entry_survives_a_failed_enqueue(
    real_redis: redis.Redis, key_prefix: str
) -> None:
    broker = FlakyBroker(fail_on={1})
    queue = _queue(real_redis, key_prefix, broker)
    queue.schedule(KEYS[0], 1_000.0, Timetable.REFRESH)
    with contextlib.suppress(OperationalError):
        sweep_once(queue, 5_000.0, refresh_cycle=1.0, interval=1.0)
    assert queue.due_at(KEYS[0], Timetable.REFRESH) == 5000.0, "still due, as of the sweep"
    sweep_once(queue, 5_000.0, refresh_cycle=1.0, interval=1.0)
    assert broker.published == [KEYS[0]]
    assert queue.due_at(KEYS[0], Timetable.REFRESH) is None


def test_beat_sweeps_on_after_redis_errors(real_redis: redis.Redis, key_prefix: str) -> None:
    broker = FlakyBroker(fail_on=set())
    queue = _queue(real_redis, key_prefix, broker)
    queue.schedule(KEYS[0], 1_000.0)
    real_count = queue.due_count
    failures = {"left": 2}

    def failing_count(table: Timetable = Timetable.DUE) -> int:
        if failures["left"]:
            failures["left"] -= 1
            raise redis.ConnectionError("Connection refused")
        return real_count(table)

    queue.due_count = failing_count  # type: ignore[method-assign]
    stop = threading.Event()
    beat = threading.Thread(target=run_beat, args=(queue, stop), kwargs={"interval": 0.05})
    beat.start()
    try:
        deadline = threading.Event()
        for _ in range(100):
            if broker.published:
                break
            deadline.wait(0.05)
    finally:
        stop.set()
        beat.join(timeout=5)
    assert not beat.is_alive()
    assert failures["left"] == 0, "the errors were raised"
    assert broker.published == [KEYS[0]], "beat swept again after the errors"


def test_a_come_back_written_during_the_sweep_is_kept(
    real_redis: redis.Redis, key_prefix: str
) -> None:
    queue: WorkQueue

    def publish(key: OrderKey) -> None:
        # The pass runs at once and asks to come back later (an incomplete pass adds its own).
        queue.clear_pending(key)
        queue.schedule(key, 9_000.0)

    queue = WorkQueue(real_redis, publish, prefix=key_prefix)
    queue.schedule(KEYS[0], 1_000.0)
    sweep_once(queue, 5_000.0)
    assert queue.due_at(KEYS[0]) == 9000.0


def test_the_claims_of_a_beat_that_died_come_back(real_redis: redis.Redis, key_prefix: str) -> None:
    broker = FlakyBroker(fail_on=set())
    queue = _queue(real_redis, key_prefix, broker)
    queue.schedule(KEYS[0], 1_000.0)
    assert [c.key for c in queue.claim_due(5_000.0)] == [KEYS[0]]  # ... and the sweeper died here
    sweep_once(queue, 5_030.0)
    assert broker.published == [], "a fresh claim may still be in its sweep"
    sweep_once(queue, 5_000.0 + CLAIM_RECOVERY + 1)
    assert broker.published == [KEYS[0]]
    assert queue.stale_claims(10_000.0) == [], "an enqueued claim is released"


def test_a_new_leader_enqueues_a_dead_sweeps_claims_at_once_past_its_pending_mark(
    real_redis: redis.Redis, key_prefix: str
) -> None:
    broker = FlakyBroker(fail_on=set())
    queue = _queue(real_redis, key_prefix, broker)
    queue.schedule(KEYS[0], 1_000.0)
    queue.schedule(KEYS[1], 1_000.0)
    assert sorted(c.key for c in queue.claim_due(2_000.0)) == sorted(KEYS[:2])
    # The dead sweep had set KEYS[0]'s pending mark and died before it published.
    real_redis.set(f"{key_prefix}pending:{KEYS[0]}", "1", ex=300)

    stop = threading.Event()
    beat = threading.Thread(target=run_beat, args=(queue, stop), kwargs={"interval": 0.05})
    beat.start()
    try:
        deadline = threading.Event()
        for _ in range(100):
            if sorted(broker.published) == sorted(KEYS[:2]):
                break
            deadline.wait(0.05)
    finally:
        stop.set()
        beat.join(timeout=5)
    assert sorted(broker.published) == sorted(KEYS[:2]), "well before CLAIM_RECOVERY"
    assert queue.stale_claims(10_000_000_000.0) == []
