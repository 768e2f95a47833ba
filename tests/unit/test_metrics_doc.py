"""docs/metrics.md lists exactly the metrics the code registers, as `make gen` renders them."""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType

from tests.unit.tools import load_tool

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> ModuleType:
    return load_tool("gen_metrics_doc")


def test_the_committed_table_is_what_the_registry_renders() -> None:
    generator = _generator()
    current = generator.DOC.read_text()
    assert generator.rendered_doc(current) == current, "docs/metrics.md is stale; run make gen"


def test_every_metric_the_readme_and_the_runbooks_name_exists() -> None:
    table = _generator().render_table()
    exported = set(re.findall(r"^\| `([a-z0-9_]+)` \|", table, re.MULTILINE))
    assert "tenantdb_build_info" in exported
    for doc in ("README.md", "docs/operations.md"):
        named = set(
            re.findall(
                r"\b((?:tenantdb|c5c3_operator)_[a-z0-9_]*[a-z0-9])\b", (ROOT / doc).read_text()
            )
        )
        # A histogram's samples carry _bucket, _sum and _count after its name.
        unknown = {
            n for n in named
            if n not in exported and re.sub(r"_(bucket|sum|count)$", "", n) not in exported
        }  # fmt: skip
        assert unknown == set(), f"{doc} names metrics the code does not export"
