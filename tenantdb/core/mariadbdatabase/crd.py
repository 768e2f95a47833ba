"""The MariaDBDatabase CustomResourceDefinition, built as a plain dict.

Owns the structural schema of the kind: every bound and pattern of the spec, the five CEL
rules verbatim with their messages, the status with its conditions as a map list keyed by type,
the status subresource, the printer columns, and descriptions `kubectl explain` shows. Bounds,
patterns and rules come from `validation`, the same constants the reconciler checks against,
so the CRD and the reconciler cannot drift apart. It must never write a file: `make gen` does.
"""

from __future__ import annotations

from typing import Any

from tenantdb.core.mariadbdatabase.naming import (
    GROUP,
    IDENTITY,
    KIND,
    LIST_KIND,
    PLURAL,
    SINGULAR,
    VERSION,
)
from tenantdb.core.mariadbdatabase.validation import (
    CONDITION_MESSAGE_MAX_LENGTH,
    CONTROL_PLANE_REF_RULES,
    DATABASE_NAME_MAX_LENGTH,
    DATABASE_NAME_PATTERN,
    NAMESPACE_MAX_LENGTH,
    NAMESPACE_PATTERN,
    ROLE_NAME_MAX_LENGTH,
    ROOT_RULES,
    CelRule,
)

CRD_NAME = f"{PLURAL}.{GROUP}"


def _rules(rules: tuple[CelRule, ...]) -> list[dict[str, str]]:
    return [{"rule": r.rule, "message": r.message} for r in rules]


def _string(description: str, **bounds: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **bounds}


def _condition_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "description": "One aspect of the order's state (metav1.Condition).",
        "required": ["lastTransitionTime", "message", "reason", "status", "type"],
        "properties": {
            "lastTransitionTime": _string(
                "When the condition last changed from one status to another.",
                format="date-time",
            ),
            "message": _string(
                "A human-readable message about the transition.",
                maxLength=CONDITION_MESSAGE_MAX_LENGTH,
            ),
            "observedGeneration": {
                "type": "integer",
                "format": "int64",
                "minimum": 0,
                "description": "The metadata.generation the condition was set for.",
            },
            "reason": _string(
                "A CamelCase reason for the condition's last transition.",
                minLength=1,
                maxLength=1024,
                pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
            ),
            "status": _string("True, False or Unknown.", enum=["True", "False", "Unknown"]),
            "type": _string(
                "DatabaseReady, DeliveryReady or the aggregate Ready.",
                maxLength=316,
                pattern=(
                    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
                ),
            ),
        },
    }


def _spec_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "description": "The database the order asks for.",
        "required": ["controlPlaneRef"],
        "properties": {
            "controlPlaneRef": {
                "type": "object",
                "description": (
                    "The ControlPlane whose shared MariaDB the database is created on. Both "
                    "halves are immutable."
                ),
                "required": ["name"],
                "properties": {
                    "name": _string("The ControlPlane's name.", minLength=1),
                    "namespace": _string(
                        "The ControlPlane's namespace; empty means the order's own namespace.",
                        minLength=1,
                        maxLength=NAMESPACE_MAX_LENGTH,
                        pattern=NAMESPACE_PATTERN,
                    ),
                },
                "x-kubernetes-validations": _rules(CONTROL_PLANE_REF_RULES),
            },
            "databaseName": _string(
                "The SQL schema name, a MySQL identifier. Defaults to metadata.name with every "
                "- as _. Immutable; the MariaDB system schemas are reserved.",
                minLength=1,
                maxLength=DATABASE_NAME_MAX_LENGTH,
                pattern=DATABASE_NAME_PATTERN,
            ),
            "deletionPolicy": _string(
                "Retain keeps the schema and its data when the order is deleted; Delete drops "
                "them. Mutable; the value in force when the order is deleted applies.",
                enum=["Retain", "Delete"],
                default="Retain",
            ),
        },
    }


def _status_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "description": "What tenantdb observed and delivered; tenantdb is its single writer.",
        "properties": {
            "conditions": {
                "type": "array",
                "description": "DatabaseReady, DeliveryReady and the aggregate Ready.",
                "items": _condition_schema(),
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["type"],
            },
            "observedGeneration": {
                "type": "integer",
                "format": "int64",
                "description": "The metadata.generation last reconciled.",
            },
            "databaseName": _string("The resolved schema name."),
            "host": _string("The database host as delivered."),
            "port": {
                "type": "integer",
                "format": "int32",
                "description": "The database port as delivered.",
            },
            "roleName": _string(
                "The OpenBao database-engine role that issues the order's users.",
                maxLength=ROLE_NAME_MAX_LENGTH,
            ),
            "credentialsRefreshedAt": _string(
                "When ESO last issued the credential the delivered Secret carries.",
                format="date-time",
                nullable=True,
            ),
            "secretName": _string("The delivered Secret, once it carries the current credential."),
            "secretKeys": {
                "type": "array",
                "description": "The keys of the delivered Secret, in order.",
                "items": {"type": "string"},
                "x-kubernetes-list-type": "atomic",
            },
        },
    }


def _printer_columns() -> list[dict[str, str]]:
    return [
        {
            "name": "Ready",
            "type": "string",
            "jsonPath": ".status.conditions[?(@.type=='Ready')].status",
        },
        {
            "name": "Provision",
            "type": "string",
            "description": "Why the database is or is not provisioned (DatabaseReady's reason).",
            "jsonPath": ".status.conditions[?(@.type=='DatabaseReady')].reason",
        },
        {
            "name": "Delivery",
            "type": "string",
            "description": "Why the credential is or is not delivered (DeliveryReady's reason).",
            "jsonPath": ".status.conditions[?(@.type=='DeliveryReady')].reason",
        },
        {"name": "ControlPlane", "type": "string", "jsonPath": ".spec.controlPlaneRef.name"},
        {"name": "Database", "type": "string", "jsonPath": ".status.databaseName"},
        {"name": "Refreshed", "type": "date", "jsonPath": ".status.credentialsRefreshedAt"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]


def build_crd() -> dict[str, Any]:
    """Build the MariaDBDatabase CRD."""
    schema = {
        "type": "object",
        "description": (
            "MariaDBDatabase orders one MariaDB database, and one user with ALL PRIVILEGES on "
            "it, from a namespace a ControlPlane assigns. The credential is delivered in the "
            "Secret <metadata.name>-credentials beside the order and rotates daily."
        ),
        "required": ["spec"],
        "properties": {
            "apiVersion": _string("The versioned schema of this representation of an object."),
            "kind": _string("The REST resource this object represents."),
            "metadata": {"type": "object"},
            "spec": _spec_schema(),
            "status": _status_schema(),
        },
        "x-kubernetes-validations": _rules(ROOT_RULES),
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD_NAME},
        "spec": {
            "group": GROUP,
            "names": {
                "kind": KIND,
                "listKind": LIST_KIND,
                "plural": PLURAL,
                "singular": SINGULAR,
                "shortNames": list(IDENTITY.short_names),
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": _printer_columns(),
                    "schema": {"openAPIV3Schema": schema},
                }
            ],
        },
    }
