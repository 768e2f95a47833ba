"""Shared helpers of the packaging tests: render the Helm chart with the real Helm engine, and
check a command line or an environment variable against what tenantdb actually accepts.

Nothing here starts a container or talks to a cluster; the chart is rendered offline.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from helm_python import Chart

from devstack.chart import manifests
from tenantdb.settings import Settings

REPO_ROOT = Path(__file__).resolve().parents[3]
CHART_DIR = REPO_ROOT / "charts" / "tenantdb"
RELEASE = "tdb"
NAMESPACE = "tenantdb-system"

Manifest = dict[str, Any]


@pytest.fixture(scope="session")
def chart() -> Iterator[Chart]:
    """The chart, loaded once."""
    loaded = Chart.load(CHART_DIR)
    yield loaded
    loaded.close()


def render(chart: Chart, values: Mapping[str, Any] | None = None) -> list[Manifest]:
    """Render the chart's templates and return every object, in template order."""
    return manifests(chart.render(dict(values or {}), name=RELEASE, namespace=NAMESPACE))


def by_kind(objects: list[Manifest], kind: str) -> list[Manifest]:
    """The objects of one kind."""
    return [obj for obj in objects if obj["kind"] == kind]


def named(objects: list[Manifest], kind: str, name: str) -> Manifest:
    """The one object of a kind and name."""
    found = [obj for obj in by_kind(objects, kind) if obj["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name}, found {len(found)}"
    return found[0]


def known_settings() -> set[str]:
    """Every TENANTDB_* variable tenantdb's settings read."""
    prefix = str(Settings.model_config.get("env_prefix", ""))
    return {f"{prefix}{name}".upper() for name in Settings.model_fields}


def tenantdb_accepts(argv: list[str]) -> bool:
    """True when the `tenantdb` command parses these arguments (nothing is run)."""
    from tenantdb.cli import _build_parser

    try:
        _build_parser().parse_args(argv)
    except SystemExit as exc:
        return exc.code == 0
    return True
