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
RBAC_GROUP = "rbac.authorization.k8s.io"
AUTHORIZATION_GROUP = "authorization.k8s.io"


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
    zero: Mapping[str, Any] = field(default_factory=dict)
    """The fields the kind's empty Go object already has (non-pointer structs such as `spec`,
    strings without `omitempty`): a create owns what it sets beyond them, as the real server's
    field manager compares the new object with this empty one."""

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


def path_segment_errors(name: str, path: str) -> list[FieldError]:
    """Check a name that only has to be one URL path segment (RBAC names such as `system:x`)."""
    if name in (".", ".."):
        return [invalid(path, name, f"may not be '{name}'")]
    return [invalid(path, name, f"may not contain '{c}'") for c in "/%" if c in name]


def validate_name(kind: Kind, name: str, path: str = "metadata.name") -> list[FieldError]:
    """Check an object name with the rule the real server uses for that kind."""
    if kind.group == RBAC_GROUP:
        return path_segment_errors(name, path)
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
SELF_REVIEW_SCHEMA = _top(
    "SelfSubjectReview contains the user information that the kube-apiserver has about the user "
    "making this request.",
    status=_OPEN,
)
_STRING: Schema = {"type": "string"}
_TIME: Schema = {"type": "string", "format": "date-time"}
EVENT_SCHEMA = _top(
    "Event is a report of an event somewhere in the cluster.",
    involvedObject={
        **_OPEN,
        "x-kubernetes-map-type": "atomic",
        "description": "The object that this event is about.",
    },
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

_STRINGS: Schema = {
    "type": "array",
    "items": {"type": "string"},
    "x-kubernetes-list-type": "atomic",
}


def _strings(description: str) -> Schema:
    return {**_STRINGS, "description": description}


POLICY_RULE_SCHEMA = _obj(
    {
        "apiGroups": _strings(
            'The API groups of the resources; "" is the core group, "*" every group.'
        ),
        "resources": _strings(
            'The resources the rule applies to; "*" every resource, "x/y" the subresource y of '
            'x, "*/y" the subresource y of every resource.'
        ),
        "resourceNames": _strings("An optional allow list of object names; empty means all."),
        "verbs": _strings('The verbs the rule allows (get, list, watch, create, ...; "*" all).'),
        "nonResourceURLs": _strings(
            'Paths that are not resources (`/version`); a trailing "*" matches a prefix. Only in '
            "ClusterRoles bound by ClusterRoleBindings."
        ),
    },
    "PolicyRule holds information that describes a policy rule, but does not contain "
    "information about who the rule applies to or which namespace the rule applies to.",
    required=["verbs"],
)
_RULES: Schema = {
    "type": "array",
    "items": POLICY_RULE_SCHEMA,
    "x-kubernetes-list-type": "atomic",
    "description": "Rules holds all the PolicyRules for this role.",
}
LABEL_SELECTOR_SCHEMA = _obj(
    {
        "matchLabels": {**_STRING_MAP, "description": "Labels an object must carry, all of them."},
        "matchExpressions": {
            "type": "array",
            "x-kubernetes-list-type": "atomic",
            "description": "Requirements on labels (In, NotIn, Exists, DoesNotExist), all of them.",
            "items": _obj(
                {"key": _STRING, "operator": _STRING, "values": _STRINGS},
                required=["key", "operator"],
            ),
        },
    },
    "A label selector; an empty one matches every object.",
    **{"x-kubernetes-map-type": "atomic"},
)
ROLE_SCHEMA = _top(
    "Role is a namespaced, logical grouping of PolicyRules that can be referenced as a unit by "
    "a RoleBinding.",
    rules=_RULES,
)
CLUSTERROLE_SCHEMA = _top(
    "ClusterRole is a cluster level, logical grouping of PolicyRules that can be referenced as a "
    "unit by a RoleBinding or ClusterRoleBinding.",
    rules=_RULES,
    aggregationRule=_obj(
        {
            "clusterRoleSelectors": {
                "type": "array",
                "x-kubernetes-list-type": "atomic",
                "items": LABEL_SELECTOR_SCHEMA,
                "description": "The ClusterRoles whose rules are aggregated into this one.",
            }
        },
        "AggregationRule describes how to build the rules of this ClusterRole; if set, the rules "
        "are controller managed and direct changes to them are stomped by the controller.",
    ),
)
_ROLE_REF = _obj(
    {
        "apiGroup": {**_STRING, "description": "The group of the referenced role."},
        "kind": {**_STRING, "description": "Role or ClusterRole."},
        "name": {**_STRING, "description": "The name of the referenced role."},
    },
    "RoleRef can reference a Role in the current namespace or a ClusterRole in the global "
    "namespace. It cannot be changed once the binding exists.",
    required=["apiGroup", "kind", "name"],
    **{"x-kubernetes-map-type": "atomic"},
)
_SUBJECTS: Schema = {
    "type": "array",
    "x-kubernetes-list-type": "atomic",
    "description": "Subjects holds references to the objects the role applies to.",
    "items": _obj(
        {
            "kind": {**_STRING, "description": "ServiceAccount, User or Group."},
            "apiGroup": {
                **_STRING,
                "description": '"" for a ServiceAccount, the RBAC group for a User or Group.',
            },
            "name": {**_STRING, "description": "The name of the object being referenced."},
            "namespace": {
                **_STRING,
                "description": "The namespace of a ServiceAccount (a RoleBinding's by default).",
            },
        },
        "Subject contains a reference to the object or user identities a role binding applies to.",
        required=["kind", "name"],
        **{"x-kubernetes-map-type": "atomic"},
    ),
}
ROLEBINDING_SCHEMA = _top(
    "RoleBinding references a role, but does not contain it. It adds who information via "
    "Subjects and namespace information by which namespace it exists in.",
    roleRef=_ROLE_REF,
    subjects=_SUBJECTS,
)
CLUSTERROLEBINDING_SCHEMA = _top(
    "ClusterRoleBinding references a ClusterRole, but does not contain it. It adds who information "
    "via Subject.",
    roleRef=_ROLE_REF,
    subjects=_SUBJECTS,
)
_RESOURCE_ATTRIBUTES = _obj(
    {
        key: {**_STRING, "description": text}
        for key, text in (
            ("namespace", 'The namespace of the action; "" is every namespace.'),
            ("verb", 'A Kubernetes resource API verb (get, list, watch, create, ...; "*" all).'),
            ("group", 'The API group of the resource; "*" every group.'),
            ("version", 'The API version of the resource; "*" every version.'),
            ("resource", 'One of the existing resource types; "*" every resource.'),
            ("subresource", 'One of the existing subresources; "" none.'),
            ("name", 'The name of the resource; "" every name.'),
        )
    },
    "ResourceAttributes includes the authorization attributes available for resource requests.",
)
_NON_RESOURCE_ATTRIBUTES = _obj(
    {
        "path": {**_STRING, "description": "The URL path of the request."},
        "verb": {**_STRING, "description": "The standard HTTP verb."},
    },
    "NonResourceAttributes includes the authorization attributes available for non-resource "
    "requests.",
)
_ACCESS_STATUS = _obj(
    {
        "allowed": {"type": "boolean", "description": "Whether the action is allowed."},
        "denied": {"type": "boolean", "description": "Whether the action is denied."},
        "reason": {**_STRING, "description": "Why the action is allowed or denied."},
        "evaluationError": {**_STRING, "description": "An error while checking authorization."},
    },
    "SubjectAccessReviewStatus",
)
SELF_ACCESS_REVIEW_SCHEMA = _top(
    "SelfSubjectAccessReview checks whether the current user can perform an action.",
    spec=_obj(
        {
            "resourceAttributes": _RESOURCE_ATTRIBUTES,
            "nonResourceAttributes": _NON_RESOURCE_ATTRIBUTES,
        },
        "Exactly one of resourceAttributes and nonResourceAttributes must be set.",
    ),
    status=_ACCESS_STATUS,
)
ACCESS_REVIEW_SCHEMA = _top(
    "SubjectAccessReview checks whether or not a user or group can perform an action.",
    spec=_obj(
        {
            "resourceAttributes": _RESOURCE_ATTRIBUTES,
            "nonResourceAttributes": _NON_RESOURCE_ATTRIBUTES,
            "user": {**_STRING, "description": "The user to test for."},
            "groups": {**_STRINGS, "description": "The groups to test for."},
            "uid": {**_STRING, "description": "Information about the requesting user."},
            "extra": {
                "type": "object",
                "additionalProperties": _STRINGS,
                "description": "Extra information about the requesting user.",
            },
        },
        "Exactly one of resourceAttributes and nonResourceAttributes must be set.",
    ),
    status=_ACCESS_STATUS,
)
SELF_RULES_REVIEW_SCHEMA = _top(
    "SelfSubjectRulesReview enumerates the set of actions the current user can perform within "
    "a namespace.",
    spec=_obj({"namespace": {**_STRING, "description": "The namespace to evaluate rules for."}}),
    status=_OPEN,
)


def _binding_role(o: Mapping[str, Any]) -> str:
    ref = o.get("roleRef") or {}
    return f"{ref.get('kind', '')}/{ref.get('name', '')}"


def _binding_subjects(kind: str) -> Cell:
    def cell(o: Mapping[str, Any]) -> str:
        names = [
            f"{s.get('namespace', '')}/{s.get('name', '')}"
            if kind == "ServiceAccount"
            else str(s.get("name", ""))
            for s in o.get("subjects") or []
            if s.get("kind") == kind
        ]
        return ", ".join(names)

    return cell


_CREATED_AT = Column(
    "Created At", "date", lambda o: _meta(o, "creationTimestamp"), "When the object was created."
)
_BINDING_COLUMNS = (
    NAME,
    Column("Role", "string", _binding_role, "The role the binding references."),
    AGE,
    Column("Users", "string", _binding_subjects("User"), "Users in the binding.", 1),
    Column("Groups", "string", _binding_subjects("Group"), "Groups in the binding.", 1),
    Column(
        "ServiceAccounts",
        "string",
        _binding_subjects("ServiceAccount"),
        "ServiceAccounts in the binding.",
        1,
    ),
)


def _rbac_kinds() -> list[Kind]:
    rbac: dict[str, Any] = {
        "group": RBAC_GROUP,
        "versions": ("v1",),
        "storage_version": "v1",
        "smp": COMMON_SMP,
    }
    reviews: dict[str, Any] = {
        "group": AUTHORIZATION_GROUP,
        "versions": ("v1",),
        "storage_version": "v1",
        "verbs": ("create",),
        "stored": False,
    }
    return [
        Kind(
            **rbac,
            plural="roles",
            singular="role",
            kind="Role",
            namespaced=True,
            schemas={"v1": ROLE_SCHEMA},
            columns={"v1": (NAME, _CREATED_AT)},
        ),
        Kind(
            **rbac,
            plural="clusterroles",
            singular="clusterrole",
            kind="ClusterRole",
            namespaced=False,
            schemas={"v1": CLUSTERROLE_SCHEMA},
            columns={"v1": (NAME, _CREATED_AT)},
        ),
        Kind(
            **rbac,
            plural="rolebindings",
            singular="rolebinding",
            kind="RoleBinding",
            namespaced=True,
            schemas={"v1": ROLEBINDING_SCHEMA},
            columns={"v1": _BINDING_COLUMNS},
        ),
        Kind(
            **rbac,
            plural="clusterrolebindings",
            singular="clusterrolebinding",
            kind="ClusterRoleBinding",
            namespaced=False,
            schemas={"v1": CLUSTERROLEBINDING_SCHEMA},
            columns={"v1": _BINDING_COLUMNS},
        ),
        Kind(
            **reviews,
            plural="selfsubjectaccessreviews",
            singular="selfsubjectaccessreview",
            kind="SelfSubjectAccessReview",
            namespaced=False,
            schemas={"v1": SELF_ACCESS_REVIEW_SCHEMA},
        ),
        Kind(
            **reviews,
            plural="selfsubjectrulesreviews",
            singular="selfsubjectrulesreview",
            kind="SelfSubjectRulesReview",
            namespaced=False,
            schemas={"v1": SELF_RULES_REVIEW_SCHEMA},
        ),
        Kind(
            **reviews,
            plural="subjectaccessreviews",
            singular="subjectaccessreview",
            kind="SubjectAccessReview",
            namespaced=False,
            schemas={"v1": ACCESS_REVIEW_SCHEMA},
        ),
        Kind(
            **reviews,
            plural="localsubjectaccessreviews",
            singular="localsubjectaccessreview",
            kind="LocalSubjectAccessReview",
            namespaced=True,
            schemas={"v1": ACCESS_REVIEW_SCHEMA},
        ),
    ]


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
            zero={"spec": {}, "status": {}},
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
            zero={"spec": {}, "status": {"loadBalancer": {}}},
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
            zero={
                "involvedObject": {},
                "source": {},
                "eventTime": None,
                "reportingComponent": "",
                "reportingInstance": "",
            },
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
            zero={"spec": {}},
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
            group="authentication.k8s.io",
            versions=("v1",),
            storage_version="v1",
            plural="selfsubjectreviews",
            singular="selfsubjectreview",
            kind="SelfSubjectReview",
            namespaced=False,
            schemas={"v1": SELF_REVIEW_SCHEMA},
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
            zero={"spec": {"names": {}}, "status": {"acceptedNames": {}}},
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
        *_rbac_kinds(),
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
