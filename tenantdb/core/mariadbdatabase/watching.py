"""What the watcher remembers of a ControlPlane between events, and of the orders that name one.

Owns the ControlPlane's fingerprint (what its update predicate compares: generation, deletion,
the DBCredentialsReady condition), the fingerprints of the shared objects whose events wake
every order of a ControlPlane (the MariaDB, reduced to its Ready condition; a secret store, the
shared ServiceAccount and Certificate, reduced to everything but their status), the reduced
order the ControlPlane index keeps (its cluster, name and controlPlaneRef), and the reduced
ControlPlane the watcher's mappings and a target cluster's namespaced watches need (Keystone's
placement, the shared MariaDB's name, the secret store and the namespace assignments only). It
must never list, watch, enqueue or read a clock.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from tenantdb.core.mariadbdatabase.controlplane import DB_CREDENTIALS_READY
from tenantdb.core.mariadbdatabase.mappers import ORDER_CLUSTER
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


def _digest(value: Any) -> Fingerprint:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return {"metadata": {}, "sha256": hashlib.sha256(text.encode()).hexdigest()}


def compute_mariadb_fingerprint(obj: Mapping[str, Any]) -> Fingerprint:
    """Reduce a mariadb-operator MariaDB to what a pass reads of it: whether its Ready condition
    is True. The operator rewrites the rest of its status as its servers move (replication,
    recovery, storage); each such write would otherwise wake every order placed on it."""
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    ready = any(
        isinstance(c, Mapping) and c.get("type") == "Ready" and c.get("status") == "True"
        for c in conditions or ()
    )
    meta = metadata_of(obj)
    return _digest({"ready": ready, "deletionTimestamp": meta.get("deletionTimestamp")})


def compute_spec_fingerprint(obj: Mapping[str, Any]) -> Fingerprint:
    """Reduce a shared object a pass reads or applies for its spec and metadata (a secret store,
    the shared ServiceAccount or Certificate) to those, without the server's bookkeeping: a
    status write (a store validated again, a certificate's renewal times) wakes no order."""
    meta = {
        k: v for k, v in metadata_of(obj).items() if k not in ("resourceVersion", "managedFields")
    }
    return _digest(
        {**{k: v for k, v in obj.items() if k not in ("status", "metadata")}, "metadata": meta}
    )


def compute_order_index_entry(order: Mapping[str, Any], cluster: str) -> dict[str, Any]:
    """Reduce an order of a cluster to what ``map_control_plane`` reads: the cluster it lives on
    (under ``ORDER_CLUSTER``, where ``mappers.compute_order_cluster`` reads it), its name and
    its controlPlaneRef."""
    meta = metadata_of(order)
    spec = order.get("spec")
    ref = spec.get("controlPlaneRef") if isinstance(spec, Mapping) else None
    entry: dict[str, Any] = {
        ORDER_CLUSTER: cluster,
        "metadata": {"namespace": meta.get("namespace", ""), "name": meta.get("name", "")},
    }
    if isinstance(ref, Mapping):
        entry["spec"] = {"controlPlaneRef": {k: ref[k] for k in ("namespace", "name") if k in ref}}
    return entry


def _reduce_infrastructure(value: Mapping[str, Any]) -> dict[str, Any]:
    # Only the shared database's clusterRef names an object a pass reads (the MariaDB).
    database = value.get("database")
    if not isinstance(database, Mapping):
        return {}
    return {"database": {k: database[k] for k in ("clusterRef",) if k in database}}


def compute_keystone_placement(obj: Mapping[str, Any]) -> ControlPlane | None:
    """Reduce a ControlPlane to its name, Keystone's placement (with a dedicated database), the
    shared database's clusterRef, its secretStoreRef and its namespace assignments (namespace and
    cluster only), or None when unreadable.

    An unreadable shared database or store reference is left out rather than losing Keystone's
    placement with it: the pass of such a ControlPlane's orders reads neither.
    """
    meta = metadata_of(obj)
    spec = obj.get("spec")
    services = spec.get("services") if isinstance(spec, Mapping) else None
    assignments = spec.get("namespaceAssignments") if isinstance(spec, Mapping) else None
    reduced = [
        {k: entry[k] for k in ("namespace", "targetClusterRef") if k in entry}
        for entry in assignments or ()
        if isinstance(entry, Mapping)
    ]
    placement: dict[str, Any] = {"services": services, "namespaceAssignments": reduced}
    extra: dict[str, Any] = {}
    if isinstance(spec, Mapping):
        if isinstance(spec.get("infrastructure"), Mapping):
            extra["infrastructure"] = _reduce_infrastructure(spec["infrastructure"])
        if isinstance(spec.get("secretStoreRef"), Mapping):
            extra["secretStoreRef"] = spec["secretStoreRef"]
    name = ObjectMeta(name=str(meta.get("name", "")), namespace=str(meta.get("namespace", "")))
    for fields in ({**placement, **extra}, placement):
        try:
            return ControlPlane(metadata=name, spec=ControlPlaneSpec.model_validate(fields))
        except ValidationError:
            continue
    return None
