"""The registry of the CRDs tenantdb serves: one builder per order kind. Pure.

``make gen`` renders every entry into the chart; a kind joins by adding its builder here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tenantdb.core.mariadbdatabase import crd as mariadbdatabase

CRD_BUILDERS: tuple[Callable[[], dict[str, Any]], ...] = (mariadbdatabase.build_crd,)
"""Each builder returns one CustomResourceDefinition as a plain dict."""


def build_crds() -> dict[str, dict[str, Any]]:
    """Return every CRD tenantdb serves, keyed by its metadata.name."""
    crds = (build() for build in CRD_BUILDERS)
    return {crd["metadata"]["name"]: crd for crd in crds}
