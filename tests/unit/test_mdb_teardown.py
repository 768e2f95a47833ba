"""Teardown of a deleted MariaDBDatabase: order of deletes, held versus fail-open, finalizer."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from tenantdb.core.actions import DeleteObject, PatchObject
from tenantdb.core.mariadbdatabase.actions import RemoveRole
from tenantdb.core.mariadbdatabase.models import ControlPlane, MariaDBDatabase
from tenantdb.core.mariadbdatabase.openbao import compute_connection
from tenantdb.core.mariadbdatabase.results import PassResult
from tenantdb.core.mariadbdatabase.teardown import (
    TeardownMode,
    TeardownObservation,
    compute_teardown_result,
    plan_teardown,
)
from tests.unit.mdb_builders import (
    ORDER_UID,
    child_labels,
    client_certificate,
    make_control_plane,
    make_labelled,
    make_order,
    make_secret,
    names_for,
    own_database_cr,
    scope_for,
)


def _obs(
    *,
    cp: ControlPlane | None,
    order: MariaDBDatabase | None = None,
    cert: bool = True,
    children: bool = True,
    cleanup: str = "Skip",
) -> TeardownObservation:
    order = order or make_order(deleting=True)
    names = names_for()
    labelled = (make_labelled(names.credentials, child_labels()),) if children else ()
    return TeardownObservation(
        order=order,
        scope=scope_for(order, cp),
        control_plane_present=cp is not None,
        connection=compute_connection(None),
        client_certificate=client_certificate() if cert else None,
        external_secrets=labelled,
        vault_dynamic_secrets=labelled,
        databases=(own_database_cr(cleanup_policy=cleanup),) if children else (),
        delivered_secret=(
            make_secret("app-db-credentials", "tenant-a", {}, controller_uid=ORDER_UID)
            if children
            else None
        ),
    )


def _describe(plan_actions: tuple[object, ...]) -> list[str]:
    out = []
    for action in plan_actions:
        if isinstance(action, RemoveRole):
            out.append(f"remove-role {action.creds_path}")
        elif isinstance(action, DeleteObject):
            out.append(f"delete {action.ref.kind}")
        elif isinstance(action, PatchObject):
            out.append(f"patch {action.ref.kind} {action.merge_patch['spec']['cleanupPolicy']}")
    return out


@pytest.mark.parametrize(
    ("cp", "mode"),
    [
        pytest.param(make_control_plane(), TeardownMode.HELD, id="control-plane-present-held"),
        pytest.param(None, TeardownMode.FAIL_OPEN, id="control-plane-gone-fail-open"),
    ],
)
def test_children_go_in_order(cp: ControlPlane | None, mode: TeardownMode) -> None:
    plan = plan_teardown(_obs(cp=cp))
    assert plan.mode is mode
    role = names_for().role
    assert _describe(plan.actions) == [
        f"remove-role database/mariadb/creds/{role}",
        "delete ExternalSecret",
        "delete VaultDynamicSecret",
        "delete Database",
        "delete Secret",
    ]
    assert plan.deletes == 4


@pytest.mark.parametrize(
    ("policy", "stale", "patch"),
    [
        pytest.param("Delete", "Skip", "Delete", id="delete-over-stale-skip"),
        pytest.param("Retain", "Delete", "Skip", id="retain-over-stale-delete"),
        pytest.param(None, "Delete", "Skip", id="absent-reads-retain"),
        pytest.param("Delete", "Delete", None, id="in-force-no-patch"),
    ],
)
@pytest.mark.parametrize("cp", [make_control_plane(), None], ids=["with-cp", "cp-gone"])
def test_cleanup_policy_is_patched_before_the_delete(
    policy: str | None, stale: str, patch: str | None, cp: ControlPlane | None
) -> None:
    order = make_order(deleting=True, deletion_policy=policy)
    described = _describe(plan_teardown(_obs(cp=cp, order=order, cleanup=stale)).actions)
    if patch is None:
        assert not any(d.startswith("patch") for d in described)
    else:
        assert described.index(f"patch Database {patch}") < described.index("delete Database")


def test_client_certificate_gone_skips_openbao_with_the_log_line() -> None:
    plan = plan_teardown(_obs(cp=None, cert=False))
    assert not any(isinstance(a, RemoveRole) for a in plan.actions)
    assert plan.deletes == 4
    assert plan.logs[0].message == (
        "the OpenBao client certificate is gone; leaving database role "
        f'"{names_for().role}" to its TTLs'
    )


def test_gone_control_plane_places_the_database_cr_in_child_namespace_on_management() -> None:
    plan = plan_teardown(_obs(cp=None))
    database = next(
        a for a in plan.actions if isinstance(a, DeleteObject) and a.ref.kind == "Database"
    )
    assert (database.ref.cluster, database.ref.namespace) == ("", "default")


def test_keystone_placed_elsewhere_deletes_the_cr_there() -> None:
    cp = make_control_plane(
        keystone={"targetClusterRef": {"name": "edge-2"}, "namespace": {"name": "ks"}}
    )
    plan = plan_teardown(_obs(cp=cp))
    database = next(
        a for a in plan.actions if isinstance(a, DeleteObject) and a.ref.kind == "Database"
    )
    assert (database.ref.cluster, database.ref.namespace) == ("edge-2", "ks")


def test_foreign_and_unowned_objects_are_left() -> None:
    obs = _obs(cp=make_control_plane())
    foreign = make_secret("app-db-credentials", "tenant-a", {})
    stranger = make_labelled("not-under-the-prefix", child_labels())
    obs = TeardownObservation(
        **{**obs.__dict__, "delivered_secret": foreign, "external_secrets": (stranger,)}
    )
    described = _describe(plan_teardown(obs).actions)
    assert "delete Secret" not in described
    assert "delete ExternalSecret" not in described


@pytest.mark.parametrize(
    ("cp", "children", "failures", "release", "result"),
    [
        pytest.param(
            make_control_plane(),
            True,
            [],
            False,
            PassResult(timedelta(seconds=10)),
            id="held-children-listed-requeue-10s",
        ),
        pytest.param(
            make_control_plane(), False, [], True, PassResult(), id="held-nothing-left-release"
        ),
        pytest.param(
            make_control_plane(),
            True,
            [(0, "openbao: 503 on POST x: sealed")],
            False,
            PassResult(
                error='removing OpenBao database role "ROLE": openbao: 503 on POST x: sealed'
            ),
            id="held-openbao-error-retries",
        ),
        pytest.param(None, True, [], True, PassResult(), id="fail-open-release-at-once"),
        pytest.param(
            None,
            True,
            [(0, "boom"), (3, "gone")],
            True,
            PassResult(),
            id="fail-open-errors-still-release",
        ),
    ],
)
def test_finalizer_decision(
    cp: ControlPlane | None,
    children: bool,
    failures: list[tuple[int, str]],
    release: bool,
    result: PassResult,
) -> None:
    plan = plan_teardown(_obs(cp=cp, children=children))
    decided = compute_teardown_result(plan, failures)
    assert decided.release_finalizer is release
    expected_error = result.error.replace("ROLE", names_for().role) if result.error else None
    assert decided.result == PassResult(result.requeue_after, expected_error)


def test_fail_open_logs() -> None:
    plan = plan_teardown(_obs(cp=None))
    clean = compute_teardown_result(plan)
    assert clean.logs[0].message == (
        "referenced ControlPlane is gone; releasing the MariaDBDatabase finalizer"
    )
    failed = compute_teardown_result(plan, [(0, "boom")])
    assert failed.logs[0].message == (
        "best-effort teardown of MariaDBDatabase children failed; releasing the finalizer anyway"
    )


def test_each_delete_names_the_object_the_teardown_saw() -> None:
    # A stale teardown's delete must not land on an object a re-created order made since.
    obs = _obs(cp=make_control_plane())

    def seen(obj: Any, uid: str) -> Any:
        return obj.model_copy(update={"metadata": obj.metadata.model_copy(update={"uid": uid})})

    obs = replace(
        obs,
        external_secrets=tuple(seen(o, "es-uid") for o in obs.external_secrets),
        vault_dynamic_secrets=tuple(seen(o, "vds-uid") for o in obs.vault_dynamic_secrets),
        databases=tuple(seen(o, "db-uid") for o in obs.databases),
        delivered_secret=seen(obs.delivered_secret, "secret-uid"),
    )
    deletes = {a.ref.kind: a.uid for a in plan_teardown(obs).actions if isinstance(a, DeleteObject)}
    assert deletes == {
        "ExternalSecret": "es-uid",
        "VaultDynamicSecret": "vds-uid",
        "Database": "db-uid",
        "Secret": "secret-uid",
    }
