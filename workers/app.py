"""The worker's Celery app: tenantdb's configuration plus the task modules a worker runs.

``celery -A workers.app worker`` (or ``tenantdb worker``) runs it. The configuration itself lives in
``tenantdb.adapters.celeryapp`` so that every process that publishes agrees with the workers.
"""

from __future__ import annotations

from tenantdb.adapters.celeryapp import build_celery_app
from tenantdb.settings import load_settings

TASK_MODULES = ("tasks.reconcile", "tasks.chain", "tasks.mariadbdatabase")

app = build_celery_app(load_settings(), include=TASK_MODULES)
