"""Every row of the MariaDBDatabase condition catalogue, driven through one whole pass."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from tenantdb.core.mariadbdatabase.naming import FINALIZER
from tenantdb.core.mariadbdatabase.results import ORDER_REFRESH_AFTER, PassResult
from tests.unit.mdb_builders import (
    World,
    client_certificate,
    make_control_plane,
    make_database_cr,
    make_external_secret,
    make_mariadb,
    make_order,
    make_secret,
    materialised,
    own_database_cr,
    target_world,
)
from tests.unit.mdb_pass import run_pass

TEN_S = PassResult(requeue_after=timedelta(seconds=10))
ONE_MIN = PassResult(requeue_after=timedelta(minutes=1))
TEN_MIN = PassResult(requeue_after=ORDER_REFRESH_AFTER)
NONE = PassResult()
ERROR = "error"

TLS_DB = {
    "clusterRef": {"name": "openstack-db"},
    "tls": {"mode": "require", "caBundleSecretRef": {"name": "db-ca"}},
}


def _cp(**kw: Any) -> Any:
    return make_control_plane(**kw)


CASES = [
    # (id, world, DatabaseReady (status, reason), DeliveryReady (status, reason) or None, result)
    pytest.param(
        World(cluster="c" * 64),
        ("False", "ClusterNameTooLong"),
        ("False", "ClusterNameTooLong"),
        NONE,
        id="both-ClusterNameTooLong-no-requeue",
    ),
    pytest.param(
        World(cp=None),
        ("False", "ControlPlaneNotFound"),
        ("False", "ControlPlaneNotFound"),
        TEN_S,
        id="both-ControlPlaneNotFound-management-10s",
    ),
    pytest.param(
        World(cp=None, cluster="edge-1"),
        ("False", "NamespaceNotAssigned"),
        ("False", "NamespaceNotAssigned"),
        ONE_MIN,
        id="both-NamespaceNotAssigned-target-cp-missing-1m",
    ),
    pytest.param(
        World(cp=_cp(assignments=[])),
        ("False", "NamespaceNotAssigned"),
        ("False", "NamespaceNotAssigned"),
        ONE_MIN,
        id="both-NamespaceNotAssigned-no-entry-1m",
    ),
    pytest.param(
        World(cp=_cp(assignments=[{"namespace": "tenant-a", "targetClusterRef": {"name": "x"}}])),
        ("False", "NamespaceNotAssigned"),
        ("False", "NamespaceNotAssigned"),
        ONE_MIN,
        id="both-NamespaceNotAssigned-entry-on-other-cluster-1m",
    ),
    pytest.param(
        World(cp=_cp(infrastructure=False)),
        ("False", "DynamicCredentialsUnavailable"),
        ("False", "DynamicCredentialsUnavailable"),
        TEN_MIN,
        id="both-DynamicCredentialsUnavailable-external-mode-10m",
    ),
    pytest.param(
        World(cp=_cp(database={"host": "db.example.com"})),
        ("False", "DynamicCredentialsUnavailable"),
        ("False", "DynamicCredentialsUnavailable"),
        TEN_MIN,
        id="both-DynamicCredentialsUnavailable-brownfield-10m",
    ),
    pytest.param(
        World(
            cp=_cp(
                keystone={"dedicatedBackingServices": {"database": {"clusterRef": {"name": "k"}}}}
            )
        ),
        ("False", "DynamicCredentialsUnavailable"),
        ("False", "DynamicCredentialsUnavailable"),
        TEN_MIN,
        id="both-DynamicCredentialsUnavailable-dedicated-keystone-db-10m",
    ),
    pytest.param(
        World(
            cp=_cp(database={"clusterRef": {"name": "openstack-db"}, "credentialsMode": "Static"})
        ),
        ("False", "DynamicCredentialsUnavailable"),
        ("False", "DynamicCredentialsUnavailable"),
        TEN_MIN,
        id="both-DynamicCredentialsUnavailable-static-10m",
    ),
    pytest.param(
        World(cp=_cp(keystone={"databaseCredentialsMode": "Static"})),
        ("False", "DynamicCredentialsUnavailable"),
        ("False", "DynamicCredentialsUnavailable"),
        TEN_MIN,
        id="both-DynamicCredentialsUnavailable-keystone-override-static-10m",
    ),
    pytest.param(
        World(cp=_cp(db_credentials_ready="False")),
        ("False", "WaitingForDBCredentials"),
        ("False", "WaitingForDBCredentials"),
        TEN_S,
        id="both-WaitingForDBCredentials-10s",
    ),
    pytest.param(
        World(keystone_cluster_error='cluster "edge-9" is not engaged'),
        ("False", "TargetClusterUnavailable"),
        ("False", "WaitingForCredentials"),
        TEN_S,
        id="DatabaseReady-TargetClusterUnavailable-10s",
    ),
    pytest.param(
        World(mariadb=None),
        ("False", "ClusterNotReady"),
        ("False", "WaitingForCredentials"),
        TEN_S,
        id="DatabaseReady-ClusterNotReady-missing-10s",
    ),
    pytest.param(
        World(mariadb=make_mariadb(ready=False)),
        ("False", "ClusterNotReady"),
        ("False", "WaitingForCredentials"),
        TEN_S,
        id="DatabaseReady-ClusterNotReady-not-ready-10s",
    ),
    pytest.param(
        World(order=make_order(database_name="bad-name")),
        ("False", "DatabaseNameInvalid"),
        ("False", "WaitingForCredentials"),
        TEN_MIN,
        id="DatabaseReady-DatabaseNameInvalid-10m",
    ),
    pytest.param(
        World(order=make_order(database_name="sys")),
        ("False", "DatabaseNameReserved"),
        ("False", "WaitingForCredentials"),
        TEN_MIN,
        id="DatabaseReady-DatabaseNameReserved-10m",
    ),
    pytest.param(
        World(databases=(make_database_cr(name="other", schema="app_db"),)),
        ("False", "DatabaseCollision"),
        ("False", "WaitingForCredentials"),
        TEN_MIN,
        id="DatabaseReady-DatabaseCollision-foreign-schema-10m",
    ),
    pytest.param(
        World(databases=(make_database_cr(name="app-db-d732fb0e-database-database"),)),
        ("False", "DatabaseCollision"),
        ("False", "WaitingForCredentials"),
        TEN_MIN,
        id="DatabaseReady-DatabaseCollision-unlabelled-child-name-10m",
    ),
    pytest.param(
        World(client_certificate=None),
        ("False", "WaitingForClientCertificate"),
        ("False", "WaitingForCredentials"),
        TEN_S,
        id="DatabaseReady-WaitingForClientCertificate-10s",
    ),
    pytest.param(
        World(role_error=("openbao: 500 on GET /v1/database/mariadb/roles/x: boom", 500)),
        ("False", "OpenBaoError"),
        None,
        ERROR,
        id="DatabaseReady-OpenBaoError-error-backoff",
    ),
    pytest.param(
        World(databases=(own_database_cr(ready=False),)),
        ("False", "WaitingForDatabase"),
        ("False", "WaitingForCredentials"),
        TEN_S,
        id="DatabaseReady-WaitingForDatabase-10s",
    ),
    pytest.param(
        World(external_secret=make_external_secret(ready=False)),
        ("False", "WaitingForCredentials"),
        ("False", "WaitingForCredentials"),
        TEN_S,
        id="DatabaseReady-WaitingForCredentials-eso-not-ready-10s",
    ),
    pytest.param(
        World(materialised=materialised(username="root")),
        ("False", "WaitingForCredentials"),
        ("False", "WaitingForCredentials"),
        TEN_S,
        id="DatabaseReady-WaitingForCredentials-no-engine-username-10s",
    ),
    pytest.param(
        World(),
        ("True", "DatabaseProvisioned"),
        ("True", "Delivered"),
        NONE,
        id="Delivered-management-waits-for-events",
    ),
    pytest.param(
        target_world(),
        ("True", "DatabaseProvisioned"),
        ("True", "Delivered"),
        TEN_MIN,
        id="Delivered-target-cluster-10m",
    ),
    pytest.param(
        World(applied=make_secret("app-db-credentials", "tenant-a", {"username": "v-old"})),
        ("True", "DatabaseProvisioned"),
        ("False", "WaitingForCredentials"),
        TEN_S,
        id="DeliveryReady-WaitingForCredentials-apply-not-current-10s",
    ),
    pytest.param(
        World(
            cp=_cp(database=TLS_DB),
            delivery_keystone_cluster_error='cluster "edge-9" is not engaged',
        ),
        ("True", "DatabaseProvisioned"),
        ("False", "TargetClusterUnavailable"),
        TEN_S,
        id="DeliveryReady-TargetClusterUnavailable-tls-10s",
    ),
    pytest.param(
        target_world(published=""),
        ("True", "DatabaseProvisioned"),
        ("False", "DatabaseNotPublished"),
        TEN_MIN,
        id="DeliveryReady-DatabaseNotPublished-10m",
    ),
    pytest.param(
        World(cp=_cp(database=TLS_DB)),
        ("True", "DatabaseProvisioned"),
        ("False", "WaitingForCABundle"),
        TEN_S,
        id="DeliveryReady-WaitingForCABundle-10s",
    ),
    pytest.param(
        World(delivered=make_secret("app-db-credentials", "tenant-a", {"x": "y"})),
        ("True", "DatabaseProvisioned"),
        ("False", "DeliveryRefused"),
        TEN_MIN,
        id="DeliveryReady-DeliveryRefused-10m",
    ),
    pytest.param(
        target_world(published="db.example.test:99999"),
        ("True", "DatabaseProvisioned"),
        ("False", "DeliveryError"),
        TEN_MIN,
        id="DeliveryReady-DeliveryError-endpoint-10m",
    ),
]


@pytest.mark.parametrize(("world", "database_ready", "delivery_ready", "result"), CASES)
def test_catalogue_row(
    world: World,
    database_ready: tuple[str, str],
    delivery_ready: tuple[str, str] | None,
    result: PassResult | str,
) -> None:
    sim = run_pass(world)
    got_db = sim.condition("DatabaseReady")
    assert got_db is not None
    assert got_db[:2] == database_ready
    got_delivery = sim.condition("DeliveryReady")
    if delivery_ready is None:
        assert got_delivery is None, "DeliveryReady is not written when provisioning errs"
    else:
        assert got_delivery is not None
        assert got_delivery[:2] == delivery_ready
    ready = sim.condition("Ready")
    assert ready is not None
    both_true = database_ready[0] == "True" and (delivery_ready or ("",))[0] == "True"
    assert ready[:2] == (("True", "AllReady") if both_true else ("False", "NotAllReady"))
    if result == ERROR:
        assert sim.record.result.error is not None
        assert sim.record.result.requeue_after is None
    else:
        assert sim.record.result == result


def test_ca_bundle_present_delivers_ca_crt() -> None:
    world = World(
        cp=_cp(database=TLS_DB),
        ca_bundle=make_secret("db-ca", "default", {"ca.crt": "PEM-CA"}),
    )
    sim = run_pass(world)
    assert sim.condition("DeliveryReady") == (
        "True",
        "Delivered",
        'credentials are delivered in Secret "app-db-credentials" (keys host, port, database, '
        'username, password, ca.crt) in namespace "tenant-a" on the management cluster',
    )
    assert sim.record.status.secret_keys[-1] == "ca.crt"


def test_a_fresh_orders_first_pass_adds_the_finalizer_and_goes_on_in_the_same_pass() -> None:
    sim = run_pass(World(order=make_order(finalizers=())))
    assert sim.io.finalizers == [[FINALIZER]]
    assert sim.steps == ("identity", "role", "database", "credentials", "secret")
    assert (sim.condition("DatabaseReady") or ())[:2] == ("True", "DatabaseProvisioned")
    assert (sim.condition("Ready") or ())[:2] == ("True", "AllReady")


def test_no_finalizer_is_added_before_the_namespace_assignment_gate_passes() -> None:
    sim = run_pass(World(order=make_order(finalizers=()), cp=make_control_plane(assignments=[])))
    assert sim.io.finalizers == []
    assert (sim.condition("DatabaseReady") or ())[:2] == ("False", "NamespaceNotAssigned")


def test_keystone_override_dynamic_over_static_passes() -> None:
    cp = make_control_plane(
        database={"clusterRef": {"name": "openstack-db"}, "credentialsMode": "Static"},
        keystone={"databaseCredentialsMode": "Dynamic"},
    )
    assert run_pass(World(cp=cp)).condition("DatabaseReady") is not None
    assert run_pass(World(cp=cp)).record.result == NONE


def test_converged_pass_repeated_costs_no_status_write() -> None:
    first = run_pass(World())
    again = run_pass(replace(World(), order=make_order(status=_dump(first))))
    assert not again.record.write_status
    assert again.record.status == first.record.status


def test_unused_helpers_are_consistent() -> None:
    assert client_certificate().value("ca.crt") == "PEM"


def _dump(sim: Any) -> dict[str, Any]:
    from tenantdb.core.mariadbdatabase.conditions import build_status_body

    body: dict[str, Any] = build_status_body(sim.record.status)
    return body
