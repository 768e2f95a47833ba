"""The chart's example caller Role on a real kube-apiserver: what a caller bound to it may do.

`charts/tenantdb/examples/mysqldatabase-caller-role.yaml` is the Role (and RoleBinding) a
platform applies where callers declare MysqlDatabases. The tests give its ServiceAccount,
`tenant-provisioner`, a real token and check that it declares, reads, watches, edits and deletes
its MysqlDatabases, reads their status but cannot write it (not even through an update of the
whole object), and reads no Secret, no MysqlFailoverGroup and no MariaDBDatabase; a table of
SubjectAccessReviews pins every grant and every absence at once. The chart's MariaDBDatabase
CRD is checked likewise: its status is a subresource, so a Role granting update on the orders
leaves their status out.

The CRDs are the chart's (`charts/tenantdb/crds`) and Bloodraven's MysqlFailoverGroup; one API
server serves the module, and each test works in namespaces of its own.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import secrets
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from devstack import crds
from devstack.crds import bloodraven
from tenantdb.core.mysqldatabase.naming import IDENTITY
from tests.realclusters import ApiServer, start_servers, write_kubeconfig

Obj = dict[str, Any]
REPO = Path(__file__).resolve().parents[2]
EXAMPLE_ROLE = REPO / "charts/tenantdb/examples/mysqldatabase-caller-role.yaml"
KUBECTL = str(REPO / ".venv/bin/kubectl")
SHIPPED_NAMESPACE = "bloodraven"
CALLER = "tenant-provisioner"
ROLE_NAME = "tenantdb-mysqldatabase-caller"
MYSQL_ORDERS = f"{IDENTITY.plural}.{IDENTITY.group}"
MARIADB_GROUP, MARIADB_VERSION, MARIADB_PLURAL = "c5c3.io", "v1alpha1", "mariadbdatabases"
MARIADB_ORDERS = f"{MARIADB_PLURAL}.{MARIADB_GROUP}"
OPERATOR_SECRET = "main-operator"
OWNER_SECRET = "acme-mysql-owner"


# ------------------------------------------------------------------------------ the cluster


@dataclass
class Cluster:
    """The module's API server, an admin kubeconfig for it and an admin ApiClient."""

    server: ApiServer
    kubeconfig: Path
    admin: client.ApiClient

    def token_client(self, token: str) -> client.ApiClient:
        """An ApiClient that presents only `token` (no client certificate)."""
        cfg = client.Configuration(host=self.server.url)
        cfg.ssl_ca_cert = str(self.server.real.pki.ca_cert)
        cfg.api_key = {"BearerToken": f"Bearer {token}"}
        return client.ApiClient(cfg)

    def caller_kubeconfig(self, path: Path, namespace: str, token: str) -> Path:
        """A kubeconfig whose only user is the caller's token, its namespace the current one."""
        ca = base64.b64encode(self.server.real.pki.ca_cert.read_bytes()).decode()
        document = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "management",
                    "cluster": {"server": self.server.url, "certificate-authority-data": ca},
                }
            ],
            "users": [{"name": CALLER, "user": {"token": token}}],
            "contexts": [
                {
                    "name": "caller",
                    "context": {"cluster": "management", "user": CALLER, "namespace": namespace},
                }
            ],
            "current-context": "caller",
        }
        path.write_text(yaml.safe_dump(document))
        path.chmod(0o600)
        return path


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A real kube-apiserver serving the chart's CRDs and Bloodraven's MysqlFailoverGroup."""
    directory = tmp_path_factory.mktemp("rbac")
    with start_servers(directory / "servers", ("management",)) as servers:
        server = servers["management"]
        server.install(
            crds.mysqldatabase_crd(),
            crds.mariadbdatabase_crd(),
            bloodraven.mysql_failover_group(),
        )
        path = directory / "kubeconfig"
        write_kubeconfig(path, servers)
        admin = config.new_client_from_config(config_file=str(path), context="management")
        try:
            yield Cluster(server, path, admin)
        finally:
            admin.close()


@pytest.fixture
def token_client(cluster: Cluster) -> Iterator[Callable[[str], client.ApiClient]]:
    """Build ApiClients presenting a ServiceAccount token; closed after the test."""
    made: list[client.ApiClient] = []

    def build(token: str) -> client.ApiClient:
        api = cluster.token_client(token)
        made.append(api)
        return api

    yield build
    for api in made:
        api.close()


def _new_namespace(cluster: Cluster, name: str = "") -> str:
    name = name or f"t-{secrets.token_hex(4)}"
    client.CoreV1Api(cluster.admin).create_namespace({"metadata": {"name": name}})
    return name


@pytest.fixture
def namespace(cluster: Cluster) -> str:
    """A namespace of the test's own."""
    return _new_namespace(cluster)


Kubectl = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def kubectl(tmp_path: Path) -> Kubectl:
    """Run kubectl with a given kubeconfig; the completed process (never raises)."""
    env = {
        **{k: v for k, v in os.environ.items() if k != "KUBECONFIG"},
        "HOME": str(tmp_path),
        "KUBECACHEDIR": str(tmp_path / "kube-cache"),
    }

    def run(
        kubeconfig: Path, *args: str, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [KUBECTL, f"--kubeconfig={kubeconfig}", *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            check=False,
        )

    return run


# ------------------------------------------------------------------------------ objects


def _user(ns: str, name: str = CALLER) -> str:
    return f"system:serviceaccount:{ns}:{name}"


def _example_documents() -> list[Obj]:
    return [d for d in yaml.safe_load_all(EXAMPLE_ROLE.read_text(encoding="utf-8")) if d]


def _example_in(ns: str) -> list[Obj]:
    """The example's Role and RoleBinding, unchanged but for the namespace they live in."""
    documents = copy.deepcopy(_example_documents())
    for document in documents:
        document["metadata"]["namespace"] = ns
        for subject in document.get("subjects", []):
            subject["namespace"] = ns
    return documents


def _secret(name: str, **data: str) -> Obj:
    return {"metadata": {"name": name}, "stringData": data}


def _failover_group(name: str = "main") -> Obj:
    return {
        "apiVersion": f"{bloodraven.GROUP}/{bloodraven.VERSION}",
        "kind": bloodraven.KIND,
        "metadata": {"name": name},
        "spec": {
            "sites": [{"name": "dc1"}, {"name": "dc2"}],
            "credentials": {"operatorSecret": OPERATOR_SECRET},
        },
    }


def _mysql_order(name: str = "tenant-acme") -> Obj:
    return {
        "apiVersion": IDENTITY.api_version,
        "kind": IDENTITY.kind,
        "metadata": {"name": name},
        "spec": {
            "groupRef": {"name": "main"},
            "databaseName": "acme_wms",
            "owner": {"secretName": OWNER_SECRET},
        },
    }


def _mariadb_order(name: str = "orders") -> Obj:
    return {
        "apiVersion": f"{MARIADB_GROUP}/{MARIADB_VERSION}",
        "kind": "MariaDBDatabase",
        "metadata": {"name": name},
        "spec": {"controlPlaneRef": {"name": "cp"}},
    }


def _ready(status: str = "True") -> Obj:
    condition = {
        "type": "Ready",
        "status": status,
        "reason": "Forged" if status == "True" else "Provisioning",
        "message": "set by hand",
        "lastTransitionTime": "2024-01-01T00:00:00Z",
    }
    return {"conditions": [condition]}


def _denied(call: Callable[[], Any]) -> Obj:
    """Run `call`, which must be refused by authorization; the server's Status."""
    with pytest.raises(ApiException) as err:
        call()
    assert err.value.status == 403, err.value.body
    status: Obj = json.loads(err.value.body)
    assert status["reason"] == "Forbidden", status
    return status


def _place_example(cluster: Cluster, ns: str) -> None:
    """Apply the example Role and RoleBinding in `ns`, with the ServiceAccount they bind."""
    admin = cluster.server.cluster
    for document in _example_in(ns):
        plural = "roles" if document["kind"] == "Role" else "rolebindings"
        admin.create(f"{plural}.rbac.authorization.k8s.io", document, ns, manager="test")
    admin.create("serviceaccounts", {"metadata": {"name": CALLER}}, ns, manager="test")


@dataclass
class Caller:
    """A ServiceAccount bound by the example Role, in a namespace with a failover group."""

    namespace: str
    token: str
    custom: client.CustomObjectsApi
    core: client.CoreV1Api

    @property
    def user(self) -> str:
        return _user(self.namespace)

    @property
    def orders(self) -> tuple[str, str, str, str]:
        return (IDENTITY.group, IDENTITY.version, self.namespace, IDENTITY.plural)


@pytest.fixture
def caller(
    cluster: Cluster, namespace: str, token_client: Callable[[str], client.ApiClient]
) -> Caller:
    """`tenant-provisioner` under the example Role, with the group `main`, its operator Secret
    and an order's owner Secret beside it (written by the admin, as the platform would)."""
    _place_example(cluster, namespace)
    core = client.CoreV1Api(cluster.admin)
    core.create_namespaced_secret(namespace, _secret(OPERATOR_SECRET, password="operator-pw"))
    core.create_namespaced_secret(
        namespace, _secret(OWNER_SECRET, username="acme", password="owner-pw")
    )
    client.CustomObjectsApi(cluster.admin).create_namespaced_custom_object(
        bloodraven.GROUP, bloodraven.VERSION, namespace, bloodraven.PLURAL, _failover_group()
    )
    token = cluster.server.cluster.issue_token(namespace, CALLER)
    api = token_client(token)
    return Caller(namespace, token, client.CustomObjectsApi(api), client.CoreV1Api(api))


def _review(cluster: Cluster, user: str, ns: str, verb: str, resource: str) -> bool:
    """Whether the server allows `user` (a ServiceAccount of `ns`) `verb` on `resource`
    (`plural[.group][/subresource]`) in `ns`, or cluster-wide when `ns` is empty."""
    target, _, subresource = resource.partition("/")
    plural, _, group = target.partition(".")
    attributes = {"verb": verb, "resource": plural, "group": group, "subresource": subresource}
    if ns:
        attributes["namespace"] = ns
    account_ns = user.split(":")[2]
    groups = [
        "system:serviceaccounts",
        f"system:serviceaccounts:{account_ns}",
        "system:authenticated",
    ]
    review = client.AuthorizationV1Api(cluster.admin).create_subject_access_review(
        {"spec": {"user": user, "groups": groups, "resourceAttributes": attributes}}
    )
    return bool(review.status.allowed)


# ------------------------------------------------------------------------------ as shipped


def test_the_example_applies_as_shipped_and_binds_only_the_tenant_provisioner(
    cluster: Cluster,
    kubectl: Kubectl,
    tmp_path: Path,
    token_client: Callable[[str], client.ApiClient],
) -> None:
    """`kubectl apply -f` of the file as it ships creates a Role and a RoleBinding in
    `bloodraven`; the bound account declares a MysqlDatabase with kubectl and is refused the
    Secrets and failover groups beside it, and another account of the namespace gets nothing."""
    documents = _example_documents()
    assert sorted(d["kind"] for d in documents) == ["Role", "RoleBinding"]
    ns = _new_namespace(cluster, SHIPPED_NAMESPACE)
    admin = cluster.server.cluster
    for name in (CALLER, "bystander"):
        admin.create("serviceaccounts", {"metadata": {"name": name}}, ns, manager="test")
    client.CoreV1Api(cluster.admin).create_namespaced_secret(
        ns, _secret(OPERATOR_SECRET, password="operator-pw")
    )

    applied = kubectl(cluster.kubeconfig, "apply", "-f", str(EXAMPLE_ROLE))
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.split("\n")[:2] == [
        f"role.rbac.authorization.k8s.io/{ROLE_NAME} created",
        f"rolebinding.rbac.authorization.k8s.io/{ROLE_NAME} created",
    ]
    binding = client.RbacAuthorizationV1Api(cluster.admin).read_namespaced_role_binding(
        ROLE_NAME, ns
    )
    assert [(s.kind, s.namespace, s.name) for s in binding.subjects] == [
        ("ServiceAccount", ns, CALLER)
    ]

    token = admin.issue_token(ns, CALLER)
    as_caller = cluster.caller_kubeconfig(tmp_path / "caller", ns, token)
    whoami = kubectl(as_caller, "auth", "whoami", "-o", "json")
    assert whoami.returncode == 0, whoami.stderr
    assert json.loads(whoami.stdout)["status"]["userInfo"]["username"] == _user(ns)
    declared = kubectl(as_caller, "create", "-f", "-", stdin=json.dumps(_mysql_order()))
    assert declared.returncode == 0, declared.stderr
    assert declared.stdout.strip() == "mysqldatabase.shipstream.io/tenant-acme created"
    listed = kubectl(as_caller, "get", MYSQL_ORDERS, "-o", "name")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == ["mysqldatabase.shipstream.io/tenant-acme"]
    refused = kubectl(as_caller, "get", "secret", OPERATOR_SECRET)
    assert refused.returncode != 0
    assert (
        f'Error from server (Forbidden): secrets "{OPERATOR_SECRET}" is forbidden: User '
        f'"{_user(ns)}" cannot get resource "secrets" in API group "" in the namespace "{ns}"'
    ) in refused.stderr
    assert "operator-pw" not in refused.stdout + refused.stderr

    def can_i(*args: str) -> str:
        done = kubectl(as_caller, "auth", "can-i", *args)
        assert done.stdout.strip() in ("yes", "no"), done.stderr
        return done.stdout.strip()

    for verb in ("create", "get", "list", "watch", "update", "patch", "delete"):
        assert can_i(verb, MYSQL_ORDERS) == "yes", verb
    assert can_i("get", MYSQL_ORDERS, "--subresource=status") == "yes"
    assert can_i("update", MYSQL_ORDERS, "--subresource=status") == "no"
    assert can_i("patch", MYSQL_ORDERS, "--subresource=status") == "no"
    assert can_i("get", "secrets") == "no"
    assert can_i("list", "mysqlfailovergroups.shipstream.io") == "no"
    assert can_i("create", MYSQL_ORDERS, "-n", "default") == "no"

    bystander = client.CustomObjectsApi(token_client(admin.issue_token(ns, "bystander")))
    api = (IDENTITY.group, IDENTITY.version, ns, IDENTITY.plural)
    status = _denied(lambda: bystander.list_namespaced_custom_object(*api))
    assert _user(ns, "bystander") in status["message"]
    _denied(lambda: bystander.create_namespaced_custom_object(*api, _mysql_order("tenant-other")))


# ------------------------------------------------------------------------------ what it grants


def test_the_caller_declares_reads_watches_edits_and_deletes_its_mysqldatabases(
    caller: Caller,
) -> None:
    """With its token alone the caller goes through an order's whole life: create, get, list,
    watch, replace, patch, read the status, delete."""
    api = caller.orders
    made = caller.custom.create_namespaced_custom_object(*api, _mysql_order())
    got = caller.custom.get_namespaced_custom_object(*api, "tenant-acme")
    assert got["metadata"]["uid"] == made["metadata"]["uid"]
    assert got["spec"]["owner"]["secretName"] == OWNER_SECRET
    listed = caller.custom.list_namespaced_custom_object(*api)
    assert [o["metadata"]["name"] for o in listed["items"]] == ["tenant-acme"]
    events = list(
        watch.Watch().stream(caller.custom.list_namespaced_custom_object, *api, timeout_seconds=1)
    )
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "tenant-acme")
    ]

    got["metadata"]["labels"] = {"team": "acme"}
    replaced = caller.custom.replace_namespaced_custom_object(*api, "tenant-acme", got)
    assert replaced["metadata"]["labels"] == {"team": "acme"}
    patched = caller.custom.patch_namespaced_custom_object(
        *api, "tenant-acme", {"spec": {"deletionPolicy": "Delete"}}
    )
    assert patched["spec"]["deletionPolicy"] == "Delete"
    assert patched["metadata"]["generation"] == 2
    status = caller.custom.get_namespaced_custom_object_status(*api, "tenant-acme")
    assert status["metadata"]["name"] == "tenant-acme"

    caller.custom.delete_namespaced_custom_object(*api, "tenant-acme")
    with pytest.raises(ApiException) as err:
        caller.custom.get_namespaced_custom_object(*api, "tenant-acme")
    assert err.value.status == 404


def test_the_caller_reads_the_status_tenantdb_writes_but_cannot_forge_it(
    cluster: Cluster, caller: Caller
) -> None:
    """The status is tenantdb's: the caller reads what was written there, is refused a patch
    or an update of the status subresource, and an update of the whole object that carries a
    Ready condition leaves the status as it was."""
    api = caller.orders
    admin = client.CustomObjectsApi(cluster.admin)
    caller.custom.create_namespaced_custom_object(*api, _mysql_order())
    admin.patch_namespaced_custom_object_status(
        *api, "tenant-acme", {"status": {"phase": "Creating", **_ready("False")}}
    )
    seen = caller.custom.get_namespaced_custom_object_status(*api, "tenant-acme")
    assert seen["status"]["phase"] == "Creating"

    forged = {"status": {"phase": "Ready", **_ready()}}
    refused = _denied(
        lambda: caller.custom.patch_namespaced_custom_object_status(*api, "tenant-acme", forged)
    )
    assert refused["message"] == (
        f'{MYSQL_ORDERS} "tenant-acme" is forbidden: User "{caller.user}" cannot patch '
        f'resource "{IDENTITY.plural}/status" in API group "{IDENTITY.group}" in the namespace '
        f'"{caller.namespace}"'
    )
    current = caller.custom.get_namespaced_custom_object_status(*api, "tenant-acme")
    current["status"] = forged["status"]
    _denied(
        lambda: caller.custom.replace_namespaced_custom_object_status(*api, "tenant-acme", current)
    )
    caller.custom.replace_namespaced_custom_object(*api, "tenant-acme", current)

    stored = admin.get_namespaced_custom_object(*api, "tenant-acme")["status"]
    assert stored["phase"] == "Creating"
    assert [(c["type"], c["status"]) for c in stored["conditions"]] == [("Ready", "False")]


# ------------------------------------------------------------------------------ what it withholds


def test_the_caller_reads_no_secret_no_failover_group_and_no_mariadbdatabase(
    caller: Caller,
) -> None:
    """Neither the group's operator credential nor the owner password it provisions against,
    nor the group it names, nor the other order kind: each is a 403 for the caller."""
    ns = caller.namespace
    operator = _denied(lambda: caller.core.read_namespaced_secret(OPERATOR_SECRET, ns))
    assert operator["message"] == (
        f'secrets "{OPERATOR_SECRET}" is forbidden: User "{caller.user}" cannot get resource '
        f'"secrets" in API group "" in the namespace "{ns}"'
    )
    assert operator["details"] == {"name": OPERATOR_SECRET, "kind": "secrets"}
    _denied(lambda: caller.core.read_namespaced_secret(OWNER_SECRET, ns))
    listed = _denied(lambda: caller.core.list_namespaced_secret(ns))
    assert listed["message"] == (
        f'secrets is forbidden: User "{caller.user}" cannot list resource "secrets" in API '
        f'group "" in the namespace "{ns}"'
    )
    with pytest.raises(ApiException) as err:
        list(watch.Watch().stream(caller.core.list_namespaced_secret, ns, timeout_seconds=1))
    assert err.value.status == 403
    _denied(lambda: caller.core.create_namespaced_secret(ns, _secret("planted", password="x")))
    _denied(
        lambda: caller.core.patch_namespaced_secret(
            OWNER_SECRET, ns, {"stringData": {"password": "mine"}}
        )
    )

    groups = (bloodraven.GROUP, bloodraven.VERSION, ns, bloodraven.PLURAL)
    group = _denied(lambda: caller.custom.get_namespaced_custom_object(*groups, "main"))
    assert group["message"].startswith(
        f'{bloodraven.RESOURCE} "main" is forbidden: User "{caller.user}" cannot get resource '
        f'"{bloodraven.PLURAL}"'
    )
    _denied(lambda: caller.custom.list_namespaced_custom_object(*groups))

    mariadb = (MARIADB_GROUP, MARIADB_VERSION, ns, MARIADB_PLURAL)
    _denied(lambda: caller.custom.list_namespaced_custom_object(*mariadb))
    _denied(lambda: caller.custom.create_namespaced_custom_object(*mariadb, _mariadb_order()))


def test_the_caller_role_grants_exactly_this_table(cluster: Cluster, caller: Caller) -> None:
    """Every grant of the example Role and every absence the file promises, as the server's
    SubjectAccessReview answers them for the caller: its namespace only, no deletecollection,
    status read-only, no Secrets, no failover groups, no MariaDBDatabases, no way to widen its
    own grant or to mint tokens."""
    ns = caller.namespace
    elsewhere = _new_namespace(cluster)
    table: list[tuple[str, str, str, bool]] = [
        *((verb, MYSQL_ORDERS, ns, True) for verb in ("create", "get", "list", "watch")),
        *((verb, MYSQL_ORDERS, ns, True) for verb in ("update", "patch", "delete")),
        ("deletecollection", MYSQL_ORDERS, ns, False),
        ("get", f"{MYSQL_ORDERS}/status", ns, True),
        ("update", f"{MYSQL_ORDERS}/status", ns, False),
        ("patch", f"{MYSQL_ORDERS}/status", ns, False),
        ("create", MYSQL_ORDERS, elsewhere, False),
        ("get", MYSQL_ORDERS, elsewhere, False),
        ("list", MYSQL_ORDERS, "", False),
        ("watch", MYSQL_ORDERS, "", False),
        *((verb, "secrets", ns, False) for verb in ("get", "list", "watch", "create", "update")),
        ("list", "secrets", "", False),
        *((verb, bloodraven.RESOURCE, ns, False) for verb in ("get", "list", "watch", "patch")),
        ("get", f"{bloodraven.RESOURCE}/status", ns, False),
        *((verb, MARIADB_ORDERS, ns, False) for verb in ("create", "get", "list", "update")),
        ("patch", f"{MARIADB_ORDERS}/status", ns, False),
        ("create", "roles.rbac.authorization.k8s.io", ns, False),
        ("create", "rolebindings.rbac.authorization.k8s.io", ns, False),
        ("escalate", "roles.rbac.authorization.k8s.io", ns, False),
        ("bind", "roles.rbac.authorization.k8s.io", ns, False),
        ("create", "serviceaccounts/token", ns, False),
        ("get", "configmaps", ns, False),
    ]
    answers = {
        (verb, resource, where): _review(cluster, caller.user, where, verb, resource)
        for verb, resource, where, _ in table
    }
    expected = {(verb, resource, where): allowed for verb, resource, where, allowed in table}
    wrong = {key: answer for key, answer in answers.items() if answer != expected[key]}
    assert not wrong, f"answered otherwise than the example Role says: {wrong}"
    # The same account name in another namespace is another account, and holds nothing.
    assert not _review(cluster, _user(elsewhere), elsewhere, "create", MYSQL_ORDERS)
    assert not _review(cluster, _user(elsewhere), ns, "create", MYSQL_ORDERS)


def test_the_caller_cannot_act_in_another_namespace(
    cluster: Cluster, caller: Caller, token_client: Callable[[str], client.ApiClient]
) -> None:
    """The Role is a namespace's: the caller's token is refused orders in another namespace and
    across all namespaces, and another namespace's `tenant-provisioner` is not bound by it."""
    elsewhere = _new_namespace(cluster)
    other = (IDENTITY.group, IDENTITY.version, elsewhere, IDENTITY.plural)
    refused = _denied(lambda: caller.custom.create_namespaced_custom_object(*other, _mysql_order()))
    assert refused["message"].endswith(f'in the namespace "{elsewhere}"')
    cluster_wide = _denied(
        lambda: caller.custom.list_cluster_custom_object(
            IDENTITY.group, IDENTITY.version, IDENTITY.plural
        )
    )
    assert cluster_wide["message"].endswith("at the cluster scope")

    admin = cluster.server.cluster
    admin.create("serviceaccounts", {"metadata": {"name": CALLER}}, elsewhere, manager="test")
    namesake = client.CustomObjectsApi(token_client(admin.issue_token(elsewhere, CALLER)))
    _denied(lambda: namesake.create_namespaced_custom_object(*caller.orders, _mysql_order()))
    _denied(lambda: namesake.create_namespaced_custom_object(*other, _mysql_order()))


# ------------------------------------------------------------------------------ the CRDs


def test_a_grant_on_mariadbdatabases_leaves_their_status_out(
    cluster: Cluster, namespace: str, token_client: Callable[[str], client.ApiClient]
) -> None:
    """The chart's MariaDBDatabase CRD serves its status as a subresource: a Role granting
    update and patch on the orders cannot write their status (nor forge it through the whole
    object), and a Role granting the status alone cannot read or change the spec."""
    admin = cluster.server.cluster
    custom = client.CustomObjectsApi(cluster.admin)
    api = (MARIADB_GROUP, MARIADB_VERSION, namespace, MARIADB_PLURAL)
    custom.create_namespaced_custom_object(*api, _mariadb_order())
    rbac = client.RbacAuthorizationV1Api(cluster.admin)
    grants = {
        "spec-writer": (MARIADB_PLURAL, ["get", "update", "patch"]),
        "status-writer": (f"{MARIADB_PLURAL}/status", ["get", "patch"]),
    }
    for name, (resource, verbs) in grants.items():
        admin.create("serviceaccounts", {"metadata": {"name": name}}, namespace, manager="test")
        rule = {"apiGroups": [MARIADB_GROUP], "resources": [resource], "verbs": verbs}
        rbac.create_namespaced_role(namespace, {"metadata": {"name": name}, "rules": [rule]})
        subject = {"kind": "ServiceAccount", "name": name, "namespace": namespace}
        ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}
        rbac.create_namespaced_role_binding(
            namespace, {"metadata": {"name": name}, "roleRef": ref, "subjects": [subject]}
        )
    spec_writer = client.CustomObjectsApi(token_client(admin.issue_token(namespace, "spec-writer")))
    status_writer = client.CustomObjectsApi(
        token_client(admin.issue_token(namespace, "status-writer"))
    )
    order = (*api, "orders")

    spec_writer.patch_namespaced_custom_object(*order, {"spec": {"deletionPolicy": "Delete"}})
    refused = _denied(
        lambda: spec_writer.patch_namespaced_custom_object_status(*order, {"status": _ready()})
    )
    assert refused["message"] == (
        f'{MARIADB_ORDERS} "orders" is forbidden: User "{_user(namespace, "spec-writer")}" '
        f'cannot patch resource "{MARIADB_PLURAL}/status" in API group "{MARIADB_GROUP}" in '
        f'the namespace "{namespace}"'
    )
    whole = spec_writer.get_namespaced_custom_object(*order)
    whole["status"] = _ready()
    spec_writer.replace_namespaced_custom_object(*order, whole)
    assert "status" not in custom.get_namespaced_custom_object(*order)

    status_writer.patch_namespaced_custom_object_status(*order, {"status": _ready("False")})
    written = status_writer.get_namespaced_custom_object_status(*order)
    assert [(c["type"], c["status"]) for c in written["status"]["conditions"]] == [
        ("Ready", "False")
    ]
    assert written["spec"]["deletionPolicy"] == "Delete"
    _denied(lambda: status_writer.get_namespaced_custom_object(*order))
    _denied(
        lambda: status_writer.patch_namespaced_custom_object(
            *order, {"spec": {"deletionPolicy": "Retain"}}
        )
    )
    assert custom.get_namespaced_custom_object(*order)["spec"]["deletionPolicy"] == "Delete"
