"""Typed views of the Kubernetes objects a MariaDBDatabase pass reads.

Owns the pydantic models of the MariaDBDatabase kind (spec and status), of the ControlPlane
fields the order depends on, and of the children read back (the mariadb-operator MariaDB and
Database, ESO ExternalSecret and generator, Secrets, SecretStores). Every model is frozen and
speaks the API's camelCase names. The order's spec forbids unknown fields, because the CRD is
ours; everything else tolerates fields a newer server or operator adds. This module must never
fetch or write anything, and must never let a Secret's data show up in a repr.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import Field

from tenantdb.core.objects import (
    ApiModel,
    Condition,
    ConditionedStatus,
    ObjectMeta,
    SpecModel,
)

# --- the order -------------------------------------------------------------------------------


class DeletionPolicy(StrEnum):
    """What deleting the order does to the schema and its data."""

    RETAIN = "Retain"
    DELETE = "Delete"


class ControlPlaneRef(SpecModel):
    """spec.controlPlaneRef: an empty namespace means the order's own."""

    name: str
    namespace: str | None = None


class MariaDBDatabaseSpec(SpecModel):
    """spec of a MariaDBDatabase."""

    control_plane_ref: ControlPlaneRef = Field(
        description="The ControlPlane whose shared MariaDB the database is created on."
    )
    database_name: str | None = Field(
        default=None, description="The SQL schema name; defaults to metadata.name with - as _."
    )
    deletion_policy: DeletionPolicy = Field(
        default=DeletionPolicy.RETAIN,
        description="Retain or Delete: whether deleting the order drops the schema.",
    )


class MariaDBDatabaseStatus(ApiModel):
    """status of a MariaDBDatabase; tenantdb is its single writer."""

    conditions: tuple[Condition, ...] = ()
    observed_generation: int | None = None
    database_name: str = ""
    host: str = ""
    port: int = 0
    role_name: str = ""
    credentials_refreshed_at: datetime | None = None
    secret_name: str = ""
    secret_keys: tuple[str, ...] = ()


class MariaDBDatabase(ApiModel):
    """A MariaDBDatabase order as read from the API server."""

    api_version: str = "c5c3.io/v1alpha1"
    kind: str = "MariaDBDatabase"
    metadata: ObjectMeta
    spec: MariaDBDatabaseSpec
    status: MariaDBDatabaseStatus = Field(default_factory=MariaDBDatabaseStatus)

    def control_plane_namespace(self) -> str:
        """Resolve spec.controlPlaneRef.namespace, which defaults to the order's namespace."""
        return self.spec.control_plane_ref.namespace or self.metadata.namespace


# --- the ControlPlane ------------------------------------------------------------------------


class NameRef(ApiModel):
    """A reference by name only."""

    name: str = ""


class TargetClusterRef(ApiModel):
    """targetClusterRef: absent means the management cluster."""

    name: str = ""


class NamespaceAssignment(ApiModel):
    """spec.namespaceAssignments[]."""

    namespace: str = ""
    target_cluster_ref: TargetClusterRef | None = None
    allowed_roles: tuple[str, ...] = ()
    allow_catalog_entries: bool = False


class DatabaseTLS(ApiModel):
    """The tls block of a database declaration."""

    mode: str = ""
    ca_bundle_secret_ref: NameRef | None = None
    client_cert_secret_ref: NameRef | None = None


class DatabaseDeclaration(ApiModel):
    """A database a ControlPlane declares: managed (clusterRef) or brownfield (host)."""

    cluster_ref: NameRef | None = None
    host: str = ""
    port: int = 0
    database: str = ""
    secret_ref: NameRef | None = None
    credentials_mode: str = ""
    tls: DatabaseTLS | None = None


class Infrastructure(ApiModel):
    """spec.infrastructure; absent in External mode."""

    database: DatabaseDeclaration | None = None
    published_database_endpoint: str = ""


class KeystoneNamespace(ApiModel):
    """spec.services.keystone.namespace."""

    name: str = ""
    lifecycle: str = ""


class DedicatedBackingServices(ApiModel):
    """spec.services.keystone.dedicatedBackingServices."""

    database: DatabaseDeclaration | None = None


class KeystoneService(ApiModel):
    """spec.services.keystone."""

    mode: str = ""
    namespace: KeystoneNamespace | None = None
    target_cluster_ref: TargetClusterRef | None = None
    dedicated_backing_services: DedicatedBackingServices | None = None
    database_credentials_mode: str = ""


class Services(ApiModel):
    """spec.services."""

    keystone: KeystoneService | None = None


class StoreRef(ApiModel):
    """spec.secretStoreRef."""

    kind: str = ""
    name: str = ""


class ControlPlaneSpec(ApiModel):
    """The ControlPlane spec fields a MariaDBDatabase reads."""

    namespace_assignments: tuple[NamespaceAssignment, ...] = ()
    infrastructure: Infrastructure | None = None
    services: Services | None = None
    secret_store_ref: StoreRef | None = None


class ControlPlane(ApiModel):
    """A ControlPlane, reduced to what an order reads."""

    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ControlPlaneSpec = Field(default_factory=ControlPlaneSpec)
    status: ConditionedStatus = Field(default_factory=ConditionedStatus)


# --- children and neighbours ------------------------------------------------------------------


class MariaDB(ApiModel):
    """A mariadb-operator MariaDB, read for its Ready condition."""

    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    status: ConditionedStatus = Field(default_factory=ConditionedStatus)


class MariaDbRef(ApiModel):
    """Database spec.mariaDbRef."""

    name: str = ""
    namespace: str = ""
    wait_for_it: bool | None = None


class DatabaseCRSpec(ApiModel):
    """The mariadb-operator Database spec fields an order reads."""

    maria_db_ref: MariaDbRef = Field(default_factory=MariaDbRef)
    name: str = ""
    cleanup_policy: str = ""


class DatabaseCR(ApiModel):
    """A mariadb-operator Database (k8s.mariadb.com/v1alpha1)."""

    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: DatabaseCRSpec = Field(default_factory=DatabaseCRSpec)
    status: ConditionedStatus = Field(default_factory=ConditionedStatus)

    def schema_name(self) -> str:
        """Return the schema the CR creates: spec.name, else metadata.name."""
        return self.spec.name or self.metadata.name


class ExternalSecretStatus(ConditionedStatus):
    """status of an ESO ExternalSecret."""

    refresh_time: datetime | None = None


class ExternalSecret(ApiModel):
    """An ESO ExternalSecret."""

    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    status: ExternalSecretStatus = Field(default_factory=ExternalSecretStatus)


class VaultKubernetesAuth(ApiModel):
    """provider.vault.auth.kubernetes of a SecretStore."""

    mount_path: str = ""


class VaultAuth(ApiModel):
    """provider.vault.auth of a SecretStore."""

    kubernetes: VaultKubernetesAuth | None = None


class VaultProvider(ApiModel):
    """provider.vault of a SecretStore."""

    server: str = ""
    auth: VaultAuth | None = None


class StoreProvider(ApiModel):
    """spec.provider of a SecretStore."""

    vault: VaultProvider | None = None


class SecretStoreSpec(ApiModel):
    """spec of a SecretStore or ClusterSecretStore."""

    provider: StoreProvider | None = None


class SecretStore(ApiModel):
    """An ESO SecretStore or ClusterSecretStore, read for its OpenBao server and auth mount."""

    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: SecretStoreSpec = Field(default_factory=SecretStoreSpec)
