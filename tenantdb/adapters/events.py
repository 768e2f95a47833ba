"""Kubernetes Events on an order, the way ``kubectl describe`` shows them.

Owns writing core/v1 Events for an order: one Event per (order, type, reason, message), its
``count`` and ``lastTimestamp`` moved when the same thing happens again, as client-go's event
correlator does, so an order refused every minute keeps one Event instead of a new one each
time. Event names are derived from what they say, so every worker process lands on the same
Event. A failed Event write is logged and dropped: an Event is a courtesy, never a reason to
fail a pass. Messages are built by core and never hold a credential.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from tenantdb.adapters.kube import EVENT, ConflictError, KubeClient, KubeError

log = logging.getLogger(__name__)

COMPONENT = "tenantdb"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def event_name(involved: Mapping[str, Any], kind: str, reason: str, message: str) -> str:
    """The name of the Event that records one thing happening to one object."""
    meta = involved.get("metadata") or {}
    digest = hashlib.sha256(
        "\n".join((str(meta.get("uid", "")), kind, reason, message)).encode()
    ).hexdigest()[:16]
    return f"{meta.get('name', 'object')}.{digest}"


def record_event(
    client: KubeClient, involved: Mapping[str, Any], kind: str, reason: str, message: str
) -> None:
    """Record that ``reason`` happened to ``involved`` (``kind`` is Normal or Warning)."""
    meta = involved.get("metadata") or {}
    namespace = str(meta.get("namespace") or "default")
    name = event_name(involved, kind, reason, message)
    now = _now()
    body = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": namespace},
        "involvedObject": {
            "apiVersion": involved.get("apiVersion"),
            "kind": involved.get("kind"),
            "name": meta.get("name"),
            "namespace": namespace,
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
        },
        "type": kind,
        "reason": reason,
        "message": message,
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
    try:
        # Most Events are new: one create. One that happened before answers 409, and its
        # count and last time move instead.
        try:
            client.create(body)
            return
        except ConflictError:
            pass
        existing = client.get_or_none(EVENT, namespace, name)
        if existing is not None:
            count = int(existing.get("count") or 1) + 1
            client.patch(EVENT, namespace, name, {"count": count, "lastTimestamp": now})
    except KubeError as error:
        log.warning(
            "could not record event %s on %s/%s: %s", reason, namespace, meta.get("name"), error
        )
