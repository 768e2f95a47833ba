"""How a chain step carries an order's lease: extend, check, retry with backoff, finish.

A pass that goes beyond its entry task hands its lease to a Celery chain. Each step of the
chain receives the order key and the lease (its token and the event count it covers), checks
that the lease is still its own, runs its body with a heartbeat, and then either lets the chain
go on or finishes the pass: it schedules the order's come-backs, releases the lease (which asks
for another pass when events arrived meanwhile) and cuts the rest of the chain.

A body that fails backs off with exponential backoff, full jitter and a cap, by retrying the
same step; the lease is extended to cover the countdown, so no other pass of the order starts in
between and events that arrive mark the order dirty. A step that lost its lease stops and asks
for another pass. ``abort_pass`` is the chain's error callback: it gives the lease back when a
step failed for good (a hard time limit).

Step arguments are the order key, the lease token and the event count; results name the order
and a reason only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from celery import shared_task

from tasks.runtime import AnyTask, backoff, describe_error, finish_pass, result, workqueue
from tenantdb.adapters.metrics import RETRIES
from tenantdb.adapters.workqueue import Heartbeat, Lease, LeaseLostError, WorkQueue
from tenantdb.core.keys import OrderKey
from tenantdb.core.tasknames import RECONCILE_ABORT
from tenantdb.settings import load_settings

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class StepContext:
    """What a step body receives."""

    key: OrderKey
    lease: Lease
    guard: Heartbeat


@dataclass(frozen=True, slots=True)
class StepResult:
    """What a step body reports.

    ``done`` ends the pass here; ``requeue_after`` is then when to come back (None: on an
    event), ``completed`` whether the pass saw the order through (so its events count as
    covered), and ``again`` asks for another pass at once (the path changed under the chain).
    """

    reason: str
    done: bool = False
    requeue_after: float | None = None
    completed: bool = True
    again: bool = False


class RetryStepError(Exception):
    """The step failed after recording what it must; back off and run it again."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


StepBody = Callable[[StepContext], StepResult]


def run_step(task: AnyTask, key: str, token: str, started: int, body: StepBody) -> dict[str, str]:
    """Run one chain step of a pass under the lease the chain carries."""
    order = OrderKey.parse(key)
    queue = workqueue()
    lease = Lease(order, token, started)
    if not queue.extend(lease):
        _stop_chain(task)
        queue.request_pass(order)
        return result(key, "LeaseLost")
    try:
        with queue.heartbeat(lease) as guard:
            outcome = body(StepContext(order, lease, guard))
    except LeaseLostError:
        _stop_chain(task)
        queue.request_pass(order)
        return result(key, "LeaseLost")
    except RetryStepError as exc:
        _retry(task, queue, lease, exc.reason, str(exc))
    except Exception as exc:
        _retry(task, queue, lease, type(exc).__name__, describe_error(exc))
    if outcome.done:
        _stop_chain(task)
        finish_pass(
            queue,
            lease,
            outcome.requeue_after,
            completed=outcome.completed,
            again=outcome.again,
            reason=outcome.reason,
        )
    return result(key, outcome.reason)


def _retry(task: AnyTask, queue: WorkQueue, lease: Lease, reason: str, detail: str) -> None:
    countdown = backoff(task.request.retries)
    RETRIES.labels(task=task.name).inc()
    # Keep the lease through the countdown: the retry continues this pass.
    queue.extend(lease, ttl_ms=int((countdown + load_settings().lock_ttl_seconds) * 1000))
    log.warning(
        "%s failed (%s): %s; retrying in %d s",
        task.name,
        reason,
        detail,
        countdown,
        extra={"order": str(lease.key)},
    )
    raise task.retry(countdown=countdown) from None


def _stop_chain(task: AnyTask) -> None:
    # Celery publishes the next step from the request's remaining chain after a success.
    task.request.chain = None


@shared_task(name=RECONCILE_ABORT)
def abort_pass(key: str, token: str, started: int) -> dict[str, str]:
    """Give the lease back after a step failed for good, and ask for another pass."""
    order = OrderKey.parse(key)
    queue = workqueue()
    queue.release(Lease(order, token, started), completed=False)
    queue.request_pass(order)
    log.error("a chain step failed for good; asked for another pass", extra={"order": key})
    return result(key, "Aborted")
