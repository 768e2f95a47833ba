"""The committed CRD files are exactly what `make gen` renders from the core."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from tests.unit.tools import load_tool

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> ModuleType:
    return load_tool("gen_crds")


RENDERED: dict[Path, str] = _generator().render_crds()


@pytest.mark.parametrize(
    "path", [pytest.param(p, id=str(p.relative_to(ROOT))) for p in sorted(RENDERED)]
)
def test_committed_crd_matches_the_generator(path: Path) -> None:
    assert path.exists(), f"{path.relative_to(ROOT)} is missing; run make gen"
    assert path.read_text() == RENDERED[path], f"{path.relative_to(ROOT)} is stale; run make gen"


def test_generator_check_mode_reports_nothing_stale() -> None:
    assert _generator().main(["--check"]) == 0
