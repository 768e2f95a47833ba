"""The worker's Celery app: tenantdb's configuration plus the task modules a worker runs.

``tenantdb worker`` (or ``celery -A workers.app worker``) runs it; ``tenantdb flower`` runs
``workers.app:flower``. The configuration itself lives
in ``tenantdb.adapters.celeryapp`` so that every process that publishes agrees with the
workers. With ``TENANTDB_METRICS_PORT`` set, the worker's parent process serves /metrics for all
its prefork children (``tenantdb worker`` points them at a shared multiprocess directory), and
/livez, which fails while the consumer does not go round its event loop (``consumer_liveness``).
"""

from __future__ import annotations

import os
from typing import Any

from celery import bootsteps
from celery.signals import setup_logging, worker_init, worker_process_shutdown

from tenantdb.adapters.celeryapp import build_celery_app
from tenantdb.adapters.metrics import Progress, mark_process_dead, serve
from tenantdb.adapters.mysqladmin import warn_about_plaintext
from tenantdb.adapters.redisclient import warn_about_access
from tenantdb.core.served import task_modules
from tenantdb.logs import configure_logging
from tenantdb.settings import load_settings

TASK_MODULES = ("tasks.reconcile", "tasks.chain", "tasks.holding", *task_modules())
"""The task modules of every worker: the entry, the chain protocol, and the declaration of each
kind in ``tenantdb.core.served.KINDS``."""

app = build_celery_app(load_settings(), include=(*TASK_MODULES, *load_settings().kind_module_names))

flower = build_celery_app(
    load_settings(),
    include=(*TASK_MODULES, *load_settings().kind_module_names),
    guard_transport=False,
)
"""The app ``tenantdb flower`` runs: the same configuration on kombu's own transport, whose URL
scheme Flower's broker page reads; Flower runs no task, so it needs no worker's guard."""


def consumer_liveness(max_age: float) -> Progress:
    """Whether the worker's consumer goes round its event loop, for the liveness probe.

    The consumer's loop receives the messages, acknowledges them and hands them to the task
    processes; a timer on it tells of progress while it runs (``_LoopTicks``). It stops while
    the broker connection is lost (the consumer is reconnecting) and when the loop is blocked,
    however well the metrics thread answers. Busy task processes do not stop it.
    """
    return Progress(
        max_age,
        "the consumer has not gone round its event loop for {age} s (limit {limit} s): its"
        " broker connection is down or the loop is blocked",
    )


LIVENESS = consumer_liveness(load_settings().worker_liveness_seconds)
TICK_SECONDS = min(5.0, LIVENESS.max_age / 4)
"""How often the consumer's loop tells of progress: 5 s, or a quarter of the limit if shorter."""


class _LoopTicks(bootsteps.StartStopStep):
    """Tells ``LIVENESS`` of progress from a timer of the consumer's event loop while the
    consumer runs."""

    requires = ("celery.worker.consumer.tasks:Tasks",)

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self._timer: Any = None

    def start(self, parent: Any) -> None:
        LIVENESS.progressed()
        self._timer = parent.timer.call_repeatedly(TICK_SECONDS, LIVENESS.progressed)

    def stop(self, parent: Any) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


app.steps["consumer"].add(_LoopTicks)


@worker_init.connect
def _serve_metrics(**_: Any) -> None:
    serve(load_settings().metrics_port, LIVENESS)
    warn_about_access(load_settings())
    warn_about_plaintext(load_settings())


@worker_process_shutdown.connect
def _forget_child(**_: Any) -> None:
    mark_process_dead(os.getpid())


@setup_logging.connect
def _json_logs(loglevel: int | str | None = None, **_: Any) -> None:
    # Connecting this signal keeps Celery from installing its own handlers.
    configure_logging(loglevel or "INFO")
