"""A MariaDBDatabase step checks its note against the order it serves before it writes: a note
that plans a write beyond that order's own children runs nothing, and the order is planned
afresh. The note is sealed in Redis; this is what holds should one be rewritten all the same."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import REGISTRY

from tenantdb.adapters.clusters import ClusterRegistry
from tenantdb.adapters.mariadbdatabase import MariaDBOrders
from tenantdb.settings import Settings
from tests.unit.mdb_builders import World, make_order
from tests.unit.mdb_pass import WorldRuntime, run_pass
from tests.unit.tamper import Tamper, rewrite_note


def _manifest(kind: str, field: str, value: str) -> Tamper:
    def change(note: dict[str, Any]) -> None:
        for action in note["plan"]["actions"]:
            manifest = action.get("manifest")
            if manifest and manifest["kind"] == kind:
                manifest["metadata"][field] = value

    return change


def _role(field: str, value: Any) -> Tamper:
    def change(note: dict[str, Any]) -> None:
        for action in note["plan"]["actions"]:
            if "role_name" in action:
                action[field] = value

    return change


def _extra(manifest: dict[str, Any]) -> Tamper:
    def change(note: dict[str, Any]) -> None:
        note["plan"]["actions"].append({"cluster": "", "manifest": manifest})

    return change


def _order_name(note: dict[str, Any]) -> None:
    note["order"]["metadata"]["name"] = "another-order"


SECRET = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x", "namespace": "default"}}
ROLE = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRoleBinding",
    "metadata": {"name": "everything"},
}


@pytest.mark.parametrize(
    "tamper",
    [
        pytest.param(_manifest("ServiceAccount", "namespace", "kube-system"), id="sa-elsewhere"),
        pytest.param(_manifest("Database", "name", "someone-elses-database"), id="foreign-db"),
        pytest.param(_manifest("ExternalSecret", "namespace", "kube-system"), id="es-elsewhere"),
        pytest.param(_role("role_name", "order.default.another"), id="another-role"),
        pytest.param(
            _role("client_certificate", {"namespace": "kube-system", "name": "admin"}),
            id="another-client-certificate",
        ),
        pytest.param(_extra(SECRET), id="extra-secret"),
        pytest.param(_extra(ROLE), id="extra-cluster-role-binding"),
        pytest.param(_order_name, id="another-order"),
    ],
)
def test_a_note_that_plans_beyond_the_orders_children_writes_nothing(tamper: Tamper) -> None:
    def rewrite(runtime: WorldRuntime) -> None:
        rewrite_note(runtime, tamper)

    labels = {"note": "pass", "reason": "Mismatch"}
    before = REGISTRY.get_sample_value("tenantdb_notes_refused_total", labels) or 0.0
    run = run_pass(World(), before_steps=rewrite)
    assert run.steps[0] == "identity"
    assert run.reason == "NoteRefused"
    assert run.io.actions == []
    assert REGISTRY.get_sample_value("tenantdb_notes_refused_total", labels) == before + 1


def test_the_note_a_pass_leaves_passes_its_own_check() -> None:
    run = run_pass(World())
    assert run.reason == "AllReady"
    assert len(run.io.actions) == 7


def test_a_teardown_note_that_deletes_beyond_the_orders_children_deletes_nothing() -> None:
    deleting = World(order=make_order(deleting=True, deletion_policy="Delete"))

    def elsewhere(note: dict[str, Any]) -> None:
        for action in note["plan"]["actions"]:
            if "ref" in action:
                action["ref"]["namespace"] = "kube-system"

    def rewrite(runtime: WorldRuntime) -> None:
        rewrite_note(runtime, elsewhere)

    run = run_pass(deleting, before_steps=rewrite)
    assert run.reason == "NoteRefused"
    assert run.io.actions == []
    untouched = run_pass(deleting)  # the same teardown, its note as the entry left it
    assert untouched.reason != "NoteRefused"
    assert untouched.io.actions


def test_an_action_the_runner_does_not_know_is_an_error_never_a_role_delete() -> None:
    runner = MariaDBOrders(ClusterRegistry({}), Settings())
    with pytest.raises(AssertionError):
        runner.run(object(), lambda: None)  # type: ignore[arg-type]
