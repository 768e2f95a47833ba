"""What the watcher remembers of an object between events, and how long it waits to reconnect.

Owns the fingerprints the kinds' update predicates (their ``mappers``) are fed in place of the
previous version of an object: each one is a small object of the same shape that the predicate
judges exactly as it judges the whole object (labels, annotations and child bodies are reduced to
digests, so a Secret's data never stays in memory), the reduced ControlPlane the Database CR
mapping and a target cluster's namespaced watches need (Keystone's placement and the namespace
assignments only), and the capped, jittered backoff of a watch reconnect.
It must never list, watch, enqueue or read a clock; randomness comes in as an argument.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from tenantdb.core.mariadbdatabase.controlplane import DB_CREDENTIALS_READY
from tenantdb.core.mariadbdatabase.models import ControlPlane, ControlPlaneSpec
from tenantdb.core.objects import ObjectMeta

Fingerprint = dict[str, Any]
"""A reduced object that an update predicate judges like the object it was computed from."""

# Bookkeeping the server rewrites on every write; the child predicate ignores it too.
_VOLATILE_METADATA = frozenset({"resourceVersion", "managedFields"})


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _str_map(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): str(v) for k, v in value.items()}


def _str_map_digest(value: Any) -> dict[str, str]:
    # The predicates compare these maps as str -> str; an empty map stays empty so that an absent
    # and an empty map compare equal, as they do in the predicate.
    if not isinstance(value, Mapping) or not value:
        return {}
    return {"sha256": _digest({str(k): str(v) for k, v in value.items()})}


def compute_order_fingerprint(obj: Mapping[str, Any]) -> Fingerprint:
    """Reduce an order to what ``should_enqueue_order_update`` compares."""
    meta = _meta(obj)
    return {
        "metadata": {
            "generation": meta.get("generation"),
            "labels": _str_map_digest(meta.get("labels")),
            "annotations": _str_map_digest(meta.get("annotations")),
            "deletionTimestamp": meta.get("deletionTimestamp"),
        }
    }


def should_enqueue_order_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Pass an order update on a spec, label or annotation change, or on deletion starting.

    A status write and a finalizer change leave generation, labels and annotations alone, so
    tenantdb's own writes wake nothing.
    """
    old_meta, new_meta = _meta(old), _meta(new)
    if old_meta.get("generation") != new_meta.get("generation"):
        return True
    if _str_map(old_meta.get("labels")) != _str_map(new_meta.get("labels")):
        return True
    if _str_map(old_meta.get("annotations")) != _str_map(new_meta.get("annotations")):
        return True
    return (
        old_meta.get("deletionTimestamp") is None and new_meta.get("deletionTimestamp") is not None
    )


def compute_control_plane_fingerprint(obj: Mapping[str, Any]) -> Fingerprint:
    """Reduce a ControlPlane to what ``should_enqueue_control_plane_update`` compares."""
    meta = _meta(obj)
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    ready = [
        {"type": DB_CREDENTIALS_READY, "status": str(c.get("status", ""))}
        for c in conditions or ()
        if isinstance(c, Mapping) and c.get("type") == DB_CREDENTIALS_READY
    ]
    return {
        "metadata": {
            "generation": meta.get("generation"),
            "deletionTimestamp": meta.get("deletionTimestamp"),
        },
        "status": {"conditions": ready[:1]},
    }


def compute_child_fingerprint(obj: Mapping[str, Any]) -> Fingerprint:
    """Reduce a child to a digest of everything ``should_enqueue_child_update`` compares."""
    body = {k: v for k, v in obj.items() if k != "metadata"}
    body["metadata"] = {k: v for k, v in _meta(obj).items() if k not in _VOLATILE_METADATA}
    return {"metadata": {}, "sha256": _digest(body)}


def compute_order_index_entry(order: Mapping[str, Any]) -> dict[str, Any]:
    """Reduce an order to what ``map_control_plane`` reads: its name and its controlPlaneRef."""
    meta = _meta(order)
    spec = order.get("spec")
    ref = spec.get("controlPlaneRef") if isinstance(spec, Mapping) else None
    entry: dict[str, Any] = {
        "metadata": {"namespace": meta.get("namespace", ""), "name": meta.get("name", "")}
    }
    if isinstance(ref, Mapping):
        entry["spec"] = {"controlPlaneRef": {k: ref[k] for k in ("namespace", "name") if k in ref}}
    return entry


def compute_keystone_placement(obj: Mapping[str, Any]) -> ControlPlane | None:
    """Reduce a ControlPlane to its name, Keystone's placement and its namespace assignments
    (namespace and cluster only), or None when unreadable."""
    meta = _meta(obj)
    spec = obj.get("spec")
    services = spec.get("services") if isinstance(spec, Mapping) else None
    assignments = spec.get("namespaceAssignments") if isinstance(spec, Mapping) else None
    reduced = [
        {k: entry[k] for k in ("namespace", "targetClusterRef") if k in entry}
        for entry in assignments or ()
        if isinstance(entry, Mapping)
    ]
    try:
        return ControlPlane(
            metadata=ObjectMeta(
                name=str(meta.get("name", "")), namespace=str(meta.get("namespace", ""))
            ),
            spec=ControlPlaneSpec.model_validate(
                {"services": services, "namespaceAssignments": reduced}
            ),
        )
    except ValidationError:
        return None


def compute_backoff(attempt: int, *, base: float, cap: float, jitter: float) -> float:
    """Return the wait before reconnect number ``attempt`` (1-based): capped, half jittered.

    The ceiling doubles from ``base`` up to ``cap``; the wait is between half the ceiling and
    the ceiling, so replicas that lost the same server spread out without ever retrying at once.

    Args:
        attempt: how many reconnects in a row failed, this one included; 0 waits nothing.
        base: the ceiling of the first wait, in seconds.
        cap: the largest ceiling, in seconds.
        jitter: a number in [0, 1).
    """
    if attempt <= 0:
        return 0.0
    ceiling = min(cap, base * 2.0 ** min(attempt - 1, 32))
    return ceiling / 2 + ceiling / 2 * min(max(jitter, 0.0), 1.0)
