"""An object an order depends on that does not parse is named on the order, never retried blind.

A ControlPlane of a newer API version, a malformed Database CR: the pass writes
DependencyUnreadable with the object and the fields that failed (never their values), runs no
action, and comes back on the object's watch event or the 10-minute refresh.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from tests.unit.mdb_builders import (
    World,
    make_control_plane,
    make_database_cr,
    names_for,
    own_database_cr,
)
from tests.unit.mdb_pass import run_pass


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
