"""Decoding of the Kubernetes protobuf request bodies kubectl sends for built-in kinds.

Owns the `k8s\\x00` envelope (`runtime.Unknown`) and the wire format of the kinds `kubectl create`
and `kubectl auth` post: Namespace, Secret, ConfigMap, ServiceAccount, TokenRequest,
SelfSubjectReview, Role, ClusterRole, RoleBinding, ClusterRoleBinding and the
`authorization.k8s.io` access reviews, with the ObjectMeta fields a create carries.
It must never be used for responses: the server always answers in JSON, which every client
accepts. Other kinds in protobuf get a 415 from the caller.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

MAGIC = b"k8s\x00"
Fields = dict[int, list[Any]]


class ProtobufError(ValueError):
    """A body that is not a protobuf message this module knows."""


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise ProtobufError("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _fields(data: bytes) -> Fields:
    out: Fields = {}
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            out.setdefault(number, []).append(value)
        elif wire == 2:
            size, pos = _varint(data, pos)
            out.setdefault(number, []).append(data[pos : pos + size])
            pos += size
        else:
            raise ProtobufError(f"unsupported wire type {wire}")
    return out


def _text(fields: Fields, number: int) -> str | None:
    values = fields.get(number)
    return values[-1].decode() if values else None


def _map(fields: Fields, number: int, *, binary: bool = False) -> dict[str, str] | None:
    entries = fields.get(number)
    if not entries:
        return None
    out: dict[str, str] = {}
    for raw in entries:
        entry = _fields(raw)
        key = _text(entry, 1) or ""
        value = (entry.get(2) or [b""])[-1]
        out[key] = base64.b64encode(value).decode() if binary else value.decode()
    return out


def _owner_reference(raw: bytes) -> dict[str, Any]:
    f = _fields(raw)
    ref: dict[str, Any] = {
        "apiVersion": _text(f, 5),
        "kind": _text(f, 1),
        "name": _text(f, 3),
        "uid": _text(f, 4),
    }
    if 6 in f:
        ref["controller"] = bool(f[6][-1])
    if 7 in f:
        ref["blockOwnerDeletion"] = bool(f[7][-1])
    return ref


def _metadata(raw: bytes) -> dict[str, Any]:
    f = _fields(raw)
    meta: dict[str, Any] = {}
    for number, key in ((1, "name"), (2, "generateName"), (3, "namespace")):
        value = _text(f, number)
        if value:
            meta[key] = value
    for number, key in ((11, "labels"), (12, "annotations")):
        mapped = _map(f, number)
        if mapped is not None:
            meta[key] = mapped
    if 13 in f:
        meta["ownerReferences"] = [_owner_reference(r) for r in f[13]]
    if 14 in f:
        meta["finalizers"] = [v.decode() for v in f[14]]
    return meta


def _named_refs(f: Fields, number: int) -> list[dict[str, Any]] | None:
    if number not in f:
        return None
    return [{"name": _text(_fields(raw), 1) or ""} for raw in f[number]]


def _secret(f: Fields, out: dict[str, Any]) -> None:
    for key, value in (("data", _map(f, 2, binary=True)), ("stringData", _map(f, 4))):
        if value is not None:
            out[key] = value
    if _text(f, 3):
        out["type"] = _text(f, 3)
    if 5 in f:
        out["immutable"] = bool(f[5][-1])


def _configmap(f: Fields, out: dict[str, Any]) -> None:
    for key, value in (("data", _map(f, 2)), ("binaryData", _map(f, 3, binary=True))):
        if value is not None:
            out[key] = value
    if 4 in f:
        out["immutable"] = bool(f[4][-1])


def _serviceaccount(f: Fields, out: dict[str, Any]) -> None:
    for key, value in (("secrets", _named_refs(f, 2)), ("imagePullSecrets", _named_refs(f, 3))):
        if value is not None:
            out[key] = value
    if 4 in f:
        out["automountServiceAccountToken"] = bool(f[4][-1])


def _namespace(f: Fields, out: dict[str, Any]) -> None:
    return None


def _token_request(f: Fields, out: dict[str, Any]) -> None:
    spec = _fields((f.get(2) or [b""])[-1])
    decoded: dict[str, Any] = {"audiences": [a.decode() for a in spec.get(1) or []]}
    if 4 in spec:
        decoded["expirationSeconds"] = spec[4][-1]
    out["spec"] = decoded


def _strings(f: Fields, number: int) -> list[str]:
    return [v.decode() for v in f.get(number) or []]


def _texts(raw: bytes, names: tuple[str, ...]) -> dict[str, Any]:
    """A message of string fields numbered 1, 2, ... in the order of `names`; empty ones omitted."""
    f = _fields(raw)
    return {n: _text(f, i) for i, n in enumerate(names, 1) if _text(f, i)}


def _policy_rule(raw: bytes) -> dict[str, Any]:
    f = _fields(raw)
    keys = ("verbs", "apiGroups", "resources", "resourceNames", "nonResourceURLs")
    return {k: _strings(f, i) for i, k in enumerate(keys, 1) if i in f}


def _label_selector(raw: bytes) -> dict[str, Any]:
    f = _fields(raw)
    out: dict[str, Any] = {}
    labels = _map(f, 1)
    if labels is not None:
        out["matchLabels"] = labels
    expressions = []
    for entry in f.get(2) or []:
        g = _fields(entry)
        expr: dict[str, Any] = {"key": _text(g, 1) or "", "operator": _text(g, 2) or ""}
        if 3 in g:
            expr["values"] = _strings(g, 3)
        expressions.append(expr)
    if expressions:
        out["matchExpressions"] = expressions
    return out


def _role(f: Fields, out: dict[str, Any]) -> None:
    out["rules"] = [_policy_rule(r) for r in f.get(2) or []]
    if 3 in f:
        selectors = _fields(f[3][-1]).get(1) or []
        out["aggregationRule"] = {"clusterRoleSelectors": [_label_selector(s) for s in selectors]}


def _binding(f: Fields, out: dict[str, Any]) -> None:
    subject = ("kind", "apiGroup", "name", "namespace")
    if 2 in f:
        out["subjects"] = [_texts(raw, subject) for raw in f[2]]
    if 3 in f:
        out["roleRef"] = _texts(f[3][-1], ("apiGroup", "kind", "name"))


_RESOURCE_ATTRIBUTES = ("namespace", "verb", "group", "version", "resource", "subresource", "name")


def _access_review(f: Fields, out: dict[str, Any]) -> None:
    g = _fields((f.get(2) or [b""])[-1])
    spec: dict[str, Any] = {}
    if 1 in g:
        spec["resourceAttributes"] = _texts(g[1][-1], _RESOURCE_ATTRIBUTES)
    if 2 in g:
        spec["nonResourceAttributes"] = _texts(g[2][-1], ("path", "verb"))
    if _text(g, 3) is not None:
        spec["user"] = _text(g, 3)
    if 4 in g:
        spec["groups"] = _strings(g, 4)
    if _text(g, 6):
        spec["uid"] = _text(g, 6)
    extra = {}
    for raw in g.get(5) or []:
        entry = _fields(raw)
        extra[_text(entry, 1) or ""] = _strings(_fields((entry.get(2) or [b""])[-1]), 1)
    if extra:
        spec["extra"] = extra
    out["spec"] = spec


def _rules_review(f: Fields, out: dict[str, Any]) -> None:
    out["spec"] = _texts((f.get(2) or [b""])[-1], ("namespace",))


def _self_review(f: Fields, out: dict[str, Any]) -> None:
    return None


_RBAC = "rbac.authorization.k8s.io/v1"
_AUTHZ = "authorization.k8s.io/v1"
_KINDS: dict[tuple[str, str], Callable[[Fields, dict[str, Any]], None]] = {
    ("v1", "Namespace"): _namespace,
    ("v1", "Secret"): _secret,
    ("v1", "ConfigMap"): _configmap,
    ("v1", "ServiceAccount"): _serviceaccount,
    ("authentication.k8s.io/v1", "TokenRequest"): _token_request,
    ("authentication.k8s.io/v1", "SelfSubjectReview"): _self_review,
    (_RBAC, "Role"): _role,
    (_RBAC, "ClusterRole"): _role,
    (_RBAC, "RoleBinding"): _binding,
    (_RBAC, "ClusterRoleBinding"): _binding,
    (_AUTHZ, "SelfSubjectAccessReview"): _access_review,
    (_AUTHZ, "SubjectAccessReview"): _access_review,
    (_AUTHZ, "LocalSubjectAccessReview"): _access_review,
    (_AUTHZ, "SelfSubjectRulesReview"): _rules_review,
}


def decode(body: bytes) -> dict[str, Any]:
    """Decode a protobuf request body into the JSON form of the object.

    Raises:
        ProtobufError: not the envelope, or a kind this module does not decode.
    """
    if not body.startswith(MAGIC):
        raise ProtobufError("missing k8s protobuf envelope")
    envelope = _fields(body[len(MAGIC) :])
    type_meta = _fields((envelope.get(1) or [b""])[-1])
    api_version, kind = _text(type_meta, 1) or "", _text(type_meta, 2) or ""
    decoder = _KINDS.get((api_version, kind))
    if decoder is None:
        raise ProtobufError(f"no protobuf decoding for {api_version}/{kind}")
    fields = _fields((envelope.get(2) or [b""])[-1])
    out: dict[str, Any] = {"apiVersion": api_version, "kind": kind}
    out["metadata"] = _metadata((fields.get(1) or [b""])[-1])
    decoder(fields, out)
    return out
