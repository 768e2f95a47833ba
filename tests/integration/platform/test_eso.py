"""The ESO stand-in: a VaultDynamicSecret behind an ExternalSecret delivers working credentials."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pymysql
import pytest
from kubernetes import client

from devstack.platform import Platform
from tenantdb.core.mariadbdatabase.manifests import (
    build_external_secret,
    build_vault_dynamic_secret,
)
from tenantdb.core.mariadbdatabase.naming import compute_creds_path
from tenantdb.core.mariadbdatabase.openbao import OpenBaoConnection
from tests.support import root_sql, wait_for

from .conftest import CP_NAMESPACE, ClientPEMs, decoded, suffix

ES = ("external-secrets.io", "v1", "externalsecrets")
GENERATOR = ("generators.external-secrets.io", "v1alpha1", "vaultdynamicsecrets")


def _connection(custom: client.CustomObjectsApi) -> OpenBaoConnection:
    """Read server and mount from the ControlPlane's SecretStore, as tenantdb does."""
    store = custom.get_namespaced_custom_object(
        "external-secrets.io", "v1", CP_NAMESPACE, "secretstores", "openbao-tenant-store"
    )
    vault = store["spec"]["provider"]["vault"]
    return OpenBaoConnection(vault["server"], vault["auth"]["kubernetes"]["mountPath"])


@pytest.fixture
def pair(
    custom: client.CustomObjectsApi, shared_identity: ClientPEMs
) -> Iterator[Callable[[str], str]]:
    """Create generator + ExternalSecret pairs with tenantdb's builders; delete them after."""
    made: list[str] = []

    def create(role: str) -> str:
        name = f"eso-{suffix()}-credentials"
        labels = {"c5c3.io/mariadbdatabase-name": name[:20], "devstack-test": "eso"}
        generator = build_vault_dynamic_secret(
            name=name,
            cp_namespace=CP_NAMESPACE,
            creds_path=compute_creds_path(role),
            connection=_connection(custom),
            labels=labels,
        )
        custom.create_namespaced_custom_object(
            *GENERATOR[:2], CP_NAMESPACE, GENERATOR[2], generator
        )
        external = build_external_secret(name=name, cp_namespace=CP_NAMESPACE, labels=labels)
        custom.create_namespaced_custom_object(*ES[:2], CP_NAMESPACE, ES[2], external)
        made.append(name)
        return name

    yield create
    for name in made:
        custom.delete_namespaced_custom_object(*ES[:2], CP_NAMESPACE, ES[2], name)
        custom.delete_namespaced_custom_object(*GENERATOR[:2], CP_NAMESPACE, GENERATOR[2], name)


def _es(custom: client.CustomObjectsApi, name: str) -> dict[str, Any]:
    obj: dict[str, Any] = custom.get_namespaced_custom_object(*ES[:2], CP_NAMESPACE, ES[2], name)
    return obj


def _synced_secret(
    core: client.CoreV1Api,
    custom: client.CustomObjectsApi,
    name: str,
    not_user: str = "",
    after: datetime | None = None,
) -> tuple[dict[str, Any], client.V1Secret]:
    """Wait for the ExternalSecret to be Ready (refreshed later than `after`, when given) with a
    Secret whose user is not `not_user`. ESO writes the Secret before the status."""

    def probe() -> tuple[dict[str, Any], client.V1Secret] | None:
        es = _es(custom, name)
        conditions = (es.get("status") or {}).get("conditions") or []
        if not any(c["type"] == "Ready" and c["status"] == "True" for c in conditions):
            return None
        refreshed = (es.get("status") or {}).get("refreshTime")
        if after is not None and (not refreshed or datetime.fromisoformat(refreshed) <= after):
            return None
        try:
            secret = core.read_namespaced_secret(name, CP_NAMESPACE)
        except client.ApiException:
            return None
        if decoded(secret, "username").decode() == not_user:
            return None
        return es, secret

    synced: tuple[dict[str, Any], Any] = wait_for(probe, what=f"ExternalSecret {name} to sync")
    return synced


def _login(user: str, password: str, schema: str) -> None:
    session = pymysql.connect(host="127.0.0.1", port=3306, user=user, password=password)
    try:
        with session.cursor() as cursor:
            cursor.execute(f"CREATE TABLE IF NOT EXISTS `{schema}`.probe (id INT PRIMARY KEY)")
            cursor.execute("SELECT CURRENT_USER()")
    finally:
        session.close()


def test_generator_delivers_a_working_user_and_force_sync_mints_a_new_one(
    core: client.CoreV1Api,
    custom: client.CustomObjectsApi,
    order_role: Callable[[str], str],
    schemas: Callable[[str], str],
    pair: Callable[[str], str],
) -> None:
    schema = schemas("eso")
    session = root_sql()
    with session.cursor() as cursor:
        cursor.execute(f"CREATE DATABASE `{schema}`")
    session.close()
    name = pair(order_role(schema))

    es, secret = _synced_secret(core, custom, name)
    user, password = decoded(secret, "username").decode(), decoded(secret, "password").decode()
    assert user.startswith("v-")
    assert password
    _login(user, password, schema)
    assert es["status"]["conditions"][0]["reason"] == "SecretSynced"
    assert es["status"]["binding"] == {"name": name}
    owner = secret.metadata.owner_references[0]
    assert (owner.kind, owner.name, owner.controller) == ("ExternalSecret", name, True)
    assert secret.metadata.labels["devstack-test"] == "eso"

    first_refresh = datetime.fromisoformat(es["status"]["refreshTime"])
    # refreshTime has whole seconds, as metav1.Time does: let the clock pass it first.
    wait_for(lambda: datetime.now(UTC) >= first_refresh + timedelta(seconds=1), what="the clock")
    custom.patch_namespaced_custom_object(
        *ES[:2],
        CP_NAMESPACE,
        ES[2],
        name,
        {"metadata": {"annotations": {"force-sync": str(datetime.now(UTC).timestamp())}}},
    )
    es2, secret2 = _synced_secret(core, custom, name, not_user=user, after=first_refresh)
    user2 = decoded(secret2, "username").decode()
    assert user2.startswith("v-")
    assert user2 != user
    assert datetime.fromisoformat(es2["status"]["refreshTime"]) > first_refresh
    _login(user2, decoded(secret2, "password").decode(), schema)
    _login(user, password, schema)  # the superseded credential is not revoked


def test_missing_generator_reports_sync_error(
    custom: client.CustomObjectsApi, shared_identity: ClientPEMs
) -> None:
    name = f"eso-{suffix()}-orphan"
    body = build_external_secret(name=name, cp_namespace=CP_NAMESPACE, labels={})
    custom.create_namespaced_custom_object(*ES[:2], CP_NAMESPACE, ES[2], body)
    try:

        def failed() -> dict[str, Any] | None:
            conditions = (_es(custom, name).get("status") or {}).get("conditions") or []
            return next((c for c in conditions if c["status"] == "False"), None)

        cond = wait_for(failed, what="the sync error")
        assert cond["reason"] == "SecretSyncedError"
        assert cond["message"] == "could not get secret data from provider"
    finally:
        custom.delete_namespaced_custom_object(*ES[:2], CP_NAMESPACE, ES[2], name)


def test_secret_deleted_by_hand_is_written_again(
    core: client.CoreV1Api,
    custom: client.CustomObjectsApi,
    order_role: Callable[[str], str],
    schemas: Callable[[str], str],
    pair: Callable[[str], str],
    platform: Platform,
) -> None:
    name = pair(order_role(schemas("esodel")))
    _, secret = _synced_secret(core, custom, name)
    core.delete_namespaced_secret(name, CP_NAMESPACE)
    _, again = _synced_secret(core, custom, name, not_user=decoded(secret, "username").decode())
    assert decoded(again, "username").decode().startswith("v-")
