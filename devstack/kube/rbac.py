"""RBAC authorization: what each identity may do, decided from Roles, ClusterRoles and bindings.

Owns the attributes the real server authorizes a request by (verb, API group, resource,
subresource, namespace and name, or the path of a request that names no resource), their
evaluation against `rbac.authorization.k8s.io/v1` bindings (subjects ServiceAccount, User and
Group; rules by apiGroups, resources with `*`, `resource/subresource` and `*/subresource`,
resourceNames, verbs and nonResourceURLs; RoleBindings to ClusterRoles scoped to the binding's
namespace; aggregated ClusterRoles), the 403 `Status` worded as the real server words it,
impersonation (`Impersonate-User`, `-Group`, `-Uid`, `-Extra-*`), the privilege-escalation checks
on writing roles and bindings (`escalate`, `bind`), the `authorization.k8s.io/v1` access reviews,
the validation and defaults of the four RBAC kinds, and the bootstrap policy a cluster starts
with (cluster-admin for `system:masters`, admin/edit/view, system:discovery, system:basic-user,
system:public-info-viewer and system:auth-delegator). Members of `system:masters` (the admin of
the devstack's kubeconfig) may do everything without a look at the bindings, as the real
server's privileged-group authorizer lets them. It must never allow anyone else a request no
binding grants, and never write the store: `devstack.kube.api` stores what this module builds.

Deliberately left out versus the real server: the Node and Webhook authorizers, ABAC, the
field and label selector attributes of authorization (KEP-4601), `escalate`/`bind` for anything
but RBAC objects, and the bootstrap roles of the components the devstack does not run
(controllers, kubelets, schedulers); admin, edit and view aggregate rules for the kinds the
devstack serves only.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from devstack.kube import auth, errors
from devstack.kube.errors import ApiError, FieldError
from devstack.kube.kinds import AUTHORIZATION_GROUP, RBAC_GROUP, path_segment_errors
from devstack.kube.store import Obj, Store

PRIVILEGED_GROUP = "system:masters"
AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"
ANONYMOUS = "system:anonymous"
SA_PREFIX = "system:serviceaccount:"
ROLES = f"{RBAC_GROUP}/roles"
CLUSTER_ROLES = f"{RBAC_GROUP}/clusterroles"
ROLE_BINDINGS = f"{RBAC_GROUP}/rolebindings"
CLUSTER_ROLE_BINDINGS = f"{RBAC_GROUP}/clusterrolebindings"
RBAC_KEYS = (ROLES, CLUSTER_ROLES, ROLE_BINDINGS, CLUSTER_ROLE_BINDINGS)
FULL_AUTHORITY: tuple[Obj, ...] = (
    {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
    {"nonResourceURLs": ["*"], "verbs": ["*"]},
)
_NAMESPACE_SUBRESOURCES = ("status", "finalize")
_SUBJECT_KINDS = ["ServiceAccount", "User", "Group"]
_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def _q(text: str) -> str:
    """Quote as Go's `%q` does for the printable text of names and paths."""
    return json.dumps(text, ensure_ascii=False)


def _q_list(values: list[str] | tuple[str, ...]) -> str:
    """Quote a string slice as Go's `%q` does: `["a" "b"]`."""
    return "[" + " ".join(_q(v) for v in values) + "]"


# ---------------------------------------------------------------- request attributes


@dataclass(frozen=True)
class Attributes:
    """What one request asks to do, in the terms authorization decides on."""

    user: auth.User
    verb: str
    namespace: str = ""
    group: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    path: str = ""
    resource_request: bool = True


def _flag(query: Mapping[str, str], name: str) -> bool:
    return query.get(name, "").lower() in ("true", "1")


_NAME_TERM = re.compile(r"^\s*metadata\.name\s*==?\s*(.*?)\s*$")


def _name_from_field_selector(selector: str | None) -> str:
    """The name a `metadata.name=<x>` term of a list or watch pins (as the real server reads it)."""
    for term in (selector or "").split(","):
        match = _NAME_TERM.match(term)
        if match and match.group(1) and not path_segment_errors(match.group(1), ""):
            return match.group(1)
    return ""


def request_attributes(
    user: auth.User, method: str, path: str, query: Mapping[str, str]
) -> Attributes:
    """Read a request's attributes from its method, path and query, as the real server does.

    `/api/v1/...` and `/apis/<group>/<version>/...` with a resource are resource requests
    (`namespaces/<ns>` also sets the namespace of a request for the Namespace itself); every
    other path (discovery, OpenAPI, `/version`, health) is a path with the HTTP method as verb.
    """
    seg = [s for s in path.split("/") if s]
    if len(seg) >= 3 and seg[0] == "api":
        group, rest = "", seg[2:]
    elif len(seg) >= 4 and seg[0] == "apis":
        group, rest = seg[1], seg[3:]
    else:
        return Attributes(user, method.lower(), path=path or "/", resource_request=False)
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    verb = {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, "")
    if method == "GET":
        verb = "watch" if _flag(query, "watch") else ("get" if name else "list")
    elif method == "DELETE":
        verb = "delete" if name else "deletecollection"
    if not name and verb in ("list", "watch"):
        name = _name_from_field_selector(query.get("fieldSelector"))
    return Attributes(user, verb or method.lower(), namespace, group, rest[0], subresource, name)


def forbidden(attrs: Attributes, reason: str = "") -> ApiError:
    """The 403 of a denied request: `secrets "x" is forbidden: User "u" cannot get resource ...`."""
    who = _q(attrs.user.name)
    if not attrs.resource_request:
        why = f"User {who} cannot {attrs.verb} path {_q(attrs.path)}"
    else:
        resource = attrs.resource + (f"/{attrs.subresource}" if attrs.subresource else "")
        where = (
            f"in the namespace {_q(attrs.namespace)}" if attrs.namespace else "at the cluster scope"
        )
        why = (
            f"User {who} cannot {attrs.verb} resource {_q(resource)} in API group "
            f"{_q(attrs.group)} {where}"
        )
    if reason:
        why = f"{why}: {reason}"
    resource = attrs.resource if attrs.resource_request else ""
    return errors.access_denied(resource, attrs.group, attrs.name, why)


# ---------------------------------------------------------------- rules


def _has(values: list[str], wanted: str) -> bool:
    return "*" in values or wanted in values


def _strings(rule: Mapping[str, Any], key: str) -> list[str]:
    return [str(v) for v in rule.get(key) or []]


def _resource_matches(resources: list[str], resource: str, subresource: str) -> bool:
    combined = f"{resource}/{subresource}" if subresource else resource
    return any(
        r in ("*", combined) or (bool(subresource) and r == f"*/{subresource}") for r in resources
    )


def _url_matches(urls: list[str], path: str) -> bool:
    return any(u == path or (u.endswith("*") and path.startswith(u[:-1])) for u in urls)


def rule_allows(rule: Mapping[str, Any], attrs: Attributes) -> bool:
    """Tell whether one PolicyRule allows a request."""
    if not _has(_strings(rule, "verbs"), attrs.verb):
        return False
    if not attrs.resource_request:
        return _url_matches(_strings(rule, "nonResourceURLs"), attrs.path)
    names = _strings(rule, "resourceNames")
    return (
        _has(_strings(rule, "apiGroups"), attrs.group)
        and _resource_matches(_strings(rule, "resources"), attrs.resource, attrs.subresource)
        and (not names or attrs.name in names)
    )


def selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Tell whether labels satisfy a LabelSelector (`{}` matches everything)."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        present = key in labels
        if op == "In" and not (present and labels[key] in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if (op == "Exists") != present and op in ("Exists", "DoesNotExist"):
            return False
    return True


def aggregated_rules(store: Store, role: Obj) -> list[Obj]:
    """The rules of an aggregated ClusterRole: those of every ClusterRole its selectors pick.

    Call with the store lock held. Selectors are taken in order, the roles each picks by name, and
    a rule already gathered is not repeated, as the aggregation controller builds them.
    """
    name = role["metadata"]["name"]
    rules: list[Obj] = []
    for selector in (role.get("aggregationRule") or {}).get("clusterRoleSelectors") or []:
        for other in store.items(CLUSTER_ROLES):
            labels = other["metadata"].get("labels") or {}
            if other["metadata"]["name"] == name or not selector_matches(selector, labels):
                continue
            for rule in other.get("rules") or []:
                if rule not in rules:
                    rules.append(copy.deepcopy(rule))
    return rules


def is_aggregated(role: Obj) -> bool:
    """Tell whether a ClusterRole's rules come from its aggregationRule."""
    return isinstance(role.get("aggregationRule"), dict)


# ---------------------------------------------------------------- escalation


def _breakdown(rule: Mapping[str, Any]) -> list[Obj]:
    """Split a rule into rules of one group, resource, verb and name each (or URL and verb)."""
    verbs = _strings(rule, "verbs")
    names = _strings(rule, "resourceNames")
    out: list[Obj] = []
    for group in _strings(rule, "apiGroups"):
        for resource in _strings(rule, "resources"):
            for verb in verbs:
                base: Obj = {"apiGroups": [group], "resources": [resource], "verbs": [verb]}
                out += [{**base, "resourceNames": [n]} for n in names] if names else [base]
    for url in _strings(rule, "nonResourceURLs"):
        out += [{"nonResourceURLs": [url], "verbs": [verb]} for verb in verbs]
    return out


def _resource_covers(owned: list[str], resource: str) -> bool:
    if "*" in owned or resource in owned:
        return True
    return "/" in resource and f"*/{resource.split('/', 1)[1]}" in owned


def _url_covers(owned: list[str], url: str) -> bool:
    return any(o == url or (o.endswith("*") and url.startswith(o.rstrip("*"))) for o in owned)


def covers(owner: Mapping[str, Any], sub: Mapping[str, Any]) -> bool:
    """Tell whether a held rule grants everything another rule grants."""
    verbs, groups = _strings(owner, "verbs"), _strings(owner, "apiGroups")
    owner_names, sub_names = _strings(owner, "resourceNames"), _strings(sub, "resourceNames")
    return (
        ("*" in verbs or all(v in verbs for v in _strings(sub, "verbs")))
        and ("*" in groups or all(g in groups for g in _strings(sub, "apiGroups")))
        and all(
            _resource_covers(_strings(owner, "resources"), r) for r in _strings(sub, "resources")
        )
        and all(
            _url_covers(_strings(owner, "nonResourceURLs"), u)
            for u in _strings(sub, "nonResourceURLs")
        )
        and (not owner_names or all(n in owner_names for n in sub_names))
        and (bool(sub_names) or not owner_names)
    )


def _compact(rules: list[Obj]) -> list[Obj]:
    """Merge one-group, one-resource rules that differ only by verb, as the real message does."""
    merged: dict[tuple[str, str, tuple[str, ...]], Obj] = {}
    out: list[Obj] = []
    for rule in rules:
        if not rule.get("resources"):
            out.append(rule)
            continue
        key = (rule["apiGroups"][0], rule["resources"][0], tuple(rule.get("resourceNames") or []))
        if key in merged:
            merged[key]["verbs"] = [*merged[key]["verbs"], *rule["verbs"]]
        else:
            merged[key] = copy.deepcopy(rule)
            out.append(merged[key])
    return out


def compact_string(rule: Mapping[str, Any]) -> str:
    """A rule as the real server prints it: `{APIGroups:["g"], Resources:["r"], Verbs:["get"]}`."""
    parts = [
        f"{label}:{_q_list(_strings(rule, key))}"
        for label, key in (
            ("APIGroups", "apiGroups"),
            ("Resources", "resources"),
            ("NonResourceURLs", "nonResourceURLs"),
            ("ResourceNames", "resourceNames"),
            ("Verbs", "verbs"),
        )
        if rule.get(key)
    ]
    return "{" + ", ".join(parts) + "}"


def _only_gc_fields_changed(old: Obj, new: Obj) -> bool:
    volatile = ("ownerReferences", "finalizers", "managedFields", "resourceVersion")

    def strip(obj: Obj) -> Obj:
        meta = {k: v for k, v in obj.get("metadata", {}).items() if k not in volatile}
        rest = {k: v for k, v in obj.items() if k not in ("metadata", "apiVersion", "kind")}
        return {**rest, "metadata": meta}

    return strip(old) == strip(new)


# ---------------------------------------------------------------- the authorizer


@dataclass(frozen=True)
class Decision:
    """An authorization answer and its reason (`RBAC: allowed by ...`, or what failed)."""

    allowed: bool
    reason: str = ""


def _describe_subject(subject: Mapping[str, Any], namespace: str) -> str:
    if subject.get("kind") == "ServiceAccount":
        ns = str(subject.get("namespace") or namespace)
        return f"ServiceAccount {_q(str(subject.get('name', '')) + '/' + ns)}"
    return f"{subject.get('kind', '')} {_q(str(subject.get('name', '')))}"


def _applies(subject: Mapping[str, Any], user: auth.User, namespace: str) -> bool:
    kind, name = subject.get("kind"), str(subject.get("name", ""))
    if kind == "User":
        return user.name == name
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        ns = str(subject.get("namespace") or namespace)
        return bool(ns) and user.name == f"{SA_PREFIX}{ns}:{name}"
    return False


def _rbac_reason(failures: list[str]) -> str:
    if not failures:
        return ""
    return "RBAC: " + (failures[0] if len(failures) == 1 else "[" + ", ".join(failures) + "]")


class Authorizer:
    """Decides requests of one cluster from the RBAC objects in its store."""

    def __init__(self, store: Store) -> None:
        self._store = store

    # ------------------------------------------------------------ deciding

    def authorize(self, attrs: Attributes) -> Decision:
        """Decide a request: allowed by a rule of a binding that applies to the user, or not."""
        if PRIVILEGED_GROUP in attrs.user.groups:
            return Decision(True)
        failures: list[str] = []
        with self._store.lock:
            for source, rules, failure in self._visit(attrs.user, attrs.namespace):
                if failure:
                    failures.append(failure)
                if any(rule_allows(rule, attrs) for rule in rules):
                    return Decision(True, f"RBAC: allowed by {source}")
        return Decision(False, _rbac_reason(failures))

    def check(self, attrs: Attributes) -> None:
        """Let a request through or refuse it.

        Raises:
            ApiError: 403 with the real server's wording.
        """
        decision = self.authorize(attrs)
        if not decision.allowed:
            raise forbidden(attrs, decision.reason)

    def rules_for(self, user: auth.User, namespace: str) -> tuple[list[Obj], list[str]]:
        """Every rule a user holds in a namespace ("" for the cluster scope), and what failed."""
        rules: list[Obj] = []
        failures: list[str] = []
        with self._store.lock:
            for _source, found, failure in self._visit(user, namespace):
                rules += found
                if failure:
                    failures.append(failure)
        return rules, failures

    def _visit(self, user: auth.User, namespace: str) -> Iterator[tuple[str, list[Obj], str]]:
        """(description, rules, failure) of every binding that applies; call under the lock."""
        scopes = [("ClusterRoleBinding", CLUSTER_ROLE_BINDINGS, "")]
        if namespace:
            scopes.append(("RoleBinding", ROLE_BINDINGS, namespace))
        for label, key, ns in scopes:
            for binding in self._store.items(key, ns if ns else None):
                subject = next(
                    (s for s in binding.get("subjects") or [] if _applies(s, user, ns)), None
                )
                if subject is None:
                    continue
                ref = binding.get("roleRef") or {}
                meta = binding["metadata"]
                name = f"{meta['name']}/{ns}" if ns else meta["name"]
                source = (
                    f"{label} {_q(name)} of {ref.get('kind', '')} {_q(str(ref.get('name', '')))} "
                    f"to {_describe_subject(subject, ns)}"
                )
                rules, failure = self._role_rules(ref, ns)
                yield source, rules, failure

    def _role_rules(self, ref: Mapping[str, Any], namespace: str) -> tuple[list[Obj], str]:
        kind, name = ref.get("kind"), str(ref.get("name", ""))
        if kind == "Role":
            role = self._store.get(ROLES, namespace, name)
            if role is None:
                return [], f"role.{RBAC_GROUP} {_q(name)} not found"
            return list(role.get("rules") or []), ""
        if kind == "ClusterRole":
            role = self._store.get(CLUSTER_ROLES, "", name)
            if role is None:
                return [], f"clusterrole.{RBAC_GROUP} {_q(name)} not found"
            if is_aggregated(role):
                return aggregated_rules(self._store, role), ""
            return list(role.get("rules") or []), ""
        return [], f"unsupported role reference kind: {_q(str(kind))}"

    # ------------------------------------------------------------ impersonation

    def impersonate(
        self,
        user: auth.User,
        name: str,
        groups: list[str],
        uid: str = "",
        extra: Mapping[str, list[str]] | None = None,
    ) -> auth.User:
        """The identity a request acts as, after checking the `impersonate` verb for each part.

        Raises:
            ApiError: 403 for a part the user may not impersonate.
        """
        extra = dict(extra or {})
        if name.startswith(SA_PREFIX) and name.count(":") == 3:
            sa_ns, sa_name = name.split(":")[2:4]
            self.check(Attributes(user, "impersonate", sa_ns, "", "serviceaccounts", "", sa_name))
            if not groups:
                groups = ["system:serviceaccounts", f"system:serviceaccounts:{sa_ns}"]
        else:
            self.check(Attributes(user, "impersonate", resource="users", name=name))
        for group in groups:
            self.check(Attributes(user, "impersonate", resource="groups", name=group))
        if uid:
            self.check(
                Attributes(
                    user, "impersonate", group="authentication.k8s.io", resource="uids", name=uid
                )
            )
        for key, values in extra.items():
            for value in values:
                self.check(
                    Attributes(
                        user,
                        "impersonate",
                        group="authentication.k8s.io",
                        resource="userextras",
                        subresource=key,
                        name=value,
                    )
                )
        groups = list(groups)
        if name != ANONYMOUS and not {AUTHENTICATED, UNAUTHENTICATED} & set(groups):
            groups.append(AUTHENTICATED)
        elif name == ANONYMOUS and UNAUTHENTICATED not in groups:
            groups.append(UNAUTHENTICATED)
        return auth.User(name, uid, tuple(groups), extra)

    # ------------------------------------------------------------ escalation

    def confirm_grant(self, user: auth.User, plural: str, new: Obj, old: Obj | None) -> None:
        """Refuse a Role, ClusterRole or binding that grants more than its writer holds.

        Writing a role needs every rule it holds (or `escalate` on it); a binding needs every
        rule of the role it references (or `bind` on that role), in the namespace written to.
        Members of `system:masters` may write anything. Call with the store lock held.

        Raises:
            ApiError: 403 naming the rules the writer does not hold.
        """
        if PRIVILEGED_GROUP in user.groups or (old and _only_gc_fields_changed(old, new)):
            return
        meta = new["metadata"]
        ns, name = str(meta.get("namespace", "")), str(meta["name"])
        request_name = name if old is not None else ""
        if plural in ("roles", "clusterroles"):
            escalate = Attributes(user, "escalate", ns, RBAC_GROUP, plural, name=request_name)
            if self.authorize(escalate).allowed:
                return
            self._confirm_held(user, ns, list(new.get("rules") or []), plural, name)
            if plural == "clusterroles" and is_aggregated(new):
                held, _ = self.rules_for(user, "")
                if not all(any(covers(h, r) for h in held) for r in FULL_AUTHORITY):
                    raise errors.access_denied(
                        plural,
                        RBAC_GROUP,
                        name,
                        "must have cluster-admin privileges to use the aggregationRule",
                    )
            return
        ref = new.get("roleRef") or {}
        role_resource = {"Role": "roles", "ClusterRole": "clusterroles"}.get(str(ref.get("kind")))
        if role_resource is not None:
            bind = Attributes(
                user,
                "bind",
                ns,
                str(ref.get("apiGroup", "")),
                role_resource,
                name=str(ref.get("name", "")),
            )
            if self.authorize(bind).allowed:
                return
        rules, failure = self._role_rules(ref, ns)
        if failure:
            raise errors.access_denied(plural, RBAC_GROUP, name, failure)
        self._confirm_held(user, ns, rules, plural, name)

    def _confirm_held(
        self, user: auth.User, ns: str, rules: list[Obj], plural: str, name: str
    ) -> None:
        held, failures = self.rules_for(user, ns)
        missing = [
            atom
            for rule in rules
            for atom in _breakdown(rule)
            if not any(covers(h, atom) for h in held)
        ]
        if not missing:
            return
        listed = "\n".join(sorted({compact_string(r) for r in _compact(missing)}))
        why = (
            f"user {_q(user.name)} (groups={_q_list(user.groups)}) is attempting to grant RBAC "
            f"permissions not currently held:\n{listed}"
        )
        if failures:
            why += f"; resolution errors: [{' '.join(failures)}]"
        raise errors.access_denied(plural, RBAC_GROUP, name, why)

    # ------------------------------------------------------------ access reviews

    def review(self, kind: str, namespace: str, body: Any, requester: auth.User) -> Obj:
        """Answer a SelfSubjectAccessReview, SubjectAccessReview, LocalSubjectAccessReview or
        SelfSubjectRulesReview (nothing is stored).

        Raises:
            ApiError: 422 for a review that asks nothing or asks for nobody.
        """
        given = body.get("spec") if isinstance(body, dict) else None
        spec: Obj = copy.deepcopy(given) if isinstance(given, dict) else {}
        meta: Obj = {"creationTimestamp": None}
        if kind == "LocalSubjectAccessReview":
            meta["namespace"] = namespace
        if kind == "SelfSubjectRulesReview":
            status = self._rules_review(requester, str(spec.get("namespace") or ""))
        else:
            subject = requester if kind == "SelfSubjectAccessReview" else _spec_user(spec)
            self._check_review(kind, namespace, spec)
            decision = self.authorize(_review_attributes(subject, spec))
            status = {"allowed": decision.allowed}
            if decision.reason:
                status["reason"] = decision.reason
        return {
            "kind": kind,
            "apiVersion": f"{AUTHORIZATION_GROUP}/v1",
            "metadata": meta,
            "spec": spec,
            "status": status,
        }

    def _check_review(self, kind: str, namespace: str, spec: Obj) -> None:
        resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
        problems: list[FieldError] = []
        if (resource is None) == (non_resource is None):
            # As the real server words it: the union is checked at `spec`, the value shown
            # being the nonResourceAttributes as Go prints a pointer to the struct.
            shown = None
            if isinstance(non_resource, dict):
                shown = errors.Verbatim(
                    "&authorization.NonResourceAttributes{"
                    f"Path:{json.dumps(str(non_resource.get('path', '')))}, "
                    f"Verb:{json.dumps(str(non_resource.get('verb', '')))}}}"
                )
            problems.append(
                errors.invalid(
                    "spec",
                    shown,
                    "exactly one of nonResourceAttributes or resourceAttributes must be specified",
                )
            )
        if kind != "SelfSubjectAccessReview" and not spec.get("user") and not spec.get("groups"):
            problems.append(
                errors.invalid(
                    "spec.user",
                    spec.get("user", ""),
                    "at least one of user or group must be specified",
                )
            )
        if kind == "LocalSubjectAccessReview":
            asked = str((resource or {}).get("namespace", ""))
            if resource is not None and asked != namespace:
                problems.append(
                    errors.invalid(
                        "spec.resourceAttributes.namespace", asked, "must match metadata.namespace"
                    )
                )
            if non_resource is not None:
                problems.append(
                    errors.invalid(
                        "spec.nonResourceAttributes",
                        non_resource,
                        "disallowed on this kind of request",
                    )
                )
        if problems:
            # The real server names no kind here: the decoded review's TypeMeta is empty.
            raise errors.invalid_object("", AUTHORIZATION_GROUP, "", problems)

    def _rules_review(self, user: auth.User, namespace: str) -> Obj:
        rules, failures = self.rules_for(user, namespace)
        if PRIVILEGED_GROUP in user.groups:
            rules = [*copy.deepcopy(list(FULL_AUTHORITY)), *rules]
        resource_rules = [
            {k: r[k] for k in ("verbs", "apiGroups", "resources", "resourceNames") if r.get(k)}
            for r in rules
            if r.get("resources")
        ]
        non_resource_rules = [
            {"verbs": r.get("verbs") or [], "nonResourceURLs": r["nonResourceURLs"]}
            for r in rules
            if r.get("nonResourceURLs")
        ]
        status: Obj = {
            "resourceRules": resource_rules,
            "nonResourceRules": non_resource_rules,
            "incomplete": bool(failures),
        }
        if failures:
            status["evaluationError"] = "[" + ", ".join(failures) + "]"
        return status


def _spec_user(spec: Obj) -> auth.User:
    extra = spec.get("extra") or {}
    return auth.User(
        str(spec.get("user") or ""),
        str(spec.get("uid") or ""),
        tuple(str(g) for g in spec.get("groups") or []),
        {str(k): [str(v) for v in vs] for k, vs in extra.items()}
        if isinstance(extra, dict)
        else {},
    )


def _review_attributes(user: auth.User, spec: Obj) -> Attributes:
    resource = spec.get("resourceAttributes")
    if isinstance(resource, dict):
        return Attributes(
            user,
            str(resource.get("verb", "")),
            str(resource.get("namespace", "")),
            str(resource.get("group", "")),
            str(resource.get("resource", "")),
            str(resource.get("subresource", "")),
            str(resource.get("name", "")),
        )
    non_resource = spec.get("nonResourceAttributes") or {}
    return Attributes(
        user,
        str(non_resource.get("verb", "")),
        path=str(non_resource.get("path", "")),
        resource_request=False,
    )


# ---------------------------------------------------------------- validation and defaults


def default_subjects(new: Obj) -> None:
    """Default `apiGroup` of binding subjects: "" for ServiceAccount, RBAC's for User and Group."""
    for subject in new.get("subjects") or []:
        if isinstance(subject, dict) and not subject.get("apiGroup"):
            if subject.get("kind") == "ServiceAccount":
                subject.pop("apiGroup", None)
            elif subject.get("kind") in ("User", "Group"):
                subject["apiGroup"] = RBAC_GROUP


def _rule_errors(rule: Any, path: str, namespaced: bool) -> list[FieldError]:
    if not isinstance(rule, dict):
        return [errors.invalid(path, rule, "must be an object")]
    problems: list[FieldError] = []
    if not rule.get("verbs"):
        problems.append(errors.required(f"{path}.verbs", "verbs must contain at least one value"))
    urls = rule.get("nonResourceURLs")
    if urls:
        if namespaced:
            problems.append(
                errors.invalid(
                    f"{path}.nonResourceURLs",
                    urls,
                    "namespaced rules cannot apply to non-resource URLs",
                )
            )
        if rule.get("apiGroups") or rule.get("resources") or rule.get("resourceNames"):
            problems.append(
                errors.invalid(
                    f"{path}.nonResourceURLs",
                    urls,
                    "rules cannot apply to both regular resources and non-resource URLs",
                )
            )
        return problems
    if not rule.get("apiGroups"):
        problems.append(
            errors.required(
                f"{path}.apiGroups", "resource rules must supply at least one api group"
            )
        )
    if not rule.get("resources"):
        problems.append(
            errors.required(f"{path}.resources", "resource rules must supply at least one resource")
        )
    return problems


def _selector_errors(selector: Any, path: str) -> list[FieldError]:
    if not isinstance(selector, dict):
        return [errors.invalid(path, selector, "invalid label selector.")]
    problems: list[FieldError] = []
    for i, expr in enumerate(selector.get("matchExpressions") or []):
        where = f"{path}.matchExpressions[{i}]"
        op = expr.get("operator") if isinstance(expr, dict) else None
        if op not in _SELECTOR_OPERATORS:
            problems.append(
                errors.invalid(f"{where}.operator", op, "not a valid selector operator")
            )
        elif op in ("In", "NotIn") and not expr.get("values"):
            problems.append(
                errors.required(
                    f"{where}.values", "must be specified when `operator` is 'In' or 'NotIn'"
                )
            )
        elif op in ("Exists", "DoesNotExist") and expr.get("values"):
            problems.append(
                errors.forbidden(
                    f"{where}.values",
                    "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                )
            )
    return problems


def validate_role(new: Obj, old: Obj | None) -> list[FieldError]:
    """Validate a Role: every rule needs verbs, and resources or (never here) URLs."""
    return [
        p
        for i, r in enumerate(new.get("rules") or [])
        for p in _rule_errors(r, f"rules[{i}]", True)
    ]


def validate_cluster_role(new: Obj, old: Obj | None) -> list[FieldError]:
    """Validate a ClusterRole: its rules and its aggregationRule's selectors."""
    problems = [
        p
        for i, r in enumerate(new.get("rules") or [])
        for p in _rule_errors(r, f"rules[{i}]", False)
    ]
    if is_aggregated(new):
        selectors = new["aggregationRule"].get("clusterRoleSelectors") or []
        if not selectors:
            problems.append(
                errors.required(
                    "aggregationRule.clusterRoleSelectors",
                    "at least one clusterRoleSelector required if aggregationRule is non-nil",
                )
            )
        for i, selector in enumerate(selectors):
            problems += _selector_errors(selector, f"aggregationRule.clusterRoleSelectors[{i}]")
    return problems


def _validate_binding(new: Obj, old: Obj | None, *, namespaced: bool) -> list[FieldError]:
    problems: list[FieldError] = []
    ref = new.get("roleRef")
    ref = ref if isinstance(ref, dict) else {}
    if ref.get("apiGroup") != RBAC_GROUP:
        problems.append(
            errors.not_supported("roleRef.apiGroup", ref.get("apiGroup", ""), [RBAC_GROUP])
        )
    kinds = ["Role", "ClusterRole"] if namespaced else ["ClusterRole"]
    if ref.get("kind") not in kinds:
        problems.append(errors.not_supported("roleRef.kind", ref.get("kind", ""), kinds))
    if not ref.get("name"):
        problems.append(errors.required("roleRef.name"))
    else:
        problems += path_segment_errors(str(ref["name"]), "roleRef.name")
    for i, subject in enumerate(new.get("subjects") or []):
        problems += _subject_errors(subject, f"subjects[{i}]", namespaced)
    if old is not None and old.get("roleRef") != new.get("roleRef"):
        problems.append(errors.invalid("roleRef", new.get("roleRef"), "cannot change roleRef"))
    return problems


def _subject_errors(subject: Any, path: str, namespaced: bool) -> list[FieldError]:
    if not isinstance(subject, dict):
        return [errors.invalid(path, subject, "must be an object")]
    problems: list[FieldError] = []
    if not subject.get("name"):
        problems.append(errors.required(f"{path}.name"))
    kind, group = subject.get("kind"), subject.get("apiGroup", "")
    if kind == "ServiceAccount":
        if group:
            problems.append(errors.not_supported(f"{path}.apiGroup", group, [""]))
        if not namespaced and not subject.get("namespace"):
            problems.append(errors.required(f"{path}.namespace"))
    elif kind in ("User", "Group"):
        if group != RBAC_GROUP:
            problems.append(errors.not_supported(f"{path}.apiGroup", group, [RBAC_GROUP]))
    else:
        problems.append(errors.not_supported(f"{path}.kind", kind or "", _SUBJECT_KINDS))
    return problems


def validate_role_binding(new: Obj, old: Obj | None) -> list[FieldError]:
    """Validate a RoleBinding: its roleRef (immutable) and subjects."""
    return _validate_binding(new, old, namespaced=True)


def validate_cluster_role_binding(new: Obj, old: Obj | None) -> list[FieldError]:
    """Validate a ClusterRoleBinding: a ClusterRole roleRef (immutable), namespaced SAs."""
    return _validate_binding(new, old, namespaced=False)


# ---------------------------------------------------------------- bootstrap policy

_BOOTSTRAP_META: Obj = {
    "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
    "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
}
_AGGREGATE = "rbac.authorization.k8s.io/aggregate-to-"
_READ = ["get", "list", "watch"]
_WRITE = ["create", "delete", "deletecollection", "patch", "update"]
_DISCOVERY_URLS = [
    "/api",
    "/api/*",
    "/apis",
    "/apis/*",
    "/healthz",
    "/livez",
    "/openapi",
    "/openapi/*",
    "/readyz",
    "/version",
    "/version/",
]
_PUBLIC_URLS = ["/healthz", "/livez", "/readyz", "/version", "/version/"]


def _rule(group: str, resources: list[str], verbs: list[str]) -> Obj:
    return {"apiGroups": [group], "resources": resources, "verbs": verbs}


def _cluster_role(
    name: str, rules: list[Obj], labels: dict[str, str] | None = None, aggregate: str = ""
) -> Obj:
    meta = copy.deepcopy(_BOOTSTRAP_META)
    meta["name"] = name
    meta["labels"].update(labels or {})
    role: Obj = {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "ClusterRole", "metadata": meta}
    if aggregate:
        role["aggregationRule"] = {
            "clusterRoleSelectors": [{"matchLabels": {f"{_AGGREGATE}{aggregate}": "true"}}]
        }
    role["rules"] = rules
    return role


def _cluster_binding(name: str, groups: list[str]) -> Obj:
    meta = copy.deepcopy(_BOOTSTRAP_META)
    meta["name"] = name
    return {
        "apiVersion": f"{RBAC_GROUP}/v1",
        "kind": "ClusterRoleBinding",
        "metadata": meta,
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": name},
        "subjects": [{"apiGroup": RBAC_GROUP, "kind": "Group", "name": g} for g in groups],
    }


def bootstrap_policy() -> list[Obj]:
    """The ClusterRoles, then the ClusterRoleBindings, every cluster starts with.

    Aggregated roles come with the rules of the roles they aggregate already gathered.
    """
    core = ["configmaps", "secrets", "serviceaccounts", "services"]
    to_view = _cluster_role(
        "system:aggregate-to-view",
        [
            _rule("", ["configmaps", "serviceaccounts", "services", "services/status"], _READ),
            _rule("", ["events", "namespaces/status"], _READ),
            _rule("", ["namespaces"], _READ),
        ],
        {f"{_AGGREGATE}view": "true"},
    )
    to_edit = _cluster_role(
        "system:aggregate-to-edit",
        [
            _rule("", ["serviceaccounts"], ["impersonate"]),
            _rule("", ["secrets"], _READ),
            _rule("", core, _WRITE),
            _rule("", ["serviceaccounts/token"], ["create"]),
        ],
        {f"{_AGGREGATE}edit": "true"},
    )
    to_admin = _cluster_role(
        "system:aggregate-to-admin",
        [
            _rule(AUTHORIZATION_GROUP, ["localsubjectaccessreviews"], ["create"]),
            _rule(RBAC_GROUP, ["rolebindings", "roles"], [*_WRITE, *_READ]),
        ],
        {f"{_AGGREGATE}admin": "true"},
    )
    view_rules = list(to_view["rules"])
    edit_rules = [*to_edit["rules"], *view_rules]
    roles = [
        _cluster_role("cluster-admin", copy.deepcopy(list(FULL_AUTHORITY))),
        _cluster_role("admin", [*edit_rules, *to_admin["rules"]], aggregate="admin"),
        _cluster_role("edit", edit_rules, {f"{_AGGREGATE}admin": "true"}, aggregate="edit"),
        _cluster_role("view", view_rules, {f"{_AGGREGATE}edit": "true"}, aggregate="view"),
        to_admin,
        to_edit,
        to_view,
        _cluster_role("system:discovery", [{"nonResourceURLs": _DISCOVERY_URLS, "verbs": ["get"]}]),
        _cluster_role(
            "system:public-info-viewer", [{"nonResourceURLs": _PUBLIC_URLS, "verbs": ["get"]}]
        ),
        _cluster_role(
            "system:basic-user",
            [
                _rule("authentication.k8s.io", ["selfsubjectreviews"], ["create"]),
                _rule(
                    AUTHORIZATION_GROUP,
                    ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                    ["create"],
                ),
            ],
        ),
        _cluster_role(
            "system:auth-delegator",
            [
                _rule("authentication.k8s.io", ["tokenreviews"], ["create"]),
                _rule(AUTHORIZATION_GROUP, ["subjectaccessreviews"], ["create"]),
            ],
        ),
    ]
    bindings = [
        _cluster_binding("cluster-admin", [PRIVILEGED_GROUP]),
        _cluster_binding("system:basic-user", [AUTHENTICATED]),
        _cluster_binding("system:discovery", [AUTHENTICATED]),
        _cluster_binding("system:public-info-viewer", [AUTHENTICATED, UNAUTHENTICATED]),
    ]
    return [*roles, *bindings]
