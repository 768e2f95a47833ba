"""What ``tenantdb status`` says about an order: its state, why, and what happens next.

Pure: the CLI gathers the order's status from its cluster and the work queue's view of the key
(pending, locked, due times, the last pass) and this module words them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tenantdb.core.keys import OrderKey


@dataclass(frozen=True)
class QueueView:
    """The work queue's view of one key (epoch seconds)."""

    pending: bool = False
    locked: bool = False
    due_at: float | None = None
    refresh_at: float | None = None
    last_pass_at: float | None = None
    last_result: str = ""


@dataclass(frozen=True)
class OrderReport:
    """One row of ``tenantdb status``."""

    key: str
    ready: str
    reason: str
    database: str
    refreshed: str
    conditions: list[dict[str, Any]] = field(default_factory=list)
    last_pass: str = ""
    last_result: str = ""
    next_due: str = ""
    pending: bool = False
    locked: bool = False
    why: str = ""
    next: str = ""


_SUB_CONDITIONS = ("DatabaseReady", "DeliveryReady")


def _time(epoch: float | None) -> str:
    if epoch is None:
        return ""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _conditions(status: dict[str, Any]) -> list[dict[str, Any]]:
    conditions = status.get("conditions")
    return [c for c in conditions if isinstance(c, dict)] if isinstance(conditions, list) else []


def _find(conditions: list[dict[str, Any]], kind: str) -> dict[str, Any] | None:
    return next((c for c in conditions if c.get("type") == kind), None)


def compute_next(view: QueueView, now: float) -> str:
    """Say what happens next to the order, from the work queue's view."""
    if view.locked:
        return "a pass is running now"
    if view.pending:
        return "a pass is queued"
    upcoming = [t for t in (view.due_at, view.refresh_at) if t is not None]
    if upcoming:
        at = min(upcoming)
        if at <= now:
            return "a pass is due now and is picked up within a second"
        kind = "comes back" if at == view.due_at else "is refreshed"
        return f"{kind} at {_time(at)} (in {int(at - now)} s)"
    return "waits for an event: a change to the order, its children or its ControlPlane"


UNREADABLE = "ClusterUnreadable"
"""The reason of a row whose order could not be read: its cluster did not answer, or refused."""


def build_unreadable_report(
    key: OrderKey, problem: str, view: QueueView, now: float
) -> OrderReport:
    """The status row of an order whose cluster could not be read: not known, never NotFound."""
    return OrderReport(
        key=str(key),
        ready="",
        reason=UNREADABLE,
        database="",
        refreshed="",
        last_pass=_time(view.last_pass_at),
        last_result=view.last_result,
        why=f"its cluster cannot be read: {problem}",
        next=compute_next(view, now),
        pending=view.pending,
        locked=view.locked,
    )


def build_report(
    key: OrderKey, order: dict[str, Any] | None, view: QueueView, now: float
) -> OrderReport:
    """Build the status row of one order (``order`` None: not found on its cluster)."""
    if order is None:
        return OrderReport(
            key=str(key),
            ready="",
            reason="NotFound",
            database="",
            refreshed="",
            why="the order does not exist on its cluster",
            next=compute_next(view, now),
            pending=view.pending,
            locked=view.locked,
        )
    status = order.get("status") if isinstance(order.get("status"), dict) else {}
    assert isinstance(status, dict)  # noqa: S101 - narrowed above
    conditions = _conditions(status)
    ready = _find(conditions, "Ready")
    blocking = next(
        (
            c
            for t in _SUB_CONDITIONS
            if (c := _find(conditions, t)) is not None and c.get("status") != "True"
        ),
        None,
    )
    deleting = bool((order.get("metadata") or {}).get("deletionTimestamp"))
    if deleting:
        why = "the order is being deleted; its children are being torn down"
    elif blocking is not None:
        why = f"{blocking.get('type')}: {blocking.get('message', '')}"
    elif ready is None:
        why = "no pass has written a status yet"
    else:
        why = ""
    return OrderReport(
        key=str(key),
        ready=str(ready.get("status", "")) if ready else "",
        reason=str((blocking or ready or {}).get("reason", "")),
        database=str(status.get("databaseName", "")),
        refreshed=str(status.get("credentialsRefreshedAt", "") or ""),
        conditions=conditions,
        last_pass=_time(view.last_pass_at),
        last_result=view.last_result,
        next_due=_time(min((t for t in (view.due_at, view.refresh_at) if t), default=None)),
        pending=view.pending,
        locked=view.locked,
        why=why,
        next=compute_next(view, now),
    )
