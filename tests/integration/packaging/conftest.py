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


CREDENTIALS: Mapping[str, Any] = {"redis": {"auth": {"passwordSecret": "tenantdb-redis"}}}
"""What every installer adds to the defaults: the chart renders nothing for a Redis without
credentials (``test_chart.py`` pins that refusal)."""


def merged(base: Mapping[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` over ``base``, mappings merged key by key as Helm merges value files."""
    out = dict(base)
    for key, value in values.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out


def render(
    chart: Chart, values: Mapping[str, Any] | None = None, *, credentials: bool = True
) -> list[Manifest]:
    """Render the chart's templates and return every object, in template order: for these
    values over the Redis credentials every install gives, unless told to leave them out."""
    given = merged(CREDENTIALS, values or {}) if credentials else dict(values or {})
    return manifests(chart.render(given, name=RELEASE, namespace=NAMESPACE))


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
