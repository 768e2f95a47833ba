"""API semantics of one simulated cluster, callable from Python and served over HTTP.

Owns what the real kube-apiserver does between decoding a request and writing etcd: kind lookup
(built-ins and CRD-installed kinds), uid / resourceVersion / creationTimestamp / generation, create
/ get / list / update / patch / server-side apply / delete, the status split, finalizers and
deletionTimestamp, Secret `stringData`, CRD pruning, defaulting and validation, the validation of
the RBAC kinds and the escalation check a request brings (`WriteOptions.grants`), field ownership,
the validation of list and delete options, list chunking (continue tokens in the real server's
encoding, every page from the first page's snapshot), and lists at a resourceVersion, rebuilt from
the store's history (410 once the history no longer reaches it). Garbage collection, namespace
cleanup and CRD cleanup run in `devstack.kube.controllers`. It must never write the store outside
the store lock, and never return a stored object for the caller to mutate.
"""

from __future__ import annotations

import base64
import builtins
import copy
import json
import posixpath
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from devstack.kube import cel_rules, errors, managed_fields, patches, rbac, schema
from devstack.kube.errors import ApiError, FieldError
from devstack.kube.kinds import Kind, builtin_kinds, config_key_errors, kind_from_crd, validate_name
from devstack.kube.selectors import (
    fields_match,
    labels_match,
    parse_field_selector,
    parse_label_selector,
)
from devstack.kube.store import Obj, Store, sort_key
from devstack.realkube import AuditEntry

APPLY = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
CRD_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"
_IMMUTABLE_META = (
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
)


def now_text() -> str:
    """The current time as Kubernetes serializes timestamps."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class WriteOptions:
    """Per-request options of a write."""

    user: str = "devstack-admin"
    field_manager: str = ""
    user_agent: str = ""
    dry_run: bool = False
    force: bool = False
    field_validation: str = "Warn"
    warnings: list[str] = field(default_factory=list)
    grants: Callable[[Kind, Obj, Obj | None], None] | None = None
    """Refuses an RBAC object that grants more than its writer holds; None for the devstack."""

    def manager(self) -> str:
        """The field manager: explicit, else the user agent's product name (as the real server)."""
        if self.field_manager:
            return self.field_manager
        return self.user_agent.split("/")[0] if self.user_agent else "unknown"


@dataclass(frozen=True)
class ListOptions:
    """What a list asks for besides its kind and namespace."""

    label_selector: str | None = None
    field_selector: str | None = None
    limit: int = 0
    continue_token: str | None = None
    resource_version: str = ""
    resource_version_match: str = ""

    def errors(self) -> builtins.list[FieldError]:
        """What the real server's ListOptions validation refuses."""
        match, problems = self.resource_version_match, []
        if not match:
            return []
        path = "resourceVersionMatch"
        if not self.resource_version:
            problems.append(
                errors.forbidden(
                    path, "resourceVersionMatch is forbidden unless resourceVersion is provided"
                )
            )
        if self.continue_token:
            problems.append(
                errors.forbidden(
                    path, "resourceVersionMatch is forbidden when continue is provided"
                )
            )
        if match not in ("Exact", "NotOlderThan"):
            problems.append(errors.not_supported(path, match, ["Exact", "NotOlderThan", ""]))
        if match == "Exact" and self.resource_version == "0":
            problems.append(
                errors.forbidden(
                    path, 'resourceVersionMatch "exact" is forbidden for resourceVersion "0"'
                )
            )
        return problems


def parse_resource_version(text: str) -> int:
    """A resourceVersion as the real server parses it ("" and "0" are 0).

    Raises:
        ValueError: not an unsigned integer, worded as the real server's field error.
    """
    if text in ("", "0"):
        return 0
    problem = _parse_uint_problem(text)
    if problem is None:
        return int(text)
    raise ValueError(f"resourceVersion: Invalid value: {json.dumps(text)}: {problem}")


def _parse_uint_problem(text: str) -> str | None:
    """What Go's strconv.ParseUint says of ``text``, or None when it is an unsigned integer."""
    if not text.isascii() or not text.isdigit():
        reason = "invalid syntax"
    elif int(text) >= 2**64:
        reason = "value out of range"
    else:
        return None
    return f"strconv.ParseUint: parsing {json.dumps(text)}: {reason}"


def _parse_body_version(body: Obj) -> None:
    """Refuse an applied body whose resourceVersion is no unsigned integer, as the real server
    does: with a 500 that carries no reason, whether or not the object exists (an absent object
    is otherwise created whatever version the body names)."""
    text = str(_meta(body).get("resourceVersion") or "")
    problem = _parse_uint_problem(text) if text else None
    if problem is not None:
        raise ApiError(500, "", problem)


_CONTINUE_VERSION = "meta.k8s.io/v1"
_BASE64URL = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def encode_continue(rv: int, start: str) -> str:
    """A continue token as the real server encodes one: unpadded base64url of
    `{"v": "meta.k8s.io/v1", "rv": <resourceVersion>, "start": <key after the last item>}`."""
    raw = json.dumps({"v": _CONTINUE_VERSION, "rv": rv, "start": start}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


_CONTINUE_INVALID = "invalid continue token: continue key is not valid"


def _continue_payload(token: str) -> dict[str, Any]:
    """The decoded JSON of a continue token, refused as the real server refuses it."""
    bad = next((i for i, c in enumerate(token) if c not in _BASE64URL), None)
    if bad is None and len(token) % 4 == 1:
        bad = len(token) - 1
    if bad is not None:
        raise errors.bad_request(f"{_CONTINUE_INVALID}: illegal base64 data at input byte {bad}")
    data = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    try:
        decoded = json.loads(data)
    except ValueError:
        raise errors.bad_request(f"{_CONTINUE_INVALID}: {_go_json_error(data)}") from None
    if not isinstance(decoded, dict):
        raise errors.bad_request(
            f"{_CONTINUE_INVALID}: json: cannot unmarshal {_go_json_type(decoded)} into Go value "
            "of type storage.continueToken"
        )
    fields = (("v", str, "string"), ("rv", int, "int64"), ("start", str, "string"))
    for key, wanted, go_type in fields:
        value = decoded.get(key)
        if value is not None and (not isinstance(value, wanted) or isinstance(value, bool)):
            raise errors.bad_request(
                f"{_CONTINUE_INVALID}: json: cannot unmarshal {_go_json_type(value)} into Go "
                f"struct field continueToken.{key} of type {go_type}"
            )
    return decoded


def decode_continue(token: str) -> tuple[int, str]:
    """The resourceVersion and start key of a continue token.

    Raises:
        ApiError: 400 worded as the real server's for a token it cannot read.
    """
    decoded = _continue_payload(token)
    version = decoded.get("v") or ""
    if version != _CONTINUE_VERSION:
        raise errors.bad_request(
            "invalid continue token: continue key is not valid: server does not recognize this "
            f"encoded version {version}"
        )
    rv, start = int(decoded.get("rv") or 0), str(decoded.get("start") or "")
    if rv == 0:
        raise errors.bad_request(
            f"{_CONTINUE_INVALID}: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"
        )
    if not start:
        raise errors.bad_request(
            f"{_CONTINUE_INVALID}: encoded start key empty (version meta.k8s.io/v1)"
        )
    key = start if start.startswith("/") else f"/{start}"
    cleaned = posixpath.normpath(key)
    if cleaned.startswith("//"):
        cleaned = "/" + cleaned.lstrip("/")
    if cleaned != key:
        raise errors.bad_request(f"{_CONTINUE_INVALID}: {start}")
    return rv, key


def _go_json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _go_json_error(data: bytes) -> str:
    """The error Go's JSON decoder reports for bytes that are not JSON (its common cases)."""
    text = data.lstrip(b" \t\r\n")
    if not text:
        return "unexpected end of JSON input"
    first = text[:1]
    if first not in b'{["-0123456789tfn':
        return f"invalid character {_go_quote_byte(first[0])} looking for beginning of value"
    return "unexpected end of JSON input"


def _go_quote_byte(byte: int) -> str:
    if byte == ord("'"):
        return "'\\''"
    if byte == ord('"'):
        return "'\"'"
    char = chr(byte)
    if char.isprintable() and byte != 0xAD:
        return f"'{char}'"
    escapes = {7: "\\a", 8: "\\b", 9: "\\t", 10: "\\n", 11: "\\v", 12: "\\f", 13: "\\r"}
    if byte in escapes:
        return f"'{escapes[byte]}'"
    return f"'\\x{byte:02x}'" if byte < 0x80 else f"'\\u{byte:04x}'"


def _relative_key(obj: Obj, ns: str | None) -> str:
    """An object's key relative to the list's key prefix, as a continue token's start."""
    meta = obj["metadata"]
    name = str(meta["name"])
    if ns is not None:
        return f"/{name}"
    return "/" + sort_key(str(meta.get("namespace", "")), name)


class Registry:
    """The kinds one cluster serves, with lookups by group/version/plural and by short name."""

    def __init__(self) -> None:
        self._kinds: dict[str, Kind] = {k.key: k for k in builtin_kinds()}

    def kinds(self) -> list[Kind]:
        """Every served kind."""
        return list(self._kinds.values())

    def lookup(self, group: str, version: str, plural: str) -> Kind | None:
        """Find a kind served at group/version/plural."""
        kind = self._kinds.get(f"{group}/{plural}")
        return kind if kind is not None and version in kind.versions else None

    def find(self, name: str) -> Kind:
        """Find a kind by `plural`, `plural.group`, singular, Kind or short name."""
        for kind in self._kinds.values():
            names = {
                kind.plural,
                kind.singular,
                kind.kind.lower(),
                kind.resource,
                *kind.short_names,
            }
            if name.lower() in names:
                return kind
        raise errors.page_not_found()

    def install(self, kind: Kind) -> None:
        """Serve a CRD's kind (or its new definition)."""
        self._kinds[kind.key] = kind

    def uninstall(self, key: str) -> None:
        """Stop serving a CRD's kind."""
        self._kinds.pop(key, None)


def _meta(obj: Obj) -> dict[str, Any]:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
        obj["metadata"] = meta
    return meta


def _strip_volatile(obj: Obj) -> Obj:
    # A write that changes nothing but timestamps of ownership is a no-op, as on the real server.
    meta = {
        k: v
        for k, v in obj.get("metadata", {}).items()
        if k not in ("managedFields", "resourceVersion")
    }
    meta["managedFields"] = [
        {k: v for k, v in e.items() if k != "time"}
        for e in obj.get("metadata", {}).get("managedFields") or []
    ]
    return {**obj, "metadata": meta}


_ENCODED_CACHE = 50_000
"""Encoded objects kept for reads and watches; the oldest used goes first."""


def _body_dict(body: Any) -> Obj:
    if not isinstance(body, dict):
        raise errors.bad_request("the body of the request was not a JSON object")
    return copy.deepcopy(body)


class Api:
    """Kubernetes API semantics over a `Store` and a `Registry`."""

    def __init__(self, store: Store, registry: Registry) -> None:
        self.store = store
        self.registry = registry
        self.audit_enabled = False
        self.audit_log: list[AuditEntry] = []
        self.read_log: list[AuditEntry] = []
        self.on_removed: list[Callable[[Kind, Obj], None]] = []
        self.on_created: list[Callable[[Kind, Obj], None]] = []
        self.on_deleting: list[Callable[[Kind, Obj], None]] = []
        self._audit_lock = threading.Lock()
        self._encoded: OrderedDict[tuple[str, str, str, str, str], bytes] = OrderedDict()
        self._encoded_lock = threading.Lock()
        self._ip = 0
        for ns in SYSTEM_NAMESPACES:
            self.create(
                self.registry.find("namespaces"),
                "v1",
                "",
                {"metadata": {"name": ns}},
                WriteOptions(field_manager="kube-apiserver"),
            )

    # ------------------------------------------------------------ audit

    def audit(
        self, verb: str, kind: Kind, ns: str, name: str, opts: WriteOptions, code: int
    ) -> None:
        """Record a write when the audit log is on."""
        if not self.audit_enabled:
            return
        entry = AuditEntry(
            datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            opts.user,
            verb,
            kind.resource,
            ns,
            name,
            opts.manager(),
            code,
            opts.user_agent,
        )
        with self._audit_lock:
            self.audit_log.append(entry)

    def audit_read(
        self, verb: str, kind: Kind, ns: str, name: str, user: str, user_agent: str, code: int
    ) -> None:
        """Record a get or a list when the audit log is on (apart from the writes)."""
        if not self.audit_enabled:
            return
        entry = AuditEntry(
            datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            user,
            verb,
            kind.resource,
            ns,
            name,
            "",
            code,
            user_agent,
        )
        with self._audit_lock:
            self.read_log.append(entry)

    # ------------------------------------------------------------ reads

    def present(self, obj: Obj, kind: Kind, version: str) -> Obj:
        """A copy of a stored object as served at a version."""
        out = copy.deepcopy(obj)
        out["apiVersion"] = kind.api_version(version)
        out["kind"] = kind.kind
        return out

    def get(self, kind: Kind, version: str, ns: str, name: str) -> Obj:
        """Read one object."""
        with self.store.lock:
            obj = self.store.get(kind.key, ns, name)
            if obj is None:
                raise errors.not_found(kind.plural, kind.group, name)
            return self.present(obj, kind, version)

    def get_encoded(self, kind: Kind, version: str, ns: str, name: str) -> tuple[bytes, str]:
        """The JSON of `get()` from the object's cached encoding, and its resourceVersion."""
        with self.store.lock:
            obj = self.store.get(kind.key, ns, name)
            if obj is None:
                raise errors.not_found(kind.plural, kind.group, name)
        return self.encoded(obj, kind, version), str(obj["metadata"]["resourceVersion"])

    def list(
        self,
        kind: Kind,
        version: str,
        ns: str | None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int = 0,
        continue_token: str | None = None,
        *,
        resource_version: str = "",
        resource_version_match: str = "",
    ) -> Obj:
        """List objects with selectors, optional chunking, and at a resourceVersion."""
        page, meta = self._select(
            kind,
            ns,
            ListOptions(
                label_selector,
                field_selector,
                limit,
                continue_token,
                resource_version,
                resource_version_match,
            ),
        )
        return {
            "kind": f"{kind.kind}List",
            "apiVersion": kind.api_version(version),
            "metadata": meta,
            "items": [self.present(o, kind, version) for o in page],
        }

    def list_encoded(
        self,
        kind: Kind,
        version: str,
        ns: str | None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int = 0,
        continue_token: str | None = None,
        *,
        resource_version: str = "",
        resource_version_match: str = "",
    ) -> bytes:
        """The JSON of `list()` as the wire carries it, built from each object's cached encoding
        instead of copies; the items of a built-in kind's list carry no apiVersion and kind."""
        page, meta = self._select(
            kind,
            ns,
            ListOptions(
                label_selector,
                field_selector,
                limit,
                continue_token,
                resource_version,
                resource_version_match,
            ),
        )
        head = {
            "kind": f"{kind.kind}List",
            "apiVersion": kind.api_version(version),
            "metadata": meta,
        }
        items = b",".join(self.encoded(o, kind, version, bare=kind.builtin) for o in page)
        return json.dumps(head).encode()[:-1] + b', "items": [' + items + b"]}"

    def encoded(self, obj: Obj, kind: Kind, version: str, *, bare: bool = False) -> bytes:
        """The JSON of `present(obj)`, cached per object, resourceVersion and served version;
        `bare` leaves apiVersion and kind out, as the items of a built-in kind's list are sent.

        A stored object is never changed in place (every write stores a new one with a new
        resourceVersion), so its encoding can be kept and shared by every reader and watcher.
        """
        meta = obj["metadata"]
        rv = str(meta.get("resourceVersion") or "")
        served = f"{version}/bare" if bare else version
        key = (kind.key, str(meta.get("namespace", "")), str(meta["name"]), rv, served)
        with self._encoded_lock:
            found = self._encoded.get(key)
            if found is not None:
                self._encoded.move_to_end(key)
                return found
        if bare:
            shown = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
        else:
            shown = {**obj, "apiVersion": kind.api_version(version), "kind": kind.kind}
        data = json.dumps(shown)
        encoded = data.encode()
        if rv:
            with self._encoded_lock:
                self._encoded[key] = encoded
                while len(self._encoded) > _ENCODED_CACHE:
                    self._encoded.popitem(last=False)
        return encoded

    def _select(
        self, kind: Kind, ns: str | None, options: ListOptions
    ) -> tuple[builtins.list[Obj], dict[str, Any]]:
        # As the real server: the selectors are parsed as the query is decoded, before the
        # options are validated.
        labels = parse_label_selector(options.label_selector)
        fields = parse_field_selector(options.field_selector, kind.field_selectors)
        problems = options.errors()
        if problems:
            raise errors.invalid_object("ListOptions", "meta.k8s.io", "", problems)
        limit = options.limit
        with self.store.lock:
            at, start = self._list_point(kind, ns, options)
            if at is None:
                source = self.store.items(kind.key, ns)
                if not options.resource_version:
                    self.store.catch_up(kind.key)
                    rv = self.store.rv
                else:
                    rv = self.store.kind_rv(kind.key) or self.store.rv
            else:
                found = self.store.items_at(kind.key, ns, at)
                if found is None:
                    raise self._expired(options, ns, start)
                source, rv = found, at
            items = [
                o
                for o in source
                if labels_match(labels, o)
                and fields_match(fields, o)
                and (start is None or _relative_key(o, ns) > start)
            ]
        page = items[:limit] if limit > 0 else items
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if limit > 0 and len(items) > limit:
            meta["continue"] = encode_continue(rv, _relative_key(page[-1], ns) + "\x00")
            if not labels and not fields:
                meta["remainingItemCount"] = len(items) - limit
        elif not kind.builtin:
            # An unstructured list always carries its (empty) continue token.
            meta["continue"] = ""
        return page, meta

    def _list_point(
        self, kind: Kind, ns: str | None, options: ListOptions
    ) -> tuple[int | None, str | None]:
        """The resourceVersion a list is served at (None: the latest) and where it starts."""
        if options.continue_token:
            rv, start = decode_continue(options.continue_token)
            if options.resource_version not in ("", "0"):
                raise errors.bad_request(
                    "specifying resource version is not allowed when using continue"
                )
            return (rv if rv > 0 else None), start
        if not options.resource_version:
            return None, None
        try:
            rv = parse_resource_version(options.resource_version)
        except ValueError as exc:
            raise errors.bad_request(f"invalid resource version: {exc}") from None
        exact = options.resource_version_match == "Exact" or (
            not options.resource_version_match and options.limit > 0 and rv > 0
        )
        return (rv if exact else None), None

    def _expired(self, options: ListOptions, ns: str | None, start: str | None) -> ApiError:
        if not options.continue_token or start is None:
            return errors.gone("The resourceVersion for the provided list is too old.")
        error = errors.gone(
            "The provided continue parameter is too old to display a consistent list result. "
            "You can start a new list without the continue parameter, or use the continue token "
            "in this response to retrieve the remainder of the results. Continuing with the "
            "provided token results in an inconsistent list - objects that were created, "
            "modified, or deleted between the time the first chunk was returned and now may show "
            "up in the list."
        )
        error.list_meta = {"continue": encode_continue(-1, start)}
        return error

    # ------------------------------------------------------------ create

    def create(self, kind: Kind, version: str, ns: str, body: Any, opts: WriteOptions) -> Obj:
        """Create an object (201 over HTTP)."""
        obj = _body_dict(body)
        meta = _meta(obj)
        with self.store.lock:
            self._check_namespace(kind, ns, meta)
            if not meta.get("name") and meta.get("generateName"):
                meta["name"] = f"{meta['generateName']}{uuid.uuid4().hex[:5]}"
            name = str(meta.get("name") or "")
            if not name:
                raise errors.invalid_object(
                    kind.kind,
                    kind.group,
                    "",
                    [errors.required("metadata.name", "name or generateName is required")],
                )
            if self.store.get(kind.key, ns, name) is not None:
                raise errors.already_exists(kind.plural, kind.group, name)
            new = self._new_object(kind, version, ns, obj)
            new = self._admit(kind, version, None, new, opts, "")
            scope = self._scope(kind, version, "")
            managed_fields.record_update(
                None,
                new,
                opts.manager(),
                scope,
                (kind.api_version(version), now_text()),
                copy.deepcopy(dict(kind.zero)),
            )
            return self._store_new(kind, version, new, opts)

    def _store_new(self, kind: Kind, version: str, new: Obj, opts: WriteOptions) -> Obj:
        finish = _FINISH_CREATE.get(kind.key)
        if finish is not None:
            finish(new)
        if opts.dry_run or not kind.stored:
            return self.present(new, kind, version)
        self.store.put(kind.key, new)
        for hook in self.on_created:
            hook(kind, new)
        self.audit(
            "create", kind, new["metadata"].get("namespace", ""), new["metadata"]["name"], opts, 201
        )
        return self.present(new, kind, version)

    def _check_namespace(self, kind: Kind, ns: str, meta: dict[str, Any]) -> None:
        body_ns = meta.get("namespace")
        if not kind.namespaced:
            meta.pop("namespace", None)
            return
        if body_ns and body_ns != ns:
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent "
                "on the request"
            )
        namespace = self.store.get("/namespaces", "", ns)
        if namespace is None:
            raise errors.not_found("namespaces", "", ns)
        if namespace["metadata"].get("deletionTimestamp"):
            raise errors.forbidden_error(
                kind.plural,
                kind.group,
                str(meta.get("name") or meta.get("generateName") or ""),
                f"unable to create new content in namespace {ns} because it is being terminated",
            )
        meta["namespace"] = ns

    def _new_object(self, kind: Kind, version: str, ns: str, obj: Obj) -> Obj:
        meta = obj["metadata"]
        for key in (
            "resourceVersion",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "managedFields",
            "selfLink",
        ):
            meta.pop(key, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_text()
        if kind.namespaced:
            meta["namespace"] = ns
        if _tracks_generation(kind):
            meta["generation"] = 1
        else:
            meta.pop("generation", None)
        if kind.has_status and not kind.builtin:
            obj.pop("status", None)
        obj["apiVersion"] = kind.api_version(version)
        obj["kind"] = kind.kind
        return obj

    # ------------------------------------------------------------ admission

    def _scope(self, kind: Kind, version: str, subresource: str) -> managed_fields.Scope:
        return managed_fields.Scope(
            kind.schema(version), subresource, kind.has_status, untyped_members=not kind.builtin
        )

    def _admit(
        self, kind: Kind, version: str, old: Obj | None, new: Obj, opts: WriteOptions, sub: str
    ) -> Obj:
        prepare = _PREPARE.get(kind.key)
        if prepare is not None:
            prepare(self, new, old)
        problems: builtins.list[FieldError] = []
        self._prune(kind, version, new, opts)
        if not kind.builtin:
            body_schema = kind.schema(version)
            schema.apply_defaults(new, body_schema)
            problems += schema.validate(_without_meta(new), body_schema)
            problems += cel_rules.check(
                _cel_view(new), _cel_view(old) if old else None, body_schema
            )
        _omit_empty(kind, new)
        problems += _metadata_errors(kind, new, old)
        check = _VALIDATE.get(kind.key)
        if check is not None:
            problems += check(new, old)
        if problems:
            raise errors.invalid_object(
                kind.kind, kind.group, str(new["metadata"].get("name", "")), problems
            )
        if opts.grants is not None:
            opts.grants(kind, new, old)
        return new

    def _prune(self, kind: Kind, version: str, new: Obj, opts: WriteOptions) -> None:
        dropped = schema.prune(new, kind.schema(version), root=True)
        if not dropped or opts.field_validation == "Ignore":
            return
        if opts.field_validation == "Strict":
            listed = ", ".join(f'unknown field "{p}"' for p in dropped)
            raise errors.bad_request(
                f'{kind.kind} in version "{version}" cannot be handled as a {kind.kind}: '
                f"strict decoding error: {listed}"
            )
        opts.warnings += [f'unknown field "{p}"' for p in dropped]

    # ------------------------------------------------------------ update and patch

    def update(
        self,
        kind: Kind,
        version: str,
        ns: str,
        name: str,
        body: Any,
        opts: WriteOptions,
        sub: str = "",
    ) -> Obj:
        """Replace an object (PUT)."""
        new = _body_dict(body)
        meta = _meta(new)
        if meta.get("name") and meta["name"] != name:
            raise errors.bad_request(
                f"the name of the object ({meta['name']}) does not match the name on "
                f"the URL ({name})"
            )
        with self.store.lock:
            old = self._existing(kind, ns, name)
            self._check_rv(kind, old, meta, required=not kind.allow_unconditional_update)
            return self._commit(kind, version, old, new, opts, sub, "update")

    def patch(
        self,
        kind: Kind,
        version: str,
        ns: str,
        name: str,
        patch_type: str,
        body: Any,
        opts: WriteOptions,
        sub: str = "",
    ) -> tuple[Obj, bool]:
        """Patch an object; returns the object and whether an apply created it."""
        if patch_type == APPLY:
            return self._apply(kind, version, ns, name, body, opts, sub)
        with self.store.lock:
            old = self._existing(kind, ns, name)
            current = self.present(old, kind, version)
            if patch_type == MERGE:
                new = patches.merge_patch(current, body)
            elif patch_type == JSON_PATCH:
                new = patches.json_patch(current, body)
            elif patch_type == STRATEGIC and kind.smp is not None:
                new = patches.strategic_merge(current, body, kind.smp)
            else:
                raise errors.unsupported_media_type(patch_type, _accepted_patches(kind))
            if not isinstance(new, dict):
                raise errors.bad_request("the patch did not produce an object")
            self._check_rv(kind, old, _meta(new), required=False)
            return self._commit(kind, version, old, new, opts, sub, "patch"), False

    def _apply(
        self, kind: Kind, version: str, ns: str, name: str, body: Any, opts: WriteOptions, sub: str
    ) -> tuple[Obj, bool]:
        applied = _body_dict(body)
        if not opts.field_manager:
            raise errors.invalid_object(
                "PatchOptions",
                "meta.k8s.io",
                "",
                [errors.required("fieldManager", "is required for apply patch")],
            )
        if not applied.get("apiVersion") or not applied.get("kind"):
            raise errors.bad_request("invalid object type: /, Kind=")
        if _meta(applied).get("name") not in (None, name):
            raise errors.bad_request(
                f"the name of the object ({applied['metadata']['name']}) does not match "
                f"the name on the URL ({name})"
            )
        scope = self._scope(kind, version, sub)
        stamp = (kind.api_version(version), now_text())
        _parse_body_version(applied)
        with self.store.lock:
            old = self.store.get(kind.key, ns, name)
            if old is None:
                if sub:
                    raise errors.not_found(kind.plural, kind.group, name)
                return self._apply_create(
                    kind, version, ns, name, applied, opts, scope, stamp
                ), True
            self._check_rv(kind, old, applied["metadata"], required=False)
            merged = managed_fields.apply(
                self.present(old, kind, version),
                applied,
                opts.field_manager,
                opts.force,
                scope,
                stamp,
            )
            return self._commit(kind, version, old, merged, opts, sub, "apply"), False

    def _apply_create(
        self,
        kind: Kind,
        version: str,
        ns: str,
        name: str,
        applied: Obj,
        opts: WriteOptions,
        scope: managed_fields.Scope,
        stamp: tuple[str, str],
    ) -> Obj:
        merged = managed_fields.apply(None, applied, opts.field_manager, opts.force, scope, stamp)
        meta = _meta(merged)
        owned = meta.get("managedFields", [])
        meta["name"] = name
        self._check_namespace(kind, ns, meta)
        new = self._new_object(
            kind, kind.storage_version if version not in kind.versions else version, ns, merged
        )
        new["metadata"]["managedFields"] = owned
        new = self._admit(kind, version, None, new, opts, "")
        return self._store_new(kind, version, new, opts)

    def _existing(self, kind: Kind, ns: str, name: str) -> Obj:
        old = self.store.get(kind.key, ns, name)
        if old is None:
            raise errors.not_found(kind.plural, kind.group, name)
        return old

    def _check_rv(self, kind: Kind, old: Obj, meta: dict[str, Any], *, required: bool) -> None:
        rv = meta.get("resourceVersion")
        if rv and str(rv) != old["metadata"]["resourceVersion"]:
            raise errors.conflict(kind.plural, kind.group, old["metadata"]["name"], errors.STALE)
        if required and not rv:
            raise errors.invalid_object(
                kind.plural,
                kind.group,
                old["metadata"]["name"],
                [errors.invalid("metadata.resourceVersion", 0, "must be specified for an update")],
            )

    def _commit(
        self, kind: Kind, version: str, old: Obj, new: Obj, opts: WriteOptions, sub: str, verb: str
    ) -> Obj:
        if sub and sub not in kind.subresources:
            raise errors.page_not_found()
        new = self._split_status(kind, old, new, sub)
        meta = _meta(new)
        for key in _IMMUTABLE_META:
            if key in old["metadata"]:
                meta[key] = old["metadata"][key]
            else:
                meta.pop(key, None)
        meta["name"] = old["metadata"]["name"]
        if kind.namespaced:
            meta["namespace"] = old["metadata"]["namespace"]
        new["apiVersion"], new["kind"] = kind.api_version(version), kind.kind
        if verb != "apply":
            meta["managedFields"] = copy.deepcopy(old["metadata"].get("managedFields", []))
        new = self._admit(kind, version, old, new, opts, sub)
        if _tracks_generation(kind) and _spec_changed(kind, old, new):
            meta["generation"] = int(old["metadata"].get("generation", 1)) + 1
        if verb != "apply":
            stamp = (kind.api_version(version), now_text())
            managed_fields.record_update(
                old, new, opts.manager(), self._scope(kind, version, sub), stamp
            )
        if _strip_volatile(new) == _strip_volatile({**old, "apiVersion": new["apiVersion"]}):
            return self.present(old, kind, version)
        return self._store_update(kind, version, new, opts, verb)

    def _store_update(
        self, kind: Kind, version: str, new: Obj, opts: WriteOptions, verb: str
    ) -> Obj:
        meta = new["metadata"]
        self.audit(verb, kind, meta.get("namespace", ""), meta["name"], opts, 200)
        if opts.dry_run:
            return self.present(new, kind, version)
        if (
            meta.get("deletionTimestamp")
            and not meta.get("finalizers")
            and kind.kind != "Namespace"
        ):
            # The write that drops the last finalizer deletes the object as it is stored: the
            # DELETED event shows it so (finalizers included); the writer gets its own version.
            stored = self.store.get(kind.key, meta.get("namespace", ""), meta["name"]) or new
            final = self._remove(kind, stored)
            new["metadata"]["resourceVersion"] = final["metadata"]["resourceVersion"]
            return self.present(new, kind, version)
        self.store.put(kind.key, new)
        for hook in self.on_created:
            hook(kind, new)
        return self.present(new, kind, version)

    def _split_status(self, kind: Kind, old: Obj, new: Obj, sub: str) -> Obj:
        if sub == "status":
            out = copy.deepcopy(old)
            if "status" in new:
                out["status"] = new["status"]
            else:
                out.pop("status", None)
            out["metadata"]["managedFields"] = new.get("metadata", {}).get("managedFields", [])
            return out
        if kind.has_status:
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
            else:
                new.pop("status", None)
        return new

    # ------------------------------------------------------------ delete

    def delete(
        self,
        kind: Kind,
        version: str,
        ns: str,
        name: str,
        opts: WriteOptions,
        options: dict[str, Any] | None = None,
    ) -> Obj:
        """Delete an object: held by finalizers, or gone with a `Status` of success."""
        options = options or {}
        _check_delete_options(options)
        with self.store.lock:
            old = self._existing(kind, ns, name)
            _check_preconditions(kind, old, options.get("preconditions") or {})
            self.audit("delete", kind, ns, name, opts, 200)
            finalizers = list(old["metadata"].get("finalizers") or [])
            policy = _propagation(options)
            extra = {"Foreground": "foregroundDeletion", "Orphan": "orphan"}.get(policy)
            if extra and extra not in finalizers and not old["metadata"].get("deletionTimestamp"):
                finalizers.append(extra)
            if kind.kind == "CustomResourceDefinition" and CRD_FINALIZER not in finalizers:
                # The CRD's own delete adds the finalizer its cleanup removes once the
                # instances are gone (a CRD carries none before).
                finalizers.append(CRD_FINALIZER)
            if finalizers or kind.kind == "Namespace":
                return self._mark_deleting(kind, version, old, finalizers, opts)
            if opts.dry_run:
                return _success(kind, old)
            self._remove(kind, old)
            return _success(kind, old)

    def _mark_deleting(
        self, kind: Kind, version: str, old: Obj, finalizers: builtins.list[str], opts: WriteOptions
    ) -> Obj:
        if old["metadata"].get("deletionTimestamp") and finalizers == list(
            old["metadata"].get("finalizers") or []
        ):
            return self.present(old, kind, version)
        new = copy.deepcopy(old)
        meta = new["metadata"]
        if not meta.get("deletionTimestamp"):
            meta["deletionTimestamp"] = now_text()
            meta["deletionGracePeriodSeconds"] = 0
            if int(meta.get("generation", 0)) > 0:
                meta["generation"] = int(meta["generation"]) + 1
        if finalizers:
            meta["finalizers"] = finalizers
        if kind.kind == "Namespace":
            new.setdefault("status", {})["phase"] = "Terminating"
        if opts.dry_run:
            return self.present(new, kind, version)
        self.store.put(kind.key, new)
        for hook in self.on_deleting:
            hook(kind, new)
        return self.present(new, kind, version)

    def _remove(self, kind: Kind, obj: Obj) -> Obj:
        final = self.store.remove(kind.key, obj)
        for hook in self.on_removed:
            hook(kind, final)
        return final

    def delete_collection(
        self,
        kind: Kind,
        version: str,
        ns: str | None,
        label_selector: str | None,
        field_selector: str | None,
        opts: WriteOptions,
        options: dict[str, Any] | None = None,
    ) -> Obj:
        """Delete every matching object; answer the list of what was deleted (each as it was
        last stored, or as marked for deletion when finalizers hold it), as the real server."""
        listed = self.list(kind, version, ns, label_selector, field_selector)
        deleted: builtins.list[Obj] = []
        for item in listed["items"]:
            meta = item["metadata"]
            try:
                result = self.delete(
                    kind, version, meta.get("namespace", ""), meta["name"], opts, options
                )
            except ApiError as exc:
                if exc.code != 404:
                    raise
                continue
            shown = item if result.get("kind") == "Status" else result
            if kind.builtin:
                shown = {k: v for k, v in shown.items() if k not in ("apiVersion", "kind")}
            deleted.append(shown)
        return {**listed, "items": deleted}

    # ------------------------------------------------------------ helpers for controllers

    def remove_finalizer(self, kind: Kind, ns: str, name: str, finalizer: str) -> None:
        """Drop one finalizer as a controller would (the object goes when none is left)."""
        with self.store.lock:
            obj = self.store.get(kind.key, ns, name)
            if obj is None or finalizer not in (obj["metadata"].get("finalizers") or []):
                return
            new = copy.deepcopy(obj)
            new["metadata"]["finalizers"] = [
                f for f in new["metadata"]["finalizers"] if f != finalizer
            ]
            if not new["metadata"]["finalizers"]:
                del new["metadata"]["finalizers"]
            self._store_update(
                kind,
                kind.storage_version,
                new,
                WriteOptions(
                    user="system:serviceaccount:kube-system:generic-garbage-collector",
                    field_manager="kube-controller-manager",
                ),
                "update",
            )

    def next_cluster_ip(self) -> str:
        """Allocate a ClusterIP from 10.96.0.0/12."""
        self._ip += 1
        return f"10.96.{self._ip // 250}.{self._ip % 250 + 1}"


def _tracks_generation(kind: Kind) -> bool:
    return not kind.builtin or kind.kind == "CustomResourceDefinition"


def _spec_changed(kind: Kind, old: Obj, new: Obj) -> bool:
    skip = {"metadata", "status"} if kind.has_status else {"metadata"}
    return {k: v for k, v in old.items() if k not in skip | {"apiVersion"}} != {
        k: v for k, v in new.items() if k not in skip | {"apiVersion"}
    }


def _without_meta(obj: Obj) -> Obj:
    return {k: v for k, v in obj.items() if k != "metadata"}


def _cel_view(obj: Obj) -> Obj:
    """What a root-level CEL rule sees: the object, with only metadata.name and generateName."""
    meta = obj.get("metadata") or {}
    visible = {k: meta[k] for k in ("name", "generateName") if k in meta}
    return {**_without_meta(obj), "metadata": visible}


def _accepted_patches(kind: Kind) -> builtins.list[str]:
    accepted = [JSON_PATCH, MERGE, APPLY]
    if kind.smp is not None:
        accepted.append(STRATEGIC)
    return accepted


def _propagation(options: dict[str, Any]) -> str:
    policy = options.get("propagationPolicy")
    if policy:
        return str(policy)
    if options.get("orphanDependents") is True:
        return "Orphan"
    return "Background"


def _check_preconditions(kind: Kind, old: Obj, pre: dict[str, Any]) -> None:
    # Worded as the registry's delete checks them: the group and Kind, not the resource.
    meta = old["metadata"]
    if pre.get("uid") and pre["uid"] != meta["uid"]:
        raise errors.conflict(
            kind.kind,
            kind.group,
            meta["name"],
            f"the UID in the precondition ({pre['uid']}) does not match the UID in record "
            f"({meta['uid']}). The object might have been deleted and then recreated",
        )
    if pre.get("resourceVersion") and pre["resourceVersion"] != meta["resourceVersion"]:
        raise errors.conflict(
            kind.kind,
            kind.group,
            meta["name"],
            f"the ResourceVersion in the precondition ({pre['resourceVersion']}) does not match "
            f"the ResourceVersion in record ({meta['resourceVersion']}). The object might have "
            "been modified",
        )


def _check_delete_options(options: dict[str, Any]) -> None:
    policy = options.get("propagationPolicy")
    if policy is not None and policy not in ("Foreground", "Background", "Orphan"):
        raise errors.invalid_object(
            "DeleteOptions",
            "meta.k8s.io",
            "",
            [
                errors.not_supported(
                    "propagationPolicy", policy, ["Foreground", "Background", "Orphan", "nil"]
                )
            ],
        )


def _success(kind: Kind, old: Obj) -> Obj:
    details: dict[str, Any] = {"name": old["metadata"]["name"]}
    if kind.group:
        details["group"] = kind.group
    details["kind"] = kind.plural
    details["uid"] = old["metadata"]["uid"]
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    }


def _omit_empty(kind: Kind, obj: Obj) -> None:
    # Go's `omitempty` drops these when empty; clients compare against None.
    meta = obj["metadata"]
    for key in ("finalizers", "ownerReferences", "labels", "annotations"):
        if key in meta and not meta[key]:
            del meta[key]
    if kind.builtin:
        for key in ("data", "binaryData"):
            if key in obj and not obj[key]:
                del obj[key]


def _metadata_errors(kind: Kind, new: Obj, old: Obj | None) -> builtins.list[FieldError]:
    meta = new["metadata"]
    problems = validate_name(kind, str(meta.get("name", ""))) if old is None else []
    for key in ("labels", "annotations"):
        value = meta.get(key)
        if value is not None and not (
            isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
        ):
            problems.append(errors.invalid(f"metadata.{key}", value, "must be a map of strings"))
    if old is not None and old["metadata"].get("deletionTimestamp"):
        added = [
            f
            for f in meta.get("finalizers") or []
            if f not in (old["metadata"].get("finalizers") or [])
        ]
        if added:
            refusal = errors.forbidden(
                "metadata.finalizers",
                "no new finalizers can be added if the object is being deleted, "
                "found new finalizers "
                + "[]string{"
                + ", ".join(json.dumps(f) for f in added)
                + "}",
            )
            # A custom resource's metadata is validated twice on update (by the generic update
            # path and by the custom resource strategy): the real server lists this cause twice.
            problems += [refusal] if kind.builtin else [refusal, refusal]
    return problems


# ---------------------------------------------------------------- per-kind strategies


def _prepare_secret(api: Api, new: Obj, old: Obj | None) -> None:
    string_data = new.pop("stringData", None)
    if isinstance(string_data, dict):
        data = new.setdefault("data", {}) or {}
        for key, value in string_data.items():
            data[key] = base64.b64encode(str(value).encode()).decode()
        new["data"] = data
    new.setdefault("type", "Opaque")
    bad = [k for k, v in (new.get("data") or {}).items() if not _is_base64(v)]
    if bad:
        raise errors.bad_request(
            'Secret in version "v1" cannot be handled as a Secret: '
            "illegal base64 data at input byte 0"
        )


def _is_base64(value: Any) -> bool:
    try:
        base64.b64decode(str(value), validate=True)
    except ValueError:
        return False
    return isinstance(value, str)


def _validate_secret(new: Obj, old: Obj | None) -> builtins.list[FieldError]:
    problems = config_key_errors(new.get("data") or {}, "data")
    if old is not None and new.get("type") != old.get("type"):
        problems.append(errors.invalid("type", new.get("type"), "field is immutable"))
    if old is not None and old.get("immutable") and new.get("data") != old.get("data"):
        problems.append(errors.forbidden("data", "field is immutable when `immutable` is set"))
    return problems


def _validate_configmap(new: Obj, old: Obj | None) -> builtins.list[FieldError]:
    return config_key_errors(new.get("data") or {}, "data")


def _prepare_event(api: Api, new: Obj, old: Obj | None) -> None:
    # Fields of the Go type that are always serialised, empty or not.
    new.setdefault("eventTime", None)
    new.setdefault("reportingComponent", "")
    new.setdefault("reportingInstance", "")


def _validate_event(new: Obj, old: Obj | None) -> builtins.list[FieldError]:
    # The legacy rule core/v1 Events keep: the involved object is in the event's namespace (an
    # event in "default" may name an object of no namespace).
    ref = new.get("involvedObject")
    ns = str((ref if isinstance(ref, dict) else {}).get("namespace") or "")
    own = str(new["metadata"].get("namespace") or "")
    if (ns and ns != own) or (not ns and own not in ("", "default")):
        return [errors.invalid("involvedObject.namespace", ns, "does not match event.namespace")]
    return []


def _prepare_namespace(api: Api, new: Obj, old: Obj | None) -> None:
    # Defaulting (the writer owns the label); the finalizer and phase come at creation.
    labels = _meta(new).setdefault("labels", {})
    labels["kubernetes.io/metadata.name"] = new["metadata"]["name"]


def _finish_namespace(new: Obj) -> None:
    # Set by the namespace strategy after the writer's fields were recorded: nobody owns them.
    new["spec"] = {"finalizers": ["kubernetes"]}
    new["status"] = {"phase": "Active"}


def _prepare_service(api: Api, new: Obj, old: Obj | None) -> None:
    spec = new.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    if old is not None and old.get("spec", {}).get("clusterIP"):
        spec["clusterIP"] = old["spec"]["clusterIP"]
    elif spec.get("clusterIP") != "None":
        spec["clusterIP"] = api.next_cluster_ip()
    spec["clusterIPs"] = [spec["clusterIP"]]
    for port in spec.get("ports") or []:
        port.setdefault("protocol", "TCP")
        port.setdefault("targetPort", port.get("port"))
    new.setdefault("status", {"loadBalancer": {}})


def _prepare_crd(api: Api, new: Obj, old: Obj | None) -> None:
    spec = new.get("spec") or {}
    names = spec.get("names") or {}
    names.setdefault("singular", str(names.get("kind", "")).lower())
    names.setdefault("listKind", f"{names.get('kind', '')}List")
    if isinstance(spec, dict):
        spec.setdefault("conversion", {"strategy": "None"})
    stamp = now_text()
    new["status"] = {
        "acceptedNames": copy.deepcopy(names),
        "conditions": [
            {
                "type": "NamesAccepted",
                "status": "True",
                "lastTransitionTime": stamp,
                "reason": "NoConflicts",
                "message": "no conflicts found",
            },
            {
                "type": "Established",
                "status": "True",
                "lastTransitionTime": stamp,
                "reason": "InitialNamesAccepted",
                "message": "the initial names have been accepted",
            },
        ],
        "storedVersions": [v["name"] for v in spec.get("versions") or [] if v.get("storage")],
    }


def _validate_crd(new: Obj, old: Obj | None) -> builtins.list[FieldError]:
    spec = new.get("spec") or {}
    names = spec.get("names") or {}
    problems: builtins.list[FieldError] = []
    for key in ("plural", "kind"):
        if not names.get(key):
            problems.append(errors.required(f"spec.names.{key}"))
    if not spec.get("group"):
        problems.append(errors.required("spec.group"))
    expected = f"{names.get('plural', '')}.{spec.get('group', '')}"
    if new["metadata"].get("name") != expected:
        problems.append(
            errors.invalid(
                "metadata.name",
                new["metadata"].get("name"),
                'must be spec.names.plural+"."+spec.group',
            )
        )
    versions = spec.get("versions") or []
    if not versions:
        problems.append(
            errors.required(
                "spec.versions", "must have exactly one version marked as storage version"
            )
        )
    elif sum(1 for v in versions if v.get("storage")) != 1:
        problems.append(
            errors.invalid(
                "spec.versions", versions, "must have exactly one version marked as storage version"
            )
        )
    for i, version in enumerate(versions):
        problems += _rule_errors(
            (version.get("schema") or {}).get("openAPIV3Schema") or {},
            f"spec.versions[{i}].schema.openAPIV3Schema",
        )
    if not problems:
        kind_from_crd(new)
    return problems


def _rule_errors(node: Any, path: str) -> builtins.list[FieldError]:
    problems: builtins.list[FieldError] = []
    if not isinstance(node, dict):
        return problems
    for i, rule in enumerate(node.get("x-kubernetes-validations") or []):
        failure = cel_rules.compile_error(str(rule.get("rule", "")))
        if failure:
            problems.append(
                errors.invalid(
                    f"{path}.x-kubernetes-validations[{i}].rule",
                    rule.get("rule"),
                    f"compilation failed: {failure}",
                )
            )
    for key, sub in (node.get("properties") or {}).items():
        problems += _rule_errors(sub, f"{path}.properties[{key}]")
    for key in ("items", "additionalProperties"):
        problems += _rule_errors(node.get(key), f"{path}.{key}")
    return problems


def _prepare_binding(api: Api, new: Obj, old: Obj | None) -> None:
    rbac.default_subjects(new)


_PREPARE: dict[str, Callable[[Api, Obj, Obj | None], None]] = {
    "/secrets": _prepare_secret,
    "/namespaces": _prepare_namespace,
    "/events": _prepare_event,
    "/services": _prepare_service,
    "apiextensions.k8s.io/customresourcedefinitions": _prepare_crd,
    rbac.ROLE_BINDINGS: _prepare_binding,
    rbac.CLUSTER_ROLE_BINDINGS: _prepare_binding,
}
_FINISH_CREATE: dict[str, Callable[[Obj], None]] = {"/namespaces": _finish_namespace}
"""What a kind's create strategy sets after the writer's managed fields are recorded."""
_VALIDATE: dict[str, Callable[[Obj, Obj | None], builtins.list[FieldError]]] = {
    "/secrets": _validate_secret,
    "/configmaps": _validate_configmap,
    "/events": _validate_event,
    "apiextensions.k8s.io/customresourcedefinitions": _validate_crd,
    rbac.ROLES: rbac.validate_role,
    rbac.CLUSTER_ROLES: rbac.validate_cluster_role,
    rbac.ROLE_BINDINGS: rbac.validate_role_binding,
    rbac.CLUSTER_ROLE_BINDINGS: rbac.validate_cluster_role_binding,
}
