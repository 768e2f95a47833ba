"""Celery task names and the queue each one runs on.

Task names are stable strings of the form ``tenantdb.<chain>.<step>``: they appear in Flower, in
the broker and in operators' dashboards, so renaming one is a breaking change. Every chain has a
queue of its own so that operators can scale the workers of one chain independently.

This module must never import Celery; the adapters turn these names into routes.
"""

from __future__ import annotations

from enum import StrEnum


class Queue(StrEnum):
    """The broker queues, one per chain."""

    RECONCILE = "reconcile"
    PROVISION = "provision"
    DELIVERY = "delivery"
    TEARDOWN = "teardown"


RECONCILE_ORDER = "tenantdb.reconcile.order"
"""The entry task: one pass over one order, given its key."""

RECONCILE_ABORT = "tenantdb.reconcile.abort"
"""A chain's error callback: gives the order's lease back after a step failed for good."""


def queue_for(task_name: str) -> Queue:
    """Return the queue a task runs on, from the chain part of its name.

    Raises:
        ValueError: the name is not ``tenantdb.<chain>.<step>`` with a known chain.
    """
    parts = task_name.split(".")
    if len(parts) == 3 and parts[0] == "tenantdb":
        try:
            return Queue(parts[1])
        except ValueError:
            pass
    raise ValueError(f"task name {task_name!r} is not tenantdb.<chain>.<step> with a known chain")
