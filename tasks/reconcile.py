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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from celery import Signature, Task, shared_task
from celery.exceptions import Reject

from tasks.chain import Handoff, compose
from tasks.runtime import (
    AnyTask,
    backoff,
    describe_error,
    finish_pass,
    handover_ms,
    result,
    workqueue,
)
from tenantdb.adapters.metrics import LOCK_BUSY, RETRIES, STALE_MESSAGES
from tenantdb.adapters.useragent import serving
from tenantdb.adapters.workqueue import (
    Heartbeat,
    Lease,
    LeaseLostError,
    Release,
    Start,
    ready_fence,
)
from tenantdb.core.keys import InvalidOrderKeyError, OrderKey
from tenantdb.core.tasknames import RECONCILE_ORDER, routed_queue

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PassContext:
    """What a pass function receives: the order and the guard to call before each write."""

    key: OrderKey
    guard: Heartbeat


@dataclass(frozen=True, slots=True)
class PassOutcome:
    """What a pass function reports.

    ``reason`` goes into the task result; ``requeue_after`` says when to come back (None: on an
    event). ``handoff`` hands the rest of the pass to a chain of steps, and the chain's last
    step ends the pass instead of the entry task.
    """

    reason: str
    requeue_after: float | None = None
    handoff: Handoff | None = None
    gone: bool = False
    """The order no longer exists: its come-backs are dropped, and an event brings it back."""


PassFunction = Callable[[PassContext], PassOutcome]

_PASSES: dict[str, PassFunction] = {}


def first_queue(steps: Signature) -> str:
    """The queue a chain's (or a single step's) first message goes to."""
    tasks = getattr(steps, "tasks", None)
    first = tasks[0] if tasks else steps
    return routed_queue(str(first.task)).value


def register_pass(kind: str, function: PassFunction) -> None:
    """Serve orders of ``kind`` (the lower-case kind of their keys) with ``function``."""
    _PASSES[kind] = function


class EntryTask(Task[Any, Any]):
    """The task class of the entry: held by the worker that receives it (``tasks.holding``)."""

    Request = "tasks.holding:HoldingRequest"


@shared_task(name=RECONCILE_ORDER, bind=True, max_retries=None, base=EntryTask)
def reconcile_order(self: AnyTask, key: str) -> dict[str, str]:
    """Run one pass over the order ``key`` under its lock."""
    try:
        order = OrderKey.parse(key)
    except InvalidOrderKeyError as exc:
        log.error("dropping a reconcile of a malformed key: %s", exc)
        return result(key, "InvalidKey")
    function = _PASSES.get(order.kind)
    if function is None:
        log.error("no pass is registered for kind %r", order.kind, extra={"order": key})
        return result(key, "KindNotServed")

    queue = workqueue()
    start, lease = queue.begin(order)
    if lease is None:
        counter = LOCK_BUSY if start is Start.BUSY else STALE_MESSAGES
        counter.labels(kind=order.kind).inc()
        return result(key, "Busy" if start is Start.BUSY else "Stale")
    try:
        with serving(key, lease.name), queue.heartbeat(lease) as guard:
            outcome = function(PassContext(order, guard))
    except LeaseLostError:
        log.warning("pass lost its lease; asking for another", extra={"order": key})
        queue.request_pass(order)
        return result(key, "LeaseLost")
    except Exception as exc:
        RETRIES.labels(task=self.name).inc()
        return _retry_pass(self, lease, "pass failed", exc)
    if outcome.handoff is not None:
        # For one lease until the chain is published, then over its first step's queue wait.
        handed = queue.hand_over(lease, ready_fence(1, 0), queue.lock_ttl_ms)
        if handed is None:
            queue.request_pass(order)
            return result(key, "LeaseLost")
        try:
            steps = compose(queue, outcome.handoff, handed)
            steps.apply_async()
        except Exception as exc:
            # Without its chain the pass is over; the retry begins a new one.
            return _retry_pass(self, handed, "could not hand the pass to its chain", exc)
        queue.extend_wait(handed, handover_ms(), first_queue(steps))
        return result(key, outcome.reason)
    finish_pass(queue, lease, outcome.requeue_after, reason=outcome.reason, gone=outcome.gone)
    return result(key, outcome.reason)


def _retry_pass(task: AnyTask, lease: Lease, what: str, exc: Exception) -> dict[str, str]:
    """End a pass that did not finish (``what`` went wrong: ``exc``) and have it retried after
    the task's backoff.

    The release leaves the key dirty until the retry is due, so however far the rest gets (the
    broker refuses the retry, Redis refuses the mark, the worker dies) the orphan sweep brings
    the pass then, and nothing is forgotten.
    """
    queue = workqueue()
    order, key = lease.key, str(lease.key)
    countdown = backoff(task.request.retries)
    log.warning(
        "%s (%s); retrying in %d s", what, describe_error(exc), countdown, extra={"order": key}
    )
    released = queue.release(lease, completed=False, retry_in=countdown)
    # The retry is the key's pending pass: events meanwhile are deduplicated against it, and a
    # worker holding it through the countdown holds the mark (``tasks.holding``). When a pass is
    # already queued (events arrived during this one), that pass is the retry.
    if released is Release.DIRTY or not queue.mark_pending(order, countdown):
        return result(key, "FailedNextQueued")
    try:
        retry = task.retry(countdown=countdown, throw=False)
    except Reject as refused:
        # Celery raises Reject when it cannot publish the retry, and the worker then acks this
        # message: the key's dirty mark is what is left of the pass. Its pending mark goes, so
        # that an event meanwhile publishes a pass of its own.
        queue.retry_later(order, countdown)
        log.warning(
            "could not publish the retry (%s); the orphan sweep brings the pass in %d s",
            _refusal(refused),
            countdown,
            extra={"order": key},
        )
        return result(key, "RetryNotPublished")
    raise retry from None


def _refusal(refused: Reject) -> str:
    """What a log line may say of why Celery could not publish a retry."""
    reason = getattr(refused, "reason", None)
    return describe_error(reason) if isinstance(reason, Exception) else "no reason given"
