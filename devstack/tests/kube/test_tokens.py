"""ServiceAccount tokens (TokenRequest), TokenReview over HTTP, and bearer authentication."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable

from kubernetes import client

from devstack.kube.server import ClusterServer


def _request_token(
    core: client.CoreV1Api, ns: str, name: str, audiences: list[str] | None = None
) -> str:
    core.create_namespaced_service_account(
        ns, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name=name))
    )
    spec = client.V1TokenRequestSpec(audiences=audiences or [], expiration_seconds=3600)
    result = core.create_namespaced_service_account_token(
        name, ns, client.AuthenticationV1TokenRequest(spec=spec)
    )
    token: str = result.status.token
    return token


def _review(
    api_client: client.ApiClient, token: str, audiences: list[str] | None = None
) -> client.V1TokenReview:
    review = client.V1TokenReview(spec=client.V1TokenReviewSpec(token=token, audiences=audiences))
    result: client.V1TokenReview = client.AuthenticationV1Api(api_client).create_token_review(
        review
    )
    return result


def test_token_looks_like_a_service_account_jwt(core: client.CoreV1Api, namespace: str) -> None:
    token = _request_token(core, namespace, "vault-auth")
    _header, claims, signature = token.split(".")
    payload = json.loads(base64.urlsafe_b64decode(claims + "=" * (-len(claims) % 4)))
    assert payload["sub"] == f"system:serviceaccount:{namespace}:vault-auth"
    assert payload["kubernetes.io"]["namespace"] == namespace
    assert payload["kubernetes.io"]["serviceaccount"]["name"] == "vault-auth"
    assert signature


def test_token_review_accepts_an_issued_token(
    api_client: client.ApiClient, core: client.CoreV1Api, namespace: str
) -> None:
    token = _request_token(core, namespace, "reviewer", audiences=["vault"])
    result = _review(api_client, token, ["vault"])
    assert result.status.authenticated is True
    assert result.status.user.username == f"system:serviceaccount:{namespace}:reviewer"
    assert f"system:serviceaccounts:{namespace}" in result.status.user.groups
    assert result.status.audiences == ["vault"]


def test_token_review_rejects_forged_and_wrong_audience_tokens(
    api_client: client.ApiClient, core: client.CoreV1Api, namespace: str
) -> None:
    token = _request_token(core, namespace, "sa", audiences=["vault"])
    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    assert not _review(api_client, forged).status.authenticated
    assert not _review(api_client, token, ["other"]).status.authenticated
    assert _review(api_client, token, ["other"]).status.error


def test_token_dies_with_its_service_account(
    api_client: client.ApiClient, core: client.CoreV1Api, namespace: str
) -> None:
    token = _request_token(core, namespace, "short-lived")
    core.delete_namespaced_service_account("short-lived", namespace)
    assert not _review(api_client, token).status.authenticated


def test_service_account_token_authenticates_requests(
    server: ClusterServer,
    core: client.CoreV1Api,
    namespace: str,
    client_with_token: Callable[[str], client.ApiClient],
) -> None:
    token = _request_token(core, namespace, "caller")
    rules = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]}]
    server.cluster.create("roles", {"metadata": {"name": "cm"}, "rules": rules}, namespace)
    binding = {
        "metadata": {"name": "cm"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm"},
        "subjects": [{"kind": "ServiceAccount", "name": "caller"}],
    }
    server.cluster.create("rolebindings", binding, namespace)
    server.cluster.enable_audit()
    api = client_with_token(token)
    client.CoreV1Api(api).create_namespaced_config_map(
        namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="by-sa"))
    )
    assert server.cluster.audit_log[-1].user == f"system:serviceaccount:{namespace}:caller"
