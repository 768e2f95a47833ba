"""The platform as tenantdb meets it: the seed, the operator's OpenBao login, and `devstack up`."""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import hvac
import pytest
from kubernetes import client, config

from devstack.platform import OPERATOR_NAMESPACE, WORKER_SERVICE_ACCOUNT, Platform, read_env
from tenantdb.core.mariadbdatabase.manifests import (
    build_client_certificate,
    build_database_cr,
    build_external_secret,
    build_service_account,
    build_vault_dynamic_secret,
)
from tenantdb.core.mariadbdatabase.models import DeletionPolicy
from tenantdb.core.mariadbdatabase.openbao import OpenBaoConnection
from tenantdb.settings import Settings
from tests.support import root_sql, wait_for

from .conftest import (
    CP_NAMESPACE,
    KUBE_MOUNT,
    ROLE_MOUNT,
    ClientPEMs,
    decoded,
    order_role_body,
    ready,
    schema_exists,
    sql_user_exists,
    suffix,
    write_secret_pems,
)

READY_DEADLINE = 60.0
"""The real platform (API servers, OpenBao, ESO, cert-manager, the failover group) takes about
30 s to be ready on 2 cores."""


def _env(state: Path) -> dict[str, str]:
    return read_env(state / "env")


def test_seed_is_what_tenantdb_reads(
    platform: Platform, custom: client.CustomObjectsApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    cp = custom.get_namespaced_custom_object(
        "c5c3.io", "v1alpha1", CP_NAMESPACE, "controlplanes", "cp"
    )
    assert cp["spec"]["infrastructure"]["database"]["clusterRef"] == {"name": "openstack-db"}
    assert cp["spec"]["infrastructure"]["publishedDatabaseEndpoint"] == "127.0.0.1:3306"
    assert cp["spec"]["namespaceAssignments"] == [
        {"namespace": "tenant-a"},
        {"namespace": "tenant-a", "targetClusterRef": {"name": "edge-1"}},
    ]
    assert [(c["type"], c["status"]) for c in cp["status"]["conditions"]] == [
        ("DBCredentialsReady", "True")
    ]
    mariadb = custom.get_namespaced_custom_object(
        "k8s.mariadb.com", "v1alpha1", CP_NAMESPACE, "mariadbs", "openstack-db"
    )
    assert ready(mariadb)
    for plural, ns in (("secretstores", CP_NAMESPACE), ("clustersecretstores", "")):
        name = "openbao-tenant-store" if ns else "openbao-cluster-store"
        store = (
            custom.get_namespaced_custom_object("external-secrets.io", "v1", ns, plural, name)
            if ns
            else custom.get_cluster_custom_object("external-secrets.io", "v1", plural, name)
        )
        vault = store["spec"]["provider"]["vault"]
        assert vault["server"] == platform.openbao_url
        assert vault["auth"]["kubernetes"]["mountPath"] == KUBE_MOUNT

    for key, value in _env(platform.state_dir).items():
        monkeypatch.setenv(key, value)
    settings = Settings()
    assert Path(settings.kubeconfig) == platform.tenantdb_kubeconfig_path
    assert settings.management_context == "management"
    assert Path(settings.service_account_token_file) == platform.operator_token_file
    services = json.loads((platform.state_dir / "services.json").read_text())
    assert services["openstack-db.openstack.svc:3306"] == "127.0.0.1:3306"


def test_operator_logs_in_and_writes_an_order_role(
    platform: Platform, shared_identity: ClientPEMs, root: hvac.Client
) -> None:
    bao = hvac.Client(
        url=platform.openbao_url, cert=shared_identity.cert, verify=shared_identity.ca_file
    )
    role = f"order.{CP_NAMESPACE}.p{suffix()}"
    try:
        jwt = platform.operator_token_file.read_text(encoding="utf-8").strip()
        bao.auth.kubernetes.login("c5c3-operator", jwt, mount_point=KUBE_MOUNT)
        bao.secrets.database.create_role(role, mount_point=ROLE_MOUNT, **order_role_body("p_db"))
        stored = bao.secrets.database.read_role(role, mount_point=ROLE_MOUNT)["data"]
        assert stored["db_name"] == "keystone-openstack"
        assert stored["default_ttl"] == 172800
        bao.secrets.database.delete_role(role, mount_point=ROLE_MOUNT)
    finally:
        root.secrets.database.delete_role(role, mount_point=ROLE_MOUNT)
        bao.adapter.close()


def test_a_role_outside_the_connections_allowed_roles(
    platform: Platform, operator: hvac.Client, root: hvac.Client
) -> None:
    """OpenBao accepts the role write and refuses only its credentials: an order of a
    ControlPlane whose connection was never onboarded waits for credentials, its ExternalSecret
    failing, rather than failing its role write."""
    stranger = f"order.elsewhere.p{suffix()}"
    try:
        operator.secrets.database.create_role(
            stranger, mount_point=ROLE_MOUNT, **order_role_body("p_db")
        )
        with pytest.raises(hvac.exceptions.VaultError, match="is not an allowed role"):
            root.read(f"{ROLE_MOUNT}/creds/{stranger}")
    finally:
        root.secrets.database.delete_role(stranger, mount_point=ROLE_MOUNT)


def test_the_operator_role_refuses_the_workers_api_token(
    platform: Platform, shared_identity: ClientPEMs
) -> None:
    """The OpenBao role checks its audience: only a token minted for OpenBao logs in, never the
    worker's API token (which the API server would accept for anything else)."""
    api_token = platform.cluster("management").issue_token(
        OPERATOR_NAMESPACE, WORKER_SERVICE_ACCOUNT, seconds=600
    )
    bao = hvac.Client(
        url=platform.openbao_url, cert=shared_identity.cert, verify=shared_identity.ca_file
    )
    try:
        with pytest.raises(hvac.exceptions.Forbidden):
            bao.auth.kubernetes.login("c5c3-operator", api_token, mount_point=KUBE_MOUNT)
        jwt = platform.operator_token_file.read_text(encoding="utf-8").strip()
        assert bao.auth.kubernetes.login("c5c3-operator", jwt, mount_point=KUBE_MOUNT)["auth"]
    finally:
        bao.adapter.close()


def test_a_credential_dies_with_the_token_that_read_it(
    platform: Platform,
    core: client.CoreV1Api,
    shared_identity: ClientPEMs,
    order_role: Callable[[str], str],
) -> None:
    """What bounds every credential ESO delivers: OpenBao revokes a lease when the token that
    created it ends, and ESO's generator never renews or revokes the token it logged in with,
    so the `order-db` auth role's token TTL must cover the credential's max TTL."""
    role = order_role(f"ttl_{suffix()}")
    request = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=600)
    )
    jwt = core.create_namespaced_service_account_token(
        "order-db-creds", CP_NAMESPACE, request
    ).status.token
    bao = hvac.Client(
        url=platform.openbao_url, cert=shared_identity.cert, verify=shared_identity.ca_file
    )
    try:
        login = bao.auth.kubernetes.login("order-db", jwt, mount_point=KUBE_MOUNT)
        assert login["auth"]["lease_duration"] == 72 * 3600, "the onboarding's token_ttl"
        creds = bao.read(f"{ROLE_MOUNT}/creds/{role}")
        user = creds["data"]["username"]
        assert sql_user_exists(user)
        bao.auth.token.revoke_self()
        wait_for(lambda: not sql_user_exists(user), 10, f"{user} to be dropped with its token")
    finally:
        bao.adapter.close()


# ------------------------------------------------------------ `devstack up` in a subprocess


@pytest.fixture
def devstack_up(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], float, Path]]:
    """Run `python -m devstack up` in a fresh state dir; yield it once it printed its ready line."""
    state = tmp_path / "state"
    started = time.monotonic()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "devstack",
            "up",
            "--state-dir",
            str(state),
            "--clusters",
            "management,edge-1",
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[3],
    )
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    try:
        first = lines.get(timeout=READY_DEADLINE * 2)
        elapsed = time.monotonic() - started
        assert first.startswith("devstack ready"), first
        yield proc, elapsed, state
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


def _provision_through_the_api(state: Path, names: dict[str, str]) -> str:
    """Do what tenantdb would, through the official client and hvac; return the v- user."""
    env = _env(state)
    api = config.new_client_from_config(env["DEVSTACK_KUBECONFIG"], context="management")
    with api:
        core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        core.create_namespaced_service_account(CP_NAMESPACE, build_service_account(CP_NAMESPACE))
        custom.create_namespaced_custom_object(
            "cert-manager.io",
            "v1",
            CP_NAMESPACE,
            "certificates",
            build_client_certificate(CP_NAMESPACE),
        )
        pems = write_secret_pems(core, CP_NAMESPACE, "order-db-openbao-client", state)
        bao = hvac.Client(url=env["DEVSTACK_OPENBAO_ADDR"], cert=pems.cert, verify=pems.ca_file)
        jwt = Path(env["TENANTDB_SERVICE_ACCOUNT_TOKEN_FILE"]).read_text().strip()
        bao.auth.kubernetes.login("c5c3-operator", jwt, mount_point=KUBE_MOUNT)
        role = f"order.{CP_NAMESPACE}.up{suffix()}"
        bao.secrets.database.create_role(
            role, mount_point=ROLE_MOUNT, **order_role_body(names["Delete"])
        )
        bao.adapter.close()
        for policy, schema in names.items():
            body = build_database_cr(
                name=f"{schema.replace('_', '-')}-database",
                keystone_namespace=CP_NAMESPACE,
                cluster_ref="openstack-db",
                schema=schema,
                deletion_policy=DeletionPolicy.DELETE,
                labels={},
            )
            if policy == "unset":
                del body["spec"]["cleanupPolicy"]
            else:
                body["spec"]["cleanupPolicy"] = policy
            custom.create_namespaced_custom_object(
                "k8s.mariadb.com", "v1alpha1", CP_NAMESPACE, "databases", body
            )
        connection = OpenBaoConnection(env["DEVSTACK_OPENBAO_ADDR"], KUBE_MOUNT)
        name = "up-credentials"
        custom.create_namespaced_custom_object(
            "generators.external-secrets.io",
            "v1alpha1",
            CP_NAMESPACE,
            "vaultdynamicsecrets",
            build_vault_dynamic_secret(
                name=name,
                cp_namespace=CP_NAMESPACE,
                creds_path=f"{ROLE_MOUNT}/creds/{role}",
                connection=connection,
                labels={},
            ),
        )
        custom.create_namespaced_custom_object(
            "external-secrets.io",
            "v1",
            CP_NAMESPACE,
            "externalsecrets",
            build_external_secret(name=name, cp_namespace=CP_NAMESPACE, labels={}),
        )

        def user() -> str | None:
            try:
                secret = core.read_namespaced_secret(name, CP_NAMESPACE)
            except client.ApiException:
                return None
            return decoded(secret, "username").decode()

        username: str = wait_for(user, what="the ESO Secret")
        wait_for(lambda: all(schema_exists(s) for s in names.values()), what="the schemas")
    return username


def _answers(address: str) -> bool:
    """Whether something accepts TCP connections at host:port."""
    host, port = address.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
    except OSError:
        return False
    return True


@pytest.mark.slow
def test_devstack_up_is_ready_within_a_minute_and_cleans_up_on_sigint(
    devstack_up: tuple[subprocess.Popen[str], float, Path],
) -> None:
    proc, elapsed, state = devstack_up
    assert elapsed < READY_DEADLINE
    assert os.stat(state / "env").st_mode & 0o077 == 0
    env = _env(state)
    assert env["TENANTDB_KUBECONFIG"] == str(state / "tenantdb.kubeconfig")
    assert env["DEVSTACK_KUBECONFIG"] == str(state / "kubeconfig")
    assert os.stat(state / "tenantdb.kubeconfig").st_mode & 0o077 == 0
    assert env["DEVSTACK_MARIADB_ADDR"] == "127.0.0.1:3306"
    services = json.loads((state / "services.json").read_text())
    group_sites = [
        services[f"mysql-main-{site}-internal.bloodraven.svc.cluster.local:3306"]
        for site in ("dc1", "dc2")
    ]
    assert all(_answers(address) for address in group_sites)
    tag = suffix()
    names = {policy: f"up_{tag}_{policy.lower()}" for policy in ("Delete", "Skip", "unset")}
    try:
        username = _provision_through_the_api(state, names)
        assert username.startswith("v-")
        assert sql_user_exists(username)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 0
        assert not sql_user_exists(username)
        assert not schema_exists(names["Delete"])
        assert not schema_exists(names["unset"])
        assert schema_exists(names["Skip"])
        assert not any(_answers(address) for address in group_sites)
    finally:
        session = root_sql()
        with session.cursor() as cursor:
            for schema in names.values():
                cursor.execute(f"DROP DATABASE IF EXISTS `{schema}`")
        session.close()
