"""The system and token API of the OpenBao stand-in, as hvac and a raw HTTP client see it."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import hvac
import pytest
import requests

from devstack.openbao import KubeTokenReviewer
from devstack.openbao.bootstrap import KUBE_MOUNT

from .openbao_support import MOUNT, Platform, ServerFactory


def test_health_and_mounts(platform: Platform) -> None:
    health = platform.root.sys.read_health_status(method="GET")
    assert (health["initialized"], health["sealed"], health["standby"]) == (True, False, False)
    mounts = platform.root.sys.list_mounted_secrets_engines()
    assert mounts["data"][f"{MOUNT}/"]["type"] == "database"
    assert mounts[f"{MOUNT}/"]["accessor"].startswith("database_")
    auth = platform.root.sys.list_auth_methods()["data"]
    assert auth[f"{KUBE_MOUNT}/"]["type"] == "kubernetes"
    assert auth["token/"]["type"] == "token"


def test_token_lookup_and_revoke_self(platform: Platform) -> None:
    operator = platform.operator()
    info = operator.auth.token.lookup_self()["data"]
    assert info["policies"] == ["c5c3-operator", "default"]
    assert 890 <= info["ttl"] <= 900
    assert info["display_name"] == "kubernetes-management-c5c3-system-c5c3-operator"
    assert info["meta"]["service_account_namespace"] == "c5c3-system"
    assert operator.auth.token.revoke_self().status_code == 204
    assert not operator.is_authenticated()

    root = platform.root.auth.token.lookup_self()["data"]
    assert root["policies"] == ["root"]
    assert root["expire_time"] is None


def test_token_expiry_ends_it_under_time_scale(make_platform: Callable[..., Platform]) -> None:
    platform = make_platform(time_scale=900)  # the operator's 15 min token lives one second
    operator = platform.operator()
    assert operator.is_authenticated()
    deadline = time.monotonic() + 10
    while operator.is_authenticated() and time.monotonic() < deadline:
        time.sleep(0.05)
    with pytest.raises(hvac.exceptions.Forbidden):
        operator.auth.token.lookup_self()


def test_child_token_needs_a_subset_of_policies(platform: Platform) -> None:
    operator = platform.operator()
    with pytest.raises(hvac.exceptions.Forbidden):
        operator.auth.token.create(policies=["order-db-dynamic"])
    created = platform.root.auth.token.create(policies=["c5c3-operator"], ttl="10m")["auth"]
    assert created["token_policies"] == ["c5c3-operator", "default"]
    assert created["lease_duration"] == 600


def test_errors_have_openbao_shape(platform: Platform) -> None:
    base = f"{platform.server.url}/v1"
    headers = {"X-Vault-Token": platform.server.root_token}
    with requests.Session() as session:
        absent = session.get(f"{base}/{MOUNT}/roles/order.none.x", headers=headers)
        assert (absent.status_code, absent.json()) == (404, {"errors": []})
        denied = session.get(f"{base}/{MOUNT}/roles/order.none.x")
        assert (denied.status_code, denied.json()) == (403, {"errors": ["permission denied"]})
        missing = session.post(f"{base}/{MOUNT}/roles/order.none.x", headers=headers, json={})
        assert (missing.status_code, missing.json()) == (
            400,
            {"errors": ["database name is required"]},
        )
        unrouted = session.get(f"{base}/nowhere/at/all", headers=headers)
        assert unrouted.status_code == 404
        assert "no handler for route" in unrouted.json()["errors"][0]
        garbled = session.post(f"{base}/sys/leases/lookup", headers=headers, data=b"{not json")
        assert garbled.status_code == 400
        listing = session.request("LIST", f"{base}/{MOUNT}/config", headers=headers)
        assert listing.json()["data"]["keys"] == [platform.connection]
        via_query = session.get(f"{base}/{MOUNT}/config?list=true", headers=headers)
        assert via_query.json()["data"]["keys"] == [platform.connection]


def test_requests_are_answered_without_delayed_ack_stalls(platform: Platform) -> None:
    # Two writes per response (headers, then body) cost ~40 ms each on loopback.
    started = time.perf_counter()
    for _ in range(50):
        platform.root.secrets.database.read_role(platform.connection, mount_point=MOUNT)
    assert time.perf_counter() - started < 1.5


# --- the production TokenReviewer against a small API server -------------------------------------


class _TokenReviewAPI(BaseHTTPRequestHandler):
    reviews: list[dict[str, Any]] = []  # noqa: RUF012 - one fixture's server uses it
    bearers: list[str] = []  # noqa: RUF012

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).reviews.append(body)
        type(self).bearers.append(self.headers.get("Authorization", ""))
        token = body["spec"]["token"]
        status: dict[str, Any] = {"authenticated": False}
        if self.path == "/apis/authentication.k8s.io/v1/tokenreviews" and token == "good-jwt":
            status = {
                "authenticated": True,
                "user": {
                    "username": "system:serviceaccount:c5c3-system:c5c3-operator",
                    "uid": "u1",
                },
            }
        payload = json.dumps({**body, "status": status}).encode()
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture
def kube_api() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _TokenReviewAPI)
    _TokenReviewAPI.reviews, _TokenReviewAPI.bearers = [], []
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1})
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


def test_kube_token_reviewer_posts_a_token_review(kube_api: str) -> None:
    reviewer = KubeTokenReviewer(kube_api, bearer_token="reviewer-token")
    result = reviewer.review("good-jwt")
    assert (result.authenticated, result.username, result.uid) == (
        True,
        "system:serviceaccount:c5c3-system:c5c3-operator",
        "u1",
    )
    assert _TokenReviewAPI.reviews[0] == {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": "good-jwt"},
    }
    assert _TokenReviewAPI.bearers[0] == "Bearer reviewer-token"
    assert not reviewer.review("bad-jwt").authenticated


def test_login_through_the_configured_kube_api(start_server: ServerFactory, kube_api: str) -> None:
    server = start_server(token_reviewer=None, kubernetes_mounts=[KUBE_MOUNT])
    root = hvac.Client(url=server.url, token=server.root_token)
    root.auth.kubernetes.configure(kube_api, mount_point=KUBE_MOUNT)
    root.write_data(
        f"auth/{KUBE_MOUNT}/role/c5c3-operator",
        data={
            "bound_service_account_names": ["c5c3-operator"],
            "bound_service_account_namespaces": ["c5c3-system"],
            "token_policies": ["c5c3-operator"],
        },
    )
    client = hvac.Client(url=server.url)
    auth = client.auth.kubernetes.login("c5c3-operator", "good-jwt", mount_point=KUBE_MOUNT)
    assert auth["auth"]["metadata"]["service_account_uid"] == "u1"
    # Without a reviewer JWT configured, the presented JWT authorises its own review.
    assert _TokenReviewAPI.bearers[-1] == "Bearer good-jwt"
    with pytest.raises(hvac.exceptions.Forbidden):
        client.auth.kubernetes.login("c5c3-operator", "bad-jwt", mount_point=KUBE_MOUNT)
    root.adapter.close()
    client.adapter.close()
