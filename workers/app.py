"""The worker's Celery app: tenantdb's configuration plus the task modules a worker runs.

``tenantdb worker`` (or ``celery -A workers.app worker``) runs it; ``tenantdb flower`` runs
``workers.app:flower``. The configuration itself lives
in ``tenantdb.adapters.celeryapp`` so that every process that publishes agrees with the
workers. With ``TENANTDB_METRICS_PORT`` set, the worker's parent process serves /metrics for all
its prefork children (``tenantdb worker`` points them at a shared multiprocess directory), and
/livez, which fails while the consumer does not go round its event loop (``ConsumerLiveness``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from celery import bootsteps
from celery.signals import setup_logging, worker_init, worker_process_shutdown

from tenantdb.adapters.celeryapp import build_celery_app
from tenantdb.adapters.metrics import mark_process_dead, serve
from tenantdb.logs import configure_logging
from tenantdb.settings import load_settings

TASK_MODULES = (
    "tasks.reconcile",
    "tasks.chain",
    "tasks.holding",
    "tasks.mariadbdatabase",
    "tasks.mysqldatabase",
)
"""The task modules of every worker: the entry, the chain protocol, and each kind's declaration."""

app = build_celery_app(load_settings(), include=(*TASK_MODULES, *load_settings().kind_module_names))

flower = build_celery_app(
    load_settings(),
    include=(*TASK_MODULES, *load_settings().kind_module_names),
    guard_transport=False,
)
"""The app ``tenantdb flower`` runs: the same configuration on kombu's own transport, whose URL
scheme Flower's broker page reads; Flower runs no task, so it needs no worker's guard."""


class ConsumerLiveness:
    """Whether the worker's consumer goes round its event loop, for the liveness probe.

    The consumer's loop receives the messages, acknowledges them and hands them to the task
    processes; a timer on it ticks every ``tick_seconds`` (5 s, or a quarter of the limit when
    that is shorter) while it runs. It stops ticking
    while the broker connection is lost (the consumer is reconnecting) and when the loop is
    blocked, however well the metrics thread answers. Busy task processes do not stop it.
    """

    def __init__(self, max_age: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_age = max_age
        self.tick_seconds = min(5.0, max_age / 4)
        self._clock = clock
        self._at = clock()

    def tick(self) -> None:
        """The loop went round just now."""
        self._at = self._clock()

    def __call__(self) -> str | None:
        """None while alive; otherwise one line saying for how long the loop has not ticked."""
        age = self._clock() - self._at
        if age <= self.max_age:
            return None
        return (
            f"the consumer has not gone round its event loop for {age:.0f} s (limit"
            f" {self.max_age:.0f} s): its broker connection is down or the loop is blocked"
        )


LIVENESS = ConsumerLiveness(load_settings().worker_liveness_seconds)


class _LoopTicks(bootsteps.StartStopStep):
    """Ticks ``LIVENESS`` from a timer of the consumer's event loop while the consumer runs."""

    requires = ("celery.worker.consumer.tasks:Tasks",)

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self._timer: Any = None

    def start(self, parent: Any) -> None:
        LIVENESS.tick()
        self._timer = parent.timer.call_repeatedly(LIVENESS.tick_seconds, LIVENESS.tick)

    def stop(self, parent: Any) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


app.steps["consumer"].add(_LoopTicks)


@worker_init.connect
def _serve_metrics(**_: Any) -> None:
    serve(load_settings().metrics_port, LIVENESS)


@worker_process_shutdown.connect
def _forget_child(**_: Any) -> None:
    mark_process_dead(os.getpid())


@setup_logging.connect
def _json_logs(loglevel: int | str | None = None, **_: Any) -> None:
    # Connecting this signal keeps Celery from installing its own handlers.
    configure_logging(loglevel or "INFO")
