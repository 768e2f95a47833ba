"""The gauges beat keeps from Redis, against the real Redis and a real Celery publisher.

Orders by kind and Ready reason (recorded by passes, counted by beat), the age of each broker
queue's oldest message, how late beat takes due come-backs, and the series a beat drops when it
stops leading. Every test writes under a key prefix of its own.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest
import redis
from prometheus_client import REGISTRY, generate_latest

import tasks.runtime as runtime
from tenantdb.adapters.celeryapp import build_celery_app, make_publisher
from tenantdb.adapters.readiness import ReadyBook
from tenantdb.adapters.workqueue import Start, WorkQueue
from tenantdb.core.keys import OrderKey
from tenantdb.core.schedule import Timetable
from tenantdb.settings import Settings, load_settings
from tests.support import wait_for
from workers.beat import QueueHeads, export_gauges, run_beat, sweep_once

NOW = 2_000_000_000.0
READY_DB = OrderKey("mariadbdatabase", "team-a", "ready-db")
WAITING_DB = OrderKey("mariadbdatabase", "team-a", "waiting-db", "edge-1")
STUCK_DB = OrderKey("mariadbdatabase", "team-b", "stuck-db")
MYSQL_DB = OrderKey("mysqldatabase", "team-c", "shop")


def _stamp(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def _order(status: str, reason: str, since: float, blocking: str = "") -> dict[str, Any]:
    conditions = [
        {"type": "Ready", "status": status, "reason": reason, "lastTransitionTime": _stamp(since)}
    ]
    if blocking:
        conditions.append({"type": "DatabaseReady", "status": "False", "reason": blocking})
    return {"metadata": {"name": "x"}, "status": {"conditions": conditions}}


def _orders(kind: str, status: str, reason: str) -> float | None:
    return REGISTRY.get_sample_value(
        "tenantdb_orders", {"kind": kind, "status": status, "reason": reason}
    )


def _not_ready(kind: str, reason: str) -> float | None:
    return REGISTRY.get_sample_value(
        "tenantdb_orders_not_ready_seconds", {"kind": kind, "reason": reason}
    )


def _oldest(queue: str) -> float | None:
    return REGISTRY.get_sample_value("tenantdb_oldest_pending_seconds", {"queue": queue})


def _lag(table: str) -> tuple[float, float]:
    labels = {"table": table}
    count = REGISTRY.get_sample_value("tenantdb_refresh_lag_seconds_count", labels) or 0.0
    total = REGISTRY.get_sample_value("tenantdb_refresh_lag_seconds_sum", labels) or 0.0
    return count, total


@pytest.fixture
def published() -> list[OrderKey]:
    return []


@pytest.fixture
def queue(real_redis: redis.Redis, key_prefix: str, published: list[OrderKey]) -> WorkQueue:
    return WorkQueue(real_redis, published.append, prefix=key_prefix)


def test_beat_counts_orders_by_kind_and_ready_reason(
    real_redis: redis.Redis, key_prefix: str, queue: WorkQueue
) -> None:
    book = ReadyBook(real_redis, key_prefix)
    book.record(READY_DB, _order("True", "AllReady", NOW - 5000))
    book.record(WAITING_DB, _order("False", "NotAllReady", NOW - 120, blocking="ClusterNotReady"))
    book.record(STUCK_DB, _order("False", "NotAllReady", NOW - 3600, blocking="ClusterNotReady"))
    book.record(MYSQL_DB, _order("False", "PrimaryUnavailable", NOW - 30))

    export_gauges(queue, now=NOW, heads=QueueHeads())
    assert _orders("mariadbdatabase", "True", "AllReady") == 1
    assert _orders("mariadbdatabase", "False", "ClusterNotReady") == 2
    assert _orders("mysqldatabase", "False", "PrimaryUnavailable") == 1
    assert _not_ready("mariadbdatabase", "ClusterNotReady") == 3600, "the longest of the two"
    assert _not_ready("mysqldatabase", "PrimaryUnavailable") == 30
    assert _not_ready("mariadbdatabase", "AllReady") is None, "a Ready order is not counted"
    page = generate_latest(REGISTRY).decode()
    for key in (READY_DB, WAITING_DB, STUCK_DB, MYSQL_DB):
        assert key.name not in page, "no order's name is ever a label"

    # The stuck order became Ready, the MySQL order is gone: the series follow at the next export.
    book.record(STUCK_DB, _order("True", "AllReady", NOW))
    book.forget(MYSQL_DB)
    export_gauges(queue, now=NOW + 10, heads=QueueHeads())
    assert _orders("mariadbdatabase", "True", "AllReady") == 2
    assert _orders("mariadbdatabase", "False", "ClusterNotReady") == 1
    assert _not_ready("mariadbdatabase", "ClusterNotReady") == 130
    assert _orders("mysqldatabase", "False", "PrimaryUnavailable") is None
    assert _not_ready("mysqldatabase", "PrimaryUnavailable") is None


def test_a_pass_that_finds_its_order_gone_drops_its_ready_state(
    real_redis: redis.Redis, key_prefix: str, queue: WorkQueue, monkeypatch: pytest.MonkeyPatch
) -> None:
    book = ReadyBook(real_redis, key_prefix)
    monkeypatch.setattr(runtime, "ready_book", lambda: book)
    monkeypatch.setenv("TENANTDB_RESYNC_SECONDS", "0")
    load_settings.cache_clear()
    try:
        for key, gone in ((READY_DB, False), (STUCK_DB, True)):
            book.record(key, _order("True", "AllReady", NOW))
            queue.enqueue(key)
            start, lease = queue.begin(key)
            assert start is Start.LEASED
            assert lease is not None
            reason = "Gone" if gone else "AllReady"
            runtime.finish_pass(queue, lease, None, reason=reason, gone=gone)
    finally:
        load_settings.cache_clear()
    assert book.tally(NOW).orders == {("mariadbdatabase", "True", "AllReady"): 1}
    assert real_redis.hkeys(f"{key_prefix}ready") == [str(READY_DB).encode()]


@pytest.fixture
def celery_publish(key_prefix: str) -> Iterator[Any]:
    app = build_celery_app(Settings(key_prefix=key_prefix))
    yield make_publisher(app)
    app.close()


def test_the_oldest_message_of_each_queue_is_aged_from_its_publish(
    real_redis: redis.Redis, key_prefix: str, queue: WorkQueue, celery_publish: Any
) -> None:
    before = time.time()
    celery_publish(READY_DB)
    time.sleep(0.05)
    celery_publish(STUCK_DB)
    after = time.time()
    heads = QueueHeads()

    export_gauges(queue, now=after + 30, heads=heads)
    age = _oldest("reconcile")
    assert age is not None
    assert 30 + 0.05 <= age <= 30 + (after - before) + 0.01, "the first message, not the last"
    for other in ("provision", "delivery", "teardown"):
        assert _oldest(other) == 0, "an empty queue is 0"

    real_redis.rpop(f"{key_prefix}reconcile")  # a worker took the oldest message
    export_gauges(queue, now=after + 30, heads=heads)
    younger = _oldest("reconcile")
    assert younger is not None
    assert younger < age
    real_redis.delete(f"{key_prefix}reconcile")
    export_gauges(queue, now=after + 30, heads=heads)
    assert _oldest("reconcile") == 0


def test_a_refresh_waiting_behind_the_events_counts_in_the_depth_and_the_age(
    real_redis: redis.Redis, key_prefix: str, queue: WorkQueue
) -> None:
    app = build_celery_app(Settings(key_prefix=key_prefix))
    try:
        make_publisher(app, refresh=True)(STUCK_DB)
        later = time.time() + 60
        make_publisher(app)(READY_DB)
    finally:
        app.close()
    assert queue.queue_depth("reconcile") == 2
    export_gauges(queue, now=later, heads=QueueHeads())
    assert REGISTRY.get_sample_value("tenantdb_queue_depth", {"queue": "reconcile"}) == 2
    age = _oldest("reconcile")
    assert age is not None
    assert age >= 60, "the refresh is the oldest, though taken last"


def test_a_message_without_a_publish_stamp_ages_from_when_beat_first_saw_it(
    real_redis: redis.Redis, key_prefix: str, queue: WorkQueue
) -> None:
    foreign = {"body": "", "headers": {"task": "x"}, "properties": {"delivery_tag": "tag-1"}}
    real_redis.lpush(f"{key_prefix}provision", json.dumps(foreign))
    heads = QueueHeads()
    export_gauges(queue, now=NOW, heads=heads)
    assert _oldest("provision") == 0
    export_gauges(queue, now=NOW + 42, heads=heads)
    assert _oldest("provision") == 42

    # Taken, and another message is next: it ages from when it was first seen next in line.
    real_redis.delete(f"{key_prefix}provision")
    real_redis.lpush(f"{key_prefix}provision", json.dumps({**foreign, "properties": {}}))
    export_gauges(queue, now=NOW + 50, heads=heads)
    assert _oldest("provision") == 0


def test_beat_observes_how_late_it_takes_each_due_key(
    queue: WorkQueue, published: list[OrderKey]
) -> None:
    due_before, refresh_before = _lag("due"), _lag("refresh")
    queue.schedule(READY_DB, 1_000.0)
    queue.schedule(WAITING_DB, 1_090.0)
    queue.schedule(STUCK_DB, 5_000.0)  # not due yet
    queue.schedule(MYSQL_DB, 400.0, Timetable.REFRESH)

    sweep_once(queue, 1_100.0, refresh_cycle=1.0, interval=1.0)
    assert sorted(published) == sorted([READY_DB, WAITING_DB, MYSQL_DB])
    count, total = _lag("due")
    assert count - due_before[0] == 2
    assert total - due_before[1] == pytest.approx(110.0), "100 s and 10 s late"
    count, total = _lag("refresh")
    assert count - refresh_before[0] == 1
    assert total - refresh_before[1] == pytest.approx(700.0)


def test_a_beat_that_stops_leading_drops_the_series_only_the_leader_keeps(
    real_redis: redis.Redis, key_prefix: str, queue: WorkQueue
) -> None:
    ReadyBook(real_redis, key_prefix).record(READY_DB, _order("True", "AllReady", NOW))
    leading = threading.Event()
    leading.set()
    stop = threading.Event()
    beat = threading.Thread(
        target=run_beat, args=(queue, stop), kwargs={"interval": 0.02, "is_active": leading.is_set}
    )
    with mock.patch("workers.beat.GAUGE_INTERVAL", 0.02):
        beat.start()
        try:
            wait_for(
                lambda: _orders("mariadbdatabase", "True", "AllReady") == 1,
                5,
                "the Ready gauge to count the order",
            )
            assert _oldest("reconcile") == 0
            leading.clear()
            wait_for(
                lambda: _orders("mariadbdatabase", "True", "AllReady") is None,
                5,
                "the gauges to go once beat leads no more",
            )
            assert _oldest("reconcile") is None
        finally:
            stop.set()
            beat.join(timeout=5)


def _ready_observations(kind: str) -> tuple[float, float]:
    labels = {"kind": kind}
    count = REGISTRY.get_sample_value("tenantdb_order_ready_seconds_count", labels) or 0.0
    total = REGISTRY.get_sample_value("tenantdb_order_ready_seconds_sum", labels) or 0.0
    return count, total


def test_create_to_ready_is_observed_once_per_order_when_it_first_turns_ready(
    real_redis: redis.Redis, key_prefix: str
) -> None:
    book = ReadyBook(real_redis, key_prefix)
    created = {"name": "x", "creationTimestamp": _stamp(NOW - 42)}
    fresh = {"metadata": created, "status": {}}
    ready = {**_order("True", "AllReady", NOW), "metadata": created}
    waiting = {
        **_order("False", "NotAllReady", NOW, blocking="WaitingForDatabase"),
        "metadata": created,
    }
    kind = "mysqldatabase"  # the other tests of the module count MariaDBDatabase orders
    before = _ready_observations(kind)

    book.record(MYSQL_DB, fresh, now=NOW)  # the pass read the new order: not Ready
    book.record(MYSQL_DB, ready, now=NOW)  # its status write left it Ready
    count, total = _ready_observations(kind)
    assert (count - before[0], total - before[1]) == (1, 42), "42 s after its creation"

    # Falling back and recovering, or being read again, is not a first time.
    book.record(MYSQL_DB, waiting, now=NOW + 100)
    book.record(MYSQL_DB, ready, now=NOW + 200)
    book.record(MYSQL_DB, ready, now=NOW + 300)
    assert _ready_observations(kind)[0] - before[0] == 1

    # An order first seen already Ready (recorded before tenantdb observed this) is not counted.
    other = OrderKey("mysqldatabase", "team-c", "older")
    book.record(other, ready, now=NOW)
    assert _ready_observations(kind)[0] - before[0] == 1
    book.forget(MYSQL_DB)
    book.forget(other)
