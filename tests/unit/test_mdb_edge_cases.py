"""The edge cases of the MariaDBDatabase reference, one test each, through the core plans."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from tenantdb.core.actions import ApplyObject, ApplyStrategy
from tenantdb.core.mariadbdatabase.actions import EnsureRole
from tenantdb.core.mariadbdatabase.conditions import build_status_body
from tenantdb.core.mariadbdatabase.delivery import REFRESHED_LOG
from tenantdb.core.mariadbdatabase.gates import should_read_control_plane
from tenantdb.core.mariadbdatabase.models import MariaDBDatabase
from tenantdb.core.mariadbdatabase.provision import plan_provision_failure
from tenantdb.core.objects import Secret
from tests.unit.mdb_builders import (
    ORDER_UID,
    World,
    child_labels,
    client_certificate,
    make_control_plane,
    make_database_cr,
    make_order,
    make_secret,
    materialised,
    names_for,
    own_database_cr,
    target_world,
)
from tests.unit.mdb_pass import run_pass


def _kinds(world: World) -> list[str]:
    sim = run_pass(world)
    assert sim.provision is not None
    return [
        a.manifest["kind"] if isinstance(a, ApplyObject) else type(a).__name__
        for a in sim.provision.actions
    ]


def _reason(world: World, condition: str = "DatabaseReady") -> str:
    got = run_pass(world).condition(condition)
    assert got is not None
    return got[1]


def test_same_order_on_another_cluster_collides_first_come_wins() -> None:
    home_child = make_database_cr(
        name=names_for("").database_cr, schema="app_db", labels=child_labels("")
    )
    world = target_world(databases=(home_child,))
    assert _reason(world) == "DatabaseCollision"


def test_collision_is_case_sensitive() -> None:
    world = World(databases=(own_database_cr(), make_database_cr(name="x", schema="APP_DB")))
    assert _reason(world) == "DatabaseProvisioned"


def test_same_schema_on_another_mariadb_is_no_collision() -> None:
    other = make_database_cr(name="x", schema="app_db", mariadb="another-db")
    assert _reason(World(databases=(own_database_cr(), other))) == "DatabaseProvisioned"


def test_foreign_database_without_spec_name_collides_by_metadata_name() -> None:
    assert _reason(World(databases=(make_database_cr(name="app_db"),))) == "DatabaseCollision"


def test_collision_logs_the_other_cr_but_status_names_only_the_schema() -> None:
    sim = run_pass(World(databases=(make_database_cr(name="someone-elses", schema="app_db"),)))
    got = sim.condition("DatabaseReady")
    assert got is not None
    assert "someone-elses" not in got[2]
    assert got[2].startswith('database "app_db" is already in use')
    (log,) = sim.record.logs
    assert log.message == "the database an order names is taken on the shared MariaDB"
    assert ("takenBy", "someone-elses") in log.fields


def test_another_orders_claim_refuses_before_any_write() -> None:
    # Two orders for one schema at once: the one that claimed it first creates; this one is
    # refused before its role or Database CR exist, as it would be on the other's CR.
    world = World(databases=(), claimed_by="someone-elses-database")
    sim = run_pass(world)
    got = sim.condition("DatabaseReady")
    assert got is not None
    assert got[1] == "DatabaseCollision"
    assert got[2].startswith('database "app_db" is already in use')
    assert _kinds(world) == []
    (log,) = sim.record.logs
    assert ("takenBy", "someone-elses-database") in log.fields


def test_a_deleted_order_lets_go_of_its_schema_claim() -> None:
    sim = run_pass(World(order=make_order(deleting=True)))
    assert sim.io.schema_releases == ["app_db"]


@pytest.mark.parametrize(
    "database_name",
    [
        pytest.param("a%b", id="percent"),
        pytest.param("a`b", id="backtick"),
        pytest.param("a.b", id="dot"),
        pytest.param("a-b", id="dash"),
        pytest.param("a" * 65, id="65-chars"),
    ],
)
def test_invalid_names_reach_neither_openbao_nor_a_database_cr(database_name: str) -> None:
    world = World(order=make_order(database_name=database_name))
    assert _kinds(world) == []
    assert _reason(world) == "DatabaseNameInvalid"


@pytest.mark.parametrize(
    ("database_name", "schema"),
    [
        pytest.param(None, "app_db", id="default"),
        pytest.param("Custom_DB", "Custom_DB", id="explicit"),
    ],
)
def test_database_cr_carries_the_effective_name(database_name: str | None, schema: str) -> None:
    world = World(order=make_order(database_name=database_name), databases=())
    sim = run_pass(world)
    assert sim.provision is not None
    database = next(
        a
        for a in sim.provision.actions
        if isinstance(a, ApplyObject) and a.manifest["kind"] == "Database"
    )
    assert database.manifest["spec"]["name"] == schema


def test_unlabelled_cr_of_the_child_name_is_refused_and_never_reshaped() -> None:
    squatter = make_database_cr(name=names_for().database_cr, schema="elsewhere_db")
    world = World(databases=(squatter,))
    assert _reason(world) == "DatabaseCollision"
    assert "Database" not in _kinds(world)
    got = run_pass(world).condition("DatabaseReady")
    assert got is not None
    assert got[2].startswith("refusing to adopt pre-existing Database default/")


@pytest.mark.parametrize(
    "certificate",
    [
        pytest.param(None, id="missing"),
        pytest.param(client_certificate(("tls.crt", "tls.key")), id="lacks-ca"),
    ],
)
def test_client_certificate_wait_still_applies_the_shared_identity(
    certificate: Secret | None,
) -> None:
    world = World(client_certificate=certificate)
    assert _kinds(world) == ["ServiceAccount", "Certificate"]
    sim = run_pass(world)
    assert sim.provision is not None
    assert sim.provision.actions[1].strategy is ApplyStrategy.CREATE_OR_UPDATE  # type: ignore[union-attr]
    assert _reason(world) == "WaitingForClientCertificate"


def test_converged_pass_applies_every_child_in_order() -> None:
    assert _kinds(World()) == [
        "ServiceAccount",
        "Certificate",
        "EnsureRole",
        "Database",
        "VaultDynamicSecret",
        "ExternalSecret",
    ]


@pytest.mark.parametrize(
    ("mode", "has_ca"),
    [
        pytest.param("require", True, id="require"),
        pytest.param("verify-full", True, id="verify-full"),
        pytest.param("disabled", False, id="disabled"),
        pytest.param("", False, id="empty"),
    ],
)
def test_ca_crt_follows_tls(mode: str, has_ca: bool) -> None:
    database: dict[str, Any] = {
        "clusterRef": {"name": "openstack-db"},
        "tls": {"mode": mode, "caBundleSecretRef": {"name": "db-ca"}},
    }
    world = World(
        cp=make_control_plane(database=database),
        ca_bundle=make_secret("db-ca", "default", {"ca.crt": "PEM-CA"}),
    )
    sim = run_pass(world)
    assert sim.delivery is not None
    assert sim.delivery.apply is not None
    data = sim.delivery.apply.manifest["data"]
    assert ("ca.crt" in data) is has_ca
    assert list(data)[:5] == ["host", "port", "database", "username", "password"]
    assert ("ca.crt" in sim.record.status.secret_keys) is has_ca


def test_order_on_keystones_cluster_gets_the_service_elsewhere_the_published_endpoint() -> None:
    home = run_pass(World(cp=make_control_plane(published="db.example.test:3306")))
    edge = run_pass(target_world(published="[fd00::1]:3306"))
    assert (home.record.status.host, home.record.status.port) == ("openstack-db.default.svc", 3306)
    assert (edge.record.status.host, edge.record.status.port) == ("fd00::1", 3306)


def test_management_order_with_keystone_placed_elsewhere_gets_the_published_endpoint() -> None:
    cp = make_control_plane(
        published="db.example.test:3306", keystone={"targetClusterRef": {"name": "edge-2"}}
    )
    sim = run_pass(World(cp=cp))
    assert sim.record.status.host == "db.example.test"


def test_foreign_secret_is_refused_untouched() -> None:
    sim = run_pass(World(delivered=make_secret("app-db-credentials", "tenant-a", {"k": "v"})))
    assert sim.delivery is not None
    assert sim.delivery.apply is None


def test_frozen_order_acts_on_nothing() -> None:
    sim = run_pass(World(cp=make_control_plane(assignments=[])))
    assert sim.provision is None
    assert sim.delivery is None


def _delivered(username: str) -> Secret:
    return make_secret(
        "app-db-credentials",
        "tenant-a",
        {"username": username, "password": "old"},
        controller_uid=ORDER_UID,
    )


@pytest.mark.parametrize(
    ("previous", "logs"),
    [
        pytest.param(None, 0, id="first-delivery"),
        pytest.param("v-kubernetes-older", 1, id="username-changed"),
        pytest.param("v-kubernetes-order.def-AbCdEf", 0, id="unchanged"),
    ],
)
def test_refresh_logs_exactly_once_per_username_change(previous: str | None, logs: int) -> None:
    world = World(delivered=None if previous is None else _delivered(previous))
    sim = run_pass(world)
    refreshed = [log for log in sim.record.logs if log.message == REFRESHED_LOG]
    assert len(refreshed) == logs
    for log in refreshed:
        assert "s3cr3t-pw" not in str(log)


def test_a_failed_step_leaves_the_status_it_wrote_for_its_retry() -> None:
    # A Ready order whose forced pass met an OpenBao outage: the retry, once OpenBao is back,
    # must compare its AllReady with the OpenBaoError now stored, not with the entry's AllReady.
    sim = run_pass(World(role_error=("openbao: 503 on PUT /v1/database/mariadb/roles/x", 503)))
    assert sim.reason == "OpenBaoError"
    (renoted,) = sim.io.notes.saved
    stored = MariaDBDatabase.model_validate(renoted.order)  # type: ignore[attr-defined]
    reasons = {c.type: c.reason for c in stored.status.conditions}
    assert reasons["DatabaseReady"] == "OpenBaoError"


def test_fresh_order_with_openbao_error_leaves_delivery_unwritten() -> None:
    sim = run_pass(World(role_error=("openbao: 403 on POST /login: permission denied", 403)))
    db = sim.condition("DatabaseReady")
    assert db is not None
    assert db[1] == "OpenBaoError"
    assert db[2].startswith("the operator's OpenBao login or policy is missing")
    assert sim.condition("DeliveryReady") is None
    assert sim.condition("Ready") == (
        "False",
        "NotAllReady",
        "One or more sub-conditions are not ready",
    )
    assert sim.record.result.error is not None
    assert sim.record.result.error.startswith('ensuring OpenBao database role "order.default.')


def test_openbao_error_keeps_a_previous_delivery_condition() -> None:
    converged = run_pass(World())
    order = make_order(status=build_status_body(converged.record.status))
    sim = run_pass(replace(World(), order=order, role_error=("openbao: 500 x", 500)))
    assert sim.condition("DeliveryReady") == converged.condition("DeliveryReady")


def test_kubernetes_failure_after_the_role_keeps_conditions_and_records_the_role() -> None:
    sim = run_pass(World())
    assert sim.provision is not None
    index = next(
        i
        for i, a in enumerate(sim.provision.actions)
        if isinstance(a, ApplyObject) and a.manifest["kind"] == "Database"
    )
    assert isinstance(sim.provision.actions[index - 1], EnsureRole)
    result = plan_provision_failure(sim.provision, index, "connection refused")
    assert result.outcome.conditions == ()
    assert result.outcome.error is not None
    assert result.outcome.error.startswith("ensuring Database default/app-db-")
    assert result.role_name == names_for().role


def test_materialised_secret_without_password_waits() -> None:
    assert _reason(World(materialised=materialised(password=""))) == "WaitingForCredentials"


def test_an_order_with_a_spec_field_from_a_newer_crd_is_still_served() -> None:
    raw = {
        "apiVersion": "c5c3.io/v1alpha1",
        "kind": "MariaDBDatabase",
        "metadata": {"name": "app-db", "namespace": "tenant-a", "uid": "u", "generation": 1},
        "spec": {
            "controlPlaneRef": {"name": "cp", "namespace": "default", "zone": "later"},
            "deletionPolicy": "Delete",
            "charset": "utf8mb4",
        },
    }
    order = MariaDBDatabase.model_validate(raw)
    assert order.spec.deletion_policy == "Delete"
    assert order.spec.control_plane_ref.name == "cp"


@pytest.mark.parametrize(
    ("cluster", "reads"),
    [
        pytest.param("", True, id="management"),
        pytest.param("edge-1", True, id="target"),
        pytest.param("x" * 64, False, id="name-too-long-reads-nothing-more"),
    ],
)
def test_the_control_plane_is_read_only_past_the_cluster_name_gate(
    cluster: str, reads: bool
) -> None:
    assert should_read_control_plane(cluster) is reads
