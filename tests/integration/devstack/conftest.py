"""The devstack API server's fixtures (devstack/tests/kube/conftest.py: a fresh cluster per test,
its kubeconfig, official-client APIs, a namespace, kubectl), for the tests here that check
tenantdb's own kinds, chart and client on it."""

from __future__ import annotations

from devstack.tests.kube.conftest import (
    api_client,
    client_with_token,
    core,
    custom,
    db_crd,
    kubeconfig_path,
    kubectl,
    namespace,
    server,
)

__all__ = [
    "api_client",
    "client_with_token",
    "core",
    "custom",
    "db_crd",
    "kubeconfig_path",
    "kubectl",
    "namespace",
    "server",
]
