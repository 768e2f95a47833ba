"""What a MysqlDatabase reads off its MysqlFailoverGroup: the active site, and whether it is fenced.

A group is fenced while an in-place restore is requested or running (its spec asks for one and
its status has not reached a terminal phase) and while a planned failover is between its first
and last step. A fenced group gets no tenant DDL: the order waits Pending, and a drop is
deferred, so a maintenance window working as designed turns no order red. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tenantdb.core.mysqldatabase.reasons import Reason

RESTORE_TERMINAL = frozenset({"", "Succeeded", "Failed"})
FAILOVER_FENCING = frozenset(
    {
        "Pending",
        "Validating",
        "Draining",
        "WaitingForLag",
        "WaitingForDragonflySync",
        "PromotingDragonfly",
        "Promoting",
        "Resuming",
    }
)


@dataclass(frozen=True, slots=True)
class Fence:
    """Why the group takes no tenant DDL now."""

    reason: Reason
    message: str


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def compute_fence(group: Mapping[str, Any]) -> Fence | None:
    """The fence a group is under (a restore first, then a planned failover), or None."""
    name = str(_mapping(group.get("metadata")).get("name", ""))
    spec, status = _mapping(group.get("spec")), _mapping(group.get("status"))
    if spec.get("restoreInPlace"):
        restore = status.get("restoreInPlace")
        if not isinstance(restore, Mapping):
            return Fence(
                Reason.RESTORE_IN_PROGRESS,
                f'group "{name}" is mid in-place restore (phase requested)',
            )
        phase = str(restore.get("phase") or "")
        if phase not in RESTORE_TERMINAL:
            return Fence(
                Reason.RESTORE_IN_PROGRESS,
                f'group "{name}" is mid in-place restore (phase {phase})',
            )
    failover = str(_mapping(status.get("plannedFailover")).get("phase") or "")
    if failover in FAILOVER_FENCING:
        return Fence(
            Reason.PLANNED_FAILOVER_IN_PROGRESS,
            f'group "{name}" is mid planned failover (phase {failover})',
        )
    return None


def compute_active_site(group: Mapping[str, Any]) -> str:
    """The site the group's primary is on ("" while it has none)."""
    return str(_mapping(group.get("status")).get("activeSite") or "")
