"""Which orders the ops shell lists: every namespace of a cluster, or on the management cluster
only the namespaces tenantdb serves there when it is bound per namespace."""

from __future__ import annotations

from typing import Any, cast

from tenantdb.adapters.clusters import ClusterRegistry
from tenantdb.adapters.kube import KubeClient, Resource
from tenantdb.core.kinds import registered_identities
from tenantdb.ops import list_order_keys, load_kinds
from tenantdb.settings import Settings


class _Cluster:
    """A cluster holding one order of every kind in each of its namespaces."""

    def __init__(self, namespaces: tuple[str, ...]) -> None:
        self.namespaces = namespaces
        self.asked: list[str | None] = []

    def list_objects(self, resource: Resource, namespace: str | None = None) -> list[Any]:
        self.asked.append(namespace)
        where = self.namespaces if namespace is None else (namespace,)
        return [{"metadata": {"namespace": ns, "name": resource.plural}} for ns in where]


def test_the_management_cluster_is_listed_in_the_served_namespaces_only() -> None:
    load_kinds(Settings())
    management, edge = _Cluster(("a", "b", "c")), _Cluster(("x",))
    registry = ClusterRegistry(
        {"": lambda: cast(KubeClient, management), "edge-1": lambda: cast(KubeClient, edge)}
    )
    keys = set(list_order_keys(registry, {}, ("a", "c")))
    assert {(k.cluster, k.namespace) for k in keys} == {("", "a"), ("", "c"), ("edge-1", "x")}
    assert set(management.asked) == {"a", "c"}  # never the whole cluster
    assert set(edge.asked) == {None}
    assert len(keys) == 3 * len(registered_identities())  # each kind, each place


def test_without_served_namespaces_every_namespace_is_listed() -> None:
    load_kinds(Settings())
    management = _Cluster(("a", "b"))
    registry = ClusterRegistry({"": lambda: cast(KubeClient, management)})
    keys = set(list_order_keys(registry, {}))
    assert {k.namespace for k in keys} == {"a", "b"}
    assert set(management.asked) == {None}
