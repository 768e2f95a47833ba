"""How a chain step carries an order's lease: claim the fence, check, retry, hand over, finish.

A pass that goes beyond its entry task hands its lease to a Celery chain. Each step of the
chain receives the order key, the pass's token, the event count it covers and its position in
the chain. It claims the fence the previous step (or its own failed attempt) left for it, runs
its body with a heartbeat, and then either hands the fence to the next step, extending the lease
over the next step's wait in its queue, or finishes the pass: it schedules the order's
come-backs, releases the lease (which asks for another pass when events arrived meanwhile) and
cuts the rest of the chain. A copy of a step whose fence has moved on (a redelivery after a
worker loss or a broker blip, a duplicate publish) ends at once without writing.

A body that fails backs off with exponential backoff, full jitter and a cap, by retrying the
same step; the fence moves to the retry and the lease is extended over the countdown, so no
other pass of the order starts in between and events that arrive mark the order dirty. A step
that lost its lease stops and asks for another pass. ``abort_pass`` is the chain's error
callback for a step that failed for good (a hard time limit): it asks for another pass, which
runs once the dead step's lease runs out.

The entry hands its pass over as a ``Handoff``: the steps' task names and the pass's note, the
observation and plan the steps read instead of observing again. ``compose`` leaves the note in
Redis under the pass's token and chains the steps; a step reads the note back (``note_value``)
and may replace it for the steps after it. A note is JSON, never holds a credential, and is
refused past ``NOTE_LIMIT_BYTES``. It is sealed with the workers' note key (``tenantdb.core.seal``):
a step whose note does not open runs nothing and its pass is planned afresh.

Step arguments are the order key, the pass's public name (``Lease.name``), the event count and
the step's position; results name the order and a reason only. The lease token stays in Redis:
a message forged from what Flower shows can at most be another copy of one of the pass's own
steps, which its fence lets run once, and the error callback needs no lease at all.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from celery import Signature, Task, chain, shared_task
from pydantic import TypeAdapter
from redis import RedisError

from tasks.runtime import (
    AnyTask,
    backoff,
    describe_error,
    finish_pass,
    handover_ms,
    result,
    workqueue,
)
from tenantdb.adapters.errors import SafeError
from tenantdb.adapters.metrics import DUPLICATE_STEPS, RETRIES
from tenantdb.adapters.useragent import serving
from tenantdb.adapters.workqueue import (
    Claim,
    Heartbeat,
    Lease,
    LeaseLostError,
    WorkQueue,
    ready_fence,
)
from tenantdb.core.keys import OrderKey
from tenantdb.core.tasknames import RECONCILE_ABORT, routed_queue
from tenantdb.settings import load_settings

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class StepContext:
    """What a step body receives."""

    key: OrderKey
    lease: Lease
    guard: Heartbeat
    step: int = 1
    """The step's position in its chain, 1 first."""
    attempt: int = 0
    """Which attempt of the step this is, 0 first; a retry is 1 and up."""


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


# -- the pass's note ---------------------------------------------------------------------------

NOTE_LIMIT_BYTES = 256 * 1024
"""The largest note a pass leaves its steps. Notes live in the broker's Redis, one per order in
flight; an order's spec and status are far below this, so a note past it is refused."""


class NoteTooLargeError(SafeError, ValueError):
    """A pass's note is past ``NOTE_LIMIT_BYTES``; the message gives sizes only."""

    def __init__(self, size: int) -> None:
        super().__init__(
            f"the pass's note is {size} bytes, over the {NOTE_LIMIT_BYTES}-byte limit of what a"
            " pass may carry to its steps"
        )
        self.size = size


_ADAPTERS: dict[type[Any], TypeAdapter[Any]] = {}


def _adapter(note_type: type[Any]) -> TypeAdapter[Any]:
    # Building an adapter for a nested note costs milliseconds; every step needs one.
    found = _ADAPTERS.get(note_type)
    if found is None:
        found = _ADAPTERS[note_type] = TypeAdapter(note_type)
    return found


def note_text(note: object) -> str:
    """The note as stored (JSON); ``NoteTooLargeError`` past the limit."""
    text = _adapter(type(note)).dump_json(note).decode()
    if len(text) > NOTE_LIMIT_BYTES:
        raise NoteTooLargeError(len(text))
    return text


def note_value(text: str, note_type: type[Any]) -> Any:
    """A stored note read back as ``note_type``."""
    return _adapter(note_type).validate_json(text)


def note_ttl_ms() -> int:
    """How long a pass's note lives: every hand-over's wait, and a retry's backoff on top."""
    settings = load_settings()
    backoff = settings.retry_backoff_max_seconds + settings.lock_ttl_seconds
    return handover_ms() + int(backoff * 1000)


@dataclass(frozen=True, slots=True)
class Handoff:
    """The rest of a pass, as its entry returns it: the chain's steps and the note they read.

    ``steps`` are the steps' Celery task names, in order; ``note`` is what they read instead of
    observing again (JSON, never a credential; None: no note), kept for ``note_ttl_ms``.
    """

    steps: tuple[str, ...]
    note: str | None = None
    note_ttl_ms: int = 0


def compose(queue: WorkQueue, handoff: Handoff, lease: Lease) -> Signature:
    """Leave the handoff's note under ``lease``, then chain its steps; a step that fails for
    good ends the pass through ``abort_pass``."""
    if handoff.note is not None:
        queue.save_note(lease, handoff.note, handoff.note_ttl_ms)
    key = str(lease.key)
    steps = [
        Signature(name, args=(key, lease.name, position), immutable=True)
        for position, name in enumerate(handoff.steps, start=1)
    ]
    return chain(*steps).on_error(Signature(RECONCILE_ABORT, args=(key,), immutable=True))


def run_step(task: AnyTask, key: str, name: str, step: int, body: StepBody) -> dict[str, str]:
    """Run chain step number ``step`` (1 first) of the pass ``name`` under the pass's lease."""
    order = OrderKey.parse(key)
    queue = workqueue()
    held = queue.find(order, name)
    claim, lease = (
        (Claim.LOST, None)
        if held is None
        else queue.claim(held, ready_fence(step, task.request.retries))
    )
    if lease is None:
        _stop_chain(task)
        if claim is Claim.MOVED:
            DUPLICATE_STEPS.labels(task=task.name).inc()
            log.info("%s: the pass is past this step; a copy ends", task.name, extra={"order": key})
            return result(key, "Duplicate")
        queue.request_pass(order)
        return result(key, "LeaseLost")
    try:
        with serving(key, name), queue.heartbeat(lease) as guard:
            outcome = body(StepContext(order, lease, guard, step, task.request.retries))
    except LeaseLostError:
        _stop_chain(task)
        queue.request_pass(order)
        return result(key, "LeaseLost")
    except RetryStepError as exc:
        return _retry(task, queue, lease, step, exc.reason, str(exc))
    except Exception as exc:
        return _retry(task, queue, lease, step, type(exc).__name__, describe_error(exc))
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
    # For one lease only until Celery has published the next step (StepTask.on_success).
    waiting = queue.hand_over(lease, ready_fence(step + 1, 0), queue.lock_ttl_ms)
    if waiting is None:
        _stop_chain(task)
        queue.request_pass(order)
        return result(key, "LeaseLost")
    setattr(
        task.request,
        _WAITING,
        (waiting, next_step_queue(getattr(task.request, "chain", None), task.name)),
    )
    return result(key, outcome.reason)


def _retry(
    task: AnyTask, queue: WorkQueue, lease: Lease, step: int, reason: str, detail: str
) -> dict[str, str]:
    countdown = backoff(task.request.retries)
    # Keep the lease through the countdown: the retry continues this pass, at a fence of its own.
    # For one lease until the retry is published, then over the countdown and the queue wait.
    ttl_ms = int((countdown + load_settings().lock_ttl_seconds) * 1000) + handover_ms()
    waiting = queue.hand_over(lease, ready_fence(step, task.request.retries + 1), queue.lock_ttl_ms)
    if waiting is None:
        _stop_chain(task)
        queue.request_pass(lease.key)
        return result(lease.key, "LeaseLost")
    RETRIES.labels(task=task.name).inc()
    log.warning(
        "%s failed (%s): %s; retrying in %d s",
        task.name,
        reason,
        detail,
        countdown,
        extra={"order": str(lease.key)},
    )
    retry = task.retry(countdown=countdown, throw=False)
    queue.extend_wait(waiting, ttl_ms, routed_queue(task.name).value)
    raise retry from None


_WAITING = "tenantdb_waiting"
"""The request attribute naming the fence a step handed over to and the queue of the step that
waits at it, for ``StepTask.on_success``."""


def next_step_queue(remaining: Sequence[Mapping[str, Any]] | None, current: str) -> str:
    """The queue of the step Celery publishes after the one named ``current``.

    ``remaining`` is the request's chain: the steps still to come, the next one last (Celery
    pops it from there to publish it). The next step may run on another queue than this one
    (provision hands over to delivery), and the wait record must name the queue its message is
    in, or a backlog there reads as a lost message.
    """
    if remaining:
        name = remaining[-1].get("task")
        if name:
            return routed_queue(str(name)).value
    return routed_queue(current).value


class StepTask(Task[Any, Any]):
    """The task class of chain steps: once Celery has published the next step (it does so
    after the step returns, before ``on_success``), the hand-over covers its queue wait."""

    Request = "tasks.holding:HoldingRequest"
    """Held by the worker that receives it (``tasks.holding``)."""

    def on_success(self, retval: Any, task_id: str, args: Any, kwargs: Any) -> None:
        handed = getattr(self.request, _WAITING, None)
        if not isinstance(handed, tuple):
            return
        waiting, queue_name = handed
        try:
            workqueue().extend_wait(waiting, handover_ms(), queue_name)
        except RedisError:
            # The lease stays one lease long: a worker that receives the step holds it, and if
            # none does in time the sweep starts the pass afresh.
            log.warning(
                "could not cover a handed-over step's wait", extra={"order": str(waiting.key)}
            )


def _stop_chain(task: AnyTask) -> None:
    # Celery publishes the next step from the request's remaining chain after a success.
    task.request.chain = None


@shared_task(name=RECONCILE_ABORT)
def abort_pass(key: str) -> dict[str, str]:
    """Ask for another pass after a step failed for good.

    The dead step's lease is left to run out (no heartbeat renews it): the key is marked dirty
    for then, and the orphan sweep starts the next pass. Releasing it here would take the lease
    token as an argument, and anyone who can send a task could then end a running pass.
    """
    workqueue().request_pass(OrderKey.parse(key))
    log.error("a chain step failed for good; asked for another pass", extra={"order": key})
    return result(key, "Aborted")
