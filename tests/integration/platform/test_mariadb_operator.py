"""The mariadb-operator stand-in: a Ready Database CR means its schema exists on the real MariaDB,
and deleting it drops the schema under cleanupPolicy Delete (or unset) and keeps it under Skip."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from tenantdb.core.mariadbdatabase.manifests import build_database_cr
from tenantdb.core.mariadbdatabase.models import DeletionPolicy
from tests.support import wait_for

from .conftest import CP_NAMESPACE, ready, schema_exists, sql_scalar, suffix

DB = ("k8s.mariadb.com", "v1alpha1", "databases")
FINALIZER = "database.k8s.mariadb.com/finalizer"


def _get(custom: client.CustomObjectsApi, name: str) -> dict[str, Any] | None:
    try:
        obj: dict[str, Any] = custom.get_namespaced_custom_object(
            *DB[:2], CP_NAMESPACE, DB[2], name
        )
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return obj


def _database(name: str, schema: str, cleanup: str | None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "k8s.mariadb.com/v1alpha1",
        "kind": "Database",
        "metadata": {"name": name},
        "spec": {"mariaDbRef": {"name": "openstack-db", "waitForIt": True}, "name": schema, **spec},
    }
    if cleanup is not None:
        body["spec"]["cleanupPolicy"] = cleanup
    return body


@pytest.mark.parametrize(
    ("cleanup", "dropped"), [("Delete", True), (None, True), ("Skip", False)], ids=str
)
def test_ready_database_has_its_schema_and_deletion_follows_cleanup_policy(
    custom: client.CustomObjectsApi,
    schemas: Callable[[str], str],
    cleanup: str | None,
    dropped: bool,
) -> None:
    schema = schemas("mdbop")
    name = f"db-{suffix()}"
    body = _database(name, schema, cleanup, characterSet="utf8mb4", collate="utf8mb4_unicode_ci")
    custom.create_namespaced_custom_object(*DB[:2], CP_NAMESPACE, DB[2], body)
    created = wait_for(lambda: ready(_get(custom, name)), what="the Database to be Ready")
    assert created["reason"] == "Created"
    assert schema_exists(schema)
    charset = sql_scalar(
        "SELECT DEFAULT_COLLATION_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = %s",
        schema,
    )
    assert charset == "utf8mb4_unicode_ci"
    assert FINALIZER in (_get(custom, name) or {})["metadata"]["finalizers"]

    custom.delete_namespaced_custom_object(*DB[:2], CP_NAMESPACE, DB[2], name)
    wait_for(lambda: _get(custom, name) is None, what="the Database to go")
    assert schema_exists(schema) is not dropped


def test_database_built_by_tenantdb_is_served(
    custom: client.CustomObjectsApi, schemas: Callable[[str], str]
) -> None:
    schema = schemas("mdbtdb")
    name = f"order-{suffix()}-database"
    body = build_database_cr(
        name=name,
        keystone_namespace=CP_NAMESPACE,
        cluster_ref="openstack-db",
        schema=schema,
        deletion_policy=DeletionPolicy.DELETE,
        labels={"c5c3.io/mariadbdatabase-name": "order"},
    )
    custom.create_namespaced_custom_object(*DB[:2], CP_NAMESPACE, DB[2], body)
    wait_for(lambda: ready(_get(custom, name)), what="the Database to be Ready")
    stored = _get(custom, name) or {}
    assert stored["spec"]["cleanupPolicy"] == "Delete"
    assert stored["spec"]["mariaDbRef"] == {"name": "openstack-db", "waitForIt": True}
    custom.patch_namespaced_custom_object(
        *DB[:2], CP_NAMESPACE, DB[2], name, {"spec": {"cleanupPolicy": "Skip"}}
    )
    custom.delete_namespaced_custom_object(*DB[:2], CP_NAMESPACE, DB[2], name)
    wait_for(lambda: _get(custom, name) is None, what="the Database to go")
    assert schema_exists(schema)


def test_invalid_schema_name_never_reaches_sql(custom: client.CustomObjectsApi) -> None:
    name = f"db-{suffix()}"
    schema = f"bad`name-{suffix()}"
    custom.create_namespaced_custom_object(
        *DB[:2], CP_NAMESPACE, DB[2], _database(name, schema, "Delete")
    )
    try:

        def refused() -> dict[str, Any] | None:
            conditions = ((_get(custom, name) or {}).get("status") or {}).get("conditions") or []
            return next((c for c in conditions if c["status"] == "False"), None)

        cond = wait_for(refused, what="the refusal")
        assert cond["reason"] == "Failed"
        assert "invalid database name" in cond["message"]
        assert not schema_exists(schema)
    finally:
        custom.delete_namespaced_custom_object(*DB[:2], CP_NAMESPACE, DB[2], name)
        wait_for(lambda: _get(custom, name) is None, what="the Database to go")


def test_database_without_its_mariadb_waits(custom: client.CustomObjectsApi) -> None:
    name = f"db-{suffix()}"
    body = _database(name, f"nowhere_{suffix()}", "Delete")
    body["spec"]["mariaDbRef"]["name"] = "absent-db"
    custom.create_namespaced_custom_object(*DB[:2], CP_NAMESPACE, DB[2], body)
    try:

        def waiting() -> dict[str, Any] | None:
            conditions = ((_get(custom, name) or {}).get("status") or {}).get("conditions") or []
            return next((c for c in conditions if c["status"] == "False"), None)

        assert "not found" in wait_for(waiting, what="the wait")["message"]
    finally:
        custom.delete_namespaced_custom_object(*DB[:2], CP_NAMESPACE, DB[2], name)
        wait_for(lambda: _get(custom, name) is None, what="the Database to go")
