"""Discovery documents and OpenAPI for the kinds a cluster serves.

Owns `/version`, `/api`, `/apis`, the per group/version resource lists, `/openapi/v2` and
`/openapi/v3` (with the `fieldValidation` PATCH parameter kubectl looks for, so that kubectl leaves
validation to the server, and the schemas `kubectl explain` prints), and `kubectl get` tables.
It must never describe a kind the registry does not serve.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from devstack.kube.kinds import AGE, NAME, Kind

KUBE_VERSION = {
    "major": "1",
    "minor": "33",
    "gitVersion": "v1.33.0-devstack",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2025-01-01T00:00:00Z",
    "goVersion": "go1.24.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def _groups(kinds: Iterable[Kind]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for kind in kinds:
        versions = groups.setdefault(kind.group, [])
        for version in kind.versions:
            if version not in versions:
                versions.append(version)
    return groups


def api_versions(address: str) -> dict[str, Any]:
    """`/api`."""
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}],
    }


def _group_doc(name: str, versions: list[str]) -> dict[str, Any]:
    entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": entries, "preferredVersion": entries[0]}


def api_group_list(kinds: Iterable[Kind]) -> dict[str, Any]:
    """`/apis`."""
    groups = [_group_doc(g, v) for g, v in sorted(_groups(kinds).items()) if g]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(kinds: Iterable[Kind], group: str) -> dict[str, Any] | None:
    """`/apis/<group>`."""
    versions = _groups(kinds).get(group)
    if not versions or not group:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_doc(group, versions)}


def _resource_entries(kind: Kind) -> list[dict[str, Any]]:
    main: dict[str, Any] = {
        "name": kind.plural,
        "singularName": kind.singular,
        "namespaced": kind.namespaced,
        "kind": kind.kind,
        "verbs": list(kind.verbs),
    }
    if kind.short_names:
        main["shortNames"] = list(kind.short_names)
    if kind.categories:
        main["categories"] = list(kind.categories)
    entries = [main]
    for sub in kind.subresources:
        if sub == "token":
            entries.append(
                {
                    "name": f"{kind.plural}/token",
                    "singularName": "",
                    "namespaced": True,
                    "group": "authentication.k8s.io",
                    "version": "v1",
                    "kind": "TokenRequest",
                    "verbs": ["create"],
                }
            )
        else:
            entries.append(
                {
                    "name": f"{kind.plural}/{sub}",
                    "singularName": "",
                    "namespaced": kind.namespaced,
                    "kind": kind.kind,
                    "verbs": ["get", "patch", "update"],
                }
            )
    return entries


def resource_list(kinds: Iterable[Kind], group: str, version: str) -> dict[str, Any] | None:
    """`/api/v1` or `/apis/<group>/<version>`."""
    chosen = [k for k in kinds if k.group == group and version in k.versions]
    if not chosen:
        return None
    resources = [e for k in sorted(chosen, key=lambda k: k.plural) for e in _resource_entries(k)]
    group_version = f"{group}/{version}" if group else version
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }


# ---------------------------------------------------------------- tables


def table(
    kind: Kind,
    version: str,
    objects: list[dict[str, Any]],
    meta: dict[str, Any],
    include: str,
    *,
    columns: bool = True,
) -> dict[str, Any]:
    """Render objects as a `meta.k8s.io/v1` Table for `kubectl get`."""
    cols = kind.columns.get(version) or (NAME, AGE)
    rows = []
    for obj in objects:
        row: dict[str, Any] = {"cells": [c.cell(obj) for c in cols]}
        if include == "Object":
            row["object"] = obj
        elif include != "None":
            row["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj.get("metadata", {}),
            }
        rows.append(row)
    out: dict[str, Any] = {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "rows": rows,
    }
    if columns:
        out["columnDefinitions"] = [
            {
                "name": c.name,
                "type": c.type,
                "format": c.format,
                "description": c.description,
                "priority": c.priority,
            }
            for c in cols
        ]
    return out


# ---------------------------------------------------------------- OpenAPI


def schema_name(kind: Kind, version: str) -> str:
    """The OpenAPI definition name of a kind, in the real server's style."""
    if kind.builtin:
        group = kind.group.split(".")[0] if kind.group else "core"
        prefix = (
            "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions"
            if kind.group == "apiextensions.k8s.io"
            else f"io.k8s.api.{group}"
        )
        return f"{prefix}.{version}.{kind.kind}"
    return ".".join(reversed(kind.group.split("."))) + f".{version}.{kind.kind}"


def _gvk(kind: Kind, version: str) -> dict[str, str]:
    return {"group": kind.group, "version": version, "kind": kind.kind}


_WRITE_PARAMS = ("dryRun", "fieldManager", "fieldValidation", "force")


def _operation(kind: Kind, version: str, action: str, ref: str, v3: bool) -> dict[str, Any]:
    params = [
        {"name": n, "in": "query", **({"schema": {"type": "string"}} if v3 else {"type": "string"})}
        for n in _WRITE_PARAMS
    ]
    op: dict[str, Any] = {
        "operationId": f"{action}{kind.kind}",
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": _gvk(kind, version),
        "parameters": params,
    }
    if v3:
        op["responses"] = {
            "200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": ref}}}}
        }
    else:
        op["responses"] = {"200": {"description": "OK", "schema": {"$ref": ref}}}
    return op


def _paths(kind: Kind, version: str, ref: str, v3: bool) -> dict[str, Any]:
    base = f"/apis/{kind.group}/{version}" if kind.group else f"/api/{version}"
    collection = (
        f"{base}/namespaces/{{namespace}}/{kind.plural}"
        if kind.namespaced
        else f"{base}/{kind.plural}"
    )
    item = f"{collection}/{{name}}"
    return {
        collection: {
            "get": _operation(kind, version, "list", ref, v3),
            "post": _operation(kind, version, "post", ref, v3),
        },
        item: {
            "get": _operation(kind, version, "get", ref, v3),
            "put": _operation(kind, version, "put", ref, v3),
            "patch": _operation(kind, version, "patch", ref, v3),
            "delete": _operation(kind, version, "delete", ref, v3),
        },
    }


def _definition(kind: Kind, version: str) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(json.dumps(kind.schema(version)))
    body["x-kubernetes-group-version-kind"] = [_gvk(kind, version)]
    return body


def openapi_v2(kinds: Iterable[Kind]) -> dict[str, Any]:
    """`/openapi/v2` as JSON."""
    paths: dict[str, Any] = {}
    definitions: dict[str, Any] = {}
    for kind in kinds:
        for version in kind.versions:
            name = schema_name(kind, version)
            definitions[name] = _definition(kind, version)
            paths.update(_paths(kind, version, f"#/definitions/{name}", v3=False))
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": KUBE_VERSION["gitVersion"]},
        "paths": paths,
        "definitions": definitions,
    }


def _gv_key(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def openapi_v3_index(kinds: Iterable[Kind]) -> dict[str, Any]:
    """`/openapi/v3`: one entry per group/version with a content hash."""
    kinds = list(kinds)
    paths = {}
    for group, versions in _groups(kinds).items():
        for version in versions:
            key = _gv_key(group, version)
            doc = openapi_v3(kinds, group, version) or {}
            digest = (
                hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:32].upper()
            )
            paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={digest}"}
    return {"paths": paths}


def openapi_v3(kinds: Iterable[Kind], group: str, version: str) -> dict[str, Any] | None:
    """`/openapi/v3/<gv>` for one group/version."""
    chosen = [k for k in kinds if k.group == group and version in k.versions]
    if not chosen:
        return None
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    for kind in chosen:
        name = schema_name(kind, version)
        schemas[name] = _definition(kind, version)
        paths.update(_paths(kind, version, f"#/components/schemas/{name}", v3=True))
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": KUBE_VERSION["gitVersion"]},
        "paths": paths,
        "components": {"schemas": schemas},
    }
