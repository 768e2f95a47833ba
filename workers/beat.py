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

from tenantdb.adapters.workqueue import WorkQueue
from tenantdb.core.schedule import Timetable, compute_refresh_cap

log = logging.getLogger(__name__)


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
    while not stop.is_set():
        next_tick += interval
        if not is_active():
            stop.wait(max(0.0, next_tick - time.monotonic()))
            continue
        report = sweep_once(queue, time.time(), refresh_cycle=refresh_cycle, interval=interval)
        if report.due or report.refreshed or report.orphaned:
            log.info(
                "beat enqueued %d due, %d refreshes, %d orphaned",
                report.due,
                report.refreshed,
                report.orphaned,
            )
        stop.wait(max(0.0, next_tick - time.monotonic()))
