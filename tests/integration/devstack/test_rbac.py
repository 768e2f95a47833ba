"""RBAC through the official client and kubectl: bindings grant, everything else is a 403.

ServiceAccount tokens are allowed only what Roles, ClusterRoles and their bindings grant, worded
as the real server words a refusal; the kubeconfig's admin stays unrestricted.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from devstack import crds
from devstack.crds import bloodraven
from devstack.kube import auth
from devstack.kube.server import ClusterServer
from devstack.tests.kube.conftest import Kubectl
from tenantdb.core.mysqldatabase.naming import IDENTITY

Obj = dict[str, Any]
TokenClient = Callable[[str], client.ApiClient]
EXAMPLE_ROLE = (
    Path(__file__).resolve().parents[3] / "charts/tenantdb/examples/mysqldatabase-caller-role.yaml"
)
DB_GROUP, DB_VERSION, DB_PLURAL = "c5c3.io", "v1alpha1", "mariadbdatabases"


def _user(ns: str, name: str) -> str:
    return f"system:serviceaccount:{ns}:{name}"


def _token(core: client.CoreV1Api, ns: str, name: str) -> str:
    core.create_namespaced_service_account(ns, {"metadata": {"name": name}})
    spec = client.V1TokenRequestSpec(audiences=[], expiration_seconds=3600)
    issued = core.create_namespaced_service_account_token(
        name, ns, client.AuthenticationV1TokenRequest(spec=spec)
    )
    token: str = issued.status.token
    return token


def _rule(
    group: str, resources: list[str], verbs: list[str], names: list[str] | None = None
) -> Obj:
    rule: Obj = {"apiGroups": [group], "resources": resources, "verbs": verbs}
    if names:
        rule["resourceNames"] = names
    return rule


def _sa(ns: str, name: str) -> Obj:
    return {"kind": "ServiceAccount", "name": name, "namespace": ns}


def _ref(kind: str, name: str) -> Obj:
    return {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name}


def _role(rbac: client.RbacAuthorizationV1Api, ns: str, name: str, *rules: Obj) -> None:
    rbac.create_namespaced_role(ns, {"metadata": {"name": name}, "rules": list(rules)})


def _cluster_role(rbac: client.RbacAuthorizationV1Api, name: str, *rules: Obj) -> None:
    rbac.create_cluster_role({"metadata": {"name": name}, "rules": list(rules)})


def _bind(
    rbac: client.RbacAuthorizationV1Api, ns: str, name: str, ref: Obj, *subjects: Obj
) -> None:
    body = {"metadata": {"name": name}, "roleRef": ref, "subjects": list(subjects)}
    rbac.create_namespaced_role_binding(ns, body)


def _cluster_bind(rbac: client.RbacAuthorizationV1Api, name: str, ref: Obj, *subjects: Obj) -> None:
    body = {"metadata": {"name": name}, "roleRef": ref, "subjects": list(subjects)}
    rbac.create_cluster_role_binding(body)


def _denied(call: Callable[[], Any]) -> Obj:
    with pytest.raises(ApiException) as err:
        call()
    assert err.value.status == 403, err.value.body
    status: Obj = json.loads(err.value.body)
    assert status["reason"] == "Forbidden"
    assert status["code"] == 403
    return status


def _cm(name: str) -> Obj:
    return {"metadata": {"name": name}, "data": {"k": "v"}}


@pytest.fixture
def rbac(api_client: client.ApiClient) -> client.RbacAuthorizationV1Api:
    """RbacAuthorizationV1Api as the admin."""
    return client.RbacAuthorizationV1Api(api_client)


@pytest.fixture
def other_namespace(core: client.CoreV1Api) -> str:
    """A second fresh namespace."""
    name = f"o-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    return name


# ---------------------------------------------------------------- no bindings


def test_a_service_account_without_bindings_is_denied(
    core: client.CoreV1Api, namespace: str, client_with_token: TokenClient
) -> None:
    token = _token(core, namespace, "nobody")
    core.create_namespaced_secret(namespace, {"metadata": {"name": "x"}, "stringData": {"a": "b"}})
    as_sa = client.CoreV1Api(client_with_token(token))
    who = _user(namespace, "nobody")

    listed = _denied(lambda: as_sa.list_namespaced_secret(namespace))
    assert listed["message"] == (
        f'secrets is forbidden: User "{who}" cannot list resource "secrets" in API group "" in '
        f'the namespace "{namespace}"'
    )
    assert listed["details"] == {"kind": "secrets"}
    got = _denied(lambda: as_sa.read_namespaced_secret("x", namespace))
    assert got["message"] == (
        f'secrets "x" is forbidden: User "{who}" cannot get resource "secrets" in API group "" '
        f'in the namespace "{namespace}"'
    )
    assert got["details"] == {"name": "x", "kind": "secrets"}
    cluster_wide = _denied(as_sa.list_namespace)
    assert cluster_wide["message"] == (
        f'namespaces is forbidden: User "{who}" cannot list resource "namespaces" in API group "" '
        "at the cluster scope"
    )
    created = _denied(lambda: as_sa.create_namespaced_config_map(namespace, _cm("c")))
    assert "cannot create resource" in created["message"]
    # Discovery and /version stay open to every authenticated user (system:discovery).
    assert client.VersionApi(client_with_token(token)).get_code().major == "1"
    assert {r.name for r in as_sa.get_api_resources().resources} >= {"secrets", "configmaps"}
    # A resource type that does not exist is refused before it is looked up, as for real.
    path = f"/api/v1/namespaces/{namespace}/nonesuch"
    with pytest.raises(ApiException) as err:
        client_with_token(token).call_api(path, "GET", auth_settings=["BearerToken"])
    assert err.value.status == 403


def test_the_admin_is_unrestricted_and_in_system_masters(
    core: client.CoreV1Api, namespace: str, rbac: client.RbacAuthorizationV1Api
) -> None:
    assert "system:masters" in auth.ADMIN.groups
    core.list_namespaced_secret(namespace)
    names = {r.metadata.name for r in rbac.list_cluster_role().items}
    assert {"cluster-admin", "admin", "edit", "view", "system:discovery"} <= names
    binding = rbac.read_cluster_role_binding("cluster-admin")
    assert [(s.kind, s.name) for s in binding.subjects] == [("Group", "system:masters")]


# ---------------------------------------------------------------- Role, ClusterRole, bindings


def test_role_binding_grants_exactly_its_verbs_in_its_namespace(
    core: client.CoreV1Api,
    rbac: client.RbacAuthorizationV1Api,
    namespace: str,
    other_namespace: str,
    client_with_token: TokenClient,
) -> None:
    token = _token(core, namespace, "reader")
    _role(rbac, namespace, "cm-reader", _rule("", ["configmaps"], ["get", "list"]))
    _bind(rbac, namespace, "cm-reader", _ref("Role", "cm-reader"), _sa(namespace, "reader"))
    core.create_namespaced_config_map(namespace, _cm("here"))
    core.create_namespaced_config_map(other_namespace, _cm("there"))
    as_sa = client.CoreV1Api(client_with_token(token))

    assert [c.metadata.name for c in as_sa.list_namespaced_config_map(namespace).items] == ["here"]
    assert as_sa.read_namespaced_config_map("here", namespace).data == {"k": "v"}
    _denied(lambda: as_sa.create_namespaced_config_map(namespace, _cm("new")))
    _denied(lambda: as_sa.patch_namespaced_config_map("here", namespace, {"data": {"k": "w"}}))
    _denied(lambda: as_sa.delete_namespaced_config_map("here", namespace))
    _denied(lambda: as_sa.list_namespaced_secret(namespace))
    elsewhere = _denied(lambda: as_sa.list_namespaced_config_map(other_namespace))
    assert elsewhere["message"].endswith(f'in the namespace "{other_namespace}"')
    _denied(as_sa.list_config_map_for_all_namespaces)


def test_cluster_role_binding_grants_in_every_namespace(
    core: client.CoreV1Api,
    rbac: client.RbacAuthorizationV1Api,
    namespace: str,
    other_namespace: str,
    client_with_token: TokenClient,
) -> None:
    token = _token(core, namespace, "auditor")
    _cluster_role(rbac, "secret-lister", _rule("", ["secrets", "namespaces"], ["list"]))
    _cluster_bind(
        rbac, "secret-lister", _ref("ClusterRole", "secret-lister"), _sa(namespace, "auditor")
    )
    as_sa = client.CoreV1Api(client_with_token(token))

    as_sa.list_namespaced_secret(namespace)
    as_sa.list_namespaced_secret(other_namespace)
    as_sa.list_secret_for_all_namespaces()
    assert namespace in {n.metadata.name for n in as_sa.list_namespace().items}
    _denied(lambda: as_sa.read_namespaced_secret("any", namespace))


def test_role_binding_to_a_cluster_role_is_scoped_to_its_namespace(
    core: client.CoreV1Api,
    rbac: client.RbacAuthorizationV1Api,
    namespace: str,
    other_namespace: str,
    client_with_token: TokenClient,
) -> None:
    token = _token(core, namespace, "local")
    _cluster_role(rbac, "cm-lister", _rule("", ["configmaps"], ["list"]))
    _bind(rbac, namespace, "cm-lister", _ref("ClusterRole", "cm-lister"), _sa(namespace, "local"))
    as_sa = client.CoreV1Api(client_with_token(token))

    as_sa.list_namespaced_config_map(namespace)
    _denied(lambda: as_sa.list_namespaced_config_map(other_namespace))
    cluster = _denied(as_sa.list_config_map_for_all_namespaces)
    assert cluster["message"].endswith("at the cluster scope")


def test_bootstrap_view_role_aggregates_and_leaves_secrets_out(
    core: client.CoreV1Api,
    rbac: client.RbacAuthorizationV1Api,
    namespace: str,
    client_with_token: TokenClient,
) -> None:
    token = _token(core, namespace, "viewer")
    _bind(rbac, namespace, "view", _ref("ClusterRole", "view"), _sa(namespace, "viewer"))
    as_sa = client.CoreV1Api(client_with_token(token))
    as_sa.list_namespaced_config_map(namespace)
    assert as_sa.read_namespace(namespace).metadata.name == namespace
    _denied(lambda: as_sa.list_namespaced_secret(namespace))
    _denied(lambda: as_sa.create_namespaced_config_map(namespace, _cm("c")))


def test_aggregated_cluster_role_gathers_the_rules_it_selects(
    server: ClusterServer,
    core: client.CoreV1Api,
    rbac: client.RbacAuthorizationV1Api,
    namespace: str,
    client_with_token: TokenClient,
) -> None:
    token = _token(core, namespace, "gathered")
    rbac.create_cluster_role(
        {
            "metadata": {"name": "gathering"},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"gather": "yes"}}]},
        }
    )
    _cluster_bind(rbac, "gathering", _ref("ClusterRole", "gathering"), _sa(namespace, "gathered"))
    as_sa = client.CoreV1Api(client_with_token(token))
    _denied(lambda: as_sa.list_namespaced_config_map(namespace))
    rbac.create_cluster_role(
        {
            "metadata": {"name": "piece", "labels": {"gather": "yes"}},
            "rules": [_rule("", ["configmaps"], ["list"])],
        }
    )
    as_sa.list_namespaced_config_map(namespace)
    assert server.cluster.wait_idle()
    rules = rbac.read_cluster_role("gathering").rules
    assert [(r.resources, r.verbs) for r in rules] == [(["configmaps"], ["list"])]


def test_resource_names_narrow_a_rule(
    core: client.CoreV1Api,
    rbac: client.RbacAuthorizationV1Api,
    namespace: str,
    client_with_token: TokenClient,
) -> None:
    token = _token(core, namespace, "narrow")
    for name in ("allowed", "other"):
        core.create_namespaced_secret(namespace, {"metadata": {"name": name}})
    _role(rbac, namespace, "one", _rule("", ["secrets"], ["get", "list"], ["allowed"]))
    _bind(rbac, namespace, "one", _ref("Role", "one"), _sa(namespace, "narrow"))
    as_sa = client.CoreV1Api(client_with_token(token))

    assert as_sa.read_namespaced_secret("allowed", namespace).metadata.name == "allowed"
    other = _denied(lambda: as_sa.read_namespaced_secret("other", namespace))
    assert other["details"]["name"] == "other"
    _denied(lambda: as_sa.list_namespaced_secret(namespace))
    # A list pinned to the name by a field selector is a request for that name.
    pinned = as_sa.list_namespaced_secret(namespace, field_selector="metadata.name=allowed")
    assert [s.metadata.name for s in pinned.items] == ["allowed"]


def test_a_subresource_rule_is_distinct_from_its_resource(
    core: client.CoreV1Api,
    rbac: client.RbacAuthorizationV1Api,
    custom: client.CustomObjectsApi,
    db_crd: Obj,
    namespace: str,
    client_with_token: TokenClient,
) -> None:
    spec_token = _token(core, namespace, "spec-writer")
    status_token = _token(core, namespace, "status-writer")
    body = {
        "apiVersion": f"{DB_GROUP}/{DB_VERSION}",
        "kind": "MariaDBDatabase",
        "metadata": {"name": "orders"},
        "spec": {"databaseName": "orders"},
    }
    custom.create_namespaced_custom_object(DB_GROUP, DB_VERSION, namespace, DB_PLURAL, body)
    _role(rbac, namespace, "spec", _rule(DB_GROUP, [DB_PLURAL], ["get", "update", "patch"]))
    _role(rbac, namespace, "status", _rule(DB_GROUP, [f"{DB_PLURAL}/status"], ["get", "patch"]))
    _bind(rbac, namespace, "spec", _ref("Role", "spec"), _sa(namespace, "spec-writer"))
    _bind(rbac, namespace, "status", _ref("Role", "status"), _sa(namespace, "status-writer"))
    spec_writer = client.CustomObjectsApi(client_with_token(spec_token))
    status_writer = client.CustomObjectsApi(client_with_token(status_token))
    args = (DB_GROUP, DB_VERSION, namespace, DB_PLURAL, "orders")
    status_patch = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}

    spec_writer.patch_namespaced_custom_object(*args, {"spec": {"sizeGi": 2}})
    refused = _denied(
        lambda: spec_writer.patch_namespaced_custom_object_status(*args, status_patch)
    )
    assert refused["message"] == (
        f'{DB_PLURAL}.{DB_GROUP} "orders" is forbidden: User '
        f'"{_user(namespace, "spec-writer")}" cannot patch resource "{DB_PLURAL}/status" in API '
        f'group "{DB_GROUP}" in the namespace "{namespace}"'
    )
    assert refused["details"] == {"name": "orders", "group": DB_GROUP, "kind": DB_PLURAL}

    status_writer.patch_namespaced_custom_object_status(*args, status_patch)
    assert status_writer.get_namespaced_custom_object_status(*args)["status"]["conditions"]
    _denied(lambda: status_writer.get_namespaced_custom_object(*args))
    _denied(lambda: status_writer.patch_namespaced_custom_object(*args, {"spec": {"sizeGi": 3}}))


def test_a_wildcard_subresource_rule_matches_every_resource(
    core: client.CoreV1Api,
    rbac: client.RbacAuthorizationV1Api,
    namespace: str,
    client_with_token: TokenClient,
) -> None:
    token = _token(core, namespace, "status-reader")
    _role(rbac, namespace, "any-status", _rule("", ["*/status"], ["get"]))
    _bind(
        rbac, namespace, "any-status", _ref("Role", "any-status"), _sa(namespace, "status-reader")
    )
    as_sa = client.CoreV1Api(client_with_token(token))
    assert as_sa.read_namespace_status(namespace).metadata.name == namespace
    _denied(lambda: as_sa.read_namespace(namespace))


def test_watch_needs_the_watch_verb(
    core: client.CoreV1Api,
    rbac: client.RbacAuthorizationV1Api,
    namespace: str,
    client_with_token: TokenClient,
) -> None:
    token = _token(core, namespace, "watcher")
    _role(rbac, namespace, "read", _rule("", ["configmaps"], ["get", "list"]))
    _bind(rbac, namespace, "read", _ref("Role", "read"), _sa(namespace, "watcher"))
    core.create_namespaced_config_map(namespace, _cm("seen"))
    as_sa = client.CoreV1Api(client_with_token(token))
    as_sa.list_namespaced_config_map(namespace)
    with pytest.raises(ApiException) as err:
        list(watch.Watch().stream(as_sa.list_namespaced_config_map, namespace, timeout_seconds=1))
    assert err.value.status == 403

    _role(rbac, namespace, "watch", _rule("", ["configmaps"], ["watch"]))
    _bind(rbac, namespace, "watch", _ref("Role", "watch"), _sa(namespace, "watcher"))
    events = list(
        watch.Watch().stream(as_sa.list_namespaced_config_map, namespace, timeout_seconds=1)
    )
    assert [(e["type"], e["object"].metadata.name) for e in events] == [("ADDED", "seen")]


def test_a_binding_to_a_missing_role_says_so(
    core: client.CoreV1Api,
    rbac: client.RbacAuthorizationV1Api,
    namespace: str,
    client_with_token: TokenClient,
) -> None:
    token = _token(core, namespace, "orphan")
    _bind(rbac, namespace, "ghost", _ref("Role", "ghost"), _sa(namespace, "orphan"))
    as_sa = client.CoreV1Api(client_with_token(token))
    status = _denied(lambda: as_sa.list_namespaced_config_map(namespace))
    assert status["message"].endswith(': RBAC: role.rbac.authorization.k8s.io "ghost" not found')


def test_user_and_group_subjects(
    core: client.CoreV1Api,
    rbac: client.RbacAuthorizationV1Api,
    namespace: str,
    client_with_token: TokenClient,
) -> None:
    first, second = _token(core, namespace, "first"), _token(core, namespace, "second")
    _role(rbac, namespace, "list-cm", _rule("", ["configmaps"], ["list"]))
    _role(rbac, namespace, "list-secrets", _rule("", ["secrets"], ["list"]))
    user = {"kind": "User", "name": _user(namespace, "first")}
    group = {"kind": "Group", "name": f"system:serviceaccounts:{namespace}"}
    _bind(rbac, namespace, "user", _ref("Role", "list-cm"), user)
    _bind(rbac, namespace, "group", _ref("Role", "list-secrets"), group)
    as_first = client.CoreV1Api(client_with_token(first))
    as_second = client.CoreV1Api(client_with_token(second))
    as_first.list_namespaced_config_map(namespace)
    _denied(lambda: as_second.list_namespaced_config_map(namespace))
    as_first.list_namespaced_secret(namespace)
    as_second.list_namespaced_secret(namespace)
    # The User and Group subjects were given the RBAC group by default.
    subjects = rbac.read_namespaced_role_binding("user", namespace).subjects
    assert subjects[0].api_group == "rbac.authorization.k8s.io"


def test_server_side_apply_that_creates_also_needs_create(
    core: client.CoreV1Api,
    rbac: client.RbacAuthorizationV1Api,
    namespace: str,
    client_with_token: TokenClient,
) -> None:
    token = _token(core, namespace, "applier")
    _role(rbac, namespace, "patch", _rule("", ["configmaps"], ["get", "patch"]))
    _bind(rbac, namespace, "patch", _ref("Role", "patch"), _sa(namespace, "applier"))
    as_sa = client.CoreV1Api(client_with_token(token))
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "b"}}

    def apply() -> Any:
        return as_sa.patch_namespaced_config_map(
            "c", namespace, body, field_manager="t", _content_type="application/apply-patch+yaml"
        )

    status = _denied(apply)
    assert status["details"] == {"name": "c", "kind": "configmaps"}
    core.create_namespaced_config_map(namespace, _cm("c"))
    assert apply().data == {"a": "b", "k": "v"}


# ---------------------------------------------------------------- validation and escalation


def test_rbac_objects_are_validated(rbac: client.RbacAuthorizationV1Api, namespace: str) -> None:
    with pytest.raises(ApiException) as err:
        _role(rbac, namespace, "no-verbs", {"apiGroups": [""], "resources": ["pods"]})
    assert err.value.status == 422
    assert (
        "rules[0].verbs: Required value: verbs must contain at least one value"
        in json.loads(err.value.body)["message"]
    )
    _role(rbac, namespace, "system:colons-are-fine", _rule("", ["pods"], ["get"]))
    _bind(rbac, namespace, "b", _ref("Role", "system:colons-are-fine"), _sa(namespace, "x"))
    with pytest.raises(ApiException) as err:
        rbac.patch_namespaced_role_binding("b", namespace, {"roleRef": _ref("Role", "other")})
    assert err.value.status == 422
    assert "roleRef: Invalid value" in json.loads(err.value.body)["message"]
    assert "cannot change roleRef" in json.loads(err.value.body)["message"]
    with pytest.raises(ApiException) as err:
        _cluster_bind(
            rbac,
            "sa-without-ns",
            _ref("ClusterRole", "view"),
            {"kind": "ServiceAccount", "name": "x"},
        )
    assert "subjects[0].namespace: Required value" in json.loads(err.value.body)["message"]


def test_roles_and_bindings_cannot_grant_more_than_the_writer_holds(
    core: client.CoreV1Api,
    rbac: client.RbacAuthorizationV1Api,
    namespace: str,
    client_with_token: TokenClient,
) -> None:
    token = _token(core, namespace, "delegate")
    who = _user(namespace, "delegate")
    _role(
        rbac,
        namespace,
        "delegate",
        _rule("rbac.authorization.k8s.io", ["roles", "rolebindings"], ["create", "get"]),
        _rule("", ["configmaps"], ["get", "list"]),
    )
    _bind(rbac, namespace, "delegate", _ref("Role", "delegate"), _sa(namespace, "delegate"))
    as_sa = client.RbacAuthorizationV1Api(client_with_token(token))

    _role(as_sa, namespace, "held", _rule("", ["configmaps"], ["get"]))
    _bind(as_sa, namespace, "held", _ref("Role", "held"), _sa(namespace, "someone"))
    status = _denied(
        lambda: _role(as_sa, namespace, "more", _rule("", ["secrets"], ["get", "list"]))
    )
    assert status["message"] == (
        f'roles.rbac.authorization.k8s.io "more" is forbidden: user "{who}" '
        f'(groups=["system:serviceaccounts" "system:serviceaccounts:{namespace}" '
        '"system:authenticated"]) is attempting to grant RBAC permissions not currently held:\n'
        '{APIGroups:[""], Resources:["secrets"], Verbs:["get" "list"]}'
    )
    _denied(
        lambda: _bind(as_sa, namespace, "admin", _ref("ClusterRole", "admin"), _sa(namespace, "x"))
    )
    # `bind` on a role lets one bind it without holding its rules.
    _role(
        rbac,
        namespace,
        "may-bind-admin",
        _rule("rbac.authorization.k8s.io", ["clusterroles"], ["bind"], ["admin"]),
    )
    _bind(
        rbac,
        namespace,
        "may-bind-admin",
        _ref("Role", "may-bind-admin"),
        _sa(namespace, "delegate"),
    )
    _bind(as_sa, namespace, "admin", _ref("ClusterRole", "admin"), _sa(namespace, "x"))


# ---------------------------------------------------------------- access reviews and kubectl


def test_self_subject_access_review_answers_for_the_caller(
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    rbac: client.RbacAuthorizationV1Api,
    namespace: str,
    client_with_token: TokenClient,
) -> None:
    token = _token(core, namespace, "asker")
    _role(rbac, namespace, "cm", _rule("", ["configmaps"], ["list"]))
    _bind(rbac, namespace, "cm", _ref("Role", "cm"), _sa(namespace, "asker"))
    reviews = client.AuthorizationV1Api(client_with_token(token))

    def ask(resource: str) -> client.V1SubjectAccessReviewStatus:
        attrs = client.V1ResourceAttributes(namespace=namespace, verb="list", resource=resource)
        review = client.V1SelfSubjectAccessReview(
            spec=client.V1SelfSubjectAccessReviewSpec(resource_attributes=attrs)
        )
        answer: client.V1SubjectAccessReviewStatus = reviews.create_self_subject_access_review(
            review
        ).status
        return answer

    allowed = ask("configmaps")
    assert allowed.allowed is True
    assert allowed.reason == (
        f'RBAC: allowed by RoleBinding "cm/{namespace}" of Role "cm" to ServiceAccount '
        f'"asker/{namespace}"'
    )
    assert ask("secrets").allowed is False
    # The admin asks the same question for the ServiceAccount (SubjectAccessReview).
    sar = client.AuthorizationV1Api(api_client).create_subject_access_review(
        {
            "spec": {
                "user": _user(namespace, "asker"),
                "groups": ["system:serviceaccounts", "system:authenticated"],
                "resourceAttributes": {
                    "namespace": namespace,
                    "verb": "list",
                    "resource": "configmaps",
                },
            }
        }
    )
    assert sar.status.allowed is True
    with pytest.raises(ApiException) as err:
        client.AuthorizationV1Api(api_client).create_subject_access_review(
            {"spec": {"user": "someone"}}
        )
    assert err.value.status == 422
    assert "exactly one of nonResourceAttributes or resourceAttributes" in err.value.body
    rules = reviews.create_self_subject_rules_review(
        client.V1SelfSubjectRulesReview(
            spec=client.V1SelfSubjectRulesReviewSpec(namespace=namespace)
        )
    ).status
    assert any(r.resources == ["configmaps"] for r in rules.resource_rules)


def test_kubectl_auth_can_i_and_forbidden_for_a_service_account(
    kubectl: Kubectl,
    core: client.CoreV1Api,
    db_crd: Obj,
    namespace: str,
    other_namespace: str,
) -> None:
    token = _token(core, namespace, "cli")
    # kubectl create sends RBAC objects in protobuf.
    for args in (
        ("role", "cm", "--verb=get,list", "--resource=configmaps"),
        ("role", "db", "--verb=update", f"--resource={DB_PLURAL}.{DB_GROUP}"),
        ("rolebinding", "cm", "--role=cm", f"--serviceaccount={namespace}:cli"),
        ("rolebinding", "db", "--role=db", f"--serviceaccount={namespace}:cli"),
    ):
        made = kubectl("-n", namespace, "create", *args)
        assert made.returncode == 0, made.stderr
    whoami = kubectl(f"--token={token}", "auth", "whoami", "-o", "json")
    assert whoami.returncode == 0, whoami.stderr
    assert json.loads(whoami.stdout)["status"]["userInfo"]["username"] == _user(namespace, "cli")

    def can_i(*args: str) -> tuple[int, str]:
        done = kubectl(f"--token={token}", "-n", namespace, "auth", "can-i", *args)
        return done.returncode, done.stdout.strip()

    assert can_i("list", "configmaps") == (0, "yes")
    assert can_i("get", "configmaps", "-n", other_namespace) == (1, "no")
    assert can_i("list", "secrets") == (1, "no")
    assert can_i("update", "mariadbdatabases") == (0, "yes")
    assert can_i("update", "mariadbdatabases", "--subresource=status") == (1, "no")
    assert can_i("create", "selfsubjectaccessreviews.authorization.k8s.io") == (0, "yes")

    listed = kubectl(f"--token={token}", "-n", namespace, "get", "configmaps")
    assert listed.returncode == 0, listed.stderr
    refused = kubectl(f"--token={token}", "-n", namespace, "get", "secrets")
    assert refused.returncode != 0
    assert (
        f'Error from server (Forbidden): secrets is forbidden: User "{_user(namespace, "cli")}" '
        f'cannot list resource "secrets" in API group "" in the namespace "{namespace}"'
    ) in refused.stderr


def test_kubectl_as_impersonates_and_impersonation_is_authorized(
    kubectl: Kubectl, core: client.CoreV1Api, namespace: str
) -> None:
    token = _token(core, namespace, "plain")
    sa = _user(namespace, "plain")
    as_sa = kubectl(f"--as={sa}", "-n", namespace, "get", "secrets")
    assert as_sa.returncode != 0
    assert f'User "{sa}" cannot list resource "secrets"' in as_sa.stderr
    assert (
        kubectl(f"--as={sa}", "-n", namespace, "auth", "can-i", "get", "secrets").stdout.strip()
        == "no"
    )
    refused = kubectl(f"--token={token}", "--as=bob", "-n", namespace, "get", "secrets")
    assert (
        f'Error from server (Forbidden): users "bob" is forbidden: User "{sa}" cannot impersonate '
        'resource "users" in API group "" at the cluster scope'
    ) in refused.stderr


def test_kubectl_prints_rbac_tables(
    kubectl: Kubectl, rbac: client.RbacAuthorizationV1Api, namespace: str
) -> None:
    _role(rbac, namespace, "r", _rule("", ["configmaps"], ["get"]))
    _bind(
        rbac, namespace, "b", _ref("Role", "r"), _sa(namespace, "x"), {"kind": "User", "name": "u"}
    )
    table = kubectl("-n", namespace, "get", "rolebindings", "-o", "wide")
    assert table.returncode == 0, table.stderr
    header, row = table.stdout.splitlines()[:2]
    assert header.split() == ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"]
    assert row.split()[:2] == ["b", "Role/r"]
    assert f"{namespace}/x" in row
    roles = kubectl("-n", namespace, "get", "roles")
    assert roles.stdout.splitlines()[0].split() == ["NAME", "CREATED", "AT"]


# ---------------------------------------------------------------- the example caller Role


@pytest.fixture
def bloodraven_cluster(server: ClusterServer, core: client.CoreV1Api) -> ClusterServer:
    """The management CRDs, the namespace `bloodraven` and a failover group's Secret in it."""
    crds.install(server.cluster, crds.management_crds())
    core.create_namespace({"metadata": {"name": "bloodraven"}})
    core.create_namespaced_secret(
        "bloodraven", {"metadata": {"name": "main-operator"}, "stringData": {"password": "p"}}
    )
    return server


def test_the_example_caller_role_grants_what_it_says_and_no_more(
    bloodraven_cluster: ClusterServer,
    kubectl: Kubectl,
    custom: client.CustomObjectsApi,
    client_with_token: TokenClient,
) -> None:
    ns = "bloodraven"
    applied = kubectl("apply", "-f", str(EXAMPLE_ROLE))
    assert applied.returncode == 0, applied.stderr
    cluster = bloodraven_cluster.cluster
    cluster.create(
        "serviceaccounts", {"metadata": {"name": "tenant-provisioner"}}, ns, manager="test"
    )
    token = cluster.issue_token(ns, "tenant-provisioner")
    who = _user(ns, "tenant-provisioner")
    caller = client.CustomObjectsApi(client_with_token(token))
    core = client.CoreV1Api(client_with_token(token))
    api = (IDENTITY.group, IDENTITY.version, ns, IDENTITY.plural)
    body: Obj = {
        "apiVersion": IDENTITY.api_version,
        "kind": IDENTITY.kind,
        "metadata": {"name": "tenant-acme"},
        "spec": {
            "groupRef": {"name": "main"},
            "databaseName": "acme_wms",
            "owner": {"secretName": "acme-mysql-owner"},
        },
    }

    made = caller.create_namespaced_custom_object(*api, body)
    assert (
        caller.get_namespaced_custom_object(*api, "tenant-acme")["metadata"]["uid"]
        == (made["metadata"]["uid"])
    )
    listed = caller.list_namespaced_custom_object(*api)
    assert [o["metadata"]["name"] for o in listed["items"]] == ["tenant-acme"]
    events = list(
        watch.Watch().stream(caller.list_namespaced_custom_object, *api, timeout_seconds=1)
    )
    assert [e["type"] for e in events] == ["ADDED"]
    current = caller.get_namespaced_custom_object(*api, "tenant-acme")
    current["metadata"]["labels"] = {"team": "acme"}
    caller.replace_namespaced_custom_object(*api, "tenant-acme", current)
    caller.patch_namespaced_custom_object(*api, "tenant-acme", {"metadata": {"labels": {"x": "y"}}})
    caller.get_namespaced_custom_object_status(*api, "tenant-acme")

    status = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    refused = _denied(
        lambda: caller.patch_namespaced_custom_object_status(*api, "tenant-acme", status)
    )
    assert refused["message"] == (
        f'mysqldatabases.shipstream.io "tenant-acme" is forbidden: User "{who}" cannot patch '
        'resource "mysqldatabases/status" in API group "shipstream.io" in the namespace '
        '"bloodraven"'
    )
    current = caller.get_namespaced_custom_object_status(*api, "tenant-acme")
    current["status"] = status["status"]
    _denied(lambda: caller.replace_namespaced_custom_object_status(*api, "tenant-acme", current))

    secret = _denied(lambda: core.read_namespaced_secret("main-operator", ns))
    assert secret["message"] == (
        f'secrets "main-operator" is forbidden: User "{who}" cannot get resource "secrets" in '
        'API group "" in the namespace "bloodraven"'
    )
    assert secret["details"] == {"name": "main-operator", "kind": "secrets"}
    secrets = _denied(lambda: core.list_namespaced_secret(ns))
    assert secrets["message"] == (
        f'secrets is forbidden: User "{who}" cannot list resource "secrets" in API group "" in '
        'the namespace "bloodraven"'
    )
    groups = (bloodraven.GROUP, bloodraven.VERSION, ns, bloodraven.PLURAL)
    _denied(lambda: caller.list_namespaced_custom_object(*groups))
    _denied(lambda: caller.get_namespaced_custom_object(*groups, "main"))

    def can_i(*args: str) -> str:
        return kubectl(f"--token={token}", "-n", ns, "auth", "can-i", *args).stdout.strip()

    for verb in ("create", "get", "list", "watch", "update", "patch", "delete"):
        assert can_i(verb, "mysqldatabases.shipstream.io") == "yes", verb
    assert can_i("get", "mysqldatabases.shipstream.io", "--subresource=status") == "yes"
    assert can_i("update", "mysqldatabases.shipstream.io", "--subresource=status") == "no"
    assert can_i("get", "secrets") == "no"
    assert can_i("list", "mysqlfailovergroups.shipstream.io") == "no"

    provisioner = auth.service_account_user(ns, "tenant-provisioner")
    assert cluster.authorize(provisioner, "delete", "mysqldatabases.shipstream.io", ns)
    assert not cluster.authorize(provisioner, "get", "secrets", ns, "main-operator")
    caller.delete_namespaced_custom_object(*api, "tenant-acme")
    data = yaml.safe_load_all(EXAMPLE_ROLE.read_text(encoding="utf-8"))
    assert {d["kind"] for d in data} == {"Role", "RoleBinding"}
