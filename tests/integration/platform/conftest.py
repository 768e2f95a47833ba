"""Fixtures for the platform tests: one running platform, clients on it, and self-cleaning names.

The platform (real kube-apiservers, OpenBao, ESO and cert-manager, the mariadb-operator and
failover-group stand-ins) is shared by the module's tests, and every test makes its own names
(schemas, roles, namespaces, objects) with a random suffix and removes them, so no test depends
on another's leftovers and runs never collide on the shared MariaDB. Tests drive the platform
through the official Kubernetes client and hvac only. The two MariaDB servers of the MySQL
failover group start once per session (`mysql_servers`); a module that needs them starts its
platform with them.
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import hvac
import pytest
from kubernetes import client, config

from devstack.mysql_group import MysqlGroup
from devstack.platform import Platform, start_platform
from tenantdb.core.mariadbdatabase.manifests import build_client_certificate, build_service_account
from tests.support import root_sql, wait_for

CP_NAMESPACE = "openstack"
ROLE_MOUNT = "database/mariadb"
KUBE_MOUNT = "kubernetes/management"
T = TypeVar("T")


def suffix() -> str:
    """A short random suffix for names a test owns."""
    return secrets.token_hex(4)


def sql_scalar(query: str, *args: Any) -> Any:
    """Run one query as root and return the first column of the first row (or None)."""
    session = root_sql()
    try:
        with session.cursor() as cursor:
            cursor.execute(query, args)
            row = cursor.fetchone()
    finally:
        session.close()
    return row[0] if row else None


def schema_exists(name: str) -> bool:
    """Whether a schema exists on the real MariaDB."""
    return bool(
        sql_scalar("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = %s", name)
    )


def sql_user_exists(name: str) -> bool:
    """Whether a user of that name exists on the real MariaDB."""
    return bool(sql_scalar("SELECT COUNT(*) FROM mysql.user WHERE User = %s", name))


def ready(obj: dict[str, Any] | None) -> dict[str, Any] | None:
    """The Ready condition of an object if it reads True, else None."""
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready" and cond.get("status") == "True":
            return dict(cond)
    return None


def decoded(secret: client.V1Secret, key: str) -> bytes:
    """One key of a Secret read through the official client."""
    return base64.b64decode((secret.data or {})[key])


@dataclass(frozen=True)
class ClientPEMs:
    """An issued client certificate as files: CA, certificate and key."""

    ca_file: str
    cert_file: str
    key_file: str

    @property
    def cert(self) -> tuple[str, str]:
        """The (cert, key) pair requests and hvac take."""
        return (self.cert_file, self.key_file)


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    """A running platform with a management and an edge-1 cluster: real kube-apiservers with
    real OpenBao, ESO and cert-manager (`devstack.upstream`)."""
    running = start_platform(
        tmp_path_factory.mktemp("platform"),
        ("management", "edge-1"),
    )
    yield running
    running.stop()


@pytest.fixture(scope="session")
def mysql_servers() -> Iterator[MysqlGroup]:
    """The failover group's two real MariaDB servers, started once for the session."""
    group = MysqlGroup.start()
    yield group
    group.stop()


@pytest.fixture(scope="module")
def api_client(platform: Platform) -> Iterator[client.ApiClient]:
    """An official-client ApiClient on the management cluster."""
    api = config.new_client_from_config(str(platform.kubeconfig_path), context="management")
    yield api
    api.close()


@pytest.fixture(scope="module")
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    """CoreV1Api on the management cluster."""
    return client.CoreV1Api(api_client)


@pytest.fixture(scope="module")
def custom(api_client: client.ApiClient) -> client.CustomObjectsApi:
    """CustomObjectsApi on the management cluster."""
    return client.CustomObjectsApi(api_client)


@pytest.fixture
def namespace(core: client.CoreV1Api) -> Iterator[str]:
    """A fresh namespace on the management cluster, deleted afterwards."""
    name = f"t-{suffix()}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    core.delete_namespace(name)


def _create_ignoring_conflict(create: Callable[[], Any]) -> None:
    try:
        create()
    except client.ApiException as exc:
        if exc.status != 409:
            raise


@pytest.fixture(scope="module")
def shared_identity(
    core: client.CoreV1Api,
    custom: client.CustomObjectsApi,
    tmp_path_factory: pytest.TempPathFactory,
) -> ClientPEMs:
    """What tenantdb writes once per ControlPlane namespace: the generators' ServiceAccount and
    the client Certificate, built by tenantdb's own builders; returns the issued PEMs."""
    _create_ignoring_conflict(
        lambda: core.create_namespaced_service_account(
            CP_NAMESPACE, build_service_account(CP_NAMESPACE)
        )
    )
    _create_ignoring_conflict(
        lambda: custom.create_namespaced_custom_object(
            "cert-manager.io",
            "v1",
            CP_NAMESPACE,
            "certificates",
            build_client_certificate(CP_NAMESPACE),
        )
    )
    return write_secret_pems(
        core, CP_NAMESPACE, "order-db-openbao-client", tmp_path_factory.mktemp("client-cert")
    )


def write_secret_pems(
    core: client.CoreV1Api, namespace: str, name: str, directory: Path
) -> ClientPEMs:
    """Wait for a cert-manager Secret and write its three PEMs into a directory."""

    def read() -> client.V1Secret | None:
        try:
            secret = core.read_namespaced_secret(name, namespace)
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise
        keys = set((secret.data or {}).keys())
        return secret if {"tls.crt", "tls.key", "ca.crt"} <= keys else None

    secret = wait_for(read, what=f"Secret {namespace}/{name}")
    paths = []
    for key in ("ca.crt", "tls.crt", "tls.key"):
        path = directory / key
        path.write_bytes(decoded(secret, key))
        path.chmod(0o600)
        paths.append(str(path))
    return ClientPEMs(*paths)


@pytest.fixture
def operator(platform: Platform, shared_identity: ClientPEMs) -> Iterator[hvac.Client]:
    """An hvac client logged in as c5c3-operator with its token file and the issued keypair."""
    bao = hvac.Client(
        url=platform.openbao_url, cert=shared_identity.cert, verify=shared_identity.ca_file
    )
    jwt = platform.operator_token_file.read_text(encoding="utf-8").strip()
    bao.auth.kubernetes.login("c5c3-operator", jwt, mount_point=KUBE_MOUNT)
    yield bao
    bao.adapter.close()


@pytest.fixture
def root(platform: Platform) -> Iterator[hvac.Client]:
    """An hvac client with the root token and the devstack's admin keypair."""
    bao = platform.root_client()
    yield bao
    bao.adapter.close()


def order_role_body(schema: str) -> dict[str, Any]:
    """The role body tenantdb writes for a schema (see mariadbdatabase.md §4.3)."""
    escaped = schema.replace("_", "\\_")
    return {
        "db_name": "keystone-openstack",
        "creation_statements": [
            "CREATE USER '{{name}}'@'%' IDENTIFIED BY '{{password}}';",
            f"GRANT ALL PRIVILEGES ON `{escaped}`.* TO '{{{{name}}}}'@'%';",
        ],
        "revocation_statements": ["DROP USER IF EXISTS '{{name}}'@'%';"],
        "default_ttl": 172800,
        "max_ttl": 259200,
    }


@pytest.fixture
def order_role(operator: hvac.Client, root: hvac.Client) -> Iterator[Callable[[str], str]]:
    """Write `order.openstack.<suffix>` roles as the operator; revoke and delete them after."""
    written: list[str] = []

    def write(schema: str) -> str:
        role = f"order.{CP_NAMESPACE}.t{suffix()}"
        operator.secrets.database.create_role(
            role, mount_point=ROLE_MOUNT, **order_role_body(schema)
        )
        written.append(role)
        return role

    yield write
    for role in written:
        root.sys.revoke_prefix(f"{ROLE_MOUNT}/creds/{role}")
        root.secrets.database.delete_role(role, mount_point=ROLE_MOUNT)


@pytest.fixture
def schemas() -> Iterator[Callable[[str], str]]:
    """Name schemas `<stem>_<suffix>`; every named schema is dropped afterwards."""
    named: list[str] = []

    def name(stem: str) -> str:
        schema = f"{stem}_{suffix()}"
        named.append(schema)
        return schema

    yield name
    session = root_sql()
    try:
        with session.cursor() as cursor:
            for schema in named:
                cursor.execute(f"DROP DATABASE IF EXISTS `{schema}`")
    finally:
        session.close()
