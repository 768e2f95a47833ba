"""The OpenBao stand-in's `/devstack/counters`: the requests it answered, by client and path."""

from __future__ import annotations

import hvac
import requests

from devstack.openbao import OpenBaoServer

from .openbao_support import ServerFactory


def test_openbao_counters_by_client_method_and_path(start_server: ServerFactory) -> None:
    server: OpenBaoServer = start_server()
    root = hvac.Client(url=server.url, token=server.root_token)
    root.adapter.session.headers["User-Agent"] = "tenantdb/0.1.0"
    root.sys.read_health_status(method="GET")
    root.auth.token.lookup_self()
    root.auth.token.lookup_self()
    url = f"{server.url}/devstack/counters"

    answer = requests.get(url, timeout=10).json()

    rows = {(r["client"], r["method"], r["path"]): r["count"] for r in answer["requests"]}
    assert rows == {
        ("tenantdb", "GET", "/v1/sys/health"): 1,
        ("tenantdb", "GET", "/v1/auth/token/lookup-self"): 2,
    }
    assert requests.delete(url, timeout=10).json()["requests"] == []
    assert requests.get(url, timeout=10).json()["total"] == 0
