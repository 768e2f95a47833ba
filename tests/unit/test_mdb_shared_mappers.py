"""The shared objects a pass reads wake exactly the orders that read them.

A MariaDB, a SecretStore or ClusterSecretStore, the shared ServiceAccount and the client
Certificate each map to the orders whose pass reads that object, and to no other. The
ControlPlanes are reduced as the watcher's index reduces them, and every expectation is checked
against where an order's own pass looks (``compute_order_scope``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pytest

from tenantdb.core.keys import OrderKey
from tenantdb.core.mariadbdatabase.mappers import (
    compute_control_plane_index_key,
    map_client_certificate_cr,
    map_mariadb,
    map_secret_store,
    map_shared_service_account,
)
from tenantdb.core.mariadbdatabase.models import ControlPlane, MariaDBDatabase
from tenantdb.core.mariadbdatabase.scope import compute_order_scope
from tenantdb.core.mariadbdatabase.watching import compute_keystone_placement

EDGE = {"targetClusterRef": {"name": "edge-1"}}

# Raw ControlPlanes, as the watch hands them on; each is reduced as the watcher's index does.
RAW_PLANES: dict[str, dict[str, Any]] = {
    # Keystone beside the ControlPlane, the shared MariaDB "db", the default namespaced store.
    "plain": {"infrastructure": {"database": {"clusterRef": {"name": "db"}, "port": 3307}}},
    # Same namespace and MariaDB name, but Keystone in its own namespace on edge-1, and a
    # ClusterSecretStore (an empty kind reads ClusterSecretStore).
    "edge": {
        "infrastructure": {"database": {"clusterRef": {"name": "db"}}},
        "services": {"keystone": {"namespace": {"name": "ks"}, **EDGE}},
        "secretStoreRef": {"name": "bao"},
    },
    # A dedicated Keystone database wins over the shared one; a named namespaced store.
    "dedicated": {
        "infrastructure": {"database": {"clusterRef": {"name": "db"}}},
        "services": {
            "keystone": {
                "namespace": {"name": "ks"},
                **EDGE,
                "dedicatedBackingServices": {"database": {"clusterRef": {"name": "own-db"}}},
            }
        },
        "secretStoreRef": {"kind": "SecretStore", "name": "bao"},
    },
    # A brownfield database: no MariaDB is read at all.
    "brownfield": {"infrastructure": {"database": {"host": "db.example", "port": 3306}}},
}


def _plane(name: str, spec: dict[str, Any], namespace: str = "cp-ns") -> ControlPlane:
    raw = {"metadata": {"name": name, "namespace": namespace, "generation": 1}, "spec": spec}
    reduced = compute_keystone_placement(raw)
    assert reduced is not None
    return reduced


PLANES = [_plane(name, spec) for name, spec in RAW_PLANES.items()]
FULL_PLANES = {
    name: ControlPlane.model_validate({"metadata": {"name": name, "namespace": "cp-ns"}, "spec": s})
    for name, s in RAW_PLANES.items()
}

# Two orders per ControlPlane, one on an unknown ControlPlane, one in another CP namespace.
ORDERS = [
    {
        "metadata": {"name": f"{cp}-{n}", "namespace": "tenant-a"},
        "spec": {"controlPlaneRef": {"name": cp, "namespace": "cp-ns"}},
    }
    for cp in (*RAW_PLANES, "gone")
    for n in (1, 2)
] + [
    {
        "metadata": {"name": "elsewhere", "namespace": "other-ns"},
        "spec": {"controlPlaneRef": {"name": "plain"}},
    }
]


def _referencing(index_key: str) -> Iterable[Mapping[str, Any]]:
    return [o for o in ORDERS if compute_control_plane_index_key(o) == index_key]


def _keys(*names: str) -> list[OrderKey]:
    return [OrderKey("mariadbdatabase", "tenant-a", name) for name in names]


def _obj(name: str, namespace: str | None) -> dict[str, Any]:
    meta = {"name": name} if namespace is None else {"name": name, "namespace": namespace}
    return {"metadata": meta, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}


@pytest.mark.parametrize(
    ("cluster", "namespace", "name", "expected"),
    [
        pytest.param("", "cp-ns", "db", _keys("plain-1", "plain-2"), id="beside-the-control-plane"),
        pytest.param("edge-1", "ks", "db", _keys("edge-1", "edge-2"), id="placed-on-target"),
        pytest.param(
            "edge-1", "ks", "own-db", _keys("dedicated-1", "dedicated-2"), id="dedicated-database"
        ),
        pytest.param("", "ks", "db", [], id="right-namespace-wrong-cluster"),
        pytest.param("edge-1", "cp-ns", "db", [], id="right-cluster-wrong-namespace"),
        pytest.param("", "cp-ns", "other", [], id="another-mariadb"),
        pytest.param("", "cp-ns", "", [], id="no-name"),
    ],
)
def test_a_mariadb_wakes_the_orders_of_the_control_planes_placing_keystone_on_it(
    cluster: str, namespace: str, name: str, expected: list[OrderKey]
) -> None:
    assert map_mariadb(_obj(name, namespace), cluster, PLANES, _referencing) == expected


@pytest.mark.parametrize(
    ("kind", "namespace", "name", "expected"),
    [
        pytest.param(
            "SecretStore",
            "cp-ns",
            "openbao-tenant-store",
            _keys("plain-1", "plain-2", "brownfield-1", "brownfield-2"),
            id="default-namespaced-store",
        ),
        pytest.param(
            "ClusterSecretStore", None, "bao", _keys("edge-1", "edge-2"), id="named-cluster-store"
        ),
        pytest.param(
            "SecretStore", "cp-ns", "bao", _keys("dedicated-1", "dedicated-2"), id="named-store"
        ),
        pytest.param("SecretStore", "other-ns", "bao", [], id="same-name-other-namespace"),
        pytest.param("ClusterSecretStore", None, "openbao-tenant-store", [], id="kind-differs"),
        pytest.param("ClusterSecretStore", None, "openbao-cluster-store", [], id="unnamed-default"),
    ],
)
def test_a_secret_store_wakes_the_orders_of_the_control_planes_naming_it(
    kind: str, namespace: str | None, name: str, expected: list[OrderKey]
) -> None:
    assert map_secret_store(_obj(name, namespace), kind, PLANES, _referencing) == expected


IN_CP_NS = _keys(*(f"{cp}-{n}" for cp in (*RAW_PLANES, "gone") for n in (1, 2)))


@pytest.mark.parametrize(
    ("mapper", "name"),
    [
        pytest.param(map_shared_service_account, "order-db-creds", id="service-account"),
        pytest.param(map_client_certificate_cr, "order-db-openbao-client", id="certificate"),
    ],
)
@pytest.mark.parametrize(
    ("namespace", "right_name", "expected"),
    [
        pytest.param("cp-ns", True, IN_CP_NS, id="its-namespace-orders"),
        pytest.param(
            "other-ns",
            True,
            [OrderKey("mariadbdatabase", "other-ns", "elsewhere")],
            id="ref-defaults-to-order-namespace",
        ),
        pytest.param("nowhere", True, [], id="no-orders-there"),
        pytest.param("cp-ns", False, [], id="another-name"),
    ],
)
def test_a_shared_child_wakes_the_orders_of_its_control_plane_namespace(
    mapper: Any, name: str, namespace: str, right_name: bool, expected: list[OrderKey]
) -> None:
    obj = _obj(name if right_name else "something-else", namespace)
    assert mapper(obj, ORDERS) == expected


@pytest.mark.parametrize("cp_name", list(RAW_PLANES))
def test_each_order_is_woken_by_exactly_the_mariadb_and_store_its_pass_reads(
    cp_name: str,
) -> None:
    order = MariaDBDatabase.model_validate(
        {
            "metadata": {"name": "probe", "namespace": "tenant-a"},
            "spec": {"controlPlaneRef": {"name": cp_name, "namespace": "cp-ns"}},
        }
    )
    scope = compute_order_scope(order, "", FULL_PLANES[cp_name])
    mine = _keys(f"{cp_name}-1", f"{cp_name}-2")
    store_ns = scope.store.namespace or None
    woken = map_secret_store(
        _obj(scope.store.name, store_ns), scope.store.kind, PLANES, _referencing
    )
    assert set(mine) <= set(woken)
    if scope.cluster_ref:
        mariadb = _obj(scope.cluster_ref, scope.keystone_namespace)
        woken = map_mariadb(mariadb, scope.keystone_cluster, PLANES, _referencing)
        assert woken == mine, "the MariaDB of this ControlPlane wakes its orders and only them"
    else:
        for cluster in ("", "edge-1"):
            for namespace in ("cp-ns", "ks"):
                for name in ("db", "own-db"):
                    woken = map_mariadb(_obj(name, namespace), cluster, PLANES, _referencing)
                    assert not set(mine) & set(woken), "a pass that reads no MariaDB is not woken"


def test_an_unreadable_store_or_database_keeps_keystones_placement() -> None:
    reduced = compute_keystone_placement(
        {
            "metadata": {"name": "cp", "namespace": "cp-ns"},
            "spec": {
                "services": {"keystone": {"namespace": {"name": "ks"}}},
                "infrastructure": {"database": {"clusterRef": "nonsense"}},
                "secretStoreRef": {"name": ["nonsense"]},
            },
        }
    )
    assert reduced is not None
    assert reduced.spec.services is not None
    assert reduced.spec.services.keystone is not None
    assert reduced.spec.services.keystone.namespace is not None
    assert reduced.spec.services.keystone.namespace.name == "ks"
