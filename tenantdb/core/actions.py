"""The typed actions a plan hands the engine, and the log events it asks to be written.

Owns the vocabulary between decision and I/O: apply this object, patch that one, delete that
one, make sure this OpenBao role exists, remove that role. The engine runs the actions of a plan
in order and stops at the first failure. Nothing here performs an action, and an action's repr
never shows an object body, because a body can hold a credential.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from tenantdb.core.mariadbdatabase.openbao import OpenBaoConnection, RoleBody


class ApplyStrategy(StrEnum):
    """How an object is written."""

    SERVER_SIDE_APPLY = "ServerSideApply"
    """Server-side apply with tenantdb's field manager, forcing ownership of the fields sent."""
    CREATE_OR_UPDATE = "CreateOrUpdate"
    """Read, replace the spec, write back (the shared cert-manager Certificate)."""


@dataclass(frozen=True)
class ObjectRef:
    """Where an object lives: its cluster ("" is management), kind, namespace and name."""

    cluster: str
    api_version: str
    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        where = f"@{self.cluster}" if self.cluster else ""
        return f"{self.kind} {self.namespace}/{self.name}{where}"


@dataclass(frozen=True)
class ApplyObject:
    """Write a desired object."""

    cluster: str
    manifest: dict[str, Any] = field(repr=False, compare=True)
    strategy: ApplyStrategy = ApplyStrategy.SERVER_SIDE_APPLY

    @property
    def ref(self) -> ObjectRef:
        """Return where the object goes."""
        meta = self.manifest["metadata"]
        return ObjectRef(
            self.cluster,
            self.manifest["apiVersion"],
            self.manifest["kind"],
            meta.get("namespace", ""),
            meta["name"],
        )


@dataclass(frozen=True)
class PatchObject:
    """Merge-patch an object."""

    ref: ObjectRef
    merge_patch: dict[str, Any]


@dataclass(frozen=True)
class DeleteObject:
    """Delete an object; NotFound counts as done."""

    ref: ObjectRef


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


Action = ApplyObject | PatchObject | DeleteObject | EnsureRole | RemoveRole


class LogLevel(StrEnum):
    """Severity of a log event a plan asks for."""

    INFO = "info"
    DEBUG = "debug"
    ERROR = "error"


@dataclass(frozen=True)
class LogEvent:
    """A log line a decision asks for; fields never hold a credential."""

    message: str
    fields: tuple[tuple[str, str], ...] = ()
    level: LogLevel = LogLevel.INFO
