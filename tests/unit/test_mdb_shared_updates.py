"""Which updates of a shared object wake its orders: only those a pass would read.

An event on the MariaDB, a secret store, the shared ServiceAccount or the client Certificate
wakes every order of the ControlPlanes that share it, so the watcher's routes pass an update on
only when something a pass reads changed: the MariaDB's Ready condition, or the spec and
metadata of the others. The routes are the watcher's own.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from tenantdb.adapters.kube import SERVICE_ACCOUNT
from tenantdb.adapters.mariadbdatabase import (
    CERTIFICATE,
    CLUSTER_SECRET_STORE,
    MARIADB,
    SECRET_STORE,
)
from watcher.mariadbdatabase import ROUTES
from watcher.routes import Route

MARIADB_OBJ: dict[str, Any] = {
    "apiVersion": "k8s.mariadb.com/v1alpha1",
    "kind": "MariaDB",
    "metadata": {"name": "openstack-db", "namespace": "openstack", "resourceVersion": "1"},
    "spec": {"replicas": 3},
    "status": {
        "conditions": [{"type": "Ready", "status": "True", "reason": "StatefulSetReady"}],
        "currentPrimary": "openstack-db-0",
    },
}
STORE: dict[str, Any] = {
    "apiVersion": "external-secrets.io/v1",
    "kind": "SecretStore",
    "metadata": {"name": "openbao-tenant-store", "namespace": "openstack", "resourceVersion": "1"},
    "spec": {"provider": {"vault": {"server": "https://openbao:8200", "path": "database"}}},
    "status": {"conditions": [{"type": "Ready", "status": "True"}]},
}


def _route(resource: object) -> Route:
    return next(r for r in ROUTES if r.resource == resource)


def _passes(route: Route, old: dict[str, Any], change: Callable[[dict[str, Any]], None]) -> bool:
    new = copy.deepcopy(old)
    change(new)
    new["metadata"]["resourceVersion"] = "2"
    return route.passes_update(route.fingerprint(old), route.fingerprint(new))


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(obj: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        for part in parents:
            obj = obj.setdefault(part, {})
        obj[last] = value

    return change


@pytest.mark.parametrize(
    ("change", "wakes"),
    [
        pytest.param(_set("status.currentPrimary", "openstack-db-1"), False, id="primary-moved"),
        pytest.param(_set("spec.replicas", 5), False, id="scaled"),
        pytest.param(_set("status.conditions", [{"type": "Ready", "status": "True",
                                                 "reason": "Other", "message": "m"}]),
                     False, id="ready-reworded"),
        pytest.param(_set("status.conditions", [{"type": "Ready", "status": "False"}]), True,
                     id="not-ready"),
        pytest.param(_set("status", {}), True, id="ready-gone"),
        pytest.param(_set("metadata.deletionTimestamp", "2026-01-01T00:00:00Z"), True,
                     id="being-deleted"),
        pytest.param(lambda obj: None, False, id="bookkeeping-only"),
    ],
)  # fmt: skip
def test_a_mariadb_update_wakes_its_orders_only_when_its_readiness_changes(
    change: Callable[[dict[str, Any]], None], wakes: bool
) -> None:
    assert _passes(_route(MARIADB), MARIADB_OBJ, change) is wakes


@pytest.mark.parametrize("resource", [SECRET_STORE, CLUSTER_SECRET_STORE, SERVICE_ACCOUNT,
                                      CERTIFICATE])  # fmt: skip
@pytest.mark.parametrize(
    ("change", "wakes"),
    [
        pytest.param(_set("status.conditions", [{"type": "Ready", "status": "False"}]), False,
                     id="status-only"),
        pytest.param(_set("spec.provider", {"vault": {"server": "https://other:8200"}}), True,
                     id="spec"),
        pytest.param(_set("metadata.labels", {"team": "db"}), True, id="labels"),
        pytest.param(_set("metadata.managedFields", [{"manager": "x"}]), False,
                     id="managed-fields"),
        pytest.param(lambda obj: None, False, id="bookkeeping-only"),
    ],
)  # fmt: skip
def test_a_shared_objects_update_wakes_its_orders_only_when_what_a_pass_reads_changes(
    resource: object, change: Callable[[dict[str, Any]], None], wakes: bool
) -> None:
    assert _passes(_route(resource), STORE, change) is wakes
