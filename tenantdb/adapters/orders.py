"""The reads and writes every order kind's pass makes on the order itself.

Owns fetching an order on its cluster, replacing its finalizers (guarded by the
resourceVersion it was read at) and writing its status through the status subresource, for any
kind registered in ``tenantdb.core.kinds``. A kind's own adapter does the rest of its I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tenantdb.adapters.clusters import ClusterRegistry
from tenantdb.adapters.kube import resource_of
from tenantdb.core.keys import OrderKey
from tenantdb.core.kinds import identity_for


class OrderStore:
    """Orders of every registered kind, on every registered cluster."""

    def __init__(self, clusters: ClusterRegistry) -> None:
        """Bind to the clusters orders live on."""
        self.clusters = clusters

    def fetch(self, key: OrderKey) -> dict[str, Any] | None:
        """The order as stored; None when it is gone.

        Raises:
            ClusterUnavailableError: the order's cluster is not registered.
            UnknownKindError: the key names a kind no module registered.
            KubeError: the read failed.
        """
        resource = resource_of(identity_for(key))
        return self.clusters.get(key.cluster).get_or_none(resource, key.namespace, key.name)

    def set_finalizers(
        self, key: OrderKey, raw: dict[str, Any], finalizers: list[str]
    ) -> dict[str, Any]:
        """Replace the order's finalizers; return the order as written.

        Raises:
            ConflictError: the order changed since it was read.
        """
        return self.clusters.get(key.cluster).set_finalizers(raw, finalizers)

    def write_status(
        self, key: OrderKey, raw: dict[str, Any], status: dict[str, Any], check: Callable[[], None]
    ) -> dict[str, Any]:
        """Write the order's status body, guarded by the resourceVersion ``raw`` was read at.

        ``check`` confirms the lease before a write that follows a conflict.
        """
        resource = resource_of(identity_for(key))
        return self.clusters.get(key.cluster).write_status(
            resource, raw, lambda _stored: status, check
        )
