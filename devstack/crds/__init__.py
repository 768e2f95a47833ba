"""The CustomResourceDefinitions a devstack cluster serves, and installing them.

Owns, as data: the order kinds' CRDs (MariaDBDatabase and MysqlDatabase, read as they are from the
chart, `charts/tenantdb/crds/`; MysqlDatabase is served on the management cluster only), the
ControlPlane CRD, and the CRDs of the third-party kinds tenantdb writes or reads (cert-manager,
External Secrets Operator, mariadb-operator, Bloodraven's MysqlFailoverGroup). `install` creates
them on a simulated cluster. It must never alter the chart's CRD: the devstack serves exactly
what the chart ships.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import yaml

from devstack.crds import bloodraven, certmanager, controlplane, externalsecrets, mariadb
from devstack.kube import Cluster

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
        *_build(certmanager.CRDS),
        *_build(externalsecrets.CRDS),
        *_build(mariadb.CRDS),
        *_build(bloodraven.CRDS),
    ]


def target_crds() -> list[dict[str, Any]]:
    """The CRDs a target cluster serves: the order kind and the mariadb-operator's."""
    return [mariadbdatabase_crd(), *_build(mariadb.CRDS)]


def install(cluster: Cluster, crds: Iterable[dict[str, Any]]) -> None:
    """Create CRDs on a cluster (they are served as soon as the call returns)."""
    for crd in crds:
        cluster.create(
            "customresourcedefinitions.apiextensions.k8s.io", crd, manager="devstack-install"
        )


__all__ = [
    "install",
    "management_crds",
    "mariadbdatabase_crd",
    "mysqldatabase_crd",
    "target_crds",
]
