"""The worker's hold on the chain steps it has received but not started.

A hand-over extends the pass's lease over the next step's wait in its queue, up to the broker's
visibility timeout, since a message waiting in Redis is not lost. Once a worker has received the
message (prefetched it, or is waiting out a retry's countdown), the message lives only in that
worker until the visibility timeout: a worker killed then would block the order for as long. So
the worker's main process holds each such step: it cuts the pass's lease to one lease length and
renews it until the step starts (its claim moves the fence, and the hold lets go). When the
worker dies, the renewals stop, the lease runs out, and the orphan sweep starts a new pass; the
message, redelivered later, finds the fence moved and ends.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from celery.signals import task_received
from redis import RedisError

from tasks.runtime import workqueue
from tasks.scaffold import STEP_TASKS
from tenantdb.adapters.workqueue import Lease, ready_fence
from tenantdb.core.keys import InvalidOrderKeyError, OrderKey

log = logging.getLogger(__name__)


class StepHolds:
    """The steps this worker holds, renewed from a thread every third of a lease."""

    def __init__(self) -> None:
        self._held: dict[str, Lease] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def received(self, name: str, args: Any, retries: int) -> None:
        """A step message arrived: hold its pass's fence if it is waiting for exactly this copy."""
        if name not in STEP_TASKS or not isinstance(args, (list, tuple)) or len(args) != 4:
            return
        key, pass_name, started, position = args
        try:
            order = OrderKey.parse(str(key))
            queue = workqueue()
            lease = queue.find(order, str(pass_name), int(started))
            if lease is None or lease.fence != ready_fence(int(position), retries):
                return  # a late or duplicate copy: it ends as soon as it runs
            if queue.hold(lease):
                with self._lock:
                    self._held[lease.value] = lease
                self._start()
        except (InvalidOrderKeyError, ValueError, RedisError) as exc:
            # Without a hold the hand-over's longer lease stands: slower after a crash, not wrong.
            log.warning("could not hold a received step (%s)", type(exc).__name__)

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
            if not held:
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


@task_received.connect
def _hold_received_step(request: Any = None, **_: Any) -> None:
    # Sent in the worker's main process for every message it receives.
    if request is not None:
        _HOLDS.received(request.name, request.args, int(request.request_dict.get("retries") or 0))
