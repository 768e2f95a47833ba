"""Beat: the loop that turns due keys, and keys a dead pass left dirty, into enqueues.

Every ``interval`` seconds it takes the keys whose "come back after" time has come from the
due-set, the refreshes the capped refresh rate allows (``tenantdb.core.schedule``), and the dirty
keys whose lock holder vanished (a worker killed mid-pass), and enqueues each through the
deduplicating ``enqueue``. A due key moves from its timetable into a claims set, is enqueued,
and only then leaves the claims; a key whose enqueue failed goes back at once. The claims of a
beat killed mid-sweep are enqueued by the next leader as soon as it takes over, and by any
leader once they are ``CLAIM_RECOVERY`` seconds old; such a key is published even when it
carries a pending mark, since the dead sweep may have set the mark and died before publishing.
So a Redis or broker error in the middle of a sweep loses no key (at worst one is enqueued
twice, and the second message ends as stale), and a come-back a pass writes meanwhile is never
swallowed. An error ends the
sweep, never the loop: beat logs it and sweeps again after a capped backoff. It holds no state
of its own: a restarted beat carries on from Redis. Replicas elect one active beat through a
Redis lease; the others stand by.

The active beat also keeps the installation's gauges (``export_gauges``): the timetables' sizes,
the broker queues' depths and the age of each queue's oldest message, the pending keys, and the
orders by kind and Ready reason the workers record (``tenantdb.adapters.readiness``). Each key
it claims from a timetable is observed in ``tenantdb_refresh_lag_seconds``: how late it was
taken. A beat that stops leading drops the series only the leader keeps.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from tenantdb.adapters.celeryapp import (
    build_celery_app,
    make_publisher,
    message_published_at,
    message_tag,
)
from tenantdb.adapters.leader import LeaderLease
from tenantdb.adapters.metrics import (
    BEAT_LAST_SWEEP,
    DUE_KEYS,
    LEADER,
    OLDEST_PENDING,
    ORDERS,
    ORDERS_NOT_READY,
    PENDING_KEYS,
    QUEUE_DEPTH,
    REFRESH_LAG,
    Progress,
    forget_beat_gauges,
    serve,
    set_series,
)
from tenantdb.adapters.readiness import ReadyBook
from tenantdb.adapters.redisclient import build_redis, warn_about_access, warn_about_eviction
from tenantdb.adapters.workqueue import WorkQueue
from tenantdb.core.keys import OrderKey
from tenantdb.core.schedule import Timetable, compute_refresh_cap
from tenantdb.core.tasknames import Queue
from tenantdb.role import prepare
from tenantdb.settings import Settings

# Named, not __name__: ``tenantdb beat`` runs this module as ``__main__``.
log = logging.getLogger("workers.beat")

GAUGE_INTERVAL = 10.0
"""Seconds between two exports of the queue gauges (counting pending keys is a scan)."""
CLAIM_RECOVERY = 60.0
"""Seconds after which a claim whose sweep never finished goes back to its timetable."""
MAX_ERROR_BACKOFF = 30.0
"""The longest wait after a failed sweep."""


def beat_liveness(max_age: float) -> Progress:
    """Whether this beat still gets on with its work, for its liveness probe (``/livez``).

    The active beat gets on when a sweep completes; a standby, which has nothing to sweep, when
    its loop goes round. A sweep that hangs on a dead connection, or that keeps failing for
    longer than ``max_age`` seconds, makes the probe fail, and the kubelet restarts the process.
    """
    return Progress(max_age, "beat has completed no sweep for {age} s (limit {limit} s)")


@dataclass(frozen=True, slots=True)
class SweepReport:
    """How many keys one sweep enqueued from each source."""

    due: int
    refreshed: int
    orphaned: int


def _sweep_table(
    queue: WorkQueue, now: float, table: Timetable, limit: int | None, batch: int
) -> int:
    """Enqueue the table's due keys (at most ``limit``) through claims (see the module)."""
    enqueued = recover_claims(queue, now - CLAIM_RECOVERY, table)
    while limit is None or enqueued < limit:
        size = batch if limit is None else min(batch, limit - enqueued)
        claimed = queue.claim_due(now, size, table)
        lag = REFRESH_LAG.labels(table=table.value)
        for claim in claimed:
            lag.observe(max(0.0, now - claim.due_at))
        keys = [claim.key for claim in claimed]
        done: list[OrderKey] = []
        try:
            for key in keys:
                queue.enqueue(key, refresh=table is Timetable.REFRESH)
                done.append(key)
        finally:
            queue.release_claims(done, table)
            if len(done) < len(keys):
                queue.return_claims(keys[len(done) :], table)
        enqueued += len(done)
        if len(keys) < size:
            break
    return enqueued


def recover_claims(queue: WorkQueue, older_than: float, table: Timetable) -> int:
    """Enqueue the claims made before ``older_than`` that no sweep released; how many."""
    keys = queue.stale_claims(older_than, table)
    done: list[OrderKey] = []
    try:
        for key in keys:
            # Its mark may be the dead sweep's, with no message.
            queue.enqueue(key, force=True, refresh=table is Timetable.REFRESH)
            done.append(key)
    finally:
        queue.release_claims(done, table)
    return len(done)


def sweep_once(
    queue: WorkQueue,
    now: float,
    *,
    refresh_cycle: float = 600.0,
    interval: float = 1.0,
    batch: int = 500,
) -> SweepReport:
    """Enqueue every due key, the refreshes this sweep's rate allows, and orphaned keys: dirty
    keys whose lease holder vanished, and passes whose next step's message was lost.

    Raises:
        RedisError, OperationalError: Redis or the broker failed; the keys not enqueued yet
            are still due.
    """
    due = _sweep_table(queue, now, Timetable.DUE, None, batch)
    cap = compute_refresh_cap(queue.due_count(Timetable.REFRESH), refresh_cycle, interval)
    refreshed = _sweep_table(queue, now, Timetable.REFRESH, cap, batch)
    orphaned = len(queue.sweep_orphans(batch))
    orphaned += len(queue.sweep_lost_waits([q.value for q in Queue], batch))
    return SweepReport(due=due, refreshed=refreshed, orphaned=orphaned)


class QueueHeads:
    """When beat first saw each queue's next message, for messages that carry no publish time."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[str, float]] = {}

    def age(self, queue: WorkQueue, name: str, now: float) -> float:
        """Seconds the next message of broker queue ``name`` has waited; 0 when it is empty.

        kombu keeps a list per priority, pushes messages on the left of it and workers take them
        from the right, so the rightmost of each list is its oldest: the queue's is the oldest
        of those.
        """
        return max(self._age(queue, lst, now) for lst in queue.keys.broker_lists(name))

    def _age(self, queue: WorkQueue, lst: str, now: float) -> float:
        raw = queue.redis.lindex(lst, -1)
        if raw is None:
            self._seen.pop(lst, None)
            return 0.0
        published = message_published_at(raw)
        if published is not None:
            return max(0.0, now - published)
        tag = message_tag(raw) or ""
        seen = self._seen.get(lst)
        if seen is None or seen[0] != tag:
            seen = self._seen[lst] = (tag, now)
        return max(0.0, now - seen[1])


_HEADS = QueueHeads()


def export_gauges(queue: WorkQueue, now: float | None = None, heads: QueueHeads = _HEADS) -> None:
    """Publish the timetables' sizes, the broker queues' depths and oldest messages' ages, the
    pending keys, and the orders by kind and Ready reason."""
    now = time.time() if now is None else now
    for table in Timetable:
        DUE_KEYS.labels(table=table.value).set(queue.due_count(table))
    for name in Queue:
        QUEUE_DEPTH.labels(queue=name.value).set(queue.queue_depth(name.value))
        OLDEST_PENDING.labels(queue=name.value).set(heads.age(queue, name.value, now))
    PENDING_KEYS.set(queue.pending_count())
    tally = ReadyBook(queue.redis, queue.keys.prefix).tally(now)
    set_series(ORDERS, {labels: float(n) for labels, n in tally.orders.items()})
    set_series(ORDERS_NOT_READY, {labels: age for labels, age in tally.not_ready_seconds.items()})


def run_beat(
    queue: WorkQueue,
    stop: threading.Event,
    *,
    interval: float = 1.0,
    refresh_cycle: float = 600.0,
    is_active: Callable[[], bool] = lambda: True,
    liveness: Progress | None = None,
) -> None:
    """Sweep every ``interval`` seconds until ``stop`` is set, keeping to the interval's grid.

    Args:
        queue: the work queue.
        stop: set to end the loop.
        interval: seconds between sweeps.
        refresh_cycle: the cycle refreshes are spread over.
        is_active: whether this replica may sweep now (it holds the beat lease).
        liveness: told each time the loop gets on with its work.
    """
    alive = liveness.progressed if liveness is not None else lambda: None
    next_tick = time.monotonic()
    next_gauges = next_tick
    failures = 0
    taken_over = False
    while not stop.is_set():
        next_tick += interval
        if not is_active():
            if taken_over:
                forget_beat_gauges()
            taken_over = False
            alive()
            stop.wait(max(0.0, next_tick - time.monotonic()))
            continue
        try:
            if not taken_over:
                # Its sweeps are measured from the takeover until one completes.
                BEAT_LAST_SWEEP.set(time.time())
                alive()
                # A new term: every claim left is a dead predecessor's (the lease lets no two
                # beats sweep at once), so none waits for CLAIM_RECOVERY.
                recovered = sum(recover_claims(queue, time.time(), t) for t in Timetable)
                taken_over = True
                if recovered:
                    log.info("beat enqueued %d keys a stopped sweep had claimed", recovered)
            if time.monotonic() >= next_gauges:
                export_gauges(queue)
                next_gauges = time.monotonic() + GAUGE_INTERVAL
            report = sweep_once(queue, time.time(), refresh_cycle=refresh_cycle, interval=interval)
        except Exception as exc:  # beat outlives every error; the sweep repeats
            failures += 1
            wait = min(interval * 2**failures, MAX_ERROR_BACKOFF)
            log.warning(
                "beat sweep failed (%s: %s); sweeping again in %.0f s",
                type(exc).__name__,
                exc,
                wait,
            )
            stop.wait(wait)
            next_tick = time.monotonic()
            continue
        failures = 0
        BEAT_LAST_SWEEP.set(time.time())
        alive()
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
    liveness = beat_liveness(settings.beat_liveness_seconds)
    serve(settings.metrics_port, liveness)
    redis_client = build_redis(settings)
    warn_about_eviction(redis_client)
    warn_about_access(settings)
    lease = LeaderLease(redis_client, "beat", prefix=settings.key_prefix)
    campaign = threading.Thread(
        target=lease.run,
        args=(stop, lambda held: LEADER.labels(role="beat").set(1 if held else 0)),
        name="beat-lease",
        daemon=True,
    )
    campaign.start()
    app = build_celery_app(settings)
    queue = WorkQueue(
        redis_client,
        make_publisher(app),
        publish_refresh=make_publisher(app, refresh=True),
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
        liveness=liveness,
    )
    campaign.join(timeout=5)


if __name__ == "__main__":  # ``python -m workers.beat``, as ``tenantdb beat`` starts it
    run_beat_process(*prepare())
