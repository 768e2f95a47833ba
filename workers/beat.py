"""Beat: the loop that turns due keys, and keys a dead pass left dirty, into enqueues.

Every ``interval`` seconds it pops the keys whose "come back after" time has come from the
due-set, and the dirty keys whose lock holder vanished (a worker killed mid-pass), and enqueues
each through the deduplicating ``enqueue``. It holds no state of its own: a restarted beat carries
on from Redis.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from tenantdb.adapters.workqueue import WorkQueue

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SweepReport:
    """How many keys one sweep found due and orphaned."""

    due: int
    orphaned: int


def sweep_once(queue: WorkQueue, now: float, batch: int = 500) -> SweepReport:
    """Enqueue every due key and every orphaned dirty key once."""
    due = 0
    while True:
        keys = queue.pop_due(now, batch)
        for key in keys:
            queue.enqueue(key)
        due += len(keys)
        if len(keys) < batch:
            break
    orphaned = len(queue.sweep_orphans(batch))
    return SweepReport(due=due, orphaned=orphaned)


def run_beat(queue: WorkQueue, stop: threading.Event, interval: float = 1.0) -> None:
    """Sweep every ``interval`` seconds until ``stop`` is set."""
    while not stop.is_set():
        report = sweep_once(queue, time.time())
        if report.due or report.orphaned:
            log.info("beat enqueued %d due and %d orphaned keys", report.due, report.orphaned)
        stop.wait(interval)
