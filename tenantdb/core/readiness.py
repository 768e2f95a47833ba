"""An order's readiness as the orders gauges count it: the Ready status, a reason, since when.

The orders gauges are labelled by kind, Ready status and reason, so the reason must come from a
small, fixed set: tenantdb writes every reason from its kinds' enumerations, and anything that
is not a plain CamelCase word of at most ``MAX_REASON`` characters is counted as ``Other``.
For an order that is not Ready the reason is that of its first other condition that is not
True (a MariaDBDatabase's DatabaseReady or DeliveryReady says why, where its Ready only says
NotAllReady), else the Ready condition's own. An order whose status holds no Ready condition
yet is ``Unknown/NoReadyCondition``.

The state is kept as one short text per order (``encode_state``): ``<status>/<reason>/<since>``,
``since`` being the epoch second the Ready condition last changed status (the order's creation
when there is no condition), or empty when neither is known. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

MAX_REASON = 64
OTHER_REASON = "Other"
NO_CONDITION = "NoReadyCondition"
STATUSES = ("True", "False", "Unknown")

_REASON = re.compile(rf"[A-Za-z][A-Za-z0-9]{{0,{MAX_REASON - 1}}}")


@dataclass(frozen=True, slots=True)
class ReadyState:
    """The Ready status (True, False or Unknown), the bounded reason, and since when (or None)."""

    status: str
    reason: str
    since: float | None = None

    @property
    def ready(self) -> bool:
        """Whether the order is Ready."""
        return self.status == "True"


def bounded_reason(reason: object) -> str:
    """The reason as the gauges label it: itself when a plain CamelCase word, else Other."""
    text = str(reason or "")
    return text if _REASON.fullmatch(text) else OTHER_REASON


def _epoch(stamp: object) -> float | None:
    if not isinstance(stamp, str) or not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return None


def _conditions(order: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    status = order.get("status")
    found = status.get("conditions") if isinstance(status, Mapping) else None
    if not isinstance(found, list):
        return []
    return [c for c in found if isinstance(c, Mapping)]


def compute_ready_state(order: Mapping[str, Any]) -> ReadyState:
    """The readiness of an order as stored (its ``status.conditions``)."""
    conditions = _conditions(order)
    ready = next((c for c in conditions if c.get("type") == "Ready"), None)
    meta = order.get("metadata")
    created = _epoch(meta.get("creationTimestamp")) if isinstance(meta, Mapping) else None
    if ready is None:
        return ReadyState("Unknown", NO_CONDITION, created)
    status = str(ready.get("status"))
    status = status if status in STATUSES else "Unknown"
    reason = ready.get("reason")
    if status != "True":
        blocking = next(
            (c for c in conditions if c.get("type") != "Ready" and c.get("status") != "True"),
            None,
        )
        if blocking is not None and blocking.get("reason"):
            reason = blocking.get("reason")
    since = _epoch(ready.get("lastTransitionTime"))
    return ReadyState(status, bounded_reason(reason), created if since is None else since)


def encode_state(state: ReadyState) -> str:
    """The state as one text: ``<status>/<reason>/<since>``."""
    since = "" if state.since is None else str(int(state.since))
    return f"{state.status}/{state.reason}/{since}"


def decode_state(text: str) -> ReadyState | None:
    """A state from ``encode_state``'s text; None when it is not one.

    The short form ``<status>/<reason>`` (no since) is read too.
    """
    status, _, rest = text.partition("/")
    reason, _, since = rest.partition("/")
    if status not in STATUSES or bounded_reason(reason) != reason:
        return None
    try:
        when = float(since) if since else None
    except ValueError:
        return None
    return ReadyState(status, reason, when)
