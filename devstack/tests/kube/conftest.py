"""Fixtures for the devstack API server conformance suite: a fresh cluster per test, a kubeconfig,
an official-client `ApiClient`, a namespace, and a kubectl runner."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config

from devstack.kube.server import ClusterServer, kubeconfig

KUBECTL = str(Path(sys.executable).parent / "kubectl")

Kubectl = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def server() -> Iterator[ClusterServer]:
    """A running cluster named `management`."""
    srv = ClusterServer("management").start()
    srv.cluster.bookmark_interval = 0.3
    yield srv
    srv.stop()


@pytest.fixture
def kubeconfig_path(server: ClusterServer, tmp_path: Path) -> Path:
    """A kubeconfig for the server, one context named like the cluster."""
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig({server.name: server})))
    return path


@pytest.fixture
def api_client(kubeconfig_path: Path) -> Iterator[client.ApiClient]:
    """An official-client ApiClient for the server."""
    api = config.new_client_from_config(config_file=str(kubeconfig_path), context="management")
    yield api
    api.close()


@pytest.fixture
def client_with_token(kubeconfig_path: Path) -> Iterator[Callable[[str], client.ApiClient]]:
    """Build ApiClients for the server that present another bearer token."""
    made: list[client.ApiClient] = []

    def build(token: str) -> client.ApiClient:
        cfg = client.Configuration()
        config.load_kube_config(
            config_file=str(kubeconfig_path), context="management", client_configuration=cfg
        )
        cfg.refresh_api_key_hook = None
        cfg.api_key = {"BearerToken": f"Bearer {token}"}
        api = client.ApiClient(cfg)
        made.append(api)
        return api

    yield build
    for api in made:
        api.close()


@pytest.fixture
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    """CoreV1Api."""
    return client.CoreV1Api(api_client)


@pytest.fixture
def custom(api_client: client.ApiClient) -> client.CustomObjectsApi:
    """CustomObjectsApi."""
    return client.CustomObjectsApi(api_client)


@pytest.fixture
def namespace(core: client.CoreV1Api) -> str:
    """A fresh namespace (the cluster is discarded after the test)."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    return name


@pytest.fixture
def kubectl(kubeconfig_path: Path, tmp_path: Path) -> Kubectl:
    """Run kubectl against the server; returns the completed process (never raises)."""
    env = {
        **os.environ,
        "KUBECONFIG": str(kubeconfig_path),
        "KUBECACHEDIR": str(tmp_path / "kube-cache"),
        "HOME": str(tmp_path),
    }

    def run(
        *args: str,
        stdin: str | None = None,
        extra_env: dict[str, str] | None = None,
        timeout: float = 30,
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [KUBECTL, *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**env, **(extra_env or {})},
            check=False,
        )

    return run


DB_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "mariadbdatabases.c5c3.io"},
    "spec": {
        "group": "c5c3.io",
        "scope": "Namespaced",
        "names": {
            "plural": "mariadbdatabases",
            "singular": "mariadbdatabase",
            "kind": "MariaDBDatabase",
            "shortNames": ["mdb"],
        },
        "versions": [
            {
                "name": "v1alpha1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "Database", "type": "string", "jsonPath": ".spec.databaseName"},
                    {
                        "name": "Ready",
                        "type": "string",
                        "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
                    },
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                ],
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "description": "A database ordered for a tenant.",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "description": "What the tenant asked for.",
                                "required": ["databaseName"],
                                "x-kubernetes-validations": [
                                    {
                                        "rule": "self.engine == oldSelf.engine",
                                        "message": "engine is immutable",
                                    },
                                    {
                                        "rule": "!has(self.__namespace__) "
                                        "|| self.__namespace__.size() <= 8",
                                        "message": "namespace too long",
                                        "fieldPath": ".namespace",
                                    },
                                ],
                                "properties": {
                                    "databaseName": {
                                        "type": "string",
                                        "pattern": "^[a-z][a-z0-9_]*$",
                                        "minLength": 1,
                                        "maxLength": 16,
                                        "description": "Database name.",
                                    },
                                    "engine": {
                                        "type": "string",
                                        "enum": ["mariadb", "mysql"],
                                        "default": "mariadb",
                                    },
                                    "sizeGi": {
                                        "type": "integer",
                                        "minimum": 1,
                                        "maximum": 100,
                                        "default": 1,
                                    },
                                    "namespace": {"type": "string"},
                                    "users": {
                                        "type": "array",
                                        "maxItems": 2,
                                        "items": {"type": "string"},
                                    },
                                    "charset": {"type": "string", "format": "uuid"},
                                },
                            },
                            "status": {
                                "type": "object",
                                "properties": {
                                    "observedGeneration": {"type": "integer"},
                                    "conditions": {
                                        "type": "array",
                                        "x-kubernetes-list-type": "map",
                                        "x-kubernetes-list-map-keys": ["type"],
                                        "items": {
                                            "type": "object",
                                            "required": ["type", "status"],
                                            "properties": {
                                                "type": {"type": "string"},
                                                "status": {"type": "string"},
                                                "message": {"type": "string"},
                                            },
                                        },
                                    },
                                },
                            },
                        },
                    }
                },
            }
        ],
    },
}


@pytest.fixture
def db_crd(api_client: client.ApiClient) -> dict[str, Any]:
    """Install the MariaDBDatabase CRD used across the suite."""
    client.ApiextensionsV1Api(api_client).create_custom_resource_definition(DB_CRD)
    return DB_CRD
