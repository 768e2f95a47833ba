"""Watch mapping: which order keys an event concerns, and which updates pass."""

from __future__ import annotations

from typing import Any

import pytest

from tenantdb.core.keys import OrderKey
from tenantdb.core.mariadbdatabase.mappers import (
    compute_control_plane_index_key,
    map_control_plane,
    map_database_cr,
    map_delivered_secret,
    map_labelled_child,
    map_order,
    should_enqueue_child_update,
    should_enqueue_control_plane_update,
    should_enqueue_order_update,
)
from tests.unit.mdb_builders import child_labels, make_control_plane

KEY = OrderKey(kind="mariadbdatabase", namespace="tenant-a", name="app-db")
EDGE_KEY = OrderKey(kind="mariadbdatabase", namespace="tenant-a", name="app-db", cluster="edge-1")


def _obj(meta: dict[str, Any], **rest: Any) -> dict[str, Any]:
    return {"metadata": meta, **rest}


def test_order_maps_to_itself_on_the_event_cluster() -> None:
    order = _obj({"name": "app-db", "namespace": "tenant-a"})
    assert map_order(order, "") == [KEY]
    assert map_order(order, "edge-1") == [EDGE_KEY]
    assert str(map_order(order, "edge-1")[0]) == "mariadbdatabase/tenant-a/app-db@edge-1"


BASE: dict[str, Any] = {
    "metadata": {"generation": 1, "labels": {"a": "b"}, "annotations": {}, "resourceVersion": "1"},
    "status": {"conditions": []},
}


def _with(**meta: Any) -> dict[str, Any]:
    return {**BASE, "metadata": {**BASE["metadata"], **meta}}


@pytest.mark.parametrize(
    ("new", "passes"),
    [
        pytest.param(_with(generation=2), True, id="spec-change"),
        pytest.param(_with(labels={"a": "c"}), True, id="label-change"),
        pytest.param(_with(annotations={"x": "y"}), True, id="annotation-change"),
        pytest.param(_with(deletionTimestamp="2026-01-01T00:00:00Z"), True, id="deletion-starts"),
        pytest.param(
            {**_with(resourceVersion="2"), "status": {"conditions": [{"type": "Ready"}]}},
            False,
            id="own-status-write",
        ),
        pytest.param(
            _with(finalizers=["c5c3.io/mariadbdatabase-teardown"]), False, id="own-finalizer"
        ),
        pytest.param(_with(resourceVersion="2"), False, id="no-op"),
    ],
)
def test_order_update_predicate(new: dict[str, Any], passes: bool) -> None:
    assert should_enqueue_order_update(BASE, new) is passes


@pytest.mark.parametrize(
    ("owner", "keys"),
    [
        pytest.param(
            {
                "apiVersion": "c5c3.io/v1alpha1",
                "kind": "MariaDBDatabase",
                "name": "app-db",
                "controller": True,
            },
            [EDGE_KEY],
            id="controlled-by-order",
        ),
        pytest.param(
            {"apiVersion": "c5c3.io/v1alpha1", "kind": "MariaDBDatabase", "name": "app-db"},
            [],
            id="not-controller",
        ),
        pytest.param(
            {"apiVersion": "apps/v1", "kind": "Deployment", "name": "app-db", "controller": True},
            [],
            id="other-owner",
        ),
    ],
)
def test_delivered_secret_maps_by_controller(owner: dict[str, Any], keys: list[OrderKey]) -> None:
    secret = _obj(
        {"name": "app-db-credentials", "namespace": "tenant-a", "ownerReferences": [owner]}
    )
    assert map_delivered_secret(secret, "edge-1") == keys


@pytest.mark.parametrize(
    ("labels", "keys"),
    [
        pytest.param(child_labels(), [KEY], id="management-order"),
        pytest.param(child_labels("edge-1"), [EDGE_KEY], id="target-order-by-cluster-label"),
        pytest.param({"c5c3.io/mariadbdatabase-name": "app-db"}, [], id="namespace-label-missing"),
        pytest.param({**child_labels(), "c5c3.io/mariadbdatabase-name": ""}, [], id="empty-name"),
        pytest.param({}, [], id="unlabelled"),
        pytest.param(child_labels("Not_A_Cluster"), [], id="unusable-cluster-label"),
    ],
)
def test_labelled_child(labels: dict[str, str], keys: list[OrderKey]) -> None:
    assert map_labelled_child(_obj({"name": "x", "namespace": "default", "labels": labels})) == keys


PLANES = [
    make_control_plane(),
    make_control_plane(
        name="cp2", keystone={"targetClusterRef": {"name": "edge-1"}, "namespace": {"name": "ks"}}
    ),
]


@pytest.mark.parametrize(
    ("namespace", "cluster", "labels", "keys"),
    [
        pytest.param("default", "", child_labels(), [KEY], id="keystone-namespace-management"),
        pytest.param("ks", "edge-1", child_labels(), [KEY], id="keystone-placed-on-target"),
        pytest.param("ks", "", child_labels(), [], id="right-namespace-wrong-cluster"),
        pytest.param("tenant-a", "", child_labels(), [], id="owner-namespace-wakes-nothing"),
        pytest.param("default", "", {}, [], id="unlabelled"),
    ],
)
def test_database_cr_only_where_keystone_lives(
    namespace: str, cluster: str, labels: dict[str, str], keys: list[OrderKey]
) -> None:
    cr = _obj({"name": "x", "namespace": namespace, "labels": labels})
    assert map_database_cr(cr, cluster, PLANES) == keys


def test_unlabelled_database_cr_never_looks_at_control_planes() -> None:
    def exploding() -> Any:
        raise AssertionError("listed ControlPlanes for an unlabelled Database")
        yield  # pragma: no cover

    assert map_database_cr(_obj({"name": "x", "namespace": "default"}), "", exploding()) == []


def _order(name: str, namespace: str, ref: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {"controlPlaneRef": ref}}


def test_control_plane_fans_out_to_referencing_management_orders() -> None:
    orders = [
        _order("app-db", "tenant-a", {"name": "cp", "namespace": "default"}),
        _order("own-ns", "default", {"name": "cp"}),
        _order("other", "tenant-a", {"name": "cp2", "namespace": "default"}),
    ]
    cp = {"metadata": {"name": "cp", "namespace": "default"}}
    assert map_control_plane(cp, orders) == [
        KEY,
        OrderKey(kind="mariadbdatabase", namespace="default", name="own-ns"),
    ]
    assert compute_control_plane_index_key(orders[1]) == "default/cp"


def _cp(
    generation: int = 1, ready: str = "True", deleting: bool = False, **rest: Any
) -> dict[str, Any]:
    meta: dict[str, Any] = {"generation": generation, "resourceVersion": "9"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    conditions = [{"type": "DBCredentialsReady", "status": ready}, {"type": "Ready", **rest}]
    return {"metadata": meta, "status": {"conditions": conditions}}


@pytest.mark.parametrize(
    ("new", "passes"),
    [
        pytest.param(_cp(generation=2), True, id="spec-change"),
        pytest.param(_cp(deleting=True), True, id="deletion"),
        pytest.param(_cp(ready="False"), True, id="db-credentials-flip"),
        pytest.param(_cp(status="False"), False, id="other-condition"),
        pytest.param(_cp(), False, id="no-op"),
    ],
)
def test_control_plane_update_predicate(new: dict[str, Any], passes: bool) -> None:
    assert should_enqueue_control_plane_update(_cp(), new) is passes


@pytest.mark.parametrize(
    ("new", "passes"),
    [
        pytest.param(
            {"metadata": {"name": "s", "resourceVersion": "2"}, "data": {"k": "v"}},
            False,
            id="resync-or-no-op",
        ),
        pytest.param(
            {"metadata": {"name": "s", "resourceVersion": "2"}, "data": {"k": "w"}},
            True,
            id="data-edited",
        ),
        pytest.param(
            {
                "metadata": {"name": "s", "resourceVersion": "2"},
                "data": {"k": "v"},
                "status": {"refreshTime": "t"},
            },
            True,
            id="status-moved",
        ),
    ],
)
def test_child_update_predicate(new: dict[str, Any], passes: bool) -> None:
    old = {
        "metadata": {"name": "s", "resourceVersion": "1", "managedFields": []},
        "data": {"k": "v"},
    }
    assert should_enqueue_child_update(old, new) is passes
