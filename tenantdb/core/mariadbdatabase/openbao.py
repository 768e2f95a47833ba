"""What tenantdb asks of OpenBao for an order, decided without talking to it.

Owns the store the OpenBao server and Kubernetes-auth mount are copied from (with the
reference defaults), the database-engine role body an order needs, the role comparison the
reference makes before it writes, and the wording of an OpenBao failure. It must never hold a
token, a JWT or a key, and never build a request: the OpenBao adapter does that.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from tenantdb.core.mariadbdatabase.models import ControlPlane, SecretStore
from tenantdb.core.mariadbdatabase.reasons import msg_openbao_error
from tenantdb.core.mariadbdatabase.validation import quote_schema_for_grant

DEFAULT_SERVER = "https://openbao.shared-services.svc:8200"
DEFAULT_AUTH_MOUNT = "kubernetes/management"
DEFAULT_OPERATOR_ROLE = "c5c3-operator"
GENERATOR_AUTH_ROLE = "order-db"
NAMESPACED_STORE_KIND = "SecretStore"
CLUSTER_STORE_KIND = "ClusterSecretStore"
DEFAULT_NAMESPACED_STORE = "openbao-tenant-store"
DEFAULT_CLUSTER_STORE = "openbao-cluster-store"
DEFAULT_TTL_SECONDS = 48 * 3600
MAX_TTL_SECONDS = 72 * 3600
PERMISSION_DENIED = 403


@dataclass(frozen=True)
class StoreLocation:
    """Which SecretStore to read for the connection; namespace is empty for a cluster store."""

    kind: str
    name: str
    namespace: str


@dataclass(frozen=True)
class OpenBaoConnection:
    """Where to reach OpenBao and which Kubernetes-auth mount to log in on."""

    server: str = DEFAULT_SERVER
    auth_mount: str = DEFAULT_AUTH_MOUNT


def compute_store_location(cp: ControlPlane | None) -> StoreLocation:
    """Return the store the connection comes from.

    A ControlPlane's spec.secretStoreRef (an empty kind reads ClusterSecretStore), else the
    namespaced store openbao-tenant-store in its namespace; with the ControlPlane gone, the
    default cluster store.
    """
    if cp is None:
        return StoreLocation(CLUSTER_STORE_KIND, DEFAULT_CLUSTER_STORE, "")
    ref = cp.spec.secret_store_ref
    if ref is None or not ref.name:
        return StoreLocation(NAMESPACED_STORE_KIND, DEFAULT_NAMESPACED_STORE, cp.metadata.namespace)
    kind = ref.kind or CLUSTER_STORE_KIND
    namespace = cp.metadata.namespace if kind == NAMESPACED_STORE_KIND else ""
    return StoreLocation(kind, ref.name, namespace)


def compute_connection(store: SecretStore | None) -> OpenBaoConnection:
    """Copy server and mount from a store's Vault provider; each falls back on its own."""
    vault = store.spec.provider.vault if store and store.spec.provider else None
    server = vault.server if vault and vault.server else DEFAULT_SERVER
    kubernetes = vault.auth.kubernetes if vault and vault.auth else None
    mount = kubernetes.mount_path if kubernetes and kubernetes.mount_path else DEFAULT_AUTH_MOUNT
    return OpenBaoConnection(server=server, auth_mount=mount)


class RoleBody(BaseModel):
    """A database-engine role as the reference decodes and compares it.

    Fields OpenBao returns beyond these are ignored; TTLs are whole seconds.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    db_name: str = ""
    creation_statements: tuple[str, ...] = ()
    revocation_statements: tuple[str, ...] = ()
    default_ttl: int = 0
    max_ttl: int = 0

    def to_request(self) -> dict[str, Any]:
        """Return the JSON body of the role write."""
        return {
            "db_name": self.db_name,
            "creation_statements": list(self.creation_statements),
            "revocation_statements": list(self.revocation_statements),
            "default_ttl": self.default_ttl,
            "max_ttl": self.max_ttl,
        }


def build_role(schema: str, keystone_namespace: str) -> RoleBody:
    """Build the role issuing users with ALL PRIVILEGES on one schema and nothing else."""
    return RoleBody(
        db_name=f"keystone-{keystone_namespace}",
        creation_statements=(
            "CREATE USER '{{name}}'@'%' IDENTIFIED BY '{{password}}';",
            f"GRANT ALL PRIVILEGES ON {quote_schema_for_grant(schema)}.* TO '{{{{name}}}}'@'%';",
        ),
        revocation_statements=("DROP USER IF EXISTS '{{name}}'@'%';",),
        default_ttl=DEFAULT_TTL_SECONDS,
        max_ttl=MAX_TTL_SECONDS,
    )


def should_write_role(observed: Mapping[str, Any] | None, desired: RoleBody) -> bool:
    """Report whether the role read back (its `data`, None when absent) must be rewritten."""
    if observed is None:
        return True
    try:
        current = RoleBody.model_validate(dict(observed))
    except ValidationError:
        return True
    return current != desired


def compute_login_ttl(role_data: Mapping[str, Any] | None) -> int | None:
    """The lifetime, in seconds, of a token the generators' auth role issues, from the role's
    `data`: the shorter of `token_ttl` and `token_max_ttl` where set. None when neither is
    set (the auth mount's defaults apply, which tenantdb does not read) or the role is unread.
    """
    if not role_data:
        return None
    found = []
    for name in ("token_ttl", "token_max_ttl"):
        value = role_data.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            found.append(value)
    return min(found) if found else None


def is_login_ttl_too_short(login_ttl: int | None, refresh_seconds: int) -> bool:
    """Whether a credential ESO reads would die before ESO replaces it.

    OpenBao revokes a lease when the token that created it ends, and ESO's generator never
    renews or revokes the token it logged in with, so each delivered credential lives at most
    `login_ttl` seconds; it must outlive the `refresh_seconds` until the next refresh.
    """
    return login_ttl is not None and login_ttl < refresh_seconds


def compute_openbao_failure(error: str, status_code: int | None) -> str:
    """Word an OpenBao failure for DatabaseReady; a 403 names the bootstrap scripts to re-run."""
    return msg_openbao_error(error, permission_denied=status_code == PERMISSION_DENIED)
