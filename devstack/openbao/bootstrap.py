"""The OpenBao bootstrap tenantdb depends on: auth roles, policies and the engine connections.

Owns, through an `hvac` client holding a root (or equally privileged) token, what the reference
deployment's three bootstrap scripts do: `setup-auth.sh` (the Kubernetes auth mount and the
`order-db` and `c5c3-operator` roles), `setup-policies.sh` (the `order-db-dynamic` policy templated
with the auth mount's accessor, and the `c5c3-operator` policy) and `setup-database-tenant.sh` (per
ControlPlane, the Keystone connection whose `allowed_roles` admits `order.<namespace>.*`, and the
built-in Keystone role). Idempotent: running it again rewrites the same objects.

Must never give the operator's policy anything under `database/<mount>/config` (the MariaDB root
password stays with the bootstrap), and never widen `order-db-dynamic` beyond the caller's own
namespace.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

KUBE_MOUNT = "kubernetes/management"
DATABASE_MOUNT = "database/mariadb"
ORDER_DB_ROLE = "order-db"
ORDER_DB_POLICY = "order-db-dynamic"
ORDER_DB_SERVICE_ACCOUNT = "order-db-creds"
OPERATOR_ROLE = "c5c3-operator"
OPERATOR_POLICY = "c5c3-operator"
OPERATOR_SERVICE_ACCOUNT = "c5c3-operator"
OPERATOR_NAMESPACE = "c5c3-system"
DEFAULT_TTL = 48 * 3600
MAX_TTL = 72 * 3600


@dataclass(frozen=True)
class TenantDatabase:
    """One ControlPlane's shared database, as `setup-database-tenant.sh` onboards it.

    Attributes:
        controlplane_namespace: The ControlPlane's namespace (orders' roles are
            `order.<this>.*`).
        keystone_namespace: Keystone's namespace; names the connection `keystone-<this>`.
        cluster_ref: The MariaDB CR's name; the URL dials `<this>.<keystone ns>.svc:3306`.
        root_username: The MariaDB root user the engine connects as.
        root_password: Its password.
        keystone_schema: The schema the built-in Keystone role grants.
    """

    controlplane_namespace: str
    keystone_namespace: str
    cluster_ref: str = "mariadb"
    root_username: str = "root"
    root_password: str = ""
    keystone_schema: str = "keystone"

    @property
    def connection_name(self) -> str:
        """The engine connection (and built-in role) name, `keystone-<keystone namespace>`."""
        return f"keystone-{self.keystone_namespace}"


@dataclass(frozen=True)
class BootstrapResult:
    """What callers need afterwards.

    Attributes:
        kube_mount_accessor: The Kubernetes auth mount's accessor (templated policies name it).
    """

    kube_mount_accessor: str


def order_db_policy(accessor: str, database_mount: str = DATABASE_MOUNT) -> str:
    """Return the `order-db-dynamic` policy: read the creds of the caller's namespace's orders."""
    template = "{{identity.entity.aliases." + accessor + ".metadata.service_account_namespace}}"
    return f'path "{database_mount}/creds/order.{template}.*" {{\n  capabilities = ["read"]\n}}\n'


def operator_policy(database_mount: str = DATABASE_MOUNT, kube_mount: str = KUBE_MOUNT) -> str:
    """Return the `c5c3-operator` policy: the order roles, revoking their leases, and reading
    the generators' auth role (whose token TTL bounds every credential ESO reads)."""
    return (
        f'path "{database_mount}/roles/order.*" {{\n'
        '  capabilities = ["create", "read", "update", "delete"]\n'
        "}\n"
        f'path "sys/leases/revoke-prefix/{database_mount}/creds/order.*" {{\n'
        '  capabilities = ["update", "sudo"]\n'
        "}\n"
        f'path "auth/{kube_mount}/role/{ORDER_DB_ROLE}" {{\n'
        '  capabilities = ["read"]\n'
        "}\n"
    )


def _mounts(listing: dict[str, Any]) -> dict[str, Any]:
    data = listing.get("data")
    return data if isinstance(data, dict) else listing


def setup_auth(
    client: Any,
    *,
    mount: str = KUBE_MOUNT,
    kubernetes_host: str | None = None,
    kubernetes_ca_cert: str | None = None,
    operator_service_account: str = OPERATOR_SERVICE_ACCOUNT,
    operator_namespace: str = OPERATOR_NAMESPACE,
    operator_audience: str = "",
) -> str:
    """Enable and configure the Kubernetes auth mount and write its two roles.

    Args:
        client: An `hvac.Client` with a root token.
        mount: The auth mount path.
        kubernetes_host: The management cluster's API server URL for TokenReviews (skipped when
            None: the server then needs its own reviewer).
        kubernetes_ca_cert: PEM CA of that API server.
        operator_service_account: The reconciler's ServiceAccount name.
        operator_namespace: The reconciler's namespace.
        operator_audience: The audience the reconciler's token must carry (empty: the API
            server's own).

    Returns:
        The auth mount's accessor.
    """
    if f"{mount}/" not in _mounts(client.sys.list_auth_methods()):
        client.sys.enable_auth_method("kubernetes", path=mount)
    if kubernetes_host:
        client.auth.kubernetes.configure(
            kubernetes_host, kubernetes_ca_cert=kubernetes_ca_cert, mount_point=mount
        )
    client.write_data(
        f"auth/{mount}/role/{ORDER_DB_ROLE}",
        data={
            "bound_service_account_names": [ORDER_DB_SERVICE_ACCOUNT],
            "bound_service_account_namespaces": ["*"],
            "token_policies": [ORDER_DB_POLICY],
            # The token must outlive the 72 h lease it mints: its end would revoke the lease.
            "token_ttl": "72h",
            "token_max_ttl": "72h",
        },
    )
    client.write_data(
        f"auth/{mount}/role/{OPERATOR_ROLE}",
        data={
            "bound_service_account_names": [operator_service_account],
            "bound_service_account_namespaces": [operator_namespace],
            "token_policies": [OPERATOR_POLICY],
            "token_ttl": "15m",
            "token_max_ttl": "15m",
            **({"audience": operator_audience} if operator_audience else {}),
        },
    )
    accessor: str = _mounts(client.sys.list_auth_methods())[f"{mount}/"]["accessor"]
    return accessor


def setup_policies(client: Any, *, accessor: str, database_mount: str = DATABASE_MOUNT) -> None:
    """Write the `order-db-dynamic` and `c5c3-operator` policies.

    Args:
        client: An `hvac.Client` with a root token.
        accessor: The Kubernetes auth mount's accessor.
        database_mount: The database engine's mount path.
    """
    client.sys.create_or_update_acl_policy(
        ORDER_DB_POLICY, order_db_policy(accessor, database_mount)
    )
    client.sys.create_or_update_acl_policy(OPERATOR_POLICY, operator_policy(database_mount))


def setup_database_tenant(
    client: Any, tenant: TenantDatabase, *, database_mount: str = DATABASE_MOUNT
) -> None:
    """Write a ControlPlane's Keystone connection and built-in role.

    Args:
        client: An `hvac.Client` with a root token.
        tenant: The ControlPlane's database.
        database_mount: The database engine's mount path.
    """
    if f"{database_mount}/" not in _mounts(client.sys.list_mounted_secrets_engines()):
        client.sys.enable_secrets_engine("database", path=database_mount)
    name = tenant.connection_name
    client.secrets.database.configure(
        name=name,
        plugin_name="mysql-database-plugin",
        verify_connection=False,
        allowed_roles=[name, f"order.{tenant.controlplane_namespace}.*"],
        mount_point=database_mount,
        connection_url=(
            "{{username}}:{{password}}@tcp("
            f"{tenant.cluster_ref}.{tenant.keystone_namespace}.svc:3306)/"
        ),
        username=tenant.root_username,
        password=tenant.root_password,
    )
    client.secrets.database.create_role(
        name=name,
        db_name=name,
        creation_statements=[
            "CREATE USER '{{name}}'@'%' IDENTIFIED BY '{{password}}';",
            f"GRANT ALL PRIVILEGES ON `{tenant.keystone_schema}`.* TO '{{{{name}}}}'@'%';",
        ],
        revocation_statements=["DROP USER IF EXISTS '{{name}}'@'%';"],
        default_ttl=DEFAULT_TTL,
        max_ttl=MAX_TTL,
        mount_point=database_mount,
    )


def bootstrap_platform(
    client: Any,
    *,
    tenants: Iterable[TenantDatabase] = (),
    kube_mount: str = KUBE_MOUNT,
    database_mount: str = DATABASE_MOUNT,
    kubernetes_host: str | None = None,
    kubernetes_ca_cert: str | None = None,
    operator_service_account: str = OPERATOR_SERVICE_ACCOUNT,
    operator_namespace: str = OPERATOR_NAMESPACE,
    operator_audience: str = "",
) -> BootstrapResult:
    """Run the whole bootstrap: auth, policies, the database mount and every tenant database.

    Args:
        client: An `hvac.Client` with a root token.
        tenants: The ControlPlanes' databases to onboard.
        kube_mount: The Kubernetes auth mount path.
        database_mount: The database engine's mount path.
        kubernetes_host: See `setup_auth`.
        kubernetes_ca_cert: See `setup_auth`.
        operator_service_account: See `setup_auth`.
        operator_namespace: See `setup_auth`.
        operator_audience: See `setup_auth`.

    Returns:
        The mount accessor the policies were templated with.
    """
    accessor = setup_auth(
        client,
        mount=kube_mount,
        kubernetes_host=kubernetes_host,
        kubernetes_ca_cert=kubernetes_ca_cert,
        operator_service_account=operator_service_account,
        operator_namespace=operator_namespace,
        operator_audience=operator_audience,
    )
    setup_policies(client, accessor=accessor, database_mount=database_mount)
    if f"{database_mount}/" not in _mounts(client.sys.list_mounted_secrets_engines()):
        client.sys.enable_secrets_engine("database", path=database_mount)
    for tenant in tenants:
        setup_database_tenant(client, tenant, database_mount=database_mount)
    return BootstrapResult(kube_mount_accessor=accessor)
