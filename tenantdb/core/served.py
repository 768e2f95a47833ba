"""The order kinds tenantdb serves: each kind's identity and the builder of its CRD. Pure.

A kind joins by adding one entry here. ``make gen`` renders every CRD into the chart, and the
CLI registers the identities (``tenantdb.ops.load_kinds``) so it knows each kind from its keys.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tenantdb.core.kinds import KindIdentity
from tenantdb.core.mariadbdatabase import crd as mariadbdatabase_crd
from tenantdb.core.mariadbdatabase import naming as mariadbdatabase
from tenantdb.core.mysqldatabase import crd as mysqldatabase_crd
from tenantdb.core.mysqldatabase import naming as mysqldatabase


@dataclass(frozen=True, slots=True)
class ServedKind:
    """One order kind: its identity and its CRD."""

    identity: KindIdentity
    build_crd: Callable[[], dict[str, Any]]


SERVED_KINDS: tuple[ServedKind, ...] = (
    ServedKind(mariadbdatabase.IDENTITY, mariadbdatabase_crd.build_crd),
    ServedKind(mysqldatabase.IDENTITY, mysqldatabase_crd.build_crd),
)


def build_crds() -> dict[str, dict[str, Any]]:
    """Return every CRD tenantdb serves, keyed by its metadata.name."""
    crds = (served.build_crd() for served in SERVED_KINDS)
    return {crd["metadata"]["name"]: crd for crd in crds}
