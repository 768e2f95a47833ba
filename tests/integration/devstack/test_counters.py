"""The API server's `/devstack/counters`: what it answered, by client, read over HTTP.

The bench reads these counters to tell tenantdb's requests from its own, so the tests pin that
tenantdb's clients are counted under their own name and that lists served from the encoded-object
cache say exactly what a copy of the store would.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import requests
from kubernetes import client

from devstack.kube import ClusterServer
from tenantdb.adapters.kube import SECRET, NotFoundError, client_from_kubeconfig


def _counters(api: client.ApiClient, method: str = "GET") -> dict[str, Any]:
    answer: dict[str, Any] = api.call_api(
        "/devstack/counters",
        method,
        auth_settings=["BearerToken"],
        response_types_map={200: "object"},
        _return_http_data_only=True,
    )
    return answer


def _counts(answer: dict[str, Any]) -> dict[tuple[str, str, str], int]:
    return {(r["client"], r["verb"], r["resource"]): r["count"] for r in answer["requests"]}


def test_kube_counters_by_client_verb_and_resource(
    server: ClusterServer, api_client: client.ApiClient, kubeconfig_path: Path
) -> None:
    _counters(api_client, "DELETE")
    core = client.CoreV1Api(api_client)
    core.list_namespaced_secret("default")
    ours = client_from_kubeconfig(str(kubeconfig_path), "management", "")
    with pytest.raises(NotFoundError):
        ours.get(SECRET, "default", "nothing-here")
    ours.get_or_none(SECRET, "default", "nothing-here")

    answer = _counters(api_client)

    assert answer["cluster"] == "management"
    assert _counts(answer) == {
        ("OpenAPI-Generator", "list", "secrets"): 1,
        ("tenantdb", "get", "secrets"): 2,
    }
    assert answer["total"] == 3
    assert server.cluster.counters() == {("list", "secrets"): 1, ("get", "secrets"): 2}
    _counters(api_client, "DELETE")
    assert _counters(api_client)["requests"] == []


def test_kube_counters_need_a_token(server: ClusterServer, tmp_path: Path) -> None:
    assert server.ca_pem is not None
    ca = tmp_path / "ca.crt"
    ca.write_bytes(server.ca_pem)
    answer = requests.get(f"{server.url}/devstack/counters", verify=str(ca), timeout=10)
    assert answer.status_code == 401


def test_encoded_lists_and_gets_equal_the_stored_objects(
    server: ClusterServer, api_client: client.ApiClient
) -> None:
    core = client.CoreV1Api(api_client)
    for i in range(3):
        core.create_namespaced_config_map(
            "default",
            {"metadata": {"name": f"cm-{i}", "labels": {"n": str(i)}}, "data": {"k": str(i)}},
        )
    core.patch_namespaced_config_map("cm-1", "default", {"data": {"k": "changed"}})
    kind = server.cluster.kind("configmaps")
    api = server.cluster.api

    for selector in (None, "n in (1,2)"):
        encoded = json.loads(api.list_encoded(kind, "v1", "default", selector))
        listed = api.list(kind, "v1", "default", selector)
        # On the wire, the items of a built-in kind's list carry no apiVersion and kind.
        bare = [
            {k: v for k, v in i.items() if k not in ("apiVersion", "kind")} for i in listed["items"]
        ]
        assert encoded == {**listed, "items": bare}
    body, rv = api.get_encoded(kind, "v1", "default", "cm-1")
    assert json.loads(body) == api.get(kind, "v1", "default", "cm-1")
    assert json.loads(body)["data"] == {"k": "changed"}
    assert rv == api.get(kind, "v1", "default", "cm-1")["metadata"]["resourceVersion"]
    paged = json.loads(api.list_encoded(kind, "v1", "default", limit=2))
    assert [o["metadata"]["name"] for o in paged["items"]] == ["cm-0", "cm-1"]
    assert paged["metadata"]["remainingItemCount"] == 1
