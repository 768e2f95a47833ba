"""Beat: the loop that turns due keys, and keys a dead pass left dirty, into enqueues.

Every ``interval`` seconds it pops the keys whose "come back after" time has come from the
due-set, the refreshes the capped refresh rate allows (``tenantdb.core.schedule``), and the dirty
keys whose lock holder vanished (a worker killed mid-pass), and enqueues each through the
deduplicating ``enqueue``. It holds no state of its own: a restarted beat carries
on from Redis. Replicas elect one active beat through a Redis lease; the others stand by.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from tenantdb.adapters.celeryapp import build_celery_app, make_publisher
from tenantdb.adapters.leader import LeaderLease
from tenantdb.adapters.metrics import DUE_KEYS, LEADER, PENDING_KEYS, QUEUE_DEPTH, serve
from tenantdb.adapters.redisclient import build_redis
from tenantdb.adapters.workqueue import WorkQueue
from tenantdb.core.schedule import Timetable, compute_refresh_cap
from tenantdb.core.tasknames import Queue
from tenantdb.settings import Settings

log = logging.getLogger(__name__)

GAUGE_INTERVAL = 10.0
"""Seconds between two exports of the queue gauges (counting pending keys is a scan)."""


@dataclass(frozen=True, slots=True)
class SweepReport:
    """How many keys one sweep enqueued from each source."""

    due: int
    refreshed: int
    orphaned: int


def sweep_once(
    queue: WorkQueue,
    now: float,
    *,
    refresh_cycle: float = 600.0,
    interval: float = 1.0,
    batch: int = 500,
) -> SweepReport:
    """Enqueue every due key, the refreshes this sweep's rate allows, and orphaned dirty keys."""
    due = 0
    while True:
        keys = queue.pop_due(now, batch)
        for key in keys:
            queue.enqueue(key)
        due += len(keys)
        if len(keys) < batch:
            break
    cap = compute_refresh_cap(queue.due_count(Timetable.REFRESH), refresh_cycle, interval)
    refreshes = queue.pop_due(now, cap, Timetable.REFRESH)
    for key in refreshes:
        queue.enqueue(key)
    orphaned = len(queue.sweep_orphans(batch))
    return SweepReport(due=due, refreshed=len(refreshes), orphaned=orphaned)


def export_gauges(queue: WorkQueue) -> None:
    """Publish the timetables' sizes, the broker queues' depths and the pending keys."""
    for table in Timetable:
        DUE_KEYS.labels(table=table.value).set(queue.due_count(table))
    for name in Queue:
        QUEUE_DEPTH.labels(queue=name.value).set(queue.queue_depth(name.value))
    PENDING_KEYS.set(queue.pending_count())


def run_beat(
    queue: WorkQueue,
    stop: threading.Event,
    *,
    interval: float = 1.0,
    refresh_cycle: float = 600.0,
    is_active: Callable[[], bool] = lambda: True,
) -> None:
    """Sweep every ``interval`` seconds until ``stop`` is set, keeping to the interval's grid.

    Args:
        queue: the work queue.
        stop: set to end the loop.
        interval: seconds between sweeps.
        refresh_cycle: the cycle refreshes are spread over.
        is_active: whether this replica may sweep now (it holds the beat lease).
    """
    next_tick = time.monotonic()
    next_gauges = next_tick
    while not stop.is_set():
        next_tick += interval
        if not is_active():
            stop.wait(max(0.0, next_tick - time.monotonic()))
            continue
        if time.monotonic() >= next_gauges:
            export_gauges(queue)
            next_gauges = time.monotonic() + GAUGE_INTERVAL
        report = sweep_once(queue, time.time(), refresh_cycle=refresh_cycle, interval=interval)
        if report.due or report.refreshed or report.orphaned:
            log.info(
                "beat enqueued %d due, %d refreshes, %d orphaned",
                report.due,
                report.refreshed,
                report.orphaned,
            )
        stop.wait(max(0.0, next_tick - time.monotonic()))


def run_beat_process(settings: Settings, stop: threading.Event) -> None:
    """The ``tenantdb beat`` role: serve /metrics, campaign for the lease, sweep while leading."""
    serve(settings.metrics_port)
    redis_client = build_redis(settings)
    lease = LeaderLease(redis_client, "beat", prefix=settings.key_prefix)
    campaign = threading.Thread(
        target=lease.run,
        args=(stop, lambda held: LEADER.labels(role="beat").set(1 if held else 0)),
        name="beat-lease",
        daemon=True,
    )
    campaign.start()
    queue = WorkQueue(
        redis_client,
        make_publisher(build_celery_app(settings)),
        prefix=settings.key_prefix,
        lock_ttl=settings.lock_ttl_seconds,
        pending_ttl=settings.pending_ttl_seconds,
    )
    run_beat(
        queue,
        stop,
        interval=settings.beat_interval_seconds,
        refresh_cycle=settings.refresh_cycle_seconds,
        is_active=lambda: lease.is_leader,
    )
    campaign.join(timeout=5)
