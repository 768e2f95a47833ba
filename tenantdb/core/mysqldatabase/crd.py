"""The MysqlDatabase CustomResourceDefinition, built as a plain dict.

The structural schema (patterns, bounds, the privilege enum, defaults), the CEL rules with
their messages (immutable group and schema name, no system schema, ALL PRIVILEGES alone), the
status as a subresource with its one Ready condition, the printer columns, short names and
categories. Patterns, the allowlist and the system schemas come from ``validation``, the same
constants the reconciler checks again, so the two cannot drift apart. The optional host and
users[] parts of the reference are not part of this kind. Pure.
"""

from __future__ import annotations

from typing import Any

from tenantdb.core.mysqldatabase.naming import IDENTITY
from tenantdb.core.mysqldatabase.reasons import Phase
from tenantdb.core.mysqldatabase.validation import (
    ALL_PRIVILEGES,
    DEFAULT_CHARACTER_SET,
    DEFAULT_COLLATION,
    DEFAULT_OWNER_PRIVILEGES,
    PRIVILEGES,
    SYSTEM_SCHEMAS,
)

IDENTIFIER_PATTERN = "^[A-Za-z0-9_]{1,64}$"
USERNAME_PATTERN = "^[A-Za-z0-9_][A-Za-z0-9_.$-]{0,31}$"
MAX_GRANTS = 64

GROUP_REF_IMMUTABLE = (
    "spec.groupRef is immutable; moving a database between groups is a migration, not a spec edit"
)
DATABASE_NAME_IMMUTABLE = (
    "spec.databaseName is immutable; renaming would orphan the existing database"
)
SYSTEM_SCHEMA = "spec.databaseName must not name a MySQL system schema"
OWNER_ALL_ALONE = "spec.owner.privileges must not combine 'ALL PRIVILEGES' with other privileges"
GRANTS_ALL_ALONE = (
    "spec.grants[].privileges must not combine 'ALL PRIVILEGES' with other privileges"
)


def _string(description: str, **bounds: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **bounds}


def _identifier(description: str, **extra: Any) -> dict[str, Any]:
    return _string(description, maxLength=64, pattern=IDENTIFIER_PATTERN, **extra)


def _privileges(description: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "array",
        "description": description,
        "minItems": 1,
        "maxItems": len(PRIVILEGES),
        "items": _string("One privilege of the allowlist.", maxLength=32, enum=list(PRIVILEGES)),
        "x-kubernetes-list-type": "atomic",
        **extra,
    }


def _combined(path: str) -> str:
    return f"size({path}) < 2 || !('{ALL_PRIVILEGES}' in {path})"


def _spec_schema() -> dict[str, Any]:
    schemas = ", ".join(f"'{s}'" for s in sorted(SYSTEM_SCHEMAS))
    return {
        "type": "object",
        "description": "The tenant database, its owner and the grants to existing principals.",
        "required": ["groupRef", "databaseName", "owner"],
        "properties": {
            "groupRef": {
                "type": "object",
                "description": "The MysqlFailoverGroup in the same namespace. Immutable.",
                "required": ["name"],
                "properties": {"name": _string("The group's name.", minLength=1)},
                "x-kubernetes-validations": [
                    {"rule": "self == oldSelf", "message": GROUP_REF_IMMUTABLE}
                ],
            },
            "databaseName": _identifier(
                "The schema to create. Immutable; MySQL's own schemas are refused.",
                **{
                    "x-kubernetes-validations": [
                        {"rule": "self == oldSelf", "message": DATABASE_NAME_IMMUTABLE},
                        {"rule": f"!(self.lowerAscii() in [{schemas}])", "message": SYSTEM_SCHEMA},
                    ]
                },
            ),
            "characterSet": _identifier(
                "The schema's character set.", default=DEFAULT_CHARACTER_SET
            ),
            "collation": _identifier("The schema's collation.", default=DEFAULT_COLLATION),
            "owner": {
                "type": "object",
                "description": (
                    "The user that owns the schema; its username and password come from a Secret"
                    " in the same namespace (keys username and password)."
                ),
                "required": ["secretName"],
                "properties": {
                    "secretName": _string("The owner Secret.", minLength=1, maxLength=253),
                    "privileges": _privileges(
                        "What the owner gets on the schema only, never WITH GRANT OPTION.",
                        default=list(DEFAULT_OWNER_PRIVILEGES),
                    ),
                },
            },
            "grants": {
                "type": "array",
                "description": "Privileges on the schema for principals that already exist.",
                "maxItems": MAX_GRANTS,
                "items": {
                    "type": "object",
                    "required": ["username", "privileges"],
                    "properties": {
                        "username": _string(
                            "An existing MySQL user; it is never created.",
                            maxLength=32,
                            pattern=USERNAME_PATTERN,
                        ),
                        "privileges": _privileges("What the user gets on the schema."),
                    },
                },
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["username"],
            },
            "deletionPolicy": _string(
                "Retain keeps the schema and the owner when the order is deleted; Delete drops"
                " what this order created.",
                enum=["Retain", "Delete"],
                default="Retain",
            ),
        },
        "x-kubernetes-validations": [
            {
                "rule": f"!has(self.owner.privileges) || {_combined('self.owner.privileges')}",
                "message": OWNER_ALL_ALONE,
            },
            {
                "rule": f"!has(self.grants) || self.grants.all(g, {_combined('g.privileges')})",
                "message": GRANTS_ALL_ALONE,
            },
        ],
    }


def _status_schema() -> dict[str, Any]:
    condition = {
        "type": "object",
        "required": ["lastTransitionTime", "message", "reason", "status", "type"],
        "properties": {
            "type": _string("Ready."),
            "status": _string("True, False or Unknown.", enum=["True", "False", "Unknown"]),
            "reason": _string("Why the condition is as it is.", maxLength=1024),
            "message": _string("What happened, in words.", maxLength=32768),
            "lastTransitionTime": _string("When the status last changed.", format="date-time"),
            "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
        },
    }
    return {
        "type": "object",
        "description": "What tenantdb applied; it is the single writer. Never a credential.",
        "properties": {
            "phase": _string("Where the order stands.", enum=[str(p) for p in Phase]),
            "observedGeneration": {"type": "integer", "format": "int64"},
            "databaseCreated": {
                "type": "boolean",
                "description": "Whether this order created the schema; only then may it drop it.",
            },
            "ownerUser": _string("The owner's username (never its password)."),
            "pendingOwnerUser": _string("The owner a username rotation is creating."),
            "appliedGrants": {
                "type": "array",
                "description": "The usernames the last apply granted, the owner first.",
                "items": {"type": "string"},
                "x-kubernetes-list-type": "atomic",
            },
            "activeSite": _string("The site the last apply went to."),
            "lastAppliedHash": _string("The fingerprint of the last apply's inputs."),
            "message": _string("The last pass in words."),
            "conditions": {
                "type": "array",
                "items": condition,
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["type"],
            },
        },
    }


def _printer_columns() -> list[dict[str, Any]]:
    return [
        {"name": "Group", "type": "string", "jsonPath": ".spec.groupRef.name"},
        {"name": "Database", "type": "string", "jsonPath": ".spec.databaseName"},
        {"name": "Owner", "type": "string", "jsonPath": ".status.ownerUser"},
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
        {
            "name": "Ready",
            "type": "string",
            "jsonPath": ".status.conditions[?(@.type=='Ready')].status",
        },
        {"name": "Policy", "type": "string", "jsonPath": ".spec.deletionPolicy", "priority": 1},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]


def build_crd() -> dict[str, Any]:
    """Build the MysqlDatabase CRD."""
    identity = IDENTITY
    schema = {
        "type": "object",
        "description": (
            "MysqlDatabase declares one database on a MysqlFailoverGroup, the user that owns it"
            " (password from a Secret) and grants for principals that already exist."
        ),
        "required": ["spec"],
        "properties": {
            "apiVersion": _string("The versioned schema of this representation of an object."),
            "kind": _string("The REST resource this object represents."),
            "metadata": {"type": "object"},
            "spec": _spec_schema(),
            "status": _status_schema(),
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": identity.crd_name},
        "spec": {
            "group": identity.group,
            "names": {
                "kind": identity.kind,
                "listKind": identity.list_kind,
                "plural": identity.plural,
                "singular": identity.singular,
                "shortNames": list(identity.short_names),
                "categories": list(identity.categories),
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": identity.version,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": _printer_columns(),
                    "schema": {"openAPIV3Schema": schema},
                }
            ],
        },
    }
