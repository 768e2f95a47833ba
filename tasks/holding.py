"""The worker's hold on the chain steps and entries it has received but not started.

A hand-over extends the pass's lease over the next step's wait in its queue, up to the broker's
visibility timeout, since a message waiting in Redis is not lost. Once a worker has received the
message (prefetched it, or is waiting out a retry's countdown), the message lives only in that
worker until the visibility timeout: a worker killed then would block the order for as long. So
the worker's main process holds each such step: it cuts the pass's lease to one lease length and
renews it until the step starts (its claim moves the fence, and the hold lets go). When the
worker dies, the renewals stop, the lease runs out, and the orphan sweep starts a new pass; the
message, redelivered later, finds the fence moved and ends.

An entry's message is held the same way through the order's pending mark: it is cut to one lease
length and renewed until the pass begins (which clears it), and the order is marked dirty for a
second after the mark would run out, so the orphan sweep publishes a new entry once the worker
is gone. A pending mark held this way renews for at most a second message an event published
meanwhile; the holder lets go when the mark is gone.

A hold ends when a pool process starts the task (``HoldingRequest.on_accepted``): from there the
pass holds the order itself. A task that fails before its pass begins (Redis timing out during a
fault) leaves the mark or fence behind; no longer renewed, it runs out within a lease and the
orphan sweep starts the order's pass afresh, where a hold renewed on would have kept every later
event from publishing.

When the worker loses its broker connection, Celery forgets the messages it had received and not
started (their delivery tags belong to the lost channel), and what the broker makes of them
depends on whether the channel could put them back: if Redis was away at that moment they stay
unacknowledged until the visibility timeout. So the worker lets go of every hold then
(``LetGoOnConnectionLoss``, a consumer bootstep): each cut lease runs out within one lease
length and the orphan sweep starts the order's pass afresh. A message put back at once is
received and held again; either way no order waits for the visibility timeout.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import replace
from typing import Any

from celery import bootsteps
from celery.signals import worker_init, worker_ready
from celery.worker.request import Request
from redis import RedisError

from tasks.runtime import workqueue
from tenantdb.adapters.workqueue import Lease, ready_fence
from tenantdb.core.keys import InvalidOrderKeyError, OrderKey
from tenantdb.core.tasknames import RECONCILE_ORDER

log = logging.getLogger(__name__)

HELD = "~"
"""What a hold appends to the fence it holds (``WorkQueue.hold``)."""


class StepHolds:
    """The steps and entries this worker holds, renewed from a thread every third of a lease."""

    def __init__(self) -> None:
        self._held: dict[str, Lease] = {}
        self._entries: set[OrderKey] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def received(self, name: str, args: Any, retries: int) -> None:
        """A message arrived: hold the pass it continues, or the entry it starts."""
        if name == RECONCILE_ORDER and isinstance(args, (list, tuple)):
            self._received_entry(args)
            return
        if not isinstance(args, (list, tuple)) or len(args) != 3:
            return
        key, pass_name, position = args
        try:
            order = OrderKey.parse(str(key))
            queue = workqueue()
            found = queue.find(order, str(pass_name))
            fence = ready_fence(int(position), retries)
            # A fence a hold marked ("~") is the same fence: the message came back after this or
            # another worker let go of it (a lost broker connection), and is held again.
            if found is None or found.fence.removesuffix(HELD) != fence:
                return  # a late or duplicate copy: it ends as soon as it runs
            lease = replace(found, fence=fence)
            if queue.hold(lease):
                with self._lock:
                    self._held[lease.value] = lease
                self._start()
        except (InvalidOrderKeyError, ValueError, RedisError) as exc:
            # Without a hold the hand-over's longer lease stands: slower after a crash, not wrong.
            log.warning("could not hold a received step (%s)", type(exc).__name__)

    def _received_entry(self, args: list[Any] | tuple[Any, ...]) -> None:
        # An entry's pending mark says a pass is queued; a retry's countdown message is the
        # key's pending pass too (``reconcile_order`` marks it).
        try:
            order = OrderKey.parse(str(args[0]))
            if workqueue().hold_pending(order):
                with self._lock:
                    self._entries.add(order)
                self._start()
        except (IndexError, InvalidOrderKeyError, RedisError) as exc:
            log.warning("could not hold a received entry (%s)", type(exc).__name__)

    def started(self, name: str, args: Any) -> None:
        """A message this worker held has started: stop holding for it.

        From here its pass holds the order itself (``begin`` clears the entry's pending mark, a
        step's claim moves its fence). A task that fails before it gets there (Redis timing out,
        say) leaves the mark or fence in place: renewing it still would keep the order from
        every later pass, so it is let run out within a lease and the orphan sweep takes over.
        """
        if not isinstance(args, (list, tuple)) or not args:
            return
        try:
            order = OrderKey.parse(str(args[0]))
        except InvalidOrderKeyError:
            return
        with self._lock:
            if name == RECONCILE_ORDER:
                self._entries.discard(order)
                return
            named = str(args[1]) if len(args) > 1 else None
            for value, lease in list(self._held.items()):
                if lease.key == order and named in (None, lease.name):
                    del self._held[value]

    def let_go(self) -> int:
        """Stop renewing every hold (the messages are no longer this worker's); how many."""
        with self._lock:
            count = len(self._held) + len(self._entries)
            self._held.clear()
            self._entries.clear()
        return count

    def _start(self) -> None:
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            self._thread = threading.Thread(target=self._run, name="step-holds", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        queue = workqueue()
        interval = queue.lock_ttl_ms / 3000
        while True:
            threading.Event().wait(interval)
            with self._lock:
                held = list(self._held.values())
                entries = list(self._entries)
            for order in entries:
                try:
                    if not queue.hold_pending(order):
                        with self._lock:
                            self._entries.discard(order)
                except RedisError:
                    continue
            for lease in held:
                try:
                    kept = queue.hold(lease)
                except RedisError:
                    continue  # the lease may still run out; the sweep then takes the order
                if not kept:
                    with self._lock:
                        self._held.pop(lease.value, None)


_HOLDS = StepHolds()


class HoldingRequest(Request):
    """The worker's request for the entry and the chain steps: held as soon as it is built.

    The worker's main process builds it the moment the message arrives, before it logs the
    receipt or hands the message to a child, so no window is left in which the worker has the
    message and the order has no hold.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _HOLDS.received(self.name, self.args, int(self.request_dict.get("retries") or 0))

    def on_accepted(self, pid: str, time_accepted: float) -> None:
        """A pool process started the task: the hold's work is done."""
        _HOLDS.started(self.name, self.args)
        super().on_accepted(pid, time_accepted)


REQUEST = f"{__name__}:HoldingRequest"
"""The ``Request`` option of the entry and step tasks."""


class LetGoOnConnectionLoss(bootsteps.StartStopStep):
    """A consumer bootstep: let go of the holds whenever the consumer stops.

    Celery stops the consumer's steps when its broker connection is lost (before it reconnects)
    and when the worker shuts down; in both cases the received messages are no longer this
    worker's to run.
    """

    def stop(self, parent: Any) -> None:
        """Let go of every hold; the orders are swept within a lease."""
        released = _HOLDS.let_go()
        if released:
            # The broker connection was lost, or the worker is shutting down.
            log.info(
                "the consumer stopped: no longer holding %d received messages; an order still "
                "waiting on one gets a new pass within a lease",
                released,
            )


@worker_init.connect
def _add_consumer_step(sender: Any, **_: Any) -> None:
    # Sent after the worker imported its task modules and before it builds its consumer.
    sender.app.steps["consumer"].add(LetGoOnConnectionLoss)


@worker_ready.connect
def _warm_up(**_: Any) -> None:
    # The first message a worker receives is held at once, not after connecting and loading the
    # scripts: a worker killed in between leaves that message for the visibility timeout.
    try:
        workqueue().load_scripts()
    except RedisError as exc:
        log.warning("could not reach Redis to hold received steps (%s)", type(exc).__name__)
