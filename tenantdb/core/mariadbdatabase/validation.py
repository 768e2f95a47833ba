"""Validation rules of the MariaDBDatabase kind, in one place for the CRD and the reconciler.

Owns the patterns, bounds and CEL rules (verbatim, with their messages) that admission
enforces, and the reconciler's own re-check of the schema name before it reaches SQL. The CRD
builder reads these constants, so the two can never drift. It must never fetch anything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tenantdb.core.mariadbdatabase.reasons import (
    MAX_NAME_LENGTH,
    Reason,
    msg_database_name_invalid,
    msg_database_name_reserved,
)

DATABASE_NAME_MAX_LENGTH = 64
DATABASE_NAME_PATTERN = r"^[A-Za-z0-9_]+$"
NAMESPACE_MAX_LENGTH = 63
NAMESPACE_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
ROLE_NAME_MAX_LENGTH = 1024
CONDITION_MESSAGE_MAX_LENGTH = 32768
PUBLISHED_ENDPOINT_MAX_LENGTH = 262
PUBLISHED_ENDPOINT_PATTERN = (
    r"^([a-zA-Z0-9._-]+|\[[0-9a-fA-F:.]+\]):"
    r"([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])$"
)
"""The ControlPlane's admission pattern for spec.infrastructure.publishedDatabaseEndpoint."""

RESERVED_SCHEMAS = frozenset({"mysql", "information_schema", "performance_schema", "sys"})

_SCHEMA_NAME = re.compile(r"[A-Za-z0-9_]{1,64}")


@dataclass(frozen=True)
class CelRule:
    """One x-kubernetes-validations entry."""

    rule: str
    message: str


CONTROL_PLANE_REF_RULES = (
    CelRule(
        rule="self.name == oldSelf.name",
        message=(
            "controlPlaneRef.name is immutable; delete and re-create the MariaDBDatabase to "
            "move it to another ControlPlane"
        ),
    ),
    CelRule(
        rule=(
            "(has(self.__namespace__) ? self.__namespace__ : '') == "
            "(has(oldSelf.__namespace__) ? oldSelf.__namespace__ : '')"
        ),
        message=(
            "controlPlaneRef.namespace is immutable; delete and re-create the MariaDBDatabase "
            "to move it to another ControlPlane"
        ),
    ),
)
"""The rules on spec.controlPlaneRef, verbatim."""

ROOT_RULES = (
    CelRule(
        rule="size(self.metadata.name) <= 63",
        message=(
            "metadata.name must be at most 63 bytes; it is carried as a label value on the "
            "order's children"
        ),
    ),
    CelRule(
        rule=(
            "(has(self.spec.databaseName) ? self.spec.databaseName : "
            "self.metadata.name.replace('-', '_')) == (has(oldSelf.spec.databaseName) ? "
            "oldSelf.spec.databaseName : oldSelf.metadata.name.replace('-', '_'))"
        ),
        message=(
            "databaseName is immutable; delete and re-create the MariaDBDatabase to order "
            "another database"
        ),
    ),
    CelRule(
        rule="has(self.spec.databaseName) || self.metadata.name.matches('^[a-z0-9-]{1,64}$')",
        message=(
            "metadata.name is not a MySQL identifier once its dashes are underscores; set "
            "spec.databaseName"
        ),
    ),
)
"""The rules on the whole object, verbatim."""


@dataclass(frozen=True)
class NameRefusal:
    """Why the reconciler refuses a schema name, worded for DatabaseReady."""

    reason: Reason
    message: str


def is_valid_database_name(name: str) -> bool:
    """Report whether a schema name is a MySQL identifier of 1 to 64 of [A-Za-z0-9_]."""
    return _SCHEMA_NAME.fullmatch(name) is not None


def is_reserved_database_name(name: str) -> bool:
    """Report whether a schema name is a MariaDB system schema (compared without case)."""
    return name.lower() in RESERVED_SCHEMAS


def classify_database_name(name: str) -> NameRefusal | None:
    """Return the refusal of a schema name, or None when it may reach SQL."""
    if not is_valid_database_name(name):
        return NameRefusal(Reason.DATABASE_NAME_INVALID, msg_database_name_invalid(name))
    if is_reserved_database_name(name):
        return NameRefusal(Reason.DATABASE_NAME_RESERVED, msg_database_name_reserved(name))
    return None


def is_cluster_name_too_long(cluster: str) -> bool:
    """Report whether a cluster name cannot be carried as a label value."""
    return len(cluster) > MAX_NAME_LENGTH


def quote_schema_for_grant(name: str) -> str:
    """Quote a validated schema name for a database-level GRANT.

    In such a GRANT a bare `_` is a one-character wildcard, so each one is escaped as `\\_`.
    Only names that passed `is_valid_database_name` get here, so no backtick needs escaping.
    """
    if not is_valid_database_name(name):
        raise ValueError("only a validated schema name can be quoted")
    return "`" + name.replace("_", "\\_") + "`"
