"""The order kinds tenantdb serves: ``KINDS``, the one registry every list of kinds comes from.

Each kind gives its identity, the builder of its CRD, the dotted names of its task module (the
worker imports it) and of its route module (the watcher imports it), and the Kubernetes access it
needs (``tenantdb.core.rbac``). A kind joins by adding one entry here: ``make gen`` renders every
CRD and the kinds' Role rules into the chart, the CLI registers the identities
(``tenantdb.ops.load_kinds``), and the worker's and the watcher's entry points import the
modules. Kinds that live elsewhere (a test's toy kind) join through the ``kind_modules`` setting.

The task and route modules are named as strings, not imported: the registry stays pure, in
core, and reaches only the kinds' core packages. Pure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tenantdb.core.kinds import KindIdentity
from tenantdb.core.mariadbdatabase import crd as mariadbdatabase_crd
from tenantdb.core.mariadbdatabase import naming as mariadbdatabase
from tenantdb.core.mariadbdatabase import rbac as mariadbdatabase_rbac
from tenantdb.core.mysqldatabase import crd as mysqldatabase_crd
from tenantdb.core.mysqldatabase import naming as mysqldatabase
from tenantdb.core.mysqldatabase import rbac as mysqldatabase_rbac
from tenantdb.core.rbac import KindAccess


@dataclass(frozen=True, slots=True)
class ServedKind:
    """One order kind: its identity, its CRD, its task and route modules, and its access."""

    identity: KindIdentity
    build_crd: Callable[[], dict[str, Any]]
    task_module: str
    """The module a worker imports for the kind's tasks (its ``SPEC`` declares the kind)."""
    route_module: str
    """The module the watcher imports for the kind's routes (``register_routes``)."""
    access: KindAccess
    """What the kind's roles may do on the management cluster and on a target cluster."""


KINDS: tuple[ServedKind, ...] = (
    ServedKind(
        mariadbdatabase.IDENTITY,
        mariadbdatabase_crd.build_crd,
        "tasks.mariadbdatabase",
        "watcher.mariadbdatabase",
        mariadbdatabase_rbac.ACCESS,
    ),
    ServedKind(
        mysqldatabase.IDENTITY,
        mysqldatabase_crd.build_crd,
        "tasks.mysqldatabase",
        "watcher.mysqldatabase",
        mysqldatabase_rbac.ACCESS,
    ),
)


def task_modules() -> tuple[str, ...]:
    """The task module of every served kind, in registry order."""
    return tuple(kind.task_module for kind in KINDS)


def route_modules() -> tuple[str, ...]:
    """The route module of every served kind, in registry order."""
    return tuple(kind.route_module for kind in KINDS)


def build_crds() -> dict[str, dict[str, Any]]:
    """Return every CRD tenantdb serves, keyed by its metadata.name."""
    crds = (kind.build_crd() for kind in KINDS)
    return {crd["metadata"]["name"]: crd for crd in crds}
