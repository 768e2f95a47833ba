"""Resource kinds the server serves: the built-ins and those a CustomResourceDefinition installs.

Owns the description of each kind (group, versions, plural, scope, subresources, short names),
its schema (a CRD's `openAPIV3Schema`, or a small hand-written one for built-ins that carries what
pruning, server-side apply and `kubectl explain` need), its strategic-merge keys and its `kubectl
get` columns. It must never hold objects; the store does.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from devstack.kube.errors import FieldError, invalid
from devstack.kube.managed_fields import META_SCHEMA
from devstack.kube.patches import COMMON_SMP
from devstack.kube.selectors import FieldGetter

Schema = dict[str, Any]
Cell = Callable[[Mapping[str, Any]], Any]


@dataclass(frozen=True)
class Column:
    """One `kubectl get` column."""

    name: str
    type: str
    cell: Cell
    description: str = ""
    priority: int = 0
    format: str = ""


@dataclass(frozen=True)
class Kind:
    """One served resource."""

    group: str
    versions: tuple[str, ...]
    storage_version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    schemas: Mapping[str, Schema]
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    has_status: bool = False
    subresources: tuple[str, ...] = ()
    verbs: tuple[str, ...] = (
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    )
    builtin: bool = True
    smp: Mapping[str, str] | None = None
    columns: Mapping[str, tuple[Column, ...]] = field(default_factory=dict)
    field_selectors: Mapping[str, FieldGetter] = field(default_factory=dict)
    stored: bool = True
    allow_unconditional_update: bool = True
    descriptions: Mapping[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """Store key: `<group>/<plural>`."""
        return f"{self.group}/{self.plural}"

    @property
    def resource(self) -> str:
        """`plural.group`, or the plural for the core group."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def api_version(self, version: str) -> str:
        """`group/version`, or the version for the core group."""
        return f"{self.group}/{version}" if self.group else version

    def schema(self, version: str) -> Schema:
        """The schema served for a version."""
        return self.schemas.get(version) or self.schemas.get(self.storage_version) or {}


# ---------------------------------------------------------------- names


_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
DNS1035_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
    "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)


def validate_name(kind: Kind, name: str, path: str = "metadata.name") -> list[FieldError]:
    """Check an object name with the rule the real server uses for that kind."""
    if kind.kind == "Namespace":
        pattern, message, limit = _LABEL, LABEL_MSG, 63
    elif kind.kind == "Service":
        pattern, message, limit = _DNS1035, DNS1035_MSG, 63
    else:
        pattern, message, limit = _SUBDOMAIN, SUBDOMAIN_MSG, 253
    errors = []
    if len(name) > limit:
        errors.append(invalid(path, name, f"must be no more than {limit} characters"))
    if not pattern.match(name):
        errors.append(invalid(path, name, message))
    return errors


def config_key_errors(data: Mapping[str, Any], path: str) -> list[FieldError]:
    """Validate Secret and ConfigMap keys."""
    return [
        invalid(
            f"{path}[{key}]",
            key,
            "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. "
            "'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is "
            "'[-._a-zA-Z0-9]+')",
        )
        for key in data
        if not _CONFIG_KEY.match(key)
    ]


# ---------------------------------------------------------------- table cells


def human_age(stamp: str | None, now: datetime | None = None) -> str:
    """Format an age the way `kubectl get` does (`duration.HumanDuration`)."""
    if not stamp:
        return "<unknown>"
    then = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    seconds = int(((now or datetime.now(UTC)) - then).total_seconds())
    if seconds < -1:
        return "<invalid>"
    seconds = max(seconds, 0)
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        rest = seconds % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if hours < 24 * 8:
        rest = hours % 24
        return f"{days}d{rest}h" if rest else f"{days}d"
    if days < 365 * 2:
        return f"{days}d"
    return f"{days // 365}y"


def _meta(obj: Mapping[str, Any], key: str) -> Any:
    return obj.get("metadata", {}).get(key)


NAME = Column(
    "Name",
    "string",
    lambda o: _meta(o, "name"),
    "Name must be unique within a namespace.",
    0,
    "name",
)
AGE = Column(
    "Age", "date", lambda o: human_age(_meta(o, "creationTimestamp")), "Age of the object."
)


def _ports(obj: Mapping[str, Any]) -> str:
    ports = obj.get("spec", {}).get("ports") or []
    return ",".join(f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in ports) or "<none>"


# ---------------------------------------------------------------- built-in schemas


def _obj(props: Mapping[str, Schema], description: str = "", **extra: Any) -> Schema:
    schema: Schema = {"type": "object", "properties": dict(props), **extra}
    if description:
        schema["description"] = description
    return schema


_OPEN: Schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
_STRING_MAP: Schema = {"type": "object", "additionalProperties": {"type": "string"}}
_METADATA: Schema = {
    **META_SCHEMA,
    "description": "Standard object's metadata.",
    "x-kubernetes-preserve-unknown-fields": True,
    "properties": {
        **META_SCHEMA["properties"],
        "labels": _STRING_MAP,
        "annotations": _STRING_MAP,
    },
}


def _top(description: str, **props: Schema) -> Schema:
    return _obj(
        {
            "apiVersion": {
                "type": "string",
                "description": "APIVersion defines the versioned schema of this object.",
            },
            "kind": {
                "type": "string",
                "description": "Kind is the REST resource this object represents.",
            },
            "metadata": _METADATA,
            **props,
        },
        description,
    )


SECRET_SCHEMA = _top(
    "Secret holds secret data of a certain type.",
    data={**_STRING_MAP, "description": "Data contains the secret data, base64 encoded."},
    stringData={
        **_STRING_MAP,
        "description": "stringData allows specifying non-binary secret data in string form.",
    },
    type={
        "type": "string",
        "description": "Used to facilitate programmatic handling of secret data.",
    },
    immutable={
        "type": "boolean",
        "description": "Immutable, if true, keeps the data of the Secret from being updated.",
    },
)
CONFIGMAP_SCHEMA = _top(
    "ConfigMap holds configuration data for pods to consume.",
    data={**_STRING_MAP, "description": "Data contains the configuration data."},
    binaryData={**_STRING_MAP, "description": "BinaryData contains the binary data."},
    immutable={"type": "boolean"},
)
NAMESPACE_SCHEMA = _top(
    "Namespace provides a scope for Names.",
    spec=_obj({"finalizers": {"type": "array", "items": {"type": "string"}}}),
    status=_obj({"phase": {"type": "string"}}),
)
_NAMED_LIST: Schema = {
    "type": "array",
    "x-kubernetes-list-type": "map",
    "x-kubernetes-list-map-keys": ["name"],
    "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
}
SA_SCHEMA = _top(
    "ServiceAccount binds together a name, a principal and a set of secrets.",
    secrets=_NAMED_LIST,
    imagePullSecrets=_NAMED_LIST,
    automountServiceAccountToken={"type": "boolean"},
)
SERVICE_SCHEMA = _top(
    "Service is a named abstraction of software service.",
    spec={
        **_OPEN,
        "properties": {
            "ports": {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["port", "protocol"],
                "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            },
            "selector": {**_STRING_MAP, "x-kubernetes-map-type": "atomic"},
        },
    },
    status=_OPEN,
)
LEASE_SCHEMA = _top("Lease defines a lease concept.", spec=_OPEN)
TOKENREVIEW_SCHEMA = _top("TokenReview attempts to authenticate a token.", spec=_OPEN, status=_OPEN)
_STRING: Schema = {"type": "string"}
_TIME: Schema = {"type": "string", "format": "date-time"}
EVENT_SCHEMA = _top(
    "Event is a report of an event somewhere in the cluster.",
    involvedObject={**_OPEN, "description": "The object that this event is about."},
    reason={**_STRING, "description": "A short, machine understandable string for the cause."},
    message={**_STRING, "description": "A human-readable description of the status."},
    source={**_OPEN, "description": "The component reporting this event."},
    firstTimestamp={**_TIME, "description": "The time at which the event was first recorded."},
    lastTimestamp={**_TIME, "description": "The time of the most recent occurrence."},
    count={"type": "integer", "description": "The number of times this event has occurred."},
    type={**_STRING, "description": "Type of this event (Normal, Warning)."},
    eventTime={**_STRING, "format": "date-time", "description": "When it was first observed."},
    series=_OPEN,
    action={**_STRING, "description": "What action was taken/failed regarding the object."},
    related=_OPEN,
    reportingComponent={**_STRING, "description": "Name of the controller that emitted it."},
    reportingInstance={**_STRING, "description": "ID of the controller instance."},
)
CRD_SCHEMA = _top(
    "CustomResourceDefinition represents a resource that should be exposed on the API server.",
    spec=_OPEN,
    status=_OPEN,
)


def _secret_type(o: Mapping[str, Any]) -> str:
    return str(o.get("type", "Opaque"))


def _event_field(*path: str) -> FieldGetter:
    def get(o: Mapping[str, Any]) -> str:
        node: Any = o
        for key in path:
            node = node.get(key) if isinstance(node, Mapping) else None
        return "" if node is None else str(node)

    return get


def _event_last_seen(o: Mapping[str, Any]) -> str:
    series = o.get("series") or {}
    stamp = (
        series.get("lastObservedTime")
        or o.get("lastTimestamp")
        or o.get("eventTime")
        or _meta(o, "creationTimestamp")
    )
    return human_age(str(stamp)) if stamp else "<unknown>"


def _event_first_seen(o: Mapping[str, Any]) -> str:
    stamp = o.get("firstTimestamp") or o.get("eventTime") or _meta(o, "creationTimestamp")
    return human_age(str(stamp)) if stamp else "<unknown>"


def _event_object(o: Mapping[str, Any]) -> str:
    ref = o.get("involvedObject") or {}
    return f"{str(ref.get('kind', '')).lower()}/{ref.get('name', '')}"


def _event_source(o: Mapping[str, Any]) -> str:
    source = o.get("source") or {}
    component = str(source.get("component") or o.get("reportingComponent") or "")
    host = str(source.get("host") or "")
    return f"{component}, {host}" if host else component


def _event_count(o: Mapping[str, Any]) -> int:
    series = o.get("series") or {}
    return int(series.get("count") or o.get("count") or 1)


EVENT_FIELDS: Mapping[str, FieldGetter] = {
    **{
        f"involvedObject.{key}": _event_field("involvedObject", key)
        for key in (
            "kind",
            "namespace",
            "name",
            "uid",
            "apiVersion",
            "resourceVersion",
            "fieldPath",
        )
    },
    "reason": _event_field("reason"),
    "reportingComponent": _event_field("reportingComponent"),
    "source": _event_field("source", "component"),
    "type": _event_field("type"),
}
EVENT_COLUMNS = (
    Column("Last Seen", "string", _event_last_seen, "The time of the most recent occurrence."),
    Column("Type", "string", lambda o: o.get("type", ""), "Type of this event."),
    Column("Reason", "string", lambda o: o.get("reason", ""), "Why the event happened."),
    Column("Object", "string", _event_object, "The object this event is about."),
    Column(
        "Subobject",
        "string",
        lambda o: (o.get("involvedObject") or {}).get("fieldPath", ""),
        "The part of the object this event is about.",
        1,
    ),
    Column("Source", "string", _event_source, "The component reporting this event.", 1),
    Column("Message", "string", lambda o: o.get("message", ""), "A human-readable description."),
    Column("First Seen", "string", _event_first_seen, "When the event was first recorded.", 1),
    Column("Count", "string", _event_count, "How often the event occurred.", 1),
    Column("Name", "string", lambda o: _meta(o, "name"), "The event's name.", 1, "name"),
)


def builtin_kinds() -> list[Kind]:
    """Every built-in kind the devstack serves."""
    core: dict[str, Any] = {"group": "", "versions": ("v1",), "storage_version": "v1"}
    return [
        Kind(
            **core,
            plural="namespaces",
            singular="namespace",
            kind="Namespace",
            namespaced=False,
            schemas={"v1": NAMESPACE_SCHEMA},
            short_names=("ns",),
            has_status=True,
            subresources=("status", "finalize"),
            smp=COMMON_SMP,
            columns={
                "v1": (
                    NAME,
                    Column("Status", "string", lambda o: o.get("status", {}).get("phase", "")),
                    AGE,
                )
            },
            field_selectors={"status.phase": lambda o: str(o.get("status", {}).get("phase", ""))},
        ),
        Kind(
            **core,
            plural="secrets",
            singular="secret",
            kind="Secret",
            namespaced=True,
            schemas={"v1": SECRET_SCHEMA},
            smp=COMMON_SMP,
            columns={
                "v1": (
                    NAME,
                    Column("Type", "string", _secret_type),
                    Column("Data", "string", lambda o: len(o.get("data") or {})),
                    AGE,
                )
            },
            field_selectors={"type": _secret_type},
        ),
        Kind(
            **core,
            plural="configmaps",
            singular="configmap",
            kind="ConfigMap",
            namespaced=True,
            schemas={"v1": CONFIGMAP_SCHEMA},
            short_names=("cm",),
            smp=COMMON_SMP,
            columns={
                "v1": (
                    NAME,
                    Column(
                        "Data",
                        "string",
                        lambda o: len(o.get("data") or {}) + len(o.get("binaryData") or {}),
                    ),
                    AGE,
                )
            },
        ),
        Kind(
            **core,
            plural="serviceaccounts",
            singular="serviceaccount",
            kind="ServiceAccount",
            namespaced=True,
            schemas={"v1": SA_SCHEMA},
            short_names=("sa",),
            subresources=("token",),
            smp={**COMMON_SMP, "secrets": "name", "imagePullSecrets": "name"},
            columns={
                "v1": (
                    NAME,
                    Column("Secrets", "string", lambda o: len(o.get("secrets") or [])),
                    AGE,
                )
            },
        ),
        Kind(
            **core,
            plural="services",
            singular="service",
            kind="Service",
            namespaced=True,
            schemas={"v1": SERVICE_SCHEMA},
            short_names=("svc",),
            has_status=True,
            subresources=("status",),
            categories=("all",),
            smp={**COMMON_SMP, "spec.ports": "port"},
            columns={
                "v1": (
                    NAME,
                    Column("Type", "string", lambda o: o.get("spec", {}).get("type", "ClusterIP")),
                    Column(
                        "Cluster-IP",
                        "string",
                        lambda o: o.get("spec", {}).get("clusterIP", "<none>"),
                    ),
                    Column("External-IP", "string", lambda o: "<none>"),
                    Column("Port(s)", "string", _ports),
                    AGE,
                )
            },
        ),
        Kind(
            **core,
            plural="events",
            singular="event",
            kind="Event",
            namespaced=True,
            schemas={"v1": EVENT_SCHEMA},
            short_names=("ev",),
            smp=COMMON_SMP,
            columns={"v1": EVENT_COLUMNS},
            field_selectors=EVENT_FIELDS,
        ),
        Kind(
            group="coordination.k8s.io",
            versions=("v1",),
            storage_version="v1",
            plural="leases",
            singular="lease",
            kind="Lease",
            namespaced=True,
            schemas={"v1": LEASE_SCHEMA},
            smp=COMMON_SMP,
            columns={
                "v1": (
                    NAME,
                    Column(
                        "Holder", "string", lambda o: o.get("spec", {}).get("holderIdentity", "")
                    ),
                    AGE,
                )
            },
        ),
        Kind(
            group="authentication.k8s.io",
            versions=("v1",),
            storage_version="v1",
            plural="tokenreviews",
            singular="tokenreview",
            kind="TokenReview",
            namespaced=False,
            schemas={"v1": TOKENREVIEW_SCHEMA},
            verbs=("create",),
            stored=False,
        ),
        Kind(
            group="apiextensions.k8s.io",
            versions=("v1",),
            storage_version="v1",
            plural="customresourcedefinitions",
            singular="customresourcedefinition",
            kind="CustomResourceDefinition",
            namespaced=False,
            schemas={"v1": CRD_SCHEMA},
            short_names=("crd", "crds"),
            has_status=True,
            subresources=("status",),
            smp=COMMON_SMP,
            categories=("api-extensions",),
            columns={
                "v1": (NAME, Column("Created At", "date", lambda o: _meta(o, "creationTimestamp")))
            },
        ),
    ]


# ---------------------------------------------------------------- custom resources


def _jsonpath_cell(path: str, col_type: str) -> Cell:
    def cell(obj: Mapping[str, Any]) -> Any:
        value = jsonpath(obj, path)
        if value is None:
            return None
        if col_type == "date" and isinstance(value, str):
            return human_age(value)
        return value

    return cell


_JP_TOKEN = re.compile(
    r"\.([A-Za-z0-9_-]+)|\[(\d+)\]|\[\?\(@\.([A-Za-z0-9_.-]+)\s*==\s*[\"']([^\"']*)[\"']\)\]"
)


def jsonpath(obj: Any, path: str) -> Any:
    """Evaluate the small JSONPath subset printer columns use."""
    node = obj
    for match in _JP_TOKEN.finditer(path):
        name, idx, filter_key, filter_value = match.groups()
        if name is not None:
            node = node.get(name) if isinstance(node, dict) else None
        elif idx is not None:
            node = node[int(idx)] if isinstance(node, list) and int(idx) < len(node) else None
        else:
            found = [
                i
                for i in node or []
                if isinstance(i, dict) and jsonpath(i, "." + filter_key) == filter_value
            ]
            node = found[0] if found else None
        if node is None:
            return None
    return node


def crd_columns(version: Mapping[str, Any]) -> tuple[Column, ...]:
    """Columns for a CRD version: Name, its printer columns, and Age when none is a date."""
    extra = [
        Column(
            str(c.get("name", "")),
            str(c.get("type", "string")),
            _jsonpath_cell(str(c.get("jsonPath", "")), str(c.get("type", "string"))),
            str(c.get("description", "")),
            int(c.get("priority", 0)),
            str(c.get("format", "")),
        )
        for c in version.get("additionalPrinterColumns") or []
    ]
    if not version.get("additionalPrinterColumns"):
        extra.append(AGE)
    return (NAME, *extra)


def _with_metadata(schema: Schema) -> Schema:
    props = dict(schema.get("properties") or {})
    props.setdefault("apiVersion", {"type": "string"})
    props.setdefault("kind", {"type": "string"})
    props["metadata"] = {
        **_METADATA,
        **{k: v for k, v in (props.get("metadata") or {}).items() if k != "properties"},
    }
    return {**schema, "properties": props}


def kind_from_crd(crd: Mapping[str, Any]) -> Kind:
    """Build the served kind of an established CRD."""
    spec = crd.get("spec", {})
    names = spec.get("names", {})
    versions = [v for v in spec.get("versions") or [] if v.get("served", True)]
    storage = next(
        (v["name"] for v in spec.get("versions") or [] if v.get("storage")), versions[0]["name"]
    )
    schemas = {
        v["name"]: _with_metadata((v.get("schema") or {}).get("openAPIV3Schema") or _OPEN)
        for v in versions
    }
    status = any("status" in (v.get("subresources") or {}) for v in versions)
    return Kind(
        group=str(spec.get("group", "")),
        versions=tuple(v["name"] for v in versions),
        storage_version=storage,
        plural=str(names.get("plural", "")),
        singular=str(names.get("singular") or str(names.get("kind", "")).lower()),
        kind=str(names.get("kind", "")),
        namespaced=spec.get("scope", "Namespaced") == "Namespaced",
        schemas=schemas,
        short_names=tuple(names.get("shortNames") or ()),
        categories=tuple(names.get("categories") or ()),
        has_status=status,
        subresources=("status",) if status else (),
        builtin=False,
        smp=None,
        columns={v["name"]: crd_columns(v) for v in versions},
        allow_unconditional_update=False,
    )


def decode_secret_data(data: Mapping[str, Any]) -> str | None:
    """Return the Go decoder's error for invalid base64 in a Secret, or None."""
    for value in data.values():
        try:
            base64.b64decode(str(value), validate=True)
        except ValueError:
            return "illegal base64 data at input byte 0"
    return None
