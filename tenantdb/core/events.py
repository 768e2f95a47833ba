"""A Kubernetes Event a pass records on its order, as core decides it. Pure.

Kind-independent: each kind's core says which Events a pass emits (never holding a credential
in a message), and the adapters write them (``tenantdb.adapters.events``), correlated so that
the same thing happening again moves one Event's count.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class EventType(StrEnum):
    """A Kubernetes Event's type."""

    NORMAL = "Normal"
    WARNING = "Warning"


@dataclass(frozen=True, slots=True)
class Event:
    """One Kubernetes Event the pass emits on the order."""

    type: EventType
    reason: str
    message: str
