"""What every task of a worker process shares: its work queue, its clusters, how a pass ends.

The work queue is built on first use, after the prefork pool has forked, so each child process
has Redis connections of its own; the cluster registry is read again when a configuration file
changes. ``finish_pass`` is the one way a pass ends: it writes the
pass's come-backs to the timetables and releases the order's lease, asking for another pass when
events arrived meanwhile or the caller says so. ``note_ready`` records an order's Ready state
for the orders gauges whenever a pass reads the order or writes its status; a pass that finds
its order gone drops it.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from celery import Task, current_app
from celery.utils.time import get_exponential_backoff_interval
from redis import RedisError

from tenantdb.adapters.celeryapp import make_later_publisher, make_publisher
from tenantdb.adapters.clusters import (
    ClusterRegistry,
    compute_config_stamp,
    load_cluster_config,
)
from tenantdb.adapters.errors import SafeError
from tenantdb.adapters.notekeys import read_note_keys
from tenantdb.adapters.readiness import ReadyBook
from tenantdb.adapters.redisclient import build_redis
from tenantdb.adapters.workqueue import Lease, Release, Spacing, WorkQueue
from tenantdb.core.keys import OrderKey
from tenantdb.core.schedule import compute_timetable, plan_comebacks
from tenantdb.settings import load_settings

T = TypeVar("T")

BUSY_AFTER_PASSES = 4
"""An order's passes run back to back while events keep arriving during them, four in a row at
most; from then on each waits ``busy_pass_spacing_seconds`` first (``Spacing``). A new order's
children answer during its first two or three passes, so a new order seldom meets the wait; an
order edited without pause does."""

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    AnyTask = Task[Any, Any]
else:  # celery's Task is generic for the type checker only
    AnyTask = Task


@lru_cache(maxsize=1)
def workqueue() -> WorkQueue:
    """The work queue of this worker process."""
    settings = load_settings()
    return WorkQueue(
        build_redis(settings),
        make_publisher(current_app),
        publish_refresh=make_publisher(current_app, refresh=True),
        prefix=settings.key_prefix,
        lock_ttl=settings.lock_ttl_seconds,
        pending_ttl=settings.pending_ttl_seconds,
        spacing=Spacing(
            BUSY_AFTER_PASSES,
            settings.busy_pass_spacing_seconds,
            make_later_publisher(current_app),
        )
        if settings.busy_pass_spacing_seconds > 0
        else None,
        seal_keys=read_note_keys(settings.note_keys_file),
    )


@lru_cache(maxsize=1)
def ready_book() -> ReadyBook:
    """The orders' Ready states, on this worker process's Redis."""
    return ReadyBook(workqueue().redis, load_settings().key_prefix)


def note_ready(key: OrderKey, order: Mapping[str, Any]) -> None:
    """Record the Ready state of ``order`` as read or as written; a Redis failure costs only
    the gauge's freshness, never the pass."""
    try:
        ready_book().record(key, order)
    except RedisError:
        log.warning("could not record the order's Ready state", extra={"order": str(key)})


_CLUSTERS: dict[tuple[object, ...], ClusterRegistry] = {}


def cluster_registry() -> ClusterRegistry:
    """The clusters of this worker process, read again when a configuration file changes."""
    settings = load_settings()
    stamp = compute_config_stamp(settings)
    found = _CLUSTERS.get(stamp)
    if found is None:
        _CLUSTERS.clear()
        found = _CLUSTERS[stamp] = load_cluster_config(settings).registry
    return found


class PerRegistry(Generic[T]):
    """One object built on this process's cluster registry, built again when the registry is.

    Compared by identity with the registry it was built on, so a registry read again (a
    configuration file changed) never serves an object bound to the old one.
    """

    def __init__(self, build: Callable[[ClusterRegistry], T]) -> None:
        """Remember how to build the object."""
        self._build = build
        self._built: tuple[ClusterRegistry, T] | None = None

    def __call__(self) -> T:
        """The object for the current registry."""
        registry = cluster_registry()
        if self._built is None or self._built[0] is not registry:
            self._built = (registry, self._build(registry))
        return self._built[1]


def result(key: OrderKey | str, reason: str) -> dict[str, str]:
    """A task result: the order and a reason, nothing else."""
    return {"order": str(key), "result": reason}


def finish_pass(
    queue: WorkQueue,
    lease: Lease,
    requeue_after: float | None,
    *,
    completed: bool = True,
    again: bool = False,
    reason: str = "",
    gone: bool = False,
) -> None:
    """Schedule the order's come-backs, note the pass, and release its lease.

    A completed pass's come-backs replace the key's timetable; a pass that did not see the order
    through only adds its own, and the earliest time wins. A pass that found the order ``gone``
    drops its come-backs: a deleted order is not refreshed forever.
    """
    settings = load_settings()
    if reason:
        queue.record_pass(lease.key, reason, time.time())
    comebacks = plan_comebacks(
        requeue_after,
        now=time.time(),
        resync_seconds=settings.resync_seconds,
        jitter=random.random(),  # noqa: S311 - spreading load, not security
    )
    if gone:
        queue.forget(lease.key)
        queue.forget_quiet(lease.key)
        ready_book().forget(lease.key)
    elif completed:
        queue.replace_timetable(lease.key, compute_timetable(comebacks))
    else:
        for comeback in comebacks:
            queue.schedule(lease.key, comeback.at, comeback.table)
    if queue.release(lease, completed=completed) is Release.LOST or again:
        queue.request_pass(lease.key)


def handover_ms() -> int:
    """How long a hand-over keeps the lease for the next step's wait in its queue.

    Bounded by the broker's visibility timeout: a message waiting longer is delivered again
    anyway, and the copy that finds the fence moved ends.
    """
    return int(load_settings().visibility_timeout_seconds * 1000)


def backoff(retries: int) -> int:
    """The countdown before retry number ``retries + 1``: exponential, jittered, capped."""
    return int(
        get_exponential_backoff_interval(
            factor=1,
            retries=retries,
            maximum=load_settings().retry_backoff_max_seconds,
            full_jitter=True,
        )
    )


def describe_error(exc: Exception) -> str:
    """What a log line may say about a failure: the message of a ``SafeError``, else the type."""
    if isinstance(exc, SafeError):
        return f"{type(exc).__name__}: {exc}"
    return type(exc).__name__
