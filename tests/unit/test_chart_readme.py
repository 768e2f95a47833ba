"""charts/tenantdb/README.md describes every value of values.yaml, as `make gen` renders it."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import yaml

from tests.unit.tools import load_tool

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> ModuleType:
    return load_tool("gen_chart_readme")


def test_the_committed_table_is_what_values_yaml_renders() -> None:
    generator = _generator()
    current = generator.README.read_text()
    assert generator.rendered_readme(current) == current, "the chart README is stale; make gen"


def test_every_value_has_a_description() -> None:
    rows = _generator().rows()
    assert [r.path for r in rows if not r.description] == []
    documented = [tuple(r.path.split(".")) for r in rows]

    def leaves(value: object, path: tuple[str, ...]) -> list[tuple[str, ...]]:
        if isinstance(value, dict) and value:
            return [leaf for k, v in value.items() for leaf in leaves(v, (*path, str(k)))]
        return [path]

    values = yaml.safe_load((ROOT / "charts" / "tenantdb" / "values.yaml").read_text())
    undocumented = [
        ".".join(leaf)
        for leaf in leaves(values, ())
        if not any(leaf[: len(d)] == d for d in documented)
    ]
    assert undocumented == []
