"""The watcher's fingerprints judge updates exactly as the predicates judge whole objects."""

from __future__ import annotations

from typing import Any

import pytest

from tenantdb.core.mariadbdatabase.controlplane import (
    compute_assigned_namespaces,
    compute_keystone_cluster,
    compute_keystone_namespace,
    compute_placed_namespaces,
)
from tenantdb.core.mariadbdatabase.mappers import (
    map_control_plane,
    should_enqueue_child_update,
    should_enqueue_control_plane_update,
    should_enqueue_order_update,
)
from tenantdb.core.mariadbdatabase.naming import MANAGEMENT_CLUSTER
from tenantdb.core.mariadbdatabase.watching import (
    compute_control_plane_fingerprint,
    compute_keystone_placement,
    compute_order_index_entry,
)
from tenantdb.core.watching import (
    compute_backoff,
    compute_child_fingerprint,
    compute_order_fingerprint,
)


def _order(**meta: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "apiVersion": "c5c3.io/v1alpha1",
        "kind": "MariaDBDatabase",
        "metadata": {
            "name": "app",
            "namespace": "tenant-a",
            "generation": 1,
            "resourceVersion": "10",
            "labels": {"team": "a"},
            "annotations": {"note": "x"},
        },
        "spec": {"controlPlaneRef": {"name": "cp"}, "databaseName": "app"},
        "status": {"conditions": [{"type": "Ready", "status": "False"}]},
    }
    base["metadata"].update(meta)
    return base


ORDER_UPDATES = [
    pytest.param({"resourceVersion": "11"}, False, id="resync"),
    pytest.param({"generation": 2}, True, id="spec-change"),
    pytest.param({"labels": {"team": "b"}}, True, id="label-change"),
    pytest.param({"labels": {}}, True, id="labels-removed"),
    pytest.param({"annotations": {"note": "y"}}, True, id="annotation-change"),
    pytest.param({"finalizers": ["c5c3.io/mariadbdatabase-teardown"]}, False, id="finalizer"),
    pytest.param({"deletionTimestamp": "2030-01-01T00:00:00Z"}, True, id="deletion-starts"),
]


@pytest.mark.parametrize(("change", "expected"), ORDER_UPDATES)
def test_order_fingerprint_passes_what_the_order_predicate_passes(
    change: dict[str, Any], expected: bool
) -> None:
    old, new = _order(), _order(**change)
    assert should_enqueue_order_update(old, new) is expected
    fingerprints = compute_order_fingerprint(old), compute_order_fingerprint(new)
    assert should_enqueue_order_update(*fingerprints) is expected


def test_order_status_write_leaves_the_fingerprint_alone() -> None:
    old = _order()
    new = _order()
    new["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
    assert compute_order_fingerprint(old) == compute_order_fingerprint(new)


def test_order_fingerprint_keeps_no_label_or_annotation_text() -> None:
    fingerprint = compute_order_fingerprint(_order(annotations={"secret-ish": "do-not-keep"}))
    assert "do-not-keep" not in repr(fingerprint)


def _cp(generation: int = 1, ready: str | None = "True", other: str = "True") -> dict[str, Any]:
    conditions = [{"type": "Available", "status": other}]
    if ready is not None:
        conditions.append({"type": "DBCredentialsReady", "status": ready})
    return {
        "metadata": {"name": "cp", "namespace": "cp-ns", "generation": generation},
        "spec": {"services": {"keystone": {"namespace": {"name": "keystone"}}}},
        "status": {"conditions": conditions},
    }


CP_UPDATES = [
    pytest.param(_cp(), _cp(other="False"), False, id="other-condition"),
    pytest.param(_cp(), _cp(generation=2), True, id="spec-change"),
    pytest.param(_cp(), _cp(ready="False"), True, id="ready-flips-off"),
    pytest.param(_cp(ready=None), _cp(ready="True"), True, id="ready-appears-true"),
    pytest.param(_cp(ready=None), _cp(ready="False"), False, id="ready-appears-false"),
    pytest.param(_cp(ready="Unknown"), _cp(ready="False"), False, id="not-true-either-way"),
]


@pytest.mark.parametrize(("old", "new", "expected"), CP_UPDATES)
def test_control_plane_fingerprint_passes_what_the_control_plane_predicate_passes(
    old: dict[str, Any], new: dict[str, Any], expected: bool
) -> None:
    assert should_enqueue_control_plane_update(old, new) is expected
    fingerprints = compute_control_plane_fingerprint(old), compute_control_plane_fingerprint(new)
    assert should_enqueue_control_plane_update(*fingerprints) is expected


def test_control_plane_deletion_passes_through_the_fingerprint() -> None:
    old, new = _cp(), _cp()
    new["metadata"]["deletionTimestamp"] = "2030-01-01T00:00:00Z"
    fingerprints = compute_control_plane_fingerprint(old), compute_control_plane_fingerprint(new)
    assert should_enqueue_control_plane_update(*fingerprints)


def _secret(**change: Any) -> dict[str, Any]:
    secret: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "app-db",
            "namespace": "tenant-a",
            "resourceVersion": "5",
            "managedFields": [{"manager": "tenantdb"}],
            "labels": {"c5c3.io/mariadbdatabase-name": "app"},
        },
        "data": {"password": "c2VjcmV0"},
    }
    for key, value in change.items():
        if key in ("resourceVersion", "managedFields", "labels"):
            secret["metadata"][key] = value
        else:
            secret[key] = value
    return secret


CHILD_UPDATES = [
    pytest.param({"resourceVersion": "6"}, False, id="resync"),
    pytest.param({"managedFields": []}, False, id="managed-fields-only"),
    pytest.param({"data": {"password": "b3RoZXI="}}, True, id="data-edited"),
    pytest.param({"labels": {}}, True, id="label-removed"),
    pytest.param({"type": "Opaque"}, True, id="field-added"),
]


@pytest.mark.parametrize(("change", "expected"), CHILD_UPDATES)
def test_child_fingerprint_passes_what_the_child_predicate_passes(
    change: dict[str, Any], expected: bool
) -> None:
    old, new = _secret(), _secret(**change)
    assert should_enqueue_child_update(old, new) is expected
    fingerprints = compute_child_fingerprint(old), compute_child_fingerprint(new)
    assert should_enqueue_child_update(*fingerprints) is expected


def test_child_fingerprint_keeps_no_secret_data() -> None:
    assert "c2VjcmV0" not in repr(compute_child_fingerprint(_secret()))


INDEX_ORDERS = [
    pytest.param({"name": "cp"}, ["tenant-a/app"], id="same-namespace-ref"),
    pytest.param({"name": "cp", "namespace": "tenant-a"}, ["tenant-a/app"], id="explicit-ns"),
    pytest.param({"name": "cp", "namespace": "elsewhere"}, [], id="other-namespace"),
    pytest.param(None, [], id="no-ref"),
]


@pytest.mark.parametrize(("ref", "expected"), INDEX_ORDERS)
def test_index_entry_fans_out_like_the_whole_order(
    ref: dict[str, str] | None, expected: list[str]
) -> None:
    order = _order()
    if ref is None:
        del order["spec"]["controlPlaneRef"]
    else:
        order["spec"]["controlPlaneRef"] = ref
    cp = {"metadata": {"name": "cp", "namespace": "tenant-a"}}
    whole = map_control_plane(cp, [order])
    reduced = map_control_plane(cp, [compute_order_index_entry(order, MANAGEMENT_CLUSTER)])
    assert whole == reduced
    assert [f"{k.namespace}/{k.name}" for k in reduced] == expected


PLACEMENTS = [
    pytest.param({}, ("cp-ns", MANAGEMENT_CLUSTER), id="defaults"),
    pytest.param(
        {"services": {"keystone": {"namespace": {"name": "ks"}}}},
        ("ks", MANAGEMENT_CLUSTER),
        id="keystone-namespace",
    ),
    pytest.param(
        {"services": {"keystone": {"targetClusterRef": {"name": "edge-1"}}}},
        ("cp-ns", "edge-1"),
        id="keystone-cluster",
    ),
]


@pytest.mark.parametrize(("spec", "expected"), PLACEMENTS)
def test_keystone_placement_keeps_the_placement(
    spec: dict[str, Any], expected: tuple[str, str]
) -> None:
    cp = {"metadata": {"name": "cp", "namespace": "cp-ns"}, "spec": spec, "status": {"x": 1}}
    placed = compute_keystone_placement(cp)
    assert placed is not None
    assert (compute_keystone_namespace(placed), compute_keystone_cluster(placed)) == expected


def test_unreadable_control_plane_places_nothing() -> None:
    cp = {"metadata": {"name": "cp", "namespace": "cp-ns"}, "spec": {"services": "nonsense"}}
    assert compute_keystone_placement(cp) is None


def _plane(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "cp-ns"}, "spec": spec}


def test_a_target_clusters_watched_namespaces_come_from_every_control_plane() -> None:
    edge = {"targetClusterRef": {"name": "edge-1"}}
    planes = [
        compute_keystone_placement(
            _plane(
                "a",
                {
                    "namespaceAssignments": [
                        {"namespace": "tenant-a", **edge, "allowedRoles": ["x"]},
                        {"namespace": "tenant-m"},
                        {"namespace": "tenant-c", "targetClusterRef": {"name": "edge-2"}},
                    ],
                    "services": {"keystone": {"namespace": {"name": "ks"}, **edge}},
                },
            )
        ),
        compute_keystone_placement(
            _plane("b", {"namespaceAssignments": [{"namespace": "tenant-b", **edge}]})
        ),
    ]
    reduced = [p for p in planes if p is not None]
    assert len(reduced) == 2
    assert compute_assigned_namespaces(reduced, "edge-1") == {"tenant-a", "tenant-b"}
    assert compute_assigned_namespaces(reduced, MANAGEMENT_CLUSTER) == {"tenant-m"}
    assert compute_assigned_namespaces(reduced, "edge-3") == set()
    assert compute_placed_namespaces(reduced, "edge-1") == {"ks"}
    assert compute_placed_namespaces(reduced, MANAGEMENT_CLUSTER) == {"cp-ns"}, (
        "a ControlPlane without a Keystone placement keeps Keystone beside it"
    )


BACKOFFS = [
    pytest.param(0, 0.0, 0.0, 0.0, id="no-failure"),
    pytest.param(1, 0.0, 0.25, 0.25, id="first-low"),
    pytest.param(1, 0.999, 0.25, 0.5, id="first-high"),
    pytest.param(3, 0.0, 1.0, 1.0, id="doubles"),
    pytest.param(10, 0.0, 15.0, 15.0, id="capped-low"),
    pytest.param(10, 1.0, 30.0, 30.0, id="capped-high"),
    pytest.param(10_000, 0.5, 15.0, 30.0, id="huge-attempt"),
]


@pytest.mark.parametrize(("attempt", "jitter", "low", "high"), BACKOFFS)
def test_backoff_is_capped_and_jittered(
    attempt: int, jitter: float, low: float, high: float
) -> None:
    wait = compute_backoff(attempt, base=0.5, cap=30.0, jitter=jitter)
    assert low <= wait <= high
