"""Tiny builders for the OpenAPI v3 schemas of the devstack's CRDs.

Owns shorthand for the structural-schema nodes the CRD modules repeat (objects, strings,
references, conditions), so each CRD reads as the fields it serves. It must never produce a
non-structural schema: every node has a type, or preserves unknown fields on purpose.
"""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]


def obj(
    properties: dict[str, Schema] | None = None,
    *,
    required: tuple[str, ...] = (),
    preserve: bool = False,
    **extra: Any,
) -> Schema:
    """An object node; `preserve` keeps fields the schema does not name."""
    node: Schema = {"type": "object"}
    if properties:
        node["properties"] = properties
    if required:
        node["required"] = list(required)
    if preserve:
        node["x-kubernetes-preserve-unknown-fields"] = True
    node.update(extra)
    return node


def string(**extra: Any) -> Schema:
    """A string node (enum, pattern, lengths, default as keyword arguments)."""
    return {"type": "string", **extra}


def integer(**extra: Any) -> Schema:
    """An integer node."""
    return {"type": "integer", **extra}


def boolean(**extra: Any) -> Schema:
    """A boolean node."""
    return {"type": "boolean", **extra}


def array(items: Schema, **extra: Any) -> Schema:
    """An array node."""
    return {"type": "array", "items": items, **extra}


def string_map() -> Schema:
    """A map of strings (labels, annotations, Secret data)."""
    return {"type": "object", "additionalProperties": {"type": "string"}}


def name_ref(*keys: str) -> Schema:
    """A reference by name, with extra optional string keys (`key`, `namespace`, …)."""
    return obj({"name": string(), **{k: string() for k in keys}})


def conditions() -> Schema:
    """A `metav1.Condition` list keyed by type."""
    return array(
        obj(
            {
                "type": string(),
                "status": string(enum=["True", "False", "Unknown"]),
                "reason": string(),
                "message": string(),
                "lastTransitionTime": string(format="date-time"),
                "observedGeneration": integer(format="int64"),
            },
            required=("type", "status"),
        ),
        **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )


def crd(
    *,
    group: str,
    kind: str,
    plural: str,
    version: str,
    spec: Schema,
    status: Schema,
    namespaced: bool = True,
    short_names: tuple[str, ...] = (),
    categories: tuple[str, ...] = (),
    columns: tuple[tuple[str, str, str], ...] = (),
) -> Schema:
    """A one-version CRD with a status subresource and printer columns (name, type, path)."""
    printer = [{"name": n, "type": t, "jsonPath": p} for n, t, p in columns]
    printer.append({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"})
    names: Schema = {
        "kind": kind,
        "listKind": f"{kind}List",
        "plural": plural,
        "singular": kind.lower(),
    }
    if short_names:
        names["shortNames"] = list(short_names)
    if categories:
        names["categories"] = list(categories)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "names": names,
            "scope": "Namespaced" if namespaced else "Cluster",
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": printer,
                    "schema": {
                        "openAPIV3Schema": obj(
                            {
                                "apiVersion": string(),
                                "kind": string(),
                                "metadata": obj(),
                                "spec": spec,
                                "status": status,
                            }
                        )
                    },
                }
            ],
        },
    }
