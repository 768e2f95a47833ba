"""An apply that would change nothing is left out of the plan, and only such an apply."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest

from tenantdb.core.actions import UNSTORED_VERSION, ApplyObject
from tenantdb.core.applied import is_applied
from tenantdb.core.mariadbdatabase.actions import EnsureRole
from tenantdb.core.mariadbdatabase.models import DatabaseCR
from tenantdb.core.mariadbdatabase.provision import (
    ProvisionObservation,
    is_relevant_database,
    plan_provision,
)
from tests.unit.mdb_builders import (
    CONNECTION,
    World,
    client_certificate,
    make_control_plane,
    make_database_cr,
    make_order,
    own_database_cr,
    scope_for,
)

DESIRED: dict[str, Any] = {
    "apiVersion": "k8s.mariadb.com/v1alpha1",
    "kind": "Database",
    "metadata": {"name": "db", "namespace": "ks", "labels": {"a": "1"}},
    "spec": {"name": "app_db", "cleanupPolicy": "Skip", "mariaDbRef": {"name": "openstack-db"}},
}


def _live(**changes: Any) -> dict[str, Any]:
    live = copy.deepcopy(DESIRED)
    live["metadata"].update(uid="u-1", resourceVersion="7", generation=2)
    live["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
    for path, value in changes.items():
        section, _, field = path.partition("__")
        live[section][field] = value
    return live


@pytest.mark.parametrize(
    ("live", "applied"),
    [
        pytest.param(None, False, id="absent"),
        pytest.param(_live(), True, id="as-desired-plus-server-fields"),
        pytest.param(_live(metadata__labels={"a": "1", "b": "2"}), True, id="extra-label"),
        pytest.param(_live(metadata__labels={"a": "2"}), False, id="label-changed"),
        pytest.param(_live(metadata__labels={}), False, id="label-removed"),
        pytest.param(
            _live(spec__cleanupPolicy="Delete"), False, id="deletion-policy-not-yet-applied"
        ),
        pytest.param(_live(spec__mariaDbRef={"name": "other"}), False, id="nested-field-changed"),
        pytest.param(
            _live(spec__mariaDbRef={"name": "openstack-db", "namespace": "ks"}),
            True,
            id="server-default-nested",
        ),
    ],
)
def test_an_apply_is_skipped_only_when_every_field_it_sets_is_in_place(
    live: dict[str, Any] | None, applied: bool
) -> None:
    assert is_applied(DESIRED, live) is applied


def test_lists_match_item_by_item() -> None:
    desired = {"metadata": {"ownerReferences": [{"uid": "a"}]}, "spec": {"keys": ["x", "y"]}}
    assert is_applied(desired, {"metadata": {"ownerReferences": [{"uid": "a", "x": 1}]},
                                "spec": {"keys": ["x", "y"]}})  # fmt: skip
    assert not is_applied(desired, {"metadata": {"ownerReferences": [{"uid": "a"}]},
                                    "spec": {"keys": ["y", "x"]}})  # fmt: skip
    assert not is_applied(desired, {"metadata": {"ownerReferences": []}, "spec": {"keys": []}})


def _observation(world: World, **fields: Any) -> ProvisionObservation:
    order = world.order
    cp = world.cp or make_control_plane()
    return ProvisionObservation(
        order=order,
        scope=scope_for(order, cp),
        connection=CONNECTION,
        mariadb=world.mariadb,
        databases=world.databases,
        client_certificate=client_certificate(),
        vault_dynamic_secret=world.vault_dynamic_secret,
        external_secret=world.external_secret,
        materialised_secret=world.materialised,
        **fields,
    )


def _as_live(observation: ProvisionObservation) -> ProvisionObservation:
    """What the API server returns for every child the plan applies, as the plan wants it."""
    full = plan_provision(observation)
    live = {
        a.ref: {**a.manifest, "metadata": {**a.manifest["metadata"], "uid": "u"}}
        for a in full.actions
        if isinstance(a, ApplyObject)
    }
    role = next(a for a in full.actions if isinstance(a, EnsureRole))
    return replace(observation, live=live, role=role.body.to_request(), role_observed=True)


def test_a_converged_order_plans_no_write_at_all() -> None:
    observed = _as_live(_observation(World(order=make_order())))
    plan = plan_provision(observed)
    assert plan.actions == ()
    assert plan.result.outcome.proceed


def test_a_child_drifted_by_hand_is_the_only_write() -> None:
    observed = _as_live(_observation(World()))
    database = next(r for r in observed.live if r.kind == "Database")
    current = observed.live[database]
    assert current is not None
    drifted = {**observed.live, database: {**current, "spec": {}}}
    plan = plan_provision(replace(observed, live=drifted))
    assert [a.ref.kind for a in plan.actions if isinstance(a, ApplyObject)] == ["Database"]
    assert not any(isinstance(a, EnsureRole) for a in plan.actions)


@pytest.mark.parametrize(
    ("role", "observed", "ensured"),
    [
        pytest.param(None, False, True, id="not-observed-is-ensured"),
        pytest.param(None, True, True, id="absent-role-is-written"),
        pytest.param({"db_name": "other"}, True, True, id="drifted-role-is-written"),
    ],
)
def test_the_role_is_written_unless_seen_up_to_date(
    role: dict[str, Any] | None, observed: bool, ensured: bool
) -> None:
    base = _as_live(_observation(World()))
    plan = plan_provision(replace(base, role=role, role_observed=observed))
    assert any(isinstance(a, EnsureRole) for a in plan.actions) is ensured


@pytest.mark.parametrize(
    ("database", "relevant"),
    [
        pytest.param(own_database_cr(), True, id="the-child"),
        pytest.param(
            make_database_cr(name="someone-elses", schema="app_db"), True, id="same-schema"
        ),
        pytest.param(make_database_cr(name="app_db"), True, id="schema-from-metadata-name"),
        pytest.param(make_database_cr(name="x", schema="App_db"), False, id="case-differs"),
        pytest.param(
            make_database_cr(name="x", schema="app_db", mariadb="other-db"),
            False,
            id="another-mariadb",
        ),
        pytest.param(make_database_cr(name="unrelated", schema="other"), False, id="unrelated"),
    ],
)
def test_only_databases_that_can_matter_are_read_in_full(
    database: DatabaseCR, relevant: bool
) -> None:
    order = make_order()
    scope = scope_for(order, make_control_plane())
    raw = database.model_dump(mode="json", by_alias=True)
    assert is_relevant_database(raw, scope) is relevant
    # Whatever is left out changes no decision: the plan is the same without it.
    world = World(databases=(own_database_cr(), database))
    kept = tuple(
        d
        for d in world.databases
        if is_relevant_database(d.model_dump(mode="json", by_alias=True), scope)
    )
    full = plan_provision(_observation(world))
    assert plan_provision(_observation(replace(world, databases=kept))) == full


def test_an_apply_carries_the_version_its_child_was_read_at() -> None:
    observed = _as_live(_observation(World()))
    database = next(r for r in observed.live if r.kind == "Database")
    current = observed.live[database]
    assert current is not None
    moved = {**current, "metadata": {**current["metadata"], "resourceVersion": "41"}, "spec": {}}
    drifted = {**observed.live, database: moved}
    plan = plan_provision(replace(observed, live=drifted))
    (apply,) = (a for a in plan.actions if isinstance(a, ApplyObject))
    assert apply.read_version == "41"


def test_an_apply_of_a_child_read_absent_may_only_create_it() -> None:
    observed = _as_live(_observation(World()))
    database = next(r for r in observed.live if r.kind == "Database")
    plan = plan_provision(replace(observed, live={**observed.live, database: None}))
    (apply,) = (a for a in plan.actions if isinstance(a, ApplyObject))
    assert apply.read_version == UNSTORED_VERSION


def test_an_apply_of_a_child_not_read_and_a_create_or_update_carry_no_version() -> None:
    plan = plan_provision(_observation(World()))
    applies = [a for a in plan.actions if isinstance(a, ApplyObject)]
    assert applies, "a new order's plan applies its first children"
    assert [a.read_version for a in applies] == [None] * len(applies)


def test_a_login_token_that_dies_before_the_refresh_stops_the_leg_before_the_generator() -> None:
    """Every credential ESO reads is revoked with its login token: with tokens shorter than the
    24 h refresh, the order gets no generator (so no credential is delivered) and says why."""
    observed = replace(_as_live(_observation(World(external_secret=None))), login_ttl=30)
    plan = plan_provision(replace(observed, live={}))
    kinds = [a.ref.kind for a in plan.actions if isinstance(a, ApplyObject)]
    assert "VaultDynamicSecret" not in kinds
    assert "ExternalSecret" not in kinds
    outcome = plan.result.outcome
    assert not outcome.proceed
    update = next(c for c in outcome.conditions if c.type == "DatabaseReady")
    assert (update.status, update.reason) == (False, "OpenBaoError")
    assert "kubernetes/management/role/order-db" in update.message
    assert "30s" in update.message
    assert plan.result.role_name


def test_a_login_token_that_outlives_the_refresh_changes_nothing() -> None:
    observed = _as_live(_observation(World()))
    assert plan_provision(replace(observed, login_ttl=72 * 3600)) == plan_provision(observed)
