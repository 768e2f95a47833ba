"""The CustomResourceDefinitions a devstack cluster serves, and installing them.

Owns, as data: the MariaDBDatabase CRD (read as is from the chart, `charts/tenantdb/crds/`), the
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

CHART_CRD = (
    Path(__file__).resolve().parents[2] / "charts/tenantdb/crds/mariadbdatabases.c5c3.io.yaml"
)


def mariadbdatabase_crd() -> dict[str, Any]:
    """Return the chart's MariaDBDatabase CRD."""
    loaded: dict[str, Any] = yaml.safe_load(CHART_CRD.read_text(encoding="utf-8"))
    return loaded


def _build(factories: Iterable[Callable[[], dict[str, Any]]]) -> list[dict[str, Any]]:
    return [factory() for factory in factories]


def management_crds() -> list[dict[str, Any]]:
    """Every CRD the management cluster serves."""
    return [
        mariadbdatabase_crd(),
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


__all__ = ["install", "management_crds", "mariadbdatabase_crd", "target_crds"]
