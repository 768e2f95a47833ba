"""The watcher's order index wakes each order on the cluster it lives on, and forgets by scope.

Orders of the management cluster and of a target cluster name the same ControlPlane; every
mapper that fans a shared object out through the index builds each key on the order's own
cluster. A relist of one order watch replaces the orders of that watch's scope (one cluster, or
one namespace of it) and keeps every other; a deleted order drops only itself.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from tenantdb.core.keys import OrderKey
from tenantdb.core.mariadbdatabase.mappers import (
    compute_order_cluster,
    map_client_certificate,
    map_client_certificate_cr,
    map_control_plane,
    map_mariadb,
    map_secret_store,
    map_shared_service_account,
)
from tenantdb.core.mariadbdatabase.models import ControlPlane
from tenantdb.core.mariadbdatabase.naming import (
    CLIENT_CERTIFICATE,
    IDENTITY,
    MANAGEMENT_CLUSTER,
    SHARED_SERVICE_ACCOUNT,
)
from tenantdb.core.mariadbdatabase.openbao import NAMESPACED_STORE_KIND
from tenantdb.core.mariadbdatabase.watching import (
    compute_keystone_placement,
    compute_order_index_entry,
)
from watcher.mariadbdatabase import ControlPlaneIndex

EDGE = "edge-1"


def _order(name: str, namespace: str = "tenant-a", cp: str = "cp-ns/cp") -> dict[str, Any]:
    cp_namespace, cp_name = cp.split("/")
    return {
        "apiVersion": "c5c3.io/v1alpha1",
        "kind": "MariaDBDatabase",
        "metadata": {"name": name, "namespace": namespace, "resourceVersion": "7"},
        "spec": {"controlPlaneRef": {"name": cp_name, "namespace": cp_namespace}},
    }


def _key(name: str, cluster: str = MANAGEMENT_CLUSTER, namespace: str = "tenant-a") -> OrderKey:
    return IDENTITY.key(namespace, name, cluster)


_PLANE = compute_keystone_placement(
    {
        "metadata": {"name": "cp", "namespace": "cp-ns"},
        "spec": {
            "infrastructure": {"database": {"clusterRef": {"name": "db"}}},
            "secretStoreRef": {"kind": NAMESPACED_STORE_KIND, "name": "bao"},
        },
    }
)
assert _PLANE is not None
PLANE: ControlPlane = _PLANE


def _index(*orders: tuple[str, dict[str, Any]]) -> ControlPlaneIndex:
    index = ControlPlaneIndex(threading.Event())
    for cluster, order in orders:
        index.put_order(cluster, order)
    return index


def _named(kind: str, name: str, namespace: str = "cp-ns") -> dict[str, Any]:
    return {"kind": kind, "metadata": {"name": name, "namespace": namespace}}


Mapped = Callable[[ControlPlaneIndex], list[OrderKey]]

MAPPERS: dict[str, Mapped] = {
    "control-plane": lambda found: map_control_plane(
        _named("ControlPlane", "cp"), found.orders_referencing("cp-ns/cp")
    ),
    "mariadb": lambda found: map_mariadb(
        _named("MariaDB", "db"), MANAGEMENT_CLUSTER, [PLANE], found.orders_referencing
    ),
    "secret-store": lambda found: map_secret_store(
        _named("SecretStore", "bao"), NAMESPACED_STORE_KIND, [PLANE], found.orders_referencing
    ),
    "service-account": lambda found: map_shared_service_account(
        _named("ServiceAccount", SHARED_SERVICE_ACCOUNT), found.orders()
    ),
    "certificate": lambda found: map_client_certificate_cr(
        _named("Certificate", CLIENT_CERTIFICATE), found.orders()
    ),
    "client-certificate-secret": lambda found: map_client_certificate(
        _named("Secret", CLIENT_CERTIFICATE), found.orders()
    ),
}

# (cluster, order) pairs put in the index, and the keys every mapper must build from them.
PLACES = [
    pytest.param([(MANAGEMENT_CLUSTER, _order("a"))], [_key("a")], id="management"),
    pytest.param([(EDGE, _order("a"))], [_key("a", EDGE)], id="target"),
    pytest.param(
        [(MANAGEMENT_CLUSTER, _order("a")), (EDGE, _order("a"))],
        [_key("a"), _key("a", EDGE)],
        id="same-name-on-both",
    ),
    pytest.param(
        [
            (EDGE, _order("a")),
            (EDGE, _order("b", cp="cp-other/other")),
            ("edge-2", _order("c", "t-b")),
        ],
        [_key("a", EDGE), _key("c", "edge-2", "t-b")],
        id="other-control-plane-stays-asleep",
    ),
]


@pytest.mark.parametrize("mapper", list(MAPPERS))
@pytest.mark.parametrize(("orders", "expected"), PLACES)
def test_every_fan_out_builds_the_key_on_the_orders_own_cluster(
    mapper: str, orders: list[tuple[str, dict[str, Any]]], expected: list[OrderKey]
) -> None:
    assert sorted(MAPPERS[mapper](_index(*orders)), key=str) == sorted(expected, key=str)


ENTRIES = [
    pytest.param(MANAGEMENT_CLUSTER, id="management"),
    pytest.param(EDGE, id="target"),
]


@pytest.mark.parametrize("cluster", ENTRIES)
def test_an_index_entry_carries_its_cluster_and_nothing_else_new(cluster: str) -> None:
    entry = compute_order_index_entry(_order("a"), cluster)
    assert compute_order_cluster(entry) == cluster
    assert entry["metadata"] == {"namespace": "tenant-a", "name": "a"}


def test_a_whole_order_reads_as_on_the_management_cluster() -> None:
    assert compute_order_cluster(_order("a")) == MANAGEMENT_CLUSTER


def _known(index: ControlPlaneIndex) -> set[OrderKey]:
    return set(map_control_plane(_named("ControlPlane", "cp"), index.orders()))


FILLED = [
    (MANAGEMENT_CLUSTER, _order("m")),
    (EDGE, _order("a")),
    (EDGE, _order("b", "tenant-b")),
    ("edge-2", _order("a")),
]

# A relist of one watch's scope (cluster, namespace or None) listing these orders, and which
# orders the index knows after it.
RELISTS = [
    pytest.param(
        EDGE,
        "tenant-a",
        [],
        {_key("m"), _key("b", EDGE, "tenant-b"), _key("a", "edge-2")},
        id="empty-namespace-keeps-the-rest",
    ),
    pytest.param(
        EDGE,
        "tenant-a",
        [_order("z")],
        {_key("m"), _key("z", EDGE), _key("b", EDGE, "tenant-b"), _key("a", "edge-2")},
        id="namespace-replaced",
    ),
    pytest.param(
        EDGE,
        None,
        [_order("z")],
        {_key("m"), _key("z", EDGE), _key("a", "edge-2")},
        id="whole-target-cluster-replaced",
    ),
    pytest.param(
        MANAGEMENT_CLUSTER,
        None,
        [],
        {_key("a", EDGE), _key("b", EDGE, "tenant-b"), _key("a", "edge-2")},
        id="management-replaced",
    ),
]


@pytest.mark.parametrize(("cluster", "namespace", "listed", "expected"), RELISTS)
def test_a_relist_replaces_only_the_orders_of_its_watchs_scope(
    cluster: str, namespace: str | None, listed: list[dict[str, Any]], expected: set[OrderKey]
) -> None:
    index = _index(*FILLED)
    index.replace_orders(cluster, namespace, listed)
    assert _known(index) == expected


def test_a_deleted_order_drops_only_itself() -> None:
    index = _index(*FILLED)
    index.drop_order(EDGE, ("tenant-a", "a"))
    assert _known(index) == {_key("m"), _key("b", EDGE, "tenant-b"), _key("a", "edge-2")}
    assert [k for k in index.orders_referencing("cp-ns/cp") if k["metadata"]["name"] == "a"] == [
        compute_order_index_entry(_order("a"), "edge-2")
    ]


@pytest.mark.parametrize(
    ("cluster", "synced"),
    [
        pytest.param(MANAGEMENT_CLUSTER, True, id="management"),
        pytest.param(EDGE, False, id="target"),
    ],
)
def test_only_the_management_relist_marks_the_orders_synced(cluster: str, synced: bool) -> None:
    index = _index()
    index.replace_orders(cluster, None, [])
    assert index.orders_synced.is_set() is synced
