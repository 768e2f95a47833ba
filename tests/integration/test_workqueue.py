"""The work-queue primitives against the real Redis (and fakeredis, where it speeds things up).

Each test states one guarantee of the work queue (`tenantdb.adapters.workqueue`) from the point of
view of someone running tenantdb: passes never overlap, no event is lost, a burst costs at most two
passes, a pass that lost its lease never writes, and due keys pop exactly once.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import fakeredis
import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tenantdb.adapters.workqueue import (
    PUBLISH_RETRY_SECONDS,
    WRITES_TTL,
    Claim,
    Claimed,
    Lease,
    LeaseLostError,
    Release,
    Spacing,
    Start,
    WorkQueue,
    ready_fence,
)
from tenantdb.adapters.workqueue.base import SCRIPTS
from tenantdb.adapters.workqueue.scripts import source
from tenantdb.core.keys import OrderKey
from tenantdb.core.schedule import Timetable
from tests.conftest import REDIS_URL
from tests.support import wait_for

KEY = OrderKey.parse("probe/tenant-a/order-1")


def _cleanup(client: redis.Redis, prefix: str) -> None:
    for name in client.scan_iter(match=f"{prefix}*", count=1000):
        client.delete(name)


@pytest.fixture(params=["real-redis", "fakeredis"])
def client(request: pytest.FixtureRequest, real_redis: redis.Redis) -> redis.Redis:
    """The real Redis, or a fakeredis server with Lua, for the same tests."""
    if request.param == "real-redis":
        return real_redis
    return fakeredis.FakeRedis()


def _queue(
    client: redis.Redis, prefix: str, published: list[OrderKey] | None = None, **kw: float
) -> WorkQueue:
    sink = published if published is not None else []
    return WorkQueue(client, sink.append, prefix=prefix, **kw)  # type: ignore[arg-type]


# -- enqueue ---------------------------------------------------------------------------------------


def test_enqueue_publishes_once_until_the_pass_starts(client: redis.Redis, key_prefix: str) -> None:
    published: list[OrderKey] = []
    queue = _queue(client, key_prefix, published)
    assert queue.enqueue(KEY)
    assert not queue.enqueue(KEY)
    assert published == [KEY]
    queue.clear_pending(KEY)
    assert queue.enqueue(KEY)
    assert published == [KEY, KEY]


def test_force_publishes_even_when_pending(client: redis.Redis, key_prefix: str) -> None:
    published: list[OrderKey] = []
    queue = _queue(client, key_prefix, published)
    queue.enqueue(KEY)
    assert queue.enqueue(KEY, force=True)
    assert published == [KEY, KEY]


def _two_priorities(
    client: redis.Redis, prefix: str
) -> tuple[WorkQueue, list[OrderKey], list[OrderKey]]:
    """A work queue whose events' and refreshes' publishes are recorded apart."""
    events: list[OrderKey] = []
    refreshes: list[OrderKey] = []
    queue = WorkQueue(client, events.append, publish_refresh=refreshes.append, prefix=prefix)
    return queue, events, refreshes


def test_a_refresh_goes_behind_and_an_event_after_it_is_published_ahead(
    client: redis.Redis, key_prefix: str
) -> None:
    queue, events, refreshes = _two_priorities(client, key_prefix)
    assert queue.enqueue(KEY, refresh=True)
    assert (events, refreshes) == ([], [KEY]), "the refresh is published at its own priority"
    assert not queue.enqueue(KEY, refresh=True), "a second refresh finds it queued"
    assert queue.enqueue(KEY), "an event does not wait behind the refresh's message"
    assert (events, refreshes) == ([KEY], [KEY])
    assert not queue.enqueue(KEY), "the event's own message is queued now"
    assert not queue.enqueue(KEY, refresh=True)
    assert (events, refreshes) == ([KEY], [KEY])
    start, lease = queue.begin(KEY)
    assert start is Start.LEASED
    assert lease is not None
    assert queue.release(lease) is Release.CLEAN
    start, _ = queue.begin(KEY)
    assert start is Start.STALE, "the refresh's message, when its turn comes, finds it all done"


def test_an_event_waits_for_a_refresh_a_worker_already_holds(
    client: redis.Redis, key_prefix: str
) -> None:
    queue, events, _ = _two_priorities(client, key_prefix)
    assert queue.enqueue(KEY, refresh=True)
    assert queue.hold_pending(KEY), "a worker received the refresh and is about to run it"
    assert not queue.enqueue(KEY), "its pass will cover the event: no second message"
    assert events == []


def test_a_forced_refresh_is_published_at_the_refreshs_priority(
    client: redis.Redis, key_prefix: str
) -> None:
    queue, events, refreshes = _two_priorities(client, key_prefix)
    assert queue.enqueue(KEY, refresh=True)
    assert queue.enqueue(KEY, force=True, refresh=True)
    assert (events, refreshes) == ([], [KEY, KEY])
    assert queue.enqueue(KEY), "and an event still goes ahead of both"
    assert events == [KEY]


def test_a_refresh_waiting_behind_other_messages_is_not_taken_for_lost(
    client: redis.Redis, key_prefix: str
) -> None:
    refreshes: list[OrderKey] = []
    queue = WorkQueue(
        client,
        lambda _: None,
        publish_refresh=refreshes.append,
        prefix=key_prefix,
        lock_ttl=0.2,
        pending_ttl=1,
    )
    assert queue.enqueue(KEY, refresh=True)
    waiting = queue.keys.broker_lists("reconcile")[-1]
    client.lpush(waiting, "the refresh's message, behind others")
    time.sleep(1.5)  # longer than an event's mark lives, and a lease
    assert queue.sweep_orphans() == [], "its message waits in the queue"
    assert queue.is_pending(KEY)
    assert refreshes == [KEY]
    client.delete(waiting)
    time.sleep(1.3)
    assert queue.sweep_orphans() == [KEY], "the queue is empty: the message was lost"


def test_a_failed_publish_leaves_no_pending_mark(client: redis.Redis, key_prefix: str) -> None:
    def broken(_: OrderKey) -> None:
        raise ConnectionError("broker down")

    queue = WorkQueue(client, broken, prefix=key_prefix)
    with pytest.raises(ConnectionError):
        queue.enqueue(KEY)
    assert not queue.is_pending(KEY)


def test_a_failed_publish_leaves_the_key_for_the_sweep_to_retry(
    client: redis.Redis, key_prefix: str
) -> None:
    published: list[OrderKey] = []
    down = [True]

    def flaky(key: OrderKey) -> None:
        if down[0]:
            raise ConnectionError("broker down")
        published.append(key)

    queue = WorkQueue(client, flaky, prefix=key_prefix)
    with pytest.raises(ConnectionError):
        queue.enqueue(KEY)
    due = client.zscore(queue.keys.dirty, str(KEY))
    assert due is not None, "the event is not forgotten"
    wait_ms = due - _server_ms(client)
    assert 0 < wait_ms <= PUBLISH_RETRY_SECONDS * 1000, "the sweep tries again soon, not at once"
    down[0] = False
    client.zadd(queue.keys.dirty, {str(KEY): 0})  # the retry's time has come
    assert queue.sweep_orphans() == [KEY]
    assert published == [KEY]


def test_a_sweep_whose_publish_fails_partway_keeps_every_key_not_published(
    client: redis.Redis, key_prefix: str
) -> None:
    keys = [OrderKey.parse(f"probe/tenant-a/swept-{i}") for i in range(5)]
    published: list[OrderKey] = []

    def third_fails(key: OrderKey) -> None:
        if len(published) == 2:
            raise ConnectionError("broker down")
        published.append(key)

    queue = WorkQueue(client, third_fails, prefix=key_prefix)
    client.zadd(queue.keys.dirty, {str(k): 0 for k in keys})
    with pytest.raises(ConnectionError):
        queue.sweep_orphans()
    assert published == keys[:2]
    assert all(queue.is_pending(k) for k in published), "those two have their messages"
    left = keys[2:]  # the key whose publish failed and the two after it
    assert not any(queue.is_pending(k) for k in left)
    assert all(client.zscore(queue.keys.dirty, str(k)) is not None for k in left)

    published.clear()
    client.zadd(queue.keys.dirty, {str(k): 0 for k in left})  # their retry's time has come
    queue.publish = published.append
    assert queue.sweep_orphans() == left
    assert published == left


def _server_ms(client: redis.Redis) -> float:
    seconds, micros = client.time()
    return seconds * 1000 + micros / 1000


def test_a_redis_that_lost_acknowledged_enqueues_is_noticed(
    client: redis.Redis, key_prefix: str
) -> None:
    queue = _queue(client, key_prefix)
    other = _queue(client, key_prefix)  # another process enqueuing too
    for i in range(3):
        queue.enqueue(OrderKey.parse(f"probe/tenant-a/counted-{i}"))
    other.enqueue(KEY)
    assert queue.rolled_back() is None, "writes by others are no loss"
    count = queue.keys.writes(queue.writer)
    snapshot = int(client.get(count) or 0)
    queue.enqueue(OrderKey.parse("probe/tenant-a/in-the-lost-second"))
    client.set(count, snapshot)  # Redis comes back from a snapshot a write behind
    # Others enqueue before the next look, as beat and the workers do once Redis is back.
    for i in range(3):
        other.enqueue(OrderKey.parse(f"probe/tenant-a/after-the-loss-{i}"))
    assert queue.rolled_back() == (snapshot + 1, snapshot)
    assert queue.rolled_back() is None, "a loss is told once"
    client.delete(count)  # a Redis that lost everything
    assert queue.rolled_back() == (snapshot, 0)


def test_a_loss_is_noticed_though_the_process_enqueued_again_before_it_looked(
    client: redis.Redis, key_prefix: str
) -> None:
    queue = _queue(client, key_prefix)
    queue.enqueue(KEY)
    count = queue.keys.writes(queue.writer)
    snapshot = int(client.get(count) or 0)
    queue.enqueue(OrderKey.parse("probe/tenant-a/in-the-lost-second"))
    queue.enqueue(OrderKey.parse("probe/tenant-a/in-the-lost-second-too"))
    client.set(count, snapshot)  # two enqueues lost
    queue.enqueue(OrderKey.parse("probe/tenant-a/after-the-loss"))  # counts on from the snapshot
    assert queue.rolled_back() == (snapshot + 2, snapshot)
    assert queue.rolled_back() is None, "a loss is told once"
    queue.enqueue(OrderKey.parse("probe/tenant-a/later"))
    assert queue.rolled_back() is None, "the count goes on from where the loss left it"


def test_enqueues_from_many_threads_while_the_count_is_looked_at_are_no_loss(
    client: redis.Redis, key_prefix: str
) -> None:
    queue = _queue(client, key_prefix)
    stop = threading.Event()
    told: list[tuple[int, int]] = []

    def look() -> None:
        while not stop.is_set():
            found = queue.rolled_back()
            if found is not None:
                told.append(found)

    def enqueue(n: int) -> None:
        for i in range(150):
            queue.enqueue(OrderKey.parse(f"probe/tenant-a/thread-{n}-{i}"))

    looker = threading.Thread(target=look)
    looker.start()
    threads = [threading.Thread(target=enqueue, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stop.set()
    looker.join()
    assert int(client.get(queue.keys.writes(queue.writer)) or 0) == 900
    assert told == [], "an enqueue racing a look was taken for a loss"
    assert queue.rolled_back() is None


def test_a_count_of_enqueues_outlives_a_quiet_week_only_while_it_is_looked_at(
    client: redis.Redis, key_prefix: str
) -> None:
    queue = _queue(client, key_prefix)
    queue.enqueue(KEY)
    count = queue.keys.writes(queue.writer)
    assert 0 < client.ttl(count) <= WRITES_TTL, "a gone process's count does not stay for ever"
    client.expire(count, 5)
    assert queue.rolled_back() is None
    assert client.ttl(count) > 5, "a look keeps a quiet process's count"


# -- (a) no two holders ----------------------------------------------------------------------------


def _contend(prefix: str, rounds: int, barrier: multiprocessing.synchronize.Barrier) -> None:
    client = redis.Redis.from_url(REDIS_URL)
    queue = WorkQueue(client, lambda _: None, prefix=prefix, lock_ttl=10)
    barrier.wait()
    done = 0
    while done < rounds:
        lease = queue.acquire(KEY)
        if lease is None:
            continue
        # An independent witness: a second holder would find the marker already set.
        if not client.set(f"{prefix}holder", "x", nx=True):
            client.incr(f"{prefix}overlaps")
        client.incr(f"{prefix}passes")
        client.delete(f"{prefix}holder")
        assert queue.release(lease) is not Release.LOST
        done += 1


@pytest.mark.slow
def test_eight_processes_never_hold_one_lock_at_once(
    real_redis: redis.Redis, key_prefix: str
) -> None:
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(8)
    rounds = 40
    procs = [ctx.Process(target=_contend, args=(key_prefix, rounds, barrier)) for _ in range(8)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0
    assert int(real_redis.get(f"{key_prefix}passes") or 0) == 8 * rounds
    assert real_redis.get(f"{key_prefix}overlaps") is None


# -- (b) no lost event -----------------------------------------------------------------------------


@dataclass
class _World:
    """A deterministic model of two workers running the pass protocol, driven step by step."""

    queue: WorkQueue
    messages: list[OrderKey]
    clock: int = 0
    last_event: int = -1
    pass_begins: list[int] = field(default_factory=list)
    pass_reads: list[int] = field(default_factory=list)
    active: list[Iterator[None]] = field(default_factory=list)

    def event(self) -> None:
        self.clock += 1
        self.last_event = self.clock
        self.queue.enqueue(KEY)

    def start_worker(self) -> None:
        self.active.append(self._protocol(self.messages.pop(0)))

    def _protocol(self, key: OrderKey) -> Iterator[None]:
        yield  # the message is in a worker's hands; the pass has not begun
        _, lease = self.queue.begin(key)
        if lease is not None:
            self.clock += 1
            self.pass_begins.append(self.clock)
        yield
        if lease is None:
            return
        self.clock += 1
        self.pass_reads.append(self.clock)  # the pass reads the order's state now
        yield
        self.queue.release(lease)

    def step(self, index: int) -> None:
        worker = self.active[index % len(self.active)]
        if next(worker, StopIteration) is StopIteration:
            self.active.remove(worker)

    def drain(self) -> None:
        while self.messages or self.active:
            if self.messages and len(self.active) < 2:
                self.start_worker()
            else:
                self.step(0)


_ACTIONS = st.lists(
    st.tuples(st.sampled_from(["event", "start", "step"]), st.integers(0, 1)),
    min_size=1,
    max_size=40,
)


def _run_interleaving(client: redis.Redis, prefix: str, actions: list[tuple[str, int]]) -> None:
    messages: list[OrderKey] = []
    world = _World(_queue(client, prefix, messages), messages)
    world.event()
    for action, index in actions:
        if action == "event":
            world.event()
        elif action == "start" and messages and len(world.active) < 2:
            world.start_worker()
        elif action == "step" and world.active:
            world.step(index)
    world.drain()
    assert world.pass_reads, "no pass ran at all"
    assert max(world.pass_reads) > world.last_event, (
        f"last event at {world.last_event} but the last pass read at {max(world.pass_reads)}"
    )
    begun_after = [begin for begin in world.pass_begins if begin > world.last_event]
    assert len(begun_after) <= 1, f"redundant passes began after the last event: {begun_after}"
    _cleanup(client, prefix)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(actions=_ACTIONS, seed=st.integers(0, 2**32))
def test_no_event_is_lost_on_fakeredis(actions: list[tuple[str, int]], seed: int) -> None:
    _run_interleaving(fakeredis.FakeRedis(), f"tenantdb-test-{seed}:", actions)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(actions=_ACTIONS, seed=st.integers(0, 2**32))
def test_no_event_is_lost_on_real_redis(actions: list[tuple[str, int]], seed: int) -> None:
    client = redis.Redis.from_url(REDIS_URL)
    try:
        _run_interleaving(client, f"tenantdb-test-h{seed}:", actions)
    finally:
        client.close()


# -- (c) a burst costs at most two passes ----------------------------------------------------------


def test_a_thousand_enqueues_during_a_pass_cost_one_more_pass(
    client: redis.Redis, key_prefix: str
) -> None:
    messages: list[OrderKey] = []
    queue = _queue(client, key_prefix, messages)
    passes = 0

    def run_message() -> None:
        nonlocal passes
        key = messages.pop(0)
        _, lease = queue.begin(key)
        if lease is None:
            return
        passes += 1
        if passes == 1:
            for _ in range(1000):
                queue.enqueue(KEY)
                # Whatever gets published meanwhile is taken by another worker at once.
                while messages:
                    run_message()
        queue.release(lease)

    queue.enqueue(KEY)
    while messages:
        run_message()
    assert passes == 2


# -- (d) a lost lease stops the step ---------------------------------------------------------------


def test_an_expired_lease_stops_the_step_before_its_write(
    client: redis.Redis, key_prefix: str
) -> None:
    queue = _queue(client, key_prefix, lock_ttl=0.2)
    lease = queue.acquire(KEY)
    assert lease is not None
    writes: list[str] = []
    # A heartbeat that never fires models a step stalled past its lease (a long GC pause).
    with queue.heartbeat(lease, interval=3600) as guard:
        wait_for(lambda: not queue.holds(lease), seconds=5)
        assert queue.acquire(KEY) is not None, "another pass takes the expired lock"

        def step() -> None:
            guard.check()
            writes.append("status")

        with pytest.raises(LeaseLostError, match="stopping before the next write"):
            step()
    assert writes == []
    assert guard.lost
    assert queue.release(lease) is Release.LOST


def test_the_heartbeat_keeps_a_running_step_leased(client: redis.Redis, key_prefix: str) -> None:
    queue = _queue(client, key_prefix, lock_ttl=0.3)
    lease = queue.acquire(KEY)
    assert lease is not None
    with queue.heartbeat(lease, interval=0.05) as guard:
        # Watch the lease for several TTLs; it must never lapse.
        deadline = time.monotonic() + 1.2
        while time.monotonic() < deadline:
            assert queue.holds(lease)
            threading.Event().wait(0.05)
        guard.check()
    assert queue.release(lease) is Release.CLEAN


def test_an_event_during_a_pass_brings_exactly_one_more_pass(
    client: redis.Redis, key_prefix: str
) -> None:
    published: list[OrderKey] = []
    queue = _queue(client, key_prefix, published)
    queue.enqueue(KEY)
    start, lease = queue.begin(published.pop())
    assert start is Start.LEASED
    assert lease is not None
    # An event while the pass runs costs no message that could only find the lock busy...
    assert not queue.enqueue(KEY)
    assert published == []
    # ...and no event is lost: the release asks for the next pass itself.
    assert queue.release(lease) is Release.DIRTY
    assert published == [KEY]
    start, second = queue.begin(published.pop())
    assert start is Start.LEASED
    assert second is not None
    assert queue.release(second) is Release.CLEAN
    assert published == []


def _spaced_queue(
    client: redis.Redis, prefix: str
) -> tuple[WorkQueue, list[OrderKey], list[tuple[OrderKey, float]]]:
    """A work queue that spaces a key's passes from its third busy pass in a row, by 2 s, with
    ``KEY`` enqueued; its publishes now and its publishes for later are recorded apart."""
    published: list[OrderKey] = []
    later: list[tuple[OrderKey, float]] = []
    queue = WorkQueue(
        client,
        published.append,
        prefix=prefix,
        spacing=Spacing(3, 2.0, lambda key, seconds: later.append((key, seconds))),
    )
    queue.enqueue(KEY)
    return queue, published, later


def _busy_pass(queue: WorkQueue, key: OrderKey) -> Release:
    """Run one pass of ``key`` during which an event arrives; the release's answer."""
    start, lease = queue.begin(key)
    assert start is Start.LEASED
    assert lease is not None
    assert not queue.enqueue(key)
    return queue.release(lease)


def test_a_key_busy_pass_after_pass_waits_before_its_next_pass(
    client: redis.Redis, key_prefix: str
) -> None:
    queue, published, later = _spaced_queue(client, key_prefix)
    published.clear()
    for _ in range(2):
        assert _busy_pass(queue, KEY) is Release.DIRTY
        assert published == [KEY], "the first busy passes are followed at once"
        assert later == []
        published.clear()

    assert _busy_pass(queue, KEY) is Release.DIRTY
    assert published == []
    assert later == [(KEY, 2.0)], "the third busy pass in a row is followed after the wait"
    # The pending pass covers the wait: events meanwhile join it, with no message of their own.
    assert not queue.enqueue(KEY)
    assert not queue.enqueue(KEY)
    assert published == []
    pending_ms = client.pttl(queue.keys.pending(KEY))
    assert pending_ms > 2000 + (queue.pending_ttl - 1) * 1000
    # Should the message be lost, the sweep looks past the wait, not before it ends.
    look = client.zscore(queue.keys.dirty, str(KEY))
    assert look is not None
    assert look / 1000 > time.time() + 2.0

    later.clear()
    assert _busy_pass(queue, KEY) is Release.DIRTY
    assert later == [(KEY, 2.0)], "the key stays busy: every pass waits"


def test_a_pass_that_ends_with_nothing_new_ends_the_busy_streak(
    client: redis.Redis, key_prefix: str
) -> None:
    queue, published, later = _spaced_queue(client, key_prefix)
    for _ in range(2):
        assert _busy_pass(queue, KEY) is Release.DIRTY
    _, lease = queue.begin(KEY)
    assert lease is not None
    assert queue.release(lease) is Release.CLEAN

    published.clear()
    queue.enqueue(KEY)
    assert published == [KEY], "an event after a quiet end starts a pass at once"
    for _ in range(2):
        published.clear()
        assert _busy_pass(queue, KEY) is Release.DIRTY
        assert published == [KEY]
    assert later == [], "the streak counted again from its start"


def test_without_spacing_every_busy_pass_is_followed_at_once(
    client: redis.Redis, key_prefix: str
) -> None:
    published: list[OrderKey] = []
    queue = _queue(client, key_prefix, published)
    queue.enqueue(KEY)
    for _ in range(10):
        published.clear()
        assert _busy_pass(queue, KEY) is Release.DIRTY
        assert published == [KEY]


def test_the_last_pass_of_each_key_is_read_in_order_across_pipelines(
    client: redis.Redis, key_prefix: str
) -> None:
    queue = _queue(client, key_prefix)
    keys = [OrderKey.parse(f"probe/tenant-a/order-{n}") for n in range(5)]
    for n, key in enumerate(keys):
        if n != 2:
            queue.record_pass(key, f"reason-{n}", 1000.0 + n)
    expected = [None if n == 2 else (1000.0 + n, f"reason-{n}") for n in range(5)]
    assert queue.last_passes(keys, batch=2) == expected
    assert [queue.last_pass(key) for key in keys] == expected
    assert queue.last_passes([]) == []


def test_a_message_a_completed_pass_made_redundant_ends_as_stale(
    client: redis.Redis, key_prefix: str
) -> None:
    published: list[OrderKey] = []
    queue = _queue(client, key_prefix, published)
    queue.enqueue(KEY)
    queue.enqueue(KEY, force=True)  # two messages for the same event
    _, lease = queue.begin(published.pop(0))
    assert lease is not None
    assert queue.release(lease) is Release.CLEAN
    assert queue.begin(published.pop(0)) == (Start.STALE, None)


def test_work_a_pass_left_after_redis_lost_its_data_still_gets_a_pass(
    client: redis.Redis, key_prefix: str
) -> None:
    published: list[OrderKey] = []
    queue = _queue(client, key_prefix, published)
    queue.enqueue(KEY)
    _, lease = queue.begin(published.pop())
    assert lease is not None
    _cleanup(client, key_prefix)  # Redis restarted without its data: the lease and counters go
    assert queue.release(lease) is Release.LOST
    assert queue.request_pass(KEY)  # what a pass that lost its lease does
    start, again = queue.begin(published.pop())
    assert start is Start.LEASED, "the requested pass must run, not end as stale"
    assert again is not None


def test_a_pass_asked_for_while_another_holds_the_key_follows_its_release(
    client: redis.Redis, key_prefix: str
) -> None:
    published: list[OrderKey] = []
    queue = _queue(client, key_prefix, published)
    queue.enqueue(KEY)
    _, lease = queue.begin(published.pop())
    assert lease is not None
    assert not queue.request_pass(KEY), "no message can only find the lock busy"
    assert queue.release(lease) is Release.DIRTY
    start, _ = queue.begin(published.pop())
    assert start is Start.LEASED


def test_an_entry_held_by_a_worker_that_died_is_published_again(
    client: redis.Redis, key_prefix: str
) -> None:
    published: list[OrderKey] = []
    queue = _queue(client, key_prefix, published, lock_ttl=0.2)
    assert queue.enqueue(KEY)
    assert queue.hold_pending(KEY), "a worker received the entry and holds its mark"
    assert 0 < client.pttl(queue.keys.pending(KEY)) <= 200
    assert queue.enqueue(KEY) is False, "while held, an event is deduplicated as ever"
    time.sleep(1.3)  # the worker died: no renewal, the mark ran out, the dirty mark is due
    assert queue.sweep_orphans() == [KEY]
    assert published == [KEY, KEY]
    _, lease = queue.begin(KEY)
    assert lease is not None
    assert not queue.hold_pending(KEY), "the pass began: the holder lets go"


def test_an_entry_a_worker_popped_and_died_with_is_published_again_a_lease_later(
    client: redis.Redis, key_prefix: str
) -> None:
    published: list[OrderKey] = []
    queue = _queue(client, key_prefix, published, lock_ttl=0.3)  # pending marks last 300 s
    assert queue.enqueue(KEY)
    # The message left the queue for a worker that died before it could hold it: the queue is
    # empty and the mark is neither held nor about to run out.
    assert queue.sweep_orphans() == [], "not before a lease has passed"
    wait_for(lambda: queue.sweep_orphans() == [KEY], seconds=5)
    assert published == [KEY, KEY], "published again, long before the mark would run out"
    start, lease = queue.begin(published.pop())
    assert start is Start.LEASED
    assert lease is not None


def test_an_entry_behind_others_in_its_queue_or_held_is_not_taken_for_lost(
    client: redis.Redis, key_prefix: str
) -> None:
    published: list[OrderKey] = []
    queue = _queue(client, key_prefix, published, lock_ttl=0.3)
    queued, held = KEY, OrderKey.parse("probe/tenant-a/held")
    assert queue.enqueue(queued)
    assert queue.enqueue(held)
    client.rpush(f"{key_prefix}reconcile", "a message before them")
    time.sleep(1.5)  # past a lease and the second after it
    assert queue.hold_pending(held), "a worker holds the second one's message"
    assert queue.sweep_orphans() == [], "the first may still be in the queue, the second is held"
    assert published == [queued, held]
    client.delete(f"{key_prefix}reconcile")  # the first one's message was not in it after all

    def renewed_and_swept() -> list[OrderKey]:
        assert queue.hold_pending(held), "its worker renews the hold"
        return queue.sweep_orphans()

    swept = wait_for(renewed_and_swept, seconds=5)
    assert swept == [queued]
    assert queue.is_pending(held), "a held entry is left to its worker"


def test_a_pending_mark_whose_publisher_died_is_enqueued_once_it_runs_out(
    client: redis.Redis, key_prefix: str
) -> None:
    published: list[OrderKey] = []

    def die(key: OrderKey) -> None:
        raise SystemExit("killed between the mark and the publish")

    queue = WorkQueue(client, die, prefix=key_prefix, pending_ttl=1)
    with pytest.raises(SystemExit):
        queue.enqueue(KEY)
    # A kill, unlike an exception, leaves the mark behind and the key due when the mark runs
    # out: put back what the exception's unmarking changed.
    client.set(queue.keys.pending(KEY), "1", ex=1)
    seconds, micros = client.time()
    client.zadd(queue.keys.dirty, {str(KEY): seconds * 1000 + micros // 1000 + 1000})
    queue.publish = published.append
    assert queue.sweep_orphans() == [], "not before the mark runs out"
    time.sleep(2.1)
    assert queue.sweep_orphans() == [KEY]
    assert published == [KEY]
    start, _ = queue.begin(KEY)
    assert start is Start.LEASED


def test_a_retry_marked_pending_dedupes_events_and_is_swept_if_lost(
    client: redis.Redis, key_prefix: str
) -> None:
    published: list[OrderKey] = []
    queue = _queue(client, key_prefix, published, pending_ttl=1)
    assert queue.mark_pending(KEY, 0.0), "the failed pass's retry is the key's pending pass"
    assert not queue.mark_pending(KEY, 0.0), "a second retry is not published"
    assert queue.enqueue(KEY) is False, "an event meanwhile is deduplicated against it"
    time.sleep(2.1)  # the retry was lost with its worker: the mark ran out
    assert queue.sweep_orphans() == [KEY]
    assert published == [KEY]


def test_a_stale_message_leaves_no_mark_to_bring_another_pass(
    client: redis.Redis, key_prefix: str
) -> None:
    published: list[OrderKey] = []
    queue = _queue(client, key_prefix, published)
    queue.enqueue(KEY)
    queue.enqueue(KEY, force=True)
    _, lease = queue.begin(published.pop(0))
    assert lease is not None
    assert queue.release(lease) is Release.CLEAN
    assert queue.begin(published.pop(0)) == (Start.STALE, None)
    assert client.zscore(queue.keys.dirty, str(KEY)) is None


def test_a_step_held_by_a_worker_that_died_is_swept_within_a_lease(
    client: redis.Redis, key_prefix: str
) -> None:
    published: list[OrderKey] = []
    queue = _queue(client, key_prefix, published, lock_ttl=0.2)
    queue.enqueue(KEY)
    _, lease = queue.begin(published.pop())
    assert lease is not None
    handed = queue.hand_over(lease, ready_fence(1, 0), 60_000)  # the queue wait: a minute
    assert handed is not None
    assert queue.hold(handed), "a worker received the step and holds the pass"
    assert 0 < client.pttl(queue.keys.lock(KEY)) <= 200
    time.sleep(0.4)  # the worker died: no renewal
    assert queue.sweep_orphans() == [KEY]
    assert published == [KEY]
    assert queue.claim(handed, ready_fence(1, 0)) == (Claim.LOST, None), "the late copy ends"


def test_a_failed_pass_does_not_cover_its_events(client: redis.Redis, key_prefix: str) -> None:
    published: list[OrderKey] = []
    queue = _queue(client, key_prefix, published)
    queue.enqueue(KEY)
    _, lease = queue.begin(published.pop())
    assert lease is not None
    assert queue.release(lease, completed=False) is Release.CLEAN
    # The retry of the failed pass still runs: its events are not covered yet.
    start, retry = queue.begin(KEY)
    assert start is Start.LEASED
    assert retry is not None


def test_a_failed_pass_stays_dirty_until_its_retry_is_due(
    client: redis.Redis, key_prefix: str
) -> None:
    published: list[OrderKey] = []
    queue = _queue(client, key_prefix, published)
    queue.enqueue(KEY)
    _, lease = queue.begin(published.pop())
    assert lease is not None
    assert queue.release(lease, completed=False, retry_in=0.3) is Release.CLEAN
    # Its retry is never published (the broker refused it, or the worker died first).
    assert queue.sweep_orphans() == [], "not before the retry is due"
    wait_for(lambda: queue.sweep_orphans() == [KEY], seconds=5)
    assert published == [KEY]
    start, retry = queue.begin(published.pop())
    assert start is Start.LEASED, "the failed pass's events are still not covered"
    assert retry is not None
    assert queue.release(retry) is Release.CLEAN
    assert client.zscore(queue.keys.dirty, str(KEY)) is None, "a completed pass leaves no mark"


def test_a_message_that_finds_the_lock_busy_marks_the_key_dirty(
    client: redis.Redis, key_prefix: str
) -> None:
    published: list[OrderKey] = []
    queue = _queue(client, key_prefix, published)
    queue.enqueue(KEY)
    message = published.pop()
    assert queue.enqueue(KEY, force=True), "a pending message does not hold back a forced one"
    _, lease = queue.begin(message)
    assert lease is not None
    assert queue.begin(published.pop()) == (Start.BUSY, None)
    assert client.zscore(queue.keys.dirty, str(KEY)) is not None
    assert queue.release(lease) is Release.CLEAN, "the forced event came before the pass began"


def test_a_dead_holders_dirty_key_is_swept_after_its_lease(
    client: redis.Redis, key_prefix: str
) -> None:
    published: list[OrderKey] = []
    queue = _queue(client, key_prefix, published, lock_ttl=0.2)
    queue.enqueue(KEY)
    _, dead = queue.begin(published.pop())  # this holder "dies": it never releases
    assert dead is not None
    assert not queue.enqueue(KEY), "the event while the lease runs marks the key dirty only"
    assert queue.sweep_orphans() == []  # the lease still runs: not an orphan yet
    wait_for(lambda: queue.sweep_orphans() == [KEY], seconds=5)
    assert published == [KEY]
    start, lease = queue.begin(published.pop())
    assert start is Start.LEASED, "the events the dead pass saw are still not covered"
    assert lease is not None


# -- (f) a step is fenced --------------------------------------------------------------------------


def _chain_at_step_one(queue: WorkQueue) -> Lease:
    start, lease = queue.begin(KEY)
    assert start is Start.LEASED
    assert lease is not None
    handed = queue.hand_over(lease, ready_fence(1, 0), 60_000)
    assert handed is not None
    return handed


def test_a_copy_of_a_claimed_step_ends_without_the_lease(
    client: redis.Redis, key_prefix: str
) -> None:
    queue = _queue(client, key_prefix)
    queue.enqueue(KEY)
    handed = _chain_at_step_one(queue)
    carried = Lease(KEY, handed.token, handed.started)

    first, running = queue.claim(carried, ready_fence(1, 0))
    copy, none = queue.claim(carried, ready_fence(1, 0))

    assert (first, copy, none) == (Claim.CLAIMED, Claim.MOVED, None)
    assert running is not None
    assert queue.holds(running)
    assert not queue.holds(carried), "the pass's bare token must not pass for the running step"
    # The copy left the key dirty for when the running step's lease ends.
    assert client.zscore(queue.keys.dirty, str(KEY)) is not None


def test_the_next_step_and_a_retry_each_claim_their_own_fence(
    client: redis.Redis, key_prefix: str
) -> None:
    queue = _queue(client, key_prefix)
    queue.enqueue(KEY)
    carried = _chain_at_step_one(queue)
    _, step_one = queue.claim(carried, ready_fence(1, 0))
    assert step_one is not None
    assert queue.hand_over(step_one, ready_fence(1, 1), 60_000) is not None
    assert queue.claim(carried, ready_fence(1, 0))[0] is Claim.MOVED
    claim, retry = queue.claim(carried, ready_fence(1, 1))
    assert claim is Claim.CLAIMED
    assert retry is not None
    assert not queue.extend(step_one), "the failed attempt may no longer renew, so never write"

    assert queue.hand_over(retry, ready_fence(2, 0), 60_000) is not None
    claim, step_two = queue.claim(carried, ready_fence(2, 0))
    assert claim is Claim.CLAIMED
    assert step_two is not None
    assert queue.claim(carried, ready_fence(1, 1))[0] is Claim.MOVED
    assert queue.release(step_two) is Release.CLEAN
    assert not queue.is_locked(KEY)
    assert client.zscore(queue.keys.dirty, str(KEY)) is None


def test_a_step_of_a_pass_whose_lease_is_gone_finds_it_lost(
    client: redis.Redis, key_prefix: str
) -> None:
    queue = _queue(client, key_prefix, lock_ttl=0.2)
    queue.enqueue(KEY)
    _, lease = queue.begin(KEY)
    assert lease is not None
    handed = queue.hand_over(lease, ready_fence(1, 0), 100)
    assert handed is not None
    time.sleep(0.3)
    assert queue.claim(handed, ready_fence(1, 0)) == (Claim.LOST, None)
    assert queue.find(KEY, handed.name) is None


def test_a_pass_is_found_by_its_public_name_at_its_current_fence(
    client: redis.Redis, key_prefix: str
) -> None:
    queue = _queue(client, key_prefix)
    queue.enqueue(KEY)
    carried = _chain_at_step_one(queue)
    _, running = queue.claim(carried, ready_fence(1, 0))
    assert queue.find(KEY, carried.name) == running
    assert carried.token not in carried.name
    assert queue.find(KEY, "0" * 12) is None


def test_a_holder_that_dies_with_no_event_meanwhile_is_swept_too(
    client: redis.Redis, key_prefix: str
) -> None:
    # An entry task killed at its hard time limit, or whose hand-off publish failed: nothing
    # else marked the key, and the pass it began never finished.
    published: list[OrderKey] = []
    queue = _queue(client, key_prefix, published, lock_ttl=0.2)
    queue.enqueue(KEY)
    _, dead = queue.begin(published.pop())
    assert dead is not None
    assert queue.sweep_orphans() == []
    wait_for(lambda: queue.sweep_orphans() == [KEY], seconds=5)
    assert published == [KEY]
    start, lease = queue.begin(published.pop())
    assert start is Start.LEASED
    assert lease is not None
    queue.release(lease)
    assert client.zscore(queue.keys.dirty, str(KEY)) is None, "a release removes the mark"


def test_a_hand_over_whose_next_step_never_runs_is_swept(
    client: redis.Redis, key_prefix: str
) -> None:
    published: list[OrderKey] = []
    queue = _queue(client, key_prefix, published)
    queue.enqueue(KEY)
    _, lease = queue.begin(KEY)
    assert lease is not None
    assert queue.hand_over(lease, ready_fence(1, 0), 200) is not None
    assert queue.sweep_orphans() == []
    time.sleep(0.3)
    assert queue.sweep_orphans() == [KEY]
    assert published == [KEY, KEY]


def _waiting_in(queue: WorkQueue, published: list[OrderKey], fence: str, queue_name: str) -> Lease:
    """A pass handed over to a step whose message waits in ``queue_name`` (its wait recorded)."""
    queue.enqueue(KEY)
    _, lease = queue.begin(published.pop())
    assert lease is not None
    waiting = queue.hand_over(lease, fence, queue.lock_ttl_ms)
    assert waiting is not None
    assert queue.extend_wait(waiting, 600_000, queue_name)
    return waiting


def test_a_step_message_lost_between_queue_and_worker_frees_the_order_within_a_lease(
    client: redis.Redis, key_prefix: str
) -> None:
    # A worker pops the step's message and dies before it holds it: the message is in no queue
    # and held by no one, while the hand-over covered its wait up to the visibility timeout.
    published: list[OrderKey] = []
    queue = _queue(client, key_prefix, published, lock_ttl=0.2)
    waiting = _waiting_in(queue, published, ready_fence(1, 0), "provision")
    assert queue.sweep_lost_waits(["provision"]) == [], "not before a lease has passed"
    time.sleep(0.3)
    assert queue.sweep_orphans() == [], "the wait still covers the lease"
    assert queue.sweep_lost_waits(["provision"]) == [KEY]
    assert published == [KEY], "a new pass is asked for"
    _, fresh = queue.begin(published.pop())
    assert fresh is not None, "the lost pass's lease is gone"
    assert queue.claim(waiting, ready_fence(1, 0)) == (Claim.LOST, None), (
        "the lost message, should it turn up, ends without writing"
    )


def test_a_step_waiting_behind_other_messages_keeps_its_pass(
    client: redis.Redis, key_prefix: str
) -> None:
    published: list[OrderKey] = []
    queue = _queue(client, key_prefix, published, lock_ttl=0.2)
    waiting = _waiting_in(queue, published, ready_fence(2, 0), "delivery")
    client.lpush(f"{key_prefix}delivery", "a message ahead of the step")
    time.sleep(0.3)
    assert queue.sweep_lost_waits(["provision", "delivery"]) == [], "it may be in the queue"
    assert queue.claim(waiting, ready_fence(2, 0))[0] is Claim.CLAIMED
    client.delete(f"{key_prefix}delivery")
    time.sleep(0.3)
    assert queue.sweep_lost_waits(["provision", "delivery"]) == [], "a running step is not lost"
    assert client.zcard(queue.keys.waiting) == 0


def test_a_held_step_is_not_taken_for_lost(client: redis.Redis, key_prefix: str) -> None:
    published: list[OrderKey] = []
    queue = _queue(client, key_prefix, published, lock_ttl=0.2)
    waiting = _waiting_in(queue, published, ready_fence(1, 0), "provision")
    assert queue.hold(waiting), "a worker received the message"
    for _ in range(3):  # renewed past the lease the wait is looked at after
        time.sleep(0.1)
        assert queue.hold(waiting)
    assert queue.sweep_lost_waits(["provision"]) == []
    assert queue.claim(waiting, ready_fence(1, 0))[0] is Claim.CLAIMED


# -- (e) the due-set -------------------------------------------------------------------------------


def test_the_earliest_due_time_wins(client: redis.Redis, key_prefix: str) -> None:
    queue = _queue(client, key_prefix)
    queue.schedule(KEY, 2000.0)
    queue.schedule(KEY, 1000.0)
    queue.schedule(KEY, 3000.0)
    assert queue.due_at(KEY) == 1000.0
    assert queue.claim_due(999.0) == []
    assert queue.claim_due(1000.0) == [Claimed(KEY, 1000.0)]
    assert queue.claim_due(5000.0) == []


@pytest.mark.slow
def test_a_completed_pass_replaces_the_timetable(client: redis.Redis, key_prefix: str) -> None:
    queue = _queue(client, key_prefix)
    queue.schedule(KEY, 1_000.0)
    queue.schedule(KEY, 5_000.0, Timetable.REFRESH)
    queue.replace_timetable(KEY, {Timetable.DUE: None, Timetable.REFRESH: 9_000.0})
    assert queue.due_at(KEY) is None
    assert queue.due_at(KEY, Timetable.REFRESH) == 9_000.0
    assert queue.claim_due(2_000.0) == []


def test_a_claimed_key_leaves_for_good_only_once_released(
    client: redis.Redis, key_prefix: str
) -> None:
    queue = _queue(client, key_prefix)
    other, third = OrderKey("probe", "ns", "other"), OrderKey("probe", "ns", "third")
    for key in (KEY, other, third):
        queue.schedule(key, 1_000.0)
    claimed = queue.claim_due(2_000.0)
    assert sorted(c.key for c in claimed) == sorted([KEY, other, third])
    assert {c.due_at for c in claimed} == {1_000.0}, "each claim says when it was due"
    assert queue.claim_due(2_000.0) == [], "a claimed key is not claimed twice"
    # A pass wrote a later come-back for one key meanwhile; a returned claim (due since it was
    # claimed, at 2000) wins over it, as the earliest time does.
    queue.schedule(other, 5_000.0)
    queue.release_claims([KEY])
    assert queue.return_claims([other]) == 1
    assert queue.due_at(KEY) is None
    assert queue.due_at(other) == 2000.0
    # The third claim's sweep died: it is found once it is old enough.
    assert queue.stale_claims(1_999.0) == []
    assert queue.stale_claims(2_001.0) == [third]


def test_due_keys_are_claimed_exactly_once_under_four_sweepers(
    real_redis: redis.Redis, key_prefix: str
) -> None:
    queue = _queue(real_redis, key_prefix)
    keys = [OrderKey("probe", "ns", f"order-{i}") for i in range(3000)]
    pipe = real_redis.pipeline()
    for i, key in enumerate(keys):
        pipe.zadd(queue.keys.due, {str(key): 1000 + i})
    pipe.execute()
    results: list[list[OrderKey]] = [[] for _ in range(4)]
    start = threading.Barrier(4)

    def claim(slot: int) -> None:
        own = _queue(redis.Redis.from_url(REDIS_URL), key_prefix)
        start.wait()
        while batch := own.claim_due(1e9, batch=25):
            results[slot].extend(c.key for c in batch)

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    claimed = [key for part in results for key in part]
    assert len(claimed) == len(keys)
    assert set(claimed) == set(keys)
    assert sum(1 for part in results if part) > 1, "the sweepers did not actually contend"


# -- own writes ------------------------------------------------------------------------------------


def _secret(version: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "app-db-credentials",
            "namespace": "tenant-a",
            "resourceVersion": version,
            "labels": {"c5c3.io/mariadbdatabase-name": "app-db"},
            "ownerReferences": [
                {"apiVersion": "c5c3.io/v1alpha1", "kind": "MariaDBDatabase", "name": "app-db",
                 "uid": "u", "controller": True}
            ],
        },
    }  # fmt: skip


def test_the_echo_of_an_own_write_wakes_no_order_and_a_later_change_does(
    client: redis.Redis, key_prefix: str
) -> None:
    from tenantdb.adapters.kube import WatchEvent
    from tenantdb.core.served import route_modules
    from watcher.index import SharedIndex
    from watcher.routes import Dispatcher, load_routes, routes_for

    load_routes(route_modules())
    route = next(r for r in routes_for("") if r.kind == "Secret")
    queue = _queue(client, key_prefix)
    sent: list[OrderKey] = []
    dispatcher = Dispatcher(
        route, "", SharedIndex(), sent.append, threading.Event(), is_own_write=queue.is_own_write
    )
    queue.note_written("", _secret("7"), 60_000)

    dispatcher.handle(WatchEvent("ADDED", _secret("7"), "7"))
    assert sent == [], "the event of tenantdb's own write names no order"
    dispatcher.handle(WatchEvent("MODIFIED", {**_secret("8"), "data": {"k": "dg=="}}, "8"))
    assert [str(k) for k in sent] == ["mariadbdatabase/tenant-a/app-db"]
    queue.note_written("edge-1", _secret("9"), 60_000)
    assert not queue.is_own_write("", _secret("9")), "a write on another cluster is another object"


def test_a_period_claim_is_due_once_a_period_and_can_be_taken_as_a_flag(
    client: redis.Redis, key_prefix: str
) -> None:
    queue = _queue(client, key_prefix)
    assert queue.claim_period("verify", KEY, 60_000)
    assert not queue.claim_period("verify", KEY, 60_000)
    queue.release_period("verify", KEY)
    assert queue.claim_period("verify", KEY, 60_000)
    assert not queue.take_period("flag", KEY)
    assert queue.claim_period("flag", KEY, 60_000)
    assert queue.take_period("flag", KEY)
    assert not queue.take_period("flag", KEY)
    assert not queue.claim_period("verify", KEY, 60_000)  # flags are per name


def test_redis_compiles_every_script_of_the_work_queue() -> None:
    client = redis.Redis.from_url(REDIS_URL)
    queue = WorkQueue(client, lambda key: None, prefix="tenantdb-test-scripts:")
    queue.load_scripts()  # SCRIPT LOAD compiles: a script Redis cannot parse raises here
    digests = [hashlib.sha1(source(name).encode()).hexdigest() for name in SCRIPTS]  # noqa: S324
    assert client.script_exists(*digests) == [True] * len(SCRIPTS)
