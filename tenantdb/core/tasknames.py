"""Celery task names and the queue each one runs on.

Task names are stable strings: the entry and its error callback are shared by every kind
(``tenantdb.reconcile.order``, ``tenantdb.reconcile.abort``; the order key names the kind), and
each kind's chain steps are ``tenantdb.<kind>.<chain>.<step>``, so two kinds never share a step's
name. They appear in Flower, in the broker and in operators' dashboards, so renaming one is a
breaking change. Every chain has a queue of its own, taken from the name's chain part, so that
operators can scale the workers of one chain independently.

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


def step_task_name(kind: str, chain: Queue, step: str) -> str:
    """The name of one chain step of a kind: ``tenantdb.<kind>.<chain>.<step>``."""
    return f"tenantdb.{kind}.{chain.value}.{step}"


def routed_queue(task_name: str) -> Queue:
    """The queue a task is published to: its chain's, or the default queue for any other task."""
    try:
        return queue_for(task_name)
    except ValueError:
        return Queue.RECONCILE


def queue_for(task_name: str) -> Queue:
    """Return the queue a task runs on, from the chain part of its name.

    Raises:
        ValueError: the name is neither ``tenantdb.<chain>.<step>`` nor
            ``tenantdb.<kind>.<chain>.<step>`` with a known chain.
    """
    parts = task_name.split(".")
    if len(parts) in (3, 4) and parts[0] == "tenantdb":
        try:
            return Queue(parts[-2])
        except ValueError:
            pass
    raise ValueError(
        f"task name {task_name!r} is not tenantdb.<chain>.<step> or"
        " tenantdb.<kind>.<chain>.<step> with a known chain"
    )
