"""An order through its life: TLS, the freeze, a target cluster, deletion, outages."""

from __future__ import annotations

import base64
from typing import Any

import pymysql
import pytest
import redis

from tenantdb.adapters.kube import SECRET
from tenantdb.adapters.mariadbdatabase import (
    CONTROL_PLANE,
    DATABASE,
    EXTERNAL_SECRET,
    MARIADB_DATABASE,
)
from tenantdb.core.keys import OrderKey
from tenantdb.core.mariadbdatabase.naming import compute_order_names
from tests.e2e.conftest import (
    Stack,
    order_quiet,
    schema_exists,
    user_exists,
)
from tests.support import sql_login, wait_for

pytestmark = [pytest.mark.slow]

KEYS = ["host", "port", "database", "username", "password"]


def _tls(stack: Stack, mode: str) -> None:
    stack.patch_control_plane(
        {
            "spec": {
                "infrastructure": {
                    "database": {"tls": {"mode": mode, "caBundleSecretRef": {"name": "db-ca"}}}
                }
            }
        }
    )


@pytest.mark.private_platform
def test_tls_adds_the_ca_bundle_and_turning_it_off_drops_it(stack: Stack) -> None:
    name = stack.name("tls-db")
    stack.apply_order(name)
    stack.wait_ready(name)
    stack.kube().apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "db-ca", "namespace": "openstack"},
            "data": {"ca.crt": base64.b64encode(b"-----BEGIN CERTIFICATE-----x").decode()},
        }
    )
    _tls(stack, "require")
    wait_for(lambda: "ca.crt" in (stack.secret(f"{name}-credentials") or {}), 20, "ca.crt")
    order = wait_for(
        lambda: (o := stack.order(name)) and o["status"]["secretKeys"] == [*KEYS, "ca.crt"] and o,
        20,
        "secretKeys with ca.crt",
    )
    assert order["status"]["conditions"][-1]["type"] in {"Ready", "DeliveryReady", "DatabaseReady"}
    _tls(stack, "disabled")
    wait_for(
        lambda: "ca.crt" not in (stack.secret(f"{name}-credentials") or {"ca.crt": "absent"}),
        20,
        "no ca.crt",
    )
    wait_for(
        lambda: (stack.order(name) or {})["status"]["secretKeys"] == KEYS,
        20,
        "secretKeys without ca.crt",
    )


def _assignments(stack: Stack, *, management: bool) -> None:
    entries: list[dict[str, Any]] = [
        {"namespace": "tenant-a", "targetClusterRef": {"name": "edge-1"}}
    ]
    if management:
        entries.insert(0, {"namespace": "tenant-a"})
    stack.patch_control_plane({"spec": {"namespaceAssignments": entries}})


@pytest.mark.private_platform
def test_withdrawing_the_assignment_freezes_the_order_and_restoring_it_repairs(
    stack: Stack,
) -> None:
    name = stack.name("frozen-db")
    stack.apply_order(name)
    ready = stack.wait_ready(name)
    role = ready["status"]["roleName"]
    secret_name = f"{name}-credentials"
    good = stack.secret(secret_name) or {}

    _assignments(stack, management=False)
    stack.wait_reason(name, "DatabaseReady", "NamespaceNotAssigned")
    stack.wait_reason(name, "DeliveryReady", "NamespaceNotAssigned")
    stack.kube().patch(SECRET, "tenant-a", secret_name, {"data": {"host": "ZWRpdGVk"}})
    # The edit reaches the frozen order, which repairs nothing and keeps all it made.
    wait_for(lambda: stack.condition(name, "Ready").get("status") == "False", 10, "frozen")
    names = compute_order_names("", "tenant-a", name, "openstack")
    assert (stack.secret(secret_name) or {}).get("host") == "edited"
    assert stack.kube().get_or_none(EXTERNAL_SECRET, "openstack", names.credentials)
    assert stack.kube().get_or_none(DATABASE, "openstack", names.database_cr)
    assert stack.role_exists(role)
    with sql_login(good["username"], good["password"], name.replace("-", "_")):
        pass  # the issued user keeps working while frozen

    _assignments(stack, management=True)
    stack.wait_ready(name)
    wait_for(lambda: (stack.secret(secret_name) or {}).get("host") == good["host"], 10, "repair")


def test_an_order_on_a_target_cluster_is_provisioned_at_home_and_delivered_beside_it(
    stack: Stack,
) -> None:
    name = stack.name("edge-db")
    stack.apply_order(name, cluster="edge-1")
    order = stack.wait_ready(name, cluster="edge-1")
    assert (order["status"]["host"], order["status"]["port"]) == ("127.0.0.1", 3306)
    names = compute_order_names("edge-1", "tenant-a", name, "openstack")
    assert stack.kube().get_or_none(DATABASE, "openstack", names.database_cr), "at home"
    assert stack.kube().get_or_none(EXTERNAL_SECRET, "openstack", names.credentials)
    assert stack.secret(f"{name}-credentials") is None, "nothing on the management cluster"
    secret = stack.secret(f"{name}-credentials", cluster="edge-1") or {}
    assert (secret["host"], secret["port"]) == ("127.0.0.1", "3306")
    with sql_login(secret["username"], secret["password"], name.replace("-", "_")):
        pass


@pytest.mark.parametrize("policy", ["Retain", "Delete"])
def test_deletion_revokes_the_credential_and_keeps_or_drops_the_schema(
    stack: Stack, policy: str
) -> None:
    name = stack.name(f"gone-{policy.lower()}")
    schema = name.replace("-", "_")
    stack.apply_order(name, deletionPolicy=policy)
    order = stack.wait_ready(name)
    secret = stack.secret(f"{name}-credentials") or {}
    assert schema_exists(schema)
    stack.kube().delete(MARIADB_DATABASE, "tenant-a", name)
    wait_for(lambda: stack.order(name) is None, 40, "the finalizer to be released")
    assert schema_exists(schema) is (policy == "Retain")
    assert not user_exists(secret["username"])
    with pytest.raises(pymysql.err.OperationalError):
        sql_login(secret["username"], secret["password"])
    assert not stack.role_exists(order["status"]["roleName"])
    assert stack.secret(f"{name}-credentials") is None
    names = compute_order_names("", "tenant-a", name, "openstack")
    assert stack.kube().get_or_none(EXTERNAL_SECRET, "openstack", names.credentials) is None
    assert stack.kube().get_or_none(DATABASE, "openstack", names.database_cr) is None


def test_a_policy_changed_right_before_deletion_is_honoured(stack: Stack) -> None:
    name = stack.name("late-delete")
    schema = name.replace("-", "_")
    stack.apply_order(name)  # Retain
    stack.wait_ready(name)
    stack.kube().patch(MARIADB_DATABASE, "tenant-a", name, {"spec": {"deletionPolicy": "Delete"}})
    stack.kube().delete(MARIADB_DATABASE, "tenant-a", name)
    wait_for(lambda: stack.order(name) is None, 40, "the finalizer to be released")
    assert not schema_exists(schema)


@pytest.mark.private_platform
def test_with_the_control_plane_gone_teardown_fails_open_in_one_pass(stack: Stack) -> None:
    name = stack.name("orphan-db")
    stack.apply_order(name)
    order = stack.wait_ready(name)
    secret = stack.secret(f"{name}-credentials") or {}
    stack.kube().delete(CONTROL_PLANE, "openstack", "cp")
    wait_for(
        lambda: stack.kube().get_or_none(CONTROL_PLANE, "openstack", "cp") is None, 10, "cp gone"
    )
    stack.kube().delete(MARIADB_DATABASE, "tenant-a", name)
    wait_for(lambda: stack.order(name) is None, 20, "the finalizer to be released")
    assert not user_exists(secret["username"]), "the role's leases were still revoked"
    assert not stack.role_exists(order["status"]["roleName"])
    assert "referenced ControlPlane is gone; releasing the MariaDBDatabase finalizer" in (
        stack.logs_text()
    )


@pytest.mark.private_platform
def test_an_openbao_outage_holds_deletion_until_it_is_back(
    stack: Stack, real_redis: redis.Redis
) -> None:
    name = stack.name("held-db")
    stack.apply_order(name)
    order = stack.wait_ready(name)
    # The outage starts once the pass that Ready's own events wake is over: a provision step
    # caught by the outage would keep the lease (retrying) and hold the deletion back.
    key = OrderKey("mariadbdatabase", "tenant-a", name)
    wait_for(lambda: order_quiet(stack, real_redis, key), 10, "the order to be quiet")
    openbao = stack.platform.openbao
    assert openbao is not None
    openbao.suspend()
    try:
        stack.kube().delete(MARIADB_DATABASE, "tenant-a", name)
        wait_for(
            lambda: "removing OpenBao database role" in stack.logs_text(), 30, "a held teardown"
        )
        assert stack.order(name) is not None, "the finalizer is held while OpenBao is down"
        names = compute_order_names("", "tenant-a", name, "openstack")
        assert stack.kube().get_or_none(EXTERNAL_SECRET, "openstack", names.credentials)
    finally:
        openbao.resume()
    wait_for(lambda: stack.order(name) is None, 40, "the deletion to complete")
    assert not stack.role_exists(order["status"]["roleName"])


@pytest.mark.private_platform
def test_a_403_names_the_three_bootstrap_scripts(stack: Stack) -> None:
    client = stack.platform.root_client()
    try:
        client.sys.delete_policy("c5c3-operator")
    finally:
        client.adapter.close()
    name = stack.name("denied-db")
    stack.apply_order(name)
    condition = stack.wait_reason(name, "DatabaseReady", "OpenBaoError")
    message = condition["message"]
    for script in ("setup-auth.sh", "setup-policies.sh", "setup-database-tenant.sh"):
        assert script in message
    assert "403" in message
    # A failing provision leg leaves DeliveryReady as an earlier pass wrote it, if any did.
    assert stack.condition(name, "DeliveryReady").get("reason") in (None, "WaitingForCredentials")
    assert stack.condition(name, "Ready").get("reason") == "NotAllReady"


def test_a_deleted_order_leaves_nothing_scheduled(stack: Stack, real_redis: redis.Redis) -> None:
    name = stack.name("forgotten-db")
    stack.apply_order(name)
    stack.wait_ready(name)
    key = f"mariadbdatabase/tenant-a/{name}"
    assert real_redis.zscore(f"{stack.prefix}refresh", key) is not None
    stack.kube().delete(MARIADB_DATABASE, "tenant-a", name)
    wait_for(lambda: stack.order(name) is None, 40, "the deletion to complete")

    def unscheduled() -> bool:
        return all(
            real_redis.zscore(f"{stack.prefix}{table}", key) is None for table in ("refresh", "due")
        )

    wait_for(unscheduled, 20, "the gone order's come-backs to be dropped")


@pytest.mark.private_platform
def test_login_tokens_that_die_before_the_refresh_get_the_order_no_credential(
    stack: Stack,
) -> None:
    """OpenBao revokes a credential with the token that read it, and ESO never renews that
    token: with `order-db` tokens of 30 s every delivered password would stop working within a
    minute. tenantdb sets up no generator for such an order and says why."""
    client = stack.platform.root_client()
    try:
        client.write(
            "auth/kubernetes/management/role/order-db", token_ttl="30s", token_max_ttl="30s"
        )
    finally:
        client.adapter.close()
    name = stack.name("short-lived-db")
    stack.apply_order(name)
    condition = stack.wait_reason(name, "DatabaseReady", "OpenBaoError")
    assert "kubernetes/management/role/order-db" in condition["message"]
    assert "30s" in condition["message"]
    assert stack.condition(name, "Ready").get("status") == "False"
    assert stack.secret(f"{name}-credentials") is None
    names = compute_order_names("", "tenant-a", name, "openstack")
    assert stack.kube().get_or_none(EXTERNAL_SECRET, "openstack", names.credentials) is None
