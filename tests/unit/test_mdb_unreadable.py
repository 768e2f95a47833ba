"""An object an order depends on that does not parse is named on the order, never retried blind.

A ControlPlane of a newer API version, a malformed Database CR or SecretStore: the pass writes
DependencyUnreadable with the object and the fields that failed (never their values), runs no
action, and comes back on the object's watch event or the 10-minute refresh. A deleting order is
held the same way, its finalizer kept and nothing removed.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from tenantdb.core.actions import DeleteObject
from tenantdb.core.mariadbdatabase.actions import RemoveRole
from tenantdb.core.mariadbdatabase.naming import FINALIZER
from tests.unit.mdb_builders import (
    World,
    make_control_plane,
    make_database_cr,
    make_order,
    names_for,
    own_database_cr,
)
from tests.unit.mdb_pass import PassRun, run_pass


def _raw(model: Any) -> dict[str, Any]:
    return dict(model.model_dump(mode="json", by_alias=True, exclude_none=True))


def test_a_control_plane_that_does_not_parse_is_named_on_both_conditions() -> None:
    cp = _raw(make_control_plane())
    cp["spec"]["namespaceAssignments"] = {"tenant-a": "s3cr3t-looking-value"}  # a newer shape
    run = run_pass(World(cp_raw=cp))

    for condition in ("DatabaseReady", "DeliveryReady"):
        found = run.condition(condition)
        assert found is not None
        status, reason, message = found
        assert (status, reason) == ("False", "DependencyUnreadable")
        assert message.startswith(
            "ControlPlane default/cp cannot be read: spec.namespaceAssignments"
        )
        assert "s3cr3t-looking-value" not in message, "a value the parse failed on is never shown"
    assert run.provision is None, "no leg runs past an unreadable ControlPlane"
    assert run.io.actions == []
    assert run.record.result.requeue_after == timedelta(minutes=10)


def test_a_foreign_database_that_does_not_parse_is_passed_over() -> None:
    foreign = _raw(make_database_cr(name="someone-elses", schema="other_db"))
    foreign["spec"]["mariaDbRef"] = "openstack-db"  # not an object: mariadb-operator refuses it too
    run = run_pass(World(database_raws=(_raw(own_database_cr()), foreign)))

    ready = run.condition("Ready")
    assert ready is not None
    assert ready[:2] == ("True", "AllReady")


def test_the_orders_own_database_that_does_not_parse_stops_the_provision_leg() -> None:
    own = _raw(own_database_cr())
    own["spec"]["name"] = ["app_db"]
    run = run_pass(World(database_raws=(own,)))

    found = run.condition("DatabaseReady")
    assert found is not None
    status, reason, message = found
    assert (status, reason) == ("False", "DependencyUnreadable")
    assert message.startswith(f"Database default/{names_for('').database_cr} cannot be read")
    assert "spec.name" in message
    delivery = run.condition("DeliveryReady")
    assert delivery is not None
    assert delivery[:2] == ("False", "WaitingForCredentials")
    assert run.io.actions == [], "nothing is written over a child that cannot be read"


# -- a deleting order --------------------------------------------------------------------------


def _deleting(**overrides: Any) -> World:
    return World(order=make_order(deleting=True), **overrides)


def _store(server: Any) -> dict[str, Any]:
    vault = {"server": server, "path": "secret", "auth": {"kubernetes": {"mountPath": "k8s"}}}
    return {
        "apiVersion": "external-secrets.io/v1",
        "kind": "SecretStore",
        "metadata": {"name": "openbao", "namespace": "default"},
        "spec": {"provider": {"vault": vault}},
    }


def _assert_deletion_held(run: PassRun, what: str, field: str) -> None:
    for condition in ("DatabaseReady", "DeliveryReady"):
        found = run.condition(condition)
        assert found is not None
        status, reason, message = found
        assert (status, reason) == ("False", "DependencyUnreadable")
        assert message.startswith(f"{what} cannot be read: {field}")
        assert "the deletion waits until it is fixed" in message
    assert run.steps == (), "no teardown step is handed over"
    assert run.io.actions == [], "nothing is removed while the teardown cannot read its inputs"
    assert run.io.finalizers == [], "the finalizer stays"
    assert run.record.result.requeue_after == timedelta(minutes=10)


def test_a_deletion_whose_control_plane_does_not_parse_is_held_and_named() -> None:
    cp = _raw(make_control_plane())
    cp["spec"]["namespaceAssignments"] = {"tenant-a": "s3cr3t-looking-value"}
    run = run_pass(_deleting(cp_raw=cp))

    _assert_deletion_held(run, "ControlPlane default/cp", "spec.namespaceAssignments")
    for condition in ("DatabaseReady", "DeliveryReady"):
        found = run.condition(condition)
        assert found is not None
        assert "s3cr3t-looking-value" not in found[2]


def test_a_deletion_whose_secret_store_does_not_parse_is_held_and_named() -> None:
    store = _store({"url": "https://openbao.example:8200"})  # an object where a URL belongs
    run = run_pass(_deleting(store_raw=store))

    _assert_deletion_held(run, "SecretStore default/openbao", "spec.provider.vault.server")


def test_a_deletion_whose_own_database_does_not_parse_is_held_and_named() -> None:
    own = _raw(own_database_cr())
    own["spec"]["name"] = ["app_db"]
    run = run_pass(_deleting(database_raws=(own,)))

    _assert_deletion_held(run, f"Database default/{names_for('').database_cr}", "spec.name")


def test_a_deletion_goes_ahead_once_its_secret_store_parses_again() -> None:
    run = run_pass(_deleting(store_raw=_store("https://openbao.example:8200")))

    assert run.steps, "the teardown is handed over"
    removed = [a for a in run.io.actions if isinstance(a, RemoveRole)]
    assert [r.connection.server for r in removed] == ["https://openbao.example:8200"]
    assert any(isinstance(a, DeleteObject) and a.ref.kind == "Database" for a in run.io.actions)


def _order_raw(**spec: Any) -> dict[str, Any]:
    raw = _raw(make_order())
    raw["spec"].update(spec)
    return raw


def test_an_order_whose_own_body_does_not_parse_says_which_field_and_does_nothing() -> None:
    raw = _order_raw(deletionPolicy={"not": "a policy"})
    run = run_pass(World(order_raw=raw))

    assert run.reason == "OrderUnreadable"
    assert run.io.actions == []
    assert run.io.finalizers == []
    assert run.io.statuses == []
    (patch,) = run.io.status_patches
    conditions = {c["type"]: c for c in patch["conditions"]}
    for condition in ("DatabaseReady", "DeliveryReady"):
        assert conditions[condition]["status"] == "False"
        assert conditions[condition]["reason"] == "OrderUnreadable"
        assert "spec.deletionPolicy" in conditions[condition]["message"]
        assert "not a policy" not in conditions[condition]["message"]
    assert (conditions["Ready"]["status"], conditions["Ready"]["reason"]) == (
        "False",
        "NotAllReady",
    )


def test_an_order_that_already_says_it_is_unreadable_is_not_written_again() -> None:
    raw = _order_raw(deletionPolicy={"not": "a policy"})
    first = run_pass(World(order_raw=raw)).io.status_patches[0]
    again = run_pass(World(order_raw={**raw, "status": first}))
    assert again.reason == "OrderUnreadable"
    assert again.io.status_patches == []


def test_an_order_whose_status_does_not_parse_gets_its_conditions_afresh() -> None:
    raw = _order_raw()
    raw["status"] = {"conditions": "not a list", "databaseName": "kept"}
    run = run_pass(World(order_raw=raw))
    assert run.reason == "OrderUnreadable"
    (patch,) = run.io.status_patches
    assert set(patch) == {"conditions", "observedGeneration"}, "other fields are left as stored"
    assert "status.conditions" in patch["conditions"][0]["message"]


def test_a_deleting_order_that_does_not_parse_keeps_its_finalizer_and_children() -> None:
    raw = _order_raw(deletionPolicy=7)
    raw["metadata"]["deletionTimestamp"] = "2026-12-04T02:00:00Z"
    raw["metadata"]["finalizers"] = [FINALIZER]
    run = run_pass(World(order_raw=raw))
    assert run.reason == "OrderUnreadable"
    assert run.io.actions == []
    assert run.io.finalizers == []
    (patch,) = run.io.status_patches
    assert "deletion waits" in patch["conditions"][0]["message"]
