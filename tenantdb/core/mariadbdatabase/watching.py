"""What the watcher remembers of a ControlPlane between events, and of the orders that name one.

Owns the ControlPlane's fingerprint (what its update predicate compares: generation, deletion,
the DBCredentialsReady condition), the reduced order the ControlPlane index keeps (its name and
controlPlaneRef), and the reduced ControlPlane the Database CR mapping and a target cluster's
namespaced watches need (Keystone's placement and the namespace assignments only). It must
never list, watch, enqueue or read a clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from tenantdb.core.mariadbdatabase.controlplane import DB_CREDENTIALS_READY
from tenantdb.core.mariadbdatabase.models import ControlPlane, ControlPlaneSpec
from tenantdb.core.objects import ObjectMeta, metadata_of
from tenantdb.core.watching import Fingerprint


def compute_control_plane_fingerprint(obj: Mapping[str, Any]) -> Fingerprint:
    """Reduce a ControlPlane to what ``should_enqueue_control_plane_update`` compares."""
    meta = metadata_of(obj)
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


def compute_order_index_entry(order: Mapping[str, Any]) -> dict[str, Any]:
    """Reduce an order to what ``map_control_plane`` reads: its name and its controlPlaneRef."""
    meta = metadata_of(order)
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
    meta = metadata_of(obj)
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
