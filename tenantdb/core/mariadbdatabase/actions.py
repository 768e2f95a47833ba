"""What a MariaDBDatabase plan asks beside object writes: the OpenBao role's upkeep.

``Action`` is every step a plan of this kind may ask for: the generic object writes and the
two role actions the adapter performs against OpenBao.
"""

from __future__ import annotations

from dataclasses import dataclass

from tenantdb.core.actions import ObjectAction
from tenantdb.core.mariadbdatabase.openbao import OpenBaoConnection, RoleBody


@dataclass(frozen=True)
class ClientCertificateRef:
    """The Secret holding the mTLS keypair and CA the operator presents to OpenBao."""

    namespace: str
    name: str


@dataclass(frozen=True)
class EnsureRole:
    """Log in, read the role, write it when `should_write_role` says so, revoke the token."""

    role_name: str
    body: RoleBody
    connection: OpenBaoConnection
    client_certificate: ClientCertificateRef


@dataclass(frozen=True)
class RemoveRole:
    """Log in, revoke every lease under creds_path, delete the role, revoke the token."""

    role_name: str
    creds_path: str
    connection: OpenBaoConnection
    client_certificate: ClientCertificateRef


Action = ObjectAction | EnsureRole | RemoveRole
