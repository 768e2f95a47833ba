"""The real kube-apiserver and etcd that `make kube` builds, as devstack/realkube.py runs them.

Two clusters, `management` and `edge-1`, share one etcd under their own prefixes, each with a
kube-controller-manager. The official client checks that they are ready and apart, that the
chart's CRDs become Established, that TokenRequest and TokenReview are the real ones (and a
token of one cluster is refused by the other), that RBAC refuses a ServiceAccount until a Role
and RoleBinding grant it, and that the controllers finish namespaces and fill them in.

The binaries come from `make kube`, which `make test` runs first; without them the tests fail
and say so.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from devstack import realkube

ROOT = Path(__file__).resolve().parents[2]
CRDS = sorted((ROOT / "charts" / "tenantdb" / "crds").glob("*.yaml"))
CLUSTERS = ("management", "edge-1")
T = TypeVar("T")


pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[realkube.RealKube]:
    """Both clusters running; their logs stay in the pytest temporary directory."""
    missing = realkube.missing_binaries()
    if missing:
        pytest.fail(f"{', '.join(missing)} not built in tools/kube/bin; run `make kube`")
    started = realkube.start_real_clusters(
        tmp_path_factory.mktemp("realkube"), CLUSTERS, controller_manager=True
    )
    yield started
    started.stop()


@pytest.fixture(scope="module")
def admin(kube: realkube.RealKube) -> Iterator[dict[str, Any]]:
    """An admin ApiClient per cluster, from that cluster's own kubeconfig."""
    apis = {
        name: config.new_client_from_config(config_file=str(path), context=name)
        for name, path in kube.kubeconfigs.items()
    }
    yield apis
    for api in apis.values():
        api.close()


@pytest.fixture
def bearer(kube: realkube.RealKube) -> Iterator[Callable[[str, str], Any]]:
    """Build ApiClients that present only a bearer token (no client certificate)."""
    made: list[Any] = []

    def build(cluster: str, token: str) -> Any:
        cfg = client.Configuration()
        cfg.host = kube[cluster].server
        cfg.ssl_ca_cert = str(kube.pki.ca_cert)
        cfg.api_key = {"BearerToken": token}
        cfg.api_key_prefix = {"BearerToken": "Bearer"}
        api = client.ApiClient(cfg)
        made.append(api)
        return api

    yield build
    for api in made:
        api.close()


def _eventually(check: Callable[[], T | None], what: str, timeout: float = 60.0) -> T:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found is not None:
            return found
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {timeout:.0f}s")
        time.sleep(0.2)


def _namespace(api: Any) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    client.CoreV1Api(api).create_namespace({"metadata": {"name": name}})
    return name


def _service_account_token(api: Any, namespace: str, name: str) -> str:
    core = client.CoreV1Api(api)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": name}})
    request = {"spec": {"expirationSeconds": 3600}}
    token: str = core.create_namespaced_service_account_token(name, namespace, request).status.token
    return token


def _review(api: Any, token: str) -> Any:
    return client.AuthenticationV1Api(api).create_token_review({"spec": {"token": token}}).status


def test_both_clusters_are_ready_and_independent(
    kube: realkube.RealKube, admin: dict[str, Any]
) -> None:
    assert kube.running
    for name in CLUSTERS:
        version = client.VersionApi(admin[name]).get_code()
        assert version.git_version.startswith("v1."), version.git_version
        ready = admin[name].call_api(
            "/readyz", "GET", _return_http_data_only=True, _preload_content=False
        )
        assert (ready.status, ready.data) == (200, b"ok")
    namespace = _namespace(admin["management"])
    assert client.CoreV1Api(admin["management"]).read_namespace(namespace).metadata.name
    with pytest.raises(ApiException) as absent:
        client.CoreV1Api(admin["edge-1"]).read_namespace(namespace)
    assert absent.value.status == 404
    assert kube["management"].etcd_prefix != kube["edge-1"].etcd_prefix


@pytest.mark.parametrize("path", CRDS, ids=[p.name for p in CRDS])
def test_chart_crd_becomes_established(admin: dict[str, Any], path: Path) -> None:
    crd = yaml.safe_load(path.read_text())
    extensions = client.ApiextensionsV1Api(admin["management"])
    extensions.create_custom_resource_definition(crd)

    def established() -> bool | None:
        status = extensions.read_custom_resource_definition(crd["metadata"]["name"]).status
        conditions = {c.type: c.status for c in (status.conditions or [])}
        return True if conditions.get("Established") == "True" else None

    _eventually(established, f"{crd['metadata']['name']} Established")
    spec = crd["spec"]
    served = next(v["name"] for v in spec["versions"] if v["served"])
    listed = client.CustomObjectsApi(admin["management"]).list_namespaced_custom_object(
        spec["group"], served, "default", spec["names"]["plural"]
    )
    assert listed["items"] == []
    with pytest.raises(ApiException) as elsewhere:
        client.ApiextensionsV1Api(admin["edge-1"]).read_custom_resource_definition(
            crd["metadata"]["name"]
        )
    assert elsewhere.value.status == 404


def test_token_request_and_token_review(admin: dict[str, Any]) -> None:
    namespace = _namespace(admin["management"])
    token = _service_account_token(admin["management"], namespace, "reviewed")

    review = _review(admin["management"], token)
    assert review.authenticated is True
    assert review.user.username == f"system:serviceaccount:{namespace}:reviewed"
    assert f"system:serviceaccounts:{namespace}" in review.user.groups
    assert review.audiences == [realkube.SERVICE_ACCOUNT_ISSUER]
    # The other cluster has keys of its own: the token means nothing there.
    assert not _review(admin["edge-1"], token).authenticated


def test_rbac_refuses_a_service_account_until_granted(
    admin: dict[str, Any], bearer: Callable[[str, str], Any]
) -> None:
    api = admin["edge-1"]
    namespace = _namespace(api)
    token = _service_account_token(api, namespace, "reader")
    secrets = client.CoreV1Api(bearer("edge-1", token))
    with pytest.raises(ApiException) as refused:
        secrets.list_namespaced_secret(namespace)
    assert refused.value.status == 403
    assert f"system:serviceaccount:{namespace}:reader" in refused.value.body

    rbac = client.RbacAuthorizationV1Api(api)
    rbac.create_namespaced_role(
        namespace,
        {
            "metadata": {"name": "read-secrets"},
            "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]}],
        },
    )
    rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": "reader-reads-secrets"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "read-secrets",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": namespace}],
        },
    )

    def allowed() -> Any:
        try:
            return secrets.list_namespaced_secret(namespace)
        except ApiException as exc:
            if exc.status != 403:
                raise
            return None

    assert _eventually(allowed, "the RoleBinding taking effect").items == []
    with pytest.raises(ApiException) as still_refused:
        secrets.list_namespaced_secret("default")
    assert still_refused.value.status == 403


def test_controller_manager_fills_in_and_finishes_namespaces(
    kube: realkube.RealKube, admin: dict[str, Any]
) -> None:
    assert kube["edge-1"].controller_manager_log is not None
    core = client.CoreV1Api(admin["edge-1"])
    namespace = _namespace(admin["edge-1"])

    def filled_in() -> bool | None:
        accounts = {a.metadata.name for a in core.list_namespaced_service_account(namespace).items}
        maps = {m.metadata.name for m in core.list_namespaced_config_map(namespace).items}
        return True if "default" in accounts and "kube-root-ca.crt" in maps else None

    _eventually(filled_in, "the default ServiceAccount and kube-root-ca.crt appearing")
    core.delete_namespace(namespace)

    def gone() -> bool | None:
        try:
            core.read_namespace(namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise
            return True
        return None

    _eventually(gone, f"namespace {namespace} finishing its deletion")
