"""The entry task: one reconcile pass over one order, under the order's lock.

``reconcile_order(key)`` is what every enqueue publishes. It begins the pass (clearing the key's
pending mark, so an event from then on publishes a new task) and takes the order's lease, or
returns when another pass holds it (the key is then marked dirty) or when a completed pass already
covers every event (a redundant message); runs the pass function registered for the
order's kind with a heartbeat keeping the lease alive; writes the pass's "come back after" into the
due-set; and releases the lease, enqueueing the key again when it was marked dirty meanwhile.

A failing pass releases its lease and is retried with exponential backoff, full jitter and a cap.
A pass that lost its lease stops before its next write and enqueues the key, so the work is
picked up again rather than dropped.

The task's arguments are the order key only, and its result names only the order and a reason.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import redis
from celery import Task, current_app, shared_task
from celery.utils.time import get_exponential_backoff_interval

from tenantdb.adapters.celeryapp import make_publisher
from tenantdb.adapters.workqueue import Heartbeat, LeaseLostError, Release, Start, WorkQueue
from tenantdb.core.keys import InvalidOrderKeyError, OrderKey
from tenantdb.core.schedule import plan_comebacks
from tenantdb.core.tasknames import RECONCILE_ORDER
from tenantdb.settings import load_settings

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PassContext:
    """What a pass function receives: the order and the guard to call before each write."""

    key: OrderKey
    guard: Heartbeat


@dataclass(frozen=True, slots=True)
class PassOutcome:
    """What a pass reports: a reason for the task result and when to come back, if ever."""

    reason: str
    requeue_after: float | None = None


PassFunction = Callable[[PassContext], PassOutcome]

_PASSES: dict[str, PassFunction] = {}


def register_pass(kind: str, function: PassFunction) -> None:
    """Serve orders of ``kind`` (the lower-case kind of their keys) with ``function``."""
    _PASSES[kind] = function


def served_kinds() -> frozenset[str]:
    """The kinds a pass function is registered for."""
    return frozenset(_PASSES)


@lru_cache(maxsize=1)
def workqueue() -> WorkQueue:
    """The work queue of this worker process, built on first use (after the pool forks)."""
    settings = load_settings()
    return WorkQueue(
        redis.Redis.from_url(settings.redis_url),
        make_publisher(current_app),
        prefix=settings.key_prefix,
        lock_ttl=settings.lock_ttl_seconds,
        pending_ttl=settings.pending_ttl_seconds,
    )


def _result(key: str, reason: str) -> dict[str, str]:
    return {"order": key, "result": reason}


@shared_task(name=RECONCILE_ORDER, bind=True, max_retries=None)
def reconcile_order(self: Task, key: str) -> dict[str, str]:  # type: ignore[type-arg]
    """Run one pass over the order ``key`` under its lock."""
    try:
        order = OrderKey.parse(key)
    except InvalidOrderKeyError as exc:
        log.error("dropping a reconcile of a malformed key: %s", exc)
        return _result(key, "InvalidKey")
    function = _PASSES.get(order.kind)
    if function is None:
        log.error("no pass is registered for kind %r", order.kind, extra={"order": key})
        return _result(key, "KindNotServed")

    queue = workqueue()
    start, lease = queue.begin(order)
    if lease is None:
        return _result(key, "Busy" if start is Start.BUSY else "Stale")
    try:
        with queue.heartbeat(lease) as guard:
            outcome = function(PassContext(order, guard))
    except LeaseLostError:
        log.warning("pass lost its lease; asking for another", extra={"order": key})
        queue.request_pass(order)
        return _result(key, "LeaseLost")
    except Exception as exc:
        queue.release(lease, completed=False)
        settings = load_settings()
        countdown = get_exponential_backoff_interval(
            factor=1,
            retries=self.request.retries,
            maximum=settings.retry_backoff_max_seconds,
            full_jitter=True,
        )
        log.warning(
            "pass failed (%s); retrying in %s s",
            type(exc).__name__,
            countdown,
            extra={"order": key},
        )
        raise self.retry(countdown=countdown, exc=exc) from None
    settings = load_settings()
    for comeback in plan_comebacks(
        outcome.requeue_after,
        now=time.time(),
        resync_seconds=settings.resync_seconds,
        jitter=random.random(),  # noqa: S311 - spreading load, not security
    ):
        queue.schedule(order, comeback.at, comeback.table)
    if queue.release(lease) is Release.LOST:
        queue.request_pass(order)
    return _result(key, outcome.reason)
