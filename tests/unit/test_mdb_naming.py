"""Child naming, hashing, labels and ownership of a MariaDBDatabase (the worked examples)."""

from __future__ import annotations

import hashlib
import re

import pytest

from tenantdb.core.mariadbdatabase.naming import (
    build_delivered_secret_labels,
    build_label_selector,
    build_order_labels,
    compute_child_prefix,
    compute_effective_database_name,
    compute_order_names,
    is_order_child,
    is_owned_order_child,
)
from tenantdb.core.mariadbdatabase.validation import quote_schema_for_grant
from tenantdb.core.objects import ObjectMeta


@pytest.mark.parametrize(
    ("cluster", "namespace", "name", "hash_input", "digest"),
    [
        pytest.param(
            "",
            "tenant-a",
            "workflow-db",
            "/tenant-a/workflow-db",
            "eb988da700c8b1f1c4732a57557f056ea3a5506dc791215c4e199344142a2551",
            id="management-workflow-db",
        ),
        pytest.param(
            "edge-1",
            "tenant-a",
            "workflow-db",
            "edge-1/tenant-a/workflow-db",
            "3598aadbc23d27b8bdc2b612d960830f744f753b035ccb8fc7dccd5730e315a8",
            id="edge-1-workflow-db",
        ),
        pytest.param(
            "",
            "tenant-a",
            "app-db",
            "/tenant-a/app-db",
            "d732fb0e61f44b66362f91fce06e1ece7b6103a04caab87d73da28d6935c41e0",
            id="management-app-db",
        ),
        pytest.param(
            "",
            "tenant-b",
            "workflow-db",
            "/tenant-b/workflow-db",
            "fc267f8fff5a6442346cfcb8cf8554048fc5a7eb3c3400f72bf71ef39faac164",
            id="management-other-namespace",
        ),
    ],
)
def test_worked_hash_examples(
    cluster: str, namespace: str, name: str, hash_input: str, digest: str
) -> None:
    assert hashlib.sha256(hash_input.encode()).hexdigest() == digest
    assert compute_child_prefix(cluster, namespace, name) == f"{name}-{digest[:8]}-database-"


def test_worked_example_names_every_child() -> None:
    names = compute_order_names("", "tenant-a", "workflow-db", "openstack")
    assert names.prefix == "workflow-db-eb988da7-database-"
    assert names.database_cr == "workflow-db-eb988da7-database-database"
    assert names.credentials == "workflow-db-eb988da7-database-credentials"
    assert names.role == "order.openstack.workflow-db-eb988da7-database"
    assert (
        names.creds_path == "database/mariadb/creds/order.openstack.workflow-db-eb988da7-database"
    )
    assert names.delivered_secret == "workflow-db-credentials"
    assert compute_effective_database_name(None, "workflow-db") == "workflow_db"
    assert quote_schema_for_grant("workflow_db") == "`workflow\\_db`"
    assert build_order_labels("", "tenant-a", "workflow-db") == {
        "c5c3.io/mariadbdatabase-name": "workflow-db",
        "c5c3.io/mariadbdatabase-namespace": "tenant-a",
        "c5c3.io/mariadbdatabase-cluster": "",
    }


def test_worked_example_on_edge_cluster() -> None:
    names = compute_order_names("edge-1", "tenant-a", "workflow-db", "openstack")
    assert names.prefix == "workflow-db-3598aadb-database-"
    assert (
        build_order_labels("edge-1", "tenant-a", "workflow-db")["c5c3.io/mariadbdatabase-cluster"]
        == "edge-1"
    )
    assert re.fullmatch(r"^order\.openstack\.workflow-db-[0-9a-f]{8}-database$", names.role)


def test_unit_fixture_role_regex() -> None:
    role = compute_order_names("", "tenant-a", "app-db", "default").role
    assert re.fullmatch(r"^order\.default\.app-db-[0-9a-f]{8}-database$", role)


def test_same_order_on_two_clusters_never_shares_a_child_name() -> None:
    home = compute_order_names("", "tenant-a", "app-db", "default")
    edge = compute_order_names("edge-1", "tenant-a", "app-db", "default")
    assert home.prefix != edge.prefix
    assert home.role != edge.role
    assert home.delivered_secret == edge.delivered_secret


@pytest.mark.parametrize(
    ("database_name", "expected"),
    [
        pytest.param(None, "app_db", id="default-dash-to-underscore"),
        pytest.param("", "app_db", id="empty-reads-as-default"),
        pytest.param("Custom_DB", "Custom_DB", id="explicit-verbatim"),
    ],
)
def test_effective_database_name(database_name: str | None, expected: str) -> None:
    assert compute_effective_database_name(database_name, "app-db") == expected


def test_delivered_secret_labels_carry_no_cluster() -> None:
    assert build_delivered_secret_labels("tenant-a", "app-db") == {
        "c5c3.io/mariadbdatabase-name": "app-db",
        "c5c3.io/mariadbdatabase-namespace": "tenant-a",
    }


def test_label_selector() -> None:
    assert build_label_selector("", "tenant-a", "app-db") == (
        "c5c3.io/mariadbdatabase-name=app-db,c5c3.io/mariadbdatabase-namespace=tenant-a,"
        "c5c3.io/mariadbdatabase-cluster="
    )


LABELS = build_order_labels("", "tenant-a", "app-db")
PREFIX = compute_child_prefix("", "tenant-a", "app-db")


@pytest.mark.parametrize(
    ("meta", "child", "owned"),
    [
        pytest.param(
            {"name": f"{PREFIX}database", "labels": LABELS}, True, True, id="labels-and-prefix"
        ),
        pytest.param(
            {"name": "elsewhere", "labels": LABELS}, True, False, id="labels-without-prefix"
        ),
        pytest.param(
            {
                "name": f"{PREFIX}database",
                "labels": {k: v for k, v in LABELS.items() if "cluster" not in k},
            },
            False,
            False,
            id="cluster-label-absent",
        ),
        pytest.param(
            {
                "name": f"{PREFIX}database",
                "labels": {**LABELS, "c5c3.io/mariadbdatabase-cluster": "edge-1"},
            },
            False,
            False,
            id="other-cluster",
        ),
        pytest.param(
            {"name": "app-db-credentials", "ownerReferences": [{"uid": "u1", "controller": True}]},
            True,
            False,
            id="controller-reference",
        ),
        pytest.param(
            {"name": "app-db-credentials", "ownerReferences": [{"uid": "u1", "controller": False}]},
            False,
            False,
            id="non-controller-reference",
        ),
        pytest.param({"name": f"{PREFIX}database"}, False, False, id="unlabelled"),
    ],
)
def test_is_order_child(meta: dict[str, object], child: bool, owned: bool) -> None:
    parsed = ObjectMeta.model_validate(meta)
    kwargs = {"order_uid": "u1", "cluster": "", "namespace": "tenant-a", "name": "app-db"}
    assert is_order_child(parsed, **kwargs) is child
    assert is_owned_order_child(parsed, **kwargs) is owned
