"""The worker's Celery app: tenantdb's configuration plus the task modules a worker runs.

``tenantdb worker`` (or ``celery -A workers.app worker``) runs it; ``tenantdb flower`` runs
``workers.app:flower``. The configuration itself lives
in ``tenantdb.adapters.celeryapp`` so that every process that publishes agrees with the
workers. With ``TENANTDB_METRICS_PORT`` set, the worker's parent process serves /metrics for all
its prefork children (``tenantdb worker`` points them at a shared multiprocess directory).
"""

from __future__ import annotations

import os
from typing import Any

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


@worker_init.connect
def _serve_metrics(**_: Any) -> None:
    serve(load_settings().metrics_port)


@worker_process_shutdown.connect
def _forget_child(**_: Any) -> None:
    mark_process_dead(os.getpid())


@setup_logging.connect
def _json_logs(loglevel: int | str | None = None, **_: Any) -> None:
    # Connecting this signal keeps Celery from installing its own handlers.
    configure_logging(loglevel or "INFO")
