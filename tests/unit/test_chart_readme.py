"""charts/tenantdb/README.md and values.schema.json describe every value of values.yaml, as
`make gen` renders them."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from tests.unit.tools import load_tool

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> ModuleType:
    return load_tool("gen_chart_readme")


def test_the_committed_table_is_what_values_yaml_renders() -> None:
    generator = _generator()
    current = generator.README.read_text()
    assert generator.rendered_readme(current) == current, "the chart README is stale; make gen"


def test_the_committed_schema_carries_each_value_s_description() -> None:
    generator = _generator()
    current = generator.SCHEMA.read_text()
    assert generator.described_schema(current) == current, "the values schema is stale; make gen"
    schema = json.loads(current)
    for row in generator.rows():
        node = schema
        for key in row.path.split("."):
            node = node["properties"][key]
        assert node["description"] == row.description, row.path


def test_a_value_the_schema_does_not_know_stops_the_generator() -> None:
    generator = _generator()
    schema = json.loads(generator.SCHEMA.read_text())
    del schema["properties"]["metrics"]["properties"]["prometheusRule"]["properties"]["alerts"]
    with pytest.raises(SystemExit, match=r"metrics\.prometheusRule\.alerts"):
        generator.described_schema(json.dumps(schema))


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
