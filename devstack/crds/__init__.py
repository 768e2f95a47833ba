"""The CustomResourceDefinitions a devstack cluster serves, and installing them.

Owns, as data: the order kinds' CRDs (MariaDBDatabase and MysqlDatabase, read as they are from the
chart, `charts/tenantdb/crds/`; MysqlDatabase is served on the management cluster only), the
ControlPlane CRD, and the CRDs of the stand-in kinds (mariadb-operator, Bloodraven's
MysqlFailoverGroup). cert-manager's and External Secrets Operator's CRDs are their releases' own
(`devstack.upstream`). `install` creates them on a cluster and `wait_established` waits until
each is served. It must never alter the chart's CRD: the devstack serves exactly what the chart
ships.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

from devstack.crds import bloodraven, controlplane, mariadb
from devstack.kubeclient import ApiError, KubeApi
from devstack.upstream import cert_manager_crds, eso_crds

ESTABLISH_SECONDS = 30.0
CHART_CRDS = Path(__file__).resolve().parents[2] / "charts/tenantdb/crds"
CHART_CRD = CHART_CRDS / "mariadbdatabases.c5c3.io.yaml"


def _chart_crd(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return loaded


def mariadbdatabase_crd() -> dict[str, Any]:
    """Return the chart's MariaDBDatabase CRD."""
    return _chart_crd(CHART_CRD)


def mysqldatabase_crd() -> dict[str, Any]:
    """Return the chart's MysqlDatabase CRD."""
    return _chart_crd(CHART_CRDS / "mysqldatabases.shipstream.io.yaml")


def _build(factories: Iterable[Callable[[], dict[str, Any]]]) -> list[dict[str, Any]]:
    return [factory() for factory in factories]


def management_crds() -> list[dict[str, Any]]:
    """Every CRD the management cluster serves."""
    return [
        mariadbdatabase_crd(),
        mysqldatabase_crd(),
        *_build(controlplane.CRDS),
        *cert_manager_crds(),
        *eso_crds(),
        *_build(mariadb.CRDS),
        *_build(bloodraven.CRDS),
    ]


def target_crds() -> list[dict[str, Any]]:
    """The CRDs a target cluster serves: the order kind and the mariadb-operator's."""
    return [mariadbdatabase_crd(), *_build(mariadb.CRDS)]


def install(cluster: KubeApi, crds: Iterable[dict[str, Any]]) -> None:
    """Create CRDs on a cluster (served once they are Established, see `wait_established`)."""
    for crd in crds:
        cluster.create(
            "customresourcedefinitions.apiextensions.k8s.io", crd, manager="devstack-install"
        )


def wait_established(
    cluster: KubeApi, crds: Iterable[dict[str, Any]], timeout: float = ESTABLISH_SECONDS
) -> None:
    """Wait until every CRD is Established and its resource lists (the API server answers
    429 while a new resource's storage starts); the CRDs are waited for side by side.

    Raises:
        TimeoutError: One is not served after `timeout` seconds, named in the message.
    """
    deadline = time.monotonic() + timeout
    names = [str(crd["metadata"]["name"]) for crd in crds]
    with ThreadPoolExecutor(max_workers=max(1, len(names))) as pool:
        for future in [pool.submit(_wait_served, cluster, name, deadline) for name in names]:
            future.result()


def _wait_served(cluster: KubeApi, name: str, deadline: float) -> None:
    while True:
        stored = cluster.get("customresourcedefinitions.apiextensions.k8s.io", name)
        conditions = (stored.get("status") or {}).get("conditions") or []
        if any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions):
            try:
                cluster.list(name, None, "devstack.invalid/none=none")
                return
            except ApiError as exc:
                if exc.code not in (404, 429, 503):  # not in discovery yet, or storage starting
                    raise
        if time.monotonic() > deadline:
            raise TimeoutError(f"CustomResourceDefinition {name} is not served in time")
        time.sleep(0.05)


__all__ = [
    "install",
    "management_crds",
    "mariadbdatabase_crd",
    "mysqldatabase_crd",
    "target_crds",
    "wait_established",
]
